//! The cut (reference A, "copies with a longer tail"): a replica that returns
//! with a longer tail than the view it joins (typically an old primary) brings
//! its record log **and** its cursor event log down to the history start of
//! that view, before any role change in it.
//!
//! The rule, in one function ([`Partition::cut`]):
//! - never below the retained head, never at or below the start: only ops
//!   above `start.op` and cursor events from `start.cursor_tail` on go;
//! - a cursor snapshot whose boundary lies past the cut keeps its state but
//!   has its boundary lowered to the cut, so the new primary's events at those
//!   sequence numbers replay over it;
//! - cursors above the record log's new end are clamped to it (here, and again
//!   on every open);
//! - a repeated cut changes nothing.
//!
//! Which start to cut to (the lowest start recorded after the replica's own
//! log_view, up to the target view) is consensus's decision; storage executes it.

use crate::disk::Disk;
use crate::error::PartitionError;
use crate::partition::Partition;

/// Where a view's history started: the op and cursor tail to cut to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutPoint {
    /// The start's op: ops above it go.
    pub op: u64,
    /// The start's cursor tail: events from it on go.
    pub cursor_tail: u64,
}

/// What a cut did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CutOutcome {
    /// Ops removed from the record log.
    pub ops_removed: u64,
    /// Cursor events removed from the cursor log.
    pub cursor_events_removed: u64,
    /// The snapshot boundary was lowered to the cut.
    pub snapshot_boundary_lowered: bool,
    /// Cursors clamped to the record log's end.
    pub cursors_clamped: usize,
}

impl<D: Disk> Partition<D> {
    /// Cuts the record log and the cursor event log to `start`, durably. See
    /// the module docs. Refused below the retained head, and below the
    /// persisted commit (a contradiction with applied history is a quarantine,
    /// not a cut).
    pub fn cut(&mut self, start: CutPoint) -> Result<CutOutcome, PartitionError> {
        let commit = self.superblock.durable.commit;
        if start.op < commit {
            return Err(PartitionError::TruncateBelowCommit {
                op: start.op,
                commit,
            });
        }
        let ops_removed = self.log.op.saturating_sub(start.op);
        self.truncate_log(start.op)?;
        self.cut_cursors(start.cursor_tail)
            .map(|outcome| CutOutcome {
                ops_removed,
                ..outcome
            })
    }

    /// Cuts only the cursor event log (a `CutCursors` effect), with the same
    /// snapshot and clamp rules.
    pub fn cut_cursors(&mut self, cursor_tail: u64) -> Result<CutOutcome, PartitionError> {
        self.drain_cursor_appends()?;
        let tail_before = self.cursors.tail;
        let covers_before = self.cursors.snapshot_covers();
        self.cursors.cut(&mut self.io, cursor_tail)?;
        let cursors_clamped = self.cursors.clamp(self.log.offset_end);
        let outcome = CutOutcome {
            ops_removed: 0,
            cursor_events_removed: tail_before.saturating_sub(self.cursors.tail),
            snapshot_boundary_lowered: self.cursors.snapshot_covers() < covers_before,
            cursors_clamped,
        };
        if outcome != CutOutcome::default() {
            tracing::info!(cursor_tail, ?outcome, "partition: cut the cursor log");
        }
        Ok(outcome)
    }
}
