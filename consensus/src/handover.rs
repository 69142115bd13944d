//! Handover: a primary gives its role to the group's preferred primary.
//!
//! Each group has a preferred primary, the member at position 0 of its
//! membership (the primary of its view 0). The metadata plane rotates that
//! position across the nodes when it places a topic's partitions, so
//! preferred primaries are spread evenly; a failover moves leadership away
//! from them, and a handover moves it back once the preferred replica is
//! caught up.
//!
//! A handover begins with a drain: the primary admits no new request
//! (clients are told to retry soon) and waits until every prepare it holds
//! is committed and the preferred replica said, in this view, that it holds
//! them all; a drain that does not finish within [`DRAIN_TICKS_MAX`] is
//! called off and the primary serves on. Under load a drain lasts one
//! round trip. The primary then moves to the lowest view above its
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

/// Ticks a drain may last before the handover is called off (the
/// preferred replica fell behind or went silent).
pub const DRAIN_TICKS_MAX: u32 = 50;

/// A handover waiting for the requests in flight to commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Drain {
    /// The preferred primary's slot.
    pub(crate) to: u8,
    /// Ticks left before it is called off.
    pub(crate) ticks_left: u32,
}

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

    /// Whether a handover is draining (no new request is admitted).
    pub fn handing_over(&self) -> bool {
        self.handover.is_some()
    }

    /// Begins handing the primary role to the preferred primary if it may:
    /// this replica serves as primary in its view's own epoch and the
    /// preferred replica is a live peer that repairs nothing and holds every
    /// committed op. The view
    /// change starts at once when nothing is in flight, else once the
    /// drain ends. True if the handover began now (false while one drains).
    pub fn hand_over_to_preferred(&mut self, effects: &mut Effects) -> bool {
        if self.handover.is_some() {
            return false;
        }
        let Some(to) = self.leads_in_place_of_preferred() else {
            return false;
        };
        // The preferred replica holds every committed op: only the
        // requests in flight are left to drain.
        if !self.may_hand_over_to(to) || self.progress.ack(to) < self.commit {
            return false;
        }
        self.handover = Some(Drain {
            to,
            ticks_left: DRAIN_TICKS_MAX,
        });
        self.continue_handover(effects);
        true
    }

    /// Starts the view change of a draining handover once nothing is in
    /// flight and the preferred replica holds everything; calls it off if
    /// the group no longer allows it.
    pub(crate) fn continue_handover(&mut self, effects: &mut Effects) {
        let Some(drain) = self.handover else {
            return;
        };
        if !self.is_serving_primary() || !self.may_hand_over_to(drain.to) {
            self.handover = None;
            return;
        }
        if self.journal.head() != self.commit || !self.holds_everything(drain.to) {
            return;
        }
        let view = self.lowest_view_led_by(drain.to);
        effects.event(Event::HandingOver { to: drain.to, view });
        self.start_view_change(view, effects);
    }

    /// One tick of a drain: it ends (the view change starts) or runs out.
    pub(crate) fn tick_handover(&mut self, effects: &mut Effects) {
        self.continue_handover(effects);
        let Some(drain) = &mut self.handover else {
            return;
        };
        drain.ticks_left = drain.ticks_left.saturating_sub(1);
        if drain.ticks_left == 0 {
            let to = drain.to;
            self.handover = None;
            effects.event(Event::HandoverCalledOff { to });
        }
    }

    /// Whether the group is settled enough for a handover to `to` (the
    /// requests in flight aside: a drain waits for them).
    fn may_hand_over_to(&self, to: u8) -> bool {
        self.status == Status::Normal
            && !self.abdicated
            && !self.votes.suspecting()
            && self.target.is_none()
            && self.adoption.is_none()
            && self.deferred_cut.is_none()
            // A log that holds a `Reconfigure` leads to another epoch's views.
            && self.log_epoch() == self.view.epoch
            && self.is_peer(to)
            && !self.quiet.suspects(to)
            && self.progress.reports_whole(to)
    }

    /// The lowest view above the current one, in its epoch, that `slot` leads.
    pub(crate) fn lowest_view_led_by(&self, slot: u8) -> ViewId {
        assert!(
            self.view_membership.slots.contains(slot),
            "slot {slot} is no member of epoch {}",
            self.view_membership.epoch
        );
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
