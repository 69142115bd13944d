//! Moving a partition between nodes: `reassign_partition` (a new replica
//! set and confirm policy, planned by the metadata plane as the next epoch)
//! and `drop_replica` (forget the copy a removed node kept), with the
//! [`PartitionTarget`] both name a partition by; and a topic's confirm
//! policy changed partition by partition (for `alter_topic`).

use std::collections::HashMap;

use bytes::Bytes;
use strand_wire::ops::{DropReplica, Empty, ReassignPartition, Reassigned, TopicInfo};
use strand_wire::{Body, ConfirmPolicy, Operation, REPLICAS_MAX};
use tokio::sync::oneshot;

use crate::client::{Client, invalid, partition_group_of};
use crate::error::ClientError;
use crate::query::QueryTarget;
use crate::routing::METADATA_GROUP;

/// Most reassignments a topic's confirm change has in flight at once: the
/// metadata plane takes them pipelined, in order, and each batch's
/// deadline starts when it is handed over, so thousands of partitions
/// never wait out one deadline together.
pub(crate) const CONFIRM_CHANGES_IN_FLIGHT_MAX: usize = 32;

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
    /// node still holding a retired copy. Unless `force`, the node that
    /// receives it refuses (`Refused`) a set that would leave too few copies
    /// holding every acknowledged record ([`crate::safety`]).
    pub async fn reassign_partition(
        &self,
        target: PartitionTarget,
        nodes: &[u32],
        confirm: Option<ConfirmPolicy>,
        force: bool,
    ) -> Result<Reassigned, ClientError> {
        check_replica_count(nodes)?;
        let group = self.movable_group(&target).await?;
        let outcome = self.submit_reassignment(group, nodes, confirm, force);
        reassigned_of(group, outcome.await)
    }

    /// What moving `target` onto `nodes` (and `confirm`) would do, without
    /// doing it: a node runs its safety check (unless `force`) and answers
    /// with the plan its catalog gives. `Refused` says why the move would be
    /// refused now; nothing is proposed either way.
    pub async fn preview_reassign_partition(
        &self,
        target: PartitionTarget,
        nodes: &[u32],
        confirm: Option<ConfirmPolicy>,
        force: bool,
    ) -> Result<Reassigned, ClientError> {
        check_replica_count(nodes)?;
        let group = self.movable_group(&target).await?;
        let request = ReassignPartition {
            group,
            nodes: nodes.to_vec(),
            confirm,
            force,
            dry_run: true,
        };
        let reply = self
            .preview(Operation::ReassignPartition, request.to_vec())
            .await;
        reassigned_of(group, Ok(reply))
    }

    /// Whether dropping `node`'s retired copy of `target` would be accepted
    /// now, without dropping it (`Refused` or `InvalidRequest` say why not).
    pub async fn preview_drop_replica(
        &self,
        target: PartitionTarget,
        node: u32,
        force: bool,
    ) -> Result<(), ClientError> {
        let group = self.movable_group(&target).await?;
        let request = DropReplica {
            group,
            node,
            force,
            dry_run: true,
        };
        let reply = self
            .preview(Operation::DropReplica, request.to_vec())
            .await?;
        Empty::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("drop replica preview", error))?;
        Ok(())
    }

    /// A dry run of a move: any node answers it, after its safety check.
    async fn preview(&self, operation: Operation, body: Vec<u8>) -> Result<Bytes, ClientError> {
        let wait_ms = crate::safety::node_check_wait_ms(operation);
        self.query(QueryTarget::AnyNode, operation, Bytes::from(body), wait_ms)
            .await
    }

    /// Hands a reassignment of `group` to the metadata plane's session now
    /// (so several go out pipelined, in order).
    fn submit_reassignment(
        &self,
        group: u64,
        nodes: &[u32],
        confirm: Option<ConfirmPolicy>,
        force: bool,
    ) -> oneshot::Receiver<Result<Bytes, ClientError>> {
        assert_ne!(group, METADATA_GROUP, "group 0 is never reassigned");
        let request = ReassignPartition {
            group,
            nodes: nodes.to_vec(),
            confirm,
            force,
            dry_run: false,
        };
        let body = Bytes::from(request.to_vec());
        self.submit_replicated(METADATA_GROUP, Operation::ReassignPartition, body)
    }

    /// Gives every partition of `stream/topic` the confirm policy
    /// `confirm`, each through a reassignment onto its current replicas,
    /// at most [`CONFIRM_CHANGES_IN_FLIGHT_MAX`] at a time. A partition
    /// whose replicas report the policy already (at the catalog's epoch) is
    /// left alone: the metadata plane refuses a reassignment that changes
    /// nothing. Every partition is tried; `PartitionsRefused` names the
    /// ones refused.
    pub(crate) async fn confirm_every_partition(
        &self,
        stream: &str,
        topic: &str,
        confirm: ConfirmPolicy,
    ) -> Result<(), ClientError> {
        let info = self.topic(stream, topic).await?;
        let reported = self.reported_confirms(&info).await;
        let changing: Vec<_> = info
            .partitions
            .iter()
            .filter(|partition| reported.get(&partition.group) != Some(&confirm))
            .collect();
        let mut refused = Vec::new();
        for chunk in changing.chunks(CONFIRM_CHANGES_IN_FLIGHT_MAX) {
            let outcomes: Vec<_> = chunk
                .iter()
                .map(|partition| {
                    let outcome = self.submit_reassignment(
                        partition.group,
                        &partition.replicas,
                        Some(confirm),
                        // The same replicas: the nodes check only a change of set.
                        false,
                    );
                    (partition, outcome)
                })
                .collect();
            for (partition, outcome) in outcomes {
                if let Err(error) = reassigned_of(partition.group, outcome.await) {
                    refused.push((partition.partition, error));
                }
            }
        }
        if refused.is_empty() {
            return Ok(());
        }
        refused.sort_by_key(|(partition, _)| *partition);
        Err(ClientError::PartitionsRefused {
            stream: stream.to_owned(),
            topic: topic.to_owned(),
            refused,
        })
    }

    /// Each of `info`'s partitions' confirm policy, as the newest report of
    /// its replicas at the catalog's epoch says; a partition no node
    /// reported (or only at another epoch) is left out. Best effort: a
    /// status that cannot be had leaves every partition out.
    async fn reported_confirms(&self, info: &TopicInfo) -> HashMap<u64, ConfirmPolicy> {
        let epochs: HashMap<u64, u32> = info
            .partitions
            .iter()
            .map(|partition| (partition.group, partition.epoch))
            .collect();
        let Ok(status) = self.cluster_status().await else {
            return HashMap::new();
        };
        let mut newest: HashMap<u64, (u32, ConfirmPolicy)> = HashMap::new();
        for (_, report) in status.groups() {
            if epochs.get(&report.group) != Some(&report.epoch) {
                continue;
            }
            let known = newest
                .entry(report.group)
                .or_insert((report.view, report.confirm));
            if report.view > known.0 {
                *known = (report.view, report.confirm);
            }
        }
        newest
            .into_iter()
            .map(|(group, (_, confirm))| (group, confirm))
            .collect()
    }

    /// Forgets the copy of a partition that `node` kept after a
    /// reassignment removed it; the node then deletes the data. Refused
    /// with `InvalidRequest` when the node holds no retired copy (it is
    /// still a member, the reassignment has not started yet, or the copy
    /// was dropped already). Unless `force`, refused (`Refused`) while a
    /// member still catches up or no primary serves ([`crate::safety`]).
    pub async fn drop_replica(
        &self,
        target: PartitionTarget,
        node: u32,
        force: bool,
    ) -> Result<(), ClientError> {
        let group = self.movable_group(&target).await?;
        let body = Bytes::from(
            DropReplica {
                group,
                node,
                force,
                dry_run: false,
            }
            .to_vec(),
        );
        let reply = self
            .replicated(METADATA_GROUP, Operation::DropReplica, body)
            .await?;
        Empty::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("drop replica reply", error))?;
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

/// A partition's replica set holds 1 to 15 nodes.
fn check_replica_count(nodes: &[u32]) -> Result<(), ClientError> {
    if nodes.is_empty() || nodes.len() >= usize::from(REPLICAS_MAX) {
        return Err(invalid("a partition needs 1 to 15 replicas"));
    }
    Ok(())
}

/// The accepted reassignment of `group` in `outcome`, or why there is none.
fn reassigned_of(
    group: u64,
    outcome: Result<Result<Bytes, ClientError>, oneshot::error::RecvError>,
) -> Result<Reassigned, ClientError> {
    let reply = outcome.map_err(|_| ClientError::Closed)??;
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
