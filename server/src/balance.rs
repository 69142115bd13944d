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
//! Bounds: the sets hold at most the shard's groups; a round looks at
//! [`HANDOVER_TRIES_PER_ROUND_MAX`] groups at most.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// How often a shard asks groups to hand over.
pub const BALANCE_INTERVAL: Duration = Duration::from_millis(250);

/// How long a preferred node must have been heard before groups hand over
/// to it.
pub const BALANCE_SETTLE: Duration = Duration::from_secs(3);

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
        }
    }

    /// Notes where `group` stands after it settled: whether this node
    /// leads it, and if it does in place of its preferred primary, that
    /// primary's node.
    pub fn note(&mut self, group: u64, leading: bool, in_place_of: Option<u32>) -> LeadingChange {
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
        if before != in_place_of {
            if let Some(node) = before {
                self.unmark(group, node);
            }
            if let Some(node) = in_place_of {
                self.preferred_of.insert(group, node);
                self.misplaced.entry(node).or_default().insert(group);
            }
        }
        change
    }

    /// Forgets a group the shard closed; returns whether it led it.
    pub fn forget(&mut self, group: u64) -> bool {
        if let Some(node) = self.preferred_of.get(&group).copied() {
            self.unmark(group, node);
        }
        self.leading.remove(&group)
    }

    fn unmark(&mut self, group: u64, node: u32) {
        self.preferred_of.remove(&group);
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
            let picked: Vec<u64> = groups
                .range(after + 1..)
                .chain(groups.range(..=after))
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
            assert_eq!(balancer.note(group, true, Some(2)), LeadingChange::Gained);
        }
        balancer.note(101, true, None);
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
            assert_eq!(balancer.note(group, false, None), LeadingChange::Lost);
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
    fn a_group_leading_where_it_should_costs_nothing() {
        let start = Instant::now();
        let mut balancer = Balancer::new(start);
        balancer.note(7, true, None);
        assert!(balancer.round(start + BALANCE_SETTLE * 2).is_empty());
        assert!(balancer.misplaced.is_empty());
    }
}
