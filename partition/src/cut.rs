//! The cut, the one way a log's tail leaves storage. Reference A's "copies
//! with a longer tail": a replica that returns with a longer tail than the
//! view it joins (typically an old primary) brings its record log **and**
//! its cursor event log down to that view's history, before any role change
//! in it. A repair that finds ops divergent cuts them the same way, keeping
//! the cursor log.
//!
//! The rule, in one function ([`Partition::cut`]):
//! - never below the retained head, never a readable committed op: only ops
//!   above `at.op` and cursor events from `at.cursor_tail` on go;
//! - the record log's superblock is written before its files change, so open
//!   never mistakes the removed ops for lost ones;
//! - a cursor snapshot whose boundary lies past the cut keeps its state but
//!   has its boundary lowered to the cut, so the new primary's events at those
//!   sequence numbers replay over it;
//! - cursors above the record log's new end are clamped to it (here, and again
//!   on every open);
//! - a repeated cut changes nothing;
//! - a cut that fails (its superblock write, a file step) leaves files that
//!   still hold what consensus dropped: no superblock is written after it
//!   until the partition is reopened, since one carrying a newer log view
//!   would vouch for them. The reopen then finds the log in the log view it
//!   was written in, and the cut is decided again.
//!
//! Where to cut (the adopted view's head and history start, below a damaged
//! run when storage cannot cut inside it) is consensus's decision, carried by
//! its `Cut` effect; storage executes it.

use crate::disk::Disk;
use crate::error::PartitionError;
use crate::partition::Partition;

/// Where to cut: the op above which records go and, at a view's start, the
/// cursor tail from which events go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutPoint {
    /// Ops above it go.
    pub op: u64,
    /// Events from it on go; `None` keeps the cursor log (a repair's cut of
    /// ops found divergent, not a view's start).
    pub cursor_tail: Option<u64>,
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
    /// Cuts the record log above `at.op` and, if asked, the cursor event log
    /// to `at.cursor_tail`, durably (the `Cut` effect: report
    /// `on_truncated(op)` after). See the module docs. Refused below the
    /// retained head (`BelowRetainedHead`), and where it would remove a
    /// readable op at or below the persisted commit (`TruncateBelowCommit`:
    /// a contradiction with applied history is a quarantine, not a cut);
    /// damaged committed ops may go, they are written again as appends. A
    /// cut between two damaged entries whose boundary is unknown is
    /// `LogInconsistent`: consensus cuts below such a run.
    pub fn cut(&mut self, at: CutPoint) -> Result<CutOutcome, PartitionError> {
        let commit = self.superblock.durable.commit.min(self.log.op);
        if let Some(readable) = (at.op + 1..=commit).find(|op| !self.log.faulty.contains(op)) {
            return Err(PartitionError::TruncateBelowCommit {
                op: at.op,
                commit: readable,
            });
        }
        let ops_removed = self.log.op.saturating_sub(at.op);
        let cut = self
            .truncate_log(at.op)
            .and_then(|()| match at.cursor_tail {
                Some(cursor_tail) => self.cut_cursors(cursor_tail),
                None => Ok(CutOutcome {
                    cursors_clamped: self.cursors.clamp(self.log.offset_end),
                    ..CutOutcome::default()
                }),
            });
        let outcome = match cut {
            Ok(outcome) => CutOutcome {
                ops_removed,
                ..outcome
            },
            Err(error) => {
                self.refuse_superblocks_after_failed_cut(&error);
                return Err(error);
            }
        };
        if outcome != CutOutcome::default() {
            tracing::info!(op = at.op, cursor_tail = ?at.cursor_tail, ?outcome, "partition: cut");
        }
        Ok(outcome)
    }

    /// The cursor log's part of the cut, with the snapshot and clamp rules.
    fn cut_cursors(&mut self, cursor_tail: u64) -> Result<CutOutcome, PartitionError> {
        self.drain_cursor_appends()?;
        let rewritten_from = self.cursors.cut_rewrites_from(cursor_tail);
        if self.superblock.cursor_checkpoint > rewritten_from {
            // The events the cut writes again (the kept part of the frame
            // it splits) and those appended after it land below the old
            // checkpoint, which must not vouch for them: an open after a
            // crash or a failed sync trusts only what lies below it.
            self.write_superblock_now(|superblock| {
                superblock.cursor_checkpoint = superblock.cursor_checkpoint.min(rewritten_from);
            })?;
        }
        let tail_before = self.cursors.tail;
        let covers_before = self.cursors.snapshot_covers();
        self.cursors.cut(&mut self.io, cursor_tail)?;
        let cursors_clamped = self.cursors.clamp(self.log.offset_end);
        Ok(CutOutcome {
            ops_removed: 0,
            cursor_events_removed: tail_before.saturating_sub(self.cursors.tail),
            snapshot_boundary_lowered: self.cursors.snapshot_covers() < covers_before,
            cursors_clamped,
        })
    }
}
