//! `GroupHost`: one group's replica and its partition storage, and the one
//! place where the replica's effects are carried out. Storage effects run
//! here, in order, against the partition; storage completions go back to
//! the replica; what must leave the group (frames for peers, replies for
//! clients) and what the host's owner must know (commits, events, a state
//! transfer to start, write stages to time) come out as [`Output`]s.
//!
//! Deterministic: no threads, sockets or clocks. The host is the one door
//! into a group: the owner opens it ([`GroupHost::open`]), feeds every
//! input through its methods (frames and ticks, [`GroupHost::start`],
//! requests through [`GroupHost::submit`], cursor stores and deletes,
//! assignments, retirement, accepted loss: `inputs` and `cursors`), calls
//! [`GroupHost::settle`] and carries out the outputs. Reads go through it
//! too (`reads`: the replica's progress, committed records only, cursors),
//! so the owner never holds the replica or the partition. State transfer
//! (both ends) runs inside, in `transfer`.

mod catalog_log;
mod cursors;
mod inputs;
#[cfg(feature = "inspect")]
mod inspect;
mod open;
#[cfg(test)]
mod parent_check_tests;
mod reads;
mod swap;
mod transfer;
#[cfg(test)]
mod trust_tests;

pub use catalog_log::CatalogCompaction;
pub use open::{HostSpec, Mutations, OpenError};
pub use reads::{Progress, ReadBounds};
pub use transfer::EXPORTS_KEPT_MAX;

use std::path::PathBuf;

use bytes::Bytes;
use strand_consensus::{Effect, Effects, Event, Replica};
use strand_partition::{
    Completed, CutPoint, Disk, Partition, PartitionConfig, PartitionError, RetentionPolicy,
};
use strand_wire::PrepareHeader;
use strand_wire::ops::CursorEvents;
use strand_wire::{
    Body, CommandHeader, CursorsHeader, HEADERS_PER_MESSAGE_MAX, HeadersHeader, Message, Msg,
    ReplyHeader,
};
use zerocopy::IntoBytes;

use crate::convert::{fields_of, stage_of};
use crate::machine::Machine;

/// Most cursor events shipped in one frame.
pub const CURSOR_EVENTS_PER_FRAME_MAX: u64 = 256;

/// Cursor events past the snapshot before [`GroupHost::compact_cursors`]
/// writes a new one: a snapshot rewrites every cursor, so it waits until the
/// log has grown by a few thousand commits.
pub const CURSOR_EVENTS_BEFORE_COMPACTION: u64 = 4096;

/// What the host's owner must carry out or learn, in the order it arose.
#[derive(Debug)]
pub enum Output {
    /// Send `message` to replica `to` of the group.
    Send {
        /// The replica (slot).
        to: u8,
        /// The frame.
        message: Message,
    },
    /// Send `reply` to its client.
    Reply(Msg<ReplyHeader>),
    /// An op committed: the machine applied it (serve waiting readers,
    /// publish the catalog).
    Committed {
        /// The committed prepare's header.
        header: PrepareHeader,
    },
    /// Something the replica reports (metrics, logs, the metadata plane).
    Event(Event),
    /// Op `op`'s write was handed to the WAL writer (`durable`: fsynced);
    /// for the owner's write-latency clock.
    WriteStage {
        /// The op.
        op: u64,
        /// Whether it is durable now.
        durable: bool,
    },
    /// The partition was quarantined (moved aside and rebuilt from the
    /// agreed prefix); a state transfer follows.
    Quarantined {
        /// The prefix kept.
        agreed_op: u64,
    },
    /// A state transfer was installed: the log now reaches `op`.
    TransferInstalled {
        /// The installed log's head op.
        op: u64,
    },
    /// Storage failed and the partition could not be reopened: the group
    /// must stop.
    Stop,
}

/// How the host reopens its partition when an operation that consumed it
/// failed (a quarantine, an install).
pub struct Reopen<D> {
    /// The partition's directory.
    pub dir: PathBuf,
    /// How it was opened.
    pub config: PartitionConfig,
    /// A fresh disk for it, when the failed operation could not hand its
    /// own back.
    pub new_disk: Box<dyn FnMut() -> D + Send>,
}

impl<D> std::fmt::Debug for Reopen<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reopen").field("dir", &self.dir).finish()
    }
}

/// What closing a host left.
#[derive(Debug)]
pub struct Closed<D> {
    /// A clean-shutdown mark was written.
    pub clean_mark: bool,
    /// The disk, if the partition was open.
    pub disk: Option<D>,
}

/// One group on one node: see the module docs.
pub struct GroupHost<D: Disk> {
    replica: Replica<Machine>,
    /// `None` only inside an operation that consumes it.
    partition: Option<Partition<D>>,
    effects: Effects,
    /// The effects being carried out (their executions push new ones).
    batch: Vec<Effect>,
    completed: Vec<Completed>,
    /// A write or persist failed: appends stop until restart, and no clean
    /// mark is written at close.
    storage_failed: bool,
    /// The first storage failure, described.
    storage_failure: Option<String>,
    reopen: Reopen<D>,
    /// Both ends of state transfer.
    transfers: transfer::Transfers,
    cluster: u64,
    group: u64,
    /// How much of the record log to keep.
    retention: RetentionPolicy,
    /// The record log's segment count and persisted commit when retention
    /// last looked.
    retention_checked: (usize, u64),
    /// Protections switched off (a mutation run of the simulator).
    mutations: open::Mutations,
    /// Most distinct consumer names the partition keeps cursors for.
    cursor_consumers_max: u64,
    /// When each consumer last stored its cursor here, as primary.
    cursor_clock: cursors::CursorClock,
}

impl<D: Disk> std::fmt::Debug for GroupHost<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupHost")
            .field("group", &self.group)
            .field("view", &self.replica.view())
            .field("status", &self.replica.status())
            .field("storage_failed", &self.storage_failed)
            .finish()
    }
}

impl<D: Disk> GroupHost<D> {
    /// A host for `replica` over `partition`, with the effects its opening
    /// produced (retirement, say) still to run.
    fn new(
        replica: Replica<Machine>,
        partition: Partition<D>,
        effects: Effects,
        reopen: Reopen<D>,
        cluster: u64,
        group: u64,
    ) -> GroupHost<D> {
        let config = replica.config();
        assert!(
            config.cluster == cluster && config.group == group,
            "a host for group {group} of cluster {cluster} over replica {}/{}",
            config.group,
            config.cluster
        );
        GroupHost {
            replica,
            partition: Some(partition),
            effects,
            batch: Vec::new(),
            completed: Vec::new(),
            storage_failed: false,
            storage_failure: None,
            reopen,
            transfers: transfer::Transfers::default(),
            cluster,
            group,
            retention: RetentionPolicy::default(),
            retention_checked: (0, 0),
            mutations: open::Mutations::default(),
            cursor_consumers_max: strand_consensus::CURSOR_CONSUMERS_MAX_DEFAULT,
            cursor_clock: cursors::CursorClock::default(),
        }
    }

    /// A frame from a peer replica of the group: state-transfer frames go
    /// to the transfer's two ends, everything else to the replica.
    pub fn on_message(&mut self, message: Message, out: &mut Vec<Output>) {
        match message {
            Message::RequestStateTransfer(request) => self.serve_transfer(request.header(), out),
            Message::StateTransferChunk(chunk) => self.on_transfer_chunk(chunk, out),
            message => self.replica.on_message(message, &mut self.effects),
        }
    }

    /// A tick of the group's clock: the replica's timeouts and the state
    /// transfer it may be receiving.
    pub fn on_tick(&mut self, out: &mut Vec<Output>) {
        self.replica.on_tick(&mut self.effects);
        self.tick_transfer(out);
    }

    /// Ticks until the next one that may do anything, counting that one
    /// (1: the next tick); `None` while none would (see [`crate::ticks`]). A
    /// state transfer being received, or awaited, works on every tick.
    pub fn ticks_until_due(&self) -> Option<u64> {
        if self.receiving_transfer()
            || self.replica.status() == strand_consensus::Status::AwaitingStateTransfer
        {
            return Some(1);
        }
        self.replica.ticks_until_due()
    }

    /// `ticks` ticks passed in which none was due: the same as that many
    /// calls of [`GroupHost::on_tick`] that would each have done nothing but
    /// count. The driver tells the group before its next tick or input.
    pub fn skip_ticks(&mut self, ticks: u64) {
        if ticks > 0 {
            assert!(
                !self.receiving_transfer(),
                "a transfer's ticks are never skipped"
            );
            self.replica.skip_ticks(ticks);
        }
    }

    /// Whether ticks would do nothing: the replica is quiet (idle, timers
    /// stopped) and no transfer is being received. The owner may stop
    /// ticking the group until its next input.
    pub fn quiet(&self) -> bool {
        self.replica.is_quiet() && !self.receiving_transfer()
    }

    /// The node-level liveness of the replica at `slot` changed (one signal
    /// per peer node for all groups, which quiet groups rely on).
    pub fn on_peer_liveness(&mut self, slot: u8, alive: bool) {
        self.replica
            .on_peer_liveness(slot, alive, &mut self.effects);
    }

    /// The slot of the group's preferred primary while this replica leads
    /// in its place (after a failover): a group its owner may hand over.
    pub fn leads_in_place_of_preferred(&self) -> Option<u8> {
        self.replica.leads_in_place_of_preferred()
    }

    /// Begins handing the primary role back to the preferred primary if
    /// the replica may now (the preferred replica live and holding every
    /// committed op; the requests in flight drain first); the next
    /// [`GroupHost::settle`] sends what it must. The owner paces these: a
    /// returning node may be preferred by thousands of groups.
    pub fn hand_over_to_preferred(&mut self) -> bool {
        self.replica.hand_over_to_preferred(&mut self.effects)
    }

    /// The partition, to read; open between operations.
    fn partition_view(&self) -> &Partition<D> {
        self.partition
            .as_ref()
            .expect("the partition is open between operations")
    }

    /// The partition; open between operations.
    fn partition_mut(&mut self) -> &mut Partition<D> {
        self.partition
            .as_mut()
            .expect("the partition is open between operations")
    }

    /// Whether a write or persist failed.
    pub fn storage_failed(&self) -> bool {
        self.storage_failed
    }

    /// The first storage failure, described (a refused effect, a failed
    /// write), if any.
    pub fn storage_failure(&self) -> Option<&str> {
        self.storage_failure.as_deref()
    }

    /// Polls storage and runs effects until both are quiet; appends what
    /// must leave to `out`.
    pub fn settle(&mut self, out: &mut Vec<Output>) {
        loop {
            self.poll_storage(out);
            if self.effects.is_empty() {
                if cfg!(debug_assertions) {
                    self.replica.assert_invariants();
                }
                self.assert_invariants();
                return;
            }
            // One buffer for the host's life: no allocation per turn.
            let mut batch = std::mem::take(&mut self.batch);
            batch.extend(self.effects.drain());
            for effect in batch.drain(..) {
                self.execute(effect, out);
            }
            self.batch = batch;
        }
    }

    /// The host's own invariants, after every settle: a storage failure is
    /// described exactly when there was one, the partition is open unless
    /// one took it, the bound on consumer names keeps some, and both ends
    /// of state transfer hold theirs.
    fn assert_invariants(&self) {
        assert_eq!(
            self.storage_failed,
            self.storage_failure.is_some(),
            "a storage failure without its description, or the reverse"
        );
        assert!(
            self.partition.is_some() || self.storage_failed,
            "the partition is gone with no storage failure"
        );
        assert!(
            self.cursor_consumers_max > 0,
            "a partition that keeps no cursor"
        );
        self.assert_transfer_invariants();
    }

    /// Persists the replica's commit number if it is ahead of the persisted
    /// one (the driver's periodic check: a quiet replica's commit persist
    /// timer does not run). Settle afterwards.
    pub fn persist_commit_if_behind(&mut self) {
        if self.partition.is_some() && !self.storage_failed {
            self.replica.persist_commit_now(&mut self.effects);
        }
    }

    /// Applies the retention policy: drops the oldest sealed segments it
    /// allows, never one holding this replica's commit or anything after
    /// (see `Partition::apply_retention`), then tells consensus where the
    /// log starts. `now_ns` is wall-clock time from the driver (the host
    /// keeps no clock). Returns the segments removed; a storage failure
    /// fails the host like any other.
    pub fn retain(&mut self, now_ns: u64) -> usize {
        if self.retention == RetentionPolicy::default() || !self.storage_settled() {
            return 0;
        }
        let (policy, commit) = (self.retention, self.replica.commit());
        let outcome = self.partition_mut().apply_retention(policy, now_ns, commit);
        let partition = self.partition_view();
        let checked = (partition.segment_count(), partition.persisted_commit());
        let waits = partition.retention_waits_for_commit(policy, now_ns, commit);
        self.retention_checked = checked;
        if waits {
            // The next retain runs when the persisted commit moves.
            self.replica.persist_commit_now(&mut self.effects);
        }
        match outcome {
            Ok(outcome) => {
                assert!(
                    self.partition_view().head_op() <= commit + 1,
                    "retention dropped ops up to {}, past commit {commit}",
                    self.partition_view().head_op() - 1
                );
                if outcome.segments_removed > 0 {
                    self.note_log_start();
                }
                outcome.segments_removed
            }
            Err(error) => {
                self.storage_error("apply retention", &error);
                0
            }
        }
    }

    /// Takes a changed retention policy (the topic was altered); the next
    /// [`GroupHost::retain`] applies it.
    pub fn set_retention(&mut self, policy: RetentionPolicy) {
        if self.retention != policy {
            self.retention = policy;
            self.retention_checked = (0, 0);
        }
    }

    /// Folds the cursor event log into its snapshot once it holds
    /// [`CURSOR_EVENTS_BEFORE_COMPACTION`] events past it, and drops the
    /// log frames no peer still needs (see `Replica::cursor_keep_from`).
    /// Durable when it returns; returns the frames dropped. The driver calls
    /// it on its periodic check: committed cursors otherwise grow the log
    /// without bound.
    pub fn compact_cursors(&mut self) -> usize {
        if !self.storage_settled() {
            return 0;
        }
        let partition = self.partition_view();
        assert!(
            partition.cursor_snapshot_covers() <= partition.cursor_tail(),
            "the cursor snapshot covers {} events of a log of {}",
            partition.cursor_snapshot_covers(),
            partition.cursor_tail()
        );
        let unfolded = partition.cursor_tail() - partition.cursor_snapshot_covers();
        if unfolded < CURSOR_EVENTS_BEFORE_COMPACTION {
            return 0;
        }
        let keep_from = self.replica.cursor_keep_from();
        assert!(
            keep_from <= partition.cursor_tail(),
            "compaction keeps events from {keep_from}, past the log's tail {}",
            partition.cursor_tail()
        );
        let compacted = self
            .partition_mut()
            .snapshot_cursors()
            .and_then(|()| self.partition_mut().compact_cursors(keep_from));
        match compacted {
            Ok(frames) => frames,
            Err(error) => {
                self.storage_error("compact the cursor log", &error);
                0
            }
        }
    }

    /// Whether size retention may have work: a limit is set and, since
    /// [`GroupHost::retain`] last looked, a segment was sealed or the
    /// persisted commit moved (a backup's commit trails its appends, and
    /// retention never passes it). Cheap enough for every turn; age limits
    /// are the driver's timer's.
    pub fn retention_due(&self) -> bool {
        self.retention.retention_bytes.is_some()
            && self.partition.as_ref().is_some_and(|partition| {
                (partition.segment_count(), partition.persisted_commit()) != self.retention_checked
            })
    }

    /// The earliest record offset the partition holds (0 while it is not
    /// open, between a failed operation and its reopen).
    pub fn log_start_offset(&self) -> u64 {
        self.partition.as_ref().map_or(0, Partition::head_offset)
    }

    /// Whether the partition may be trimmed or compacted now: it is open
    /// and sound, and no state transfer is about to replace it.
    fn storage_settled(&self) -> bool {
        !self.storage_failed
            && self.partition.is_some()
            && !self.receiving_transfer()
            && self.replica.status() != strand_consensus::Status::AwaitingStateTransfer
    }

    /// Tells consensus the first op the partition holds.
    fn note_log_start(&mut self) {
        let start = self.partition_view().head_op();
        self.replica.note_log_start(start);
    }

    /// Closes storage: with a clean-shutdown mark when the log is trusted
    /// and storage never failed (`clean_mark` then), the commit number
    /// persisted first. The host is done
    /// afterwards; the disk is handed back (a simulated one lives on).
    pub fn close(&mut self) -> Result<Closed<D>, PartitionError> {
        if self.replica.trusted() && self.partition.is_some() {
            // The commit number is otherwise persisted only every few
            // seconds: a replica reopening after a clean stop then starts
            // from everything it had applied (the metadata plane rebuilds
            // its whole catalog before it serves, instead of applying the
            // rest while it runs). The close below waits for the write.
            // What this last settle would send is dropped: the node is
            // stopping, and a crash would drop it too.
            self.persist_commit_if_behind();
            let mut dropped = Vec::new();
            self.settle(&mut dropped);
        }
        // A failed storage may have been given up in that settle.
        let Some(partition) = self.partition.take() else {
            return Ok(Closed {
                clean_mark: false,
                disk: None,
            });
        };
        let clean_mark = self.replica.trusted() && !self.storage_failed;
        let in_view = self.replica.resumable_in_view()
            || (cfg!(feature = "mutations") && self.mutations.resume_any_stop);
        let disk = if clean_mark && in_view {
            partition.close_in_view()?
        } else if clean_mark {
            partition.close()?
        } else {
            partition.close_unmarked()?
        };
        Ok(Closed {
            clean_mark,
            disk: Some(disk),
        })
    }

    /// Stops without closing anything, as a crash would: the disk is handed
    /// back as it is (a simulated one then crashes). The host is done
    /// afterwards.
    pub fn abandon(&mut self) -> Option<D> {
        self.partition.take().map(Partition::abandon)
    }

    // ----- storage -------------------------------------------------------------

    fn poll_storage(&mut self, out: &mut Vec<Output>) {
        let mut completed = std::mem::take(&mut self.completed);
        self.partition_mut().poll(&mut completed);
        for done in completed.drain(..) {
            self.on_completed(done, out);
        }
        self.completed = completed;
    }

    fn on_completed(&mut self, done: Completed, out: &mut Vec<Output>) {
        let effects = &mut self.effects;
        match done {
            Completed::Prepare {
                op,
                checksum,
                stage,
            } => {
                if stage == strand_partition::WriteStage::Durable {
                    out.push(Output::WriteStage { op, durable: true });
                }
                self.replica
                    .on_write(op, checksum, stage_of(stage), effects);
            }
            Completed::Cursors { cursor_end, stage } => {
                self.replica
                    .on_cursors_written(cursor_end, stage_of(stage), effects);
            }
            Completed::StatePersisted { sequence } => {
                self.replica.on_state_persisted(sequence, effects);
            }
            Completed::PrepareFailed {
                op,
                checksum,
                error,
            } => {
                if self.mutations.trusts_failed_sync(&error) {
                    let durable = strand_consensus::WriteStage::Durable;
                    self.replica.on_write(op, checksum, durable, effects);
                    return;
                }
                self.fail_storage(format!("the write of op {op} failed: {error}"));
            }
            Completed::CursorsFailed { cursor_end, error } => {
                self.fail_storage(format!(
                    "the cursor append up to {cursor_end} failed: {error}"
                ));
            }
            Completed::StatePersistFailed { sequence, error } => {
                self.fail_storage(format!("persisting superblock {sequence} failed: {error}"));
            }
        }
    }

    // ----- effects -------------------------------------------------------------

    fn execute(&mut self, effect: Effect, out: &mut Vec<Output>) {
        match effect {
            Effect::Send { to, message } => out.push(Output::Send { to, message }),
            Effect::Reply { reply } => out.push(Output::Reply(reply)),
            Effect::WritePrepare { prepare } => self.write_prepare(prepare, out),
            Effect::Cut { op, cursor_tail } => self.cut(CutPoint { op, cursor_tail }),
            Effect::PersistState { state, sequence } => {
                if let Err(error) = self
                    .partition_mut()
                    .persist_state(fields_of(&state), sequence)
                {
                    self.storage_error("persist the superblock", &error);
                }
            }
            Effect::Commit { header } => out.push(Output::Committed { header }),
            Effect::ServeHeaders { to, op_min, op_max } => {
                self.serve_headers(to, op_min, op_max, out)
            }
            Effect::ServePrepare { to, op, checksum } => self.serve_prepare(to, op, checksum, out),
            Effect::AppendCursors {
                cursor_base,
                event_count,
                events,
            } => match self
                .partition_mut()
                .append_cursors(cursor_base, event_count, &events)
            {
                Ok(()) => {
                    let end = cursor_base + u64::from(event_count);
                    self.replica.on_cursors_written(
                        end,
                        strand_consensus::WriteStage::Queued,
                        &mut self.effects,
                    );
                }
                Err(error) => self.storage_error("append cursor events", &error),
            },
            Effect::ShipCursors { to, cursor_from } => self.ship_cursors(to, cursor_from, out),
            Effect::StartStateTransfer { from, op_min } => self.start_transfer(from, op_min, out),
            Effect::Quarantine { agreed_op } => self.quarantine(agreed_op, out),
            Effect::Event(event) => self.on_event(event, out),
        }
    }

    /// Cuts the log's tail (the longer tail a view change or repair
    /// replaced, the cursor events past a view's start); durable when it
    /// returns.
    fn cut(&mut self, at: CutPoint) {
        if cfg!(feature = "mutations") && self.mutations.skip_cut {
            self.replica.on_truncated(at.op, &mut self.effects);
            return;
        }
        match self.partition_mut().cut(at) {
            Ok(_) => self.replica.on_truncated(at.op, &mut self.effects),
            Err(error) => self.storage_error("cut the log", &error),
        }
    }

    fn storage_error(&mut self, what: &str, error: &PartitionError) {
        self.fail_storage(format!("cannot {what}: {error}"));
    }

    /// Storage failed: appends stop until restart, no clean mark at close;
    /// the first failure is kept for the owner.
    fn fail_storage(&mut self, failure: String) {
        tracing::error!(%failure, "host: storage failed");
        self.storage_failed = true;
        self.storage_failure.get_or_insert(failure);
    }

    fn write_prepare(&mut self, prepare: Msg<strand_wire::PrepareHeader>, out: &mut Vec<Output>) {
        let (op, checksum) = (prepare.header().op.get(), prepare.checksum());
        match self.partition_mut().write_prepare(prepare) {
            Ok(accepted) => {
                assert!(
                    accepted.op == op && accepted.checksum == checksum,
                    "storage took op {} for the write of op {op}",
                    accepted.op
                );
                if accepted.stage == strand_partition::WriteStage::Queued {
                    out.push(Output::WriteStage {
                        op: accepted.op,
                        durable: false,
                    });
                }
                self.replica.on_write(
                    accepted.op,
                    accepted.checksum,
                    stage_of(accepted.stage),
                    &mut self.effects,
                );
            }
            Err(error) => self.storage_error("write a prepare", &error),
        }
    }

    fn serve_headers(&mut self, to: u8, op_min: u64, op_max: u64, out: &mut Vec<Output>) {
        assert!(
            op_min <= op_max,
            "serving headers {op_min}..={op_max}, an empty range"
        );
        let op_max = op_max.min(op_min + HEADERS_PER_MESSAGE_MAX as u64 - 1);
        let headers = match self.partition_mut().read_headers(op_min, op_max) {
            Ok(headers) => headers,
            Err(error) => return read_failed("headers", &error),
        };
        if headers.is_empty() {
            return;
        }
        assert!(
            headers.len() <= HEADERS_PER_MESSAGE_MAX,
            "{} headers read for one frame",
            headers.len()
        );
        let header = HeadersHeader::new(
            self.cluster,
            self.group,
            self.replica.view(),
            self.replica.config().replica,
        );
        let body = Bytes::copy_from_slice(headers.as_bytes());
        out.push(Output::Send {
            to,
            message: Message::Headers(Msg::new(header, body)),
        });
    }

    fn serve_prepare(&mut self, to: u8, op: u64, checksum: u32, out: &mut Vec<Output>) {
        let prepare = match self.partition_mut().read_prepare(op) {
            Ok(Some(prepare)) => prepare,
            Ok(None) => return,
            Err(error) => return read_failed("a prepare", &error),
        };
        let wanted = if checksum == 0 {
            op <= self.replica.commit()
        } else {
            prepare.checksum() == checksum
        };
        if wanted {
            out.push(Output::Send {
                to,
                message: Message::Prepare(prepare),
            });
        }
    }

    fn ship_cursors(&mut self, to: u8, cursor_from: u64, out: &mut Vec<Output>) {
        let durable = self.partition_mut().cursor_durable_tail();
        let end = durable.min(cursor_from + CURSOR_EVENTS_PER_FRAME_MAX);
        // Events below the log's start were folded into its snapshot (a
        // transferred or compacted log): a peer that truly lacks them
        // cannot get them as events. A primary that does not know a
        // backup's tail yet asks from 0; the backup's next PrepareOk tells.
        let log_start = self.partition_mut().cursor_log_start();
        if cursor_from < log_start {
            self.replica.note_cursor_log_start(log_start);
            return;
        }
        if cursor_from >= end {
            return;
        }
        let events = match self.partition_mut().read_cursor_events(cursor_from, end) {
            Ok(events) => events,
            Err(error) => return read_failed("cursor events", &error),
        };
        if events.is_empty() {
            return;
        }
        assert!(
            events.len() as u64 <= end - cursor_from,
            "{} cursor events read for {cursor_from}..{end}",
            events.len()
        );
        let mut header = CursorsHeader::new(
            self.cluster,
            self.group,
            self.replica.view(),
            self.replica.config().replica,
        );
        header.cursor_base.set(cursor_from);
        header.event_count.set(events.len() as u32);
        let body = Bytes::from(CursorEvents { events }.to_vec());
        out.push(Output::Send {
            to,
            message: Message::Cursors(Msg::new(header, body)),
        });
    }

    /// Storage's part of an event (a retirement is recorded), then the
    /// event goes out.
    fn on_event(&mut self, event: Event, out: &mut Vec<Output>) {
        if let Event::Retired { epoch } = event {
            // Epoch 0 on disk means "not retired": nobody retires in the
            // epoch a group was created with.
            assert!(epoch > 0, "a retirement recorded at epoch 0");
            if let Err(error) = self.partition_mut().mark_retired(epoch) {
                self.storage_error("record the retirement", &error);
            }
        }
        out.push(Output::Event(event));
    }
}

/// A read for a peer failed: the peer is not served, and asks again or
/// asks another; the group's own writes go on (a damaged entry is reported
/// at open and repaired, not a reason to stop appending).
fn read_failed(what: &str, error: &PartitionError) {
    tracing::warn!(%error, "host: cannot read {what} for a peer");
}

#[cfg(test)]
mod tests;
