//! Reassignment inside a group: learning new memberships, the epoch a log
//! has reached, and the `Reconfigure` op that moves a group to a new
//! membership in place (every member stays, no more copies confirm), with
//! no view change.
//!
//! The rules (see [`crate::epoch`] for why they are safe):
//! - The primary proposes the op once the driver assigned a membership of
//!   the next epoch that [`transition`] classifies as in place. It is
//!   committed by `W` of the old membership; every op after it names the
//!   new epoch and commits on `W'` of the new one, whose new members count
//!   only once they hold the whole prefix (an ack means exactly that).
//! - A replica's *log epoch* is the epoch after its log's head. A vote to
//!   leave a view leads to the next view of the log epoch, and a replica
//!   never follows a view of an epoch below its log's: its log holds a
//!   `Reconfigure` that a view of the older epoch could only drop if it had
//!   not committed, and the views of the new epoch are the higher ones.

use strand_wire::{Msg, PrepareHeader, ViewId};

use crate::effects::{Effects, Event};
use crate::epoch::{Membership, Transition, transition};
use crate::normal::PIPELINE_PREPARES_MAX;
use crate::replica::{Replica, Status};
use crate::state_machine::StateMachine;

impl<S: StateMachine> Replica<S> {
    /// The driver's newest assignment for this group (from the metadata
    /// plane's catalog). A membership of the epoch after the log's, if the
    /// change is in place, is taken up by the primary as a `Reconfigure` op;
    /// any membership is remembered so that frames of its epoch are
    /// understood. Changes that need a view change are not taken up here.
    pub fn on_assignment(&mut self, membership: Membership, effects: &mut Effects) {
        self.wake(effects);
        let keep_from = self.view.epoch.min(self.log_view.epoch);
        if let Err(conflict) = self.memberships.learn(membership, keep_from) {
            panic!("the driver named two memberships for one epoch: {conflict:?}");
        }
        if membership.epoch > self.log_epoch()
            && self
                .target
                .is_none_or(|target| target.epoch < membership.epoch)
        {
            self.target = Some(membership);
        }
        self.maybe_reconfigure(effects);
        self.maybe_seal_for_target(effects);
    }

    /// An old member that learns of a next membership reached by a view
    /// change seals its epoch: it moves to the first view of the new epoch
    /// above its own whose primary stays a member (so it holds the log),
    /// persisting that view before it reports its log there. No votes are
    /// needed: the metadata plane's commit is the decision to leave.
    pub(crate) fn maybe_seal_for_target(&mut self, effects: &mut Effects) {
        let Some(target) = self.target else {
            return;
        };
        let epoch = self.log_epoch();
        if target.epoch != epoch + 1
            || self.view.epoch >= target.epoch
            || matches!(self.status, Status::AwaitingStateTransfer | Status::Retired)
        {
            return;
        }
        let Some(current) = self.memberships.get(epoch).copied() else {
            return;
        };
        if !current.slots.contains(self.config.replica)
            || transition(&current, &target) != Transition::ViewChange
        {
            return;
        }
        let staying = current.slots.intersection(target.slots);
        if staying.is_empty() {
            return; // the metadata plane refuses such a change
        }
        let mut view = ViewId::new(target.epoch, self.view.view.saturating_add(1));
        while !staying.contains(target.primary_of(view.view)) {
            view = view.next();
        }
        self.start_view_change(view, effects);
    }

    /// Leaves the group for good: the membership of `epoch` does not include
    /// this replica. Called when a view of such an epoch starts, or by the
    /// driver when the metadata plane says so.
    pub fn retire(&mut self, epoch: u32, effects: &mut Effects) {
        if self.status == Status::Retired {
            return;
        }
        self.wake(effects);
        self.status = Status::Retired;
        self.adoption = None;
        self.view_change = Default::default();
        self.votes.retire();
        for timeout in self.timers.all_mut() {
            timeout.stop();
        }
        effects.event(Event::Retired { epoch });
    }

    /// The epoch this replica's log has reached: the one after its head op
    /// (the next one if that op is a `Reconfigure`), or its log view's.
    pub fn log_epoch(&self) -> u32 {
        let head = self.journal.head();
        let after_head = self.journal.header(head).map_or(0, epoch_after);
        after_head.max(self.log_view.epoch)
    }

    /// Primary: prepares the `Reconfigure` op of an in-place target, if one
    /// waits and the pipeline has room (called again after commits).
    pub(crate) fn maybe_reconfigure(&mut self, effects: &mut Effects) {
        let Some(target) = self.target else {
            return;
        };
        let epoch = self.log_epoch();
        if target.epoch <= epoch {
            self.target = None;
            return;
        }
        if !self.is_serving_primary()
            || target.epoch != epoch + 1
            || self.journal.head() - self.commit >= PIPELINE_PREPARES_MAX
        {
            return;
        }
        let Some(current) = self.memberships.get(epoch) else {
            return;
        };
        if transition(current, &target) != Transition::InPlace {
            return;
        }
        let mut header = self.next_prepare_header();
        header.set_next_membership(target.epoch, target.slots.bits(), target.confirm);
        effects.event(Event::Reconfiguring {
            op: header.op.get(),
            epoch: target.epoch,
        });
        self.append_prepare(Msg::new(header, bytes::Bytes::new()), effects);
        debug_assert_eq!(self.log_epoch(), target.epoch);
    }

    /// Notes that `epoch` started (announced once per epoch).
    pub(crate) fn epoch_started(&mut self, epoch: u32, effects: &mut Effects) {
        if epoch > self.started_epoch {
            self.started_epoch = epoch;
            effects.event(Event::EpochStarted { epoch });
        }
    }
}

/// The epoch in effect after `header`'s op.
pub(crate) fn epoch_after(header: &PrepareHeader) -> u32 {
    header
        .next_membership()
        .map_or(header.membership_epoch.get(), |(epoch, _, _)| epoch)
}
