//! Which groups a node vouches for. A node's liveness ping says "I am alive"
//! for every group it hosts at once; a group whose code panicked here (see
//! the runtime's `contain`) is down on this node while the node lives on, so
//! the ping also lists the groups this node does *not* vouch for. A peer treats
//! the listed groups' replicas on this node as dead, exactly as if the node
//! were: their backups elsewhere fail over, and the other groups carry on.
//!
//! The list is bounded ([`strand_wire::PING_UNVOUCHED_GROUPS_MAX`]): a node
//! with more failed groups than that lists the first ones (the rest fail
//! over when their primary timeouts find them silent).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use strand_wire::PING_UNVOUCHED_GROUPS_MAX;

/// This node's withdrawn groups, and each peer's, as its last ping said.
#[derive(Debug, Default)]
pub struct Vouching {
    mine: Mutex<BTreeSet<u64>>,
    peers: Mutex<BTreeMap<u32, BTreeSet<u64>>>,
}

/// What a peer's ping changed: groups it stopped and started vouching for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct VouchChange {
    /// Listed now, not before: their replicas on the peer are down.
    pub withdrawn: Vec<u64>,
    /// Listed before, not now: their replicas on the peer are back.
    pub restored: Vec<u64>,
}

impl Vouching {
    /// This node stops vouching for `group` (it failed here).
    pub fn withdraw(&self, group: u64) {
        self.mine.lock().expect("vouching lock").insert(group);
    }

    /// This node vouches for `group` again (it opened again).
    pub fn restore(&self, group: u64) {
        self.mine.lock().expect("vouching lock").remove(&group);
    }

    /// The groups this node's ping lists, at most
    /// [`PING_UNVOUCHED_GROUPS_MAX`].
    pub fn mine(&self) -> Vec<u64> {
        let mine = self.mine.lock().expect("vouching lock");
        mine.iter()
            .take(PING_UNVOUCHED_GROUPS_MAX)
            .copied()
            .collect()
    }

    /// Peer `node`'s ping listed `groups`: what changed since its last.
    pub fn peer_says(&self, node: u32, groups: &[u64]) -> VouchChange {
        let now: BTreeSet<u64> = groups.iter().copied().collect();
        let mut peers = self.peers.lock().expect("vouching lock");
        let before = peers.entry(node).or_default();
        if *before == now {
            return VouchChange::default();
        }
        let change = VouchChange {
            withdrawn: now.difference(before).copied().collect(),
            restored: before.difference(&now).copied().collect(),
        };
        *before = now;
        change
    }

    /// Whether peer `node` vouches for its replica of `group` (its last
    /// ping did not list it).
    pub fn peer_vouches(&self, node: u32, group: u64) -> bool {
        let peers = self.peers.lock().expect("vouching lock");
        !peers
            .get(&node)
            .is_some_and(|groups| groups.contains(&group))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_ping_reports_only_what_changed() {
        let vouching = Vouching::default();
        assert_eq!(vouching.peer_says(2, &[]), VouchChange::default());
        assert_eq!(
            vouching.peer_says(2, &[7, 9]),
            VouchChange {
                withdrawn: vec![7, 9],
                restored: vec![]
            }
        );
        assert!(!vouching.peer_vouches(2, 7));
        assert!(vouching.peer_vouches(3, 7), "another peer's is its own");
        assert_eq!(vouching.peer_says(2, &[9, 7]), VouchChange::default());
        assert_eq!(
            vouching.peer_says(2, &[9, 11]),
            VouchChange {
                withdrawn: vec![11],
                restored: vec![7]
            }
        );
        assert!(vouching.peer_vouches(2, 7));
    }

    #[test]
    fn this_node_lists_what_it_withdrew_until_restored() {
        let vouching = Vouching::default();
        vouching.withdraw(4);
        vouching.withdraw(1);
        assert_eq!(vouching.mine(), vec![1, 4]);
        vouching.restore(4);
        assert_eq!(vouching.mine(), vec![1]);
    }
}
