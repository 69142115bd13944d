//! A group's actor: the state around the group's
//! `strand_host::group_host::GroupHost` (the replica over its partition,
//! where every effect is carried out and storage completions go back to the
//! replica), hosted on one of the node's shards (the runtime's `shard`). The
//! shard hands it inputs in order (peer frames, client requests, storage
//! wakeups, ticks); the actor hands them to the replica, settles the host,
//! and carries out its outputs: frames to the bus, replies to clients,
//! commits to waiting readers and the catalog, events to metrics. The
//! metadata plane's replica (group 0) also carries the plane's duties
//! ([`crate::metadata::plane`]), called once per settle that committed.
//!
//! This file holds the actor's state and the calls its shard makes; its
//! parts, in reading order:
//!
//! | module | owns |
//! |---|---|
//! | [`spec`] | everything about one hosted group as its latest assignment says |
//! | `open` | opening the group's storage and host (and a legacy directory's rename) |
//! | `output` | carrying out the host's outputs: frames to peers, replies, commits |
//! | `events` | the replica's events, logged and counted |
//! | `requests` | client requests: dispatch by operation, produce, accept-loss, heartbeats |
//! | `reads` | fetches and long polls, cursor and time lookups |
//! | [`parked`] | the long polls waiting for records to commit, bounded |
//! | `cursors` | storing and deleting cursors, idle cursors expired |
//! | `storage` | retention, the periodic storage check, the metadata log's compaction |
//! | `placement` | a partition's new assignment taken, its started epoch reported |
//! | `status` | the group's status and attention, published |
//! | [`publishing`] | when the status is published (a shape change at once, progress paced) |
//! | [`attention`] | what `status` and `attention` show of a waiting, failed or down group |
//! | `log_span` | the group's tracing span |
//!
//! Bounds: at most [`PARKED_FETCHES_MAX`](parked::PARKED_FETCHES_MAX) long
//! polls wait per group (more are answered at once, empty); the inbox is
//! the shard's; a partition keeps cursors for at most the node's
//! `cursor_consumers_per_partition_max` consumer names (`cursors`).

pub mod attention;
mod cursors;
mod events;
mod log_span;
mod open;
mod output;
pub mod parked;
mod placement;
pub mod publishing;
mod reads;
mod requests;
pub mod spec;
mod status;
mod storage;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use strand_partition::FileDisk;
use strand_wal::Wal;
use tokio::sync::mpsc::UnboundedSender;

use crate::group::parked::ParkedFetches;
use crate::group::publishing::Publishing;
use crate::group::spec::GroupSpec;
use crate::metadata::hosted::Hosted;
use crate::metadata::plane::MetadataPlane;
use crate::metrics;
use crate::net::outbox::Outbox;
use crate::runtime::input::Input;
use crate::shared::Shared;
use strand_host::group_host::{GroupHost, Output};

/// Produce latencies tracked at once (beyond, the oldest are forgotten).
const LATENCIES_TRACKED_MAX: usize = 4096;

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
    /// Long polls waiting for records to commit.
    parked: ParkedFetches,
    /// The node's WAL writer, kept to open the group again.
    wal: Wal,
    /// The metadata plane's duties: group 0 only.
    plane: Option<MetadataPlane>,
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
    /// When the status was last published, and in what shape.
    publishing: Publishing,
}

impl Actor {
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
        if let Some(plane) = &mut self.plane {
            plane.hand_over_hosted(self.shared.config.node, self.host.catalog());
        }
        self.publish();
    }

    /// One tick of the node's clock (only while
    /// [`Actor::ticks_until_due`] says one is due).
    pub fn on_tick(&mut self) {
        self.host.on_tick(&mut self.outputs);
        self.expire_parked();
        self.publishing.ticked();
        if self.publishing.due(self.status_shape()) {
            self.publish();
        }
    }

    /// Ticks until the next one that may do anything here, counting that
    /// one (see `strand_host::ticks`): the host's next timeout; every tick
    /// while long polls wait for their deadlines, a stop is under way or a
    /// new status shape is unpublished; and, while the group is awake, its
    /// progress is published every
    /// [`PUBLISH_PROGRESS_TICKS`](publishing::PUBLISH_PROGRESS_TICKS).
    /// `None`: the group is quiet, and costs its shard nothing until its
    /// next input.
    pub fn ticks_until_due(&self) -> Option<u64> {
        if !self.parked.is_empty() || self.stopping || self.publishing.changed(self.status_shape())
        {
            return Some(1);
        }
        let host = self.host.ticks_until_due()?;
        let publish = self.publishing.ticks_until_progress();
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
        self.publishing.skipped(ticks);
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
        (self.spec.clone(), self.wal.clone(), self.hosted())
    }

    /// The node's channel for the partitions hosted here: the metadata
    /// plane's replica only.
    fn hosted(&self) -> Option<UnboundedSender<Hosted>> {
        self.plane.as_ref().and_then(MetadataPlane::hosted)
    }

    /// Drops the group without closing it cleanly (no clean mark: its
    /// state in memory may be broken, after a panic), and hands back what
    /// opening it again from disk takes, as after a crash of the node.
    pub fn abandon(self) -> (GroupSpec, Wal, Option<UnboundedSender<Hosted>>) {
        if self.untrusted_reported {
            metrics::untrusted_log(false);
        }
        let hosted = self.hosted();
        (self.spec, self.wal, hosted)
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
        let hosted = self.hosted();
        (self.spec, self.wal, hosted)
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
}
