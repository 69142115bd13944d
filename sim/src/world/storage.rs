//! The disks' side of the world: serving peers from what is on disk,
//! fsyncs and superblock writes completing, and state transfers.

use bytes::Bytes;
use strand_consensus::{Effects, Status, WriteStage};
use strand_wire::ops::CursorEvents;
use strand_wire::{Body, CommandHeader, CursorsHeader, HeadersHeader, Message, Msg, PrepareHeader};
use zerocopy::IntoBytes;

use super::{CLUSTER, DiskEvent, GROUP, STATE_TRANSFER_TICKS, World};

/// Headers a transferred log reports below its head (as the partition's
/// open reports a journal's worth): the client table is rebuilt from them.
const RECENT_HEADERS_ON_TRANSFER: usize = 1024;
use crate::checkers::Violation;
use crate::network::Packet;

impl World {
    /// Hands `message` from endpoint `from` to the network for `to`.
    pub(super) fn post(&mut self, from: u16, to: u16, message: Message) {
        let packet = Packet { from, to, message };
        self.network
            .send(self.now, packet, &mut self.prng, self.faults_on);
    }

    pub(super) fn serve_headers(&mut self, replica: u8, to: u8, op_min: u64, op_max: u64) {
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
        self.post(u16::from(replica), u16::from(to), message);
    }

    pub(super) fn serve_prepare(&mut self, replica: u8, to: u8, op: u64, checksum: u32) {
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
        self.post(u16::from(replica), u16::from(to), message);
    }

    pub(super) fn ship_cursors(&mut self, replica: u8, to: u8, cursor_from: u64) {
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
        self.post(
            u16::from(replica),
            u16::from(to),
            Message::Cursors(Msg::new(header, body)),
        );
    }

    pub(super) fn fsync_latency(&mut self) -> u64 {
        let spread = self.options.fsync_max_ticks - self.options.fsync_min_ticks;
        self.options.fsync_min_ticks + self.prng.below(spread + 1)
    }

    pub(super) fn schedule(&mut self, replica: u8, after: u64, event: DiskEvent) {
        self.disk_sequence += 1;
        let generation = self.generation[usize::from(replica)];
        self.disk_events.insert(
            (self.now + after, self.disk_sequence),
            (replica, generation, event),
        );
    }

    /// Starts an fsync covering everything written so far, unless one runs.
    pub(super) fn ensure_sync(&mut self, replica: u8) {
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

    pub(super) fn complete_disk_events(&mut self) -> Result<(), Violation> {
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

    /// The replica a state transfer to `replica` copies from, trying slots
    /// in turn from `from`: one that is up and not itself awaiting a
    /// transfer, a current member if any can (a removed replica, retired or
    /// not, keeps its data until it is dropped, and serves transfers).
    fn transfer_source(&self, replica: u8, from: u8) -> Option<u8> {
        let count = self.replicas.len() as u8;
        let members = self.catalog.newest().slots;
        let usable = |candidate: &u8| {
            let index = usize::from(*candidate);
            *candidate != replica
                && !self.disks[index].awaiting_transfer
                && self.replicas[index]
                    .as_ref()
                    .is_some_and(|live| live.status() != Status::AwaitingStateTransfer)
        };
        let order = || (0..count).map(move |offset| (from % count + offset) % count);
        order()
            .filter(|candidate| members.contains(*candidate))
            .find(usable)
            .or_else(|| order().find(usable))
    }

    /// A state transfer to `replica` is due: copy the committed, durable,
    /// undamaged prefix of a source's log, or try again later.
    pub(super) fn complete_transfer(&mut self, replica: u8, from: u8) -> Result<(), Violation> {
        if !self.disks[usize::from(replica)].awaiting_transfer {
            return Ok(()); // one transfer per wait: this one is stale
        }
        let Some(source) = self.transfer_source(replica, from) else {
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
        // A source that has committed nothing hands over an empty log (the
        // newcomer repairs every op once it adopts a view); one whose
        // committed prefix is not all durable and clean yet is asked later.
        if (usable == 0 && commit > 0) || !clean_prefix {
            self.schedule(
                replica,
                STATE_TRANSFER_TICKS,
                DiskEvent::Transfer { from: source + 1 },
            );
            return Ok(());
        }
        let log: Vec<_> = source_disk.log[..usable as usize].to_vec();
        let cursor_events = source_disk.cursor_events[..source_disk.cursor_durable].to_vec();
        let head = log.last().map(|entry| *entry.prepare.header());
        let recent: Vec<PrepareHeader> = log
            .iter()
            .rev()
            .take(RECENT_HEADERS_ON_TRANSFER)
            .rev()
            .map(|entry| *entry.prepare.header())
            .collect();
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
        // As the partition's install does: the log is unsettled until the
        // replica adopts a view.
        state.log_unsettled = true;
        disk.persist(state);
        let cursor_tail = disk.cursor_events.len() as u64;
        self.stats.transfers += 1;
        self.trace
            .record(self.now, u16::from(replica), "state_transfer", &[usable]);
        let mut effects = Effects::new();
        let live = self.live(replica);
        if live.status() == Status::AwaitingStateTransfer {
            live.on_state_transfer_done(head, cursor_tail, &recent, &mut effects);
        }
        self.execute(replica, effects)
    }
}
