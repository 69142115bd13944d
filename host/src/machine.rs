//! The state machine a group's replica commits into: the metadata plane's
//! catalog (group 0) or a partition's record log (every other group); and
//! how the catalog is rebuilt from the log when the metadata plane opens.

use std::collections::BTreeMap;

use bytes::Bytes;
use strand_consensus::{RecordLog, Recovered, Replica, StateMachine};
use strand_partition::{Disk, Partition, PartitionError};
use strand_wire::{CommandHeader, Msg, PrepareHeader, ResultCode};

use crate::catalog::Catalog;

/// One group's state machine.
#[derive(Debug, Clone)]
pub enum Machine {
    /// Group 0: streams, topics and placements.
    Catalog {
        /// The catalog.
        catalog: Catalog,
        /// Bodies of uncommitted ops found in the log at open.
        recovered: RecoveredBodies,
    },
    /// A partition: the committed offset end.
    Records(RecordLog),
}

impl Machine {
    /// The machine of the metadata plane, over an empty catalog of `nodes`.
    pub fn catalog_of(nodes: Vec<u32>) -> Machine {
        Machine::catalog_from(Catalog::new(nodes))
    }

    /// The machine of the metadata plane over `catalog` (read from a
    /// snapshot).
    pub fn catalog_from(catalog: Catalog) -> Machine {
        Machine::Catalog {
            catalog,
            recovered: RecoveredBodies::default(),
        }
    }

    /// The catalog, for group 0.
    pub fn catalog(&self) -> Option<&Catalog> {
        match self {
            Machine::Catalog { catalog, .. } => Some(catalog),
            Machine::Records(_) => None,
        }
    }

    /// One past the last committed record offset (0 for the catalog).
    pub fn high_watermark(&self) -> u64 {
        match self {
            Machine::Catalog { .. } => 0,
            Machine::Records(records) => records.offset_end,
        }
    }
}

/// The metadata plane's uncommitted prepares read from its log when the
/// node opens it. Consensus recovers only their headers, yet may commit them
/// later (after a view change adopts them); the catalog then needs their
/// bodies, and these are they. A body is used only for the very prepare it
/// was read with (same op and header checksum).
#[derive(Debug, Clone, Default)]
pub struct RecoveredBodies {
    by_op: BTreeMap<u64, Msg<PrepareHeader>>,
}

impl RecoveredBodies {
    /// Keeps a prepare read from the log.
    pub fn insert(&mut self, prepare: Msg<PrepareHeader>) {
        let op = prepare.header().op.get();
        assert!(op > 0, "op 0 is the root, never a prepare");
        let earlier = self.by_op.insert(op, prepare);
        assert!(earlier.is_none(), "the body of op {op} read twice");
    }

    /// How many bodies are kept.
    pub fn len(&self) -> usize {
        self.by_op.len()
    }

    /// Whether none are kept.
    pub fn is_empty(&self) -> bool {
        self.by_op.is_empty()
    }

    /// The body of committed `header`'s prepare if it is the one read from
    /// the log; forgets every kept op up to `header`'s.
    fn take(&mut self, header: &PrepareHeader) -> Option<Bytes> {
        let op = header.op.get();
        let later = self.by_op.split_off(&(op + 1));
        let through = std::mem::replace(&mut self.by_op, later);
        let prepare = through.into_values().next_back()?;
        let same =
            prepare.header().op.get() == op && prepare.header().checksum() == header.checksum();
        same.then(|| prepare.body().clone())
    }
}

impl StateMachine for Machine {
    fn commit(&mut self, header: &PrepareHeader, body: Option<&Bytes>) -> (ResultCode, Bytes) {
        match self {
            Machine::Catalog { catalog, recovered } => {
                let from_log = recovered.take(header);
                catalog.commit(header, body.or(from_log.as_ref()))
            }
            Machine::Records(records) => records.commit(header, body),
        }
    }

    fn needs_bodies(&self) -> bool {
        match self {
            Machine::Catalog { catalog, .. } => catalog.needs_bodies(),
            Machine::Records(records) => records.needs_bodies(),
        }
    }

    fn restore(&mut self, head: Option<&PrepareHeader>) {
        match self {
            // The catalog is rebuilt by replaying the committed log before the
            // replica opens (see `group::open_catalog`).
            Machine::Catalog { .. } => {}
            Machine::Records(records) => records.restore(head),
        }
    }

    fn restore_retained(&mut self, offset_end: u64) {
        if let Machine::Records(records) = self {
            records.restore_retained(offset_end);
        }
    }
}

// ----- the metadata plane's open path -------------------------------------

/// Reads the metadata ops above the commit number from the log into the
/// catalog machine: after a crash, consensus knows their headers only, and
/// committing one later needs its body. An op that cannot be read is left
/// out (consensus repairs it from a peer, body included).
pub fn keep_uncommitted_bodies<D: Disk>(
    replica: &mut Replica<Machine>,
    partition: &mut Partition<D>,
) {
    let (commit, op_head) = (replica.commit(), replica.op());
    let Machine::Catalog { recovered, .. } = replica.machine_mut() else {
        panic!("only the metadata plane replays its bodies");
    };
    assert!(recovered.is_empty(), "bodies are read once, at open");
    for op in commit + 1..=op_head {
        match partition.read_prepare(op) {
            Ok(Some(prepare)) => recovered.insert(prepare),
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(op, %error, "host: an uncommitted metadata op is unreadable")
            }
        }
    }
    tracing::debug!(
        commit,
        op_head,
        kept = recovered.len(),
        "host: uncommitted metadata bodies"
    );
}

/// Before the metadata replica opens: a committed op whose entry is damaged
/// (its frame fails its checksum, or is missing) cannot be applied, so the
/// catalog could not be rebuilt past it. The replica opens instead with its
/// commit number just below the first such op and every readable header
/// above in its journal: the catalog is rebuilt up to there, consensus
/// repairs the damaged op from a peer (it is listed faulty: never nacked)
/// and commits it and the rest again as the group's commit number reaches
/// it. Their bodies are read back by [`keep_uncommitted_bodies`]. Ops at or
/// below `snapshot_op` (the snapshot the catalog starts from) are never
/// applied again, so their damage does not matter here. Returns the op
/// rewound to, if any.
pub fn rewind_below_damage<D: Disk>(
    recovered: &mut Recovered,
    partition: &mut Partition<D>,
    snapshot_op: u64,
) -> Result<Option<u64>, PartitionError> {
    let commit = recovered.state.commit;
    let damaged = |op: &u64| *op > snapshot_op && *op <= commit;
    let Some(first) = recovered.faulty.iter().copied().find(damaged) else {
        return Ok(None);
    };
    assert!(first >= 1, "op 0 is never logged");
    tracing::error!(
        op = first,
        commit,
        "host: a committed metadata op is damaged; rebuilding the catalog below it and \
         repairing it from a peer"
    );
    let mut headers: BTreeMap<u64, PrepareHeader> = recovered
        .headers
        .iter()
        .map(|header| (header.op.get(), *header))
        .collect();
    if first < recovered.log_head {
        for header in partition.read_headers(first, recovered.log_head)? {
            headers.insert(header.op.get(), header);
        }
    }
    recovered.headers = headers.into_values().collect();
    recovered.state.commit = first - 1;
    Ok(Some(first - 1))
}

/// The catalog the metadata plane opens with and the op it reflects: the
/// newest readable snapshot that the log reaches back to and that the
/// persisted commit covers (a snapshot is taken only at a persisted
/// commit, so the newer copy fails this only when the superblock lost its
/// newest copy), else an empty catalog of `nodes` when the log still starts
/// at op 1. The committed ops after it are replayed by [`replay_catalog`].
pub fn catalog_at_open<D: Disk>(
    nodes: Vec<u32>,
    commit: u64,
    partition: &mut Partition<D>,
) -> Result<(Catalog, u64), PartitionError> {
    let head_op = partition.head_op();
    for snapshot in partition.machine_snapshots()? {
        if snapshot.op + 1 < head_op || snapshot.op > commit {
            tracing::warn!(
                op = snapshot.op,
                head_op,
                commit,
                "host: a catalog snapshot does not fit the log; trying an older one"
            );
            continue;
        }
        match crate::catalog_image::decode(&snapshot.image) {
            Ok(catalog) => return Ok((catalog, snapshot.op)),
            Err(error) => tracing::warn!(
                op = snapshot.op,
                %error,
                "host: a catalog snapshot does not decode; trying an older one"
            ),
        }
    }
    if head_op > 1 {
        return Err(PartitionError::MachineSnapshotInvalid {
            reason: format!(
                "the metadata log starts at op {head_op} and no catalog snapshot it reaches back \
                 to is readable: the catalog cannot be rebuilt here"
            ),
        });
    }
    Ok((Catalog::new(nodes), 0))
}

/// After a state transfer installed a metadata log (the replica's commit
/// is now its frontier): the catalog rebuilt from the snapshot it carried,
/// or from nothing when it starts at op 1, and the ops after it.
pub fn rebuild_catalog<D: Disk>(
    replica: &mut Replica<Machine>,
    partition: &mut Partition<D>,
) -> Result<(), PartitionError> {
    let Some(catalog) = replica.machine().catalog() else {
        panic!("only the metadata plane rebuilds a catalog");
    };
    let nodes = catalog.node_ids().to_vec();
    let (catalog, snapshot_op) = catalog_at_open(nodes, replica.commit(), partition)?;
    *replica.machine_mut() = Machine::catalog_from(catalog);
    replay_catalog(replica, partition, snapshot_op)
}

/// Rebuilds the catalog by applying every committed metadata op after
/// `snapshot_op` (the op the catalog it starts from reflects) in order.
pub fn replay_catalog<D: Disk>(
    replica: &mut Replica<Machine>,
    partition: &mut Partition<D>,
    snapshot_op: u64,
) -> Result<(), PartitionError> {
    let commit = replica.commit();
    for op in snapshot_op + 1..=commit {
        let Some(prepare) = partition.read_prepare(op)? else {
            return Err(PartitionError::EntryDamaged {
                op,
                reason: "a committed metadata op is unreadable; the catalog cannot be rebuilt"
                    .to_owned(),
            });
        };
        let (header, body) = prepare.into_parts();
        replica.machine_mut().commit(&header, Some(&body));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::Operation;
    use strand_wire::ops::CreateStream;
    use strand_wire::{Body, Msg};

    fn create_stream(op: u64, name: &str, view: u32) -> Msg<PrepareHeader> {
        let mut header = PrepareHeader::new(0, 0, strand_wire::ViewId::new(0, view), 0);
        header.op.set(op);
        header.client.set(9);
        header.request.set(op);
        header.operation = Operation::CreateStream as u8;
        let body = Bytes::from(CreateStream { name: name.into() }.to_vec());
        Msg::new(header, body)
    }

    #[test]
    fn a_recovered_body_commits_only_the_prepare_it_was_read_with() {
        let mut machine = Machine::catalog_of(vec![1, 2, 3]);
        let Machine::Catalog { recovered, .. } = &mut machine else {
            unreachable!()
        };
        recovered.insert(create_stream(1, "a", 0));
        recovered.insert(create_stream(2, "b", 0));
        recovered.insert(create_stream(3, "c", 0));
        // Op 1 as read from the log: its body is used.
        let (result, _) = machine.commit(create_stream(1, "a", 0).header(), None);
        assert_eq!(result, ResultCode::Ok);
        assert!(
            machine
                .catalog()
                .expect("catalog")
                .streams
                .contains_key("a")
        );
        // A view change replaced op 2 (another prepare, its body in memory):
        // the stale body read from the log is dropped, never applied.
        let replaced = create_stream(2, "other", 1);
        let (result, _) = machine.commit(replaced.header(), Some(replaced.body()));
        assert_eq!(result, ResultCode::Ok);
        let streams = &machine.catalog().expect("catalog").streams;
        assert!(streams.contains_key("other") && !streams.contains_key("b"));
        let Machine::Catalog { recovered, .. } = &machine else {
            unreachable!()
        };
        assert_eq!(recovered.len(), 1, "only op 3 is left");
    }

    #[test]
    #[should_panic(expected = "committed without its body")]
    fn a_different_prepare_at_a_recovered_op_gets_no_body() {
        let mut machine = Machine::catalog_of(vec![1]);
        let Machine::Catalog { recovered, .. } = &mut machine else {
            unreachable!()
        };
        recovered.insert(create_stream(1, "a", 0));
        machine.commit(create_stream(1, "b", 1).header(), None);
    }
}
