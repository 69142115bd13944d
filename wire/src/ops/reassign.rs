//! Metadata-plane operations that move a partition between replica sets:
//! reassigning it, reporting that its new epoch started, and dropping a
//! removed replica's data.
//!
//! Slots are replica indexes (`0..REPLICAS_MAX`) a node keeps while it is a
//! member; a member is written as a `(slot, node)` pair, in ascending slot
//! order.

use crate::codec::{Body, BodyReader, BodyWriter};
use crate::error::BodyError;
use crate::header::REPLICAS_MAX;
use crate::policy::ConfirmPolicy;

use super::status::{read_confirm, write_confirm};

/// The longest a node's safety check of a `ReassignPartition` or
/// `DropReplica` may take (it asks the nodes for the partition's status
/// before it proposes the move): a client waits this much longer for such
/// a request's answer before it suspects the node.
pub const NODE_CHECK_MS_MAX: u64 = 3_000;

/// Bytes one `(slot, node)` member takes: a `u8` slot and a `u32` node.
const MEMBER_SIZE: usize = 1 + 4;

/// Give a partition a new replica set and, optionally, a new confirm policy.
/// The metadata plane plans the next epoch (stable slots) or refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignPartition {
    /// The partition's group (never 0: the metadata plane's own membership is fixed).
    pub group: u64,
    /// The nodes that should hold the partition, 1 to `REPLICAS_MAX - 1`.
    pub nodes: Vec<u32>,
    /// The new confirm policy (`None`: keep the current one).
    pub confirm: Option<ConfirmPolicy>,
    /// Skip the node's safety check (a set that would leave too few copies
    /// holding every acknowledged record is refused without it).
    pub force: bool,
    /// Only ask: the node that receives it runs its safety check (unless
    /// `force`) and answers with the plan the metadata plane would make
    /// from its catalog, proposing nothing. Never in a log: a node answers
    /// it itself.
    pub dry_run: bool,
}

impl Body for ReassignPartition {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u64(self.group);
        writer.list(&self.nodes, |writer, node| writer.u32(*node));
        writer.bool(self.confirm.is_some());
        if let Some(confirm) = self.confirm {
            write_confirm(writer, confirm);
        }
        write_move_flags(writer, self.force, self.dry_run);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<ReassignPartition, BodyError> {
        let group = read_partition_group(reader)?;
        let nodes = reader.list("nodes", 4, |reader| reader.u32("node"))?;
        if nodes.is_empty() || nodes.len() >= usize::from(REPLICAS_MAX) {
            return Err(BodyError::Invalid {
                field: "nodes",
                reason: "not 1 to 15 nodes",
            });
        }
        let confirm = match reader.bool("confirm present")? {
            true => Some(read_confirm(reader)?),
            false => None,
        };
        let (force, dry_run) = read_move_flags(reader)?;
        Ok(ReassignPartition {
            group,
            nodes,
            confirm,
            force,
            dry_run,
        })
    }
}

/// The reply to ReassignPartition: the epoch before and the epoch planned,
/// with the quorums each implies, and how the change takes effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reassigned {
    /// The partition's group.
    pub group: u64,
    /// The new epoch (`previous_epoch + 1`).
    pub epoch: u32,
    /// True when the change takes effect in place (no view change); false
    /// when it takes effect through a view change at `epoch`.
    pub in_place: bool,
    /// The new epoch's members as `(slot, node)`, in ascending slot order.
    pub members: Vec<(u8, u32)>,
    /// The new epoch's confirm policy.
    pub confirm: ConfirmPolicy,
    /// Copies that confirm a record in the new epoch (`W`).
    pub write_quorum: u8,
    /// Trusted replicas a view change hears from in the new epoch (`R`).
    pub view_change_quorum: u8,
    /// The epoch before.
    pub previous_epoch: u32,
    /// The epoch before's members as `(slot, node)`, in ascending slot order.
    pub previous_members: Vec<(u8, u32)>,
    /// The epoch before's confirm policy.
    pub previous_confirm: ConfirmPolicy,
    /// `W` of the epoch before.
    pub previous_write_quorum: u8,
    /// `R` of the epoch before.
    pub previous_view_change_quorum: u8,
    /// Nodes that join (they start empty and catch up), ascending.
    pub joining: Vec<u32>,
    /// Nodes that leave (their data stays until dropped), ascending.
    pub leaving: Vec<u32>,
}

impl Body for Reassigned {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u64(self.group);
        writer.u32(self.epoch);
        writer.bool(self.in_place);
        write_members(writer, &self.members);
        write_confirm(writer, self.confirm);
        writer.u8(self.write_quorum);
        writer.u8(self.view_change_quorum);
        writer.u32(self.previous_epoch);
        write_members(writer, &self.previous_members);
        write_confirm(writer, self.previous_confirm);
        writer.u8(self.previous_write_quorum);
        writer.u8(self.previous_view_change_quorum);
        writer.list(&self.joining, |writer, node| writer.u32(*node));
        writer.list(&self.leaving, |writer, node| writer.u32(*node));
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<Reassigned, BodyError> {
        let group = read_partition_group(reader)?;
        let epoch = reader.u32("epoch")?;
        let in_place = reader.bool("in place")?;
        let members = read_members(reader, "members")?;
        let confirm = read_confirm(reader)?;
        let (write_quorum, view_change_quorum) = read_quorums(reader, members.len())?;
        let previous_epoch = reader.u32("previous epoch")?;
        if previous_epoch.checked_add(1) != Some(epoch) {
            return Err(BodyError::Invalid {
                field: "epoch",
                reason: "not the epoch after the previous one",
            });
        }
        let previous_members = read_members(reader, "previous members")?;
        let previous_confirm = read_confirm(reader)?;
        let (previous_write_quorum, previous_view_change_quorum) =
            read_quorums(reader, previous_members.len())?;
        let joining = reader.list("joining", 4, |reader| reader.u32("node"))?;
        let leaving = reader.list("leaving", 4, |reader| reader.u32("node"))?;
        Ok(Reassigned {
            group,
            epoch,
            in_place,
            members,
            confirm,
            write_quorum,
            view_change_quorum,
            previous_epoch,
            previous_members,
            previous_confirm,
            previous_write_quorum,
            previous_view_change_quorum,
            joining,
            leaving,
        })
    }
}

/// A partition's primary reports that the partition's epoch `epoch` has
/// started, so the metadata plane can retire the nodes that left. Retried by
/// nodes until answered; applying it twice changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochStarted {
    /// The partition's group.
    pub group: u64,
    /// The epoch that started (never 0: a partition starts in epoch 0).
    pub epoch: u32,
}

impl Body for EpochStarted {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u64(self.group);
        writer.u32(self.epoch);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<EpochStarted, BodyError> {
        let group = read_partition_group(reader)?;
        let epoch = reader.u32("epoch")?;
        if epoch == 0 {
            return Err(BodyError::Invalid {
                field: "epoch",
                reason: "epoch 0 starts with the partition",
            });
        }
        Ok(EpochStarted { group, epoch })
    }
}

/// Delete a retired copy of a partition: the data a node kept after a
/// reassignment removed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DropReplica {
    /// The partition's group.
    pub group: u64,
    /// The node whose retired copy is dropped.
    pub node: u32,
    /// Skip the node's safety check (a drop while a member still catches
    /// up, or while no primary serves, is refused without it).
    pub force: bool,
    /// Only ask: the node runs its checks and answers, proposing nothing
    /// (never in a log).
    pub dry_run: bool,
}

impl Body for DropReplica {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u64(self.group);
        writer.u32(self.node);
        write_move_flags(writer, self.force, self.dry_run);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<DropReplica, BodyError> {
        let group = read_partition_group(reader)?;
        let node = reader.u32("node")?;
        let (force, dry_run) = read_move_flags(reader)?;
        Ok(DropReplica {
            group,
            node,
            force,
            dry_run,
        })
    }
}

/// A move's flags byte: bit 0 `force`, bit 1 `dry_run`. It was a bool
/// (`force` alone) before dry runs, so every move in a log decodes as it
/// did; a node that predates dry runs refuses one as malformed rather than
/// carrying it out.
const FORCE: u8 = 1;
const DRY_RUN: u8 = 2;

fn write_move_flags(writer: &mut BodyWriter, force: bool, dry_run: bool) {
    let force = if force { FORCE } else { 0 };
    let dry_run = if dry_run { DRY_RUN } else { 0 };
    writer.u8(force | dry_run);
}

fn read_move_flags(reader: &mut BodyReader<'_>) -> Result<(bool, bool), BodyError> {
    let flags = reader.u8("flags")?;
    if flags & !(FORCE | DRY_RUN) != 0 {
        return Err(BodyError::Invalid {
            field: "flags",
            reason: "unknown flag bits",
        });
    }
    Ok((flags & FORCE != 0, flags & DRY_RUN != 0))
}

/// Reads a partition's group id: group 0, the metadata plane, is never moved.
fn read_partition_group(reader: &mut BodyReader<'_>) -> Result<u64, BodyError> {
    let group = reader.u64("group")?;
    if group == 0 {
        return Err(BodyError::Invalid {
            field: "group",
            reason: "the metadata plane's replicas are fixed",
        });
    }
    Ok(group)
}

fn write_members(writer: &mut BodyWriter, members: &[(u8, u32)]) {
    writer.list(members, |writer, (slot, node)| {
        writer.u8(*slot);
        writer.u32(*node);
    });
}

/// Reads `(slot, node)` members: at least one, slots below `REPLICAS_MAX`
/// and strictly ascending (so no slot names two nodes).
fn read_members(
    reader: &mut BodyReader<'_>,
    field: &'static str,
) -> Result<Vec<(u8, u32)>, BodyError> {
    let members = reader.list(field, MEMBER_SIZE, |reader| {
        Ok((reader.u8("slot")?, reader.u32("node")?))
    })?;
    if members.is_empty() {
        return Err(BodyError::Invalid {
            field,
            reason: "no members",
        });
    }
    if members.iter().any(|(slot, _)| *slot >= REPLICAS_MAX) {
        return Err(BodyError::Invalid {
            field,
            reason: "a slot is not below 16",
        });
    }
    if members.windows(2).any(|pair| pair[0].0 >= pair[1].0) {
        return Err(BodyError::Invalid {
            field,
            reason: "slots are not strictly ascending",
        });
    }
    Ok(members)
}

/// Reads `W` and `R`, each between 1 and the member count.
fn read_quorums(reader: &mut BodyReader<'_>, member_count: usize) -> Result<(u8, u8), BodyError> {
    let write_quorum = reader.u8("write quorum")?;
    let view_change_quorum = reader.u8("view change quorum")?;
    let valid = |quorum: u8| quorum >= 1 && usize::from(quorum) <= member_count;
    if !valid(write_quorum) || !valid(view_change_quorum) {
        return Err(BodyError::Invalid {
            field: "quorums",
            reason: "not between 1 and the member count",
        });
    }
    Ok((write_quorum, view_change_quorum))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reassigned() -> Reassigned {
        Reassigned {
            group: 4,
            epoch: 1,
            in_place: false,
            members: vec![(0, 1), (2, 3), (3, 4)],
            confirm: ConfirmPolicy::MajorityDurable,
            write_quorum: 2,
            view_change_quorum: 2,
            previous_epoch: 0,
            previous_members: vec![(0, 1), (1, 2), (2, 3)],
            previous_confirm: ConfirmPolicy::MajorityDurable,
            previous_write_quorum: 2,
            previous_view_change_quorum: 2,
            joining: vec![4],
            leaving: vec![2],
        }
    }

    #[test]
    fn a_reassign_request_and_its_reply_round_trip() {
        let request = ReassignPartition {
            group: 4,
            nodes: vec![1, 3, 4],
            confirm: Some(ConfirmPolicy::Count(2)),
            force: true,
            dry_run: false,
        };
        assert_eq!(
            ReassignPartition::from_bytes(&request.to_vec()),
            Ok(request)
        );
        let keep = ReassignPartition {
            group: 4,
            nodes: vec![1],
            confirm: None,
            force: false,
            dry_run: false,
        };
        assert_eq!(ReassignPartition::from_bytes(&keep.to_vec()), Ok(keep));
        assert_eq!(
            Reassigned::from_bytes(&reassigned().to_vec()),
            Ok(reassigned())
        );
    }

    #[test]
    fn a_reassign_request_names_a_partition_and_1_to_15_nodes() {
        let good = ReassignPartition {
            group: 4,
            nodes: vec![1, 2],
            confirm: None,
            force: false,
            dry_run: false,
        };
        let bad = [
            ReassignPartition {
                group: 0,
                ..good.clone()
            },
            ReassignPartition {
                nodes: Vec::new(),
                ..good.clone()
            },
            ReassignPartition {
                nodes: (1..=16).collect(),
                ..good.clone()
            },
        ];
        for request in bad {
            assert!(
                matches!(
                    ReassignPartition::from_bytes(&request.to_vec()),
                    Err(BodyError::Invalid { .. })
                ),
                "{request:?}"
            );
        }
        let mut unknown_flag = good.to_vec();
        *unknown_flag.last_mut().expect("flags byte") = 4;
        assert!(ReassignPartition::from_bytes(&unknown_flag).is_err());
    }

    #[test]
    fn a_reassigned_reply_with_broken_members_or_epochs_is_refused() {
        let bad = [
            Reassigned {
                members: Vec::new(),
                ..reassigned()
            },
            Reassigned {
                members: vec![(2, 3), (0, 1)],
                ..reassigned()
            },
            Reassigned {
                members: vec![(0, 1), (0, 2)],
                ..reassigned()
            },
            Reassigned {
                previous_members: vec![(16, 1)],
                ..reassigned()
            },
            Reassigned {
                epoch: 5,
                ..reassigned()
            },
            Reassigned {
                write_quorum: 0,
                ..reassigned()
            },
            Reassigned {
                previous_view_change_quorum: 4,
                ..reassigned()
            },
            Reassigned {
                group: 0,
                ..reassigned()
            },
        ];
        for reply in bad {
            assert!(
                matches!(
                    Reassigned::from_bytes(&reply.to_vec()),
                    Err(BodyError::Invalid { .. })
                ),
                "{reply:?}"
            );
        }
    }

    #[test]
    fn epoch_started_and_drop_replica_name_a_partition() {
        let started = EpochStarted { group: 4, epoch: 2 };
        assert_eq!(EpochStarted::from_bytes(&started.to_vec()), Ok(started));
        let dropped = DropReplica {
            group: 4,
            node: 9,
            force: true,
            dry_run: false,
        };
        assert_eq!(DropReplica::from_bytes(&dropped.to_vec()), Ok(dropped));
        for bad in [
            EpochStarted { group: 0, epoch: 2 },
            EpochStarted { group: 4, epoch: 0 },
        ] {
            assert!(EpochStarted::from_bytes(&bad.to_vec()).is_err(), "{bad:?}");
        }
        let metadata_plane = DropReplica {
            group: 0,
            node: 9,
            force: false,
            dry_run: false,
        };
        assert!(DropReplica::from_bytes(&metadata_plane.to_vec()).is_err());
    }

    #[test]
    fn a_move_in_a_log_decodes_as_before_and_unknown_flags_are_refused() {
        // `group 4, node 9, force` as a bool: how every drop in a log is.
        let mut forced = 4u64.to_le_bytes().to_vec();
        forced.extend_from_slice(&9u32.to_le_bytes());
        forced.push(1);
        let decoded = DropReplica::from_bytes(&forced).expect("decodes");
        assert!(decoded.force && !decoded.dry_run);
        let dry_run = DropReplica {
            force: false,
            dry_run: true,
            ..decoded
        };
        assert_eq!(dry_run.to_vec().last(), Some(&2));
        assert_eq!(DropReplica::from_bytes(&dry_run.to_vec()), Ok(dry_run));
        *forced.last_mut().expect("flags") = 4;
        assert!(DropReplica::from_bytes(&forced).is_err(), "an unknown flag");
    }

    #[test]
    fn every_truncation_is_a_typed_error() {
        let request = ReassignPartition {
            group: 4,
            nodes: vec![1, 3],
            confirm: Some(ConfirmPolicy::LocalDurable),
            force: false,
            dry_run: false,
        }
        .to_vec();
        for length in 0..request.len() {
            assert!(ReassignPartition::from_bytes(&request[..length]).is_err());
        }
        let reply = reassigned().to_vec();
        for length in 0..reply.len() {
            assert!(Reassigned::from_bytes(&reply[..length]).is_err());
        }
        let started = EpochStarted { group: 1, epoch: 1 }.to_vec();
        for length in 0..started.len() {
            assert!(matches!(
                EpochStarted::from_bytes(&started[..length]),
                Err(BodyError::Truncated { .. })
            ));
            assert!(matches!(
                DropReplica::from_bytes(&started[..length]),
                Err(BodyError::Truncated { .. })
            ));
        }
    }
}
