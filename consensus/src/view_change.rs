//! The view change: timeouts, StartViewChange, DoViewChange, the candidate's
//! merge, StartView, and installing a view's canonical log (as new primary or
//! adopting backup) before serving in it.
//!
//! Order of durable steps, each waiting for the one before:
//! 1. persist the higher view (fencing) → then send StartViewChange/DoViewChange;
//! 2. install the canonical log: truncate what contradicts it, and a
//!    backup's cursor log where its history leaves the view's (storage
//!    truncation completes), and, for a new primary, repair every body;
//! 3. persist `log_view = view` with the view's history (its starts, the
//!    view's own last: the StartView carries them) → then serve (the new
//!    primary sends StartView).

use bytes::Bytes;
use strand_wire::{
    DVC_SUFFIX_HEADERS_MAX, DoViewChangeFlags, DoViewChangeHeader, HistoryStartRecord, Message,
    Msg, PrepareHeader, RequestStartViewHeader, StartViewChangeHeader, StartViewHeader, ViewId,
};
use zerocopy::IntoBytes;

use crate::effects::{DropReason, Effect, Effects, Event, LeaveReason};
use crate::epoch::{Transition, transition};
use crate::journal::SlotState;
use crate::merge::{Decision, DvcSummary, MergeParams, decide};
use crate::replica::{Replica, Status};
use crate::starts::{history_start_record, set_dvc_history_start, summary_from_message};
use crate::state::HistoryStart;
use crate::state_machine::StateMachine;

impl<S: StateMachine> Replica<S> {
    /// Moves to `new_view`: stops acking the old one, persists the view, and
    /// (once persisted) sends its DoViewChange to every replica.
    pub(crate) fn start_view_change(&mut self, new_view: ViewId, effects: &mut Effects) {
        assert!(
            new_view > self.view,
            "view {new_view} is not above {}",
            self.view
        );
        assert!(
            self.status != Status::Retired,
            "a retired replica moves to view {new_view}"
        );
        let awaiting = self.status == Status::AwaitingStateTransfer;
        self.end_quiet();
        self.set_view(new_view);
        if !awaiting {
            self.status = Status::ViewChange;
        }
        self.view_change = Default::default();
        self.adoption = None;
        self.votes.clear();
        self.abdicated = false;
        self.handover = None;
        self.start_patience = 0;
        self.progress.forget_acks();
        self.timers.heartbeat.stop();
        self.timers.primary.stop();
        self.timers.progress.stop();
        self.timers.prepare.stop();
        self.timers.probe.stop();
        if self.timers.view_change.ticking() {
            self.timers.view_change.backoff(&mut self.prng);
        } else {
            self.timers.view_change.start_jittered(&mut self.prng);
        }
        self.timers.view_change_retransmit.start();
        self.durable.view = new_view;
        self.request_persist(effects);
        effects.event(Event::ViewChangeStarted { view: new_view });
    }

    /// Votes to leave the current view: the primary is silent, the view
    /// change is stuck, or a restart's probes went unanswered. The view moves
    /// on only when a quorum votes so, which keeps a replica that can send but
    /// not receive from disturbing a healthy view.
    pub(crate) fn vote_leave_view(&mut self, reason: LeaveReason, effects: &mut Effects) {
        effects.event(Event::VotedToLeaveView {
            view: self.view,
            reason,
        });
        self.votes.vote(self.config.replica);
        let svc: StartViewChangeHeader = self.new_header();
        self.broadcast(
            Message::StartViewChange(Msg::new(svc, Bytes::new())),
            effects,
        );
        if !self.timers.view_change_retransmit.ticking() {
            self.timers.view_change_retransmit.start();
        }
        self.check_svc_quorum(effects);
    }

    /// The view a vote to leave the current one leads to: the next view
    /// number, in the epoch this replica's log has reached (a log that holds
    /// a `Reconfigure` op moves to the new epoch's views).
    pub(crate) fn next_view(&self) -> ViewId {
        let next = self.view.next();
        let epoch = self.log_epoch();
        if epoch > next.epoch && self.memberships.get(epoch).is_some() {
            ViewId::new(epoch, next.view)
        } else {
            next
        }
    }

    /// For a view of an epoch below this replica's log epoch (which it
    /// never joins): the same view number in the log's epoch.
    pub(crate) fn lifted(&self, view: ViewId) -> Option<ViewId> {
        let epoch = self.log_epoch();
        (view.epoch < epoch && self.memberships.get(epoch).is_some())
            .then(|| ViewId::new(epoch, view.view))
    }

    /// Votes needed to leave a view: a majority, and at least R, of the
    /// membership the next view belongs to; only its members' votes count.
    fn svc_quorum(&self) -> (u32, u32) {
        let next = self.next_view();
        // The next view is of the view's epoch (whose membership is kept at
        // hand) or of the log's, which `next_view` checked is known.
        let membership = self
            .memberships
            .get(next.epoch)
            .copied()
            .unwrap_or(self.view_membership);
        let members = membership.replica_count();
        let votes = self.votes.among(u32::from(membership.slots.bits()));
        let needed = membership.rule().view_change.max(members / 2 + 1);
        (votes.count_ones(), u32::from(needed))
    }

    fn check_svc_quorum(&mut self, effects: &mut Effects) {
        let (votes, needed) = self.svc_quorum();
        if votes >= needed {
            self.start_view_change(self.leave_target(), effects);
        }
    }

    /// The view a quorum's vote to leave the current one moves this
    /// replica to. A replica still recovering (it restarted, and no
    /// primary answered its probes: the whole group restarted) goes to the
    /// lowest view its preferred primary leads, unless the driver suspects
    /// that replica's node: one view change then both restarts the group
    /// and puts its primary where the cluster wants it, where the next view
    /// would take an election and a handover after it. Every recovering
    /// replica of the group reaches the same view this way; one that does
    /// not (it suspects the preferred node, or is not recovering) goes to
    /// the next view, and the lower of the two views follows the higher
    /// one's DoViewChange. A view change that stalls moves on to the next
    /// view, so a preferred primary that cannot start costs one view change
    /// timeout.
    fn leave_target(&self) -> ViewId {
        let next = self.next_view();
        if self.status != Status::Recovering || next.epoch != self.view.epoch {
            return next;
        }
        let preferred = self.preferred_primary();
        let live = preferred == self.config.replica
            || (self.is_peer(preferred) && !self.quiet.suspects(preferred));
        if live {
            self.lowest_view_led_by(preferred)
        } else {
            next
        }
    }

    /// Whether this replica has a working primary (and so ignores calls to
    /// leave for views it has not reached).
    fn healthy(&self) -> bool {
        self.status == Status::Normal && !self.votes.suspecting() && !self.abdicated
    }

    /// The view change took too long: vote to leave this view too.
    pub(crate) fn on_view_change_timeout(&mut self, effects: &mut Effects) {
        // A replica awaiting a state transfer votes too: it cannot report a
        // log, but it can tell that no view started (with one replica lost
        // and one awaiting, the others need its vote to move on).
        if matches!(
            self.status,
            Status::ViewChange | Status::AwaitingStateTransfer
        ) || self.adoption.is_some()
        {
            self.timers.view_change.backoff(&mut self.prng);
            self.vote_leave_view(LeaveReason::ViewChangeStuck, effects);
        } else {
            self.timers.view_change.stop();
        }
    }

    /// Resends what this replica owes (it may have been lost): its vote to
    /// leave the view, and in a view change its DoViewChange.
    pub(crate) fn retransmit_view_change(&mut self, effects: &mut Effects) {
        if self.votes.suspecting() {
            let svc: StartViewChangeHeader = self.new_header();
            self.broadcast(
                Message::StartViewChange(Msg::new(svc, Bytes::new())),
                effects,
            );
        }
        if !matches!(
            self.status,
            Status::ViewChange | Status::AwaitingStateTransfer
        ) {
            if !self.votes.suspecting() {
                self.timers.view_change_retransmit.stop();
            }
            return;
        }
        if self.persistence.view() < self.view {
            return;
        }
        self.announce_view_change(effects);
        if self.adoption.is_some() {
            self.repair(effects);
        }
    }

    /// Sends this replica's DoViewChange to every replica (the primary of the
    /// view merges them; the others learn the view from them). The primary
    /// records its own and tries to merge.
    pub(crate) fn announce_view_change(&mut self, effects: &mut Effects) {
        // A replica that gave up its log in the view it serves (a peer's
        // retention dropped ops it lacks) awaits a transfer in that view:
        // there is no view change to report on until it votes for one.
        if self.log_view >= self.view {
            return;
        }
        assert!(
            self.persistence.view() >= self.view,
            "a DoViewChange for view {} before the view is persisted",
            self.view
        );
        if self.adoption.is_none() {
            let dvc = self.do_view_change();
            self.broadcast(Message::DoViewChange(dvc), effects);
        }
        self.try_merge(effects);
    }

    /// A replica votes to leave its view.
    pub(crate) fn on_start_view_change(
        &mut self,
        svc: &StartViewChangeHeader,
        effects: &mut Effects,
    ) {
        let view = svc.prefix.view_id();
        let from = svc.prefix.replica;
        if view < self.view {
            // A straggler wants to leave a view the group has left: the
            // primary tells it where the group is.
            if self.is_serving_primary() {
                self.send_start_view(from, 0, effects);
            }
            effects.event(Event::Dropped {
                reason: DropReason::StaleView,
            });
            return;
        }
        if view > self.view {
            if self.healthy() || (self.is_serving_primary() && !self.abdicated) {
                // Views only advance by quorum, so a higher one exists: this
                // replica is behind. Ask that view's primary for it rather
                // than disturb anything; if no StartView comes within a probe
                // period, join (`on_probe_timeout`): the quorum that left
                // this view may need this replica's DoViewChange to start
                // the next (a primary whose own vote to leave, cast while
                // its adoption was slow, completed that quorum). (A primary
                // that abdicated, stalled, joins at once: the higher view's
                // primary may be the very replica that cannot answer,
                // restarting.)
                self.probe.heard_of(view);
                self.request_start_view(self.primary_of(view), effects);
                return;
            }
            if let Some(lifted) = self.lifted(view) {
                // The sender's epoch is below this log's: go to the same view
                // number of the log's epoch instead (its vote was for another view).
                if lifted > self.view {
                    self.start_view_change(lifted, effects);
                }
                return;
            }
            self.start_view_change(view, effects);
        }
        self.votes.heard(from);
        self.check_svc_quorum(effects);
    }

    /// This replica's DoViewChange for the current view.
    pub(crate) fn do_view_change(&self) -> Msg<DoViewChangeHeader> {
        let summary = self.own_summary();
        let mut header: DoViewChangeHeader = self.new_header();
        header.op.set(summary.op);
        header.commit.set(summary.commit);
        header.ack_op.set(summary.ack_op);
        header.cursor_tail.set(summary.cursor_tail);
        header.set_log_view_id(summary.log_view);
        header.flags = summary.flags.bits();
        header.present_bitset.set(summary.present);
        header.nack_bitset.set(summary.nack);
        if let Some(start) = &summary.history_start {
            set_dvc_history_start(&mut header, start);
        }
        let body = Bytes::copy_from_slice(summary.headers.as_bytes());
        Msg::new(header, body)
    }

    /// What this replica's DoViewChange says of its log: untrusted, and
    /// unsettled (a transferred prefix, untrusted too).
    fn own_log_flags(&self) -> DoViewChangeFlags {
        let mut flags = if self.trust.is_trusted() {
            DoViewChangeFlags::empty()
        } else {
            DoViewChangeFlags::UNTRUSTED_LOG
        };
        if self.durable.log_unsettled {
            assert!(
                !self.trust.is_trusted(),
                "a transferred prefix is untrusted"
            );
            flags |= DoViewChangeFlags::LOG_UNSETTLED;
        }
        flags
    }

    /// This replica's log as a view change would see it (what its
    /// DoViewChange says): for status output and tests.
    pub fn own_summary(&self) -> DvcSummary {
        let history_start = self
            .durable
            .latest_start()
            .filter(|start| start.view <= self.log_view);
        if self.status == Status::AwaitingStateTransfer {
            return DvcSummary {
                replica: self.config.replica,
                log_view: self.log_view,
                op: 0,
                commit: 0,
                ack_op: 0,
                cursor_tail: 0,
                flags: DoViewChangeFlags::UNTRUSTED_LOG
                    | DoViewChangeFlags::AWAITING_STATE_TRANSFER,
                headers: Vec::new(),
                present: 0,
                nack: 0,
                history_start,
            };
        }
        let head = self.journal.head();
        let low = head
            .saturating_sub(DVC_SUFFIX_HEADERS_MAX as u64 - 1)
            .max(self.journal.base())
            .max(1);
        let mut headers = Vec::new();
        let mut present = 0u128;
        let mut nack = 0u128;
        for (op, slot) in self.journal.slots_from(low) {
            let Some(slot) = slot else { continue };
            let bit = 1u128 << headers.len();
            let has_body = slot.state.stored(false) || slot.prepare.is_some();
            if has_body {
                present |= bit;
            } else if matches!(slot.state, SlotState::Missing | SlotState::Writing)
                && !self.faulty_ops.contains(&op)
            {
                nack |= bit;
            }
            headers.push(slot.header);
        }
        assert!(
            headers.len() <= DVC_SUFFIX_HEADERS_MAX,
            "{} headers in a DoViewChange",
            headers.len()
        );
        let flags = self.own_log_flags();
        DvcSummary {
            replica: self.config.replica,
            log_view: self.log_view,
            op: head,
            commit: self.commit,
            ack_op: self.ack_op(),
            cursor_tail: self.cursors.tail,
            flags,
            headers,
            present,
            nack,
            history_start,
        }
    }

    /// The highest op this replica may have acked: ops are acked only in a
    /// contiguous run from the commit number, each stored per the durability
    /// policy; a damaged op may have been acked before the damage.
    fn ack_op(&self) -> u64 {
        let durable = self.ack_needs_durable();
        let mut op = self.commit;
        loop {
            let next = op + 1;
            let acked = self.faulty_ops.contains(&next)
                || self
                    .journal
                    .get(next)
                    .is_some_and(|slot| slot.state.stored(durable));
            if !acked || next > self.journal.head() {
                return op;
            }
            op = next;
        }
    }

    /// A DoViewChange for this replica as the candidate primary.
    pub(crate) fn on_do_view_change(
        &mut self,
        dvc: Msg<DoViewChangeHeader>,
        effects: &mut Effects,
    ) {
        let view = dvc.header().prefix.view_id();
        let from = dvc.header().prefix.replica;
        if view < self.view {
            effects.event(Event::Dropped {
                reason: DropReason::StaleView,
            });
            return;
        }
        if let Some(lifted) = self.lifted(view).filter(|_| view > self.view) {
            // A view of an epoch below this log's: never joined (see the
            // `reconfigure` module); its number leads to the log's epoch.
            if lifted > self.view {
                self.start_view_change(lifted, effects);
            }
            effects.event(Event::Dropped {
                reason: DropReason::StaleView,
            });
            return;
        }
        if view > self.view {
            // A quorum moved on to this view: follow.
            self.start_view_change(view, effects);
        }
        if self.status == Status::Normal {
            if !self.is_primary() {
                return;
            }
            // A straggler: it missed the StartView.
            self.send_start_view(from, 0, effects);
            return;
        }
        // Every replica keeps the DoViewChanges of its view: the primary merges
        // them, the others can say why the view waits (`attention`).
        let Some(summary) = summary_from_message(&dvc) else {
            effects.event(Event::Dropped {
                reason: DropReason::Invalid,
            });
            return;
        };
        self.view_change.dvcs.insert(from, summary);
        self.try_merge(effects);
    }

    /// Decides the canonical log once the DoViewChanges allow it (the
    /// primary of the view acts on it; the others only note why it waits).
    pub(crate) fn try_merge(&mut self, effects: &mut Effects) {
        if self.status != Status::ViewChange
            || self.persistence.view() < self.view
            || self.view_change.canonical.is_some()
            || self.adoption.is_some()
        {
            return;
        }
        let own = self.own_summary();
        self.view_change.dvcs.insert(self.config.replica, own);
        let mut dvcs: Vec<DvcSummary> = self.view_change.dvcs.values().cloned().collect();
        let params = self.merge_params(&dvcs);
        dvcs.retain(|dvc| params.members.contains(dvc.replica));
        match decide(&dvcs, params) {
            Decision::Wait { reason, awaited } => {
                self.view_change.waiting = Some((reason, awaited));
                if self.is_primary()
                    && (!self.timers.warning.ticking() || self.timers.warning.fired())
                {
                    self.timers.warning.start();
                    effects.event(Event::ViewChangeWaiting {
                        view: self.view,
                        reason,
                        awaited,
                    });
                }
            }
            Decision::Ready(_) if !self.is_primary() => self.view_change.waiting = None,
            Decision::Ready(canonical) => {
                self.view_change.waiting = None;
                effects.event(Event::Merged {
                    view: self.view,
                    source: canonical.source,
                    op: canonical.op,
                    dropped: canonical.dropped,
                });
                if self.view_change.accept_loss {
                    effects.event(Event::AcceptedLoss {
                        view: self.view,
                        op: canonical.op,
                    });
                }
                let start = HistoryStart {
                    view: self.view,
                    op: canonical.op,
                    cursor_tail: self.cursors.tail,
                    replica: self.config.replica,
                    accepted_loss: self.view_change.accept_loss,
                    offset_end: self.start_offset_end(&canonical),
                    checksum: self.start_checksum(&canonical),
                };
                // The view's logs follow this replica's history: its cursor
                // log is the view's as it stands.
                let history = self.durable.history_with(start);
                let headers = canonical.headers.clone();
                let (op, commit, source) = (canonical.op, canonical.commit, canonical.source);
                self.view_change.canonical = Some(canonical);
                self.begin_adoption(self.view, &headers, op, commit, history, source, effects);
            }
        }
    }

    /// The quorums of this view change: within the view's epoch, or, while
    /// it moves the group to a new epoch by a view change and no reporter's
    /// log is in that epoch yet, joint with every membership from the epoch
    /// the reporters' logs reached (see [`MergeParams::spanning`]).
    /// Any reporter counts here, trusted or not: a log view of the new
    /// epoch is durable proof that a view of it started (after its own joint
    /// quorum), whatever the log lost since; its history start guards the rest.
    fn merge_params(&self, dvcs: &[DvcSummary]) -> MergeParams {
        let accept_loss = self.view_change.accept_loss;
        let new = &self.view_membership;
        let reported = dvcs
            .iter()
            .map(|dvc| dvc.log_view.epoch)
            .max()
            .unwrap_or(0)
            .min(new.epoch);
        #[cfg(feature = "mutations")]
        if !self.old_quorum_gate {
            return MergeParams::within(new, accept_loss, self.trusted_gate);
        }
        if reported == new.epoch {
            return MergeParams::within(new, accept_loss, self.trusted_gate);
        }
        let older: Vec<_> = (reported..new.epoch)
            .map(|epoch| self.memberships.get(epoch).copied())
            .collect();
        // Reached in place from the epoch before (and that one known): the
        // new membership's own quorum meets every old write quorum.
        let in_place = reported + 1 == new.epoch
            && older[0].is_some_and(|old| transition(&old, new) == Transition::InPlace);
        if in_place {
            return MergeParams::within(new, accept_loss, self.trusted_gate);
        }
        MergeParams::spanning(&older, new, accept_loss, self.trusted_gate)
    }

    /// Sends this primary's StartView to `to`.
    pub(crate) fn send_start_view(&self, to: u8, nonce: u64, effects: &mut Effects) {
        if let Some(message) = self.start_view_message(nonce) {
            self.send(to, message, effects);
        }
    }

    /// This primary's StartView (none before its view's start is recorded).
    pub(crate) fn start_view_message(&self, nonce: u64) -> Option<Message> {
        assert!(
            self.is_primary(),
            "a StartView of view {} from a replica that is not its primary",
            self.view
        );
        let start = match self
            .durable
            .latest_start()
            .filter(|start| start.view == self.view)
        {
            Some(start) => start,
            // View 0 starts empty without a recorded start.
            None if self.view == ViewId::ZERO => HistoryStart::default(),
            None => return None,
        };
        let head = self.journal.head();
        let low = head
            .saturating_sub(DVC_SUFFIX_HEADERS_MAX as u64 - 1)
            .max(self.journal.base())
            .max(1);
        let headers: Vec<PrepareHeader> = self
            .journal
            .slots_from(low)
            .filter_map(|(_, slot)| slot.map(|slot| slot.header))
            .collect();
        let mut header: StartViewHeader = self.new_header();
        header.op.set(head);
        header.commit.set(self.commit);
        header.cursor_tail.set(start.cursor_tail);
        header.nonce.set(nonce);
        header.start_op.set(start.op.min(head));
        header.set_start_offset_end(start.offset_end);
        header.set_start_checksum(start.checksum);
        let starts: Vec<HistoryStartRecord> = self
            .durable
            .history_starts
            .iter()
            .map(history_start_record)
            .collect();
        assert!(
            starts.len() <= crate::state::HISTORY_STARTS_MAX,
            "{} history starts in a StartView",
            starts.len()
        );
        header.history_start_count = starts.len() as u8;
        let mut body = Vec::with_capacity(headers.as_bytes().len() + starts.as_bytes().len());
        body.extend_from_slice(headers.as_bytes());
        body.extend_from_slice(starts.as_bytes());
        Some(Message::StartView(Msg::new(header, Bytes::from(body))))
    }

    /// A restarted or lagging replica asks for the current view.
    pub(crate) fn on_request_start_view(
        &mut self,
        request: &RequestStartViewHeader,
        effects: &mut Effects,
    ) {
        if self.is_serving_primary() && request.prefix.view_id() <= self.view {
            self.send_start_view(request.prefix.replica, request.nonce.get(), effects);
        }
    }

    /// Enters Recovering: asks every replica for the current view.
    pub(crate) fn start_probing(&mut self, effects: &mut Effects) {
        self.status = Status::Recovering;
        self.probe.restart();
        self.timers.probe.start_jittered(&mut self.prng);
        self.broadcast_probe(effects);
    }

    fn broadcast_probe(&mut self, effects: &mut Effects) {
        let nonce = self.probe.next_nonce(&mut self.prng);
        let mut request: RequestStartViewHeader = self.new_header();
        request.nonce.set(nonce);
        self.broadcast(
            Message::RequestStartView(Msg::new(request, Bytes::new())),
            effects,
        );
    }

    /// No answer to the probe: ask again, and after enough tries elect.
    pub(crate) fn on_probe_timeout(&mut self, effects: &mut Effects) {
        if self.status != Status::Recovering {
            self.timers.probe.stop();
            self.join_unanswered_higher_view(effects);
            return;
        }
        if self.probe.unanswered() >= self.config.timeouts.start_view_probes_max {
            self.timers.probe.start_jittered(&mut self.prng);
            self.broadcast_probe(effects);
            self.vote_leave_view(LeaveReason::Unanswered, effects);
        } else {
            self.timers.probe.start_jittered(&mut self.prng);
            self.broadcast_probe(effects);
        }
    }

    /// A healthy replica asked for the StartView of a higher view a probe
    /// period ago and is still below it: the view has not started, so it
    /// joins the view change there.
    fn join_unanswered_higher_view(&mut self, effects: &mut Effects) {
        let Some(view) = self.probe.take_higher_view() else {
            return;
        };
        if view <= self.view || self.status != Status::Normal {
            return;
        }
        match self.lifted(view) {
            Some(lifted) if lifted > self.view => self.start_view_change(lifted, effects),
            Some(_) => {}
            None => self.start_view_change(view, effects),
        }
    }

    /// Asks replica `to` (the primary of a view this replica has not
    /// adopted) for its StartView, at most once per probe period.
    pub(crate) fn request_start_view(&mut self, to: u8, effects: &mut Effects) {
        if self.status == Status::Recovering || self.timers.probe.ticking() {
            return;
        }
        self.timers.probe.start();
        if !self.is_peer(to) {
            return;
        }
        let nonce = self.probe.next_nonce(&mut self.prng);
        let mut request: RequestStartViewHeader = self.new_header();
        request.nonce.set(nonce);
        self.send(
            to,
            Message::RequestStartView(Msg::new(request, Bytes::new())),
            effects,
        );
    }

    /// The partition diverged from history it applied: move it aside and
    /// rebuild it by state transfer.
    pub(crate) fn quarantine(&mut self, diverged_op: u64, effects: &mut Effects) {
        assert!(
            diverged_op >= 1 && diverged_op <= self.commit,
            "quarantining at op {diverged_op}, which is not applied (commit {})",
            self.commit
        );
        effects.event(Event::AppliedDivergence { op: diverged_op });
        effects.push(Effect::Quarantine {
            agreed_op: diverged_op - 1,
        });
        self.await_state_transfer(self.primary_index(), diverged_op - 1, effects);
    }

    /// Gives up on the log at hand and waits for a state transfer from
    /// `from` (or the next member) reaching at least `op_min`. The
    /// installed log is a committed prefix no view vouches for: untrusted
    /// until a view is adopted.
    pub(crate) fn await_state_transfer(&mut self, from: u8, op_min: u64, effects: &mut Effects) {
        assert!(
            self.status != Status::Retired,
            "a retired replica awaits a state transfer"
        );
        self.status = Status::AwaitingStateTransfer;
        self.adoption = None;
        self.durable.log_unsettled = true;
        if self.trust.lost() {
            effects.event(Event::UntrustedLog { untrusted: true });
        }
        effects.push(Effect::StartStateTransfer { from, op_min });
    }
}
