//! The metadata plane's state machine: streams, topics, and each partition's
//! group and replica slots. Applied, in op order, on every node; every node
//! hosts the partitions it is a member of, was a member of while a
//! reassignment is in progress, or still keeps a retired copy of.
//!
//! A reassignment moves a partition one epoch at a time: `ReassignPartition`
//! plans the next epoch ([`crate::reassign::plan`]) and keeps the current one
//! as `previous`; the partition's `EpochStarted` drops `previous` and retires
//! the nodes that left; `DropReplica` forgets a retired copy. A second
//! reassignment waits until the first has started.
//!
//! Deleting a topic or stream removes its partitions from the catalog; group
//! ids are never reused, so a group below the next id that the catalog no
//! longer holds is known deleted ([`Catalog::is_deleted`]) on every node, at
//! any catalog op after the delete.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use strand_consensus::StateMachine;
use strand_consensus::epoch::{Membership, Transition};
use strand_wire::ops::{
    AddPartitions, AlterTopic, CreateStream, CreateTopic, DeleteStream, DeleteTopic, DropReplica,
    EpochStarted, ErrorBody, PartitionInfo, ReassignPartition, Reassigned, TopicCreated, TopicInfo,
    TopicsDeleted,
};
use strand_wire::{Body, ConfirmPolicy, Durability, Operation, PrepareHeader, ResultCode};

use crate::consumer_groups::ConsumerGroup;
use crate::reassign::{self, ReassignPlan, ReassignWish, SlotAssignment};

/// What a node is to a partition it hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A member of the current epoch, or of the previous one while the
    /// current has not started: it serves the partition.
    Member,
    /// Removed by a started reassignment; its copy stays on disk until
    /// `DropReplica`.
    Retired,
}

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
    /// The node in each slot (a replica index a node keeps while it is a
    /// member); `None` for a free slot.
    pub slots: Vec<Option<u32>>,
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
    /// Bytes per record-log segment (0: the node's default).
    pub segment_bytes: u64,
    /// The epoch before, kept until the current epoch has started in the
    /// partition (its members still serve until then).
    pub previous: Option<SlotAssignment>,
    /// Whether the current epoch has started in the partition (true at
    /// creation; false from a reassignment until the partition reports it).
    pub active: bool,
    /// Nodes removed by a started reassignment whose copy still sits on
    /// disk until dropped, ascending.
    pub retired: Vec<u32>,
}

impl Assignment {
    /// The member nodes in ascending slot order (the order the primary of
    /// a view is counted in).
    pub fn nodes(&self) -> Vec<u32> {
        self.slots.iter().flatten().copied().collect()
    }

    /// The slot `node` holds in the current epoch, if it is a member.
    pub fn slot_of(&self, node: u32) -> Option<u8> {
        self.slots
            .iter()
            .position(|held| *held == Some(node))
            .map(|slot| slot as u8)
    }

    /// The current epoch's slots and policy, as the planner takes them.
    pub fn slot_assignment(&self) -> SlotAssignment {
        SlotAssignment {
            epoch: self.epoch,
            slots: self.slots.clone(),
            confirm: self.confirm,
        }
    }

    /// The consensus view of the current epoch.
    pub fn membership(&self) -> Membership {
        self.slot_assignment().membership()
    }

    /// What `node` is to this partition; `None` when it holds nothing of it.
    pub fn role_of(&self, node: u32) -> Option<Role> {
        let leaving = self
            .previous
            .as_ref()
            .is_some_and(|previous| previous.slot_of(node).is_some());
        if self.slot_of(node).is_some() || leaving {
            Some(Role::Member)
        } else if self.retired.binary_search(&node).is_ok() {
            Some(Role::Retired)
        } else {
            None
        }
    }

    /// Moves to the planned next epoch; the current one becomes `previous`
    /// until the partition reports that the next has started.
    fn begin(&mut self, next: SlotAssignment) {
        assert!(self.active, "one reassignment at a time");
        assert_eq!(next.epoch, self.epoch + 1, "epochs move one at a time");
        self.previous = Some(self.slot_assignment());
        self.slots = next.slots;
        self.epoch = next.epoch;
        self.confirm = next.confirm;
        self.active = false;
        self.check();
    }

    /// The partition started `epoch`: when it is the pending one, the
    /// nodes that left are retired. Anything else (an old or a repeated
    /// report) changes nothing.
    fn start_epoch(&mut self, epoch: u32) {
        if epoch != self.epoch || self.active {
            return;
        }
        let previous = self
            .previous
            .take()
            .expect("an epoch not started has a previous one");
        let left: Vec<u32> = previous
            .members()
            .map(|(_, node)| node)
            .filter(|node| self.slot_of(*node).is_none())
            .collect();
        self.retired.extend(left);
        self.retired.sort_unstable();
        self.retired.dedup();
        self.active = true;
        self.check();
    }

    /// Refuses a reassignment while the last one has not started, or one
    /// that names a node still holding a retired copy.
    fn check_reassignable(&self, wish: &ReassignWish) -> Result<(), ErrorBody> {
        if !self.active {
            return Err(ErrorBody::message(
                ResultCode::Unavailable,
                format!(
                    "a reassignment of this partition is still in progress (epoch {} has not \
                     started): retry later",
                    self.epoch
                ),
            ));
        }
        match wish.nodes.iter().find(|node| self.retired.contains(node)) {
            Some(node) => Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!(
                    "node {node} still holds a retired copy of this partition: drop it first \
                     (strand partition drop-replica)"
                ),
            )),
            None => Ok(()),
        }
    }

    /// The invariants of an assignment.
    fn check(&self) {
        if let Some(fault) = self.fault() {
            panic!("{fault}: {self:?}");
        }
    }

    /// The first invariant of an assignment this one breaks, if any: the
    /// rules `check` asserts, kept in one place so that a decoded catalog
    /// image ([`crate::catalog_image`]) is held to the same ones.
    pub(crate) fn fault(&self) -> Option<&'static str> {
        if !self.slots.iter().any(Option::is_some) {
            return Some("an assignment has at least one member");
        }
        if self.previous.is_none() != self.active {
            return Some("a previous epoch is kept exactly while the current one has not started");
        }
        let next_of_previous = self
            .previous
            .as_ref()
            .map(|previous| previous.epoch.checked_add(1));
        if next_of_previous.is_some_and(|next| next != Some(self.epoch)) {
            return Some("the previous epoch is the one before the current");
        }
        if !self.retired.windows(2).all(|pair| pair[0] < pair[1]) {
            return Some("retired nodes are strictly ascending");
        }
        if self
            .retired
            .iter()
            .any(|node| self.slot_of(*node).is_some())
        {
            return Some("a retired node is not a member");
        }
        None
    }
}

/// A topic: its policies live on its partitions' assignments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicEntry {
    /// Group ids of its partitions, in partition order.
    pub groups: Vec<u64>,
}

/// A topic's policies, which every partition of it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TopicPolicies {
    confirm: ConfirmPolicy,
    durability: Durability,
    consumer_offset_durability: Durability,
    retention_bytes: u64,
    retention_ms: u64,
    segment_bytes: u64,
}

impl TopicPolicies {
    /// The policies a partition carries now.
    fn of(assignment: &Assignment) -> TopicPolicies {
        TopicPolicies {
            confirm: assignment.confirm,
            durability: assignment.durability,
            consumer_offset_durability: assignment.consumer_offset_durability,
            retention_bytes: assignment.retention_bytes,
            retention_ms: assignment.retention_ms,
            segment_bytes: assignment.segment_bytes,
        }
    }
}

/// The catalog: everything the metadata plane decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// Streams, each with its topics.
    pub streams: BTreeMap<String, BTreeMap<String, TopicEntry>>,
    /// Every partition's assignment by group id.
    pub groups: BTreeMap<u64, Assignment>,
    pub(crate) next_group: u64,
    /// The last metadata op applied: answers from this catalog reflect every
    /// op up to it (a client that saw a later op asks again).
    pub applied_op: u64,
    /// The cluster's node ids, sorted (placement cycles through them).
    pub(crate) nodes: Vec<u32>,
    /// Consumer groups by name (see [`crate::consumer_groups`]).
    pub(crate) consumer_groups: BTreeMap<String, ConsumerGroup>,
    /// Users by name (see [`crate::users`]).
    pub(crate) users: crate::users::Users,
    /// Access tokens by id (see [`crate::users`]).
    pub(crate) tokens: crate::users::Tokens,
    /// Quotas by user name (see [`crate::quotas`]).
    pub(crate) quotas: BTreeMap<String, strand_wire::ops::Quota>,
    /// Revoked user certificates by fingerprint (see [`crate::users`]).
    pub(crate) revoked_certificates: BTreeSet<String>,
}

impl Catalog {
    /// An empty catalog for a cluster of `nodes`.
    pub fn new(nodes: Vec<u32>) -> Catalog {
        assert!(!nodes.is_empty());
        assert!(
            nodes.windows(2).all(|pair| pair[0] < pair[1]),
            "cluster nodes not sorted and distinct: {nodes:?}"
        );
        Catalog {
            streams: BTreeMap::new(),
            groups: BTreeMap::new(),
            next_group: 1,
            applied_op: 0,
            nodes,
            consumer_groups: BTreeMap::new(),
            users: BTreeMap::new(),
            tokens: BTreeMap::new(),
            quotas: BTreeMap::new(),
            revoked_certificates: BTreeSet::new(),
        }
    }

    /// The cluster's node ids, sorted: what an empty catalog of this
    /// cluster starts from.
    pub fn node_ids(&self) -> &[u32] {
        &self.nodes
    }

    /// Groups hosted on `node`: those it is a member of (now, or in the
    /// previous epoch while the current has not started) or keeps a retired
    /// copy of.
    pub fn hosted_on(&self, node: u32) -> impl Iterator<Item = &Assignment> {
        self.groups
            .values()
            .filter(move |assignment| assignment.role_of(node).is_some())
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
            segment_bytes: first.segment_bytes,
            partitions: entry
                .groups
                .iter()
                .filter_map(|group| self.groups.get(group))
                .map(|assignment| PartitionInfo {
                    partition: assignment.partition,
                    group: assignment.group,
                    epoch: assignment.epoch,
                    replicas: assignment.nodes(),
                    view: views(assignment.group),
                })
                .collect(),
        })
    }

    pub(crate) fn create_stream(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = CreateStream::from_bytes(body).map_err(invalid)?;
        if self.streams.contains_key(&request.name) {
            return Err(ErrorBody::message(
                ResultCode::AlreadyExists,
                format!("stream {} exists", request.name),
            ));
        }
        self.room_for_stream()?;
        self.streams.insert(request.name, BTreeMap::new());
        Ok(Bytes::new())
    }

    pub(crate) fn create_topic(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
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
        self.room_for_topic(request.partition_count)?;
        // The receiving node fills in the cluster's defaults before it
        // proposes; a request that still lacks a policy gets the safe one.
        let durability = request.durability.unwrap_or(Durability::Persisted);
        let policies = TopicPolicies {
            confirm: request.confirm.unwrap_or(ConfirmPolicy::MajorityDurable),
            durability,
            consumer_offset_durability: request.consumer_offset_durability.unwrap_or(durability),
            retention_bytes: request.retention_bytes,
            retention_ms: request.retention_ms,
            segment_bytes: request.segment_bytes.unwrap_or(0),
        };
        let replicas = usize::from(request.replica_count);
        let groups = self.add_partitions_numbered(
            &request.stream,
            &request.topic,
            0..request.partition_count,
            replicas,
            &policies,
        );
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

    /// Places partitions `numbers` of a topic, each under the next group
    /// id; returns their groups in order.
    fn add_partitions_numbered(
        &mut self,
        stream: &str,
        topic: &str,
        numbers: std::ops::Range<u32>,
        replicas: usize,
        policies: &TopicPolicies,
    ) -> Vec<u64> {
        numbers
            .map(|partition| self.add_partition(stream, topic, partition, replicas, policies))
            .collect()
    }

    /// Places a new partition of a topic under the next group id.
    fn add_partition(
        &mut self,
        stream: &str,
        topic: &str,
        partition: u32,
        replicas: usize,
        policies: &TopicPolicies,
    ) -> u64 {
        let group = self.next_group;
        self.next_group += 1;
        let slots = placement(&self.nodes, group, replicas)
            .into_iter()
            .map(Some)
            .collect();
        let assignment = Assignment {
            group,
            stream: stream.to_owned(),
            topic: topic.to_owned(),
            partition,
            slots,
            epoch: 0,
            confirm: policies.confirm,
            durability: policies.durability,
            consumer_offset_durability: policies.consumer_offset_durability,
            retention_bytes: policies.retention_bytes,
            retention_ms: policies.retention_ms,
            segment_bytes: policies.segment_bytes,
            previous: None,
            active: true,
            retired: Vec::new(),
        };
        assignment.check();
        let reused = self.groups.insert(group, assignment);
        assert!(reused.is_none(), "group id {group} given twice");
        group
    }

    /// Whether `group` was a partition that a deleted topic or stream took
    /// with it. Group ids are never reused, so this never changes back: a
    /// node may remove such a group's data whenever it finds it, even with a
    /// catalog behind the metadata plane's.
    /// Which groups the catalog counts deleted, in a form that changes
    /// whenever that set grows: (groups ever created, groups that remain).
    pub fn deletion_mark(&self) -> (u64, usize) {
        (self.next_group, self.groups.len())
    }

    /// Whether `group` existed and its topic was deleted since.
    pub fn is_deleted(&self, group: u64) -> bool {
        group != 0 && group < self.next_group && !self.groups.contains_key(&group)
    }

    pub(crate) fn topic_entry(&self, stream: &str, topic: &str) -> Result<&TopicEntry, ErrorBody> {
        let topics = self.streams.get(stream).ok_or_else(|| {
            ErrorBody::message(ResultCode::UnknownStream, format!("no stream {stream}"))
        })?;
        topics.get(topic).ok_or_else(|| {
            ErrorBody::message(
                ResultCode::UnknownTopic,
                format!("no topic {topic} in stream {stream}"),
            )
        })
    }

    /// Removes a topic's partitions from the catalog; returns their groups.
    fn remove_topic(&mut self, stream: &str, topic: &str) -> Vec<u64> {
        let entry = self
            .streams
            .get_mut(stream)
            .and_then(|topics| topics.remove(topic))
            .unwrap_or_default();
        for group in &entry.groups {
            let removed = self.groups.remove(group);
            assert!(
                removed.is_some(),
                "topic {stream}/{topic} names group {group}, which the catalog lacks"
            );
        }
        self.forget_consumer_groups(stream, topic);
        entry.groups
    }

    fn delete_topic(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = DeleteTopic::from_bytes(body).map_err(invalid)?;
        self.topic_entry(&request.stream, &request.topic)?;
        let mut groups = self.remove_topic(&request.stream, &request.topic);
        groups.sort_unstable();
        Ok(Bytes::from(TopicsDeleted { groups }.to_vec()))
    }

    fn delete_stream(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = DeleteStream::from_bytes(body).map_err(invalid)?;
        let Some(topics) = self.streams.get(&request.name) else {
            return Err(ErrorBody::message(
                ResultCode::UnknownStream,
                format!("no stream {}", request.name),
            ));
        };
        let names: Vec<String> = topics.keys().cloned().collect();
        let mut groups: Vec<u64> = names
            .iter()
            .flat_map(|topic| self.remove_topic(&request.name, topic))
            .collect();
        self.streams.remove(&request.name);
        groups.sort_unstable();
        Ok(Bytes::from(TopicsDeleted { groups }.to_vec()))
    }

    fn alter_topic(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = AlterTopic::from_bytes(body).map_err(invalid)?;
        let groups = self
            .topic_entry(&request.stream, &request.topic)?
            .groups
            .clone();
        for group in groups {
            let assignment = self.groups.get_mut(&group).expect("a topic's groups exist");
            if let Some(bytes) = request.retention_bytes {
                assignment.retention_bytes = bytes;
            }
            if let Some(ms) = request.retention_ms {
                assignment.retention_ms = ms;
            }
        }
        Ok(Bytes::new())
    }

    pub(crate) fn add_partitions(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = AddPartitions::from_bytes(body).map_err(invalid)?;
        let existing = self
            .topic_entry(&request.stream, &request.topic)?
            .groups
            .clone();
        let count = existing.len() as u32;
        if request.partition_count <= count {
            return Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!(
                    "topic {} has {count} partitions; asked for {} (partitions are only added)",
                    request.topic, request.partition_count
                ),
            ));
        }
        self.room_for_partitions(request.partition_count - count)?;
        let first = self
            .groups
            .get(&existing[0])
            .expect("a topic's groups exist");
        let policies = TopicPolicies::of(first);
        let replicas = first.nodes().len();
        let added = self.add_partitions_numbered(
            &request.stream,
            &request.topic,
            count..request.partition_count,
            replicas,
            &policies,
        );
        self.streams
            .get_mut(&request.stream)
            .and_then(|topics| topics.get_mut(&request.topic))
            .expect("checked above")
            .groups
            .extend_from_slice(&added);
        self.consumer_groups_grew(
            &request.stream,
            &request.topic,
            request.partition_count as usize,
        );
        Ok(Bytes::from(TopicCreated { groups: added }.to_vec()))
    }

    fn reassign_partition(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = ReassignPartition::from_bytes(body).map_err(invalid)?;
        refuse_dry_run(request.dry_run)?;
        let (reply, next) = self.plan_reassignment(&request)?;
        let assignment = self.groups.get_mut(&request.group).expect("planned");
        assignment.begin(next);
        Ok(Bytes::from(reply.to_vec()))
    }

    /// What `request` would do to the catalog as it is: the reply the
    /// metadata plane would give, or its refusal. A node answers a dry run
    /// with it, and the plane plans the real one with it, so both say the
    /// same.
    pub fn preview_reassignment(
        &self,
        request: &ReassignPartition,
    ) -> Result<Reassigned, ErrorBody> {
        self.plan_reassignment(request).map(|(reply, _)| reply)
    }

    fn plan_reassignment(
        &self,
        request: &ReassignPartition,
    ) -> Result<(Reassigned, SlotAssignment), ErrorBody> {
        let assignment = self
            .groups
            .get(&request.group)
            .ok_or_else(|| unknown_group(request.group))?;
        let wish = ReassignWish {
            nodes: request.nodes.clone(),
            confirm: request.confirm,
        };
        assignment.check_reassignable(&wish)?;
        let current = assignment.slot_assignment();
        let plan = reassign::plan(&current, &wish, &self.nodes)
            .map_err(|error| ErrorBody::message(ResultCode::InvalidRequest, error.to_string()))?;
        Ok((reassigned(request.group, &current, &plan), plan.next))
    }

    fn epoch_started(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = EpochStarted::from_bytes(body).map_err(invalid)?;
        // Nodes retry until answered: an unknown group, an old epoch or a
        // repeated report is answered Ok and changes nothing.
        if let Some(assignment) = self.groups.get_mut(&request.group) {
            assignment.start_epoch(request.epoch);
        }
        Ok(Bytes::new())
    }

    fn drop_replica(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = DropReplica::from_bytes(body).map_err(invalid)?;
        refuse_dry_run(request.dry_run)?;
        let index = self.retired_index(&request)?;
        let assignment = self.groups.get_mut(&request.group).expect("checked");
        assignment.retired.remove(index);
        Ok(Bytes::new())
    }

    /// Whether `request` would drop a retired copy, or why not: what a node
    /// answers a dry run with.
    pub fn preview_drop(&self, request: &DropReplica) -> Result<(), ErrorBody> {
        self.retired_index(request).map(|_| ())
    }

    fn retired_index(&self, request: &DropReplica) -> Result<usize, ErrorBody> {
        let assignment = self
            .groups
            .get(&request.group)
            .ok_or_else(|| unknown_group(request.group))?;
        assignment
            .retired
            .binary_search(&request.node)
            .map_err(|_| {
                ErrorBody::message(
                    ResultCode::InvalidRequest,
                    format!(
                        "node {} holds no retired copy of group {}",
                        request.node, request.group
                    ),
                )
            })
    }
}

/// A dry run is answered by the node that receives it and never proposed:
/// one in a prepare is refused, the same on every replica.
fn refuse_dry_run(dry_run: bool) -> Result<(), ErrorBody> {
    match dry_run {
        true => Err(ErrorBody::message(
            ResultCode::InvalidRequest,
            "a dry run is answered by the node that receives it, never proposed",
        )),
        false => Ok(()),
    }
}

/// The reply to an accepted reassignment: both epochs and their quorums.
fn reassigned(group: u64, current: &SlotAssignment, plan: &ReassignPlan) -> Reassigned {
    let rule = plan.next.membership().rule();
    let previous_rule = current.membership().rule();
    Reassigned {
        group,
        epoch: plan.next.epoch,
        in_place: plan.transition == Transition::InPlace,
        members: plan.next.members().collect(),
        confirm: plan.next.confirm,
        write_quorum: rule.write,
        view_change_quorum: rule.view_change,
        previous_epoch: current.epoch,
        previous_members: current.members().collect(),
        previous_confirm: current.confirm,
        previous_write_quorum: previous_rule.write,
        previous_view_change_quorum: previous_rule.view_change,
        joining: plan.joining.clone(),
        leaving: plan.leaving.clone(),
    }
}

fn unknown_group(group: u64) -> ErrorBody {
    ErrorBody::message(
        ResultCode::UnknownGroup,
        format!("no partition has group {group}"),
    )
}

pub(crate) fn invalid(error: strand_wire::BodyError) -> ErrorBody {
    ErrorBody::message(ResultCode::InvalidRequest, error.to_string())
}

impl StateMachine for Catalog {
    fn commit(&mut self, header: &PrepareHeader, body: Option<&Bytes>) -> (ResultCode, Bytes) {
        let Some(body) = body else {
            // Bodies are kept until commit on every replica of the metadata
            // plane (`needs_bodies`); a missing one is a bug.
            panic!("metadata op {} committed without its body", header.op.get());
        };
        assert!(
            header.op.get() > self.applied_op,
            "metadata op {} applied after op {}",
            header.op.get(),
            self.applied_op
        );
        self.applied_op = header.op.get();
        let result = match header.operation() {
            Operation::CreateStream => self.create_stream(body),
            Operation::CreateTopic => self.create_topic(body),
            Operation::ReassignPartition => self.reassign_partition(body),
            Operation::EpochStarted => self.epoch_started(body),
            Operation::DropReplica => self.drop_replica(body),
            Operation::DeleteTopic => self.delete_topic(body),
            Operation::DeleteStream => self.delete_stream(body),
            Operation::AlterTopic => self.alter_topic(body),
            Operation::AddPartitions => self.add_partitions(body),
            Operation::JoinConsumerGroup => self.join_group(body),
            Operation::LeaveConsumerGroup => self.leave_group(body),
            Operation::CreateUser => self.create_user(body),
            Operation::DeleteUser => self.delete_user(body),
            Operation::GrantPermission => self.grant_permission(body),
            Operation::RevokePermission => self.revoke_permission(body),
            Operation::CreateToken => self.create_token(body),
            Operation::RevokeToken => self.revoke_token(body),
            Operation::SetQuota => self.set_quota(body),
            Operation::RevokeCertificate => self.revoke_certificate(body),
            other => Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!("{other:?} is not a metadata operation"),
            )),
        };
        self.assert_invariants();
        match result {
            Ok(reply) => (ResultCode::Ok, reply),
            Err(error) => (error.code(), Bytes::from(error.to_vec())),
        }
    }

    fn needs_bodies(&self) -> bool {
        true
    }
}

/// The nodes of a new group's slots, in slot order. The first (the group's
/// preferred primary, which leads its view 0) rotates with the group id, so
/// preferred primaries spread evenly. The step from one slot's node to the
/// next rotates too, through the steps coprime with the node count (every
/// slot gets a different node). Slot 1 leads view 1, so when a node dies,
/// the groups it preferred fail over to different survivors rather than all
/// to one.
pub fn placement(nodes: &[u32], group: u64, replicas: usize) -> Vec<u32> {
    let count = nodes.len();
    assert!(
        group >= 1 && (1..=count).contains(&replicas),
        "group {group}, {replicas} of {count} nodes"
    );
    let index = (group - 1) as usize;
    let start = index % count;
    let steps: Vec<usize> = (1..count).filter(|step| gcd(*step, count) == 1).collect();
    let step = steps
        .get((index / count) % steps.len().max(1))
        .copied()
        .unwrap_or(1);
    let placed: Vec<u32> = (0..replicas)
        .map(|slot| nodes[(start + slot * step) % count])
        .collect();
    debug_assert!(
        placed
            .iter()
            .enumerate()
            .all(|(slot, node)| !placed[..slot].contains(node)),
        "group {group} placed twice on one node: {placed:?}"
    );
    placed
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
pub(crate) mod tests;
