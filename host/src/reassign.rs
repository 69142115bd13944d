//! Planning a partition reassignment: from the current assignment and the
//! operator's wish (`strand partition reassign PARTITION --replicas N1,N2,N3
//! [--confirm POLICY]`) to the next epoch's slots, or a typed refusal.
//!
//! Pure: the metadata plane calls [`plan`] when it applies a reassignment op,
//! on every node alike. The rules:
//!
//! - Slots are stable: a node that stays keeps its slot (its replica index);
//!   a node that joins takes the lowest slot free in both the current and the
//!   new assignment, so no index ever names two nodes across the change.
//! - How the change takes effect comes from the one rule in
//!   [`strand_consensus::epoch::transition`]: in place (every current member
//!   stays, no more copies confirm) or by a view change at the new epoch.
//! - A view change needs a current member to carry the log into the new
//!   epoch: a set with no current member is refused (replace nodes a few at a
//!   time instead).
//! - The wish must change something, name known nodes once each, and fit in
//!   [`REPLICAS_MAX`] slots counting the nodes that leave.

use std::collections::BTreeSet;

use strand_consensus::epoch::{Membership, SlotSet, Transition, transition};
use strand_wire::{ConfirmPolicy, REPLICAS_MAX};

/// One epoch's assignment of slots to nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotAssignment {
    /// The assignment's epoch.
    pub epoch: u32,
    /// The node in each slot; `None` for a free slot.
    pub slots: Vec<Option<u32>>,
    /// How many copies confirm.
    pub confirm: ConfirmPolicy,
}

impl SlotAssignment {
    /// Slots `0..nodes.len()` holding `nodes` in order: a partition as created.
    pub fn dense(epoch: u32, nodes: &[u32], confirm: ConfirmPolicy) -> SlotAssignment {
        assert!(
            nodes.len() <= usize::from(REPLICAS_MAX)
                && nodes
                    .iter()
                    .enumerate()
                    .all(|(slot, node)| !nodes[..slot].contains(node)),
            "nodes {nodes:?} are not one per slot"
        );
        SlotAssignment {
            epoch,
            slots: nodes.iter().copied().map(Some).collect(),
            confirm,
        }
    }

    /// The slot `node` holds, if it is a member.
    pub fn slot_of(&self, node: u32) -> Option<u8> {
        self.slots
            .iter()
            .position(|held| *held == Some(node))
            .map(|slot| slot as u8)
    }

    /// The members, by slot.
    pub fn members(&self) -> impl Iterator<Item = (u8, u32)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(slot, node)| node.map(|node| (slot as u8, node)))
    }

    /// The consensus view of this assignment.
    pub fn membership(&self) -> Membership {
        let slots = self
            .members()
            .fold(SlotSet::EMPTY, |set, (slot, _)| set.with(slot));
        Membership::new(self.epoch, slots, self.confirm)
    }
}

/// What a reassignment wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignWish {
    /// The nodes that should hold the partition.
    pub nodes: Vec<u32>,
    /// The new confirm policy; `None` keeps the current one.
    pub confirm: Option<ConfirmPolicy>,
}

/// An accepted reassignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignPlan {
    /// The next epoch's assignment.
    pub next: SlotAssignment,
    /// In place, or by a view change at the next epoch.
    pub transition: Transition,
    /// Nodes that join (they start empty and catch up), ascending.
    pub joining: Vec<u32>,
    /// Nodes that leave (they stop serving; their data stays), ascending.
    pub leaving: Vec<u32>,
}

/// Why a reassignment is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReassignError {
    /// The wish names no node.
    #[error("a partition needs at least one replica")]
    NoReplicas,
    /// A node is named twice.
    #[error("node {0} is named twice")]
    DuplicateNode(u32),
    /// A node is not part of the cluster.
    #[error("node {0} is not a node of this cluster")]
    UnknownNode(u32),
    /// The wish is the current assignment.
    #[error("the partition already has exactly these replicas and this confirm policy")]
    NoChange,
    /// The current and the new members together need more slots than exist.
    #[error("the current and the new replicas together need {needed} slots; at most {max}")]
    TooManySlots {
        /// Slots the change needs.
        needed: usize,
        /// [`REPLICAS_MAX`].
        max: u8,
    },
    /// A view change with no current member to carry the log over.
    #[error(
        "the new replica set keeps none of the current replicas; keep at least one and replace the others in a later reassignment"
    )]
    KeepsNoMember,
}

/// Plans the move from `current` to `wish` in a cluster of `cluster_nodes`.
pub fn plan(
    current: &SlotAssignment,
    wish: &ReassignWish,
    cluster_nodes: &[u32],
) -> Result<ReassignPlan, ReassignError> {
    let wanted = validate_nodes(&wish.nodes, cluster_nodes)?;
    let confirm = wish.confirm.unwrap_or(current.confirm);
    let current_nodes: BTreeSet<u32> = current.members().map(|(_, node)| node).collect();
    if wanted == current_nodes && confirm == current.confirm {
        return Err(ReassignError::NoChange);
    }
    let joining: Vec<u32> = wanted.difference(&current_nodes).copied().collect();
    let leaving: Vec<u32> = current_nodes.difference(&wanted).copied().collect();
    let next = SlotAssignment {
        epoch: current.epoch + 1,
        slots: next_slots(current, &wanted, &joining)?,
        confirm,
    };
    debug_assert!(
        current.members().all(|(slot, node)| {
            let kept = next.slots.get(usize::from(slot)).copied().flatten();
            kept.is_none() || kept == Some(node)
        }),
        "a slot changes hands: {current:?} to {next:?}"
    );
    debug_assert!(
        next.members()
            .all(|(slot, node)| current.slot_of(node).is_none_or(|held| held == slot)),
        "a staying node moved slots: {current:?} to {next:?}"
    );
    let transition = transition(&current.membership(), &next.membership());
    if transition == Transition::ViewChange && wanted.is_disjoint(&current_nodes) {
        return Err(ReassignError::KeepsNoMember);
    }
    Ok(ReassignPlan {
        next,
        transition,
        joining,
        leaving,
    })
}

/// The wished nodes as a set, or why they cannot be.
fn validate_nodes(nodes: &[u32], cluster_nodes: &[u32]) -> Result<BTreeSet<u32>, ReassignError> {
    if nodes.is_empty() {
        return Err(ReassignError::NoReplicas);
    }
    let mut wanted = BTreeSet::new();
    for &node in nodes {
        if !cluster_nodes.contains(&node) {
            return Err(ReassignError::UnknownNode(node));
        }
        if !wanted.insert(node) {
            return Err(ReassignError::DuplicateNode(node));
        }
    }
    Ok(wanted)
}

/// Staying nodes keep their slots; joining ones take the lowest slots free in
/// both assignments.
fn next_slots(
    current: &SlotAssignment,
    wanted: &BTreeSet<u32>,
    joining: &[u32],
) -> Result<Vec<Option<u32>>, ReassignError> {
    let needed = current.members().count() + joining.len();
    if needed > usize::from(REPLICAS_MAX) {
        return Err(ReassignError::TooManySlots {
            needed,
            max: REPLICAS_MAX,
        });
    }
    let mut slots: Vec<Option<u32>> = current
        .slots
        .iter()
        .map(|held| held.filter(|node| wanted.contains(node)))
        .collect();
    let mut free = (0..usize::from(REPLICAS_MAX))
        .filter(|&slot| current.slots.get(slot).copied().flatten().is_none());
    for &node in joining {
        let slot = free.next().expect("enough slots: checked above");
        if slots.len() <= slot {
            slots.resize(slot + 1, None);
        }
        slots[slot] = Some(node);
    }
    while slots.last() == Some(&None) {
        slots.pop();
    }
    assert!(
        slots.len() <= usize::from(REPLICAS_MAX),
        "{} slots past the {REPLICAS_MAX} there are",
        slots.len()
    );
    Ok(slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: [u32; 5] = [1, 2, 3, 4, 5];

    fn three() -> SlotAssignment {
        SlotAssignment::dense(0, &[1, 2, 3], ConfirmPolicy::MajorityDurable)
    }

    fn wish(nodes: &[u32], confirm: Option<ConfirmPolicy>) -> ReassignWish {
        ReassignWish {
            nodes: nodes.to_vec(),
            confirm,
        }
    }

    #[test]
    fn replacing_a_lost_node_keeps_the_others_in_their_slots() {
        let plan = plan(&three(), &wish(&[1, 3, 4], None), &CLUSTER).expect("valid");
        assert_eq!(plan.next.epoch, 1);
        assert_eq!(plan.next.slots, [Some(1), None, Some(3), Some(4)]);
        assert_eq!(plan.transition, Transition::ViewChange, "a member leaves");
        assert_eq!((plan.joining, plan.leaving), (vec![4], vec![2]));
        assert_eq!(plan.next.slot_of(3), three().slot_of(3));
    }

    #[test]
    fn a_joining_node_never_takes_a_slot_held_in_the_current_epoch() {
        let current = SlotAssignment {
            epoch: 4,
            slots: vec![Some(1), None, Some(3), Some(4)],
            confirm: ConfirmPolicy::MajorityDurable,
        };
        let plan = plan(&current, &wish(&[1, 3, 5], None), &CLUSTER).expect("valid");
        assert_eq!(plan.next.slots, [Some(1), Some(5), Some(3)]);
        for (slot, node) in plan.next.members() {
            let before = current.slots.get(usize::from(slot)).copied().flatten();
            assert!(
                before.is_none() || before == Some(node),
                "slot {slot} changed hands"
            );
        }
    }

    #[test]
    fn policy_changes_are_classified_by_the_one_rule() {
        let local = SlotAssignment::dense(0, &[1, 2, 3], ConfirmPolicy::LocalDurable);
        let to_majority = plan(
            &local,
            &wish(&[1, 2, 3], Some(ConfirmPolicy::MajorityDurable)),
            &CLUSTER,
        )
        .expect("valid");
        assert_eq!(to_majority.transition, Transition::InPlace);
        let to_local = plan(
            &three(),
            &wish(&[1, 2, 3], Some(ConfirmPolicy::LocalDurable)),
            &CLUSTER,
        )
        .expect("valid");
        assert_eq!(
            to_local.transition,
            Transition::ViewChange,
            "more copies confirm"
        );
        let grown = plan(
            &three(),
            &wish(&[1, 2, 3, 4], Some(ConfirmPolicy::Count(2))),
            &CLUSTER,
        )
        .expect("valid");
        assert_eq!(grown.transition, Transition::InPlace);
        assert_eq!(grown.joining, [4]);
    }

    #[test]
    fn bad_wishes_are_refused_with_their_reason() {
        let current = three();
        let cases = [
            (wish(&[], None), ReassignError::NoReplicas),
            (wish(&[1, 2, 2], None), ReassignError::DuplicateNode(2)),
            (wish(&[1, 2, 9], None), ReassignError::UnknownNode(9)),
            (wish(&[3, 1, 2], None), ReassignError::NoChange),
            (
                wish(&[1, 2, 3], Some(ConfirmPolicy::MajorityDurable)),
                ReassignError::NoChange,
            ),
            (wish(&[4, 5], None), ReassignError::KeepsNoMember),
        ];
        for (wish, expected) in cases {
            assert_eq!(plan(&current, &wish, &CLUSTER), Err(expected), "{wish:?}");
        }
    }

    #[test]
    fn the_slots_of_leaving_and_joining_nodes_must_fit_together() {
        let cluster: Vec<u32> = (1..=40).collect();
        let full: Vec<u32> = (1..=u32::from(REPLICAS_MAX)).collect();
        let current = SlotAssignment::dense(0, &full, ConfirmPolicy::MajorityDurable);
        let mut swapped = full.clone();
        swapped[0] = 40;
        assert_eq!(
            plan(&current, &wish(&swapped, None), &cluster),
            Err(ReassignError::TooManySlots {
                needed: usize::from(REPLICAS_MAX) + 1,
                max: REPLICAS_MAX
            })
        );
    }
}
