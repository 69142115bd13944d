//! `inspect` only: the simulator's checkers look inside a group (its
//! replica's journal and durable state, its partition's superblock and
//! cursor log) to judge what the host did. Nothing else may: a node reads
//! and feeds a group through the host's own methods alone, which a build
//! without this feature enforces.

use strand_consensus::Replica;
use strand_partition::{Disk, Partition, PartitionError};
use strand_wire::ops::CursorEvent;

use super::GroupHost;
use crate::machine::Machine;

impl<D: Disk> GroupHost<D> {
    /// The replica, to look at.
    pub fn inspect_replica(&self) -> &Replica<Machine> {
        &self.replica
    }

    /// The partition, to look at, while it is open.
    pub fn inspect_partition(&self) -> Option<&Partition<D>> {
        self.partition.as_ref()
    }

    /// The partition's cursor events `from..to` as its log holds them.
    pub fn inspect_cursor_events(
        &mut self,
        from: u64,
        to: u64,
    ) -> Result<Vec<CursorEvent>, PartitionError> {
        self.partition_mut().read_cursor_events(from, to)
    }
}
