//! Checker 10: cursor event logs agree across replicas.
//!
//! Cursor events are not ops: no quorum commits them, and a promoted
//! replica may hold fewer (readers then see records again). What the
//! protocol does promise is one cursor history per view: once a replica
//! settled in a view (Normal there, its log settled in it), its cursor log
//! is a prefix of that view's, which is its primary's (the view's start cut
//! every other history back to where it leaves the view's, and the primary
//! ships events in order from there). So here "committed" means durable on
//! a replica settled in the view: two such replicas of one view never hold
//! different events at one position, up to the lower of their durable
//! tails. A returning replica that kept events of a history the view left
//! (a view it missed, a view that started unseen) breaks it.
//!
//! The checker keeps, per view, every durable event a settled replica
//! showed, by position, and compares each newly seen one with it. A replica
//! that settles in a new view is read again from its log's start.

use std::collections::BTreeMap;

use strand_wire::ViewId;
use strand_wire::ops::CursorEvent;

use super::Violation;

/// Views whose events are kept; older ones are dropped.
const VIEWS_KEPT: usize = 8;

/// The events seen per view and how far each replica was read.
#[derive(Debug, Default)]
pub struct CursorLogsAgree {
    /// Per view: position → (consumer, offset, the replica it was seen on).
    views: BTreeMap<ViewId, BTreeMap<u64, (String, u64, u8)>>,
    /// Per replica: the view it was read in and the durable tail read up to.
    read: BTreeMap<u8, (ViewId, u64)>,
}

impl CursorLogsAgree {
    /// `replica`, settled in `view`, holds `durable` events: where to read
    /// from (None: nothing new). A replica new to the view, or whose log got
    /// shorter, is read from the start.
    pub fn unread(&self, replica: u8, view: ViewId, durable: u64) -> Option<u64> {
        match self.read.get(&replica) {
            Some((read_view, read)) if *read_view == view && *read <= durable => {
                (*read < durable).then_some(*read)
            }
            _ => Some(0),
        }
    }

    /// `replica`'s events from `first` on, up to its durable tail `durable`,
    /// read while it is settled in `view` (positions below `first` that
    /// were asked for are folded into its snapshot).
    pub fn events(
        &mut self,
        replica: u8,
        view: ViewId,
        first: u64,
        events: &[CursorEvent],
    ) -> Result<(), Violation> {
        let seen = self.views.entry(view).or_default();
        for (position, event) in (first..).zip(events) {
            match seen.get(&position) {
                Some((consumer, offset, other))
                    if *consumer != event.consumer || *offset != event.offset =>
                {
                    return Err(Violation {
                        checker: "10 cursor logs agree",
                        detail: format!(
                            "in view {view}, replica {replica} holds cursor event {position} = \
                             {} {} where replica {other} holds {consumer} {offset}",
                            event.consumer, event.offset
                        ),
                    });
                }
                Some(_) => {}
                None => {
                    seen.insert(position, (event.consumer.clone(), event.offset, replica));
                }
            }
        }
        let end = first + events.len() as u64;
        self.read.insert(replica, (view, end));
        while self.views.len() > VIEWS_KEPT {
            self.views.pop_first();
        }
        Ok(())
    }

    /// `replica` is no longer settled (it crashed or left the view): it is
    /// read again from the start once it settles.
    pub fn unsettled(&mut self, replica: u8) {
        self.read.remove(&replica);
    }
}
