//! The simulated world: replicas of one group driven by their real
//! `consensus` code, their disks, the network, clients, faults, checkers,
//! and the trace. One seed, one thread, one result.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use strand_consensus::prng::Prng;
use strand_consensus::{
    ClientRequest, Config, DurableState, Effect, Effects, Event, RecordLog, Replica, Timeouts,
    WaitReason, WriteStage,
};
use strand_wire::ops::{CursorEvents, StoreCursor};
use strand_wire::{
    Body, CommandHeader, CursorsHeader, HeadersHeader, Message, Msg, Operation, PrepareHeader,
    ReplyHeader,
};
use zerocopy::IntoBytes;

use crate::checkers::{
    AckedStays, CursorsBounded, LIVENESS_TICKS_MAX, LinearHistory, OPERATOR_PATIENCE_TICKS,
    UntrustedSilent, ViewsMonotonic, Violation,
};
use crate::client::Client;
use crate::disk::Disk;
use crate::network::{CLIENT_BASE, Network, Packet};
use crate::options::Options;
use crate::trace::Trace;

const CLUSTER: u64 = 0x5157;
const GROUP: u64 = 1;
/// More messages in flight than this is a storm (every protocol message is
/// answered by a bounded number of others), reported as a violation.
const TRAFFIC_IN_FLIGHT_MAX: usize = 100_000;
/// Ticks a state transfer takes.
const STATE_TRANSFER_TICKS: u64 = 40;

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// Hash of every event of the run: the same seed gives the same hash.
    pub trace_hash: u64,
    /// Ticks simulated (faulty phase plus quiet phase).
    pub ticks: u64,
    /// The first broken property, if any.
    pub violation: Option<Violation>,
    /// Counters for the summary.
    pub stats: Stats,
    /// The options drawn from the seed.
    pub options: Options,
}

/// Counters for the summary line.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Ops in the committed history.
    pub committed: u64,
    /// Produces acknowledged to clients.
    pub acked: u64,
    /// View changes started (all replicas).
    pub view_changes: u64,
    /// Crashes and clean shutdowns.
    pub stops: u64,
    /// Storage faults injected.
    pub storage_faults: u64,
    /// Quarantines.
    pub quarantines: u64,
    /// Messages dropped by the network.
    pub dropped: u64,
    /// Ticks the quiet phase needed.
    pub quiet_ticks: u64,
    /// Times the simulated operator accepted loss to unstick a group.
    pub accepted_losses: u64,
}

#[derive(Debug, Clone)]
enum DiskEvent {
    Sync { before: u64, cursor_len: usize },
    Persist { state: DurableState, sequence: u64 },
    Transfer { from: u8 },
}

/// The world.
pub struct World {
    options: Options,
    prng: Prng,
    now: u64,
    replicas: Vec<Option<Replica<RecordLog>>>,
    disks: Vec<Disk>,
    down_until: Vec<Option<u64>>,
    generation: Vec<u64>,
    sync_in_flight: Vec<bool>,
    pending_persists: Vec<Vec<(DurableState, u64)>>,
    disk_events: BTreeMap<(u64, u64), (u8, u64, DiskEvent)>,
    /// Superblock writes complete in the order they were asked for.
    last_persist_tick: Vec<u64>,
    /// Replicas that lost writes they may have acked (a crash under
    /// `replicated`, a storage fault), and the log head they had: at most
    /// W - 1 may be in this state at once (the durability promise); they
    /// leave it once trusted, Normal, repaired and back to that head.
    damaged: BTreeMap<u8, u64>,
    disk_sequence: u64,
    network: Network,
    clients: Vec<Client>,
    faults_on: bool,
    storage_faulted: BTreeSet<u8>,
    history: LinearHistory,
    acked: AckedStays,
    views: ViewsMonotonic,
    trust: UntrustedSilent,
    cursors: CursorsBounded,
    stats: Stats,
    trace: Trace,
}

impl World {
    /// A world for `options`, with every replica started fresh.
    pub fn new(options: Options, trace_lines: usize) -> World {
        let count = usize::from(options.replica_count);
        let clients = (0..options.clients)
            .map(|index| {
                Client::new(
                    index,
                    options.seed,
                    options.client_in_flight,
                    options.replica_count,
                )
            })
            .collect();
        let mut world = World {
            prng: Prng::new(options.seed),
            now: 0,
            replicas: (0..count).map(|_| None).collect(),
            disks: vec![Disk::default(); count],
            down_until: vec![None; count],
            generation: vec![0; count],
            sync_in_flight: vec![false; count],
            pending_persists: vec![Vec::new(); count],
            disk_events: BTreeMap::new(),
            last_persist_tick: vec![0; count],
            damaged: BTreeMap::new(),
            disk_sequence: 0,
            network: Network::new(&options),
            clients,
            faults_on: true,
            storage_faulted: BTreeSet::new(),
            history: LinearHistory::default(),
            acked: AckedStays::default(),
            views: ViewsMonotonic::new(options.replica_count),
            trust: UntrustedSilent,
            cursors: CursorsBounded,
            stats: Stats::default(),
            trace: Trace::new(trace_lines),
            options,
        };
        for replica in 0..world.options.replica_count {
            world.start(replica);
        }
        world
    }

    /// Runs the faulty phase, then the quiet phase; stops at the first violation.
    pub fn run(mut self) -> (Outcome, Trace) {
        let result = self.run_phases();
        self.stats.committed = self.history.head();
        self.stats.acked = self.acked.len() as u64;
        self.stats.dropped = self.network.dropped;
        let outcome = Outcome {
            seed: self.options.seed,
            trace_hash: self.trace.hash(),
            ticks: self.now,
            violation: result.err(),
            stats: self.stats.clone(),
            options: self.options.clone(),
        };
        (outcome, self.trace)
    }

    fn run_phases(&mut self) -> Result<(), Violation> {
        while self.now < self.options.ticks {
            self.step()?;
        }
        // Quiet phase: faults stop, everyone comes back, everything heals.
        self.faults_on = false;
        self.network.heal();
        for replica in 0..self.options.replica_count {
            if self.replicas[usize::from(replica)].is_none() {
                self.start(replica);
            }
        }
        let quiet_start = self.now;
        while self.clients.iter().any(|client| !client.pending.is_empty()) {
            if self.now - quiet_start > LIVENESS_TICKS_MAX {
                let pending: Vec<_> = self
                    .clients
                    .iter()
                    .flat_map(|client| {
                        client
                            .pending
                            .iter()
                            .map(move |pending| (client.index, pending.request))
                    })
                    .collect();
                return Err(Violation {
                    checker: "5 liveness",
                    detail: format!(
                        "{} ticks after faults stopped, requests still pending: {pending:?}; {}",
                        LIVENESS_TICKS_MAX,
                        self.describe_replicas()
                    ),
                });
            }
            if (self.now - quiet_start) % OPERATOR_PATIENCE_TICKS == 0 && self.now > quiet_start {
                self.operator_accepts_loss()?;
            }
            self.step()?;
        }
        self.stats.quiet_ticks = self.now - quiet_start;
        // Let backups catch up, then every ack must be in the history.
        for _ in 0..200 {
            self.step()?;
        }
        self.acked.all_present(&self.history)
    }

    /// The operator's `accept-loss` on a group stuck with `attention`
    /// raised: on the first replica whose attention names a wait an
    /// operator can lift (never a pending state transfer).
    fn operator_accepts_loss(&mut self) -> Result<(), Violation> {
        let stuck = self.replicas.iter().position(|replica| {
            replica.as_ref().is_some_and(|live| {
                live.attention()
                    .is_some_and(|(reason, _)| reason != WaitReason::AwaitingStateTransfer)
            })
        });
        let Some(index) = stuck else {
            return Ok(());
        };
        let mut effects = Effects::new();
        let live = self.replicas[index]
            .as_mut()
            .expect("the stuck replica is up");
        if !live.accept_loss(&mut effects) {
            return Ok(());
        }
        self.stats.accepted_losses += 1;
        let replica = index as u8;
        self.trace
            .record(self.now, u16::from(replica), "accept_loss", &[]);
        self.execute(replica, effects)
    }

    fn describe_replicas(&self) -> String {
        let mut out = String::new();
        for (index, replica) in self.replicas.iter().enumerate() {
            match replica {
                Some(replica) => out.push_str(&format!(
                    "[{index}: {} view {} log_view {} op {} commit {} trusted {} attention {:?} starts {:?}] ",
                    replica.status().name(),
                    replica.view(),
                    replica.log_view(),
                    replica.op(),
                    replica.commit(),
                    replica.trusted(),
                    replica.attention(),
                    replica.durable_state().history_starts.iter().map(|start| (start.view, start.op)).collect::<Vec<_>>()
                )),
                None => out.push_str(&format!("[{index}: down] ")),
            }
        }
        out
    }

    /// One tick of the world.
    fn step(&mut self) -> Result<(), Violation> {
        self.now += 1;
        if self.faults_on {
            self.inject_faults()?;
        }
        self.restart_due()?;
        for packet in self.network.due(self.now) {
            self.deliver(packet)?;
        }
        self.complete_disk_events()?;
        for replica in 0..self.options.replica_count {
            let Some(live) = self.replicas[usize::from(replica)].as_mut() else {
                continue;
            };
            let mut effects = Effects::new();
            live.on_tick(&mut effects);
            self.execute(replica, effects)?;
        }
        self.clients_act()?;
        if self.network.in_flight() > TRAFFIC_IN_FLIGHT_MAX {
            return Err(Violation {
                checker: "7 bounded traffic",
                detail: format!(
                    "{} messages in flight: a message storm; {}",
                    self.network.in_flight(),
                    self.describe_replicas()
                ),
            });
        }
        for replica in 0..self.options.replica_count {
            if let Some(live) = &self.replicas[usize::from(replica)] {
                self.trust.status(replica, live)?;
                self.views.running(replica, live.view(), live.log_view())?;
            }
        }
        Ok(())
    }

    // ----- replicas ------------------------------------------------------------

    fn start(&mut self, replica: u8) {
        let index = usize::from(replica);
        let config = Config {
            cluster: CLUSTER,
            group: GROUP,
            replica,
            memberships: vec![strand_consensus::epoch::Membership::initial(
                self.options.replica_count,
                self.options.confirm,
            )],
            durability: self.options.durability,
            cursor_durability: self.options.durability,
            timeouts: Timeouts::default(),
            seed: self.options.seed ^ (u64::from(replica) << 32) ^ self.now,
        };
        let disk = &mut self.disks[index];
        let recovered = disk.recovered(self.options.durability);
        let commit = recovered.state.commit.min(disk.head());
        let machine = RecordLog {
            offset_end: disk.offset_end(commit),
        };
        disk.created = true;
        disk.clean = false;
        #[allow(unused_mut)]
        let mut live = Replica::open(config, recovered, machine);
        #[cfg(feature = "mutations")]
        if self.options.mutation_untrusted_gate {
            live.disable_trusted_gate();
        }
        let mut effects = Effects::new();
        live.start(&mut effects);
        self.trace.record(
            self.now,
            u16::from(replica),
            "start",
            &[
                live.view().packed(),
                live.op(),
                live.commit(),
                u64::from(live.trusted()),
            ],
        );
        self.replicas[index] = Some(live);
        self.down_until[index] = None;
        // Effects at start cannot break a checker before any traffic; keep going.
        let _ = self.execute(replica, effects);
    }

    fn stop(&mut self, replica: u8, clean: bool) {
        let index = usize::from(replica);
        let Some(live) = self.replicas[index].take() else {
            return;
        };
        // Only a trusted replica may mark its log cleanly shut down: an
        // untrusted one still lacks what it lost in an earlier crash, so it
        // is left running rather than stopped beyond the promise.
        if clean && !live.trusted() {
            self.replicas[index] = Some(live);
            return;
        }
        self.generation[index] += 1;
        self.sync_in_flight[index] = false;
        let persists = std::mem::take(&mut self.pending_persists[index]);
        let disk = &mut self.disks[index];
        // A superblock write in flight either landed whole or not at all.
        if let Some((state, _)) = persists.into_iter().last() {
            if self.prng.chance(1, 2) {
                disk.persist(state);
            }
        }
        let head_before = disk.head();
        if clean {
            disk.shut_down();
        } else {
            disk.crash(&mut self.prng);
        }
        if disk.head() < head_before
            && self.options.durability == strand_wire::Durability::Replicated
        {
            let previous = self.damaged.get(&replica).copied().unwrap_or(0);
            self.damaged.insert(replica, head_before.max(previous));
        }
        self.network.forget(u16::from(replica));
        let down = self.options.down_min_ticks
            + self
                .prng
                .below(self.options.down_max_ticks - self.options.down_min_ticks + 1);
        self.down_until[index] = Some(self.now + down);
        self.stats.stops += 1;
        self.trace.record(
            self.now,
            u16::from(replica),
            if clean { "shutdown" } else { "crash" },
            &[],
        );
    }

    fn restart_due(&mut self) -> Result<(), Violation> {
        for replica in 0..self.options.replica_count {
            let index = usize::from(replica);
            let due = self.down_until[index].is_some_and(|until| until <= self.now);
            if !due {
                continue;
            }
            self.maybe_fault_storage(replica);
            self.start(replica);
        }
        Ok(())
    }

    fn maybe_fault_storage(&mut self, replica: u8) {
        let minority = usize::from((self.options.replica_count - 1) / 2);
        let allowed = (self.storage_faulted.contains(&replica)
            || self.storage_faulted.len() < minority)
            && self.within_promise(replica);
        if !allowed || !self.prng.chance(self.options.storage_fault_percent, 100) {
            return;
        }
        let disk = &mut self.disks[usize::from(replica)];
        if let Some(fault) = disk.pick_fault(&mut self.prng) {
            let head = disk.head();
            disk.inject(fault);
            let previous = self.damaged.get(&replica).copied().unwrap_or(0);
            self.damaged.insert(replica, head.max(previous));
            self.storage_faulted.insert(replica);
            self.stats.storage_faults += 1;
            self.trace
                .record(self.now, u16::from(replica), "storage_fault", &[]);
        }
    }

    fn inject_faults(&mut self) -> Result<(), Violation> {
        let count = self.options.replica_count;
        if self.prng.chance(self.options.partition_ppm, 1_000_000) {
            self.network.repartition(&mut self.prng);
            self.trace
                .record(self.now, 0, "partition", &[self.network.partition as u64]);
        } else if self.network.partition != crate::network::PartitionKind::Whole
            && self.prng.chance(self.options.heal_ppm, 1_000_000)
        {
            self.network.heal();
            self.trace.record(self.now, 0, "heal", &[]);
        }
        self.settle_damaged();
        if self.prng.chance(self.options.full_crash_ppm, 1_000_000) {
            for replica in 0..count {
                let clean = !self.may_crash(replica);
                self.stop(replica, clean);
            }
            return Ok(());
        }
        for replica in 0..count {
            if self.replicas[usize::from(replica)].is_none() {
                continue;
            }
            if !self.prng.chance(self.options.crash_ppm, 1_000_000) {
                continue;
            }
            let clean =
                self.prng.chance(self.options.clean_percent, 100) || !self.may_crash(replica);
            self.stop(replica, clean);
            if self.prng.chance(self.options.double_crash_percent, 100) {
                let other = self.prng.below(u64::from(count)) as u8;
                let clean = !self.may_crash(other);
                self.stop(other, clean);
            }
        }
        Ok(())
    }

    /// Whether an unclean crash of `replica` stays within the durability
    /// promise: always under `persisted`; under `replicated`, only while
    /// fewer than W - 1 other replicas are still missing what they acked.
    fn may_crash(&self, replica: u8) -> bool {
        self.options.durability == strand_wire::Durability::Persisted
            || self.within_promise(replica)
    }

    /// Whether damaging `replica` (a lossy crash, a storage fault) keeps at
    /// most W - 1 replicas damaged at once: every acked op then keeps a copy.
    fn within_promise(&self, replica: u8) -> bool {
        let write_quorum =
            strand_consensus::confirm_rule(self.options.confirm, self.options.replica_count).write;
        let others_damaged = self
            .damaged
            .keys()
            .filter(|damaged| **damaged != replica)
            .count();
        others_damaged < usize::from(write_quorum) - 1
    }

    /// A damaged replica recovers once it is up, trusted, and holds again the
    /// log head it had when it crashed (or the committed history moved past).
    fn settle_damaged(&mut self) {
        let recovered: Vec<u8> = self
            .damaged
            .iter()
            .filter(|(replica, head)| {
                let index = usize::from(**replica);
                let needed = (**head).min(self.history.head());
                let disk = &self.disks[index];
                let repaired = disk.faulty.is_empty()
                    && disk.faulty_headers.is_empty()
                    && disk.missing.is_empty();
                self.replicas[index].as_ref().is_some_and(|live| {
                    live.trusted()
                        && live.status() == strand_consensus::Status::Normal
                        && repaired
                        && disk.durable_head() >= needed
                })
            })
            .map(|(replica, _)| *replica)
            .collect();
        for replica in recovered {
            self.damaged.remove(&replica);
        }
    }

    // ----- messages and clients ------------------------------------------------

    fn deliver(&mut self, packet: Packet) -> Result<(), Violation> {
        if packet.to >= CLIENT_BASE {
            let index = usize::from(packet.to - CLIENT_BASE);
            let Message::Reply(reply) = packet.message else {
                return Ok(());
            };
            return self.client_reply(index, &reply);
        }
        let replica = packet.to as u8;
        let Some(live) = self.replicas[usize::from(replica)].as_mut() else {
            return Ok(());
        };
        let mut effects = Effects::new();
        match packet.message {
            Message::Request(request) => {
                let mut header = *request.header();
                header.prefix.cluster.set(CLUSTER);
                header.prefix.group.set(GROUP);
                let body = request.body().clone();
                let request = Msg::new(header, body.clone());
                if header.operation() == Operation::StoreCursor {
                    let Ok(cursor) = StoreCursor::from_bytes(&body) else {
                        return Ok(());
                    };
                    let high_watermark = live.machine().offset_end;
                    live.on_store_cursor(&request, cursor, high_watermark, &mut effects);
                } else {
                    let record_count = strand_wire::RecordBatch::from_bytes(body)
                        .map(|batch| batch.record_count())
                        .unwrap_or(0);
                    live.on_request(
                        ClientRequest {
                            request,
                            record_count,
                            timestamp_ns: self.now,
                        },
                        &mut effects,
                    );
                }
            }
            message => live.on_message(message, &mut effects),
        }
        self.execute(replica, effects)
    }

    fn client_reply(&mut self, index: usize, reply: &Msg<ReplyHeader>) -> Result<(), Violation> {
        let now = self.now;
        let values = [
            reply.header().request.get(),
            u64::from(reply.header().result.get()),
        ];
        self.trace
            .record(now, CLIENT_BASE + index as u16, "reply", &values);
        let (ack, resend) = self.clients[index].on_reply(reply, now);
        if let Some(ack) = ack {
            self.trace.record(
                now,
                CLIENT_BASE + index as u16,
                "ack",
                &[ack.op, ack.base_offset],
            );
            self.acked.acked(ack, &self.history)?;
        }
        if resend {
            self.client_resend(index);
        }
        Ok(())
    }

    fn client_resend(&mut self, index: usize) {
        let frames = self.clients[index].resend_all(self.now);
        let to = u16::from(self.clients[index].primary_guess);
        for frame in frames {
            self.send_from_client(index, to, frame);
        }
    }

    fn send_from_client(&mut self, index: usize, to: u16, frame: Msg<strand_wire::RequestHeader>) {
        let request = frame.header().request.get();
        self.trace.record(
            self.now,
            CLIENT_BASE + index as u16,
            "request",
            &[u64::from(to), request],
        );
        let packet = Packet {
            from: CLIENT_BASE + index as u16,
            to,
            message: Message::Request(frame),
        };
        self.network
            .send(self.now, packet, &mut self.prng, self.faults_on);
    }

    fn clients_act(&mut self) -> Result<(), Violation> {
        for index in 0..self.clients.len() {
            if self.clients[index].retry_due(self.now) {
                self.client_resend(index);
                continue;
            }
            if !self.faults_on {
                continue;
            }
            if self.prng.chance(self.options.request_ppm, 1_000_000) {
                let now = self.now;
                if let Some(frame) = self.clients[index].produce(now, &mut self.prng) {
                    let to = u16::from(self.clients[index].primary_guess);
                    self.send_from_client(index, to, frame);
                }
            }
            if self.prng.chance(self.options.cursor_ppm, 1_000_000) {
                let frame = self.clients[index].store_cursor(&mut self.prng);
                let to = u16::from(self.clients[index].primary_guess);
                self.send_from_client(index, to, frame);
            }
        }
        Ok(())
    }

    // ----- effects ---------------------------------------------------------------

    fn execute(&mut self, replica: u8, effects: Effects) -> Result<(), Violation> {
        let mut queue: VecDeque<Effect> = VecDeque::from(effects.as_slice().to_vec());
        while let Some(effect) = queue.pop_front() {
            let mut more = Effects::new();
            self.execute_one(replica, effect, &mut more)?;
            queue.extend(more.as_slice().iter().cloned());
        }
        Ok(())
    }

    fn live(&mut self, replica: u8) -> &mut Replica<RecordLog> {
        self.replicas[usize::from(replica)]
            .as_mut()
            .expect("effects come from a live replica")
    }

    fn execute_one(
        &mut self,
        replica: u8,
        effect: Effect,
        more: &mut Effects,
    ) -> Result<(), Violation> {
        let index = usize::from(replica);
        let endpoint = u16::from(replica);
        match effect {
            Effect::Send { to, message } => {
                let live = self.replicas[index].as_ref().expect("live");
                self.trust.send(replica, live, message.command())?;
                self.trace.record(
                    self.now,
                    endpoint,
                    "send",
                    &[
                        u64::from(to),
                        message.command() as u64,
                        u64::from(message.prefix().checksum.get()),
                    ],
                );
                let packet = Packet {
                    from: endpoint,
                    to: u16::from(to),
                    message,
                };
                self.network
                    .send(self.now, packet, &mut self.prng, self.faults_on);
            }
            Effect::Reply { reply } => {
                let client = reply.header().client.get();
                let cursor_client = client ^ (1 << 100);
                let target = self
                    .clients
                    .iter()
                    .position(|candidate| candidate.id == client || candidate.id == cursor_client);
                if let Some(target) = target {
                    let packet = Packet {
                        from: endpoint,
                        to: CLIENT_BASE + target as u16,
                        message: Message::Reply(reply),
                    };
                    self.network
                        .send(self.now, packet, &mut self.prng, self.faults_on);
                }
            }
            Effect::WritePrepare { prepare } => {
                let (op, checksum) = (prepare.header().op.get(), prepare.checksum());
                self.trace
                    .record(self.now, endpoint, "write", &[op, u64::from(checksum)]);
                self.disks[index].write(prepare);
                self.live(replica)
                    .on_write(op, checksum, WriteStage::Queued, more);
                self.ensure_sync(replica);
            }
            Effect::Truncate { op } => {
                self.trace.record(self.now, endpoint, "truncate", &[op]);
                self.disks[index].truncate(op);
                self.ensure_sync(replica);
            }
            Effect::PersistState { state, sequence } => {
                self.trace.record(
                    self.now,
                    endpoint,
                    "persist",
                    &[
                        state.view.packed(),
                        state.log_view.packed(),
                        state.commit,
                        sequence,
                    ],
                );
                self.pending_persists[index].push((state.clone(), sequence));
                let latency = self.fsync_latency();
                let at = (self.now + latency).max(self.last_persist_tick[index]);
                self.last_persist_tick[index] = at;
                self.schedule(
                    replica,
                    at - self.now,
                    DiskEvent::Persist { state, sequence },
                );
            }
            Effect::Commit { header } => {
                self.trace.record(
                    self.now,
                    endpoint,
                    "commit",
                    &[header.op.get(), u64::from(header.checksum())],
                );
                // An acked op replaced is the loss checker 2 exists for: check
                // it before the history (checker 1) reports the same event.
                let committed = crate::checkers::CommittedOp::of(&header);
                self.acked.committed(header.op.get(), &committed)?;
                self.history.commit(replica, &header)?;
            }
            Effect::ServeHeaders { to, op_min, op_max } => {
                self.serve_headers(replica, to, op_min, op_max)
            }
            Effect::ServePrepare { to, op, checksum } => {
                self.serve_prepare(replica, to, op, checksum)
            }
            Effect::AppendCursors { events, .. } => {
                let Ok(events) = CursorEvents::from_bytes(&events) else {
                    panic!("replica {replica} appended undecodable cursor events");
                };
                for event in &events.events {
                    self.cursors.appended(replica, event, &self.history)?;
                }
                self.disks[index].cursor_events.extend(events.events);
                let end = self.disks[index].cursor_events.len() as u64;
                self.live(replica)
                    .on_cursors_written(end, WriteStage::Queued, more);
                self.ensure_sync(replica);
            }
            Effect::CutCursors { cursor_tail } => {
                let disk = &mut self.disks[index];
                disk.cursor_events.truncate(cursor_tail as usize);
                disk.cursor_durable = disk.cursor_durable.min(disk.cursor_events.len());
            }
            Effect::ShipCursors { to, cursor_from } => self.ship_cursors(replica, to, cursor_from),
            Effect::StartStateTransfer { from, .. } => {
                self.disks[index].awaiting_transfer = true;
                self.schedule(replica, STATE_TRANSFER_TICKS, DiskEvent::Transfer { from });
            }
            Effect::Quarantine { .. } => {
                self.stats.quarantines += 1;
                self.disks[index].awaiting_transfer = true;
                self.trace.record(self.now, endpoint, "quarantine", &[]);
            }
            Effect::Event(event) => match event {
                Event::ViewChangeStarted { view } => {
                    self.stats.view_changes += 1;
                    self.trace
                        .record(self.now, endpoint, "view_change", &[view.packed()]);
                }
                Event::Merged {
                    view,
                    source,
                    op,
                    dropped,
                } => {
                    let values = [view.packed(), u64::from(source), op, dropped];
                    self.trace.record(self.now, endpoint, "merged", &values);
                }
                _ => {}
            },
        }
        Ok(())
    }

    fn serve_headers(&mut self, replica: u8, to: u8, op_min: u64, op_max: u64) {
        let disk = &self.disks[usize::from(replica)];
        let headers: Vec<PrepareHeader> = disk
            .log
            .iter()
            .map(|entry| *entry.prepare.header())
            .filter(|header| {
                let op = header.op.get();
                (op_min..=op_max).contains(&op) && !disk.faulty_headers.contains(&op)
            })
            .take(strand_wire::HEADERS_PER_MESSAGE_MAX)
            .collect();
        if headers.is_empty() {
            return;
        }
        let view = self.replicas[usize::from(replica)]
            .as_ref()
            .map_or(strand_wire::ViewId::ZERO, |live| live.view());
        let header = HeadersHeader::new(CLUSTER, GROUP, view, replica);
        let message =
            Message::Headers(Msg::new(header, Bytes::copy_from_slice(headers.as_bytes())));
        let packet = Packet {
            from: u16::from(replica),
            to: u16::from(to),
            message,
        };
        self.network
            .send(self.now, packet, &mut self.prng, self.faults_on);
    }

    fn serve_prepare(&mut self, replica: u8, to: u8, op: u64, checksum: u32) {
        let disk = &self.disks[usize::from(replica)];
        if disk.faulty.contains(&op) || disk.faulty_headers.contains(&op) || op == 0 {
            return;
        }
        let Some(entry) = disk.log.get((op - 1) as usize) else {
            return;
        };
        if checksum != 0 && entry.prepare.checksum() != checksum {
            return;
        }
        let message = Message::Prepare(entry.prepare.clone());
        let packet = Packet {
            from: u16::from(replica),
            to: u16::from(to),
            message,
        };
        self.network
            .send(self.now, packet, &mut self.prng, self.faults_on);
    }

    fn ship_cursors(&mut self, replica: u8, to: u8, cursor_from: u64) {
        let disk = &self.disks[usize::from(replica)];
        let end = disk.cursor_durable.min(cursor_from as usize + 256);
        if cursor_from as usize >= end {
            return;
        }
        let events = disk.cursor_events[cursor_from as usize..end].to_vec();
        let Some(live) = self.replicas[usize::from(replica)].as_ref() else {
            return;
        };
        let mut header = CursorsHeader::new(CLUSTER, GROUP, live.view(), replica);
        header.cursor_base.set(cursor_from);
        header.event_count.set(events.len() as u32);
        let body = Bytes::from(CursorEvents { events }.to_vec());
        let packet = Packet {
            from: u16::from(replica),
            to: u16::from(to),
            message: Message::Cursors(Msg::new(header, body)),
        };
        self.network
            .send(self.now, packet, &mut self.prng, self.faults_on);
    }

    // ----- disk events -----------------------------------------------------------

    fn fsync_latency(&mut self) -> u64 {
        let spread = self.options.fsync_max_ticks - self.options.fsync_min_ticks;
        self.options.fsync_min_ticks + self.prng.below(spread + 1)
    }

    fn schedule(&mut self, replica: u8, after: u64, event: DiskEvent) {
        self.disk_sequence += 1;
        let generation = self.generation[usize::from(replica)];
        self.disk_events.insert(
            (self.now + after, self.disk_sequence),
            (replica, generation, event),
        );
    }

    /// Starts an fsync covering everything written so far, unless one runs.
    fn ensure_sync(&mut self, replica: u8) {
        let index = usize::from(replica);
        if self.sync_in_flight[index] {
            return;
        }
        self.sync_in_flight[index] = true;
        let disk = &self.disks[index];
        let event = DiskEvent::Sync {
            before: disk.write_seq,
            cursor_len: disk.cursor_events.len(),
        };
        let latency = self.fsync_latency();
        self.schedule(replica, latency, event);
    }

    fn complete_disk_events(&mut self) -> Result<(), Violation> {
        let later = self.disk_events.split_off(&(self.now + 1, 0));
        let due = std::mem::replace(&mut self.disk_events, later);
        for (_, (replica, generation, event)) in due {
            let index = usize::from(replica);
            if self.generation[index] != generation || self.replicas[index].is_none() {
                continue;
            }
            match event {
                DiskEvent::Sync { before, cursor_len } => {
                    self.complete_sync(replica, before, cursor_len)?
                }
                DiskEvent::Persist { state, sequence } => {
                    self.pending_persists[index].retain(|(_, pending)| *pending != sequence);
                    self.views.persisted(replica, &state)?;
                    self.trace.record(
                        self.now,
                        u16::from(replica),
                        "persisted",
                        &[state.view.packed(), state.log_view.packed(), state.commit],
                    );
                    self.disks[index].persist(state);
                    let mut effects = Effects::new();
                    self.live(replica)
                        .on_state_persisted(sequence, &mut effects);
                    self.execute(replica, effects)?;
                }
                DiskEvent::Transfer { from } => self.complete_transfer(replica, from)?,
            }
        }
        Ok(())
    }

    fn complete_sync(
        &mut self,
        replica: u8,
        before: u64,
        cursor_len: usize,
    ) -> Result<(), Violation> {
        let index = usize::from(replica);
        self.sync_in_flight[index] = false;
        let disk = &mut self.disks[index];
        let newly_durable: Vec<(u64, u32)> = disk
            .log
            .iter()
            .filter(|entry| !entry.durable && entry.seq <= before)
            .map(|entry| (entry.prepare.header().op.get(), entry.prepare.checksum()))
            .collect();
        let settled = disk.synced(before, cursor_len);
        let durable_head = disk.durable_head();
        self.trace.record(
            self.now,
            u16::from(replica),
            "synced",
            &[before, durable_head],
        );
        let cursor_end = disk.cursor_durable as u64;
        let more_to_sync = disk.dirty();
        let mut effects = Effects::new();
        let live = self.live(replica);
        for op in settled {
            live.on_truncated(op, &mut effects);
        }
        for (op, checksum) in newly_durable {
            live.on_write(op, checksum, WriteStage::Durable, &mut effects);
        }
        live.on_cursors_written(cursor_end, WriteStage::Durable, &mut effects);
        self.execute(replica, effects)?;
        if more_to_sync {
            self.ensure_sync(replica);
        }
        Ok(())
    }

    fn complete_transfer(&mut self, replica: u8, from: u8) -> Result<(), Violation> {
        let source = (0..self.options.replica_count)
            .map(|offset| (from + offset) % self.options.replica_count)
            .find(|candidate| {
                *candidate != replica && self.replicas[usize::from(*candidate)].is_some()
            });
        let Some(source) = source else {
            self.schedule(replica, STATE_TRANSFER_TICKS, DiskEvent::Transfer { from });
            return Ok(());
        };
        let commit = self.replicas[usize::from(source)]
            .as_ref()
            .map_or(0, |live| live.commit());
        let source_disk = &self.disks[usize::from(source)];
        let usable = source_disk.durable_head().min(commit);
        let clean_prefix = (1..=usable).all(|op| {
            !source_disk.faulty.contains(&op) && !source_disk.faulty_headers.contains(&op)
        });
        if usable == 0 || !clean_prefix {
            self.schedule(
                replica,
                STATE_TRANSFER_TICKS,
                DiskEvent::Transfer { from: source + 1 },
            );
            return Ok(());
        }
        let log: Vec<_> = source_disk.log[..usable as usize].to_vec();
        let cursor_events = source_disk.cursor_events[..source_disk.cursor_durable].to_vec();
        let head = *log.last().expect("usable > 0").prepare.header();
        let disk = &mut self.disks[usize::from(replica)];
        disk.log = log;
        disk.faulty.clear();
        disk.faulty_headers.clear();
        disk.missing.clear();
        disk.cursor_events = cursor_events;
        disk.cursor_durable = disk.cursor_events.len();
        disk.awaiting_transfer = false;
        let mut state = disk.superblock.clone().unwrap_or_default();
        state.commit = usable;
        disk.persist(state);
        let cursor_tail = disk.cursor_events.len() as u64;
        self.trace
            .record(self.now, u16::from(replica), "state_transfer", &[usable]);
        let mut effects = Effects::new();
        let live = self.live(replica);
        if live.status() == strand_consensus::Status::AwaitingStateTransfer {
            live.on_state_transfer_done(head, cursor_tail, &mut effects);
        }
        self.execute(replica, effects)
    }
}
