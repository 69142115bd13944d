//! Checker 1: one linear committed history — any two replicas that committed
//! op n hold the same prepare at n — and no (client, request) committed twice.

use std::collections::BTreeMap;

use strand_wire::{CommandHeader, PrepareHeader};

use super::Violation;

/// What the history holds at one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommittedOp {
    /// The prepare's checksum.
    pub checksum: u32,
    /// Its client and request (0, 0 for none).
    pub client: u128,
    /// The request number.
    pub request: u64,
    /// Its first record offset.
    pub offset_base: u64,
    /// Its record count.
    pub record_count: u32,
}

impl CommittedOp {
    /// What `header` commits.
    pub fn of(header: &PrepareHeader) -> CommittedOp {
        CommittedOp {
            checksum: header.checksum(),
            client: header.client.get(),
            request: header.request.get(),
            offset_base: header.offset_base.get(),
            record_count: header.record_count.get(),
        }
    }
}

/// The committed history seen across every replica and restart.
#[derive(Debug, Default)]
pub struct LinearHistory {
    ops: BTreeMap<u64, CommittedOp>,
    requests: BTreeMap<(u128, u64), u64>,
    /// The op of each committed batch, by its first offset.
    batches: BTreeMap<u64, u64>,
}

impl LinearHistory {
    /// Records that `replica` committed `header`.
    pub fn commit(&mut self, replica: u8, header: &PrepareHeader) -> Result<(), Violation> {
        let op = header.op.get();
        let committed = CommittedOp::of(header);
        match self.ops.get(&op) {
            Some(existing) if *existing != committed => {
                return Err(Violation {
                    checker: "1 linear history",
                    detail: format!(
                        "replica {replica} committed {committed:?} at op {op}, history has {existing:?}"
                    ),
                });
            }
            Some(_) => return Ok(()),
            None => {}
        }
        self.ops.insert(op, committed);
        if committed.record_count > 0 {
            self.batches.insert(committed.offset_base, op);
        }
        if committed.client != 0 {
            if let Some(first) = self
                .requests
                .insert((committed.client, committed.request), op)
            {
                if first != op {
                    return Err(Violation {
                        checker: "2 acked stays",
                        detail: format!(
                            "client {} request {} committed twice, at ops {first} and {op}",
                            committed.client, committed.request
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// The committed prepare at `op`, if any replica committed it.
    pub fn get(&self, op: u64) -> Option<&CommittedOp> {
        self.ops.get(&op)
    }

    /// The committed op whose batch starts at record offset `offset_base`.
    pub fn at_offset(&self, offset_base: u64) -> Option<&CommittedOp> {
        self.batches
            .get(&offset_base)
            .and_then(|op| self.ops.get(op))
    }

    /// The highest committed op.
    pub fn head(&self) -> u64 {
        self.ops.keys().next_back().copied().unwrap_or(0)
    }

    /// The record offset end of the committed history.
    pub fn offset_end(&self) -> u64 {
        self.ops
            .values()
            .map(|op| op.offset_base + u64::from(op.record_count))
            .max()
            .unwrap_or(0)
    }
}
