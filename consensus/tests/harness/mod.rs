//! A small message-by-message harness: replicas of one group, an in-memory
//! storage per replica that models what a crash loses, and a network queue
//! the test delivers, drops or holds.
//!
//! Its parts, by topic: `storage` (one replica's disk and what a crash
//! loses), `effects` (a replica's effects carried out against its storage
//! and the network), `network` (delivery, ticks and node-level liveness),
//! `clients` (produce and cursor requests), `membership` (assignments,
//! joins and state transfers) and `checks` (what the tests assert of the
//! group's history). Here: the cluster itself, its replicas' lifecycle and
//! an operator's actions.

#![allow(dead_code)]

mod checks;
mod clients;
mod effects;
mod membership;
mod network;
mod storage;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use strand_consensus::*;
use strand_wire::*;

pub use storage::{Storage, SyncMode};

pub const CLUSTER: u64 = 77;
pub const GROUP: u64 = 5;

/// Ticks without a sign of a peer before the node-level liveness suspects
/// it (a heartbeat timeout, as the server's detector waits).
pub const LIVENESS_SUSPECT_TICKS: u64 = 30;

pub struct Cluster {
    pub config: Config,
    pub replicas: Vec<Option<Replica<RecordLog>>>,
    pub storage: Vec<Storage>,
    pub sync: Vec<SyncMode>,
    pub network: VecDeque<(u8, u8, Message)>,
    /// Links that drop everything: (from, to).
    pub cut: BTreeSet<(u8, u8)>,
    pub replies: Vec<Msg<ReplyHeader>>,
    /// Every commit effect, per replica: op → header checksum.
    pub committed: Vec<BTreeMap<u64, u32>>,
    pub events: Vec<(u8, Event)>,
    pub quarantined: Vec<(u8, u64)>,
    /// (replica, op, first checksum, second checksum): a replica committed two prepares at one op.
    pub conflicts: Vec<(u8, u64, u32, u32)>,
    pub untrusted_gate: bool,
    /// Every message sent: (from, to, command, view).
    pub sent: Vec<(u8, u8, Command, u32)>,
    /// Every DoViewChange sent, by sender.
    pub dvcs_sent: Vec<(u8, Msg<DoViewChangeHeader>)>,
    /// Replicas whose next restart finds a log they cannot use.
    pub awaiting: BTreeSet<u8>,
    next_request: BTreeMap<u128, u64>,
    /// The bound on distinct consumer names per partition.
    pub cursor_consumers_max: u64,
    /// Ticks so far (for node-level liveness).
    now: u64,
    /// Node-level liveness, per observer and peer: the tick it last heard
    /// of the peer, and whether it told its replica the peer lives.
    liveness: Vec<Vec<(u64, bool)>>,
}

impl Cluster {
    pub fn new(replica_count: u8, confirm: ConfirmPolicy, durability: Durability) -> Cluster {
        let config = Config {
            cluster: CLUSTER,
            group: GROUP,
            replica: 0,
            memberships: vec![strand_consensus::epoch::Membership::initial(
                replica_count,
                confirm,
            )],
            durability,
            cursor_durability: durability,
            timeouts: Timeouts::default(),
            seed: 1,
        };
        let count = usize::from(replica_count);
        let mut cluster = Cluster {
            config,
            replicas: (0..count).map(|_| None).collect(),
            storage: vec![Storage::default(); count],
            sync: vec![SyncMode::Immediate; count],
            network: VecDeque::new(),
            cut: BTreeSet::new(),
            replies: Vec::new(),
            committed: vec![BTreeMap::new(); count],
            events: Vec::new(),
            quarantined: Vec::new(),
            conflicts: Vec::new(),
            untrusted_gate: true,
            sent: Vec::new(),
            dvcs_sent: Vec::new(),
            awaiting: BTreeSet::new(),
            next_request: BTreeMap::new(),
            cursor_consumers_max: CURSOR_CONSUMERS_MAX_DEFAULT,
            now: 0,
            liveness: vec![vec![(0, true); count]; count],
        };
        for replica in 0..replica_count {
            cluster.restart(replica);
        }
        cluster
    }

    pub fn count(&self) -> u8 {
        self.replicas.len() as u8
    }

    pub fn replica(&self, index: u8) -> &Replica<RecordLog> {
        self.replicas[usize::from(index)]
            .as_ref()
            .expect("replica is up")
    }

    pub fn up(&self, index: u8) -> bool {
        self.replicas[usize::from(index)].is_some()
    }

    /// Starts (or restarts) a replica from its storage.
    pub fn restart(&mut self, index: u8) {
        let mut config = self.config.clone();
        config.replica = index;
        config.seed = 1000 + u64::from(index);
        let storage = &self.storage[usize::from(index)];
        let mut recovered = storage.recovered(config.durability);
        if self.awaiting.contains(&index) {
            recovered.awaiting_state_transfer = true;
        }
        let committed_end = storage
            .log
            .iter()
            .take(recovered.state.commit as usize)
            .last()
            .map_or(0, |prepare| prepare.header().offset_end());
        let mut replica = Replica::open(
            config,
            recovered,
            RecordLog {
                offset_end: committed_end,
            },
        );
        #[cfg(feature = "mutations")]
        if !self.untrusted_gate {
            replica.disable_trusted_gate();
        }
        let mut effects = Effects::new();
        replica.start(&mut effects);
        self.replicas[usize::from(index)] = Some(replica);
        let now = self.now;
        self.grow_liveness();
        for peer in &mut self.liveness[usize::from(index)] {
            *peer = (now, true);
        }
        self.storage[usize::from(index)].clean = false;
        self.storage[usize::from(index)].created = true;
        self.execute(index, effects);
    }

    /// A crash: the replica stops, its unsynced writes are lost.
    pub fn crash(&mut self, index: u8) {
        self.replicas[usize::from(index)] = None;
        self.storage[usize::from(index)].crash();
        self.network
            .retain(|(from, to, _)| *from != index && *to != index);
    }

    /// A clean shutdown: everything fsynced, the clean mark written.
    pub fn shutdown(&mut self, index: u8) {
        self.sync(index);
        let in_view = self.replica(index).resumable_in_view();
        self.replicas[usize::from(index)] = None;
        let storage = &mut self.storage[usize::from(index)];
        storage.clean = true;
        storage.stopped_in_view = in_view;
        self.network
            .retain(|(from, to, _)| *from != index && *to != index);
    }

    /// Fsyncs a Manual replica's queued writes.
    pub fn sync(&mut self, index: u8) {
        let storage = &mut self.storage[usize::from(index)];
        let from = storage.durable_op;
        storage.durable_op = storage.head();
        storage.cursor_durable = storage.cursor_tail;
        let completions: Vec<(u64, u32)> = storage.log[from as usize..]
            .iter()
            .map(|prepare| (prepare.header().op.get(), prepare.checksum()))
            .collect();
        let cursor_end = storage.cursor_tail;
        let mut effects = Effects::new();
        if let Some(replica) = self.replicas[usize::from(index)].as_mut() {
            for (op, checksum) in completions {
                replica.on_write(op, checksum, WriteStage::Durable, &mut effects);
            }
            replica.on_cursors_written(cursor_end, WriteStage::Durable, &mut effects);
        }
        self.execute(index, effects);
    }

    /// An operator accepts loss on `index`; returns what the replica answered
    /// (false: its group was not stuck) and carries out its effects.
    pub fn accept_loss(&mut self, index: u8) -> bool {
        self.act(index, |replica, effects| replica.accept_loss(effects))
    }

    /// The driver's periodic check on every live replica: a commit a quiet
    /// replica has not persisted is persisted now.
    pub fn persist_commits(&mut self) {
        for index in 0..self.count() {
            if self.up(index) {
                self.act(index, |replica, effects| {
                    replica.persist_commit_now(effects)
                });
            }
        }
    }

    /// Asks `index` to hand its primary role to the preferred primary;
    /// returns whether it started and carries out its effects.
    pub fn hand_over(&mut self, index: u8) -> bool {
        self.act(index, |replica, effects| {
            replica.hand_over_to_preferred(effects)
        })
    }

    /// Runs `action` on live replica `index` and carries out its effects.
    fn act<T>(
        &mut self,
        index: u8,
        action: impl FnOnce(&mut Replica<RecordLog>, &mut Effects) -> T,
    ) -> T {
        let mut effects = Effects::new();
        let result = action(
            self.replicas[usize::from(index)].as_mut().expect("up"),
            &mut effects,
        );
        self.execute(index, effects);
        result
    }
}
