//! A group's actor: the state around the group's
//! `strand_host::group_host::GroupHost` (the replica over its partition,
//! where every effect is carried out and storage completions go back to the
//! replica), hosted on one of the node's shards (`crate::runtime::shard`). The shard
//! hands it inputs in order (peer frames, client requests, storage
//! wakeups, ticks); the actor hands them to the replica, settles the host,
//! and carries out its outputs: frames to the bus, replies to clients,
//! commits to waiting readers and the catalog, events to metrics.
//!
//! Bounds: at most [`PARKED_FETCHES_MAX`] long polls wait per group (more
//! are answered at once, empty); the inbox is the shard's; a partition keeps
//! cursors for at most the node's `cursor_consumers_per_partition_max`
//! consumer names (`cursors`).

pub mod attention;
mod cursors;
mod log_span;
pub mod spec;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use strand_consensus::{ClientRequest, Config, Event, Status, Timeouts, WaitReason};
use strand_partition::{FileDisk, LogConfig, PartitionConfig, ReadHandles, RetentionPolicy};
use strand_wal::Wal;
use strand_wire::ops::{
    AcceptLossReply, AttentionEntry, ConsumerHeartbeat, CreateTopic, ErrorBody, FETCH_WAIT_MS_MAX,
    FetchReply, FetchRequest, GetCursor, GetCursorReply, GroupStatus, OffsetForTime,
    OffsetForTimeReply, PRODUCE_BATCH_BYTES_MAX, ReplicaStatus,
};
use strand_wire::{Body, Message, Msg, Operation, RecordBatch, RequestHeader, ResultCode, Route};
use tokio::sync::mpsc::UnboundedSender;
use zerocopy::IntoBytes;

use crate::group::attention::{Waiting, storage_failed_attention, waiting_entry};
use crate::group::spec::GroupSpec;
use crate::metadata::hosted::Hosted;
use crate::metrics;
use crate::net::outbox::Outbox;
use crate::net::replies::{error_frame, frame_of, reply_frame, with_redirect};
use crate::runtime::inbox::GroupInbox;
use crate::runtime::input::Input;
use crate::shared::{GroupView, Shared};
use strand_host::catalog::Assignment;
use strand_host::group_host::{GroupHost, HostSpec, OpenError, Output, Progress};

/// Long polls that may wait per group.
pub const PARKED_FETCHES_MAX: usize = 1024;

/// Most batch bytes a fetch reply carries past its first batch: what fits
/// a frame of the size a client takes by default, with the reply's header
/// and head.
pub const FETCH_BYTES_MAX: u64 = PRODUCE_BATCH_BYTES_MAX as u64;

/// Produce latencies tracked at once (beyond, the oldest are forgotten).
const LATENCIES_TRACKED_MAX: usize = 4096;

/// A busy group republishes its progress (ops, commit, acks, offsets) once
/// in this many ticks (100 ms at the default 10 ms tick); a change of its
/// [`StatusShape`] is published at the next tick. Publishing builds the
/// whole status and takes the node's views lock: done every tick by a
/// thousand busy groups, it cost a fifth of their shards' time.
const PUBLISH_PROGRESS_TICKS: u32 = 10;

/// What of a group's published status other threads act on at once
/// (routing, produce admission, attention): a change is never held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StatusShape {
    view: u32,
    log_view: u32,
    status: Status,
    primary: u8,
    trusted: bool,
    attention: Option<(WaitReason, u32)>,
    storage_failed: bool,
}

/// A long poll waiting for records to commit.
struct ParkedFetch {
    request: RequestHeader,
    fetch: FetchRequest,
    deadline: Instant,
}

/// The actor's state. See the module docs.
pub struct Actor {
    shared: Arc<Shared>,
    spec: GroupSpec,
    /// The replica over its partition; every effect runs there.
    host: GroupHost<FileDisk>,
    /// What the host put out, waiting to be carried out (kept for reuse).
    outputs: Vec<Output>,
    /// Ops committed since the last settle ended: what follows a commit
    /// (the catalog published and handed over, parked fetches served) runs
    /// once per settle, not once per op. A metadata replica applying a
    /// hundred catalog ops after a restart otherwise cloned and scanned a
    /// catalog of 10,000 partitions a hundred times in one shard turn,
    /// silent for seconds to its peers.
    committed_unhandled: bool,
    /// Its shard's frames to peers this turn: a frame joins its peer's
    /// batch, and the shard hands each batch on once per turn.
    outbox: Arc<Mutex<Outbox>>,
    parked: VecDeque<ParkedFetch>,
    /// The node's WAL writer, kept to open the group again.
    wal: Wal,
    hosted: Option<UnboundedSender<Hosted>>,
    /// The metadata plane: what was last handed to the node, by group.
    hosted_sent: BTreeMap<u64, Assignment>,
    /// The metadata plane: the catalog's deletion mark the node last heard
    /// of in a `Hosted::CatalogLoaded`.
    catalog_announced: Option<(u64, usize)>,
    /// The newest epoch this actor asked the node to report as started.
    epoch_reported: u32,
    produce_started: BTreeMap<(u128, u64), Instant>,
    write_queued: BTreeMap<u64, Instant>,
    untrusted_reported: bool,
    stopping: bool,
    label: String,
    /// The commit-op gauge of this group (looked up once: a lookup by label
    /// allocates).
    commit_gauge: ::metrics::Gauge,
    /// The shape of the status last published, and ticks since.
    published_shape: Option<StatusShape>,
    ticks_unpublished: u32,
}

impl Actor {
    /// Opens the group's storage and its host. `hosted` receives, from the
    /// metadata plane's actor only, every partition assignment this node
    /// hosts.
    pub fn open(
        shared: Arc<Shared>,
        wal: Wal,
        spec: GroupSpec,
        inbox: GroupInbox,
        outbox: Arc<Mutex<Outbox>>,
        hosted: Option<UnboundedSender<Hosted>>,
    ) -> Result<Actor, OpenError> {
        let me = shared.config.node;
        let Some(replica) = spec.slot_of(me) else {
            return Err(OpenError::NotPlaced(format!(
                "node {me} holds no slot of group {}",
                spec.group
            )));
        };
        adopt_legacy_dir(&spec, &shared.config.data_dir)?;
        let host_spec = HostSpec {
            replica: Config {
                cluster: shared.config.cluster,
                group: spec.group,
                replica,
                memberships: spec.memberships.clone(),
                durability: spec.durability,
                cursor_durability: spec.cursor_durability,
                timeouts: Timeouts::default(),
                seed: spec.group ^ (u64::from(me) << 32),
            },
            confirm: spec.confirm,
            dir: spec.dir.clone(),
            catalog_nodes: (spec.group == 0)
                .then(|| spec.slots.iter().flatten().copied().collect()),
            storage: partition_config(&spec, shared.boot),
            retention: spec.retention,
        };
        let read_handles = shared.read_handles.clone();
        let disk = disk_for(&wal, &read_handles, &inbox);
        let reopen_wal = wal.clone();
        let (host, recovery) = GroupHost::open(
            &host_spec,
            disk,
            Box::new(move || disk_for(&reopen_wal, &read_handles, &inbox)),
        )?;
        metrics::storage_found(&recovery);
        let mut host = host;
        host.set_cursor_consumers_max(shared.config.cursor_consumers_per_partition_max);
        if let Some(catalog) = host.catalog() {
            shared.publish_catalog(catalog.clone());
        }
        let label = spec.group.to_string();
        Ok(Actor {
            shared,
            spec,
            wal,
            host,
            outputs: Vec::new(),
            committed_unhandled: false,
            outbox,
            parked: VecDeque::new(),
            hosted,
            hosted_sent: BTreeMap::new(),
            catalog_announced: None,
            epoch_reported: 0,
            produce_started: BTreeMap::new(),
            write_queued: BTreeMap::new(),
            untrusted_reported: false,
            stopping: false,
            commit_gauge: metrics::commit_op_gauge(&label),
            label,
            published_shape: None,
            ticks_unpublished: 0,
        })
    }

    // ----- the shard's calls -----------------------------------------------------

    /// Starts the replica (its first timers and probes), tells it which
    /// peer nodes are suspected right now, and publishes.
    pub fn start(&mut self) {
        self.host.start();
        for node in self.shared.suspected_nodes() {
            self.on_peer_liveness(node, false);
        }
        for node in self
            .spec
            .slots
            .iter()
            .flatten()
            .copied()
            .collect::<Vec<_>>()
        {
            if !self.shared.vouching.peer_vouches(node, self.spec.group) {
                self.on_peer_liveness(node, false);
            }
        }
        self.after_inputs();
        self.hand_over_hosted();
        self.publish();
    }

    /// One tick of the node's clock (only while [`Actor::needs_ticks`]).
    pub fn on_tick(&mut self) {
        self.host.on_tick(&mut self.outputs);
        self.expire_parked();
        self.ticks_unpublished += 1;
        if self.ticks_unpublished >= PUBLISH_PROGRESS_TICKS
            || self.published_shape != Some(self.status_shape())
        {
            self.publish();
        }
    }

    /// The part of the group's status that is published without delay.
    fn status_shape(&self) -> StatusShape {
        let progress = self.host.progress();
        StatusShape {
            view: progress.view.view,
            log_view: progress.log_view.view,
            status: progress.status,
            primary: progress.primary,
            trusted: progress.trusted,
            attention: progress.attention,
            storage_failed: self.host.storage_failure().is_some(),
        }
    }

    /// Ticks until the next one that may do anything here, counting that
    /// one (see `strand_host::ticks`): the host's next timeout; every tick
    /// while long polls wait for their deadlines, a stop is under way or a
    /// new status shape is unpublished; and, while the group is awake, its
    /// progress is published every [`PUBLISH_PROGRESS_TICKS`]. `None`: the
    /// group is quiet, and costs its shard nothing until its next input.
    pub fn ticks_until_due(&self) -> Option<u64> {
        if !self.parked.is_empty()
            || self.stopping
            || self.published_shape != Some(self.status_shape())
        {
            return Some(1);
        }
        let host = self.host.ticks_until_due()?;
        let publish = PUBLISH_PROGRESS_TICKS.saturating_sub(self.ticks_unpublished);
        Some(host.min(u64::from(publish)).max(1))
    }

    /// `ticks` ticks passed in which none was due (see
    /// [`Actor::ticks_until_due`]); the shard tells the group before its
    /// next tick or input.
    pub fn skip_ticks(&mut self, ticks: u64) {
        if ticks == 0 {
            return;
        }
        self.host.skip_ticks(ticks);
        let ticks = u32::try_from(ticks).unwrap_or(u32::MAX);
        self.ticks_unpublished = self.ticks_unpublished.saturating_add(ticks);
    }

    /// The node-level liveness of peer `node` changed: every replica slot
    /// of this group on that node is told.
    pub fn on_peer_liveness(&mut self, node: u32, alive: bool) {
        let alive = alive && self.shared.vouching.peer_vouches(node, self.spec.group);
        for slot in 0..self.spec.slots.len() {
            let slot = slot as u8;
            if self.spec.node_at(slot) == Some(node) {
                self.host.on_peer_liveness(slot, alive);
            }
        }
    }

    /// Whether this node's replica serves as the group's primary.
    pub fn leading(&self) -> bool {
        self.host.is_serving_primary()
    }

    /// The node of the group's preferred primary while this replica leads
    /// in its place (after a failover).
    pub fn leads_in_place_of(&self) -> Option<u32> {
        self.host
            .leads_in_place_of_preferred()
            .and_then(|slot| self.spec.node_at(slot))
    }

    /// Hands the primary role back to the preferred primary if the replica
    /// may now; the shard settles the group afterwards.
    pub fn hand_over_to_preferred(&mut self) -> bool {
        self.host.hand_over_to_preferred()
    }

    /// Whether the actor is done (told to stop, or its storage failed for
    /// good): the shard closes it.
    pub fn stopping(&self) -> bool {
        self.stopping
    }

    /// Polls storage and runs effects until both are quiet.
    pub fn after_inputs(&mut self) {
        self.settle_host();
        self.report_epoch_started();
        if self.host.retention_due() {
            self.apply_retention();
            // Retention may have told consensus where the log starts, or
            // asked it to persist its commit early.
            self.settle_host();
        }
    }

    /// Runs the host's effects and carries out its outputs until both are
    /// quiet.
    fn settle_host(&mut self) {
        // One buffer for the actor's life: no allocation per turn.
        let mut outputs = std::mem::take(&mut self.outputs);
        loop {
            self.host.settle(&mut outputs);
            if outputs.is_empty() {
                break;
            }
            for output in outputs.drain(..) {
                self.on_output(output);
            }
        }
        self.outputs = outputs;
        if std::mem::take(&mut self.committed_unhandled) {
            self.on_commit();
        }
    }

    /// Applies the retention policy now (the shard's age sweep, or a
    /// segment sealed under a size limit).
    pub fn apply_retention(&mut self) {
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64);
        let removed = self.host.retain(now_ns);
        if removed > 0 {
            metrics::retention_removed(removed);
            tracing::info!(
                group = self.spec.group,
                segments = removed,
                log_start_offset = self.host.log_start_offset(),
                "group: retention removed segments"
            );
        }
    }

    /// The shard's periodic storage check: age limits (for groups that
    /// keep a limited history), the commit number persisted if a quiet
    /// replica left it behind, idle cursors expired, and cursor-log
    /// compaction (for all).
    pub fn check_storage(&mut self) {
        if self.spec.retention != RetentionPolicy::default() {
            self.apply_retention();
        }
        self.host.persist_commit_if_behind();
        self.expire_cursors();
        self.settle_host();
        let frames = self.host.compact_cursors();
        if frames > 0 {
            tracing::info!(
                group = self.spec.group,
                frames,
                "group: cursor log compacted"
            );
        }
        self.compact_catalog();
    }

    /// The metadata plane's log compaction (see
    /// `strand_host::group_host::CatalogCompaction`); nothing for a
    /// partition.
    fn compact_catalog(&mut self) {
        let ops_between = self.shared.config.metadata_snapshot_ops;
        if let Some(done) = self.host.compact_catalog(ops_between) {
            metrics::catalog_compacted(done.image_bytes, done.segments_removed);
            tracing::info!(
                snapshot_op = done.snapshot_op,
                image_bytes = done.image_bytes,
                segments_removed = done.segments_removed,
                log_start_op = done.log_start_op,
                "group: metadata log compacted"
            );
        }
        self.settle_host();
    }

    /// Carries out what the host put out.
    fn on_output(&mut self, output: Output) {
        match output {
            Output::Send { to, message } => self.send_to_replica(to, message),
            Output::Reply(reply) => {
                // A client told its op committed finds the catalog and the
                // reads it made possible already published.
                if std::mem::take(&mut self.committed_unhandled) {
                    self.on_commit();
                }
                self.reply(reply)
            }
            Output::Committed { .. } => self.committed_unhandled = true,
            Output::Event(event) => self.on_event(event),
            Output::WriteStage { op, durable: false } => {
                if self.write_queued.len() < LATENCIES_TRACKED_MAX {
                    self.write_queued.insert(op, Instant::now());
                }
            }
            Output::WriteStage { op, durable: true } => {
                if let Some(queued) = self.write_queued.remove(&op) {
                    metrics::write_durable(queued.elapsed());
                }
            }
            Output::Quarantined { agreed_op } => {
                let _span = self.span().entered();
                tracing::warn!(
                    agreed_op,
                    "group: partition quarantined; a transfer follows"
                );
            }
            Output::TransferInstalled { op } => {
                let _span = self.span().entered();
                tracing::info!(op, "group: state transfer installed");
                metrics::state_transfer_installed(&self.label);
                // The metadata plane's catalog was rebuilt from the transfer.
                self.committed_unhandled = true;
            }
            Output::Stop => self.stopping = true,
        }
    }

    /// One input from the shard's inbox.
    pub fn on_input(&mut self, input: Input) {
        match input {
            Input::Peer(message) => self.host.on_message(message, &mut self.outputs),
            Input::Request(request) => self.on_request(request),
            Input::AcceptLoss(request) => self.on_accept_loss(&request),
            Input::Storage => {}
            // Sent through the shard's control queue, which no full inbox
            // loses.
            Input::Placement => self.take_placement(),
            Input::Shutdown => self.stopping = true,
            Input::PeerVouch { node, vouches } => {
                let alive = vouches && !self.shared.suspected_nodes().contains(&node);
                self.on_peer_liveness(node, alive);
            }
            #[cfg(feature = "fault-injection")]
            Input::InjectPanic => panic!("injected panic in group {}", self.spec.group),
        }
    }

    /// What opening the group again takes (its spec, the WAL writer and,
    /// for the metadata plane, the node's channel), copied.
    pub fn parts(&self) -> (GroupSpec, Wal, Option<UnboundedSender<Hosted>>) {
        (self.spec.clone(), self.wal.clone(), self.hosted.clone())
    }

    /// Drops the group without closing it cleanly (no clean mark: its
    /// state in memory may be broken, after a panic), and hands back what
    /// opening it again from disk takes, as after a crash of the node.
    pub fn abandon(self) -> (GroupSpec, Wal, Option<UnboundedSender<Hosted>>) {
        if self.untrusted_reported {
            metrics::untrusted_log(false);
        }
        (self.spec, self.wal, self.hosted)
    }

    /// Whether this group's storage failed here (a write found the disk
    /// full, or failed): it serves nothing until opened again.
    pub fn storage_failed(&self) -> bool {
        self.host.storage_failed()
    }

    /// Closes the group (no clean mark: its storage failed) and hands back
    /// what opening it again from disk takes: its spec, the WAL writer and,
    /// for the metadata plane, the node's channel.
    pub fn close_for_reopen(mut self) -> (GroupSpec, Wal, Option<UnboundedSender<Hosted>>) {
        self.shut_down();
        // What failed may have left page-cache bytes the disk never got.
        self.spec.after_failed_write = true;
        (self.spec, self.wal, self.hosted)
    }

    /// Finishes in-flight work and closes storage (a clean mark where
    /// trusted).
    pub fn shut_down(&mut self) {
        self.after_inputs();
        if self.untrusted_reported {
            metrics::untrusted_log(false);
        }
        match self.host.close() {
            Ok(closed) => tracing::info!(closed.clean_mark, "group: closed"),
            Err(error) => tracing::error!(%error, "group: closing storage failed"),
        }
    }

    fn send_to_replica(&mut self, to: u8, message: Message) {
        let Some(node) = self.spec.node_at(to) else {
            tracing::error!(to, "group: effect names a replica outside the group");
            return;
        };
        self.outbox
            .lock()
            .expect("outbox lock")
            .push(&self.shared, node, &message);
    }

    fn reply(&mut self, reply: Msg<strand_wire::ReplyHeader>) {
        let header = *reply.header();
        let key = (header.client.get(), header.request.get());
        if let Some(started) = self.produce_started.remove(&key)
            && header.result.get() == ResultCode::Ok as u16
        {
            metrics::produce_latency(started.elapsed());
        }
        let shared = &self.shared;
        let reply = with_redirect(reply, &self.spec.slots, |node| shared.client_address(node));
        let frame = Message::Reply(reply);
        let _ = self.shared.reply(header.client.get(), frame_of(&frame));
    }

    fn on_commit(&mut self) {
        if self.spec.group == 0 {
            if let Some(catalog) = self.host.catalog() {
                self.shared.publish_catalog(catalog.clone());
            }
            self.publish_catalog_freshness();
            self.hand_over_hosted();
        } else {
            self.serve_parked();
        }
    }

    fn on_event(&mut self, event: Event) {
        // Events come out of the shard's settle turn, outside any span: every
        // logged one runs in the group's, with its replica, view and trust
        // as they stand (a dropped frame, the one frequent event, is only
        // counted).
        let logged = !matches!(event, Event::Dropped { .. });
        let _span = logged.then(|| self.span().entered());
        match event {
            Event::ViewChangeStarted { view } => {
                metrics::view_change(&self.label);
                tracing::info!(%view, "group: view change started");
            }
            Event::VotedToLeaveView { view, reason } => {
                tracing::info!(%view, ?reason, "group: voted to leave the view");
            }
            Event::HandingOver { to, view } => {
                tracing::info!(%view, to, "group: handing over to the preferred primary");
            }
            Event::HandoverCalledOff { to } => {
                tracing::info!(to, "group: handover called off, its drain did not end");
            }
            Event::Normal { view, primary } => {
                metrics::view(&self.label, view.view);
                tracing::info!(%view, primary, "group: normal");
            }
            Event::ViewChangeWaiting {
                view,
                reason,
                awaited,
            } => {
                let nodes = self.awaited_nodes(awaited);
                tracing::warn!(%view, ?reason, awaited_nodes = ?nodes, "group: view change waits");
            }
            Event::UntrustedLog { untrusted } => {
                if untrusted != self.untrusted_reported {
                    self.untrusted_reported = untrusted;
                    metrics::untrusted_log(untrusted);
                }
                tracing::info!(untrusted, "group: log trust changed");
            }
            Event::BehindLogStart { from, log_start } => {
                metrics::behind_log_start();
                let node = self.spec.node_at(from);
                tracing::warn!(from_node = ?node, log_start,
                    "group: a peer's retention dropped ops this replica lacks; catching up by state transfer");
            }
            Event::AppliedDivergence { op } => {
                metrics::applied_divergence(&self.label);
                tracing::error!(op, "group: a new view contradicts applied history");
            }
            Event::Merged {
                view,
                source,
                op,
                dropped,
            } => tracing::info!(%view, source, op, dropped, "group: canonical log chosen"),
            Event::AcceptedLoss { view, op } => {
                tracing::warn!(%view, op, "group: started a view accepting loss")
            }
            Event::Dropped { reason } => metrics::dropped(reason),
            Event::Reconfiguring { op, epoch } => {
                tracing::info!(op, epoch, "group: moving to a new assignment in place")
            }
            Event::EpochStarted { epoch } => {
                tracing::info!(epoch, "group: epoch started");
                metrics::epoch(&self.label, epoch);
                self.report_epoch_started();
            }
            Event::Retired { epoch } => {
                // The host recorded it in the superblock.
                tracing::warn!(epoch, "group: this replica was removed from the group");
            }
        }
    }

    fn awaited_nodes(&self, awaited: u32) -> Vec<u32> {
        (0..strand_wire::REPLICAS_MAX)
            .filter(|slot| awaited & (1 << slot) != 0)
            .filter_map(|slot| self.spec.node_at(slot))
            .collect()
    }

    /// The metadata plane: hands every assignment hosted here to the node
    /// whenever it is new or changed (the node starts the group's actor or
    /// passes it the change), and says when one is no longer hosted here.
    fn hand_over_hosted(&mut self) {
        let Some(hosted) = &self.hosted else { return };
        let Some(catalog) = self.host.catalog() else {
            return;
        };
        let mark = Some(catalog.deletion_mark());
        if self.catalog_announced != mark {
            self.catalog_announced = mark;
            let _ = hosted.send(Hosted::CatalogLoaded);
        }
        let me = self.shared.config.node;
        let mut still_hosted = BTreeSet::new();
        for assignment in catalog.hosted_on(me) {
            still_hosted.insert(assignment.group);
            if self.hosted_sent.get(&assignment.group) != Some(assignment) {
                self.hosted_sent
                    .insert(assignment.group, assignment.clone());
                let _ = hosted.send(Hosted::Placed(assignment.clone()));
            }
        }
        let dropped: Vec<u64> = self
            .hosted_sent
            .keys()
            .filter(|group| !still_hosted.contains(group))
            .copied()
            .collect();
        for group in dropped {
            if let Some(assignment) = self.hosted_sent.remove(&group) {
                let _ = hosted.send(Hosted::Dropped(assignment));
            }
        }
    }

    /// Takes the metadata plane's latest assignment, if a new one waits:
    /// the slot map, the memberships consensus knows, retirement.
    fn take_placement(&mut self) {
        let Some(handle) = self.shared.group(self.spec.group) else {
            return;
        };
        let Some(assignment) = handle.placement.lock().expect("placement lock").take() else {
            return;
        };
        let me = self.shared.config.node;
        let mut spec = GroupSpec::partition(&assignment, &self.shared.config.data_dir, me);
        spec.dir = self.spec.dir.clone();
        // This replica keeps its own slot in the map, member or not.
        let own = self.host.progress().slot;
        if spec.node_at(own).is_none() {
            if spec.slots.len() <= usize::from(own) {
                spec.slots.resize(usize::from(own) + 1, None);
            }
            spec.slots[usize::from(own)] = Some(me);
        }
        self.shared
            .set_slots(self.spec.group, spec.slots.clone().into());
        for membership in &spec.memberships {
            self.host.on_assignment(*membership);
        }
        if spec.retired {
            self.host.retire(spec.epoch);
        }
        tracing::info!(epoch = spec.epoch, active = spec.active, retired = spec.retired,
            slots = ?spec.slots, "group: assignment changed");
        let retention_changed = spec.retention != self.spec.retention;
        self.host.set_retention(spec.retention);
        self.spec = spec;
        self.report_epoch_started();
        if retention_changed {
            // An altered topic's limits hold at once, not at the next check.
            tracing::info!(retention = ?self.spec.retention, "group: retention changed");
            self.apply_retention();
        }
    }

    /// As primary, tells the node (once per epoch and actor: the node
    /// retries until the metadata plane has it) to report the newest epoch
    /// started while the metadata plane has not heard it, as after a restart.
    fn report_epoch_started(&mut self) {
        let epoch = self.spec.epoch;
        let pending = !self.spec.active
            && self.host.progress().started_epoch >= epoch
            && self.epoch_reported < epoch;
        if pending && self.host.is_serving_primary() {
            self.epoch_reported = epoch;
            self.shared.report_epoch_started(self.spec.group, epoch);
        }
    }

    // ----- requests ------------------------------------------------------------

    fn on_request(&mut self, request: Msg<RequestHeader>) {
        let header = *request.header();
        let operation = header.operation();
        match operation {
            Operation::Produce => return self.on_produce(request),
            Operation::CreateTopic => {
                return match self.with_topic_defaults(&request) {
                    Ok(request) => self.submit(request, 0),
                    Err(error) => {
                        self.refuse(&header, ResultCode::InvalidRequest, error.to_string())
                    }
                };
            }
            Operation::ConsumerHeartbeat => return self.on_heartbeat(&request),
            Operation::Fetch => return self.on_fetch(&request),
            Operation::StoreCursor => return self.on_store_cursor(&request),
            Operation::DeleteCursor => return self.on_delete_cursor(&request),
            Operation::GetCursor => return self.on_get_cursor(&request),
            Operation::OffsetForTime => return self.on_offset_for_time(&request),
            _ => {}
        }
        // Every other operation is handled by its route alone: a metadata
        // op is prepared as it came; the rest never reach a group's actor.
        match operation.info().route {
            Route::MetadataReplicated => self.submit(request, 0),
            Route::Internal => self.refuse(
                &header,
                ResultCode::InvalidRequest,
                format!("{operation:?} is a group's own operation, not a request"),
            ),
            route => self.refuse(
                &header,
                ResultCode::InvalidRequest,
                format!("{operation:?} ({route:?}) is not answered by a group's actor"),
            ),
        }
    }

    /// A CreateTopic with every policy it leaves unset filled in from this
    /// node's `topic_defaults` (the cursor durability follows the topic's
    /// durability), so that the replicated request is complete.
    fn with_topic_defaults(
        &self,
        request: &Msg<RequestHeader>,
    ) -> Result<Msg<RequestHeader>, strand_wire::BodyError> {
        let mut topic = CreateTopic::from_bytes(request.body())?;
        let config = &self.shared.config;
        let durability = *topic.durability.get_or_insert(config.default_durability);
        topic.confirm.get_or_insert(config.default_confirm);
        topic.consumer_offset_durability.get_or_insert(durability);
        Ok(Msg::new(*request.header(), Bytes::from(topic.to_vec())))
    }

    fn on_produce(&mut self, request: Msg<RequestHeader>) {
        let header = *request.header();
        if self.spec.group == 0 {
            return self.refuse(
                &header,
                ResultCode::InvalidRequest,
                "group 0 holds no records",
            );
        }
        let body_size = request.body().len();
        if body_size > PRODUCE_BATCH_BYTES_MAX {
            let body = ErrorBody::TooLarge {
                size: body_size as u64,
                max: PRODUCE_BATCH_BYTES_MAX as u64,
            };
            let _ = self
                .shared
                .reply(header.client.get(), error_frame(&header, &body));
            return;
        }
        let record_count = match RecordBatch::from_bytes(request.body().clone()) {
            Ok(batch) => batch.record_count(),
            Err(error) => {
                return self.refuse(
                    &header,
                    ResultCode::InvalidRequest,
                    format!("the produce body is not one valid record batch: {error}"),
                );
            }
        };
        if record_count == 0 {
            return self.refuse(&header, ResultCode::InvalidRequest, "empty batch");
        }
        if self.host.storage_failed() {
            return self.refuse(
                &header,
                ResultCode::StorageError,
                "this replica's storage failed; the node needs attention",
            );
        }
        let body_bytes = request.body().len() as u64;
        if self.host.would_prepare(&header, record_count) && !self.shared.disk.admit(body_bytes) {
            metrics::produce_refused_disk_full();
            let (free, reserve) = self.shared.disk.reading();
            return self.refuse(
                &header,
                ResultCode::DiskFull,
                format!(
                    "node {}'s data disk has {free} bytes free, below its reserve of {reserve}",
                    self.shared.config.node
                ),
            );
        }
        if self.produce_started.len() >= LATENCIES_TRACKED_MAX {
            self.produce_started.pop_first();
        }
        self.produce_started
            .insert((header.client.get(), header.request.get()), Instant::now());
        self.submit(request, record_count);
    }

    fn submit(&mut self, request: Msg<RequestHeader>, record_count: u32) {
        let timestamp_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64);
        let request = ClientRequest {
            request,
            record_count,
            timestamp_ns,
        };
        self.host.submit(request);
    }

    fn refuse(&self, request: &RequestHeader, code: ResultCode, message: impl Into<String>) {
        let body = ErrorBody::message(code, message);
        let _ = self
            .shared
            .reply(request.client.get(), error_frame(request, &body));
    }

    fn send_reply(&self, request: &RequestHeader, result: ResultCode, body: Bytes) {
        let _ = self
            .shared
            .reply(request.client.get(), reply_frame(request, result, body));
    }

    /// Answers `NotPrimary` (with the primary's address) unless this replica
    /// serves as primary; returns whether it does.
    fn serving_or_redirect(&self, request: &RequestHeader) -> bool {
        if self.host.is_serving_primary() {
            return true;
        }
        let progress = self.host.progress();
        let error = if progress.status == Status::Normal || progress.status == Status::Recovering {
            let primary = progress.primary;
            let node = self.spec.node_at(primary).unwrap_or(0);
            ErrorBody::NotPrimary {
                view: progress.view.view,
                primary_replica: primary,
                primary_node: node,
                address: self.shared.client_address(node).unwrap_or_default(),
            }
        } else {
            ErrorBody::message(
                ResultCode::Unavailable,
                "view change in progress: retry soon",
            )
        };
        let _ = self
            .shared
            .reply(request.client.get(), error_frame(request, &error));
        false
    }

    fn on_fetch(&mut self, request: &Msg<RequestHeader>) {
        let header = *request.header();
        if !self.serving_or_redirect(&header) {
            return;
        }
        let fetch = match FetchRequest::from_bytes(request.body()) {
            Ok(fetch) => fetch,
            Err(error) => {
                return self.refuse(&header, ResultCode::InvalidRequest, error.to_string());
            }
        };
        let bounds = self.host.read_bounds();
        let high_watermark = bounds.high_watermark;
        if bounds.out_of_range(fetch.offset) {
            let error = ErrorBody::OffsetOutOfRange {
                requested: fetch.offset,
                log_start_offset: bounds.log_start,
                high_watermark,
            };
            let _ = self
                .shared
                .reply(header.client.get(), error_frame(&header, &error));
            return;
        }
        // At the high watermark, or past it within the log (records the
        // previous primary committed, which this one commits once a backup
        // acks its view): a long poll waits for them.
        if fetch.offset >= high_watermark
            && fetch.wait_ms > 0
            && self.parked.len() < PARKED_FETCHES_MAX
        {
            let wait = Duration::from_millis(u64::from(fetch.wait_ms.min(FETCH_WAIT_MS_MAX)));
            self.parked.push_back(ParkedFetch {
                request: header,
                fetch,
                deadline: Instant::now() + wait,
            });
            return;
        }
        self.serve_fetch(&header, &fetch);
    }

    fn serve_fetch(&mut self, request: &RequestHeader, fetch: &FetchRequest) {
        let bounds = self.host.read_bounds();
        let (high_watermark, log_start) = (bounds.high_watermark, bounds.log_start);
        let max_bytes = u64::from(fetch.max_bytes).clamp(1, FETCH_BYTES_MAX);
        let committed = match self.host.fetch_committed(fetch.offset, max_bytes) {
            Ok(batches) => batches,
            Err(error) => {
                tracing::error!(%error, offset = fetch.offset, "group: fetch failed");
                return self.refuse(request, ResultCode::StorageError, error.to_string());
            }
        };
        let size = strand_wire::ops::FETCH_REPLY_HEAD_SIZE
            + committed
                .iter()
                .map(|batch| batch.bytes.len())
                .sum::<usize>();
        let mut body = BytesMut::with_capacity(size);
        body.extend_from_slice(&FetchReply::head(high_watermark, log_start));
        for batch in &committed {
            body.extend_from_slice(batch.patched_header().as_bytes());
            body.extend_from_slice(&batch.records());
        }
        self.send_reply(request, ResultCode::Ok, body.freeze());
    }

    fn serve_parked(&mut self) {
        if self.parked.is_empty() {
            return;
        }
        let high_watermark = self.host.high_watermark();
        let mut waiting = VecDeque::with_capacity(self.parked.len());
        while let Some(parked) = self.parked.pop_front() {
            if parked.fetch.offset < high_watermark {
                self.serve_fetch(&parked.request, &parked.fetch);
            } else {
                waiting.push_back(parked);
            }
        }
        self.parked = waiting;
    }

    fn expire_parked(&mut self) {
        let now = Instant::now();
        let mut waiting = VecDeque::with_capacity(self.parked.len());
        while let Some(parked) = self.parked.pop_front() {
            if parked.deadline <= now || !self.host.is_serving_primary() {
                self.serve_fetch(&parked.request, &parked.fetch);
            } else {
                waiting.push_back(parked);
            }
        }
        self.parked = waiting;
    }

    fn on_get_cursor(&mut self, request: &Msg<RequestHeader>) {
        let header = *request.header();
        if !self.serving_or_redirect(&header) {
            return;
        }
        match GetCursor::from_bytes(request.body()) {
            Ok(query) => {
                let offset = self.host.cursor(&query.consumer);
                let body = Bytes::from(GetCursorReply { offset }.to_vec());
                self.send_reply(&header, ResultCode::Ok, body);
            }
            Err(error) => self.refuse(&header, ResultCode::InvalidRequest, error.to_string()),
        }
    }

    /// The first committed offset appended at or after a time (the high
    /// watermark when every committed record is older).
    fn on_offset_for_time(&mut self, request: &Msg<RequestHeader>) {
        let header = *request.header();
        if !self.serving_or_redirect(&header) {
            return;
        }
        match OffsetForTime::from_bytes(request.body()) {
            Ok(query) => {
                let offset = self.host.offset_for_time(query.timestamp_ns);
                let body = Bytes::from(OffsetForTimeReply { offset }.to_vec());
                self.send_reply(&header, ResultCode::Ok, body);
            }
            Err(error) => self.refuse(&header, ResultCode::InvalidRequest, error.to_string()),
        }
    }

    /// A consumer group member's heartbeat, at the metadata plane's primary
    /// (the coordinator): its deadline moves, and it learns its part of the
    /// group from this replica's catalog (`UnknownMember`: join again).
    fn on_heartbeat(&mut self, request: &Msg<RequestHeader>) {
        let header = *request.header();
        if !self.serving_or_redirect(&header) {
            return;
        }
        let heartbeat = match ConsumerHeartbeat::from_bytes(request.body()) {
            Ok(heartbeat) => heartbeat,
            Err(error) => {
                return self.refuse(&header, ResultCode::InvalidRequest, error.to_string());
            }
        };
        let Some(catalog) = self.host.catalog() else {
            return self.refuse(
                &header,
                ResultCode::InvalidRequest,
                "heartbeats go to group 0",
            );
        };
        let session = catalog
            .consumer_group(&heartbeat.group)
            .and_then(|group| group.members.get(&heartbeat.member))
            .map(|member| Duration::from_millis(u64::from(member.session_timeout_ms)));
        match catalog.member_assignment(&heartbeat.group, heartbeat.member) {
            Ok(assignment) => {
                if let Some(session) = session {
                    self.shared
                        .coordinator
                        .lock()
                        .expect("coordinator lock")
                        .heard(&heartbeat.group, heartbeat.member, session, Instant::now());
                }
                self.send_reply(&header, ResultCode::Ok, Bytes::from(assignment.to_vec()));
            }
            Err(error) => self.send_reply(&header, error.code(), Bytes::from(error.to_vec())),
        }
    }

    fn on_accept_loss(&mut self, request: &Msg<RequestHeader>) {
        let header = *request.header();
        if self.host.accept_loss() {
            let progress = self.host.progress();
            let body = AcceptLossReply {
                view: progress.view.view,
                op: progress.op,
            };
            tracing::warn!(view = body.view, "group: an operator accepted loss");
            self.send_reply(&header, ResultCode::Ok, Bytes::from(body.to_vec()));
        } else {
            self.refuse(
                &header,
                ResultCode::Unavailable,
                format!(
                    "group {} is not stuck on this node (status {}, view {}): nothing to accept",
                    self.spec.group,
                    self.host.progress().status.name(),
                    self.host.progress().view
                ),
            );
        }
    }

    // ----- status --------------------------------------------------------------

    /// The metadata plane's replica tells the client port whether the
    /// catalog it published is current: in normal status (it heard from its
    /// view's primary, or is it) and every commit it heard of applied.
    fn publish_catalog_freshness(&self) {
        let progress = self.host.progress();
        let current = progress.status == Status::Normal && progress.commit >= progress.commit_max;
        self.shared.set_catalog_current(current);
    }

    /// Publishes the group's status (each tick, and by the shard when the
    /// group goes quiet, since no tick publishes it then).
    pub fn publish(&mut self) {
        self.published_shape = Some(self.status_shape());
        self.ticks_unpublished = 0;
        if self.spec.group == 0 {
            self.publish_catalog_freshness();
        }
        let progress = self.host.progress();
        let status = self.group_status(&progress);
        if let Some(failure) = self.host.storage_failure() {
            let attention = storage_failed_attention(&self.spec, status.view, failure);
            self.shared.publish(GroupView {
                status,
                attention: Some(attention),
            });
            return;
        }
        let attention = self.waiting_attention();
        self.shared.publish(GroupView { status, attention });
    }

    /// The attention entry of this group's waiting view change, if it
    /// waits: why, the replicas and nodes it waits for, and the latest
    /// history start it knows (for a wait below it, reference A's "start's
    /// record count and the node that took over there").
    fn waiting_attention(&self) -> Option<AttentionEntry> {
        let progress = self.host.progress();
        let (reason, awaited) = progress.attention?;
        let waiting = Waiting {
            view: progress.view.view,
            reason,
            awaited,
            start: progress.awaited_start,
        };
        Some(waiting_entry(&self.spec, &waiting))
    }

    /// The group's status as this replica stands (`progress`): its
    /// membership in effect and rule, and each member's progress as the
    /// primary knows it.
    fn group_status(&self, progress: &Progress) -> GroupStatus {
        let membership = progress.membership;
        let rule = membership.rule();
        let commit = progress.commit;
        self.commit_gauge.set(commit as f64);
        // The members of the newest membership this replica knows (joining
        // ones included: they show as catching up until they hold the prefix).
        let replicas = progress
            .newest
            .slots
            .iter()
            .map(|slot| {
                let op = if slot == progress.slot {
                    progress.op
                } else {
                    progress.acks.get(usize::from(slot)).copied().unwrap_or(0)
                };
                ReplicaStatus {
                    replica: slot,
                    node: self.spec.node_at(slot).unwrap_or(0),
                    op,
                    caught_up: op >= commit,
                }
            })
            .collect();
        // The metadata plane holds no records: both offsets stay 0 there.
        let (log_start_offset, high_watermark) = if self.spec.group == 0 {
            (0, 0)
        } else {
            (self.host.log_start_offset(), self.host.high_watermark())
        };
        GroupStatus {
            group: self.spec.group,
            stream: self.spec.stream.clone(),
            topic: self.spec.topic.clone(),
            partition: self.spec.partition,
            epoch: membership.epoch,
            confirm: membership.confirm,
            durability: self.spec.durability,
            write_quorum: rule.write,
            view_change_quorum: rule.view_change,
            replica: progress.slot,
            view: progress.view.view,
            log_view: progress.log_view.view,
            status: progress.status.name().to_owned(),
            primary: progress.primary,
            op: progress.op,
            commit_op: commit,
            log_start_offset,
            high_watermark,
            untrusted_log: !progress.trusted,
            replicas,
        }
    }
}

/// A disk on `wal`, reading through the node's `read_handles`, whose
/// completions wake the actor behind `inbox`.
/// The partition layout a group's spec asks for: its topic's segment size
/// (or the default), opened in this node boot.
/// Moves a partition directory from before directories named their group
/// (`<topic>/<partition>`) to its current name, once, when the partition
/// opens. Its quarantined copies keep their old names.
fn adopt_legacy_dir(spec: &GroupSpec, data_dir: &std::path::Path) -> Result<(), OpenError> {
    if spec.group == 0 || spec.dir.exists() {
        return Ok(());
    }
    let legacy = strand_partition::layout::legacy_partition_dir(
        data_dir,
        &spec.stream,
        &spec.topic,
        spec.partition,
    );
    if !legacy.is_dir() {
        return Ok(());
    }
    std::fs::rename(&legacy, &spec.dir)
        .map_err(|error| strand_partition::PartitionError::io(&legacy, "rename", &error))?;
    tracing::info!(group = spec.group, from = %legacy.display(), to = %spec.dir.display(),
        "group: partition directory renamed to carry its group id");
    Ok(())
}

/// Bytes per segment of the metadata plane's log: small, so that the
/// segments below a catalog snapshot can go soon after it (a segment goes
/// only whole).
const METADATA_SEGMENT_BYTES: u64 = 256 << 10;

fn partition_config(spec: &GroupSpec, boot: u64) -> PartitionConfig {
    let defaults = PartitionConfig::default();
    let segment_bytes_max = match spec.segment_bytes {
        _ if spec.group == 0 => METADATA_SEGMENT_BYTES,
        0 => defaults.log.segment_bytes_max,
        bytes => bytes,
    };
    PartitionConfig {
        boot,
        drop_unsynced: spec.after_failed_write,
        log: LogConfig {
            segment_bytes_max,
            ..defaults.log
        },
        ..defaults
    }
}

fn disk_for(wal: &Wal, read_handles: &ReadHandles, inbox: &GroupInbox) -> FileDisk {
    let inbox = inbox.clone();
    let notify = move || {
        // A full inbox is about to be drained anyway; storage is polled
        // after every input.
        let _ = inbox.try_send(Input::Storage);
    };
    FileDisk::with_notify(wal.clone(), notify).with_read_handles(read_handles.clone())
}
