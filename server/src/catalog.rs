//! The metadata plane's state machine: streams, topics, and each partition's
//! group and replica set. Applied, in op order, on every node; every node
//! hosts the partitions its id appears in.

use std::collections::BTreeMap;

use bytes::Bytes;
use strand_consensus::StateMachine;
use strand_wire::ops::{
    CreateStream, CreateTopic, ErrorBody, PartitionInfo, TopicCreated, TopicInfo,
};
use strand_wire::{Body, ConfirmPolicy, Durability, Operation, PrepareHeader, ResultCode};

/// One partition's assignment: its group and where it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The partition's group id.
    pub group: u64,
    /// Stream name.
    pub stream: String,
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
    /// Node id of replica `i` at index `i`.
    pub replicas: Vec<u32>,
    /// Assignment epoch.
    pub epoch: u32,
    /// Confirm policy.
    pub confirm: ConfirmPolicy,
    /// Durability policy.
    pub durability: Durability,
    /// Cursor commit durability.
    pub consumer_offset_durability: Durability,
    /// Retention by size (0: none).
    pub retention_bytes: u64,
    /// Retention by age (0: none).
    pub retention_ms: u64,
}

/// A topic: its policies live on its partitions' assignments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicEntry {
    /// Group ids of its partitions, in partition order.
    pub groups: Vec<u64>,
}

/// The catalog: everything the metadata plane decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// Streams, each with its topics.
    pub streams: BTreeMap<String, BTreeMap<String, TopicEntry>>,
    /// Every partition's assignment by group id.
    pub groups: BTreeMap<u64, Assignment>,
    next_group: u64,
    /// The last metadata op applied: answers from this catalog reflect every
    /// op up to it (a client that saw a later op asks again).
    pub applied_op: u64,
    /// The cluster's node ids, sorted (placement cycles through them).
    nodes: Vec<u32>,
}

impl Catalog {
    /// An empty catalog for a cluster of `nodes`.
    pub fn new(nodes: Vec<u32>) -> Catalog {
        assert!(!nodes.is_empty());
        Catalog {
            streams: BTreeMap::new(),
            groups: BTreeMap::new(),
            next_group: 1,
            applied_op: 0,
            nodes,
        }
    }

    /// Groups hosted on `node`.
    pub fn hosted_on(&self, node: u32) -> impl Iterator<Item = &Assignment> {
        self.groups
            .values()
            .filter(move |assignment| assignment.replicas.contains(&node))
    }

    /// A topic's routing information.
    pub fn topic_info(
        &self,
        stream: &str,
        topic: &str,
        views: &dyn Fn(u64) -> u32,
    ) -> Option<TopicInfo> {
        let entry = self.streams.get(stream)?.get(topic)?;
        let first = self.groups.get(entry.groups.first()?)?;
        Some(TopicInfo {
            stream: stream.to_owned(),
            topic: topic.to_owned(),
            confirm: first.confirm,
            durability: first.durability,
            consumer_offset_durability: first.consumer_offset_durability,
            retention_bytes: first.retention_bytes,
            retention_ms: first.retention_ms,
            partitions: entry
                .groups
                .iter()
                .filter_map(|group| self.groups.get(group))
                .map(|assignment| PartitionInfo {
                    partition: assignment.partition,
                    group: assignment.group,
                    epoch: assignment.epoch,
                    replicas: assignment.replicas.clone(),
                    view: views(assignment.group),
                })
                .collect(),
        })
    }

    fn create_stream(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = CreateStream::from_bytes(body).map_err(invalid)?;
        if self.streams.contains_key(&request.name) {
            return Err(ErrorBody::message(
                ResultCode::AlreadyExists,
                format!("stream {} exists", request.name),
            ));
        }
        self.streams.insert(request.name, BTreeMap::new());
        Ok(Bytes::new())
    }

    fn create_topic(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = CreateTopic::from_bytes(body).map_err(invalid)?;
        let nodes = self.nodes.len();
        let Some(topics) = self.streams.get(&request.stream) else {
            return Err(ErrorBody::message(
                ResultCode::UnknownStream,
                format!("no stream {}", request.stream),
            ));
        };
        if topics.contains_key(&request.topic) {
            return Err(ErrorBody::message(
                ResultCode::AlreadyExists,
                format!("topic {} exists", request.topic),
            ));
        }
        if usize::from(request.replica_count) > nodes {
            return Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!(
                    "{} replicas asked, the cluster has {nodes} nodes",
                    request.replica_count
                ),
            ));
        }
        // The receiving node fills in the cluster's defaults before it
        // proposes; a request that still lacks a policy gets the safe one.
        let durability = request.durability.unwrap_or(Durability::Persisted);
        let confirm = request.confirm.unwrap_or(ConfirmPolicy::MajorityDurable);
        let consumer_offset_durability = request.consumer_offset_durability.unwrap_or(durability);
        let mut groups = Vec::new();
        for partition in 0..request.partition_count {
            let group = self.next_group;
            self.next_group += 1;
            let start = (group - 1) as usize % nodes;
            let replicas = (0..usize::from(request.replica_count))
                .map(|offset| self.nodes[(start + offset) % nodes])
                .collect();
            self.groups.insert(
                group,
                Assignment {
                    group,
                    stream: request.stream.clone(),
                    topic: request.topic.clone(),
                    partition,
                    replicas,
                    epoch: 0,
                    confirm,
                    durability,
                    consumer_offset_durability,
                    retention_bytes: request.retention_bytes,
                    retention_ms: request.retention_ms,
                },
            );
            groups.push(group);
        }
        let topics = self
            .streams
            .get_mut(&request.stream)
            .expect("checked above");
        topics.insert(
            request.topic,
            TopicEntry {
                groups: groups.clone(),
            },
        );
        Ok(Bytes::from(TopicCreated { groups }.to_vec()))
    }
}

fn invalid(error: strand_wire::BodyError) -> ErrorBody {
    ErrorBody::message(ResultCode::InvalidRequest, error.to_string())
}

impl StateMachine for Catalog {
    fn commit(&mut self, header: &PrepareHeader, body: Option<&Bytes>) -> (ResultCode, Bytes) {
        let Some(body) = body else {
            // Bodies are kept until commit on every replica of the metadata
            // plane (`needs_bodies`); a missing one is a bug.
            panic!("metadata op {} committed without its body", header.op.get());
        };
        self.applied_op = self.applied_op.max(header.op.get());
        let result = match header.operation() {
            Operation::CreateStream => self.create_stream(body),
            Operation::CreateTopic => self.create_topic(body),
            other => Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!("{other:?} is not a metadata operation"),
            )),
        };
        match result {
            Ok(reply) => (ResultCode::Ok, reply),
            Err(error) => (error.code(), Bytes::from(error.to_vec())),
        }
    }

    fn needs_bodies(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::CommandHeader;

    fn header(op: u64, operation: Operation) -> PrepareHeader {
        let mut header = PrepareHeader::new(1, 0, strand_wire::ViewId::new(0, 0), 0);
        header.op.set(op);
        header.commit.set(op - 1);
        header.operation = operation as u8;
        header.client.set(1);
        header.request.set(op);
        header
    }

    fn topic(stream: &str, topic: &str, partitions: u32, replicas: u8) -> Bytes {
        Bytes::from(
            CreateTopic {
                stream: stream.into(),
                topic: topic.into(),
                partition_count: partitions,
                replica_count: replicas,
                confirm: Some(ConfirmPolicy::MajorityDurable),
                durability: Some(Durability::Persisted),
                consumer_offset_durability: None,
                retention_bytes: 0,
                retention_ms: 0,
            }
            .to_vec(),
        )
    }

    #[test]
    fn topics_get_groups_placed_round_robin() {
        let mut catalog = Catalog::new(vec![1, 2, 3]);
        let stream = Bytes::from(CreateStream { name: "s".into() }.to_vec());
        assert_eq!(
            catalog
                .commit(&header(1, Operation::CreateStream), Some(&stream))
                .0,
            ResultCode::Ok
        );
        assert_eq!(
            catalog
                .commit(&header(2, Operation::CreateStream), Some(&stream))
                .0,
            ResultCode::AlreadyExists
        );
        let (result, body) = catalog.commit(
            &header(3, Operation::CreateTopic),
            Some(&topic("s", "t", 3, 3)),
        );
        assert_eq!(result, ResultCode::Ok);
        assert_eq!(
            TopicCreated::from_bytes(&body).expect("reply").groups,
            vec![1, 2, 3]
        );
        assert_eq!(catalog.groups[&1].replicas, vec![1, 2, 3]);
        assert_eq!(catalog.groups[&2].replicas, vec![2, 3, 1]);
        assert_eq!(catalog.hosted_on(2).count(), 3);
        let (result, _) = catalog.commit(
            &header(4, Operation::CreateTopic),
            Some(&topic("nope", "t", 1, 1)),
        );
        assert_eq!(result, ResultCode::UnknownStream);
        let (result, _) = catalog.commit(
            &header(5, Operation::CreateTopic),
            Some(&topic("s", "u", 1, 4)),
        );
        assert_eq!(result, ResultCode::InvalidRequest);
    }
}
