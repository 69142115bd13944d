//! What a replica keeps across restarts (the superblock's consensus fields),
//! and what storage reports when a replica opens.

use bytes::Bytes;
use strand_wire::{PrepareHeader, ViewId};

/// Most history starts a replica remembers; older ones are dropped first. The
/// guard and the cut only ever need the latest few.
pub const HISTORY_STARTS_MAX: usize = 16;

const _: () = assert!(HISTORY_STARTS_MAX == strand_wire::START_VIEW_HISTORY_STARTS_MAX);

/// Where the history of one view began: the new primary of `view` started it
/// with its log at `op` (its records below `offset_end`) and its cursor
/// event log at `cursor_tail`.
///
/// Every confirmed record lies at or below the latest start, so no later view
/// may start from a log that ends below it.
///
/// A start is identified by where it began: `view`, `op`, `cursor_tail`,
/// `replica` and `accepted_loss`. Equality, order and hash leave out
/// `offset_end` and `checksum`, which describe the start: a list that does
/// not carry them (a StartView's older starts, a superblock written before
/// starts recorded them) names the same starts, and the cursor cut still
/// finds them shared.
#[derive(Debug, Clone, Copy, Default)]
pub struct HistoryStart {
    /// The view that started here.
    pub view: ViewId,
    /// The canonical log's head op when the view started.
    pub op: u64,
    /// The new primary's cursor event log length when the view started.
    pub cursor_tail: u64,
    /// The replica that started the view (its primary).
    pub replica: u8,
    /// True when the view was started by an operator's accept-loss: records
    /// confirmed above `op` may have been given up.
    pub accepted_loss: bool,
    /// One past the last record offset of the op the view started with
    /// (reference A's record tail of the new owner): `attention` names a
    /// wait below this start by it. `None` when not recorded.
    pub offset_end: Option<u64>,
    /// The checksum of the prepare at `op` the view started on (the
    /// canonical log's head). A log whose header at `op` has it is on this
    /// history through `op`, whatever view it was settled in: the proof
    /// survives the loss of every log settled in the view itself (a fenced
    /// primary rebuilt by state transfer keeps its starts, not its log).
    /// `None` when not recorded (op 0, or a start recorded before starts
    /// carried it).
    pub checksum: Option<u32>,
}

impl HistoryStart {
    /// What identifies the start (everything but `offset_end` and `checksum`).
    fn identity(&self) -> (ViewId, u64, u64, u8, bool) {
        (
            self.view,
            self.op,
            self.cursor_tail,
            self.replica,
            self.accepted_loss,
        )
    }
}

impl PartialEq for HistoryStart {
    fn eq(&self, other: &HistoryStart) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for HistoryStart {}

impl core::hash::Hash for HistoryStart {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.identity().hash(state);
    }
}

impl PartialOrd for HistoryStart {
    fn partial_cmp(&self, other: &HistoryStart) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for HistoryStart {
    fn cmp(&self, other: &HistoryStart) -> core::cmp::Ordering {
        self.identity().cmp(&other.identity())
    }
}

/// The replica state that must survive a restart, written atomically by the
/// driver (the partition superblock) whenever the replica asks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DurableState {
    /// The highest view this replica has entered. Persisting it fences the
    /// replica: it never acks anything from a lower view again.
    pub view: ViewId,
    /// The view in which the replica's log was last settled (Normal or adopted
    /// from a StartView).
    pub log_view: ViewId,
    /// The replica's commit number.
    pub commit: u64,
    /// The starts of the history this replica's logs follow, oldest first,
    /// at most [`HISTORY_STARTS_MAX`]: the view its log was settled in last
    /// and, before it, the views that view's history went through (the
    /// list its StartView carried). Its cursor event log holds events of
    /// that history only, which is how [`cursor_divergence`] finds where it
    /// leaves another.
    pub history_starts: Vec<HistoryStart>,
    /// The suffix of headers (ascending, at most
    /// `strand_wire::DVC_SUFFIX_HEADERS_MAX`) of the log this replica adopted
    /// in `log_view`. A crash may take bodies this replica had not yet made
    /// durable, but never the knowledge of what its `log_view` log holds: a
    /// restarted replica reports these headers (bodies missing), so a log
    /// settled in a higher view is never mistaken for a shorter one.
    pub view_headers: Vec<PrepareHeader>,
    /// The highest op this replica may have acked that its log might lack:
    /// raised before storage drops ops that may have been acked, and when an
    /// untrusted replica adopts a view. After a restart every op up to it
    /// that the log lacks is treated as damaged: never nacked, repaired.
    pub maybe_acked_op: u64,
    /// The log on disk is not the one settled in `log_view`: a state
    /// transfer replaced it (or the replica awaits one), and no view has been
    /// adopted since. It is a committed prefix that no view vouches for: it
    /// may end below the latest history start, which this replica cannot
    /// know. Such a log is untrusted, across restarts too, until the replica
    /// adopts a view (the persist that settles the log there clears this).
    /// The driver sets it when it installs a transferred log.
    pub log_unsettled: bool,
    /// The client table ([`crate::client_table::ClientTable::encode`]) as of
    /// the latest persist, so a restarted replica answers retries of requests
    /// its log no longer shows (retention dropped them, or they lie below the
    /// window of headers open reads). Empty: not recorded (a superblock
    /// written before the table was persisted); the table is then rebuilt from
    /// the log's headers.
    pub client_table: Bytes,
}

impl DurableState {
    /// The latest recorded history start, if any.
    pub fn latest_start(&self) -> Option<HistoryStart> {
        self.history_starts.last().copied()
    }

    /// Records a start, keeping the list sorted by view and bounded.
    pub fn record_start(&mut self, start: HistoryStart) {
        if let Some(latest) = self.latest_start() {
            assert!(
                start.view >= latest.view,
                "history start for an older view: {start:?} after {latest:?}"
            );
            if latest.view == start.view {
                assert_eq!(latest.op, start.op, "two starts for view {}", start.view);
                return;
            }
        }
        self.history_starts.push(start);
        if self.history_starts.len() > HISTORY_STARTS_MAX {
            self.history_starts.remove(0);
        }
    }

    /// This replica's history with `start` (of a view it starts as primary)
    /// recorded last: the history that view's logs follow.
    pub fn history_with(&self, start: HistoryStart) -> Vec<HistoryStart> {
        let mut state = DurableState {
            history_starts: self.history_starts.clone(),
            ..DurableState::default()
        };
        state.record_start(start);
        state.history_starts
    }

    /// Takes the history of a view this replica adopted (its StartView's
    /// list, its own start last) in place of its own: its logs follow that
    /// history from now on.
    pub fn adopt_history(&mut self, history: &[HistoryStart]) {
        let adopted = history.last().expect("a view's history holds its start");
        assert!(history.len() <= HISTORY_STARTS_MAX);
        assert!(
            history.windows(2).all(|pair| pair[0].view < pair[1].view),
            "a history ascends by view: {history:?}"
        );
        if let Some(latest) = self.latest_start() {
            assert!(
                adopted.view >= latest.view,
                "history of an older view: {adopted:?} after {latest:?}"
            );
            if latest.view == adopted.view {
                assert_eq!(
                    latest.op, adopted.op,
                    "two starts for view {}",
                    adopted.view
                );
            }
        }
        self.history_starts = history.to_vec();
    }

    /// Takes the history of the replica a state transfer came from (its
    /// logs are that replica's now), keeping any start this replica knows
    /// of a view after that history's latest: the guard still needs it.
    pub fn take_transferred_history(&mut self, exporter: &[HistoryStart]) {
        let latest = exporter.last().map(|start| start.view);
        let mut history = exporter.to_vec();
        history.extend(
            self.history_starts
                .iter()
                .filter(|start| latest.is_none_or(|latest| start.view > latest)),
        );
        let skip = history.len().saturating_sub(HISTORY_STARTS_MAX);
        self.history_starts = history.split_off(skip);
    }
}

/// Where a cursor event log that follows history `ours` leaves history
/// `theirs` (both lists of starts, ascending by view): the first event
/// position that may differ, or `None` when `ours` is on `theirs`.
///
/// Each view's cursor log is its new primary's, as it stood at the view's
/// start (its own history's log, not cut), followed by the events the view
/// appends. Two histories share the latest view both went through; past it,
/// each start may have begun other events, so the logs agree below the
/// lowest cursor tail of any start after it, on either side: a view that
/// started unseen (its primary's events followed by no later view) counts
/// as much as a view missed. Every history begins at view 0 with an empty
/// cursor log, whether its list records that start or not; a list bounded
/// at [`HISTORY_STARTS_MAX`] may have dropped the start it shares with the
/// other, and then nothing is known to agree.
pub fn cursor_divergence(ours: &[HistoryStart], theirs: &[HistoryStart]) -> Option<u64> {
    let started = |start: &&HistoryStart| start.view != ViewId::ZERO;
    let shared = ours
        .iter()
        .filter(started)
        .rev()
        .find(|start| theirs.contains(start))
        .map(|start| start.view);
    let complete = |list: &[HistoryStart]| {
        list.len() < HISTORY_STARTS_MAX
            || list.first().is_some_and(|first| first.view == ViewId::ZERO)
    };
    if shared.is_none() && !(complete(ours) && complete(theirs)) {
        return Some(0);
    }
    let after = |start: &&HistoryStart| shared.is_none_or(|shared| start.view > shared);
    ours.iter()
        .chain(theirs)
        .filter(started)
        .filter(after)
        .map(|start| start.cursor_tail)
        .min()
}

/// What storage found when the replica's group was opened; the replica's
/// whole starting state.
#[derive(Debug, Clone)]
pub struct Recovered {
    /// The durable state from the superblock (default when fresh).
    pub state: DurableState,
    /// Headers of the log's last ops, ascending, ending at the log's head.
    /// Must include every readable op above `state.commit` (and may include up
    /// to a journal's worth below it). An op whose entry is damaged so badly
    /// its header cannot be read is left out (and listed in `faulty`). Empty
    /// for an empty log.
    pub headers: Vec<PrepareHeader>,
    /// Ops whose entries storage found damaged (a checksum that does not
    /// match a full-length entry, anywhere in the log; a torn, partial last
    /// entry is not damage, it was never acked). Their bodies must be
    /// repaired from peers; they are never nacked. A damaged entry above the
    /// last readable header makes the log untrusted: the replica cannot say
    /// what it acked there.
    pub faulty: Vec<u64>,
    /// The op of the log's last entry as storage holds it, readable or not
    /// (0 for an empty log). Appends continue after it.
    pub log_head: u64,
    /// The cursor event log's length.
    pub cursor_tail: u64,
    /// False when the log was recovered from disk under `replicated`
    /// durability without a clean-shutdown mark: it may lack acked ops. The
    /// driver writes that mark at shutdown only while the replica is trusted
    /// ([`crate::Replica::trusted`]): a replica that has not yet recovered
    /// from an earlier crash stays untrusted across a clean restart.
    pub trusted: bool,
    /// True when the partition cannot use its log at all and awaits a state
    /// transfer (after a quarantine, or a damaged log head).
    pub awaiting_state_transfer: bool,
    /// True when nothing was on disk: a brand-new replica.
    pub fresh: bool,
    /// True when storage found the mark of a clean stop taken while
    /// [`crate::Replica::resumable_in_view`] held: the replica stopped
    /// serving in its view with everything it held (and, as a primary, sent)
    /// on disk. It is then as if it had paused, and resumes in that view: a
    /// clean restart of a whole group needs no view change.
    pub stopped_in_view: bool,
    /// The assignment epoch that placed this copy in its slot (0: one of the
    /// replicas the group was created with, or a copy that has already
    /// entered a view of that epoch). Slots are reused: an earlier epoch may
    /// name this slot for another replica, and this copy must never enter
    /// (or be taken for that replica in) such an epoch's views.
    pub joined_epoch: u32,
    /// The first op storage holds (1: all of them): retention dropped the
    /// ones below, every one committed.
    pub log_start: u64,
    /// The record offset op `log_start` begins at (the end of the ops
    /// retention dropped).
    pub log_start_offset: u64,
}

impl Recovered {
    /// The commit number the log supports, which the replica opens at: ops
    /// up to the persisted commit were applied, as far as the log still
    /// holds them readably (the highest readable op at or below it: a
    /// damaged file may have cut or garbled the rest). Ops retention dropped
    /// were committed and applied, whatever is readable above them. A state
    /// machine restored from a snapshot must not be ahead of it: the ops
    /// above it are committed again, after repair.
    pub fn commit_the_log_supports(&self) -> u64 {
        let last_header = self.headers.last().map_or(0, |header| header.op.get());
        assert!(last_header <= self.log_head, "a header above the log head");
        let retained_through = self.log_start.saturating_sub(1);
        self.headers
            .iter()
            .map(|header| header.op.get())
            .filter(|op| *op <= self.state.commit.min(self.log_head))
            .max()
            .unwrap_or(0)
            .max(retained_through)
    }

    /// A brand-new, empty replica.
    pub fn fresh() -> Recovered {
        Recovered {
            state: DurableState::default(),
            headers: Vec::new(),
            faulty: Vec::new(),
            log_head: 0,
            cursor_tail: 0,
            trusted: true,
            awaiting_state_transfer: false,
            fresh: true,
            stopped_in_view: false,
            joined_epoch: 0,
            log_start: 1,
            log_start_offset: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(view: u32, cursor_tail: u64) -> HistoryStart {
        HistoryStart {
            view: ViewId::new(0, view),
            op: u64::from(view),
            cursor_tail,
            replica: (view % 3) as u8,
            accepted_loss: false,
            offset_end: None,
            checksum: None,
        }
    }

    #[test]
    fn a_start_is_the_same_start_with_or_without_its_record_offset() {
        let recorded = HistoryStart {
            offset_end: Some(900),
            checksum: Some(31),
            ..start(2, 4)
        };
        assert_eq!(recorded, start(2, 4));
        // A history whose older starts came without offsets (a StartView's
        // list) still shares them with one that recorded them.
        let ours = [start(1, 2), recorded];
        let theirs = [start(1, 2), start(2, 4), start(3, 7)];
        assert_eq!(cursor_divergence(&ours, &theirs), Some(7));
        assert_ne!(recorded, start(2, 5), "the cursor tail identifies it");
    }

    #[test]
    fn a_log_on_the_history_is_cut_at_the_starts_after_its_own() {
        let ours = [start(1, 2)];
        assert_eq!(
            cursor_divergence(&ours, &[start(1, 2), start(2, 5)]),
            Some(5)
        );
        // A view missed in between started lower.
        let theirs = [start(1, 2), start(2, 3), start(3, 6)];
        assert_eq!(cursor_divergence(&ours, &theirs), Some(3));
        // Already on it.
        assert_eq!(cursor_divergence(&theirs, &theirs), None);
    }

    #[test]
    fn a_view_that_started_unseen_cuts_at_its_own_start() {
        // View 2 followed view 1's history; view 3 did not.
        let ours = [start(1, 2), start(2, 4)];
        let theirs = [start(1, 2), start(3, 7)];
        assert_eq!(cursor_divergence(&ours, &theirs), Some(4));
        assert_eq!(cursor_divergence(&[start(2, 1)], &theirs), Some(1));
    }

    #[test]
    fn view_zero_is_shared_and_a_bounded_list_without_a_shared_start_keeps_nothing() {
        let zero = HistoryStart::default();
        assert_eq!(cursor_divergence(&[], &[zero, start(3, 4)]), Some(4));
        assert_eq!(
            cursor_divergence(&[zero, start(1, 6)], &[start(3, 4)]),
            Some(4)
        );
        let bounded: Vec<HistoryStart> = (1..=16).map(|view| start(view, 10)).collect();
        assert_eq!(cursor_divergence(&[start(20, 9)], &bounded), Some(0));
        assert_eq!(cursor_divergence(&[start(16, 10)], &bounded), None);
    }

    #[test]
    fn a_transferred_history_is_the_exporters_and_newer_local_starts() {
        let mut state = DurableState {
            history_starts: vec![start(1, 1), start(5, 2)],
            ..DurableState::default()
        };
        state.take_transferred_history(&[start(2, 3), start(4, 4)]);
        assert_eq!(
            state.history_starts,
            [start(2, 3), start(4, 4), start(5, 2)]
        );
        let mut state = DurableState::default();
        state.adopt_history(&[start(2, 3), start(4, 4)]);
        assert_eq!(state.latest_start(), Some(start(4, 4)));
        assert_eq!(state.history_with(start(6, 5)).len(), 3);
    }
}
