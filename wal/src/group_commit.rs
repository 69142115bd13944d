//! Group commit, pipelined: what the writer knows about each open file's
//! writes and fsyncs in flight, gathering one turn's requests into one
//! [`FileBatch`] per file, and turning finished batches into acks, in order.
//!
//! Each file's writes are numbered by batch (`seq`, from 1 after open). The
//! file keeps three watermarks: `written_seq` (every batch up to it finished
//! its writes), `durable_seq` (every batch up to it is covered by a completed
//! fdatasync) and `last_seq` (the newest batch planned). A waiter remembers the
//! batch that holds its bytes and is answered when the right watermark passes
//! it, strictly in request order.
//!
//! The rules this module exists to keep:
//! - **Never durable before the fsync.** `durable_seq` moves only when an
//!   fdatasync completes successfully, and only to what that fsync covers: the
//!   batches whose writes had all finished when it was issued. A sync linked
//!   after a batch's writes is used only when the file has no other write in
//!   flight; otherwise the writes go alone and a bare sync follows once they
//!   have finished.
//! - **One fsync in flight per file.** Two concurrent fsyncs of one open file
//!   could split a writeback error between them (the kernel reports it once
//!   per open file), so a second one is never issued before the first returns.
//! - **A failed file stays failed.** The first failed write or fsync poisons
//!   the file and fails every waiter not yet answered (a `Written` ack whose
//!   bytes are known written still succeeds), even those whose own fsync is
//!   still in flight and may yet succeed.
//!
//! Bounds: at most [`WRITE_BATCHES_IN_FLIGHT_MAX`] write batches and one
//! fdatasync in flight per file; requests beyond them wait in the queue, in
//! order, for a later turn.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;

use crate::error::{IoOp, PoisonCause, WalError};
use crate::frame::Frame;
use crate::metrics;
use crate::preallocate::Preallocation;
use crate::request::{Ack, Completion, CompletionKind, FileId, FileRange};
use crate::storage::{BatchOutcome, FileBatch};

/// Write batches one file may have in flight at once. A turn adds at most one
/// batch per file, so this is also how many turns of one file overlap; a
/// file's requests beyond it wait in the queue for a later turn.
pub const WRITE_BATCHES_IN_FLIGHT_MAX: usize = 4;

/// Where one write batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteState {
    InFlight,
    Finished,
    /// The write failed; the file is poisoned and this batch never finishes.
    Failed,
}

/// A write batch started and not yet retired.
#[derive(Debug, Clone, Copy)]
struct WriteInFlight {
    id: u64,
    seq: u64,
    /// The file's append end once this batch is written.
    end: u64,
    state: WriteState,
}

/// The fdatasync in flight and what it covers.
#[derive(Debug, Clone, Copy)]
struct SyncInFlight {
    id: u64,
    /// Every batch up to this one had finished writing when the sync was issued.
    seq: u64,
    /// The bytes below this end are durable once it completes.
    end: u64,
}

/// Someone waiting for an answer.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Waiter {
    /// An append or an in-place write, held by batch `seq`.
    Write {
        user_data: u64,
        range: FileRange,
        ack: Ack,
        seq: u64,
    },
    /// A sync of every batch up to `seq`.
    Sync { user_data: u64, seq: u64 },
}

/// What the writer knows about one open file.
#[derive(Debug, Clone)]
pub(crate) struct FileState {
    /// Current path (follows renames).
    pub path: PathBuf,
    /// Where the next append goes: the end of everything queued so far.
    pub append_end: u64,
    /// End of the bytes known written.
    pub written_end: u64,
    /// End of the bytes known durable.
    pub durable_end: u64,
    /// Set by the first failed write, sync or truncate; never cleared.
    pub poisoned: Option<PoisonCause>,
    /// Zero-filled room ahead of the appends (see `preallocate`).
    pub preallocation: Preallocation,
    /// Appended past the page cache (see `direct`): one write batch in
    /// flight at a time, no zero-filled room.
    pub direct: bool,
    last_seq: u64,
    written_seq: u64,
    durable_seq: u64,
    writes: VecDeque<WriteInFlight>,
    sync: Option<SyncInFlight>,
    waiters: VecDeque<Waiter>,
}

impl FileState {
    /// A file whose first `len` bytes are on disk and durable.
    pub fn recovered(path: PathBuf, len: u64) -> FileState {
        FileState {
            path,
            append_end: len,
            written_end: len,
            durable_end: len,
            poisoned: None,
            preallocation: Preallocation::new(len),
            direct: false,
            last_seq: 0,
            written_seq: 0,
            durable_seq: 0,
            writes: VecDeque::new(),
            sync: None,
            waiters: VecDeque::new(),
        }
    }

    /// Checks the ordering of the watermarks (our own state: a violation is a bug).
    pub fn assert_invariants(&self, file: FileId) {
        assert!(
            self.durable_end <= self.written_end && self.written_end <= self.append_end,
            "{file}: durable {} <= written {} <= append {} violated",
            self.durable_end,
            self.written_end,
            self.append_end
        );
        assert!(
            self.durable_seq <= self.written_seq && self.written_seq <= self.last_seq,
            "{file}: batch watermarks durable {} <= written {} <= last {} violated",
            self.durable_seq,
            self.written_seq,
            self.last_seq
        );
        if let Some(sync) = self.sync {
            let linked = self.writes.front().is_some_and(|write| write.id == sync.id);
            assert!(
                sync.seq <= self.written_seq || linked || self.poisoned.is_some(),
                "{file}: an fsync covers only finished writes (or is linked after its own)"
            );
        }
        assert!(self.writes.len() <= WRITE_BATCHES_IN_FLIGHT_MAX);
    }

    /// Marks the file failed; the first cause wins.
    pub fn poison(&mut self, op: IoOp, errno: i32) {
        if self.poisoned.is_none() {
            self.poisoned = Some(PoisonCause { op, errno });
        }
    }

    /// True when nothing of this file is in flight and nobody waits on it:
    /// a truncate, rename or close may run.
    pub fn is_quiescent(&self) -> bool {
        self.sync.is_none()
            && self.waiters.is_empty()
            && self.writes.iter().all(|w| w.state != WriteState::InFlight)
    }

    /// Write batches of this file still tracked: in flight, or finished
    /// behind one that is not (bounded by [`WRITE_BATCHES_IN_FLIGHT_MAX`]).
    pub fn writes_retained(&self) -> usize {
        self.writes.len()
    }

    /// Write batches whose writes have not finished.
    pub fn writes_in_flight(&self) -> usize {
        self.writes
            .iter()
            .filter(|write| write.state == WriteState::InFlight)
            .count()
    }

    /// Bytes queued after what the next fdatasync would start from: the end
    /// the fsync in flight covers, or the written end when none is.
    pub fn bytes_not_yet_syncing(&self) -> u64 {
        let start = self.sync.map_or(self.written_end, |sync| sync.end);
        self.append_end.saturating_sub(start)
    }

    /// True when every batch planned so far is durable.
    pub fn all_durable(&self) -> bool {
        self.durable_seq == self.last_seq
    }

    /// Numbers a new batch.
    fn next_seq(&mut self) -> u64 {
        self.last_seq += 1;
        self.last_seq
    }

    fn push_waiter(&mut self, waiter: Waiter) {
        self.waiters.push_back(waiter);
    }

    /// Records that `batch` (numbered `seq`) has been handed to the storage.
    /// Its sync, if any, must have been allowed by [`FileState::can_link_sync`]
    /// (or be a bare sync from [`FileState::bare_sync`]).
    pub fn on_started(&mut self, batch: &FileBatch, seq: u64) {
        let file = batch.file;
        if !batch.is_empty() {
            assert!(seq > self.written_seq, "{file}: batch {seq} is new");
            self.writes.push_back(WriteInFlight {
                id: batch.id,
                seq,
                end: self.append_end,
                state: WriteState::InFlight,
            });
        }
        if batch.sync {
            assert!(self.sync.is_none(), "{file}: one fsync in flight per file");
            let (seq, end) = if batch.is_empty() {
                (self.written_seq, self.written_end)
            } else {
                assert!(
                    self.writes.len() == 1,
                    "{file}: a linked sync follows the file's only write in flight"
                );
                (seq, self.append_end)
            };
            self.sync = Some(SyncInFlight {
                id: batch.id,
                seq,
                end,
            });
        }
        self.assert_invariants(file);
    }

    /// Whether a batch starting now may carry a linked fdatasync: no other
    /// write or fsync of the file is in flight, so the sync covers everything
    /// written before it.
    pub fn can_link_sync(&self) -> bool {
        self.poisoned.is_none() && self.sync.is_none() && self.writes.is_empty()
    }

    /// Whether a bare fdatasync would answer a waiter now: the first waiter
    /// wanting durability has its bytes written but not yet synced, and no
    /// fsync of the file is in flight.
    pub fn needs_bare_sync(&self) -> bool {
        if self.poisoned.is_some() || self.sync.is_some() {
            return false;
        }
        let needed = self.waiters.iter().find_map(|waiter| match *waiter {
            Waiter::Write {
                ack: Ack::Durable,
                seq,
                ..
            }
            | Waiter::Sync { seq, .. } => Some(seq),
            Waiter::Write { .. } => None,
        });
        needed.is_some_and(|seq| seq > self.durable_seq && seq <= self.written_seq)
    }

    /// The bare fdatasync to issue now, if [`FileState::needs_bare_sync`]:
    /// it covers every write finished so far.
    pub fn bare_sync(&self, file: FileId, id: u64) -> Option<FileBatch> {
        self.needs_bare_sync().then(|| FileBatch {
            id,
            file,
            offset: self.written_end,
            frames: Vec::new(),
            sync: true,
            outcome: None,
        })
    }

    /// Applies a finished batch to the watermarks (or poisons the file);
    /// `shared`: its sync was part of a shared sync.
    pub fn on_finished(&mut self, batch: &FileBatch, shared: bool) {
        let file = batch.file;
        let outcome = batch
            .outcome
            .expect("every batch is executed before it settles");
        let wrote = !batch.is_empty();
        match outcome {
            BatchOutcome::Done {
                synced,
                sync_latency,
            } => {
                assert_eq!(synced, batch.sync, "{file}: a requested sync was skipped");
                if wrote {
                    self.retire_write(batch.id, WriteState::Finished);
                }
                if synced {
                    self.retire_sync(batch.id, sync_latency, shared);
                }
            }
            BatchOutcome::WriteFailed { errno } => {
                assert!(wrote, "{file}: a bare sync has no write to fail");
                self.retire_write(batch.id, WriteState::Failed);
                if batch.sync {
                    self.take_sync(batch.id);
                }
                self.poison(IoOp::Write, errno);
            }
            BatchOutcome::SyncFailed { errno } => {
                if wrote {
                    self.retire_write(batch.id, WriteState::Finished);
                }
                self.take_sync(batch.id);
                self.poison(IoOp::Sync, errno);
            }
        }
        self.assert_invariants(file);
    }

    fn retire_write(&mut self, id: u64, state: WriteState) {
        let write = self
            .writes
            .iter_mut()
            .find(|write| write.id == id)
            .expect("a finished write batch was in flight");
        assert_eq!(write.state, WriteState::InFlight, "a batch finishes once");
        write.state = state;
        while let Some(front) = self.writes.front() {
            if front.state != WriteState::Finished {
                break;
            }
            self.written_seq = front.seq;
            self.written_end = self.written_end.max(front.end);
            self.writes.pop_front();
        }
    }

    fn take_sync(&mut self, id: u64) -> SyncInFlight {
        let sync = self.sync.take().expect("a finished sync was in flight");
        assert_eq!(sync.id, id, "the finished sync is the one in flight");
        sync
    }

    fn retire_sync(&mut self, id: u64, latency: Option<std::time::Duration>, shared: bool) {
        let sync = self.take_sync(id);
        assert!(
            sync.seq <= self.written_seq,
            "an fsync covers only finished writes"
        );
        let covered = sync.end.saturating_sub(self.durable_end);
        metrics::record_sync(covered, latency);
        if shared {
            self.preallocation.on_shared_sync();
        } else {
            self.preallocation.on_sync(covered);
        }
        self.durable_seq = self.durable_seq.max(sync.seq);
        self.durable_end = self.durable_end.max(sync.end);
    }

    /// Answers every waiter that can be answered, in order; after a failure,
    /// answers all of them.
    pub fn release(&mut self, file: FileId, out: &mut Vec<Completion>) {
        if let Some(cause) = self.poisoned {
            let error = WalError::from_errno(file, cause.op, cause.errno);
            while let Some(waiter) = self.waiters.pop_front() {
                let written = matches!(
                    waiter,
                    Waiter::Write { ack: Ack::Written, seq, .. } if seq <= self.written_seq
                );
                out.push(if written {
                    self.success(file, waiter)
                } else {
                    failure(file, waiter, error.clone())
                });
            }
            return;
        }
        while let Some(front) = self.waiters.front() {
            let ready = match *front {
                Waiter::Write {
                    ack: Ack::Written,
                    seq,
                    ..
                } => seq <= self.written_seq,
                Waiter::Write { seq, .. } | Waiter::Sync { seq, .. } => seq <= self.durable_seq,
            };
            if !ready {
                break;
            }
            let waiter = self.waiters.pop_front().expect("front exists");
            out.push(self.success(file, waiter));
        }
    }

    fn success(&self, file: FileId, waiter: Waiter) -> Completion {
        let (user_data, kind, range) = match waiter {
            Waiter::Write {
                user_data,
                range,
                ack,
                seq,
            } => {
                let kind = match ack {
                    Ack::Durable => {
                        assert!(seq <= self.durable_seq, "{file}: durable before its fsync");
                        assert!(
                            range.end() <= self.durable_end,
                            "{file}: durable ack past the durable end"
                        );
                        CompletionKind::Durable
                    }
                    Ack::Written => {
                        assert!(seq <= self.written_seq, "{file}: written before its write");
                        CompletionKind::Written
                    }
                };
                (user_data, kind, range)
            }
            Waiter::Sync { user_data, seq } => {
                assert!(seq <= self.durable_seq, "{file}: synced before its fsync");
                let range = FileRange {
                    offset: 0,
                    len: self.durable_end,
                };
                (user_data, CompletionKind::Synced, range)
            }
        };
        Completion {
            file,
            user_data,
            kind,
            result: Ok(range),
        }
    }
}

/// One turn's new batches, at most one per file, in order of first appearance
/// (so the simulator sees a deterministic order).
#[derive(Debug, Default)]
pub(crate) struct Turn {
    batches: Vec<FileBatch>,
    /// Each batch's number in its file, and whether a waiter wants it synced.
    planned: Vec<(u64, bool)>,
    index: BTreeMap<FileId, usize>,
}

impl Turn {
    /// True when `file` has a batch in this turn.
    pub fn contains(&self, file: FileId) -> bool {
        self.index.contains_key(&file)
    }

    /// True when nothing is batched.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Appends `frame` to `file`'s batch (opening one at the append end, its
    /// frame list taken from `spare` when one is there).
    pub fn add_append(
        &mut self,
        file: FileId,
        state: &mut FileState,
        frame: Frame,
        user_data: u64,
        ack: Ack,
        spare: &mut Vec<Vec<Frame>>,
    ) {
        let range = FileRange {
            offset: state.append_end,
            len: frame.len(),
        };
        let slot = self.slot(file, state, state.append_end, spare);
        let batch = &mut self.batches[slot];
        assert_eq!(
            batch.offset + batch.len(),
            range.offset,
            "{file}: appends are contiguous"
        );
        batch.frames.push(frame);
        state.append_end += range.len;
        let (seq, wants_sync) = &mut self.planned[slot];
        *wants_sync |= ack == Ack::Durable;
        let seq = *seq;
        state.push_waiter(Waiter::Write {
            user_data,
            range,
            ack,
            seq,
        });
    }

    /// Opens `file`'s batch for an in-place write of `frame` at `offset` (the
    /// caller checked that the file has no batch in this turn).
    pub fn add_write_at(
        &mut self,
        file: FileId,
        state: &mut FileState,
        offset: u64,
        frame: Frame,
        user_data: u64,
        ack: Ack,
    ) {
        assert!(!self.contains(file), "{file}: an in-place write goes alone");
        let range = FileRange {
            offset,
            len: frame.len(),
        };
        assert!(range.end() <= state.append_end);
        let slot = self.slot(file, state, offset, &mut Vec::new());
        self.batches[slot].frames.push(frame);
        let (seq, wants_sync) = &mut self.planned[slot];
        *wants_sync |= ack == Ack::Durable;
        let seq = *seq;
        state.push_waiter(Waiter::Write {
            user_data,
            range,
            ack,
            seq,
        });
    }

    /// Adds a sync waiter: of this turn's batch of `file` if it has one, else
    /// of every batch planned so far.
    pub fn add_sync(&mut self, file: FileId, state: &mut FileState, user_data: u64) {
        let seq = match self.index.get(&file) {
            Some(&slot) => {
                self.planned[slot].1 = true;
                self.planned[slot].0
            }
            None => state.last_seq,
        };
        state.push_waiter(Waiter::Sync { user_data, seq });
    }

    /// The batches to start, with their numbers and whether a waiter wants
    /// them synced, leaving the turn empty.
    pub fn take(&mut self) -> Vec<(FileBatch, u64, bool)> {
        self.index.clear();
        let planned = std::mem::take(&mut self.planned);
        std::mem::take(&mut self.batches)
            .into_iter()
            .zip(planned)
            .map(|(batch, (seq, wants_sync))| (batch, seq, wants_sync))
            .collect()
    }

    fn slot(
        &mut self,
        file: FileId,
        state: &mut FileState,
        offset: u64,
        spare: &mut Vec<Vec<Frame>>,
    ) -> usize {
        if let Some(&slot) = self.index.get(&file) {
            return slot;
        }
        let frames = spare.pop().unwrap_or_default();
        debug_assert!(frames.is_empty(), "spare frame lists are emptied");
        self.batches.push(FileBatch {
            id: 0,
            file,
            offset,
            frames,
            sync: false,
            outcome: None,
        });
        self.planned.push((state.next_seq(), false));
        self.index.insert(file, self.batches.len() - 1);
        self.batches.len() - 1
    }
}

fn failure(file: FileId, waiter: Waiter, error: WalError) -> Completion {
    let (user_data, kind) = match waiter {
        Waiter::Write {
            user_data,
            ack: Ack::Durable,
            ..
        } => (user_data, CompletionKind::Durable),
        Waiter::Write { user_data, .. } => (user_data, CompletionKind::Written),
        Waiter::Sync { user_data, .. } => (user_data, CompletionKind::Synced),
    };
    metrics::record_error(error.metric_kind());
    Completion {
        file,
        user_data,
        kind,
        result: Err(error),
    }
}
