//! A turn of the writer: take the queued requests in order, plan appends,
//! in-place writes and syncs into per-file batches, hold back what must wait,
//! run a truncate, rename or close alone; and the completions that answer them.

use std::collections::{BTreeSet, VecDeque};

use crate::error::{IoOp, WalError};
use crate::group_commit::{Turn, WRITE_BATCHES_IN_FLIGHT_MAX};
use crate::metrics;
use crate::request::{Completion, CompletionKind, FileId, FileRange, Request};
use crate::storage::Storage;

use super::{SHARED_SYNC_FILES_MIN, WalCore};

impl<S: Storage> WalCore<S> {
    /// Runs one turn: settles the I/O that finished, then plans every queued
    /// request, starts the turn's batches (over a synchronous backend: runs
    /// them) and pushes every completion that is due into `out`. Requests that
    /// must wait (their file is at its in-flight bound or byte cap, or a
    /// truncate, rename or close whose file is busy) stay queued, in order,
    /// for a later turn.
    pub fn run_turn(&mut self, out: &mut Vec<Completion>) {
        // The fsyncs now due are issued after planning, so that this turn's
        // appends to the same files can ride on them (linked).
        self.reap_io(out);
        let mut turn = Turn::default();
        let mut deferred = VecDeque::new();
        let mut deferred_files = BTreeSet::new();
        while let Some(request) = self.queue.pop_front() {
            let file = request.file();
            if deferred_files.contains(&file) || self.must_wait(&request, &turn) {
                deferred_files.insert(file);
                deferred.push_back(request);
                continue;
            }
            match request {
                Request::Append { .. } | Request::Sync { .. } => {
                    self.plan_data(request, &mut turn, out)
                }
                Request::WriteAt { .. } => {
                    self.plan_write_at(request, &mut turn, out);
                    // Later requests of the file go to a later turn's batch.
                    deferred_files.insert(file);
                }
                _ => {
                    if turn.contains(file) {
                        self.flush(&mut turn, out);
                    }
                    if self.files.get(&file).is_some_and(|s| !s.is_quiescent()) {
                        deferred_files.insert(file);
                        deferred.push_back(request);
                        continue;
                    }
                    self.run_alone(request, out);
                }
            }
        }
        self.flush(&mut turn, out);
        assert!(turn.is_empty() && self.queue.is_empty());
        self.queue = deferred;
        self.poll_io(out);
        self.release_idle_descriptors();
    }

    /// True when `request` must wait for a later turn: an append past its
    /// file's byte cap or in-flight bound, or an in-place write while the
    /// file has writes in flight or a batch in this turn.
    fn must_wait(&self, request: &Request, turn: &Turn) -> bool {
        let file = request.file();
        let Some(state) = self.files.get(&file).filter(|s| s.poisoned.is_none()) else {
            return false;
        };
        match request {
            Request::Append { frame, .. } => {
                let queued = state.bytes_not_yet_syncing();
                let over_cap = queued > 0 && queued + frame.len() > self.sync_bytes_max;
                // A direct file's next write may rewrite the block its last
                // one ends in: never two of them in flight.
                let at_bound = !turn.contains(file)
                    && if state.direct {
                        state.writes_in_flight() > 0
                    } else {
                        state.writes_retained() >= WRITE_BATCHES_IN_FLIGHT_MAX
                    };
                over_cap || at_bound
            }
            Request::WriteAt { .. } => turn.contains(file) || state.writes_retained() > 0,
            _ => false,
        }
    }

    /// Adds an append or sync to the turn, or answers it at once.
    fn plan_data(&mut self, request: Request, turn: &mut Turn, out: &mut Vec<Completion>) {
        let file = request.file();
        let kind = request.completion_kind();
        let user_data = request.user_data();
        let state = match self
            .files
            .get_mut(&file)
            .ok_or(WalError::UnknownFile { file })
        {
            Ok(state) => state,
            Err(error) => return out.push(rejected(file, user_data, kind, error)),
        };
        if let Some(cause) = state.poisoned {
            let error = WalError::Poisoned { file, cause };
            return out.push(rejected(file, user_data, kind, error));
        }
        self.note_use(file);
        let state = self.files.get_mut(&file).expect("checked above");
        match request {
            Request::Append {
                frame,
                user_data,
                ack,
                ..
            } => turn.add_append(file, state, frame, user_data, ack, &mut self.spare_frames),
            Request::Sync { user_data, .. } => {
                if !turn.contains(file) && state.is_quiescent() && state.all_durable() {
                    let range = FileRange {
                        offset: 0,
                        len: state.durable_end,
                    };
                    return out.push(completion(file, user_data, kind, Ok(range)));
                }
                turn.add_sync(file, state, user_data);
            }
            _ => unreachable!("only appends and syncs are planned here"),
        }
        self.touched.insert(file);
    }

    /// Adds an in-place write to the turn as its file's batch, or rejects it.
    fn plan_write_at(&mut self, request: Request, turn: &mut Turn, out: &mut Vec<Completion>) {
        let Request::WriteAt {
            file,
            offset,
            frame,
            user_data,
            ack,
        } = request
        else {
            unreachable!("only in-place writes are planned here");
        };
        let kind = request_kind(ack);
        if let Err(error) = self.stop_direct(file) {
            return out.push(rejected(file, user_data, kind, error));
        }
        let state = match self.writable(file) {
            Ok(state) => state,
            Err(error) => return out.push(rejected(file, user_data, kind, error)),
        };
        let end = state.append_end;
        let len = frame.len();
        if offset.checked_add(len).is_none_or(|last| last > end) {
            let error = WalError::WriteBeyondEnd {
                file,
                offset,
                len,
                end,
            };
            return out.push(rejected(file, user_data, kind, error));
        }
        turn.add_write_at(file, state, offset, frame, user_data, ack);
        self.note_use(file);
        self.touched.insert(file);
    }

    /// Writes `file` through the page cache again, if it was direct: an
    /// in-place write goes where it must, not at the end (nothing of the file
    /// is in flight: such a write waits for that). Fails when the backend
    /// cannot switch the file back.
    fn stop_direct(&mut self, file: FileId) -> Result<(), WalError> {
        let Some(state) = self.files.get_mut(&file).filter(|state| state.direct) else {
            return Ok(());
        };
        assert_eq!(state.writes_retained(), 0, "{file}: nothing in flight");
        state.direct = self.storage.set_direct(file, state.append_end, false);
        if state.direct {
            return Err(WalError::Io {
                file,
                op: IoOp::Open,
                errno: libc::EIO,
            });
        }
        Ok(())
    }

    /// Starts the turn's batches (each with a linked fdatasync when a waiter
    /// wants one and its file has nothing else in flight), then answers what
    /// is due and issues the bare fsyncs now needed.
    fn flush(&mut self, turn: &mut Turn, out: &mut Vec<Completion>) {
        let mut batches = Vec::new();
        let mut files = Vec::new();
        let planned = turn.take();
        // Many files wanting a sync: their writes go alone and one shared
        // sync follows them all (see `settle_touched`).
        // So does any file while a shared sync runs: it joins the next one.
        let wanting = planned.iter().filter(|(_, _, wants)| *wants).count();
        let share = (wanting >= SHARED_SYNC_FILES_MIN || !self.shared_sync.is_empty())
            && self.storage.shares_syncs();
        for (mut batch, seq, wants_sync) in planned {
            let state = self
                .files
                .get_mut(&batch.file)
                .expect("planned files are open");
            batch.id = self.next_batch;
            self.next_batch += 1;
            let slot_free = self.syncs_in_flight < self.syncs_in_flight_max;
            batch.sync = wants_sync && !share && slot_free && state.can_link_sync();
            self.syncs_in_flight += usize::from(batch.sync);
            state.on_started(&batch, seq);
            files.push(batch.file);
            batches.push(batch);
        }
        self.start(batches);
        for file in files {
            self.fill_ahead(file);
        }
        self.settle_touched(out, true);
    }

    /// Runs a truncate, rename or close by itself.
    fn run_alone(&mut self, request: Request, out: &mut Vec<Completion>) {
        let file = request.file();
        let user_data = request.user_data();
        let kind = request.completion_kind();
        if self.files.contains_key(&file) {
            self.note_use(file);
        }
        let result = match request {
            Request::Truncate { len, .. } => self.truncate(file, len),
            Request::Rename { to, .. } => self.rename(file, to),
            Request::Close { .. } => self.close(file),
            _ => unreachable!("appends, writes and syncs are batched"),
        };
        if let Err(error) = &result {
            metrics::record_error(error.metric_kind());
        }
        out.push(completion(file, user_data, kind, result));
    }
}

fn request_kind(ack: crate::request::Ack) -> CompletionKind {
    match ack {
        crate::request::Ack::Durable => CompletionKind::Durable,
        crate::request::Ack::Written => CompletionKind::Written,
    }
}

fn completion(
    file: FileId,
    user_data: u64,
    kind: CompletionKind,
    result: Result<FileRange, WalError>,
) -> Completion {
    Completion {
        file,
        user_data,
        kind,
        result,
    }
}

fn rejected(file: FileId, user_data: u64, kind: CompletionKind, error: WalError) -> Completion {
    metrics::record_error(error.metric_kind());
    completion(file, user_data, kind, Err(error))
}
