//! History starts as they travel and as operators are shown them: read
//! from and written to DoViewChange and StartView frames, the record offset
//! a new primary records with its start, and the start a waiting view
//! change names in `attention` (reference A: "the start's record count and
//! the node that took over there").
//!
//! A start's record offset (`HistoryStart::offset_end`) rides in the
//! DoViewChange header for the sender's latest start and in the StartView
//! header for the view's own start; the older starts a StartView lists
//! carry none (only the latest start is ever named), which the start's
//! identity allows (`HistoryStart` leaves the offset out of equality).

use strand_wire::{
    CommandHeader, DoViewChangeHeader, HistoryStartFlags, HistoryStartRecord, Msg, PrepareHeader,
    StartViewHeader, ViewId,
};

use crate::merge::{Canonical, DvcSummary};
use crate::replica::{Replica, Status};
use crate::state::{HISTORY_STARTS_MAX, HistoryStart};
use crate::state_machine::StateMachine;

impl<S: StateMachine> Replica<S> {
    /// The latest history start this replica's view change knows: its own
    /// and those of the DoViewChanges at hand, the one the merge guards
    /// (while it waits below it, what `attention` names). Among reports of
    /// one start, one that carries its record offset. `None` outside a view
    /// change, or when no start is recorded.
    pub fn awaited_start(&self) -> Option<HistoryStart> {
        if !matches!(
            self.status,
            Status::ViewChange | Status::AwaitingStateTransfer
        ) {
            return None;
        }
        let own = self
            .durable
            .latest_start()
            .filter(|start| start.view <= self.log_view);
        let latest = self
            .view_change
            .dvcs
            .values()
            .filter_map(|dvc| dvc.history_start)
            .chain(own)
            .max_by_key(|start| (start.view, start.offset_end.is_some()))?;
        debug_assert!(
            latest.view <= self.view,
            "a start after the view: {latest:?}"
        );
        Some(latest)
    }

    /// The record offset end of the canonical log a new primary starts its
    /// view with: its header at the canonical op (the merge's suffix ends
    /// there; below it, this replica's own, which the commit vouches for).
    pub(crate) fn start_offset_end(&self, canonical: &Canonical) -> Option<u64> {
        if canonical.op == 0 {
            return Some(0);
        }
        self.start_head(canonical).map(PrepareHeader::offset_end)
    }

    /// The checksum of the prepare a new primary starts its view on (the
    /// canonical head): the proof a log is on the view's history that
    /// outlives every log settled in the view. `None` at op 0 (every log is
    /// on that history).
    pub(crate) fn start_checksum(&self, canonical: &Canonical) -> Option<u32> {
        if canonical.op == 0 {
            return None;
        }
        self.start_head(canonical).map(CommandHeader::checksum)
    }

    /// The canonical log's header at its head op: the merge's suffix ends
    /// there; below it, this replica's own, which the commit vouches for.
    fn start_head<'a>(&'a self, canonical: &'a Canonical) -> Option<&'a PrepareHeader> {
        canonical
            .headers
            .last()
            .filter(|header| header.op.get() == canonical.op)
            .or_else(|| {
                let own = self.journal.header(canonical.op)?;
                (canonical.op <= self.commit).then_some(own)
            })
    }
}

/// Writes the sender's latest history start into its DoViewChange.
pub(crate) fn set_dvc_history_start(header: &mut DoViewChangeHeader, start: &HistoryStart) {
    header.history_start_op.set(start.op);
    header.history_start_cursor_tail.set(start.cursor_tail);
    header.set_history_start_view_id(start.view);
    header.history_start_replica = start.replica;
    header.set_history_start_offset_end(start.offset_end);
    header.set_history_start_checksum(start.checksum);
}

/// Reads a DoViewChange frame into the merge's summary (None if its headers
/// are unusable; the frame decoder has already checked them).
pub(crate) fn summary_from_message(dvc: &Msg<DoViewChangeHeader>) -> Option<DvcSummary> {
    let header = dvc.header();
    let headers = strand_wire::headers::prepare_headers(dvc.body())
        .ok()?
        .to_vec();
    let start_view = header.history_start_view_id();
    let history_start = (start_view != ViewId::ZERO).then(|| HistoryStart {
        view: start_view,
        op: header.history_start_op.get(),
        cursor_tail: header.history_start_cursor_tail.get(),
        replica: header.history_start_replica,
        accepted_loss: false,
        offset_end: header.history_start_offset_end(),
        checksum: header.history_start_checksum(),
    });
    Some(DvcSummary {
        replica: header.prefix.replica,
        log_view: header.log_view_id(),
        op: header.op.get(),
        commit: header.commit.get(),
        ack_op: header.ack_op.get(),
        cursor_tail: header.cursor_tail.get(),
        flags: header.flags(),
        headers,
        present: header.present_bitset.get(),
        nack: header.nack_bitset.get(),
        history_start,
    })
}

/// The history a StartView carries, its view's start last with the record
/// offset its header names (view 0 starts empty, without a recorded start:
/// one is made from the header).
pub(crate) fn start_view_history(
    header: &StartViewHeader,
    starts: &[HistoryStartRecord],
) -> Vec<HistoryStart> {
    let view = header.prefix.view_id();
    let mut history: Vec<HistoryStart> = starts.iter().map(history_start_of).collect();
    match history.last_mut() {
        Some(last) if last.view == view => {
            last.offset_end = header.start_offset_end();
            last.checksum = header.start_checksum();
        }
        _ => {
            history.push(HistoryStart {
                view,
                op: header.start_op.get(),
                cursor_tail: header.cursor_tail.get(),
                replica: header.prefix.replica,
                accepted_loss: false,
                offset_end: header.start_offset_end(),
                checksum: header.start_checksum(),
            });
            if history.len() > HISTORY_STARTS_MAX {
                history.remove(0);
            }
        }
    }
    history
}

/// A history start as a StartView lists it (without its record offset).
pub(crate) fn history_start_record(start: &HistoryStart) -> HistoryStartRecord {
    let mut record = HistoryStartRecord::default();
    record.op.set(start.op);
    record.cursor_tail.set(start.cursor_tail);
    record.set_view_id(start.view);
    record.replica = start.replica;
    if start.accepted_loss {
        record.flags = HistoryStartFlags::ACCEPTED_LOSS.bits();
    }
    record
}

/// A StartView's listed history start (its checks passed).
fn history_start_of(record: &HistoryStartRecord) -> HistoryStart {
    HistoryStart {
        view: record.view_id(),
        op: record.op.get(),
        cursor_tail: record.cursor_tail.get(),
        replica: record.replica,
        accepted_loss: record.flags().contains(HistoryStartFlags::ACCEPTED_LOSS),
        offset_end: None,
        checksum: None,
    }
}
