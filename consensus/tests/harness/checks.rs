//! What the tests assert of the group: the replies acked, what each
//! replica's storage holds, one history of commits, and cursor logs that
//! agree.

use std::collections::BTreeMap;

use strand_consensus::*;
use strand_wire::ops::ProduceReply;
use strand_wire::*;

use super::Cluster;

impl Cluster {
    /// Ok produce replies by (client, request): (op, base offset, count).
    pub fn acked(&self) -> BTreeMap<(u128, u64), (u64, u64, u32)> {
        let mut acked = BTreeMap::new();
        for reply in &self.replies {
            let header = reply.header();
            if header.result() != ResultCode::Ok || header.operation() != Operation::Produce {
                continue;
            }
            let body = ProduceReply::from_bytes(reply.body()).expect("produce reply");
            let value = (header.op.get(), body.offset_base, body.record_count);
            let key = (header.client.get(), header.request.get());
            if let Some(previous) = acked.insert(key, value) {
                assert_eq!(
                    previous, value,
                    "a request acked twice with different offsets"
                );
            }
        }
        acked
    }

    /// The committed prepare at `op` on `replica` (from its storage).
    pub fn stored(&self, replica: u8, op: u64) -> Option<&Msg<PrepareHeader>> {
        self.storage[usize::from(replica)]
            .log
            .get((op as usize).checked_sub(1)?)
    }

    /// Asserts no replica committed two prepares at one op, and no two
    /// replicas committed different prepares at one op.
    pub fn assert_one_history(&self) {
        assert!(self.conflicts.is_empty(), "{:?}", self.conflicts);
        let mut canonical: BTreeMap<u64, u32> = BTreeMap::new();
        for committed in &self.committed {
            for (op, checksum) in committed {
                let first = canonical.entry(*op).or_insert(*checksum);
                assert_eq!(
                    first, checksum,
                    "two replicas committed different prepares at op {op}"
                );
            }
        }
    }

    /// Asserts every acked produce is in `replica`'s log at its acked op and offsets.
    pub fn assert_acked_in_log(&self, replica: u8) {
        for ((client, request), (op, base, count)) in self.acked() {
            let prepare = self.stored(replica, op).unwrap_or_else(|| {
                panic!("replica {replica} lacks acked op {op} (client {client} request {request})")
            });
            let header = prepare.header();
            assert_eq!(
                (
                    header.client.get(),
                    header.request.get(),
                    header.offset_base.get(),
                    header.record_count.get()
                ),
                (client, request, base, count),
                "replica {replica}: op {op} is not the acked prepare"
            );
        }
    }

    /// Events of `replica` matching `pick`.
    pub fn events_of<T>(&self, replica: u8, pick: impl Fn(&Event) -> Option<T>) -> Vec<T> {
        self.events
            .iter()
            .filter(|(index, _)| *index == replica)
            .filter_map(|(_, event)| pick(event))
            .collect()
    }

    /// Asserts the cursor logs of every live replica agree wherever two of
    /// them both hold an event: each is a prefix of the longest.
    pub fn assert_cursor_logs_agree(&self) {
        let live: Vec<u8> = (0..self.count()).filter(|index| self.up(*index)).collect();
        for a in &live {
            for b in &live {
                let left = &self.storage[usize::from(*a)].cursor_events;
                let right = &self.storage[usize::from(*b)].cursor_events;
                let common = left.len().min(right.len());
                assert_eq!(
                    left[..common],
                    right[..common],
                    "cursor logs of replicas {a} and {b} differ below {common}"
                );
            }
        }
    }

    /// Whether `replica` has ever sent a message of `command` since the mark.
    pub fn sent_prepare_ok(&self, from: u8) -> bool {
        self.network
            .iter()
            .any(|(sender, _, message)| *sender == from && message.command() == Command::PrepareOk)
    }
}
