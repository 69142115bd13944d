//! Operator calls that ask every node (or every node hosting a group) and
//! report each node's answer or failure: `cluster_status`, `attention`,
//! `accept_loss`, `catalog_applied_everywhere`. A node that is down is an entry with an error, never a
//! failed call, so operators see the rest of the cluster.

use bytes::Bytes;
use strand_wire::ops::{
    AcceptLoss, AcceptLossReply, AttentionEntry, AttentionReply, ClusterStatusReply, Empty,
    GroupStatus,
};
use strand_wire::{Body, Operation};

use crate::client::{Client, invalid};
use crate::driver::DriverCommand;
use crate::error::ClientError;
use crate::query::QueryTarget;

/// One node's answer to a per-node call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAnswer<T> {
    /// The node's id.
    pub node: u32,
    /// Its client address.
    pub address: String,
    /// Its answer, or why there is none.
    pub result: Result<T, ClientError>,
}

/// Every node's view of the groups it hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStatus {
    /// One entry per node in the cluster's metadata.
    pub nodes: Vec<NodeAnswer<ClusterStatusReply>>,
}

impl ClusterStatus {
    /// Every (node, group) pair reported, across the nodes that answered.
    pub fn groups(&self) -> impl Iterator<Item = (u32, &GroupStatus)> {
        self.nodes.iter().flat_map(|answer| {
            answer
                .result
                .iter()
                .flat_map(move |reply| reply.groups.iter().map(move |group| (answer.node, group)))
        })
    }

    /// The nodes that did not answer, and why.
    pub fn failures(&self) -> impl Iterator<Item = (u32, &ClientError)> {
        self.nodes.iter().filter_map(|answer| {
            answer
                .result
                .as_ref()
                .err()
                .map(|error| (answer.node, error))
        })
    }
}

/// Every node's list of groups whose view change waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionReport {
    /// One entry per node in the cluster's metadata.
    pub nodes: Vec<NodeAnswer<AttentionReply>>,
}

impl AttentionReport {
    /// Every (node, waiting group) pair reported.
    pub fn entries(&self) -> impl Iterator<Item = (u32, &AttentionEntry)> {
        self.nodes.iter().flat_map(|answer| {
            answer
                .result
                .iter()
                .flat_map(move |reply| reply.entries.iter().map(move |entry| (answer.node, entry)))
        })
    }

    /// True when every node answered and none reported a waiting group.
    pub fn is_clear(&self) -> bool {
        self.nodes.iter().all(|answer| {
            answer
                .result
                .as_ref()
                .is_ok_and(|reply| reply.entries.is_empty())
        })
    }
}

impl Client {
    /// Asks every node for the groups it hosts (views, commits, replicas).
    pub async fn cluster_status(&self) -> Result<ClusterStatus, ClientError> {
        let nodes = self.all_nodes().await?;
        let nodes = self
            .ask_each(
                nodes,
                Operation::ClusterStatus,
                Bytes::from(Empty.to_vec()),
                ClusterStatusReply::from_bytes,
            )
            .await;
        Ok(ClusterStatus { nodes })
    }

    /// Asks every node which of its groups wait in a view change, and why.
    pub async fn attention(&self) -> Result<AttentionReport, ClientError> {
        let nodes = self.all_nodes().await?;
        let nodes = self
            .ask_each(
                nodes,
                Operation::Attention,
                Bytes::from(Empty.to_vec()),
                AttentionReply::from_bytes,
            )
            .await;
        Ok(AttentionReport { nodes })
    }

    /// Lets `group`'s stuck view change proceed with the logs at hand, on
    /// every node hosting one of its replicas. **May lose confirmed
    /// records.** Nodes that are not stuck answer `Unavailable` or
    /// `InvalidRequest`; nodes not hosting it answer `UnknownGroup`.
    pub async fn accept_loss(
        &self,
        group: u64,
    ) -> Result<Vec<NodeAnswer<AcceptLossReply>>, ClientError> {
        if group == crate::routing::METADATA_GROUP {
            return Err(invalid("the metadata plane (group 0) never accepts loss"));
        }
        self.metadata().await?;
        let hosts = self
            .ask_driver(|reply| DriverCommand::ReplicaNodes { group, reply })
            .await?;
        let nodes = match hosts {
            Some(hosts) => hosts,
            None => self.all_nodes().await?, // unknown group: every node says whether it hosts it
        };
        let body = Bytes::from(AcceptLoss { group }.to_vec());
        Ok(self
            .ask_each(
                nodes,
                Operation::AcceptLoss,
                body,
                AcceptLossReply::from_bytes,
            )
            .await)
    }

    /// Asks every node whether its catalog has applied every metadata
    /// change this client has seen (a node answers a metadata question only
    /// once it has; the client retries a stale answer until its deadline).
    /// A change that must hold on every node before the caller moves on (a
    /// revoked token) waits for this.
    pub async fn catalog_applied_everywhere(&self) -> Result<Vec<NodeAnswer<()>>, ClientError> {
        let nodes = self.all_nodes().await?;
        let body = Bytes::from(strand_wire::ops::MetadataRequest::default().to_vec());
        Ok(self
            .ask_each(nodes, Operation::Metadata, body, |bytes| {
                strand_wire::ops::MetadataReply::from_bytes(bytes).map(|_| ())
            })
            .await)
    }

    /// Every node of the cluster, from fresh metadata.
    async fn all_nodes(&self) -> Result<Vec<(u32, String)>, ClientError> {
        self.metadata().await?;
        self.ask_driver(|reply| DriverCommand::Nodes { reply })
            .await
    }

    /// Sends one node-local request to each node at once; collects answers.
    async fn ask_each<T: Send + 'static>(
        &self,
        nodes: Vec<(u32, String)>,
        operation: Operation,
        body: Bytes,
        decode: fn(&[u8]) -> Result<T, strand_wire::BodyError>,
    ) -> Vec<NodeAnswer<T>> {
        let tasks: Vec<_> = nodes
            .into_iter()
            .map(|(node, address)| {
                let client = self.clone();
                let body = body.clone();
                let target = QueryTarget::Node(address.clone());
                let task =
                    tokio::spawn(async move { client.query(target, operation, body, 0).await });
                (node, address, task)
            })
            .collect();
        let mut answers = Vec::with_capacity(tasks.len());
        for (node, address, task) in tasks {
            let result = match task.await {
                Ok(Ok(reply)) => decode(&reply)
                    .map_err(|error| ClientError::from_body_error("node reply", error)),
                Ok(Err(error)) => Err(error),
                Err(_) => Err(ClientError::Closed),
            };
            answers.push(NodeAnswer {
                node,
                address,
                result,
            });
        }
        answers
    }
}
