//! A scripted Strand cluster on loopback: real TCP, real frames, a client
//! table per group with the server's rules, and faults injected by script.
//!
//! It is not the server: every node shares one in-memory state, a group's
//! "primary" is whichever node the state says, and replication is instant.
//! What it keeps faithful is what the SDK depends on: redirects, Busy,
//! OutOfOrder and SessionEvicted from the client table, stored replies for
//! retries, `op = 0` on refusals, and connections that drop or go silent.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use strand_wire::ops::{
    AcceptLoss, AcceptLossReply, AddPartitions, AlterTopic, AttentionReply, ClusterStatusReply,
    CreateStream, CreateTopic, DeleteCursor, DeleteStream, DeleteTopic, DropReplica, Empty,
    ErrorBody, FetchReply, FetchRequest, GetCursor, GetCursorReply, MetadataReply, MetadataRequest,
    NodeInfo, PartitionInfo, ProduceReply, ReassignPartition, Reassigned, StoreCursor,
    TopicCreated, TopicInfo, TopicsDeleted,
};
use strand_wire::{
    Body, CommandHeader, ConfirmPolicy, FrameDecoder, Message, Msg, Operation, RecordBatch,
    ReplyHeader, RequestHeader, ResultCode,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The cluster id the scripted cluster answers with.
pub const CLUSTER: u64 = 7;

/// What a fault does to the request it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer with this error (`op = 0`), without applying.
    Reply(ErrorBody),
    /// Close the connection without answering or applying.
    DropConnection,
    /// Apply the request, then close the connection before answering.
    ApplyThenDrop,
    /// Neither answer nor apply (the client must time out).
    Ignore,
    /// Forget every client of the request's group (as if evicted), then
    /// handle the request normally.
    EvictClients,
}

/// A fault for the `nth` (from 1) request of `operation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub operation: Operation,
    pub nth: usize,
    pub action: FaultAction,
}

/// One request as a node saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub node: u32,
    pub connection: u64,
    pub group: u64,
    pub client: u128,
    pub request: u64,
    pub operation: Operation,
}

#[derive(Debug, Default)]
struct Partition {
    group: u64,
    replicas: Vec<u32>,
    /// The node in each slot (replica index); `None` for a free slot.
    slots: Vec<Option<u32>>,
    epoch: u32,
    confirm: ConfirmPolicy,
    /// Nodes that leave once the pending epoch starts.
    leaving: Vec<u32>,
    /// Whether a reassignment waits for its epoch to start.
    pending: bool,
    /// Nodes keeping a retired copy.
    retired: Vec<u32>,
    primary: u32,
    view: u32,
    batches: Vec<(u64, RecordBatch)>,
    high_watermark: u64,
    cursors: HashMap<String, u64>,
}

#[derive(Debug, Clone)]
struct StoredReply {
    op: u64,
    result: Result<Bytes, ErrorBody>,
}

#[derive(Debug, Default)]
pub struct State {
    nodes: Vec<NodeInfo>,
    metadata_primary: u32,
    streams: Vec<String>,
    topics: Vec<TopicInfo>,
    partitions: BTreeMap<u64, Partition>,
    /// Groups of deleted topics: requests to them are answered `Deleted`.
    deleted: BTreeSet<u64>,
    next_group: u64,
    /// (group, client) -> request -> stored reply.
    tables: HashMap<(u64, u128), BTreeMap<u64, StoredReply>>,
    ops: HashMap<u64, u64>,
    faults: Vec<Fault>,
    counts: HashMap<Operation, usize>,
    pub seen: Vec<Seen>,
    /// Requests applied, in order: (group, client, request).
    pub applied: Vec<(u64, u128, u64)>,
}

/// The scripted cluster; dropping it stops the listeners.
pub struct Cluster {
    state: Arc<Mutex<State>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Cluster {
    /// `live` nodes listening on loopback, plus `dead` nodes whose address
    /// refuses connections. Node ids count from 1; node 1 is the metadata
    /// primary.
    pub async fn start(live: u32, dead: u32) -> Cluster {
        let state = Arc::new(Mutex::new(State {
            metadata_primary: 1,
            next_group: 100,
            ..State::default()
        }));
        let mut tasks = Vec::new();
        for id in 1..=live {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let address = listener.local_addr().expect("address").to_string();
            lock(&state).nodes.push(node(id, address));
            tasks.push(tokio::spawn(serve(id, listener, Arc::clone(&state))));
        }
        for id in live + 1..=live + dead {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let address = listener.local_addr().expect("address").to_string();
            drop(listener);
            lock(&state).nodes.push(node(id, address));
        }
        Cluster { state, tasks }
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub fn address(&self, node: u32) -> String {
        self.state()
            .nodes
            .iter()
            .find(|info| info.id == node)
            .map(|info| info.client_address.clone())
            .expect("known node")
    }

    pub fn set_metadata_primary(&self, node: u32) {
        self.state().metadata_primary = node;
    }

    pub fn add_fault(&self, operation: Operation, nth: usize, action: FaultAction) {
        self.state().faults.push(Fault {
            operation,
            nth,
            action,
        });
    }

    /// A topic with `partitions` partitions on `replicas`; the metadata view
    /// is `view`, the actual primary `primary`.
    pub fn add_topic(
        &self,
        stream: &str,
        topic: &str,
        partitions: u32,
        replicas: &[u32],
        view: u32,
        primary: u32,
    ) -> Vec<u64> {
        let mut state = self.state();
        if !state.streams.iter().any(|known| known == stream) {
            state.streams.push(stream.to_owned());
        }
        let groups = state.create_topic(stream, topic, partitions, replicas);
        for group in &groups {
            let partition = state.partitions.get_mut(group).expect("created");
            partition.view = view;
            partition.primary = primary;
        }
        for info in &mut state.topics {
            for partition in &mut info.partitions {
                partition.view = view;
            }
        }
        groups
    }

    /// Requests of `operation` seen, in arrival order.
    pub fn seen(&self, operation: Operation) -> Vec<Seen> {
        self.state()
            .seen
            .iter()
            .filter(|seen| seen.operation == operation)
            .cloned()
            .collect()
    }

    /// The partition's pending epoch starts: the nodes that left retire.
    pub fn start_epoch(&self, group: u64) {
        let mut state = self.state();
        let partition = state.partitions.get_mut(&group).expect("known group");
        let leaving = std::mem::take(&mut partition.leaving);
        partition.retired.extend(leaving);
        partition.pending = false;
    }

    /// The confirm policy of a partition.
    pub fn confirm(&self, group: u64) -> ConfirmPolicy {
        self.state().partitions[&group].confirm
    }

    /// The topic's retention limits, `(bytes, ms)`, if it exists.
    pub fn retention(&self, stream: &str, topic: &str) -> Option<(u64, u64)> {
        self.state()
            .topics
            .iter()
            .find(|info| info.stream == stream && info.topic == topic)
            .map(|info| (info.retention_bytes, info.retention_ms))
    }

    pub fn high_watermark(&self, group: u64) -> u64 {
        self.state().partitions[&group].high_watermark
    }

    pub fn applied(&self) -> Vec<(u64, u128, u64)> {
        self.state().applied.clone()
    }
}

fn node(id: u32, address: String) -> NodeInfo {
    NodeInfo {
        id,
        replica_address: String::new(),
        client_address: address,
        reachable: true,
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

static NEXT_CONNECTION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

async fn serve(node: u32, listener: TcpListener, state: Arc<Mutex<State>>) {
    let mut connections = Vec::new();
    while let Ok((stream, _)) = listener.accept().await {
        let connection = NEXT_CONNECTION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        connections.push(tokio::spawn(connection_loop(
            node,
            connection,
            stream,
            Arc::clone(&state),
        )));
    }
}

enum Outcome {
    Reply(Msg<ReplyHeader>),
    /// Answer later (a long-polling fetch).
    Later(JoinHandle<Msg<ReplyHeader>>),
    Silent,
    Drop,
    AppliedThenDrop,
}

async fn connection_loop(node: u32, connection: u64, stream: TcpStream, state: Arc<Mutex<State>>) {
    let (mut reader, mut writer) = stream.into_split();
    let (replies, mut outgoing) = mpsc::unbounded_channel::<Msg<ReplyHeader>>();
    let writer_task = tokio::spawn(async move {
        while let Some(reply) = outgoing.recv().await {
            if writer.write_all(&reply.to_bytes()).await.is_err() {
                return;
            }
        }
    });
    let decoder = FrameDecoder::default();
    let mut buffer = BytesMut::new();
    'connection: loop {
        while let Ok(Some(message)) = decoder.decode(&mut buffer) {
            let Message::Request(request) = message else {
                break 'connection;
            };
            let outcome = lock(&state).handle(node, connection, &request);
            match outcome {
                Outcome::Reply(reply) => drop(replies.send(reply)),
                Outcome::Later(task) => {
                    let replies = replies.clone();
                    tokio::spawn(async move {
                        if let Ok(reply) = task.await {
                            let _ = replies.send(reply);
                        }
                    });
                }
                Outcome::Silent => {}
                Outcome::Drop | Outcome::AppliedThenDrop => break 'connection,
            }
        }
        match reader.read_buf(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    writer_task.abort();
}

impl State {
    fn create_topic(
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

    fn handle(&mut self, node: u32, connection: u64, request: &Msg<RequestHeader>) -> Outcome {
        let header = request.header();
        let operation = header.operation();
        let group = header.prefix.group.get();
        self.seen.push(Seen {
            node,
            connection,
            group,
            client: header.client.get(),
            request: header.request.get(),
            operation,
        });
        let count = self.counts.entry(operation).or_default();
        *count += 1;
        let nth = *count;
        let fault = self
            .faults
            .iter()
            .position(|fault| fault.operation == operation && fault.nth == nth)
            .map(|index| self.faults.remove(index).action);
        match fault {
            Some(FaultAction::Reply(error)) => return Outcome::Reply(reply(header, 0, Err(error))),
            Some(FaultAction::DropConnection) => return Outcome::Drop,
            Some(FaultAction::Ignore) => return Outcome::Silent,
            Some(FaultAction::EvictClients) => self
                .tables
                .retain(|(table_group, _), _| *table_group != group),
            Some(FaultAction::ApplyThenDrop) => {
                let _ = self.handle_request(node, request);
                return Outcome::AppliedThenDrop;
            }
            None => {}
        }
        self.handle_request(node, request)
    }

    fn handle_request(&mut self, node: u32, request: &Msg<RequestHeader>) -> Outcome {
        let header = request.header();
        let operation = header.operation();
        let group = header.prefix.group.get();
        let body = request.body();
        match operation {
            Operation::Metadata => {
                // Like a real node: the answer says which metadata op it reflects.
                let as_of = self.ops.get(&0).copied().unwrap_or(0);
                Outcome::Reply(reply_as_of(header, 0, as_of, self.metadata(body)))
            }
            Operation::ClusterStatus => {
                let status = ClusterStatusReply {
                    node,
                    nodes: self.nodes.clone(),
                    groups: Vec::new(),
                };
                Outcome::Reply(reply(header, 0, Ok(Bytes::from(status.to_vec()))))
            }
            Operation::Attention => {
                let attention = AttentionReply {
                    entries: Vec::new(),
                };
                Outcome::Reply(reply(header, 0, Ok(Bytes::from(attention.to_vec()))))
            }
            Operation::AcceptLoss => Outcome::Reply(reply(header, 0, self.accept_loss(node, body))),
            Operation::Reconfigure => Outcome::Reply(reply(
                header,
                0,
                Err(ErrorBody::message(
                    ResultCode::InvalidRequest,
                    "reconfigure is a group's own operation",
                )),
            )),
            // Consumer groups and users are tested against real nodes.
            Operation::JoinConsumerGroup
            | Operation::ConsumerHeartbeat
            | Operation::LeaveConsumerGroup
            | Operation::DescribeConsumerGroups
            | Operation::CreateUser
            | Operation::DeleteUser
            | Operation::GrantPermission
            | Operation::RevokePermission
            | Operation::ListUsers
            | Operation::SetQuota
            | Operation::ListQuotas
            | Operation::RevokeCertificate
            | Operation::Authenticate
            | Operation::CreateToken
            | Operation::RevokeToken => Outcome::Reply(reply(
                header,
                0,
                Err(ErrorBody::message(
                    ResultCode::InvalidRequest,
                    "the scripted server keeps no consumer groups or users",
                )),
            )),
            Operation::CreateStream
            | Operation::CreateTopic
            | Operation::Produce
            | Operation::ReassignPartition
            | Operation::EpochStarted
            | Operation::DropReplica
            | Operation::DeleteTopic
            | Operation::DeleteStream
            | Operation::AlterTopic
            | Operation::AddPartitions => self.replicated(node, header, body),
            Operation::Fetch
            | Operation::GetCursor
            | Operation::StoreCursor
            | Operation::DeleteCursor => {
                if let Some(gone) = self.not_hosted(group) {
                    return Outcome::Reply(reply(header, 0, Err(gone)));
                }
                if let Some(redirect) = self.not_primary(node, group) {
                    return Outcome::Reply(reply(header, 0, Err(redirect)));
                }
                match operation {
                    Operation::Fetch => self.fetch(header, body),
                    Operation::GetCursor => {
                        Outcome::Reply(reply(header, 0, self.get_cursor(group, body)))
                    }
                    Operation::DeleteCursor => {
                        Outcome::Reply(reply(header, 0, self.delete_cursor(group, body)))
                    }
                    _ => Outcome::Reply(reply(header, 0, self.store_cursor(group, body))),
                }
            }
            Operation::OffsetForTime => Outcome::Reply(reply(
                header,
                0,
                Err(ErrorBody::message(
                    ResultCode::InvalidRequest,
                    "the scripted cluster keeps no append times",
                )),
            )),
        }
    }

    fn not_primary(&self, node: u32, group: u64) -> Option<ErrorBody> {
        if group == 0 {
            if node == self.metadata_primary {
                return None;
            }
            let address = self.address_of(self.metadata_primary);
            return Some(ErrorBody::NotPrimary {
                view: 1,
                primary_replica: 0,
                primary_node: self.metadata_primary,
                address,
            });
        }
        let partition = self.partitions.get(&group)?;
        if partition.primary == node {
            return None;
        }
        let index = partition
            .replicas
            .iter()
            .position(|replica| *replica == partition.primary)?;
        // The node knows the view but not the address: the SDK routes by replica index.
        Some(ErrorBody::NotPrimary {
            view: index as u32,
            primary_replica: index as u8,
            primary_node: partition.primary,
            address: String::new(),
        })
    }

    fn address_of(&self, node: u32) -> String {
        self.nodes
            .iter()
            .find(|info| info.id == node)
            .map(|info| info.client_address.clone())
            .unwrap_or_default()
    }

    /// The answer for a partition group no node hosts: `Deleted` when its
    /// topic was deleted, like a real node.
    fn not_hosted(&self, group: u64) -> Option<ErrorBody> {
        if group == 0 || self.partitions.contains_key(&group) {
            return None;
        }
        Some(if self.deleted.contains(&group) {
            ErrorBody::message(ResultCode::Deleted, "the group's topic was deleted")
        } else {
            ErrorBody::message(ResultCode::UnknownGroup, "no such group here")
        })
    }

    fn replicated(&mut self, node: u32, header: &RequestHeader, body: &Bytes) -> Outcome {
        let group = header.prefix.group.get();
        if let Some(gone) = self.not_hosted(group) {
            return Outcome::Reply(reply(header, 0, Err(gone)));
        }
        if let Some(redirect) = self.not_primary(node, group) {
            return Outcome::Reply(reply(header, 0, Err(redirect)));
        }
        let (client, number) = (header.client.get(), header.request.get());
        let table = self.tables.get(&(group, client));
        let expected = match table {
            None if number != 1 => {
                let error = ErrorBody::message(
                    ResultCode::SessionEvicted,
                    "unknown client: start a new client id",
                );
                return Outcome::Reply(reply(header, 0, Err(error)));
            }
            None => 1,
            Some(table) => {
                if let Some(stored) = table.get(&number) {
                    return Outcome::Reply(reply(header, stored.op, stored.result.clone()));
                }
                table.keys().next_back().map_or(1, |last| last + 1)
            }
        };
        if number != expected {
            let error = ErrorBody::OutOfOrder { expected };
            return Outcome::Reply(reply(header, 0, Err(error)));
        }
        let result = match header.operation() {
            Operation::CreateStream => self.apply_create_stream(body),
            Operation::CreateTopic => self.apply_create_topic(body),
            Operation::ReassignPartition => self.apply_reassign(body),
            Operation::DropReplica => self.apply_drop_replica(body),
            Operation::EpochStarted => Ok(Bytes::from(Empty.to_vec())),
            Operation::DeleteTopic => self.apply_delete_topic(body),
            Operation::DeleteStream => self.apply_delete_stream(body),
            Operation::AlterTopic => self.apply_alter_topic(body),
            Operation::AddPartitions => self.apply_add_partitions(body),
            _ => self.apply_produce(group, body),
        };
        let op = self.ops.entry(group).or_default();
        *op += 1;
        let stored = StoredReply { op: *op, result };
        self.tables
            .entry((group, client))
            .or_default()
            .insert(number, stored.clone());
        self.applied.push((group, client, number));
        Outcome::Reply(reply(header, stored.op, stored.result))
    }

    fn apply_create_stream(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
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

    fn apply_create_topic(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
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
    fn apply_reassign(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
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

    fn apply_drop_replica(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
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

    fn apply_delete_topic(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = DeleteTopic::from_bytes(body).map_err(invalid)?;
        self.known_topic(&request.stream, &request.topic)?;
        let groups =
            self.remove_topics(|info| info.stream == request.stream && info.topic == request.topic);
        Ok(Bytes::from(TopicsDeleted { groups }.to_vec()))
    }

    fn apply_delete_stream(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
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

    fn apply_alter_topic(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
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

    fn apply_add_partitions(&mut self, body: &Bytes) -> Result<Bytes, ErrorBody> {
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

    fn apply_produce(&mut self, group: u64, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let batch = RecordBatch::from_bytes(body.clone()).map_err(invalid)?;
        let partition = self.partitions.get_mut(&group).expect("checked above");
        let offset_base = partition.high_watermark;
        let record_count = batch.record_count();
        partition.high_watermark += u64::from(record_count);
        partition.batches.push((offset_base, batch));
        let reply = ProduceReply {
            offset_base,
            record_count,
        };
        Ok(Bytes::from(reply.to_vec()))
    }

    fn metadata(&self, body: &Bytes) -> Result<Bytes, ErrorBody> {
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

    fn accept_loss(&self, node: u32, body: &Bytes) -> Result<Bytes, ErrorBody> {
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

    fn fetch(&self, header: &RequestHeader, body: &Bytes) -> Outcome {
        let group = header.prefix.group.get();
        let request = match FetchRequest::from_bytes(body) {
            Ok(request) => request,
            Err(error) => return Outcome::Reply(reply(header, 0, Err(invalid(error)))),
        };
        let partition = &self.partitions[&group];
        if request.offset > partition.high_watermark {
            let error = ErrorBody::OffsetOutOfRange {
                requested: request.offset,
                log_start_offset: 0,
                high_watermark: partition.high_watermark,
            };
            return Outcome::Reply(reply(header, 0, Err(error)));
        }
        let batches: Vec<RecordBatch> = partition
            .batches
            .iter()
            .filter(|(base, batch)| base + u64::from(batch.record_count()) > request.offset)
            .take(if request.max_bytes <= 1 {
                1
            } else {
                usize::MAX
            })
            .map(|(base, batch)| with_offset_base(batch, *base))
            .collect();
        let fetch = FetchReply {
            high_watermark: partition.high_watermark,
            log_start_offset: 0,
            batches,
        };
        let ready = reply(header, 0, Ok(Bytes::from(fetch.to_vec())));
        if !fetch.batches.is_empty() || request.wait_ms == 0 {
            return Outcome::Reply(ready);
        }
        // Long poll: this scripted cluster only waits, it never wakes early.
        let wait = Duration::from_millis(u64::from(request.wait_ms).min(200));
        Outcome::Later(tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            ready
        }))
    }

    fn get_cursor(&self, group: u64, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = GetCursor::from_bytes(body).map_err(invalid)?;
        let offset = self.partitions[&group]
            .cursors
            .get(&request.consumer)
            .copied();
        Ok(Bytes::from(GetCursorReply { offset }.to_vec()))
    }

    fn store_cursor(&mut self, group: u64, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = StoreCursor::from_bytes(body).map_err(invalid)?;
        let partition = self.partitions.get_mut(&group).expect("routed");
        partition.cursors.insert(request.consumer, request.offset);
        Ok(Bytes::from(Empty.to_vec()))
    }

    fn delete_cursor(&mut self, group: u64, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = DeleteCursor::from_bytes(body).map_err(invalid)?;
        let partition = self.partitions.get_mut(&group).expect("routed");
        partition.cursors.remove(&request.consumer);
        Ok(Bytes::from(Empty.to_vec()))
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

fn with_offset_base(batch: &RecordBatch, offset_base: u64) -> RecordBatch {
    let mut bytes = batch.bytes().to_vec();
    bytes[..8].copy_from_slice(&offset_base.to_le_bytes());
    RecordBatch::from_bytes(Bytes::from(bytes)).expect("patched batch is valid")
}

fn invalid(error: strand_wire::BodyError) -> ErrorBody {
    ErrorBody::message(ResultCode::InvalidRequest, error.to_string())
}

fn reply(request: &RequestHeader, op: u64, result: Result<Bytes, ErrorBody>) -> Msg<ReplyHeader> {
    reply_as_of(request, op, op, result)
}

/// A reply at `op` from a replica whose commit number is `commit`.
fn reply_as_of(
    request: &RequestHeader,
    op: u64,
    commit: u64,
    result: Result<Bytes, ErrorBody>,
) -> Msg<ReplyHeader> {
    let mut header = ReplyHeader::new(
        CLUSTER,
        request.prefix.group.get(),
        strand_wire::ViewId::ZERO,
        0,
    );
    header.client = request.client;
    header.request = request.request;
    header.operation = request.operation;
    header.op.set(op);
    header.commit.set(commit);
    let body = match result {
        Ok(body) => {
            header.result.set(ResultCode::Ok as u16);
            body
        }
        Err(error) => {
            header.result.set(error.code() as u16);
            Bytes::from(error.to_vec())
        }
    };
    Msg::new(header, body)
}
