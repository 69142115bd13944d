//! The scripted metadata plane: streams and topics created, altered, grown
//! and deleted, partitions reassigned and their retired copies dropped,
//! stuck view changes let through, and the metadata answer.

use bytes::Bytes;
use strand_wire::ops::{
    AcceptLoss, AcceptLossReply, AddPartitions, AlterTopic, CreateStream, CreateTopic,
    DeleteStream, DeleteTopic, DropReplica, Empty, ErrorBody, MetadataReply, MetadataRequest,
    PartitionInfo, ReassignPartition, Reassigned, TopicCreated, TopicInfo, TopicsDeleted,
};
use strand_wire::{Body, ConfirmPolicy, ResultCode};

use super::requests::invalid;
use super::{Partition, State};

impl State {
    pub(super) fn create_topic(
        &mut self,
        stream: &str,
        topic: &str,
        partitions: u32,
        replicas: &[u32],
    ) -> Vec<u64> {
        let (groups, infos) = self.new_partitions(0..partitions, replicas);
        self.topics.push(TopicInfo {
            stream: stream.to_owned(),
            topic: topic.to_owned(),
            confirm: Default::default(),
            durability: Default::default(),
            consumer_offset_durability: Default::default(),
            retention_bytes: 0,
            retention_ms: 0,
            segment_bytes: 0,
            partitions: infos,
        });
        groups
    }

    /// Partitions `indexes`, each a new group on `replicas`.
    fn new_partitions(
        &mut self,
        indexes: std::ops::Range<u32>,
        replicas: &[u32],
    ) -> (Vec<u64>, Vec<PartitionInfo>) {
        let mut infos = Vec::new();
        let mut groups = Vec::new();
        for index in indexes {
            let group = self.next_group;
            self.next_group += 1;
            groups.push(group);
            self.partitions.insert(
                group,
                Partition {
                    group,
                    replicas: replicas.to_vec(),
                    slots: replicas.iter().copied().map(Some).collect(),
                    epoch: 1,
                    primary: replicas[0],
                    ..Partition::default()
                },
            );
            infos.push(PartitionInfo {
                partition: index,
                group,
                epoch: 1,
                replicas: replicas.to_vec(),
                view: 0,
            });
        }
        (groups, infos)
    }

    pub(super) fn apply_create_stream(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = CreateStream::from_bytes(body).map_err(invalid)?;
        if self.streams.contains(&request.name) {
            return Err(ErrorBody::message(
                ResultCode::AlreadyExists,
                "stream exists",
            ));
        }
        self.streams.push(request.name);
        Ok(Bytes::from(Empty.to_vec()))
    }

    pub(super) fn apply_create_topic(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = CreateTopic::from_bytes(body).map_err(invalid)?;
        if !self.streams.contains(&request.stream) {
            return Err(ErrorBody::message(
                ResultCode::UnknownStream,
                "no such stream",
            ));
        }
        let exists = self
            .topics
            .iter()
            .any(|info| info.stream == request.stream && info.topic == request.topic);
        if exists {
            return Err(ErrorBody::message(
                ResultCode::AlreadyExists,
                "topic exists",
            ));
        }
        let replicas: Vec<u32> = self
            .nodes
            .iter()
            .map(|info| info.id)
            .take(request.replica_count as usize)
            .collect();
        let groups = self.create_topic(
            &request.stream,
            &request.topic,
            request.partition_count,
            &replicas,
        );
        if let Some(info) = self.topics.last_mut() {
            info.retention_bytes = request.retention_bytes;
            info.retention_ms = request.retention_ms;
            info.segment_bytes = request.segment_bytes.unwrap_or(0);
        }
        Ok(Bytes::from(TopicCreated { groups }.to_vec()))
    }

    /// A plausible catalog: staying nodes keep their slots, newcomers take
    /// the lowest free ones; one reassignment at a time (a second one is
    /// committed as `Unavailable` until `Cluster::start_epoch`).
    pub(super) fn apply_reassign(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = ReassignPartition::from_bytes(body).map_err(invalid)?;
        let partition = self.partitions.get_mut(&request.group).ok_or_else(|| {
            ErrorBody::message(ResultCode::UnknownGroup, "no partition has this group")
        })?;
        if partition.pending {
            return Err(ErrorBody::message(
                ResultCode::Unavailable,
                "a reassignment of this partition is still in progress: retry later",
            ));
        }
        if let Some(node) = request
            .nodes
            .iter()
            .find(|node| partition.retired.contains(node))
        {
            let message = format!("node {node} still holds a retired copy: drop it first");
            return Err(ErrorBody::message(ResultCode::InvalidRequest, message));
        }
        let previous_members = members(&partition.slots);
        let previous_confirm = partition.confirm;
        let leaving: Vec<u32> = partition
            .replicas
            .iter()
            .copied()
            .filter(|node| !request.nodes.contains(node))
            .collect();
        let mut joining: Vec<u32> = request
            .nodes
            .iter()
            .copied()
            .filter(|node| !partition.replicas.contains(node))
            .collect();
        joining.sort_unstable();
        let mut slots: Vec<Option<u32>> = partition
            .slots
            .iter()
            .map(|held| held.filter(|node| request.nodes.contains(node)))
            .collect();
        let mut free = (0..).filter(|slot| partition.slots.get(*slot).copied().flatten().is_none());
        for node in &joining {
            let slot = free.next().expect("unbounded");
            slots.resize(slots.len().max(slot + 1), None);
            slots[slot] = Some(*node);
        }
        partition.confirm = request.confirm.unwrap_or(partition.confirm);
        let reply = Reassigned {
            group: request.group,
            epoch: partition.epoch + 1,
            in_place: leaving.is_empty(),
            members: members(&slots),
            confirm: partition.confirm,
            write_quorum: quorums(partition.confirm, members(&slots).len()).0,
            view_change_quorum: quorums(partition.confirm, members(&slots).len()).1,
            previous_epoch: partition.epoch,
            previous_write_quorum: quorums(previous_confirm, previous_members.len()).0,
            previous_view_change_quorum: quorums(previous_confirm, previous_members.len()).1,
            previous_members,
            previous_confirm,
            joining,
            leaving: leaving.clone(),
        };
        partition.epoch += 1;
        partition.replicas = slots.iter().flatten().copied().collect();
        partition.slots = slots;
        partition.leaving = leaving;
        partition.pending = true;
        let (epoch, replicas) = (partition.epoch, partition.replicas.clone());
        let infos = self.topics.iter_mut().flat_map(|info| &mut info.partitions);
        for info in infos.filter(|info| info.group == request.group) {
            info.epoch = epoch;
            info.replicas = replicas.clone();
        }
        Ok(Bytes::from(reply.to_vec()))
    }

    pub(super) fn apply_drop_replica(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = DropReplica::from_bytes(body).map_err(invalid)?;
        let partition = self.partitions.get_mut(&request.group).ok_or_else(|| {
            ErrorBody::message(ResultCode::UnknownGroup, "no partition has this group")
        })?;
        let Some(index) = partition
            .retired
            .iter()
            .position(|node| *node == request.node)
        else {
            let message = format!("node {} holds no retired copy", request.node);
            return Err(ErrorBody::message(ResultCode::InvalidRequest, message));
        };
        partition.retired.remove(index);
        Ok(Bytes::from(Empty.to_vec()))
    }

    pub(super) fn apply_delete_topic(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = DeleteTopic::from_bytes(body).map_err(invalid)?;
        self.known_topic(&request.stream, &request.topic)?;
        let groups =
            self.remove_topics(|info| info.stream == request.stream && info.topic == request.topic);
        Ok(Bytes::from(TopicsDeleted { groups }.to_vec()))
    }

    pub(super) fn apply_delete_stream(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = DeleteStream::from_bytes(body).map_err(invalid)?;
        let Some(index) = self.streams.iter().position(|name| *name == request.name) else {
            return Err(ErrorBody::message(
                ResultCode::UnknownStream,
                "no such stream",
            ));
        };
        self.streams.remove(index);
        let groups = self.remove_topics(|info| info.stream == request.name);
        Ok(Bytes::from(TopicsDeleted { groups }.to_vec()))
    }

    /// Removes the topics `doomed` picks; returns their groups, ascending.
    fn remove_topics(&mut self, doomed: impl Fn(&TopicInfo) -> bool) -> Vec<u64> {
        let mut groups: Vec<u64> = Vec::new();
        self.topics.retain(|info| {
            if doomed(info) {
                groups.extend(info.partitions.iter().map(|partition| partition.group));
            }
            !doomed(info)
        });
        groups.sort_unstable();
        for group in &groups {
            self.partitions.remove(group);
            self.deleted.insert(*group);
        }
        groups
    }

    pub(super) fn apply_alter_topic(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = AlterTopic::from_bytes(body).map_err(invalid)?;
        let index = self.known_topic(&request.stream, &request.topic)?;
        let info = &mut self.topics[index];
        if let Some(bytes) = request.retention_bytes {
            info.retention_bytes = bytes;
        }
        if let Some(ms) = request.retention_ms {
            info.retention_ms = ms;
        }
        Ok(Bytes::new())
    }

    pub(super) fn apply_add_partitions(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = AddPartitions::from_bytes(body).map_err(invalid)?;
        let index = self.known_topic(&request.stream, &request.topic)?;
        let count = self.topics[index].partitions.len() as u32;
        if request.partition_count <= count {
            let message = format!("the topic has {count} partitions; partitions are only added");
            return Err(ErrorBody::message(ResultCode::InvalidRequest, message));
        }
        let replicas = self.topics[index].partitions[0].replicas.clone();
        let (groups, infos) = self.new_partitions(count..request.partition_count, &replicas);
        self.topics[index].partitions.extend(infos);
        Ok(Bytes::from(TopicCreated { groups }.to_vec()))
    }

    /// The index of `stream/topic` in `topics`, or the refusal a node sends.
    fn known_topic(&self, stream: &str, topic: &str) -> Result<usize, ErrorBody> {
        if !self.streams.iter().any(|name| name == stream) {
            return Err(ErrorBody::message(
                ResultCode::UnknownStream,
                "no such stream",
            ));
        }
        self.topics
            .iter()
            .position(|info| info.stream == stream && info.topic == topic)
            .ok_or_else(|| ErrorBody::message(ResultCode::UnknownTopic, "no such topic"))
    }

    pub(super) fn metadata(&self, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = MetadataRequest::from_bytes(body).map_err(invalid)?;
        let topics = self
            .topics
            .iter()
            .filter(|info| {
                request
                    .stream
                    .as_ref()
                    .is_none_or(|stream| *stream == info.stream)
            })
            .filter(|info| {
                request
                    .topic
                    .as_ref()
                    .is_none_or(|topic| *topic == info.topic)
            })
            .cloned()
            .collect();
        let metadata = MetadataReply {
            nodes: self.nodes.clone(),
            streams: self.streams.clone(),
            topics,
            failover_ms: 0, // unknown: attempts wait the client's ceiling
        };
        Ok(Bytes::from(metadata.to_vec()))
    }

    pub(super) fn accept_loss(&self, node: u32, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = AcceptLoss::from_bytes(body).map_err(invalid)?;
        let hosted = self
            .partitions
            .get(&request.group)
            .is_some_and(|partition| partition.replicas.contains(&node));
        if !hosted {
            return Err(ErrorBody::message(
                ResultCode::UnknownGroup,
                "not hosted on this node",
            ));
        }
        Ok(Bytes::from(AcceptLossReply { view: 9, op: 3 }.to_vec()))
    }
}

/// `(slot, node)` of every occupied slot, ascending.
fn members(slots: &[Option<u32>]) -> Vec<(u8, u32)> {
    slots
        .iter()
        .enumerate()
        .filter_map(|(slot, node)| node.map(|node| (slot as u8, node)))
        .collect()
}

/// `W` and `R` of `confirm` over `count` members.
fn quorums(confirm: ConfirmPolicy, count: usize) -> (u8, u8) {
    let count = count as u8;
    let write = match confirm {
        ConfirmPolicy::MajorityDurable => count / 2 + 1,
        ConfirmPolicy::LocalDurable => count,
        ConfirmPolicy::Count(copies) => copies.min(count),
    };
    (write, count - write + 1)
}
