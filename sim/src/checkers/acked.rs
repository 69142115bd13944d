//! Checker 2: every batch acknowledged to a client stays in the committed
//! history forever, at the op and offsets it was acknowledged with.

use std::collections::BTreeMap;

use super::Violation;
use super::history::{CommittedOp, LinearHistory};
use crate::client::Ack;

/// Acknowledged produces by op.
#[derive(Debug, Default)]
pub struct AckedStays {
    by_op: BTreeMap<u64, Ack>,
}

impl AckedStays {
    /// A client was told `ack`.
    pub fn acked(&mut self, ack: Ack, history: &LinearHistory) -> Result<(), Violation> {
        if let Some(previous) = self.by_op.insert(ack.op, ack) {
            if previous != ack {
                return Err(violation(format!(
                    "op {} acked twice: {previous:?} and {ack:?}",
                    ack.op
                )));
            }
        }
        match history.get(ack.op) {
            Some(committed) => matches(&ack, committed),
            None => Ok(()),
        }
    }

    /// A replica committed `committed` at `op`.
    pub fn committed(&self, op: u64, committed: &CommittedOp) -> Result<(), Violation> {
        match self.by_op.get(&op) {
            Some(ack) => matches(ack, committed),
            None => Ok(()),
        }
    }

    /// Every acked op at or below `head` is in `history` (called once the
    /// committed history has passed it).
    pub fn all_present(&self, history: &LinearHistory) -> Result<(), Violation> {
        let head = history.head();
        for (op, ack) in self.by_op.range(..=head) {
            match history.get(*op) {
                Some(committed) => matches(ack, committed)?,
                None => {
                    return Err(violation(format!(
                        "acked op {op} ({ack:?}) is not in the committed history"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Number of acks seen.
    pub fn len(&self) -> usize {
        self.by_op.len()
    }

    /// True when nothing was acked.
    pub fn is_empty(&self) -> bool {
        self.by_op.is_empty()
    }
}

fn matches(ack: &Ack, committed: &CommittedOp) -> Result<(), Violation> {
    let same = committed.client == ack.client
        && committed.request == ack.request
        && committed.offset_base == ack.offset_base
        && committed.record_count == ack.record_count;
    if same {
        Ok(())
    } else {
        Err(violation(format!(
            "acked {ack:?} but op {} committed {committed:?}",
            ack.op
        )))
    }
}

fn violation(detail: String) -> Violation {
    Violation {
        checker: "2 acked stays",
        detail,
    }
}
