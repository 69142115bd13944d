//! Leadership balance: which of a shard's groups hand their primary role
//! back to their preferred primary, and when.
//!
//! The metadata plane spreads preferred primaries evenly across the nodes
//! (see `strand_consensus::handover`); a failover moves leadership off a
//! node, and when it returns the groups it prefers are led elsewhere. Each
//! shard keeps, for the groups it leads in place of their preferred
//! primary, one set per preferred node; once that node has been heard for
//! [`BALANCE_SETTLE`] (time to open its groups and catch up), the shard
//! asks [`HANDOVERS_PER_ROUND_MAX`] of them per [`BALANCE_INTERVAL`] to hand
//! over, so thousands of groups move back in seconds without a storm of
//! view changes. The replica decides whether it may (the preferred replica
//! live and holding every committed op; requests in flight drain first); a
//! group that may not is asked again on a later round. Nothing is kept or done for a group that leads where it
//! should or does not lead.
//!
//! A group that moves away again soon after it was handed back (its
//! preferred node is slow, or flaps) is not handed straight back: a group
//! waits [`GROUP_SETTLE_MIN`] in place before it hands over, and each time
//! it is led away again within [`FLAP_WINDOW`] of a handover that wait
//! doubles, up to [`GROUP_SETTLE_MAX`]; leadership then follows the
//! failures rather than fighting them.
//!
//! Bounds: the sets and maps hold at most the shard's groups; a round
//! looks at [`HANDOVER_TRIES_PER_ROUND_MAX`] groups at most.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// How often a shard asks groups to hand over.
pub const BALANCE_INTERVAL: Duration = Duration::from_millis(250);

/// How long a preferred node must have been heard before groups hand over
/// to it.
pub const BALANCE_SETTLE: Duration = Duration::from_secs(3);

/// How long a group leads in place of its preferred primary before it may
/// hand over, at first.
pub const GROUP_SETTLE_MIN: Duration = Duration::from_secs(3);

/// The longest such wait, for a group that keeps being led away.
pub const GROUP_SETTLE_MAX: Duration = Duration::from_secs(300);

/// A group led away again within this long after a handover waits twice as
/// long before the next one.
pub const FLAP_WINDOW: Duration = Duration::from_secs(60);

/// Handovers a shard starts per round at most.
pub const HANDOVERS_PER_ROUND_MAX: usize = 16;

/// Groups a shard asks per round at most (some may not hand over yet).
pub const HANDOVER_TRIES_PER_ROUND_MAX: usize = 4 * HANDOVERS_PER_ROUND_MAX;

/// One shard's view of where its groups lead.
#[derive(Debug)]
pub struct Balancer {
    /// Groups this node leads.
    leading: BTreeSet<u64>,
    /// Groups it leads in place of their preferred primary, by its node.
    misplaced: BTreeMap<u32, BTreeSet<u64>>,
    /// The preferred node of each group in `misplaced`.
    preferred_of: BTreeMap<u64, u32>,
    /// Peer nodes suspected now.
    suspected: BTreeSet<u32>,
    /// When each peer was last heard back (peers never suspected count
    /// from `started`).
    back_since: BTreeMap<u32, Instant>,
    started: Instant,
    next_round: Instant,
    /// The last group asked, per preferred node: rounds go on after it.
    cursor: BTreeMap<u32, u64>,
    /// Per group this shard leads in place of its preferred primary: when
    /// that began, and how long it waits before a handover.
    settling: BTreeMap<u64, Settling>,
    /// Per group handed over here: when, and the wait it had (kept for
    /// [`FLAP_WINDOW`], to double the next wait of a group that flaps).
    handed: BTreeMap<u64, (Instant, Duration)>,
}

/// A misplaced group's wait before it may hand over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Settling {
    since: Instant,
    wait: Duration,
}

/// What changed in the number of groups a shard leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeadingChange {
    /// The shard leads one group more.
    Gained,
    /// The shard leads one group fewer.
    Lost,
    /// No change.
    Same,
}

impl Balancer {
    /// A shard that starts at `now` and leads nothing yet.
    pub fn new(now: Instant) -> Balancer {
        Balancer {
            leading: BTreeSet::new(),
            misplaced: BTreeMap::new(),
            preferred_of: BTreeMap::new(),
            suspected: BTreeSet::new(),
            back_since: BTreeMap::new(),
            started: now,
            next_round: now + BALANCE_INTERVAL,
            cursor: BTreeMap::new(),
            settling: BTreeMap::new(),
            handed: BTreeMap::new(),
        }
    }

    /// Notes where `group` stands at `now`, after it settled: whether this
    /// node leads it, and if it does in place of its preferred primary, that
    /// primary's node.
    pub fn note(
        &mut self,
        group: u64,
        leading: bool,
        in_place_of: Option<u32>,
        now: Instant,
    ) -> LeadingChange {
        assert!(
            leading || in_place_of.is_none(),
            "only a leader leads in place"
        );
        let change = match (leading, self.leading.contains(&group)) {
            (true, false) => {
                self.leading.insert(group);
                LeadingChange::Gained
            }
            (false, true) => {
                self.leading.remove(&group);
                LeadingChange::Lost
            }
            _ => LeadingChange::Same,
        };
        let before = self.preferred_of.get(&group).copied();
        let waited = self.settling.get(&group).map(|settling| settling.wait);
        if before != in_place_of {
            if let Some(node) = before {
                self.unmark(group, node);
            }
            if let Some(node) = in_place_of {
                self.preferred_of.insert(group, node);
                self.misplaced.entry(node).or_default().insert(group);
                let wait = self.wait_after_handover(group, now);
                self.settling.insert(group, Settling { since: now, wait });
            }
        }
        if change == LeadingChange::Lost
            && let Some(wait) = waited
        {
            self.handed.insert(group, (now, wait));
        }
        change
    }

    /// The wait of a group newly led in place of its preferred primary:
    /// twice the last one if it was handed over within [`FLAP_WINDOW`].
    fn wait_after_handover(&mut self, group: u64, now: Instant) -> Duration {
        match self.handed.remove(&group) {
            Some((at, wait)) if now.duration_since(at) < FLAP_WINDOW => {
                (wait * 2).min(GROUP_SETTLE_MAX)
            }
            _ => GROUP_SETTLE_MIN,
        }
    }

    /// Forgets a group the shard closed; returns whether it led it.
    pub fn forget(&mut self, group: u64) -> bool {
        if let Some(node) = self.preferred_of.get(&group).copied() {
            self.unmark(group, node);
        }
        self.handed.remove(&group);
        self.leading.remove(&group)
    }

    fn unmark(&mut self, group: u64, node: u32) {
        self.preferred_of.remove(&group);
        self.settling.remove(&group);
        if let Some(groups) = self.misplaced.get_mut(&node) {
            groups.remove(&group);
            if groups.is_empty() {
                self.misplaced.remove(&node);
            }
        }
    }

    /// Peer `node` was suspected (`alive` false) or heard again at `now`.
    pub fn liveness(&mut self, node: u32, alive: bool, now: Instant) {
        if alive {
            if self.suspected.remove(&node) {
                self.back_since.insert(node, now);
            }
        } else {
            self.suspected.insert(node);
        }
    }

    /// At most [`HANDOVER_TRIES_PER_ROUND_MAX`] groups to ask to hand over
    /// now, if a round is due: led in place of a preferred node that has
    /// been heard for [`BALANCE_SETTLE`]. The caller stops asking once
    /// [`HANDOVERS_PER_ROUND_MAX`] started.
    pub fn round(&mut self, now: Instant) -> Vec<u64> {
        if now < self.next_round || self.misplaced.is_empty() {
            return Vec::new();
        }
        self.next_round = now + BALANCE_INTERVAL;
        let mut tries = Vec::new();
        for (node, groups) in &self.misplaced {
            let heard_since = self.back_since.get(node).copied().unwrap_or(self.started);
            if self.suspected.contains(node) || now.duration_since(heard_since) < BALANCE_SETTLE {
                continue;
            }
            let after = self.cursor.get(node).copied().unwrap_or(0);
            let room = HANDOVER_TRIES_PER_ROUND_MAX - tries.len();
            let settling = &self.settling;
            let settled = |group: &&u64| {
                settling
                    .get(group)
                    .is_none_or(|s| now.duration_since(s.since) >= s.wait)
            };
            let picked: Vec<u64> = groups
                .range(after + 1..)
                .chain(groups.range(..=after))
                .filter(settled)
                .take(room)
                .copied()
                .collect();
            if let Some(last) = picked.last() {
                self.cursor.insert(*node, *last);
            }
            tries.extend(picked);
            if tries.len() == HANDOVER_TRIES_PER_ROUND_MAX {
                break;
            }
        }
        tries
    }

    /// Checks the sets agree with each other.
    pub fn assert_invariants(&self) {
        let marked: usize = self.misplaced.values().map(BTreeSet::len).sum();
        assert_eq!(marked, self.preferred_of.len());
        assert_eq!(self.settling.len(), self.preferred_of.len());
        for settling in self.settling.values() {
            assert!((GROUP_SETTLE_MIN..=GROUP_SETTLE_MAX).contains(&settling.wait));
        }
        for (group, node) in &self.preferred_of {
            assert!(
                self.leading.contains(group),
                "group {group} misplaced, not led"
            );
            assert!(self.misplaced[node].contains(group));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_returning_node_gets_its_groups_back_after_it_settled_a_few_per_round() {
        let start = Instant::now();
        let mut balancer = Balancer::new(start);
        for group in 1..=100 {
            assert_eq!(
                balancer.note(group, true, Some(2), start),
                LeadingChange::Gained
            );
        }
        balancer.note(101, true, None, start);
        balancer.assert_invariants();
        balancer.liveness(2, false, start);
        assert!(
            balancer.round(start + BALANCE_SETTLE * 2).is_empty(),
            "node 2 is down"
        );
        let back = start + BALANCE_SETTLE * 3;
        balancer.liveness(2, true, back);
        assert!(
            balancer.round(back + BALANCE_INTERVAL).is_empty(),
            "not settled yet"
        );
        let later = back + BALANCE_SETTLE;
        let first = balancer.round(later);
        assert_eq!(first.len(), HANDOVER_TRIES_PER_ROUND_MAX);
        assert!(balancer.round(later).is_empty(), "one round per interval");
        let second = balancer.round(later + BALANCE_INTERVAL);
        assert_eq!(
            second[0],
            first.last().expect("a full round") + 1,
            "rounds go on after the last"
        );
        // Handed over: no longer led.
        for group in first {
            assert_eq!(
                balancer.note(group, false, None, later),
                LeadingChange::Lost
            );
        }
        balancer.assert_invariants();
        assert_eq!(
            balancer.preferred_of.len(),
            100 - HANDOVER_TRIES_PER_ROUND_MAX
        );
        assert!(balancer.forget(101), "it led group 101");
        balancer.assert_invariants();
    }

    #[test]
    fn a_group_led_away_again_soon_after_a_handover_waits_twice_as_long() {
        let start = Instant::now();
        let mut balancer = Balancer::new(start);
        // Led in place of node 2 from the start: eligible after the minimum.
        balancer.note(5, true, Some(2), start);
        assert!(balancer.round(start + BALANCE_INTERVAL).is_empty());
        let first = start + GROUP_SETTLE_MIN;
        assert_eq!(balancer.round(first), vec![5]);
        balancer.note(5, false, None, first);
        // Led away again 10 s later: it waits 6 s this time.
        let again = first + Duration::from_secs(10);
        balancer.note(5, true, Some(2), again);
        balancer.assert_invariants();
        assert!(balancer.round(again + GROUP_SETTLE_MIN).is_empty());
        let second = again + GROUP_SETTLE_MIN * 2;
        assert_eq!(balancer.round(second), vec![5]);
        balancer.note(5, false, None, second);
        // Led away long after: back to the minimum.
        let much_later = second + FLAP_WINDOW * 2;
        balancer.note(5, true, Some(2), much_later);
        assert_eq!(balancer.round(much_later + GROUP_SETTLE_MIN), vec![5]);
        // Flapping forever never waits more than the maximum.
        let mut now = much_later + GROUP_SETTLE_MIN;
        for _ in 0..20 {
            balancer.note(5, false, None, now);
            now += Duration::from_secs(1);
            balancer.note(5, true, Some(2), now);
            balancer.assert_invariants();
        }
        assert!(
            balancer
                .round(now + GROUP_SETTLE_MAX - BALANCE_INTERVAL)
                .is_empty()
        );
        assert_eq!(balancer.round(now + GROUP_SETTLE_MAX), vec![5]);
    }

    #[test]
    fn a_group_leading_where_it_should_costs_nothing() {
        let start = Instant::now();
        let mut balancer = Balancer::new(start);
        balancer.note(7, true, None, start);
        assert!(balancer.round(start + BALANCE_SETTLE * 2).is_empty());
        assert!(balancer.misplaced.is_empty());
    }
}
