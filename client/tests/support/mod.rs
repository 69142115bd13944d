//! A scripted Strand cluster on loopback: real TCP, real frames, a client
//! table per group with the server's rules, and faults injected by script.
//!
//! It is not the server: every node shares one in-memory state, a group's
//! "primary" is whichever node the state says, and replication is instant.
//! What it keeps faithful is what the SDK depends on: redirects, Busy,
//! OutOfOrder and SessionEvicted from the client table, stored replies for
//! retries, `op = 0` on refusals, and connections that drop or go silent.
//!
//! This file holds the shared state and the script's handle ([`Cluster`]);
//! `connection` runs the nodes' sockets, `requests` the client table's
//! rules, `catalog` the metadata plane and `records` the data plane;
//! `sdk` has what the tests share on the client's side.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use strand_wire::ops::{ErrorBody, NodeInfo, TopicInfo};
use strand_wire::{ConfirmPolicy, Msg, Operation, RecordBatch, ReplyHeader};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

mod catalog;
mod connection;
mod records;
mod requests;
pub mod sdk;

use connection::serve;

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

enum Outcome {
    Reply(Msg<ReplyHeader>),
    /// Answer later (a long-polling fetch).
    Later(JoinHandle<Msg<ReplyHeader>>),
    Silent,
    Drop,
    AppliedThenDrop,
}
