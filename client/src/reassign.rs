//! Moving a partition between nodes: `reassign_partition` (a new replica
//! set and confirm policy, planned by the metadata plane as the next epoch)
//! and `drop_replica` (forget the copy a removed node kept), with the
//! [`PartitionTarget`] both name a partition by.

use bytes::Bytes;
use strand_wire::ops::{DropReplica, Empty, EpochStarted, ReassignPartition, Reassigned};
use strand_wire::{Body, ConfirmPolicy, Operation, REPLICAS_MAX};

use crate::client::{Client, invalid, partition_group_of};
use crate::error::ClientError;
use crate::routing::METADATA_GROUP;

/// A partition as an operator names it: by group id (as `status` prints
/// it) or by topic and index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionTarget {
    /// A group id.
    Group(u64),
    /// A topic's partition.
    Partition {
        /// The stream.
        stream: String,
        /// The topic.
        topic: String,
        /// The partition index.
        partition: u32,
    },
}

impl std::fmt::Display for PartitionTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartitionTarget::Group(group) => write!(f, "group {group}"),
            PartitionTarget::Partition {
                stream,
                topic,
                partition,
            } => write!(f, "{stream}/{topic}/{partition}"),
        }
    }
}

impl From<u64> for PartitionTarget {
    fn from(group: u64) -> PartitionTarget {
        PartitionTarget::Group(group)
    }
}

impl Client {
    /// The group id of `target`: as given, or looked up in fresh metadata.
    pub async fn resolve_partition(&self, target: &PartitionTarget) -> Result<u64, ClientError> {
        match target {
            PartitionTarget::Group(group) => Ok(*group),
            PartitionTarget::Partition {
                stream,
                topic,
                partition,
            } => {
                let info = self.topic(stream, topic).await?;
                partition_group_of(&info, *partition)
            }
        }
    }

    /// Gives a partition the replica set `nodes` and, if given, a new
    /// confirm policy. Nodes that stay keep their slots; the reply says how
    /// the change takes effect (in place, or through a view change at the
    /// new epoch) and the quorums before and after. Nodes that leave keep
    /// their copy until [`Client::drop_replica`].
    ///
    /// Refused with `Unavailable` while the partition's previous
    /// reassignment has not started (retry later), and with
    /// `InvalidRequest` for a set that changes nothing, names an unknown
    /// node twice or at all, keeps none of the current replicas, or names a
    /// node still holding a retired copy.
    pub async fn reassign_partition(
        &self,
        target: PartitionTarget,
        nodes: &[u32],
        confirm: Option<ConfirmPolicy>,
    ) -> Result<Reassigned, ClientError> {
        if nodes.is_empty() || nodes.len() >= usize::from(REPLICAS_MAX) {
            return Err(invalid("a partition needs 1 to 15 replicas"));
        }
        let group = self.movable_group(&target).await?;
        let request = ReassignPartition {
            group,
            nodes: nodes.to_vec(),
            confirm,
        };
        let body = Bytes::from(request.to_vec());
        let reply = self
            .replicated(METADATA_GROUP, Operation::ReassignPartition, body)
            .await?;
        let reassigned = Reassigned::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("reassign reply", error))?;
        if reassigned.group != group {
            return Err(ClientError::Protocol {
                reason: format!(
                    "a reassignment of group {group} was answered for group {}",
                    reassigned.group
                ),
            });
        }
        Ok(reassigned)
    }

    /// Forgets the copy of a partition that `node` kept after a
    /// reassignment removed it; the node then deletes the data. Refused
    /// with `InvalidRequest` when the node holds no retired copy (it is
    /// still a member, the reassignment has not started yet, or the copy
    /// was dropped already).
    pub async fn drop_replica(
        &self,
        target: PartitionTarget,
        node: u32,
    ) -> Result<(), ClientError> {
        let group = self.movable_group(&target).await?;
        let body = Bytes::from(DropReplica { group, node }.to_vec());
        let reply = self
            .replicated(METADATA_GROUP, Operation::DropReplica, body)
            .await?;
        Empty::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("drop replica reply", error))?;
        Ok(())
    }

    /// Tells the metadata plane that `epoch` started in `group` (a node does
    /// this for the partitions it leads; idempotent). Until it hears so, the
    /// metadata plane refuses the partition's next reassignment and keeps
    /// the nodes that left counted as members.
    pub async fn report_epoch_started(&self, group: u64, epoch: u32) -> Result<(), ClientError> {
        if group == METADATA_GROUP {
            return Err(invalid("group 0 has no reassignments"));
        }
        let body = Bytes::from(EpochStarted { group, epoch }.to_vec());
        let reply = self
            .replicated(METADATA_GROUP, Operation::EpochStarted, body)
            .await?;
        Empty::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("epoch started reply", error))?;
        Ok(())
    }

    /// The group of a partition the metadata plane may move (never group 0).
    async fn movable_group(&self, target: &PartitionTarget) -> Result<u64, ClientError> {
        let group = self.resolve_partition(target).await?;
        if group == METADATA_GROUP {
            return Err(invalid(
                "group 0 is the metadata plane: its replicas are every node, fixed",
            ));
        }
        Ok(group)
    }
}
