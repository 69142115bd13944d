//! One replica's simulated disk: the log of prepares, the superblock, the
//! cursor log, with crash semantics and storage faults.
//!
//! A write is readable at once and durable once an fsync that started after
//! it completes. A crash keeps every durable write and a random prefix of the
//! rest (a torn last entry is found by the recovery scan and cut, so it is
//! the same as losing it); a truncation that was not yet durable may be rolled
//! back. `persisted` groups ack only durable writes, so they never lose an
//! acked op; `replicated` ones really do.

use std::collections::BTreeSet;

use strand_consensus::prng::Prng;
use strand_consensus::{DurableState, Recovered};
use strand_wire::ops::CursorEvent;
use strand_wire::{Durability, Msg, PrepareHeader};

/// One log entry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The prepare.
    pub prepare: Msg<PrepareHeader>,
    /// Fsynced.
    pub durable: bool,
    /// When it was written (the disk's write sequence).
    pub seq: u64,
}

/// A truncation not yet covered by an fsync: the durable entries it removed.
#[derive(Debug, Clone)]
struct PendingTruncation {
    to_op: u64,
    removed_durable: Vec<Entry>,
    seq: u64,
}

/// A storage fault injected before a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageFault {
    /// A bit flip in the body of the entry at `op`.
    BodyFlip(u64),
    /// A bit flip that makes even the header of `op` unreadable.
    HeaderFlip(u64),
    /// The log file was cut at `op` (the ops above, up to the recorded
    /// durable head, are reported damaged).
    Truncated(u64),
    /// One of the two superblock copies was lost (the other is used).
    SuperblockCopy,
}

/// The disk.
#[derive(Debug, Clone, Default)]
pub struct Disk {
    /// Entries at ops `1..=len`.
    pub log: Vec<Entry>,
    pending_truncations: Vec<PendingTruncation>,
    /// The persisted durable state (None until the first persist).
    pub superblock: Option<DurableState>,
    /// The durable log head recorded with the last superblock write (lets
    /// recovery see a log truncated below it).
    pub checkpoint_op: u64,
    /// Entries whose bodies are damaged.
    pub faulty: BTreeSet<u64>,
    /// Entries damaged so badly their headers are unreadable.
    pub faulty_headers: BTreeSet<u64>,
    /// Ops lost to a file truncation below the checkpoint.
    pub missing: BTreeSet<u64>,
    /// The cursor event log.
    pub cursor_events: Vec<CursorEvent>,
    /// Cursor events fsynced.
    pub cursor_durable: usize,
    /// Clean-shutdown mark.
    pub clean: bool,
    /// The partition was created: later opens are not fresh.
    pub created: bool,
    /// Awaiting a state transfer (after a quarantine).
    pub awaiting_transfer: bool,
    /// Counts writes and truncations: an fsync covers those before it started.
    pub write_seq: u64,
    /// The assignment epoch this replica joined the group in (0 for the
    /// replicas the group was created with).
    pub joined_epoch: u32,
    /// The epoch that removed this replica, once it retired (the superblock
    /// records it, so a restart reopens retired).
    pub retired_epoch: Option<u32>,
}

impl Disk {
    /// The empty disk of a replica that joins the group in `epoch`: it
    /// starts awaiting a state transfer.
    pub fn joining(epoch: u32) -> Disk {
        Disk {
            awaiting_transfer: true,
            joined_epoch: epoch,
            ..Disk::default()
        }
    }

    /// The log's head op.
    pub fn head(&self) -> u64 {
        self.log.len() as u64
    }

    /// The highest op such that every op up to it is durable.
    pub fn durable_head(&self) -> u64 {
        self.log.iter().take_while(|entry| entry.durable).count() as u64
    }

    /// Appends (op == head + 1) or rewrites a damaged entry in place.
    pub fn write(&mut self, prepare: Msg<PrepareHeader>) {
        let op = prepare.header().op.get();
        if op <= self.head() {
            let entry = &mut self.log[(op - 1) as usize];
            assert_eq!(
                entry.prepare.checksum(),
                prepare.checksum(),
                "rewrite of another prepare at {op}"
            );
            assert!(
                self.faulty.contains(&op) || self.faulty_headers.contains(&op),
                "rewrite of a healthy entry at op {op}"
            );
            entry.prepare = prepare;
            entry.durable = false;
            self.write_seq += 1;
            entry.seq = self.write_seq;
            self.faulty.remove(&op);
            self.faulty_headers.remove(&op);
            return;
        }
        assert_eq!(
            op,
            self.head() + 1,
            "appends are sequential (op {op}, head {})",
            self.head()
        );
        if op > 1 {
            let parent = self.log[(op - 2) as usize].prepare.checksum();
            assert_eq!(
                prepare.header().parent.get(),
                parent,
                "op {op} does not chain"
            );
        }
        self.missing.remove(&op);
        self.write_seq += 1;
        self.log.push(Entry {
            prepare,
            durable: false,
            seq: self.write_seq,
        });
    }

    /// Truncates to `op`; durable once the next fsync completes.
    pub fn truncate(&mut self, op: u64) {
        if op >= self.head() {
            return;
        }
        let removed: Vec<Entry> = self.log.split_off(op as usize);
        let removed_durable: Vec<Entry> = removed
            .into_iter()
            .take_while(|entry| entry.durable)
            .collect();
        self.write_seq += 1;
        self.pending_truncations.push(PendingTruncation {
            to_op: op,
            removed_durable,
            seq: self.write_seq,
        });
        self.faulty.retain(|faulty| *faulty <= op);
        self.faulty_headers.retain(|faulty| *faulty <= op);
        self.missing.retain(|missing| *missing <= op);
    }

    /// An fsync completed that started at write sequence `before` (and with
    /// the cursor log `cursor_len` long): every write and truncation before it
    /// is durable. Returns the ops of the truncations it settled.
    pub fn synced(&mut self, before: u64, cursor_len: usize) -> Vec<u64> {
        for entry in self.log.iter_mut().filter(|entry| entry.seq <= before) {
            entry.durable = true;
        }
        self.cursor_durable = self
            .cursor_durable
            .max(cursor_len.min(self.cursor_events.len()));
        let settled: Vec<u64> = self
            .pending_truncations
            .iter()
            .filter(|truncation| truncation.seq <= before)
            .map(|truncation| truncation.to_op)
            .collect();
        self.pending_truncations
            .retain(|truncation| truncation.seq > before);
        settled
    }

    /// Whether anything written is not durable yet.
    pub fn dirty(&self) -> bool {
        self.log.iter().any(|entry| !entry.durable)
            || self.cursor_durable < self.cursor_events.len()
            || !self.pending_truncations.is_empty()
    }

    /// A crash: durable writes survive, a random prefix of the rest too; an
    /// unsettled truncation may be undone.
    pub fn crash(&mut self, prng: &mut Prng) {
        if !self.pending_truncations.is_empty() && prng.chance(1, 2) {
            // The unsettled truncations never reached the disk: undo them,
            // newest first, and their durable entries return.
            let truncations = std::mem::take(&mut self.pending_truncations);
            for truncation in truncations.into_iter().rev() {
                self.log.truncate(truncation.to_op as usize);
                self.log.extend(truncation.removed_durable);
            }
        }
        self.pending_truncations.clear();
        // Undurable entries below the last durable one are in-place rewrites
        // of damaged entries: each either reached the disk or is still
        // damaged; the entries around them stay. Above it, a random prefix
        // of the unsynced appends survives.
        let durable = self
            .log
            .iter()
            .rposition(|entry| entry.durable)
            .map_or(0, |index| index + 1);
        for (index, entry) in self.log[..durable].iter_mut().enumerate() {
            if !entry.durable && prng.chance(1, 2) {
                self.faulty.insert(index as u64 + 1);
            }
        }
        let undurable = self.log.len() - durable;
        let keep = durable + prng.below(undurable as u64 + 1) as usize;
        self.log.truncate(keep);
        for entry in &mut self.log {
            entry.durable = true;
        }
        let cursor_undurable = self.cursor_events.len() - self.cursor_durable;
        let cursor_keep = self.cursor_durable + prng.below(cursor_undurable as u64 + 1) as usize;
        self.cursor_events.truncate(cursor_keep);
        self.cursor_durable = self.cursor_events.len();
        let head = self.head();
        self.faulty.retain(|op| *op <= head);
        self.faulty_headers.retain(|op| *op <= head);
        self.clean = false;
    }

    /// A clean shutdown: everything fsynced, the clean mark written.
    pub fn shut_down(&mut self) {
        let cursor_len = self.cursor_events.len();
        self.synced(self.write_seq, cursor_len);
        self.clean = true;
    }

    /// Persists the durable state (atomically), recording the durable head.
    pub fn persist(&mut self, state: DurableState) {
        self.superblock = Some(state);
        self.checkpoint_op = self.durable_head();
        self.clean = false;
    }

    /// Injects `fault`.
    pub fn inject(&mut self, fault: StorageFault) {
        match fault {
            StorageFault::BodyFlip(op) => {
                self.faulty.insert(op);
            }
            StorageFault::HeaderFlip(op) => {
                self.faulty_headers.insert(op);
            }
            StorageFault::Truncated(op) => {
                // The partition detects a cut file (its index and superblock
                // know the durable head), so every op cut is reported.
                let head = self.head();
                self.log.truncate(op as usize);
                for missing in op + 1..=head {
                    self.missing.insert(missing);
                }
                self.faulty.retain(|faulty| *faulty <= op);
                self.faulty_headers.retain(|faulty| *faulty <= op);
            }
            StorageFault::SuperblockCopy => {}
        }
    }

    /// Picks a fault that recovery can see (never a silent loss of durable data).
    pub fn pick_fault(&self, prng: &mut Prng) -> Option<StorageFault> {
        let head = self.head();
        if head == 0 {
            return Some(StorageFault::SuperblockCopy);
        }
        let op = 1 + prng.below(head);
        match prng.below(4) {
            0 => Some(StorageFault::BodyFlip(op)),
            1 => Some(StorageFault::HeaderFlip(op)),
            2 if self.checkpoint_op > 0 => Some(StorageFault::Truncated(
                prng.below(self.checkpoint_op.min(head)),
            )),
            _ => Some(StorageFault::SuperblockCopy),
        }
    }

    /// What the replica finds when it opens.
    pub fn recovered(&self, durability: Durability) -> Recovered {
        for (index, entry) in self.log.iter().enumerate() {
            assert_eq!(
                entry.prepare.header().op.get(),
                index as u64 + 1,
                "disk log misaligned"
            );
        }
        let headers = self
            .log
            .iter()
            .map(|entry| *entry.prepare.header())
            .filter(|header| !self.faulty_headers.contains(&header.op.get()))
            .collect();
        let mut faulty: BTreeSet<u64> = self.faulty.union(&self.faulty_headers).copied().collect();
        faulty.extend(self.missing.iter().copied());
        Recovered {
            state: self.superblock.clone().unwrap_or_default(),
            headers,
            faulty: faulty.into_iter().collect(),
            log_head: self.head(),
            cursor_tail: self.cursor_events.len() as u64,
            trusted: durability == Durability::Persisted || self.clean || !self.created,
            awaiting_state_transfer: self.awaiting_transfer,
            fresh: !self.created,
            joined_epoch: self.joined_epoch,
        }
    }

    /// The record offset end of the log up to `op`.
    pub fn offset_end(&self, op: u64) -> u64 {
        if op == 0 {
            return 0;
        }
        self.log
            .get((op - 1) as usize)
            .map_or(0, |entry| entry.prepare.header().offset_end())
    }
}
