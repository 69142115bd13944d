//! The one confirm rule: how many copies confirm a prepare (`W`) and how many
//! trusted replicas a view change must hear from (`R = E - W + 1`).
//!
//! The commit path, the view-change quorum, the nack quorum and the admin
//! output all call [`confirm_rule`], so they can never disagree. Any W-set and
//! any R-set of the E replicas share at least one replica (`W + R = E + 1`),
//! which is why a confirmed prepare survives every view change.

pub use strand_wire::ConfirmPolicy;

/// The quorums of a group, derived from its confirm policy and replica count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConfirmRule {
    /// Copies (the primary's included) that must hold a prepare before it commits.
    pub write: u8,
    /// Trusted DoViewChanges a view change needs; also the nack quorum.
    pub view_change: u8,
}

/// Turns a confirm policy and a replica count `E` into the group's quorums.
///
/// `MajorityDurable` is `E / 2 + 1`; `LocalDurable` is every copy; `Count(n)`
/// is `n` capped at `E` (a count of 0 cannot be built: the wire rejects it).
pub fn confirm_rule(policy: ConfirmPolicy, replica_count: u8) -> ConfirmRule {
    assert!(replica_count >= 1, "a group has at least one replica");
    let write = match policy {
        ConfirmPolicy::MajorityDurable => replica_count / 2 + 1,
        ConfirmPolicy::LocalDurable => replica_count,
        ConfirmPolicy::Count(count) => {
            assert!(count >= 1, "confirm count of zero");
            count.min(replica_count)
        }
    };
    let rule = ConfirmRule {
        write,
        view_change: replica_count - write + 1,
    };
    assert!(rule.write >= 1 && rule.write <= replica_count);
    assert!(rule.view_change >= 1 && rule.view_change <= replica_count);
    assert_eq!(
        u16::from(rule.write) + u16::from(rule.view_change),
        u16::from(replica_count) + 1
    );
    rule
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policies(replica_count: u8) -> Vec<ConfirmPolicy> {
        let mut policies = vec![ConfirmPolicy::MajorityDurable, ConfirmPolicy::LocalDurable];
        policies.extend((1..=replica_count + 3).map(ConfirmPolicy::Count));
        policies
    }

    #[test]
    fn every_write_quorum_meets_every_view_change_quorum() {
        for replica_count in 1..=7u8 {
            for policy in policies(replica_count) {
                let rule = confirm_rule(policy, replica_count);
                // Exhaustively: every W-subset and every R-subset intersect.
                let sets = |size: u8| {
                    (0u32..1 << replica_count)
                        .filter(move |set| set.count_ones() == u32::from(size))
                };
                for write_set in sets(rule.write) {
                    for view_change_set in sets(rule.view_change) {
                        assert_ne!(
                            write_set & view_change_set,
                            0,
                            "E={replica_count} {policy:?}: {write_set:b} and {view_change_set:b} are disjoint"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn named_policies() {
        assert_eq!(
            confirm_rule(ConfirmPolicy::MajorityDurable, 3),
            ConfirmRule {
                write: 2,
                view_change: 2
            }
        );
        assert_eq!(
            confirm_rule(ConfirmPolicy::MajorityDurable, 5),
            ConfirmRule {
                write: 3,
                view_change: 3
            }
        );
        assert_eq!(
            confirm_rule(ConfirmPolicy::MajorityDurable, 4),
            ConfirmRule {
                write: 3,
                view_change: 2
            }
        );
        assert_eq!(
            confirm_rule(ConfirmPolicy::LocalDurable, 3),
            ConfirmRule {
                write: 3,
                view_change: 1
            }
        );
        assert_eq!(
            confirm_rule(ConfirmPolicy::Count(5), 3),
            confirm_rule(ConfirmPolicy::LocalDurable, 3)
        );
        assert_eq!(
            confirm_rule(ConfirmPolicy::Count(1), 3),
            ConfirmRule {
                write: 1,
                view_change: 3
            }
        );
        assert_eq!(
            confirm_rule(ConfirmPolicy::MajorityDurable, 1),
            ConfirmRule {
                write: 1,
                view_change: 1
            }
        );
    }
}
