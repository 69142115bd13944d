//! Handover: a primary gives its role to the group's preferred primary.
//!
//! Each group has a preferred primary, the member at position 0 of its
//! membership (the primary of its view 0). The metadata plane rotates that
//! position across the nodes when it places a topic's partitions, so
//! preferred primaries are spread evenly; a failover moves leadership away
//! from them, and a handover moves it back once the preferred replica is
//! caught up.
//!
//! The primary hands over only when nothing is in flight (every prepare it
//! holds is committed) and the preferred replica said, in this view, that it
//! holds and applied everything. It then moves to the lowest view above its
//! own that the preferred replica leads, exactly as a replica that joins a
//! view change does: it persists the view and announces its DoViewChange;
//! the backups follow a DoViewChange of a higher view at once, and the
//! preferred replica starts the view from their logs with the usual merge.
//! Nothing acknowledged can be lost (the view change's rules hold as in a
//! failover), and a request that was not prepared gets no reply and is
//! retried by its client, which the client table answers once.
//!
//! Which groups hand over, and when, is the driver's choice (pacing
//! thousands of groups after a node returns); the replica only checks that
//! it may.

use strand_wire::ViewId;

use crate::effects::{Effects, Event};
use crate::replica::{Replica, Status};
use crate::state_machine::StateMachine;

impl<S: StateMachine> Replica<S> {
    /// The slot of the group's preferred primary in the current view's
    /// membership: the primary of its view 0.
    pub fn preferred_primary(&self) -> u8 {
        self.view_membership.primary_of(0)
    }

    /// The preferred primary's slot when this replica serves as primary and
    /// is not it: a group its driver may hand over.
    pub fn leads_in_place_of_preferred(&self) -> Option<u8> {
        let preferred = self.preferred_primary();
        (self.is_serving_primary() && preferred != self.config.replica).then_some(preferred)
    }

    /// Hands the primary role to the preferred primary if it may now: this
    /// replica serves as primary in its view's own epoch, nothing is in
    /// flight, and the preferred replica is caught up and not suspected.
    /// True if the view change to the preferred replica's view started.
    pub fn hand_over_to_preferred(&mut self, effects: &mut Effects) -> bool {
        let Some(to) = self.leads_in_place_of_preferred() else {
            return false;
        };
        if !self.may_hand_over_to(to) {
            return false;
        }
        let view = self.lowest_view_led_by(to);
        effects.event(Event::HandingOver { to, view });
        self.start_view_change(view, effects);
        true
    }

    /// Whether the group is settled enough for a handover to `to`.
    fn may_hand_over_to(&self, to: u8) -> bool {
        self.status == Status::Normal
            && !self.abdicated
            && !self.suspecting
            && self.target.is_none()
            && self.adoption.is_none()
            && self.deferred_cut.is_none()
            // A log that holds a `Reconfigure` leads to another epoch's views.
            && self.log_epoch() == self.view.epoch
            && self.journal.head() == self.commit
            && self.is_peer(to)
            && self.suspected & (1 << to) == 0
            && self.caught_up(to)
    }

    /// The lowest view above the current one, in its epoch, that `slot` leads.
    fn lowest_view_led_by(&self, slot: u8) -> ViewId {
        let count = u32::from(self.view_membership.replica_count());
        let mut view = self.view.next();
        for _ in 0..count {
            if self.view_membership.primary_of(view.view) == slot {
                return view;
            }
            view = view.next();
        }
        unreachable!("slot {slot} is a member, so it leads one of the next {count} views")
    }
}
