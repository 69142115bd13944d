//! **Pure**: when each of many groups next needs a tick.
//!
//! A driver that hosts many groups (a server shard, the simulator) issues
//! ticks at a fixed rate, but a group's tick does something only when one of
//! its timers fires or it has per-tick work (a handover draining, a state
//! transfer, a fetch waiting on its deadline): the group says how many ticks
//! away that is ([`crate::group_host::GroupHost::ticks_until_due`]), and the
//! schedule visits it only then. The ticks in between are skipped, and the
//! group is told how many before its next tick or input
//! ([`crate::group_host::GroupHost::skip_ticks`]), which is the same as having
//! ticked it through them (each would have done nothing but count). So a
//! group whose next timeout is 50 ms away costs its driver one visit, not
//! five, and a quiet group (no timer running) none at all.
//!
//! Invariants (checked by [`TickSchedule::assert_invariants`]): between two
//! ticks every scheduled group is due after the current tick; a group's
//! applied ticks never run ahead of the schedule's; the due index and the
//! groups agree. The schedule holds one entry per hosted group (bounded by
//! the groups the driver hosts), and a tick costs the groups due in it.

use std::collections::{BTreeMap, BTreeSet};

/// One group's place in the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// Ticks applied to the group (run or skipped), up to the schedule's.
    applied: u64,
    /// The tick it is due on, if any (none between its tick and its
    /// rescheduling).
    due: Option<u64>,
    /// Whether it was last rescheduled with a tick due (not quiet).
    awake: bool,
}

/// The groups of one driver and the tick each is next due on.
#[derive(Debug, Clone, Default)]
pub struct TickSchedule {
    /// Ticks issued so far.
    now: u64,
    groups: BTreeMap<u64, Entry>,
    /// `(due tick, group)` for every group that is due at all.
    due: BTreeSet<(u64, u64)>,
}

impl TickSchedule {
    /// An empty schedule at tick 0.
    pub fn new() -> TickSchedule {
        TickSchedule::default()
    }

    /// Ticks issued so far.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Adds a group that was just opened: due on the next tick, until it
    /// says otherwise.
    pub fn add(&mut self, group: u64) {
        let entry = Entry {
            applied: self.now,
            due: None,
            awake: false,
        };
        assert!(
            self.groups.insert(group, entry).is_none(),
            "group {group} scheduled twice"
        );
        self.reschedule(group, Some(1));
    }

    /// Forgets a group (closed, or gone down).
    pub fn remove(&mut self, group: u64) {
        if let Some(entry) = self.groups.remove(&group)
            && let Some(due) = entry.due
        {
            self.due.remove(&(due, group));
        }
        debug_assert!(
            self.due.iter().all(|(_, due_group)| *due_group != group),
            "group {group} removed but still due"
        );
    }

    /// Whether `group` is in the schedule.
    pub fn contains(&self, group: u64) -> bool {
        self.groups.contains_key(&group)
    }

    /// Whether `group` was last rescheduled with a tick due (a timer
    /// running, or per-tick work): not quiet.
    pub fn is_awake(&self, group: u64) -> bool {
        self.groups.get(&group).is_some_and(|entry| entry.awake)
    }

    /// Groups due on a later tick.
    pub fn due_count(&self) -> usize {
        self.due.len()
    }

    /// The ticks `group` must skip before an input reaches it (the ticks
    /// issued since it last ran one, none of them due); they count as
    /// applied from here. 0 for a group not in the schedule.
    pub fn skipped_before_input(&mut self, group: u64) -> u64 {
        let now = self.now;
        let Some(entry) = self.groups.get_mut(&group) else {
            return 0;
        };
        assert!(
            entry.applied == now || entry.due.is_none_or(|due| due > now),
            "group {group} was due on tick {:?}, not run by tick {now}",
            entry.due
        );
        let skipped = now - entry.applied;
        entry.applied = now;
        skipped
    }

    /// Issues the next tick: the groups due on it, ascending, each with the
    /// ticks it skipped before this one (run it after skipping them). Each
    /// is unscheduled until [`TickSchedule::reschedule`] says when it is due
    /// next.
    pub fn tick(&mut self) -> Vec<(u64, u64)> {
        self.now += 1;
        let now = self.now;
        let mut due_now = Vec::new();
        while let Some(&(due, group)) = self.due.first() {
            if due > now {
                break;
            }
            assert_eq!(due, now, "group {group} due on a tick already issued");
            self.due.pop_first();
            let entry = self
                .groups
                .get_mut(&group)
                .expect("a due group is scheduled");
            let skipped = now - entry.applied - 1;
            entry.applied = now;
            entry.due = None;
            due_now.push((group, skipped));
        }
        due_now
    }

    /// After an input or a tick: `group` is next due `ticks_until_due` ticks
    /// from the ticks it applied (`None`: on no tick until an input says
    /// otherwise). Returns whether it was awake before (see
    /// [`TickSchedule::is_awake`]); false for a group not in the schedule,
    /// which is ignored.
    pub fn reschedule(&mut self, group: u64, ticks_until_due: Option<u64>) -> bool {
        let Some(entry) = self.groups.get_mut(&group) else {
            return false;
        };
        let was_awake = entry.awake;
        entry.awake = ticks_until_due.is_some();
        assert_eq!(
            entry.applied, self.now,
            "group {group} rescheduled before it caught up"
        );
        let due = ticks_until_due.map(|ticks| {
            assert!(ticks >= 1, "a group is due on a later tick, not this one");
            self.now + ticks
        });
        // A busy group settles many times per tick, mostly due on the same
        // tick as before: the index is only touched when that changes.
        if entry.due != due {
            if let Some(old) = entry.due {
                self.due.remove(&(old, group));
            }
            if let Some(new) = due {
                self.due.insert((new, group));
            }
            entry.due = due;
        }
        was_awake
    }

    /// Checks the schedule's invariants (a bug if they fail).
    pub fn assert_invariants(&self) {
        let mut due_entries = 0;
        for (group, entry) in &self.groups {
            assert!(entry.applied <= self.now, "group {group} ran ahead");
            if let Some(due) = entry.due {
                assert!(due > self.now, "group {group} overdue");
                assert!(self.due.contains(&(due, *group)), "group {group} unindexed");
                due_entries += 1;
            }
        }
        assert_eq!(due_entries, self.due.len(), "the due index has strays");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group due in 5 ticks is visited on the fifth, told of the four it
    /// skipped; one with no timer running is not visited at all.
    #[test]
    fn a_group_is_visited_only_when_due() {
        let mut schedule = TickSchedule::new();
        schedule.add(1);
        schedule.add(2);
        assert_eq!(
            schedule.tick(),
            vec![(1, 0), (2, 0)],
            "new groups tick at once"
        );
        schedule.reschedule(1, Some(5));
        schedule.reschedule(2, None);
        for _ in 0..4 {
            assert!(schedule.tick().is_empty());
        }
        assert_eq!(schedule.tick(), vec![(1, 4)]);
        assert_eq!(schedule.due_count(), 0, "unscheduled until told again");
        assert!(schedule.is_awake(1) && !schedule.is_awake(2));
        assert!(schedule.reschedule(1, Some(1)), "it was awake");
        assert_eq!(schedule.skipped_before_input(2), 5, "quiet since tick 1");
        assert!(!schedule.reschedule(2, None), "it was quiet");
        assert_eq!(schedule.due_count(), 1);
        schedule.assert_invariants();
    }

    /// An input catches a group up with the ticks it skipped, and its next
    /// due tick counts from there.
    #[test]
    fn an_input_catches_the_group_up_first() {
        let mut schedule = TickSchedule::new();
        schedule.add(7);
        schedule.tick();
        schedule.reschedule(7, Some(10));
        schedule.tick();
        schedule.tick();
        assert_eq!(schedule.skipped_before_input(7), 2);
        assert_eq!(schedule.skipped_before_input(7), 0, "caught up");
        schedule.reschedule(7, Some(3));
        schedule.tick();
        schedule.tick();
        assert_eq!(schedule.tick(), vec![(7, 2)]);
        schedule.reschedule(7, None);
        for _ in 0..100 {
            schedule.tick();
        }
        assert_eq!(schedule.skipped_before_input(7), 100);
        schedule.remove(7);
        assert_eq!(schedule.skipped_before_input(7), 0);
        schedule.assert_invariants();
    }

    #[test]
    #[should_panic(expected = "not run by tick")]
    fn an_input_to_a_group_left_due_is_a_bug() {
        let mut schedule = TickSchedule::new();
        schedule.add(3);
        let _ = schedule.tick(); // due, but the driver never ran it
        schedule.groups.get_mut(&3).expect("present").applied = 0;
        schedule.groups.get_mut(&3).expect("present").due = Some(1);
        schedule.skipped_before_input(3);
    }
}
