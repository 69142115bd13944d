//! Batches in and out of the backend: start them, apply each finished one to
//! its file, answer the waiters it covers, and issue the fdatasyncs now due
//! (per file under the fsync cap, or one shared sync for many files).

use std::sync::Arc;
use std::time::Duration;

use crate::metrics;
use crate::request::Completion;
use crate::storage::{FileBatch, Storage};
use crate::uring::Doorbell;

use super::{SHARED_SYNC_FILES_MIN, SPARE_LISTS_MAX, WalCore};

impl<S: Storage> WalCore<S> {
    /// Settles every batch that has finished, without blocking: answers the
    /// waiters it covers and issues the fdatasyncs now due. Returns how many
    /// batches finished. A no-op over a synchronous backend.
    pub fn poll_io(&mut self, out: &mut Vec<Completion>) -> usize {
        let finished = self.reap_io(out);
        self.settle_touched(out, true);
        finished
    }

    /// Like [`WalCore::poll_io`], but leaves the fdatasyncs now due for the
    /// next [`WalCore::run_turn`] (or `poll_io`): the threaded writer holds
    /// them until the callers it just answered have had a moment to append
    /// again, so that their appends share the fsync instead of forming a
    /// second group behind it ([`WalCore::syncs_due`] says one is waiting).
    pub fn reap_io(&mut self, out: &mut Vec<Completion>) -> usize {
        let observer = &*self.observer;
        let Some(pipeline) = self.storage.pipeline() else {
            return 0;
        };
        let mut done = std::mem::take(&mut self.reaped);
        pipeline.reap(&mut done, observer);
        assert!(done.len() <= self.in_flight, "reaped only what was started");
        self.in_flight -= done.len();
        let finished = done.len();
        for batch in done.drain(..) {
            self.finish(batch);
        }
        self.reaped = done;
        self.settle_touched(out, false);
        if finished > 0 {
            self.release_idle_descriptors();
        }
        finished
    }

    /// True when some file waits for an fdatasync that could be issued now
    /// (by the next turn).
    pub fn syncs_due(&self) -> bool {
        if self.sync_waiting.is_empty() || self.waits_for_shared_sync() {
            return false;
        }
        self.shared_sync_due() || self.syncs_in_flight < self.syncs_in_flight_max
    }

    /// Blocks until a batch in flight finishes, the backend's doorbell rings
    /// or `timeout` passes; then call [`WalCore::poll_io`] (or run a turn).
    /// Returns at once when nothing is in flight.
    pub fn wait_io(&mut self, timeout: Option<Duration>) {
        if self.in_flight == 0 {
            return;
        }
        let observer = &*self.observer;
        if let Some(pipeline) = self.storage.pipeline() {
            pipeline.wait(timeout, observer);
        }
    }

    /// The doorbell of a pipelined backend, which ends a [`WalCore::wait_io`]
    /// from another thread.
    pub fn doorbell(&mut self) -> Option<Arc<Doorbell>> {
        self.storage
            .pipeline()
            .and_then(|pipeline| pipeline.doorbell())
    }

    /// Hands batches to the backend: started on a pipelined one, executed
    /// (and applied) on a synchronous one.
    pub(super) fn start(&mut self, mut batches: Vec<FileBatch>) {
        if batches.is_empty() {
            return;
        }
        let observer = &*self.observer;
        if let Some(pipeline) = self.storage.pipeline() {
            self.in_flight += batches.len();
            for batch in batches {
                pipeline.start(batch, observer);
            }
            return;
        }
        self.storage.execute(&mut batches, observer);
        for batch in batches {
            self.finish(batch);
        }
    }

    /// Applies one finished batch to its file.
    fn finish(&mut self, batch: FileBatch) {
        let file = batch.file;
        let state = self
            .files
            .get_mut(&file)
            .expect("a file with a batch in flight stays open");
        let shared = self.shared_sync.remove(&batch.id);
        state.on_finished(&batch, shared);
        if !shared {
            self.syncs_in_flight -= usize::from(batch.sync);
        }
        self.touched.insert(file);
        let mut frames = batch.frames;
        if self.spare_frames.len() < SPARE_LISTS_MAX && frames.capacity() > 0 {
            frames.clear();
            self.spare_frames.push(frames);
        }
    }

    /// Answers the waiters of every touched file, notes the bare fsyncs they
    /// need and, if `issue_syncs`, issues them, oldest need first, as far as
    /// the fsync cap allows, until nothing more is due (over a synchronous
    /// backend the fsyncs run at once, which may answer more waiters).
    pub(super) fn settle_touched(&mut self, out: &mut Vec<Completion>, issue_syncs: bool) {
        loop {
            for file in std::mem::take(&mut self.touched) {
                let Some(state) = self.files.get_mut(&file) else {
                    continue;
                };
                state.release(file, out);
                if state.needs_bare_sync() && self.sync_waiting_set.insert(file) {
                    self.sync_waiting.push_back(file);
                }
            }
            if !issue_syncs {
                return;
            }
            if self.shared_sync_due() {
                let syncs = self.take_bare_syncs(usize::MAX);
                if !syncs.is_empty() {
                    self.start_shared_sync(syncs);
                    continue;
                }
            }
            // Files waiting behind a shared sync in flight wait for the next
            // one rather than spend the fsync slots one file each.
            let room = if self.waits_for_shared_sync() {
                0
            } else {
                self.syncs_in_flight_max
                    .saturating_sub(self.syncs_in_flight)
            };
            let syncs = self.take_bare_syncs(room);
            if syncs.is_empty() && self.touched.is_empty() {
                return;
            }
            self.syncs_in_flight += syncs.len();
            self.start(syncs);
        }
    }

    /// Whether the files waiting for a bare sync are many enough for one
    /// shared sync, and none is in flight (one at a time: the files waiting
    /// meanwhile gather for the next).
    fn shared_sync_due(&self) -> bool {
        self.shared_sync.is_empty()
            && self.sync_waiting.len() >= SHARED_SYNC_FILES_MIN
            && self.storage.shares_syncs()
    }

    /// Whether a shared sync is in flight: the files waiting for a sync then
    /// wait for it to finish and go in the next, however few they are (a node
    /// busy with many files runs shared syncs back to back; per-file fsyncs
    /// beside them would only compete for the device).
    fn waits_for_shared_sync(&self) -> bool {
        !self.shared_sync.is_empty()
    }

    /// Takes up to `limit` files off the sync queue, oldest need first, and
    /// returns the bare syncs they still need, each recorded as started.
    fn take_bare_syncs(&mut self, limit: usize) -> Vec<FileBatch> {
        let mut syncs = Vec::new();
        while syncs.len() < limit {
            let Some(file) = self.sync_waiting.pop_front() else {
                break;
            };
            self.sync_waiting_set.remove(&file);
            let Some(state) = self.files.get_mut(&file) else {
                continue;
            };
            if let Some(batch) = state.bare_sync(file, self.next_batch) {
                self.next_batch += 1;
                state.on_started(&batch, 0);
                syncs.push(batch);
            }
        }
        syncs
    }

    /// Hands bare syncs of many files to the backend as one shared sync:
    /// started on a pipelined backend, executed on a synchronous one.
    fn start_shared_sync(&mut self, mut batches: Vec<FileBatch>) {
        metrics::record_shared_sync(batches.len());
        self.shared_sync
            .extend(batches.iter().map(|batch| batch.id));
        let observer = &*self.observer;
        if let Some(pipeline) = self.storage.pipeline() {
            self.in_flight += batches.len();
            pipeline.start_shared_sync(batches, observer);
            return;
        }
        self.storage.execute_shared_sync(&mut batches, observer);
        for batch in batches {
            self.finish(batch);
        }
    }
}
