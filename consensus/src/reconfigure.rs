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

use strand_wire::{Msg, PrepareHeader};

use crate::effects::{Effects, Event};
use crate::epoch::{Membership, Transition, transition};
use crate::normal::PIPELINE_PREPARES_MAX;
use crate::replica::Replica;
use crate::state_machine::StateMachine;

impl<S: StateMachine> Replica<S> {
    /// The driver's newest assignment for this group (from the metadata
    /// plane's catalog). A membership of the epoch after the log's, if the
    /// change is in place, is taken up by the primary as a `Reconfigure` op;
    /// any membership is remembered so that frames of its epoch are
    /// understood. Changes that need a view change are not taken up here.
    pub fn on_assignment(&mut self, membership: Membership, effects: &mut Effects) {
        if let Err(conflict) = self.memberships.learn(membership) {
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
