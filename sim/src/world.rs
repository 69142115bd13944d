//! The simulated world: replicas of one group, each the node's own
//! `strand_host::GroupHost` (the real replica over the real partition
//! storage, state transfer included) over the WAL's in-memory crash-modelling
//! disk; the network, clients, faults, checkers, and the trace. One seed,
//! one thread, one result.
//!
//! Replicas live at slots (their indexes, also their network endpoints).
//! With reassignment on, the catalog ([`crate::catalog`]) moves the group
//! between memberships of a pool of slots. Submodules: `reassign` drives
//! the catalog's side, `faults` injects faults within the durability
//! promise, `storage` owns the disks: WAL turns after an fsync latency,
//! crashes, storage faults, opening a host over a disk.

mod cursor_logs;
mod device;
mod faults;
mod io_faults;
mod liveness;
mod reads;
mod reassign;
mod stats;
mod storage;

pub use stats::Stats;

use std::collections::{BTreeMap, BTreeSet};

use strand_consensus::{ClientRequest, Event, WaitReason};
use strand_host::group_host::{GroupHost, Output};
use strand_prng::Prng;
use strand_wire::ops::{DeleteCursor, StoreCursor};
use strand_wire::{Body, CommandHeader, Message, Msg, Operation, PrepareHeader, ReplyHeader};

use crate::catalog::{Catalog, SLOT_POOL};
use crate::checkers::{
    AckedStays, CursorLogsAgree, CursorsBounded, EpochFence, LIVENESS_TICKS_MAX, LinearHistory,
    OPERATOR_PATIENCE_TICKS, Speaker, StorageAgrees, UntrustedSilent, ViewsMonotonic, Violation,
    reassign_extra_ticks,
};
use crate::client::Client;
use crate::network::{CLIENT_BASE, Network, Packet};
use crate::options::Options;
use crate::trace::Trace;
use device::Device;

const CLUSTER: u64 = 0x5157;
const GROUP: u64 = 1;
/// More messages in flight than this is a storm (every protocol message is
/// answered by a bounded number of others), reported as a violation.
const TRAFFIC_IN_FLIGHT_MAX: usize = 100_000;
/// Ticks an idle, healed group may take to go quiet (a few heartbeat
/// rounds and a repair), and that it must then stay quiet.
const QUIESCE_TICKS_MAX: u64 = 500;
/// Ticks between retention checks beside the ones a sealed segment
/// prompts (a node's `retention_check_ms`).
const RETENTION_CHECK_TICKS: u64 = 100;
/// Ticks without a store after which a primary expires a cursor (a node's
/// `cursor_retention_ms`): short enough that runs see expiries.
const CURSOR_RETENTION_TICKS: u64 = 400;
/// Ticks one state-transfer attempt may take before the session moves on
/// to the next source: its stalls at a silent source.
const STATE_TRANSFER_TICKS: u64 =
    strand_host::transfer::STALL_TICKS as u64 * strand_host::transfer::STALLS_PER_SOURCE_MAX as u64;

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

/// What the catalog does at a given tick.
#[derive(Debug, Clone, Copy)]
enum CatalogEvent {
    /// The replica at `slot` hears of the membership of `epoch`.
    Assign { slot: u8, epoch: u32 },
    /// The replica at `slot` is told it retired: `epoch` left it out.
    Retire { slot: u8, epoch: u32 },
    /// A new replica starts at `slot`, a member from `epoch` on.
    Join { slot: u8, epoch: u32 },
    /// The removed replica at `slot` is dropped for good.
    Drop { slot: u8 },
}

/// The world.
pub struct World {
    options: Options,
    prng: Prng,
    now: u64,
    /// The replica running at each slot, if up.
    hosts: Vec<Option<GroupHost<Device>>>,
    /// What each slot holds while its replica is down, and what the world
    /// knows of it.
    disks: Vec<storage::SlotDisk>,
    down_until: Vec<Option<u64>>,
    /// Counts each slot's starts: a WAL turn scheduled for an earlier run
    /// of the slot does not fire.
    generation: Vec<u64>,
    /// WAL turns due, by (tick, sequence): (slot, generation).
    turns: BTreeMap<(u64, u64), (u8, u64)>,
    /// Whether a slot has a WAL turn scheduled.
    turn_pending: Vec<bool>,
    turn_sequence: u64,
    /// What the host put out, waiting to be carried out (kept for reuse).
    outputs: Vec<Output>,
    /// Replicas that lost writes they may have acked (a crash under
    /// `replicated`, a storage fault), and the log head they had: at most
    /// W - 1 may be in this state at once (the durability promise); they
    /// leave it once trusted, Normal, repaired and back to that head.
    damaged: BTreeMap<u8, u64>,
    network: Network,
    clients: Vec<Client>,
    faults_on: bool,
    storage_faulted: BTreeSet<u8>,
    history: LinearHistory,
    acked: AckedStays,
    views: ViewsMonotonic,
    trust: UntrustedSilent,
    cursors: CursorsBounded,
    cursor_logs: CursorLogsAgree,
    fence: EpochFence,
    storage: StorageAgrees,
    /// Checker 11's finding at an open, reported at the next step.
    opened_violation: Option<Violation>,
    /// The metadata plane's memberships of the group.
    catalog: Catalog,
    /// Catalog actions by (tick, sequence).
    catalog_events: BTreeMap<(u64, u64), CatalogEvent>,
    catalog_sequence: u64,
    /// Node-level liveness between the slots.
    liveness: liveness::Liveness,
    /// A group that does not go quiet is a violation, not a count.
    quiet_strict: bool,
    stats: Stats,
    trace: Trace,
}

impl World {
    /// A world for `options`, with every replica started fresh.
    pub fn new(options: Options, trace_lines: usize) -> World {
        let slot_count = if options.reassigns() {
            SLOT_POOL
        } else {
            options.replica_count
        };
        let count = usize::from(slot_count);
        let initial =
            strand_consensus::epoch::Membership::initial(options.replica_count, options.confirm);
        let clients = (0..options.clients)
            .map(|index| {
                Client::new(
                    index,
                    options.seed,
                    options.client_in_flight,
                    initial.slots.iter().collect(),
                )
            })
            .collect();
        let mut world = World {
            prng: Prng::new(options.seed),
            now: 0,
            hosts: (0..count).map(|_| None).collect(),
            disks: (0..count).map(|_| storage::SlotDisk::default()).collect(),
            down_until: vec![None; count],
            generation: vec![0; count],
            turns: BTreeMap::new(),
            turn_pending: vec![false; count],
            turn_sequence: 0,
            outputs: Vec::new(),
            damaged: BTreeMap::new(),
            network: Network::new(&options),
            clients,
            faults_on: true,
            storage_faulted: BTreeSet::new(),
            history: LinearHistory::default(),
            acked: AckedStays::default(),
            views: ViewsMonotonic::new(slot_count),
            trust: UntrustedSilent,
            cursors: CursorsBounded,
            cursor_logs: CursorLogsAgree::default(),
            fence: EpochFence,
            storage: StorageAgrees,
            opened_violation: None,
            catalog: Catalog::new(initial),
            catalog_events: BTreeMap::new(),
            catalog_sequence: 0,
            liveness: liveness::Liveness::new(count),
            // Reassigning runs count the group not going quiet rather than
            // fail on it while their known cases are open (see `not_quiet`).
            quiet_strict: !options.reassigns()
                || std::env::var_os("STRAND_SIM_QUIET_STRICT").is_some(),
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
        self.finish(result)
    }

    /// The outcome of a run that ended with `result` (the first violation,
    /// if any), and its trace.
    pub fn finish(mut self, result: Result<(), Violation>) -> (Outcome, Trace) {
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

    /// Runs the faulty phase, then the quiet phase; stops at the first violation.
    pub fn run_phases(&mut self) -> Result<(), Violation> {
        while self.now < self.options.ticks {
            self.step()?;
        }
        // Quiet phase: faults stop, everyone comes back, everything heals.
        self.faults_on = false;
        self.network.heal();
        self.call_off_power_losses();
        for replica in self.slots() {
            let index = usize::from(replica);
            if self.hosts[index].is_none() && self.disks[index].created {
                self.start(replica);
            }
        }
        let quiet_start = self.now;
        let liveness_ticks_max = self.liveness_ticks_max();
        while self.clients.iter().any(|client| !client.pending.is_empty()) {
            if self.now - quiet_start > liveness_ticks_max {
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
                        liveness_ticks_max,
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
        self.acked.all_present(&self.history)?;
        self.goes_quiet()
    }

    /// An idle, healed group goes quiet: within [`QUIESCE_TICKS_MAX`] every
    /// running replica that has not retired stops its timers, and it stays
    /// quiet as long as no replica stops or starts (a power loss scheduled
    /// before the faults stopped may still strike, and what follows a crash
    /// rightly wakes the group: the window then starts again).
    fn goes_quiet(&mut self) -> Result<(), Violation> {
        let mut lives = self.lives();
        let mut since = self.now;
        let mut quiet_since: Option<u64> = None;
        loop {
            if self.lives() != lives {
                lives = self.lives();
                since = self.now;
                quiet_since = None;
            }
            match (self.all_quiet(), quiet_since) {
                (true, None) => quiet_since = Some(self.now),
                (true, Some(start)) if self.now - start >= QUIESCE_TICKS_MAX => return Ok(()),
                (true, Some(_)) => {}
                (false, Some(_)) => {
                    return self.not_quiet("a quiet, idle group woke up");
                }
                (false, None) if self.now - since > QUIESCE_TICKS_MAX => {
                    return self.not_quiet("idle and healed, not quiet");
                }
                (false, None) => {}
            }
            self.step()?;
        }
    }

    /// Counts a run that did not go quiet; a violation unless the run
    /// reassigns (`STRAND_SIM_QUIET_STRICT` makes it one there too, to
    /// replay one).
    fn not_quiet(&mut self, what: &str) -> Result<(), Violation> {
        self.stats.not_quiet += 1;
        self.trace.record(self.now, 0, "not_quiet", &[]);
        if !self.quiet_strict {
            return Ok(());
        }
        Err(Violation {
            checker: "8 quiescence",
            detail: format!("{what}: {}", self.describe_replicas()),
        })
    }

    /// Which slots run, and how often each has started.
    fn lives(&self) -> Vec<(bool, u64)> {
        self.hosts
            .iter()
            .zip(&self.generation)
            .map(|(host, generation)| (host.is_some(), *generation))
            .collect()
    }

    /// Whether every running member of the catalog's newest membership is
    /// quiet (a removed copy waits to be told it retired; it has no group
    /// to be quiet with).
    fn all_quiet(&self) -> bool {
        let members = self.catalog.newest().slots;
        self.hosts
            .iter()
            .enumerate()
            .all(|(slot, host)| match host {
                Some(host) => !members.contains(slot as u8) || host.quiet(),
                None => true,
            })
    }

    /// The liveness bound of this run (see the liveness checker).
    fn liveness_ticks_max(&self) -> u64 {
        if self.options.reassigns() {
            LIVENESS_TICKS_MAX
                + reassign_extra_ticks(self.options.catalog_lag_max_ticks, STATE_TRANSFER_TICKS)
        } else {
            LIVENESS_TICKS_MAX
        }
    }

    /// The slots replicas may occupy, ascending.
    fn slots(&self) -> std::ops::Range<u8> {
        0..self.hosts.len() as u8
    }

    /// The slots whose replica exists (up or down), ascending.
    fn existing_slots(&self) -> Vec<u8> {
        self.slots()
            .filter(|slot| self.disks[usize::from(*slot)].created)
            .collect()
    }

    /// The operator's `accept-loss` on a group stuck with `attention`
    /// raised: on the first current member whose attention names a wait an
    /// operator can lift (never a pending state transfer).
    fn operator_accepts_loss(&mut self) -> Result<(), Violation> {
        let members = self.catalog.newest().slots;
        let stuck = self.hosts.iter().enumerate().position(|(slot, host)| {
            members.contains(slot as u8)
                && host.as_ref().is_some_and(|host| {
                    host.progress()
                        .attention
                        .is_some_and(|(reason, _)| reason != WaitReason::AwaitingStateTransfer)
                })
        });
        let Some(index) = stuck else {
            return Ok(());
        };
        let replica = index as u8;
        let mut accepted = false;
        self.run_host(replica, |host, _| accepted = host.accept_loss())?;
        if accepted {
            self.stats.accepted_losses += 1;
            self.trace
                .record(self.now, u16::from(replica), "accept_loss", &[]);
        }
        Ok(())
    }

    fn describe_replicas(&self) -> String {
        let newest = self.catalog.newest();
        let mut out = format!(
            "catalog: epoch {} slots {:?} W {} (started {}); ",
            newest.epoch,
            newest.slots.iter().collect::<Vec<_>>(),
            newest.rule().write,
            self.catalog.started()
        );
        for (index, host) in self.hosts.iter().enumerate() {
            let disk = &self.disks[index];
            if host.is_none() && !disk.created {
                continue;
            }
            let slot_state = format!(
                "joined {} retired {:?}",
                disk.joined_epoch, disk.retired_epoch
            );
            match host {
                Some(host) => {
                    let replica = host.inspect_replica();
                    let starts = &replica.durable_state().history_starts;
                    let latest: Vec<_> = starts[starts.len().saturating_sub(2)..]
                        .iter()
                        .map(|start| (start.view.to_string(), start.op))
                        .collect();
                    let partition = host.inspect_partition().expect("open");
                    out.push_str(&format!(
                        "[{index}: {}{} view {} log_view {} op {} commit {} trusted {} attention {:?} latest starts {latest:?} disk {}/{} faulty {:?} {slot_state}] ",
                        replica.status().name(),
                        if host.quiet() { " quiet" } else { "" },
                        replica.view(),
                        replica.log_view(),
                        replica.op(),
                        replica.commit(),
                        replica.trusted(),
                        replica.attention(),
                        partition.durable_op(),
                        partition.op(),
                        partition.faulty(),
                    ))
                }
                None => out.push_str(&format!("[{index}: down {slot_state}] ")),
            }
        }
        out
    }

    /// Ticks `replica`'s host if the tick is due, as a server shard does
    /// (`strand_host::ticks`); a tick it says is not due is skipped, which
    /// the replica checks (no timer may fire on it).
    fn tick_if_due(&mut self, replica: u8) -> Result<(), Violation> {
        let Some(host) = self.hosts[usize::from(replica)].as_mut() else {
            return Ok(());
        };
        match host.ticks_until_due() {
            Some(1) => self.run_host(replica, |host, out| host.on_tick(out)),
            _ => {
                host.skip_ticks(1);
                Ok(())
            }
        }
    }

    /// One tick of the world.
    fn step(&mut self) -> Result<(), Violation> {
        self.now += 1;
        if self.faults_on {
            self.inject_faults()?;
            self.maybe_hand_over()?;
        }
        self.catalog_step()?;
        self.restart_due()?;
        self.reopen_due();
        if let Some(violation) = self.opened_violation.take() {
            return Err(violation);
        }
        for packet in self.network.due(self.now) {
            self.deliver(packet)?;
        }
        self.send_liveness_pings();
        self.report_liveness()?;
        self.run_due_turns()?;
        for replica in self.slots() {
            self.tick_if_due(replica)?;
            self.check_storage(replica)?;
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
        for replica in self.slots() {
            if let Some(host) = &self.hosts[usize::from(replica)] {
                let live = host.inspect_replica();
                self.trust.status(replica, live)?;
                let partition = host.inspect_partition().expect("open");
                if !partition.superblock_writing() {
                    let durable = &partition.superblock().durable;
                    self.views
                        .persisted(replica, durable.view, durable.log_view)?;
                }
                self.views.running(replica, live.view(), live.log_view())?;
                self.check_cursors(replica)?;
                self.check_cursor_logs(replica)?;
                self.check_reads(replica)?;
            }
        }
        Ok(())
    }

    // ----- replicas ------------------------------------------------------------

    fn restart_due(&mut self) -> Result<(), Violation> {
        for replica in self.slots() {
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
        if self.hosts[usize::from(replica)].is_none() {
            return Ok(());
        }
        let now = self.now;
        match packet.message {
            Message::Ping(_) if packet.from < CLIENT_BASE => {
                self.liveness.heard(replica, packet.from as u8, now);
                Ok(())
            }
            Message::Request(request) => {
                self.run_host(replica, |host, _| client_request(host, request, now))
            }
            message => self.run_host(replica, |host, out| host.on_message(message, out)),
        }
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
                &[ack.op, ack.offset_base],
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
        self.post(CLIENT_BASE + index as u16, to, Message::Request(frame));
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

    // ----- hosts -----------------------------------------------------------------

    /// Feeds the host at `replica` through `input`, settles it, and carries
    /// out what it put out; then makes sure a WAL turn comes for whatever
    /// its disk was asked to do.
    fn run_host(
        &mut self,
        replica: u8,
        input: impl FnOnce(&mut GroupHost<Device>, &mut Vec<Output>),
    ) -> Result<(), Violation> {
        let mut outputs = std::mem::take(&mut self.outputs);
        let read_fault = self.arm_read_fault(replica);
        let host = self.hosts[usize::from(replica)]
            .as_mut()
            .expect("inputs go to a live replica");
        input(host, &mut outputs);
        host.settle(&mut outputs);
        host.inspect_replica().assert_invariants();
        self.disarm_read_fault(replica, read_fault);
        if self.power_lost(replica) && self.power_loss_strikes(replica) {
            // The process died at the power loss: what it put out since
            // never left it (dropped, as a lossy network may).
            outputs.clear();
            self.outputs = outputs;
            return Ok(());
        }
        let mut result = self.storage_settled(replica);
        for output in outputs.drain(..) {
            if result.is_ok() {
                result = self.on_output(replica, output);
            }
        }
        self.outputs = outputs;
        self.schedule_turn(replica);
        result
    }

    /// Applies the retention limit as a node does: once a segment was
    /// sealed, and on its periodic check, which also expires idle cursors
    /// during the faulty phase (by the ticks clock the stores were stamped
    /// with) and compacts the
    /// cursor log (the sim has no age limit; its clock starts at 0).
    fn check_storage(&mut self, replica: u8) -> Result<(), Violation> {
        let Some(host) = self.hosts[usize::from(replica)].as_ref() else {
            return Ok(());
        };
        let checked = self.now % RETENTION_CHECK_TICKS == 0;
        if !checked && !host.retention_due() {
            return Ok(());
        }
        let mut removed = 0;
        // Expiry is work of its own (tombstones to ship): only while faults
        // run, so that the quiet phase's groups stay idle.
        let (now, expiring) = (self.now, self.faults_on);
        self.run_host(replica, |host, _| {
            removed = host.retain(0);
            if checked {
                if expiring {
                    host.expire_cursors(now, CURSOR_RETENTION_TICKS, &|_| false);
                }
                host.compact_cursors();
            }
        })?;
        self.stats.retained_segments += removed as u64;
        Ok(())
    }

    /// A frame the host at `replica` sends, under checkers 4 and 8, onto
    /// the network.
    fn on_send(&mut self, replica: u8, to: u8, message: Message) -> Result<(), Violation> {
        let index = usize::from(replica);
        let live = self.hosts[index].as_ref().expect("live").inspect_replica();
        self.trust.send(replica, live, message.command())?;
        let speaker = Speaker {
            slot: replica,
            joined: self.disks[index].joined_epoch,
            retired: self.disks[index].retired_epoch.is_some()
                || live.status() == strand_consensus::Status::Retired,
            view: live.view(),
            serving_primary: live.is_serving_primary(),
        };
        self.fence.send(speaker, &message, &self.catalog)?;
        self.trace.record(
            self.now,
            u16::from(replica),
            "send",
            &[
                u64::from(to),
                message.command() as u64,
                u64::from(message.prefix().checksum.get()),
            ],
        );
        self.post(u16::from(replica), u16::from(to), message);
        Ok(())
    }

    /// A reply the host at `endpoint` sends to its client (a producer, or
    /// the same client's cursor half).
    fn on_reply_out(&mut self, endpoint: u16, reply: Msg<ReplyHeader>) {
        let client = reply.header().client.get();
        let cursor_client = client ^ (1 << 100);
        let target = self
            .clients
            .iter()
            .position(|candidate| candidate.id == client || candidate.id == cursor_client);
        if let Some(target) = target {
            self.post(endpoint, CLIENT_BASE + target as u16, Message::Reply(reply));
        }
    }

    /// An op the host at `replica` committed, under checkers 1 and 2.
    fn on_committed(&mut self, replica: u8, header: &PrepareHeader) -> Result<(), Violation> {
        self.trace.record(
            self.now,
            u16::from(replica),
            "commit",
            &[header.op.get(), u64::from(header.checksum())],
        );
        // An acked op replaced is the loss checker 2 exists for: check it
        // before the history (checker 1) reports the same event.
        let committed = crate::checkers::CommittedOp::of(header);
        self.acked.committed(header.op.get(), &committed)?;
        self.history.commit(replica, header)?;
        self.catalog.note_committed(header.membership_epoch.get());
        Ok(())
    }

    /// Carries out one output of the host at `replica`, under the checkers.
    fn on_output(&mut self, replica: u8, output: Output) -> Result<(), Violation> {
        let endpoint = u16::from(replica);
        match output {
            Output::Send { to, message } => self.on_send(replica, to, message)?,
            Output::Reply(reply) => self.on_reply_out(endpoint, reply),
            Output::Committed { header } => self.on_committed(replica, &header)?,
            Output::WriteStage { op, durable } => {
                let stage = if durable { "durable" } else { "write" };
                self.trace.record(self.now, endpoint, stage, &[op]);
            }
            Output::Quarantined { agreed_op } => {
                self.stats.quarantines += 1;
                self.trace
                    .record(self.now, endpoint, "quarantine", &[agreed_op]);
            }
            Output::TransferInstalled { op } => {
                self.stats.transfers += 1;
                self.trace
                    .record(self.now, endpoint, "state_transfer", &[op]);
            }
            Output::Stop => {
                return Err(Violation {
                    checker: "0 no panic",
                    detail: format!(
                        "replica {replica}'s storage failed and could not be reopened; {}",
                        self.describe_replicas()
                    ),
                });
            }
            Output::Event(event) => self.on_event(replica, event),
        }
        Ok(())
    }

    fn on_event(&mut self, replica: u8, event: Event) {
        let endpoint = u16::from(replica);
        match event {
            Event::ViewChangeStarted { view } => {
                self.stats.view_changes += 1;
                self.trace
                    .record(self.now, endpoint, "view_change", &[view.packed()]);
            }
            Event::HandingOver { to, view } => {
                self.stats.handovers += 1;
                self.trace.record(
                    self.now,
                    endpoint,
                    "hand_over",
                    &[u64::from(to), view.packed()],
                );
            }
            Event::VotedToLeaveView { .. } => {}
            Event::HandoverCalledOff { to } => {
                self.trace
                    .record(self.now, endpoint, "handover_off", &[u64::from(to)]);
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
            Event::EpochStarted { epoch } => self.epoch_started(replica, epoch),
            Event::Retired { epoch } => self.retired(replica, epoch),
            Event::BehindLogStart { from, log_start } => {
                self.stats.behind_log_start += 1;
                let values = [u64::from(from), log_start];
                self.trace
                    .record(self.now, endpoint, "behind_log_start", &values);
            }
            Event::Reconfiguring { op, epoch } => {
                let values = [op, u64::from(epoch)];
                self.trace
                    .record(self.now, endpoint, "reconfiguring", &values);
            }
            _ => {}
        }
    }

    /// Checker 6 over what the replica's partition holds: every cursor it
    /// stored is within the committed history (checked when its cursor log
    /// grew).
    fn check_cursors(&mut self, replica: u8) -> Result<(), Violation> {
        let index = usize::from(replica);
        let host = self.hosts[index].as_ref().expect("live");
        let tail = host.inspect_partition().expect("open").cursor_tail();
        if tail == self.disks[index].cursor_tail_checked {
            return Ok(());
        }
        self.disks[index].cursor_tail_checked = tail;
        for (consumer, offset) in host.inspect_partition().expect("open").cursors() {
            self.cursors
                .stored(replica, consumer, *offset, &self.history)?;
        }
        Ok(())
    }
}

/// A client's request, as the node's client port hands it to the group.
fn client_request(
    host: &mut GroupHost<Device>,
    request: Msg<strand_wire::RequestHeader>,
    now: u64,
) {
    let mut header = *request.header();
    header.prefix.cluster.set(CLUSTER);
    header.prefix.group.set(GROUP);
    let body = request.body().clone();
    let request = Msg::new(header, body.clone());
    if header.operation() == Operation::StoreCursor {
        let Ok(cursor) = StoreCursor::from_bytes(&body) else {
            return;
        };
        host.store_cursor(&request, cursor, now);
    } else if header.operation() == Operation::DeleteCursor {
        let Ok(delete) = DeleteCursor::from_bytes(&body) else {
            return;
        };
        host.delete_cursor(&request, delete);
    } else {
        let record_count = strand_wire::RecordBatch::from_bytes(body)
            .map(|batch| batch.record_count())
            .unwrap_or(0);
        host.submit(ClientRequest {
            request,
            record_count,
            timestamp_ns: now,
        });
    }
}
