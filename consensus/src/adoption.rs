//! Adopting a view's log: a backup's StartView, the verification of the
//! log below the view's headers, cuts of what contradicts the canonical
//! log, and the persist of `log_view = view` after which the replica
//! serves in the view (steps 2 and 3 of the view change's durable order,
//! see `view_change`).

use bytes::Bytes;
use strand_wire::{
    CommandHeader, DVC_SUFFIX_HEADERS_MAX, Message, Msg, PrepareHeader, StartViewHeader, ViewId,
};

use crate::effects::{DropReason, Effect, Effects, Event};
use crate::epoch::SlotSet;
use crate::journal::JOURNAL_SLOTS_MAX;
use crate::replica::{Adoption, Replica, Status};
use crate::starts::start_view_history;
use crate::state::{HistoryStart, cursor_divergence};
use crate::state_machine::StateMachine;

impl<S: StateMachine> Replica<S> {
    /// A StartView from the primary of its view.
    pub(crate) fn on_start_view(
        &mut self,
        start_view: Msg<StartViewHeader>,
        effects: &mut Effects,
    ) {
        let header = *start_view.header();
        let view = header.prefix.view_id();
        let from = header.prefix.replica;
        if let Err(reason) = self.start_view_admitted(view, from) {
            effects.event(Event::Dropped { reason });
            return;
        }
        // The view's primary spoke: no patience for it is left to give.
        self.start_patience = 0;
        let member = self
            .memberships
            .slots_from(view.epoch)
            .contains(self.config.replica);
        if member && !self.peer_slots(view.epoch).contains(self.config.replica) {
            // A view of the epoch before the one a view change adds this
            // replica in: it joins at that epoch's first view instead.
            effects.event(Event::Dropped {
                reason: DropReason::WrongStatus,
            });
            return;
        }
        if !member {
            // A view of an epoch this replica is no member of (nor of any
            // later one it knows) has started.
            self.retire(view.epoch, effects);
            return;
        }
        if self.status == Status::AwaitingStateTransfer {
            return;
        }
        if let Some(adoption) = &self.adoption {
            if adoption.view == view {
                return; // already adopting it
            }
        }
        let Ok((headers, starts)) = header.parts(start_view.body()) else {
            effects.event(Event::Dropped {
                reason: DropReason::Invalid,
            });
            return;
        };
        let headers = headers.to_vec();
        let history = start_view_history(&header, starts);
        self.enter_started_view(view);
        let op = header.op.get();
        self.begin_adoption(
            view,
            &headers,
            op,
            header.commit.get(),
            history,
            from,
            effects,
        );
    }

    /// Why a StartView for `view` from `from` is dropped, if it is: a view
    /// below this replica's (or its own, once normal in it), one below a
    /// history start it knows (a state transfer may bring one of a view it
    /// never entered: that start's view began after it), or one not from
    /// that view's primary.
    fn start_view_admitted(&self, view: ViewId, from: u8) -> Result<(), DropReason> {
        let superseded = self
            .durable
            .latest_start()
            .is_some_and(|start| start.view > view);
        if view < self.view || (view == self.view && self.status == Status::Normal) || superseded {
            return Err(DropReason::StaleView);
        }
        if from != self.primary_of(view) || from == self.config.replica {
            return Err(DropReason::Invalid);
        }
        Ok(())
    }

    /// Enters the started `view` to adopt its log: the view raised if it
    /// is higher, the primary's and backup's timers stopped, the view
    /// change's own progress forgotten and its timeout running.
    fn enter_started_view(&mut self, view: ViewId) {
        if view > self.view {
            self.set_view(view);
            self.durable.view = view;
        }
        self.status = Status::ViewChange;
        self.timers.heartbeat.stop();
        self.timers.primary.stop();
        self.timers.prepare.stop();
        self.timers.probe.stop();
        self.view_change = Default::default();
        if !self.timers.view_change.ticking() {
            self.timers.view_change.start_jittered(&mut self.prng);
        }
        assert!(
            self.view >= view,
            "the replica is in the started view or later"
        );
    }

    /// Installs the canonical suffix from the top down while it stays
    /// contiguous with what is verified.
    fn install_contiguous_suffix(&mut self, headers: &[PrepareHeader], effects: &mut Effects) {
        assert!(
            self.adoption.is_some(),
            "a view's suffix installed outside an adoption"
        );
        for header in headers.iter().rev() {
            let header_op = header.op.get();
            let upper = self
                .adoption
                .as_ref()
                .map_or(0, |adoption| adoption.verified_from);
            if header_op <= self.commit || header_op + 1 != upper {
                continue;
            }
            self.replace_with_canonical(header, effects);
            self.set_verified_from(header_op);
        }
    }

    /// The new primary holds every body of the canonical log before it
    /// starts the view, its own committed ops included: one whose entry it
    /// cannot read (a header it lacks is learned here) is repaired now from a
    /// reporter that holds it, which the merge made sure of. Once a view of a
    /// new epoch starts, the members it removed are fenced, and they may
    /// hold the only copies.
    fn learn_committed_headers(&mut self, headers: &[PrepareHeader], effects: &mut Effects) {
        let base = self.journal.base();
        for header in headers {
            let header_op = header.op.get();
            if header_op > self.commit {
                break;
            }
            if header_op >= base && self.journal.header(header_op).is_none() {
                self.fill_slot(header, effects);
            }
        }
    }

    /// Starts installing a view's canonical log (headers: its suffix ending at
    /// `op`; `history`: the starts its logs follow, its own last).
    /// Divergence from applied history quarantines the partition.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn begin_adoption(
        &mut self,
        view: ViewId,
        headers: &[PrepareHeader],
        op: u64,
        commit: u64,
        history: Vec<HistoryStart>,
        source: u8,
        effects: &mut Effects,
    ) {
        assert!(headers.last().is_none_or(|last| last.op.get() == op));
        assert_eq!(history.last().map(|start| start.view), Some(view));
        assert_eq!(
            view, self.view,
            "adopting a view other than the current one"
        );
        assert_eq!(
            self.status,
            Status::ViewChange,
            "adopting view {view} outside a view change"
        );
        if let Some(diverged) = self.applied_divergence(headers) {
            self.quarantine(diverged, effects);
            return;
        }
        self.commit_max = self.commit_max.max(commit);
        let window_end = self.commit + JOURNAL_SLOTS_MAX;
        self.adoption = Some(Adoption {
            view,
            op,
            commit,
            history,
            source,
            verified_from: op.min(window_end) + 1,
            truncating: None,
            persisting: None,
            headers: headers.to_vec(),
            requested_upper: 0,
        });
        // Cut a longer tail (an old primary's uncommitted ops, the cursor
        // events where its history leaves the view's) first.
        let cursor_cut = self.cursor_cut_for(view);
        self.cut_to_view(op.max(self.commit), cursor_cut, effects);
        self.install_contiguous_suffix(headers, effects);
        if source == self.config.replica {
            self.set_verified_from(self.commit + 1);
        }
        if self.config.replica == self.primary_of(view) {
            self.learn_committed_headers(headers, effects);
        }
        self.continue_verification(effects);
        self.flush_writes(effects);
        self.schedule_repair();
        self.advance_adoption(effects);
    }

    /// Where this replica's cursor log leaves the history of `view`, which
    /// it is adopting (reference A's cut, the lowest start after the last
    /// one both histories share; see [`cursor_divergence`]). A new primary
    /// cuts nothing: the view's cursor log is its own. Nor does a replica
    /// whose log was settled in the view already.
    pub(crate) fn cursor_cut_for(&self, view: ViewId) -> Option<u64> {
        let new_primary = self.config.replica == self.primary_of(view);
        if new_primary || self.log_view >= view {
            return None;
        }
        let adoption = self.adoption.as_ref().expect("adopting");
        let cut = cursor_divergence(&self.durable.history_starts, &adoption.history);
        let start = adoption.history.last().expect("the view's start");
        debug_assert!(
            cut.is_some_and(|cut| cut <= start.cursor_tail)
                || self.durable.history_starts.contains(start),
            "the cut reaches the view's start unless this replica's history holds it"
        );
        cut
    }

    /// The first op of `headers` at or below the commit number that contradicts
    /// this replica's applied log, if any.
    pub(crate) fn applied_divergence(&self, headers: &[PrepareHeader]) -> Option<u64> {
        for header in headers {
            let op = header.op.get();
            if op > self.commit {
                break;
            }
            if self
                .journal
                .checksum(op)
                .is_some_and(|checksum| checksum != header.checksum())
            {
                return Some(op);
            }
        }
        let first = headers.first()?;
        let below = first.op.get() - 1;
        if below >= 1 && below <= self.commit {
            if let Some(checksum) = self.journal.checksum(below) {
                if checksum != first.parent.get() {
                    return Some(below);
                }
            }
        }
        None
    }

    /// Puts canonical `header` into the journal, removing a divergent op at
    /// its place (and, in storage, everything from there up).
    pub(crate) fn replace_with_canonical(&mut self, header: &PrepareHeader, effects: &mut Effects) {
        let op = header.op.get();
        assert!(op > self.commit);
        if let Some(existing) = self.journal.header(op) {
            if existing.checksum() == header.checksum() {
                return;
            }
            self.forget_divergent(op, effects);
        }
        if op >= self.journal.base() {
            self.fill_slot(header, effects);
        }
    }

    /// Removes this replica's divergent op `op` from the journal (leaving a
    /// gap, or lowering the head) and everything from it up from storage.
    pub(crate) fn forget_divergent(&mut self, op: u64, effects: &mut Effects) {
        assert!(
            op > self.commit,
            "divergent op {op} at or below the commit number"
        );
        if op == self.journal.head() {
            self.truncate_log(op - 1, effects);
        } else {
            self.journal.forget(op);
            self.truncate_storage(op - 1, effects);
        }
    }

    /// Walks the adoption's verified boundary down: this replica's own ops
    /// below it are checked one by one against the canonical chain (a match
    /// vouches for the op just below through its parent checksum, a mismatch
    /// is removed), and missing canonical headers are asked of the source.
    /// A match never ends the walk early: the journal below it need not be
    /// one contiguous chain (a gap left by an earlier adoption, repairs).
    pub(crate) fn continue_verification(&mut self, effects: &mut Effects) {
        loop {
            let Some(adoption) = &self.adoption else {
                return;
            };
            let upper = adoption.verified_from;
            if upper <= self.commit + 1 {
                return;
            }
            let ours = (self.commit + 1..upper)
                .rev()
                .find(|op| self.journal.header(*op).is_some() || self.faulty_ops.contains(op));
            let Some(own_op) = ours else {
                if self.config.replica == self.primary_of(adoption.view) {
                    // Nothing of its own below the boundary: a new primary
                    // needs every body from its commit up, so the canonical
                    // headers fill its gaps (a backup repairs them once
                    // serving).
                    self.request_verification_headers(false, effects);
                } else {
                    self.set_verified_from(self.commit + 1);
                }
                return;
            };
            if self.journal.header(own_op).is_none() {
                // A damaged entry of unknown content: fetch the canonical header.
                self.request_verification_headers(false, effects);
                return;
            }
            let canonical_above = if own_op + 1 == upper {
                self.journal.header(upper).map(|header| header.parent.get())
            } else {
                None
            };
            match canonical_above {
                // Verified through the chain; the walk goes on op by op, since
                // an earlier, unfinished adoption may have left this
                // replica's own ops below a gap that no chain vouches for.
                Some(parent) if self.journal.checksum(own_op) == Some(parent) => {
                    self.set_verified_from(own_op);
                }
                Some(_) => self.forget_divergent(own_op, effects),
                None => {
                    self.request_verification_headers(false, effects);
                    return;
                }
            }
        }
    }

    pub(crate) fn set_verified_from(&mut self, op: u64) {
        let adoption = self
            .adoption
            .as_mut()
            .expect("a verified boundary belongs to an adoption");
        adoption.verified_from = op;
    }

    /// Asks the adoption's source for the canonical headers just below the
    /// verified boundary, at most once per boundary, unless `force`d by the repair timer
    /// (so that lost or duplicated answers never multiply the requests).
    pub(crate) fn request_verification_headers(&mut self, force: bool, effects: &mut Effects) {
        let commit = self.commit;
        let me = self.config.replica;
        let Some(adoption) = &mut self.adoption else {
            return;
        };
        let upper = adoption.verified_from;
        if upper <= commit + 1 || adoption.source == me {
            return;
        }
        if !force && adoption.requested_upper == upper {
            return;
        }
        adoption.requested_upper = upper;
        let source = adoption.source;
        let op_max = upper - 1;
        let op_min = op_max
            .saturating_sub(strand_wire::HEADERS_PER_MESSAGE_MAX as u64 - 1)
            .max(commit + 1);
        let mut request: strand_wire::RequestHeadersHeader = self.new_header();
        request.op_min.set(op_min);
        request.op_max.set(op_max);
        self.send(
            source,
            Message::RequestHeaders(Msg::new(request, Bytes::new())),
            effects,
        );
    }

    /// Canonical headers from the adoption's source, just below the verified
    /// boundary: install them top down until one matches this replica's log.
    pub(crate) fn on_verification_headers(
        &mut self,
        headers: &[PrepareHeader],
        effects: &mut Effects,
    ) {
        for header in headers.iter().rev() {
            let Some(adoption) = &self.adoption else {
                return;
            };
            let upper = adoption.verified_from;
            let op = header.op.get();
            if op + 1 != upper || op <= self.commit {
                continue;
            }
            if let Some(above) = self.journal.header(upper) {
                if above.parent.get() != header.checksum() {
                    effects.event(Event::Dropped {
                        reason: DropReason::Invalid,
                    });
                    return;
                }
            }
            if self.journal.checksum(op) != Some(header.checksum()) {
                self.replace_with_canonical(header, effects);
            }
            self.set_verified_from(op);
        }
        self.continue_verification(effects);
        self.flush_writes(effects);
        self.schedule_repair();
        self.advance_adoption(effects);
    }

    /// Moves an adoption on as far as storage and repairs allow.
    pub(crate) fn advance_adoption(&mut self, effects: &mut Effects) {
        let Some(adoption) = &self.adoption else {
            return;
        };
        if adoption.persisting.is_some() || adoption.truncating.is_some() {
            return;
        }
        if adoption.verified_from > self.commit + 1 {
            return; // waiting for canonical headers from the source
        }
        let new_primary = self.config.replica == self.primary_of(adoption.view);
        if new_primary {
            let op = adoption.op;
            let low = adoption
                .headers
                .first()
                .map_or(self.commit + 1, |header| header.op.get())
                .min(self.commit + 1)
                .max(self.journal.base());
            let complete = (low..=op).all(|slot_op| {
                self.journal
                    .get(slot_op)
                    .is_some_and(|slot| slot.state.stored(true))
            });
            if !complete {
                return;
            }
        }
        let view = adoption.view;
        let history = adoption.history.clone();
        let adoption_headers = adoption.headers.clone();
        let adoption_op = adoption.op;
        self.durable.view = self.durable.view.max(view);
        self.durable.log_view = view;
        // The log is reconciled with the view's canonical log: settled.
        self.durable.log_unsettled = false;
        self.durable.commit = self.commit;
        // Its cursor log was cut where it left the view's history: it
        // follows that history now.
        self.durable.adopt_history(&history);
        self.durable.view_headers = self.view_headers_for(adoption_headers);
        if !self.trust.is_trusted() {
            // It may have acked any op up to this view's head before its crash.
            self.durable.maybe_acked_op = self.durable.maybe_acked_op.max(adoption_op);
        }
        let sequence = self.request_persist(effects);
        if let Some(adoption) = &mut self.adoption {
            adoption.persisting = Some(sequence);
        }
    }

    /// The view headers to persist: the last `DVC_SUFFIX_HEADERS_MAX` of the
    /// adopted suffix.
    pub(crate) fn view_headers_for(&self, adopted: Vec<PrepareHeader>) -> Vec<PrepareHeader> {
        let mut headers = adopted;
        let keep = DVC_SUFFIX_HEADERS_MAX;
        if headers.len() > keep {
            headers.drain(..headers.len() - keep);
        }
        headers
    }

    /// A persist completed: announce a fenced view, or finish an adoption.
    pub(crate) fn on_persisted(&mut self, effects: &mut Effects) {
        if let Some(adoption) = &self.adoption {
            if adoption
                .persisting
                .is_some_and(|sequence| self.persistence.is_done(sequence))
                && self.persistence.view() >= adoption.view
            {
                self.finish_adoption(effects);
                return;
            }
        }
        let announce = matches!(
            self.status,
            Status::ViewChange | Status::AwaitingStateTransfer
        ) && self.adoption.is_none()
            && self.persistence.view() == self.view
            && !self.view_change.announced;
        if announce {
            self.view_change.announced = true;
            self.announce_view_change(effects);
        }
    }

    /// The view's log is installed and its view persisted: serve in it.
    pub(crate) fn finish_adoption(&mut self, effects: &mut Effects) {
        let adoption = self.adoption.take().expect("finishing an adoption");
        assert_eq!(self.view, adoption.view);
        assert!(
            adoption
                .persisting
                .is_some_and(|sequence| self.persistence.is_done(sequence)),
            "serving view {} before the persist that settles its log",
            adoption.view
        );
        if !self.trust.is_trusted() {
            // Before its crash this replica may have acked any op above what
            // it recovered, up to this view's head (anything acked above that
            // was dropped by a nack quorum of trusted replicas). Until each
            // is durable again it must never nack one: treat them as damaged.
            let maybe_acked = self.recovered_head + 1..=adoption.op;
            self.faulty_ops.extend(maybe_acked.filter(|op| {
                *op > self.commit
                    && !self
                        .journal
                        .get(*op)
                        .is_some_and(|slot| slot.state.stored(true))
            }));
            self.trust.settled();
            effects.event(Event::UntrustedLog { untrusted: false });
        }
        self.log_view = adoption.view;
        self.commit_max = self.commit_max.max(adoption.commit);
        let new_primary = self.is_primary();
        // Members of the epoch before that this view's membership leaves out
        // hear the StartView too, once: it is how they learn they retired.
        let leaving = self
            .peer_slots(self.view.epoch)
            .intersection(SlotSet::from_bits(!self.view_membership.slots.bits()));
        self.enter_normal(effects);
        if new_primary {
            for to in self.others().collect::<Vec<_>>() {
                self.send_start_view(to, 0, effects);
            }
            if let Some(message) = self.start_view_message(0) {
                for to in leaving.iter() {
                    effects.push(Effect::Send {
                        to,
                        message: message.clone(),
                    });
                }
            }
        } else {
            self.commit_stored(effects);
        }
    }
}
