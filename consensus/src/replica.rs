//! The `Replica`: its state, and the dispatch of every input to the module
//! that owns the rule (its construction from what storage recovered is `open`).
//!
//! Inputs: [`Replica::on_message`], [`Replica::on_request`], [`Replica::on_tick`],
//! [`Replica::on_write`], [`Replica::on_truncated`], [`Replica::on_state_persisted`],
//! [`Replica::on_cursors_written`], [`Replica::on_state_transfer_done`],
//! [`Replica::accept_loss`]. Each pushes effects into the caller's [`Effects`].

use std::collections::BTreeMap;

use bytes::Bytes;

use strand_prng::Prng;
use strand_wire::{CommandHeader, CommitFlags, Message, Msg, PrepareHeader, RequestHeader, ViewId};

use crate::client_table::{ClientTable, restore_client_table_from};
use crate::config::Config;
use crate::cursors::CursorState;
use crate::effects::{DropReason, Effect, Effects, Event, WaitReason};
use crate::epoch::{Membership, Memberships, SlotSet};
use crate::journal::{Journal, SlotState};
use crate::merge::{Canonical, DvcSummary};
use crate::persistence::Persistence;
use crate::progress::PrimaryProgress;
use crate::state::{DurableState, HistoryStart};
use crate::state_machine::StateMachine;
use crate::timers::Timers;
use crate::trust::Trust;
use crate::votes::{LeaveVotes, StartViewProbe};

/// Primary timeouts a backup lets pass after it starts, before it votes to
/// leave the view, while its primary's node lives but the primary has not
/// spoken (a node opening thousands of groups takes seconds to reach this
/// one). A suspected primary node, a word from the primary, or a view
/// change ends the patience.
pub const START_PATIENCE_TIMEOUTS: u32 = 10;

/// Where a replica is in the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Serving in its view: the primary prepares, backups ack.
    Normal,
    /// Moving to a new view: acks nothing, collects or sends DoViewChanges.
    ViewChange,
    /// Restarted: asks for the current view before it serves.
    Recovering,
    /// Cannot use its log; waits for a state transfer.
    AwaitingStateTransfer,
    /// Removed from the group by a reassignment: it serves, acks and votes
    /// no more; its data stays until an operator drops it.
    Retired,
}

impl Status {
    /// The name used in status output.
    pub fn name(self) -> &'static str {
        match self {
            Status::Normal => "normal",
            Status::ViewChange => "view_change",
            Status::Recovering => "recovering",
            Status::AwaitingStateTransfer => "awaiting_state_transfer",
            Status::Retired => "retired",
        }
    }
}

/// A client request as the driver hands it over: the validated frame plus
/// what only the driver can know.
#[derive(Debug, Clone)]
pub struct ClientRequest {
    /// The request frame.
    pub request: Msg<RequestHeader>,
    /// Records in a produce's batch (0 for other operations); the driver has
    /// validated the batch.
    pub record_count: u32,
    /// The driver's wall clock, nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
}

/// Which stage of a storage write completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteStage {
    /// Handed to the WAL writer.
    Queued,
    /// Fsynced.
    Durable,
}

/// Progress of the view change this replica is in.
#[derive(Debug, Clone, Default)]
pub(crate) struct ViewChangeProgress {
    /// DoViewChanges received for the current view (candidate only).
    pub dvcs: BTreeMap<u8, DvcSummary>,
    /// The merge's result once ready (candidate only).
    pub canonical: Option<Canonical>,
    /// The operator accepted loss for this view.
    pub accept_loss: bool,
    /// The latest wait, for `attention`.
    pub waiting: Option<(WaitReason, u32)>,
    /// StartViewChange and DoViewChange were sent for the current view.
    pub announced: bool,
}

/// A StartView being adopted (or the merge result being installed): the log
/// must match `headers` before the replica persists the view and serves.
#[derive(Debug, Clone)]
pub(crate) struct Adoption {
    /// The view being adopted.
    pub view: ViewId,
    /// The canonical head op.
    pub op: u64,
    /// The canonical commit number (at least).
    pub commit: u64,
    /// The history the view's logs follow, its own start last (what the
    /// replica records as its history once the view is adopted).
    pub history: Vec<HistoryStart>,
    /// The replica canonical headers below the suffix are fetched from.
    pub source: u8,
    /// Lowest op whose canonical header has been matched against this
    /// replica's log; reconciliation is done once it reaches `commit + 1`
    /// (or the log's head is below it).
    pub verified_from: u64,
    /// A storage truncation is in flight (its target op).
    pub truncating: Option<u64>,
    /// The durable-state persist carrying the view was requested (its sequence).
    pub persisting: Option<u64>,
    /// The canonical suffix being adopted (recorded as the view headers).
    pub headers: Vec<PrepareHeader>,
    /// The boundary canonical headers were last asked for below.
    pub requested_upper: u64,
}

/// A cut that waits for a persist (`gate`): the ops it drops may have been
/// acked, and the persist records that before they leave storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeferredCut {
    /// The persist sequence it waits for.
    pub(crate) gate: u64,
    /// The op the record log keeps up to.
    pub(crate) op: u64,
    /// The cursor events the cursor log keeps, if it is cut too.
    pub(crate) cursor_tail: Option<u64>,
}

impl DeferredCut {
    /// This cut and another: the lower of each.
    pub(crate) fn merged(self, op: u64, cursor_tail: Option<u64>) -> DeferredCut {
        let cursor_tail = match (self.cursor_tail, cursor_tail) {
            (Some(earlier), Some(later)) => Some(earlier.min(later)),
            (earlier, later) => earlier.or(later),
        };
        DeferredCut {
            gate: self.gate,
            op: self.op.min(op),
            cursor_tail,
        }
    }
}

/// One replica of one VSR group: see the crate docs.
#[derive(Debug)]
pub struct Replica<S> {
    pub(crate) config: Config,
    /// Every membership this replica knows, by epoch.
    pub(crate) memberships: Memberships,
    /// The membership of the current view's epoch (kept at hand for the hot
    /// paths): who its primary is, who votes to leave it.
    pub(crate) view_membership: Membership,
    /// The newest membership the metadata plane assigned, while this
    /// replica's log has not reached its epoch.
    pub(crate) target: Option<Membership>,
    /// The highest epoch this replica has seen start (a view of it became
    /// normal, or its `Reconfigure` op committed).
    pub(crate) started_epoch: u32,
    pub(crate) prng: Prng,
    pub(crate) machine: S,

    pub(crate) status: Status,
    pub(crate) view: ViewId,
    pub(crate) log_view: ViewId,
    /// Whether its log is trusted (see [`crate::trust`]).
    pub(crate) trust: Trust,
    /// The durable state last asked for.
    pub(crate) durable: DurableState,
    /// Its persists: asked, in flight, done, and what is on disk (a
    /// replica acks nothing in a view before it is).
    pub(crate) persistence: Persistence,

    pub(crate) journal: Journal,
    /// Ops whose stored entry was found damaged (or was dropped while
    /// damaged): they may have been acked, so they are never nacked; they
    /// leave the set once their canonical prepare is durable again.
    pub(crate) faulty_ops: std::collections::BTreeSet<u64>,
    /// Damaged committed ops below the journal's window whose canonical
    /// prepare was handed to storage and is not durable yet (the journal
    /// holds no slot for them to mark).
    pub(crate) rewriting_below_window: std::collections::BTreeSet<u64>,
    /// The first op storage still holds: retention dropped the ones below
    /// (all committed). Peers asking for them get a LogStart answer.
    pub(crate) log_start: u64,
    /// Ops up to here are applied.
    pub(crate) commit: u64,
    /// The highest commit number heard of.
    pub(crate) commit_max: u64,
    /// The next op to append to storage (all below were handed over).
    pub(crate) write_next: u64,
    /// Ops from here up to `write_next` were handed to storage as appends
    /// by this process (those below were read from disk at open, or
    /// installed): storage holds them whole by the time a later effect
    /// runs, even while they are still faulty here (not yet durable).
    pub(crate) appended_from: u64,
    /// Every op from the commit number up to this one was stored (per policy)
    /// when last looked; lowered by every truncation.
    pub(crate) stored_hint: u64,
    pub(crate) client_table: ClientTable,
    pub(crate) cursors: CursorState,

    /// Primary: each backup's progress in this view.
    pub(crate) progress: PrimaryProgress,
    /// Backup: the highest op acked to the primary in this view.
    pub(crate) acked: u64,
    /// Backup: whether its latest ack in this view said it was repairing.
    pub(crate) acked_repairing: bool,
    pub(crate) view_change: ViewChangeProgress,
    pub(crate) adoption: Option<Adoption>,
    /// The log head recovered at open (what survived a crash).
    pub(crate) recovered_head: u64,
    /// A repair round is wanted at the next tick.
    pub(crate) repair_due: bool,
    /// Repair rounds so far (rotates which peer is asked).
    pub(crate) repair_rounds: u64,
    /// A cut waiting for the persist that records which of the ops it
    /// drops may have been acked.
    pub(crate) deferred_cut: Option<DeferredCut>,
    /// Primary: a handover waiting for the requests in flight to commit
    /// (no new one is admitted meanwhile).
    pub(crate) handover: Option<crate::handover::Drain>,
    /// Backup: the highest op the primary of this view is known to have.
    pub(crate) primary_op: u64,
    /// Its requests for a StartView (see [`crate::votes`]).
    pub(crate) probe: StartViewProbe,
    /// The votes to leave the current view, this replica's own among them.
    pub(crate) votes: LeaveVotes,
    /// Primary: no ack arrived for too long with prepares in flight, so it
    /// stopped heartbeating to let the backups elect another primary.
    pub(crate) abdicated: bool,
    /// Quiet (idle, its timers stopped) and the peers the driver's
    /// node-level liveness suspects ([`crate::quiet`]).
    pub(crate) quiet: crate::quiet::Quiet,
    /// Primary timeouts a backup may still let pass, since it started,
    /// without a word from its primary while the primary's node lives (0
    /// once it heard the primary): see [`START_PATIENCE_TIMEOUTS`].
    pub(crate) start_patience: u32,

    pub(crate) timers: Timers,

    /// `mutations` only: the trusted-quorum gate.
    pub(crate) trusted_gate: bool,
    /// `mutations` only: the old membership's half of the joint quorum.
    #[cfg(feature = "mutations")]
    pub(crate) old_quorum_gate: bool,
}

impl<S: StateMachine> Replica<S> {
    /// Whether a clean stop now may be marked as one taken while serving in
    /// this view, so that the replica resumes there: it is Normal (one that
    /// recovers from a crash may have forgotten prepares it sent as a
    /// primary; one in a view change has promised a later view), trusted,
    /// and every prepare it holds is handed to storage (the driver then
    /// syncs them all before the mark).
    pub fn resumable_in_view(&self) -> bool {
        self.status == Status::Normal
            && self.trust.is_trusted()
            && self.deferred_cut.is_none()
            && self.write_next > self.journal.head()
    }

    /// At open, after a stop marked [`Replica::resumable_in_view`]: the log
    /// read back must still be whole (storage found no damage since), be
    /// settled in the view, and the replica a member of it.
    pub(crate) fn may_resume_in_view(&self) -> bool {
        self.trust.is_trusted()
            && self.faulty_ops.is_empty()
            && self.log_view == self.view
            && self.view_membership.slots.contains(self.config.replica)
    }

    /// Whether a backup that has not heard its primary since it started
    /// gives it another primary timeout: the primary's node lives (the
    /// driver does not suspect it), so its replica is most likely still
    /// opening among thousands of groups, and a view change now would only
    /// churn.
    fn waits_for_primary_to_start(&self) -> bool {
        self.start_patience > 0 && !self.quiet.suspects(self.primary_index()) && !self.is_primary()
    }

    /// Starts the replica's timers and first messages.
    pub fn start(&mut self, effects: &mut Effects) {
        self.timers.commit_persist.start();
        if !self.trust.is_trusted() {
            effects.event(Event::UntrustedLog { untrusted: true });
        }
        match self.status {
            Status::Normal => self.enter_normal(effects),
            Status::Recovering => self.start_probing(effects),
            Status::AwaitingStateTransfer | Status::Retired => {}
            Status::ViewChange => unreachable!("a replica never opens in a view change"),
        }
        self.maybe_seal_for_target(effects);
    }

    // ----- inputs --------------------------------------------------------------

    /// A frame from a peer replica of this group.
    pub fn on_message(&mut self, message: Message, effects: &mut Effects) {
        if self.status == Status::Retired {
            effects.event(Event::Dropped {
                reason: DropReason::WrongStatus,
            });
            return;
        }
        if let Err(reason) = self.check_envelope(&message) {
            effects.event(Event::Dropped { reason });
            return;
        }
        self.wake_for_message(&message, effects);
        match message {
            Message::Prepare(prepare) => self.on_prepare(prepare, effects),
            Message::PrepareOk(ok) => self.on_prepare_ok(ok.header(), effects),
            Message::Commit(commit) => self.on_commit_heartbeat(commit.header(), effects),
            Message::StartViewChange(svc) => self.on_start_view_change(svc.header(), effects),
            Message::DoViewChange(dvc) => self.on_do_view_change(dvc, effects),
            Message::StartView(start) => self.on_start_view(start, effects),
            Message::RequestStartView(request) => {
                self.on_request_start_view(request.header(), effects)
            }
            Message::RequestPrepare(request) => self.on_request_prepare(request.header(), effects),
            Message::RequestHeaders(request) => self.on_request_headers(request.header(), effects),
            Message::Headers(headers) => self.on_headers(headers, effects),
            Message::Cursors(cursors) => self.on_cursors(cursors, effects),
            Message::LogStart(notice) => self.on_log_start(notice.header(), effects),
            Message::Ping(_)
            | Message::Pong(_)
            | Message::Request(_)
            | Message::Reply(_)
            | Message::RequestStateTransfer(_)
            | Message::StateTransferChunk(_) => {
                effects.event(Event::Dropped {
                    reason: DropReason::WrongStatus,
                });
            }
        }
    }

    /// One tick of time.
    pub fn on_tick(&mut self, effects: &mut Effects) {
        if self.status == Status::Retired || self.is_quiet() {
            return;
        }
        // Quiet ends with Normal status, whichever way it was left.
        self.quiet.end();
        for timeout in self.timers.all_mut() {
            timeout.tick();
        }
        if self.timers.heartbeat.fired() {
            self.timers.heartbeat.start();
            if self.may_quiesce_primary() {
                self.send_heartbeat_flagged(CommitFlags::QUIESCE, effects);
                self.quiesce();
                return;
            }
            self.send_heartbeat(effects);
        }
        if self.timers.primary.fired() {
            if self.waits_for_primary_to_start() {
                self.start_patience -= 1;
                self.timers.primary.start_jittered(&mut self.prng);
            } else {
                self.timers.primary.stop();
                self.vote_leave_view(crate::effects::LeaveReason::PrimarySilent, effects);
            }
        }
        if self.timers.progress.fired() {
            self.timers.progress.stop();
            if self.is_serving_primary() && self.journal.head() > self.commit {
                // Stalled: stop heartbeating and vote to leave the view too.
                self.abdicated = true;
                self.vote_leave_view(crate::effects::LeaveReason::Stalled, effects);
            }
        }
        if self.timers.prepare.fired() {
            self.timers.prepare.start();
            self.retransmit_prepares(effects);
        }
        self.tick_handover(effects);
        if self.timers.view_change.fired() {
            self.on_view_change_timeout(effects);
        }
        if self.timers.view_change_retransmit.fired() {
            self.timers.view_change_retransmit.start();
            self.retransmit_view_change(effects);
        }
        if self.timers.probe.fired() {
            self.on_probe_timeout(effects);
        }
        if self.timers.repair.fired() || self.repair_due {
            self.timers.repair.start();
            self.repair_due = false;
            self.repair(effects);
        }
        if self.timers.commit_persist.fired() {
            self.timers.commit_persist.start();
            if self.commit > self.persistence.commit() && self.status == Status::Normal {
                self.durable.commit = self.commit;
                self.request_persist(effects);
            }
        }
    }

    /// Ticks until the next one that may do anything, counting that one
    /// (1: the next tick); `None` while no tick would do anything (quiet,
    /// retired, or no timer running). A driver that keeps deadlines ticks
    /// the replica only then, and tells it of the ticks it skipped
    /// ([`Replica::skip_ticks`]) before any other input.
    pub fn ticks_until_due(&self) -> Option<u64> {
        if self.status == Status::Retired || self.is_quiet() {
            return None;
        }
        // Work that runs on every tick, whatever the timers say.
        if self.quiet.is_on() || self.repair_due || self.handover.is_some() {
            return Some(1);
        }
        self.timers
            .all()
            .iter()
            .filter_map(|timeout| timeout.ticks_left())
            .min()
            .map(|left| left.max(1))
    }

    /// `ticks` ticks passed in which none was due ([`Replica::ticks_until_due`]):
    /// the same as that many calls of [`Replica::on_tick`], each of which
    /// would have done nothing but count. Panics if one was due.
    pub fn skip_ticks(&mut self, ticks: u64) {
        if ticks == 0 || self.status == Status::Retired || self.is_quiet() {
            return;
        }
        assert!(
            self.ticks_until_due().is_none_or(|due| ticks < due),
            "skipping {ticks} ticks past one that is due"
        );
        for timeout in self.timers.all_mut() {
            timeout.skip(ticks);
        }
    }

    /// Storage took a write of `op` (whose prepare has `checksum`) to `stage`.
    pub fn on_write(&mut self, op: u64, checksum: u32, stage: WriteStage, effects: &mut Effects) {
        let keep_body = self.is_primary() || self.machine.needs_bodies();
        let Some(state) = self.journal.update(op, |slot| {
            if slot.header.checksum() != checksum {
                return None; // a write truncated away and replaced since
            }
            if slot.state == SlotState::Missing {
                // A write truncated away since (the same prepare, its slot
                // waiting to be written again): storage no longer holds it.
                return None;
            }
            slot.state = match (slot.state, stage) {
                (SlotState::Durable, _) => SlotState::Durable,
                (_, WriteStage::Durable) => SlotState::Durable,
                (SlotState::Writing | SlotState::Faulty, WriteStage::Queued) => SlotState::Queued,
                (state, WriteStage::Queued) => state,
            };
            if !keep_body && slot.state != SlotState::Writing {
                slot.prepare = None;
            }
            Some(slot.state)
        }) else {
            if stage == WriteStage::Durable && self.rewriting_below_window.remove(&op) {
                self.faulty_ops.remove(&op);
                self.on_storage_progress(effects);
            }
            return;
        };
        let Some(state) = state else {
            return;
        };
        if state == SlotState::Durable {
            // Repaired: it is an ordinary stored op again.
            self.faulty_ops.remove(&op);
        }
        self.on_storage_progress(effects);
    }

    /// Storage finished truncating the log to `op`.
    pub fn on_truncated(&mut self, op: u64, effects: &mut Effects) {
        if let Some(adoption) = &mut self.adoption {
            if adoption.truncating == Some(op) {
                adoption.truncating = None;
            }
        }
        self.advance_adoption(effects);
    }

    /// Storage persisted the durable state of request `sequence`.
    pub fn on_state_persisted(&mut self, sequence: u64, effects: &mut Effects) {
        let done_before = self.persistence.is_done(sequence);
        let settled = self.persistence.done(sequence);
        if done_before {
            return;
        }
        for persist in settled {
            // The log on disk is settled in the persisted log view, even if the
            // adoption that asked for it was overtaken by a newer view change.
            self.log_view = self.log_view.max(persist.log_view);
        }
        if let Some(deferred) = self.deferred_cut {
            if deferred.gate <= sequence {
                assert!(
                    deferred.op >= self.commit,
                    "a deferred cut to op {} would drop committed ops up to {}",
                    deferred.op,
                    self.commit
                );
                self.deferred_cut = None;
                effects.push(Effect::Cut {
                    op: deferred.op,
                    cursor_tail: deferred.cursor_tail,
                });
                self.flush_writes(effects);
            }
        }
        self.on_persisted(effects);
    }

    /// The cursor log reached `cursor_end` events at `stage`.
    pub fn on_cursors_written(
        &mut self,
        cursor_end: u64,
        stage: WriteStage,
        effects: &mut Effects,
    ) {
        self.cursors_written(cursor_end, stage, effects);
    }

    /// A state transfer finished: the log now ends at `head` (committed), the
    /// cursor log at `cursor_tail`; `None` when the source had committed
    /// nothing (the log is empty: every op is repaired from the view's
    /// primary once the replica adopts a view). `recent` are the installed
    /// log's last headers up to `head`, ascending (as storage reports them at
    /// open), and `client_table` the source's client table as the transfer
    /// carried it (empty when it carried none): the table is restored from
    /// them, so a retry of a request the group committed before the transfer
    /// is answered, never committed twice, should this replica lead.
    /// `history_starts` are the source's: its logs are this replica's now,
    /// and so is the history they follow.
    pub fn on_state_transfer_done(
        &mut self,
        head: Option<PrepareHeader>,
        cursor_tail: u64,
        recent: &[PrepareHeader],
        client_table: &[u8],
        history_starts: &[HistoryStart],
        effects: &mut Effects,
    ) {
        assert_eq!(
            self.status,
            Status::AwaitingStateTransfer,
            "no state transfer was awaited"
        );
        let op = head.map_or(0, |head| head.op.get());
        match head {
            Some(head) => {
                let keep_from = self.view.epoch.min(self.log_view.epoch);
                learn_from_header(&mut self.memberships, &head, keep_from);
                self.journal.reset_at(head);
            }
            None => self.journal = Journal::new(),
        }
        self.machine.restore(head.as_ref());
        // The damaged entries were the old log's: the installed one was
        // verified whole.
        self.faulty_ops.clear();
        self.rewriting_below_window.clear();
        self.stored_hint = op;
        self.commit = op;
        self.commit_max = self.commit_max.max(op);
        // The install persisted this commit with the log: a later persist
        // must not lower it (below a dropped head, no export names its frontier).
        self.durable.commit = op;
        self.persistence.installed(op);
        self.write_next = op + 1;
        self.appended_from = op + 1;
        self.cursors = CursorState::new(cursor_tail);
        self.durable.take_transferred_history(history_starts);
        if let Some(start) = self
            .durable
            .latest_start()
            .filter(|start| start.view > self.view)
            .filter(|start| self.memberships.get(start.view.epoch).is_some())
        {
            // The transfer brought the start of a view this replica never
            // entered: that view began, so every view below it is over (as
            // at open). Adopting one of them would take an older history.
            self.set_view(start.view);
            self.durable.view = start.view;
        }
        // The installed log is a committed prefix that no view vouches for
        // (it may end below the latest history start, which this replica
        // does not know): untrusted, across restarts, until a view is adopted.
        self.durable.log_unsettled = true;
        self.client_table = restore_client_table_from(client_table, recent, op);
        self.durable.client_table = Bytes::new();
        self.status = Status::Recovering;
        self.start_probing(effects);
    }

    /// An operator lets this replica's group go on with the logs at hand:
    /// the view change it is candidate of (or, if it is not, one to the next
    /// view it is primary of) starts from the DoViewChanges it has, without
    /// the trusted quorum and history-start waits. May lose confirmed records;
    /// the view's history start records that loss was accepted. Returns false
    /// when the group is not stuck (this replica serves, or follows a primary).
    pub fn accept_loss(&mut self, effects: &mut Effects) -> bool {
        if matches!(self.status, Status::AwaitingStateTransfer | Status::Retired) {
            return false;
        }
        self.wake(effects);
        let candidate = self.status == Status::ViewChange && self.is_primary();
        if self.view_change.canonical.is_some()
            || (self.status == Status::Normal && !self.votes.suspecting())
        {
            return false;
        }
        let next_epoch = self.next_view().epoch;
        let leads_some_view = self
            .memberships
            .get(next_epoch)
            .is_some_and(|membership| membership.slots.contains(self.config.replica));
        if !candidate && !leads_some_view {
            return false; // not a member of the epoch the group moves in
        }
        if !candidate {
            let mut view = self.next_view();
            while self.primary_of(view) != self.config.replica {
                view = view.next();
            }
            // The logs at hand are the DoViewChanges of the stuck view: the
            // merge of the new one starts from them (a reporter's DoViewChange
            // for the new view replaces its own), never from this log alone.
            let at_hand = std::mem::take(&mut self.view_change.dvcs);
            self.start_view_change(view, effects);
            self.view_change.dvcs = at_hand;
        }
        assert_eq!(
            self.status,
            Status::ViewChange,
            "loss is accepted only for a view change"
        );
        self.view_change.accept_loss = true;
        self.try_merge(effects);
        true
    }

    // ----- shared helpers ------------------------------------------------------

    fn check_envelope(&self, message: &Message) -> Result<(), DropReason> {
        let prefix = message.prefix();
        if prefix.cluster.get() != self.config.cluster {
            return Err(DropReason::WrongCluster);
        }
        if prefix.group.get() != self.config.group {
            return Err(DropReason::WrongGroup);
        }
        let epoch = prefix.epoch.get();
        if matches!(message, Message::Prepare(_)) && prefix.view_id() < self.view {
            // A prepare of an older view, relayed by repair: its prefix names
            // the view and primary that made it (perhaps of an epoch this
            // replica has forgotten or never knew); its checksum chain, not
            // its author, vouches for it.
            return Ok(());
        }
        if self.memberships.get(epoch).is_none() {
            return Err(DropReason::UnknownEpoch);
        }
        let from_self_allowed = matches!(message, Message::Prepare(_) | Message::Headers(_));
        if !self.peer_slots(epoch).contains(prefix.replica) {
            return Err(DropReason::ReplicaOutOfRange);
        }
        if prefix.replica == self.config.replica && !from_self_allowed {
            return Err(DropReason::Invalid);
        }
        Ok(())
    }

    /// A header prefix for a frame from this replica in the current view.
    pub(crate) fn new_header<H: CommandHeader>(&self) -> H {
        H::new(
            self.config.cluster,
            self.config.group,
            self.view,
            self.config.replica,
        )
    }

    /// Sends `message` to replica `to`: a peer, or a replica of an older
    /// epoch this one answers (a removed replica learns so from the reply).
    pub(crate) fn send(&self, to: u8, message: Message, effects: &mut Effects) {
        assert!(
            to != self.config.replica && self.memberships.slots_from(0).contains(to),
            "replica {to} is no replica of any known membership"
        );
        effects.push(Effect::Send { to, message });
    }

    /// Sends `message` to every other replica.
    pub(crate) fn broadcast(&self, message: Message, effects: &mut Effects) {
        let prefix = message.prefix();
        assert!(
            prefix.replica == self.config.replica && prefix.view_id() == self.view,
            "a broadcast speaks for replica {} in view {}, not this one in {}",
            prefix.replica,
            prefix.view_id(),
            self.view
        );
        for to in self.others() {
            effects.push(Effect::Send {
                to,
                message: message.clone(),
            });
        }
    }

    /// Every slot this replica talks to in its view: the members of the
    /// view's epoch and of any later one it knows (replicas joining by an
    /// in-place change hear the primary before their epoch starts), but
    /// not itself.
    pub(crate) fn others(&self) -> impl Iterator<Item = u8> + use<S> {
        let me = self.config.replica;
        self.peer_slots(self.view.epoch)
            .iter()
            .filter(move |replica| *replica != me)
    }

    /// Whether `slot` is one of [`Replica::others`].
    pub(crate) fn is_peer(&self, slot: u8) -> bool {
        slot != self.config.replica && self.peer_slots(self.view.epoch).contains(slot)
    }

    /// Every slot a replica in a view of `epoch` talks to: the members of
    /// that epoch and of the later ones reached from it in place (they join
    /// its views before their epoch starts), and, until `epoch` has started
    /// here, the members of the epoch before (a view change into a new epoch
    /// hears the old members first; afterwards they are fenced). Members
    /// that only a view-change transition adds are no peers of the old
    /// epoch's views: they join at the new epoch's first view.
    #[inline]
    pub(crate) fn peer_slots(&self, epoch: u32) -> SlotSet {
        let Some(mut from) = self.memberships.get(epoch).copied() else {
            return self.memberships.slots_from(epoch);
        };
        let mut slots = from.slots;
        while let Some(next) = self.memberships.get(from.epoch + 1) {
            if crate::epoch::transition(&from, next) != crate::epoch::Transition::InPlace {
                break;
            }
            slots = slots.union(next.slots);
            from = *next;
        }
        if epoch <= self.started_epoch {
            return slots;
        }
        epoch
            .checked_sub(1)
            .and_then(|previous| self.memberships.get(previous))
            .map_or(slots, |previous| slots.union(previous.slots))
    }

    /// Whether this replica, opening, may serve its view on its log as it
    /// is: its log was settled in that view, and no other replica takes
    /// part in the view or in the epoch its log reached. A view outlives an
    /// in-place change, so replicas the change added hold (and may have
    /// acked) the view's later prepares; a restarted primary that resumed
    /// the view without a view change would prepare other ops at the op
    /// numbers it lost. A transferred log no view vouches for yet is never
    /// served alone either: its view and slot may predate this replica.
    pub(crate) fn alone(&self) -> bool {
        let me = SlotSet::EMPTY.with(self.config.replica);
        self.log_view == self.view
            && !self.durable.log_unsettled
            && self.peer_slots(self.view.epoch) == me
            && self.peer_slots(self.log_epoch()) == me
    }
}

/// Remembers the membership a `Reconfigure` header names (a header that
/// contradicts a known one is left out: the driver's catalog is the authority,
/// and the op cannot commit under two memberships).
pub(crate) fn learn_from_header(
    memberships: &mut Memberships,
    header: &PrepareHeader,
    keep_from: u32,
) -> bool {
    let Some((epoch, slots, confirm)) = header.next_membership() else {
        return false;
    };
    let slots = SlotSet::from_bits(slots);
    if slots.is_empty() {
        return false;
    }
    memberships
        .learn(Membership::new(epoch, slots, confirm), keep_from)
        .unwrap_or(false)
}
