//! [`Recovery`]: what opening a partition found, in the terms consensus needs
//! to build its `Recovered` (field names match consensus's), plus what the
//! operator should know (damage, rebuilt indexes, torn bytes cut).

use strand_wire::{ConfirmPolicy, Durability, PrepareHeader};

use crate::cursors::CursorFindings;
use crate::log_recovery::{IndexRebuild, SegmentDamage};
use crate::superblock::DurableFields;

/// What opening a partition found. See the module docs.
#[derive(Debug, Clone)]
pub struct Recovery {
    /// Nothing was on disk: a brand-new replica (consensus's `fresh`).
    pub fresh: bool,
    /// The log was read back from disk (the opposite of `fresh`): an input of
    /// consensus's `trusted`.
    pub recovered_from_disk: bool,
    /// The last run ended with a clean shutdown (every write synced, the mark
    /// written): the other input of `trusted`.
    pub clean_shutdown: bool,
    /// That clean shutdown stopped a replica serving in its view
    /// ([`crate::Partition::close_in_view`]): consensus may resume it there.
    pub stopped_in_view: bool,
    /// View, log_view, commit and history starts (consensus's `state`).
    pub durable: DurableFields,
    /// The replica index the superblock names.
    pub replica: u8,
    /// The assignment epoch that removed this replica from its group (0: a
    /// member): a retired replica's data is kept for operators, never served.
    pub retired_epoch: u32,
    /// The partition's durability policy.
    pub durability: Durability,
    /// The partition's confirm policy.
    pub confirm: ConfirmPolicy,
    /// The sequence of the superblock that was read (before the open wrote
    /// any: a damaged tail's mark, the unclean open's rewrite).
    pub superblock_sequence: u64,
    /// The durable log head the superblock recorded.
    pub op_checkpoint: u64,
    /// Headers of the log's last ops, ascending, ending at the last readable
    /// op: every readable op above the commit and up to
    /// `headers_committed_max` at or below it (consensus's `headers`). A
    /// damaged op whose header is still readable is included (and faulty).
    pub headers: Vec<PrepareHeader>,
    /// Ops whose entries are damaged or missing, ascending (consensus's
    /// `faulty`): damaged frames anywhere, ops lost from a sealed segment, ops
    /// above the log's end up to `op_checkpoint`.
    pub faulty: Vec<u64>,
    /// The log's head op (the last op with an entry, damaged or not).
    pub op: u64,
    /// The first retained op.
    pub head_op: u64,
    /// The first retained record offset.
    pub head_offset: u64,
    /// One past the log's last record offset (the high watermark is the caller's).
    pub offset_end: u64,
    /// The cursor event log's length (consensus's `cursor_tail`).
    pub cursor_tail: u64,
    /// The log is a bare prefix after a quarantine: consensus's
    /// `awaiting_state_transfer`.
    pub awaiting_state_transfer: bool,
    /// Torn bytes cut from the last segment.
    pub torn_bytes_cut: u64,
    /// The log ended in damaged bytes (not zeros) from this op on: a write a
    /// crash cut short, or a durable entry damaged since. They were cut after
    /// the superblock marked them as maybe acked, so the log is untrusted
    /// until a view change settles it and its peers supply them again.
    pub damaged_tail_from: Option<u64>,
    /// The superblock's checkpoint or the durable mark named ops past the
    /// log's end, from this one on: the disk lost writes the replica may have
    /// acknowledged (they are faulty, repaired from peers).
    pub lost_tail_from: Option<u64>,
    /// Opened after a write or sync failed earlier in this process
    /// (`PartitionConfig::drop_unsynced`): the ops from this one on were past
    /// the durable checkpoint and were cut, marked as maybe acked first.
    pub unsynced_dropped_from: Option<u64>,
    /// Damaged regions found.
    pub damage: Vec<SegmentDamage>,
    /// Indexes rebuilt from their segments.
    pub indexes_rebuilt: Vec<IndexRebuild>,
    /// What the cursor log and snapshot looked like.
    pub cursors: CursorFindings,
}

impl Recovery {
    /// Consensus's `trusted`: false when the log came back from disk under
    /// `replicated` durability without a clean-shutdown mark (it may lack ops
    /// it acked while they were only queued).
    ///
    /// `consumer_offset_durability` is not an input, where reference B
    /// keeps the plain merge only if both policies are `persisted`: cursor
    /// events are not ops of the log, no PrepareOk waits for them, and a
    /// view change counts them in no quorum and no nack (their tail only
    /// breaks ties), so a cursor log that lost unsynced events cannot make
    /// a view drop a confirmed record. See `docs/reference-points.md`.
    pub fn log_trusted(&self) -> bool {
        !(self.recovered_from_disk
            && self.durability == Durability::Replicated
            && !self.clean_shutdown)
    }
}
