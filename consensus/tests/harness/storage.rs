//! One replica's disk: the entries it holds, what is fsynced, its
//! superblock and cursor log, and what a crash loses.

use std::collections::BTreeSet;

use strand_consensus::*;
use strand_wire::*;

/// One replica's disk.
#[derive(Debug, Clone, Default)]
pub struct Storage {
    /// Entries at ops 1..=len.
    pub log: Vec<Msg<PrepareHeader>>,
    /// Entries at or below this op are fsynced.
    pub durable_op: u64,
    /// The persisted durable state (None: never persisted).
    pub state: Option<DurableState>,
    /// Ops whose entries are damaged (body unreadable).
    pub faulty: BTreeSet<u64>,
    /// Ops whose entries are damaged so badly the header is unreadable too.
    pub faulty_headers: BTreeSet<u64>,
    /// Cursor events (count).
    pub cursor_tail: u64,
    /// The cursor events themselves, in log order: (consumer, offset).
    pub cursor_events: Vec<(String, u64)>,
    pub cursor_durable: u64,
    /// A clean shutdown mark.
    pub clean: bool,
    /// ... taken while the replica could resume in its view.
    pub stopped_in_view: bool,
    /// The partition was created (its first superblock written): later opens are not fresh.
    pub created: bool,
    /// The epoch that placed this copy (0: a founding replica).
    pub joined_epoch: u32,
    /// Open reports headers from this op on only (the window of committed
    /// headers a partition reads back, or what retention left).
    pub headers_from: u64,
}

impl Storage {
    pub fn head(&self) -> u64 {
        self.log.len() as u64
    }

    pub(super) fn write(&mut self, prepare: Msg<PrepareHeader>) {
        let op = prepare.header().op.get();
        if op <= self.head() {
            let existing = &self.log[(op - 1) as usize];
            assert_eq!(
                existing.checksum(),
                prepare.checksum(),
                "in-place rewrite of a different prepare"
            );
            assert!(
                self.faulty.contains(&op) || self.faulty_headers.contains(&op),
                "rewrite of a healthy op {op}"
            );
            self.log[(op - 1) as usize] = prepare;
            self.faulty.remove(&op);
            self.faulty_headers.remove(&op);
            return;
        }
        assert_eq!(op, self.head() + 1, "appends are sequential");
        if op > 1 {
            assert_eq!(
                prepare.header().parent.get(),
                self.log[(op - 2) as usize].checksum(),
                "hash chain"
            );
        }
        self.log.push(prepare);
    }

    pub(super) fn truncate(&mut self, op: u64) {
        self.log.truncate(op as usize);
        self.durable_op = self.durable_op.min(op);
        self.faulty.retain(|faulty| *faulty <= op);
        self.faulty_headers.retain(|faulty| *faulty <= op);
    }

    /// A crash: everything not fsynced is lost.
    pub fn crash(&mut self) {
        self.log.truncate(self.durable_op as usize);
        self.cursor_tail = self.cursor_durable;
        self.cursor_events.truncate(self.cursor_durable as usize);
        self.faulty.retain(|op| *op <= self.durable_op);
        self.clean = false;
    }

    pub fn recovered(&self, durability: Durability) -> Recovered {
        let headers = self
            .log
            .iter()
            .filter(|prepare| !self.faulty_headers.contains(&prepare.header().op.get()))
            .filter(|prepare| prepare.header().op.get() >= self.headers_from)
            .map(|prepare| *prepare.header())
            .collect();
        let faulty = self.faulty.union(&self.faulty_headers).copied().collect();
        let fresh = !self.created;
        Recovered {
            state: self.state.clone().unwrap_or_default(),
            headers,
            faulty,
            log_head: self.head(),
            cursor_tail: self.cursor_tail,
            trusted: durability == Durability::Persisted || self.clean || fresh,
            awaiting_state_transfer: false,
            fresh,
            stopped_in_view: self.clean && self.stopped_in_view && !fresh,
            joined_epoch: self.joined_epoch,
            log_start: 1,
            log_start_offset: 0,
        }
    }
}

/// How a replica's storage completes writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Every write is fsynced at once.
    Immediate,
    /// Writes are queued; `Cluster::sync` fsyncs them.
    Manual,
}
