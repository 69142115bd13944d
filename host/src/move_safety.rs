//! The safety rules of moving a partition, judged from its primary's
//! status: a new replica set in which `min(W, W')` or more replicas lack
//! acknowledged records (joining, or still catching up) could lose
//! confirmed records to one more lost copy; a removed replica's retired
//! copy may hold records a member still lacks. The node that receives a
//! `ReassignPartition` or `DropReplica` applies them before it proposes
//! (unless the request is forced). **Pure**: the rule is written once, here,
//! beside the reassignment plan.

use strand_consensus::confirm::confirm_rule;
use strand_wire::ConfirmPolicy;
use strand_wire::ops::GroupStatus;

/// A new replica set with too few copies that hold every acknowledged record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    /// New replicas that are not replicas now.
    pub joining: Vec<u32>,
    /// Replicas that stay but do not hold every committed record yet.
    pub catching_up: Vec<u32>,
    /// Copies that confirm a record before or after the change, the fewer
    /// (`min(W, W')`).
    pub write_quorum: u8,
}

impl Shortfall {
    /// What the refusal says: why, what was done (nothing), what to do.
    pub fn refusal(&self, target: &str) -> String {
        let nodes = |nodes: &[u32]| {
            let names: Vec<String> = nodes.iter().map(u32::to_string).collect();
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(",")
            }
        };
        format!(
            "refusing to reassign {target}: {} of the new replicas would lack acknowledged \
             records (joining: {}; catching up: {}) and {} copies confirm, so one more lost copy \
             could lose confirmed records; nothing was done. Wait until `strand status` \
             shows the replicas caught up, or re-run with --force",
            self.joining.len() + self.catching_up.len(),
            nodes(&self.joining),
            nodes(&self.catching_up),
            self.write_quorum
        )
    }
}

/// Whether `nodes` (with `confirm`, or the current policy) would leave
/// `min(W, W')` or more of its replicas without every acknowledged record,
/// as the primary's `status` sees the current replicas. Until each such replica
/// catches up, the records confirmed before the change rest on the rest.
pub fn shortfall(
    status: &GroupStatus,
    nodes: &[u32],
    confirm: Option<ConfirmPolicy>,
) -> Option<Shortfall> {
    let count = u8::try_from(nodes.len()).ok().filter(|count| *count > 0)?;
    // Records confirmed before the change rest on W copies, later ones on W'.
    let write_quorum = confirm_rule(confirm.unwrap_or(status.confirm), count)
        .write
        .min(status.write_quorum.max(1));
    let current = |node: u32| status.replicas.iter().find(|replica| replica.node == node);
    let joining: Vec<u32> = nodes
        .iter()
        .copied()
        .filter(|node| current(*node).is_none())
        .collect();
    let catching_up: Vec<u32> = nodes
        .iter()
        .copied()
        .filter(|node| current(*node).is_some_and(|replica| !replica.caught_up))
        .collect();
    (joining.len() + catching_up.len() >= usize::from(write_quorum)).then_some(Shortfall {
        joining,
        catching_up,
        write_quorum,
    })
}

/// Why dropping a removed copy now could lose records, if it could: a
/// member still lacks committed records (the removed copy may be the only
/// other holder), or no primary serves to say they are all caught up.
pub fn drop_too_soon(node: u32, target: &str, primary: Option<&GroupStatus>) -> Option<String> {
    let what = format!("refusing to drop node {node}'s retired copy of {target}");
    let advice = "nothing was done. Wait until `strand status` shows every replica caught up, \
                  or re-run with --force";
    let Some(primary) = primary else {
        return Some(format!(
            "{what}: no primary serves the partition now, so nobody can say its replicas hold \
             every record; {advice}"
        ));
    };
    let lagging: Vec<String> = primary
        .replicas
        .iter()
        .filter(|replica| !replica.caught_up)
        .map(|replica| replica.node.to_string())
        .collect();
    (!lagging.is_empty()).then(|| {
        format!(
            "{what}: node(s) {} still catch up, and the removed copy may hold records they \
             lack; {advice}",
            lagging.join(",")
        )
    })
}

/// Statuses for tests of the rules, here and in the node's own checks.
pub mod fixtures {
    use strand_wire::ConfirmPolicy;
    use strand_wire::ops::{GroupStatus, ReplicaStatus};

    /// Group 1 (`shop/orders/0`) on nodes 1, 2 and 3 (slots 0, 1, 2),
    /// majority-confirmed, as its primary (node 1) reports it; `caught_up`
    /// by slot.
    pub fn majority_of_three(caught_up: [bool; 3]) -> GroupStatus {
        let replica = |slot: u8, node: u32| ReplicaStatus {
            replica: slot,
            node,
            op: 10,
            caught_up: caught_up[usize::from(slot)],
        };
        GroupStatus {
            group: 1,
            stream: "shop".to_owned(),
            topic: "orders".to_owned(),
            partition: 0,
            epoch: 0,
            confirm: ConfirmPolicy::MajorityDurable,
            durability: strand_wire::Durability::Persisted,
            write_quorum: 2,
            view_change_quorum: 2,
            replica: 0,
            view: 0,
            log_view: 0,
            status: "normal".to_owned(),
            primary: 0,
            op: 10,
            commit_op: 10,
            log_start_offset: 0,
            high_watermark: 0,
            untrusted_log: false,
            replicas: vec![replica(0, 1), replica(1, 2), replica(2, 3)],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three_with_a_lagging_copy() -> GroupStatus {
        fixtures::majority_of_three([true, true, false])
    }

    #[test]
    fn a_set_whose_good_copies_are_fewer_than_it_needs_is_refused() {
        let status = three_with_a_lagging_copy();
        // Replacing node 2 by node 4 leaves node 1 as the one good copy of
        // three, two of which confirm.
        let short = shortfall(&status, &[1, 3, 4], None).expect("refused");
        assert_eq!(
            short,
            Shortfall {
                joining: vec![4],
                catching_up: vec![3],
                write_quorum: 2
            }
        );
        let text = short.refusal("shop/orders/0");
        assert!(text.contains("joining: 4; catching up: 3"), "{text}");
        assert!(text.contains("--force"), "{text}");
        // Replacing the lagging node keeps two good copies.
        assert_eq!(shortfall(&status, &[1, 2, 4], None), None);
        // One copy confirming from now on, one short copy is already too many.
        assert!(shortfall(&status, &[1, 2, 3], Some(ConfirmPolicy::Count(1))).is_some());
        assert_eq!(shortfall(&status, &[1, 2, 3], None), None);
        assert_eq!(
            shortfall(&status, &[1, 2, 3], Some(ConfirmPolicy::LocalDurable)),
            None
        );
    }

    #[test]
    fn a_retired_copy_is_kept_while_a_member_catches_up() {
        let mut status = three_with_a_lagging_copy();
        let refusal = drop_too_soon(4, "shop/orders/0", Some(&status)).expect("refused");
        assert!(refusal.contains("node(s) 3 still catch up"), "{refusal}");
        assert!(refusal.contains("--force"), "{refusal}");
        assert!(
            drop_too_soon(4, "shop/orders/0", None).is_some(),
            "nobody serves"
        );
        status.replicas[2].caught_up = true;
        assert_eq!(drop_too_soon(4, "shop/orders/0", Some(&status)), None);
    }
}
