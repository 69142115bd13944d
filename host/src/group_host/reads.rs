//! What a group's owner reads of it: the replica's progress (for status
//! reports and routing), and the partition's records and cursors under the
//! rule that a reader sees committed records only. The simulator reads
//! through the same calls, so the rule is checked where it is kept.

use strand_consensus::epoch::Membership;
use strand_consensus::{HistoryStart, Status, WaitReason};
use strand_partition::{Disk, FetchedBatch, PartitionError};
use strand_wire::{REPLICAS_MAX, ViewId};

use super::GroupHost;
use crate::catalog::Catalog;

/// The replica's standing, copied out when asked: what a status report,
/// a redirect or a log line says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// This replica's slot in the group.
    pub slot: u8,
    /// The view it is in (or changes to).
    pub view: ViewId,
    /// The view its log was last settled in.
    pub log_view: ViewId,
    /// Normal, view change, recovering, awaiting a transfer, retired.
    pub status: Status,
    /// The slot of the view's primary.
    pub primary: u8,
    /// This replica is the view's primary (serving or not yet).
    pub is_primary: bool,
    /// This replica serves as primary: it takes requests now.
    pub serving_primary: bool,
    /// The newest op in its log.
    pub op: u64,
    /// The newest op it committed.
    pub commit: u64,
    /// The newest op it knows was committed somewhere.
    pub commit_max: u64,
    /// Whether its log may vouch for what it acknowledged.
    pub trusted: bool,
    /// The newest assignment epoch the group started.
    pub started_epoch: u32,
    /// The membership in effect: the log's epoch (an in-place change moves
    /// it without a view change).
    pub membership: Membership,
    /// The newest membership it knows (joining members included).
    pub newest: Membership,
    /// As primary, the newest op each slot acknowledged; zeros otherwise.
    pub acks: [u64; REPLICAS_MAX as usize],
    /// Why its view change waits and for whom (a bitset of slots).
    pub attention: Option<(WaitReason, u32)>,
    /// The latest history start its view change knows.
    pub awaited_start: Option<HistoryStart>,
}

/// Where a partition's records stand for a reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadBounds {
    /// The first offset the partition retains.
    pub log_start: u64,
    /// One past the last committed record: a reader sees records below it.
    pub high_watermark: u64,
    /// One past the last record the log holds, committed or not.
    pub log_end: u64,
}

impl ReadBounds {
    /// Whether a read at `offset` is refused as out of range: below what is
    /// retained, or past both the commit and the log (an offset past the
    /// high watermark but within the log names records the previous primary
    /// committed, which this one commits once a backup acks its view: a
    /// reader waits for them).
    pub fn out_of_range(&self, offset: u64) -> bool {
        offset < self.log_start || offset > self.log_end.max(self.high_watermark)
    }
}

impl<D: Disk> GroupHost<D> {
    /// The replica's standing now.
    pub fn progress(&self) -> Progress {
        let replica = &self.replica;
        let membership = replica
            .memberships()
            .get(replica.log_epoch())
            .copied()
            .unwrap_or(*replica.view_membership());
        let acks = if replica.is_primary() {
            *replica.acks()
        } else {
            [0; REPLICAS_MAX as usize]
        };
        let progress = Progress {
            slot: replica.config().replica,
            view: replica.view(),
            log_view: replica.log_view(),
            status: replica.status(),
            primary: replica.primary_index(),
            is_primary: replica.is_primary(),
            serving_primary: replica.is_serving_primary(),
            op: replica.op(),
            commit: replica.commit(),
            commit_max: replica.commit_max(),
            trusted: replica.trusted(),
            started_epoch: replica.started_epoch(),
            membership,
            newest: *replica.memberships().newest(),
            acks,
            attention: replica.attention(),
            awaited_start: replica.awaited_start(),
        };
        assert!(progress.log_view <= progress.view, "log view past the view");
        assert!(
            progress.commit <= progress.commit_max,
            "commit past the max"
        );
        assert!(
            progress.membership.epoch <= progress.newest.epoch,
            "the membership in effect is past the newest known"
        );
        progress
    }

    /// Whether the partition is open: it is between operations, except
    /// after a failed one gave it up until the owner reopens the group.
    pub fn storage_open(&self) -> bool {
        self.partition.is_some()
    }

    /// Whether this replica serves as the group's primary (takes requests
    /// and answers reads) now: cheaper than [`GroupHost::progress`] for the
    /// check every request makes.
    pub fn is_serving_primary(&self) -> bool {
        self.replica.is_serving_primary()
    }

    /// The metadata plane's catalog as this replica applied it; `None` for
    /// a partition's group.
    pub fn catalog(&self) -> Option<&Catalog> {
        self.replica.machine().catalog()
    }

    /// One past the last committed record offset (0 on the metadata plane).
    pub fn high_watermark(&self) -> u64 {
        self.replica.machine().high_watermark()
    }

    /// Where the partition's records stand for a reader now.
    pub fn read_bounds(&self) -> ReadBounds {
        ReadBounds {
            log_start: self.log_start_offset(),
            high_watermark: self.high_watermark(),
            log_end: self.replica.log_offset_end(),
        }
    }

    /// Committed record batches from `offset`, about `max_bytes` of them
    /// (at least one batch when one is committed there): never a batch that
    /// reaches past the high watermark, whatever the log holds beyond it.
    /// Empty at or past the high watermark.
    pub fn fetch_committed(
        &mut self,
        offset: u64,
        max_bytes: u64,
    ) -> Result<Vec<FetchedBatch>, PartitionError> {
        let high_watermark = self.high_watermark();
        if offset >= high_watermark {
            return Ok(Vec::new());
        }
        let mut batches = self.partition_mut().fetch(offset, max_bytes)?;
        if cfg!(feature = "mutations") && self.mutations.reads_uncommitted {
            return Ok(batches);
        }
        batches
            .retain(|batch| batch.offset_base + u64::from(batch.record_count()) <= high_watermark);
        for pair in batches.windows(2) {
            assert!(
                pair[0].offset_base < pair[1].offset_base,
                "fetched batches in offset order"
            );
        }
        Ok(batches)
    }

    /// A consumer's stored cursor (its next offset), if it stored one.
    pub fn cursor(&self, consumer: &str) -> Option<u64> {
        self.partition_view().cursor(consumer)
    }

    /// The first committed offset appended at or after `timestamp_ns` (the
    /// high watermark when every committed record is older).
    pub fn offset_for_time(&self, timestamp_ns: u64) -> u64 {
        let high_watermark = self.high_watermark();
        self.partition_view()
            .offset_for_timestamp(timestamp_ns)
            .map_or(high_watermark, |offset| offset.min(high_watermark))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_past_the_high_watermark_within_the_log_waits_and_past_the_log_is_refused() {
        // Retained 10.., committed up to 20, the log holds records up to 25.
        let bounds = ReadBounds {
            log_start: 10,
            high_watermark: 20,
            log_end: 25,
        };
        for offset in [10, 15, 20, 21, 25] {
            assert!(!bounds.out_of_range(offset), "offset {offset}");
        }
        for offset in [9, 26] {
            assert!(bounds.out_of_range(offset), "offset {offset}");
        }
        // A log whose head is unknown (0) still serves up to the watermark.
        let unknown_head = ReadBounds {
            log_end: 0,
            ..bounds
        };
        assert!(!unknown_head.out_of_range(20));
    }
}
