//! Completion: `io_uring_enter`, the completions drained into their chains,
//! a finished chain settled into its batch's outcome (short writes finished
//! with plain calls, a sync redone when it may have run before them), and the
//! shared syncs the syncer thread finished.

use std::time::{Duration, Instant};

use io_uring::types;

use crate::direct::AlignedBuffer;
use crate::engine::SPARE_LISTS_MAX;
use crate::error::IoOp;
use crate::request::FileId;
use crate::storage::{BatchOutcome, FileBatch, IoEvent, IoObserver, Storage, sync_after_writes};

use super::doorbell::DOORBELL_USER_DATA;
use super::{Chain, Iovecs, Op, OpKind, UringStorage};

impl UringStorage {
    /// `io_uring_enter`: submits what is queued and waits for `want`
    /// completions, at most `timeout`. EINTR, EBUSY, EAGAIN and ETIME end the
    /// wait early. Any other failure means the ring itself is broken, which
    /// leaves buffers in the kernel's hands: we cannot continue safely, so we
    /// stop loudly.
    pub(super) fn enter(&mut self, want: usize, timeout: Option<Duration>) {
        let result = match timeout {
            Some(timeout) if want > 0 && self.timed_waits => {
                let timespec = types::Timespec::from(timeout);
                let args = types::SubmitArgs::new().timespec(&timespec);
                self.ring.submitter().submit_with_args(want, &args)
            }
            _ => self.ring.submit_and_wait(want),
        };
        match result {
            Ok(_) => {}
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::EINTR | libc::EBUSY | libc::EAGAIN | libc::ETIME)
                ) => {}
            Err(error) => panic!("wal: io_uring_enter failed: {error}"),
        }
    }

    /// Records every available completion; finishes the chains that are done.
    pub(super) fn drain_completions(&mut self, observer: &dyn IoObserver) {
        let mut reaped = std::mem::take(&mut self.reaped);
        reaped.extend(
            self.ring
                .completion()
                .map(|cqe| (cqe.user_data(), cqe.result())),
        );
        let now = Instant::now();
        for &(user_data, result) in &reaped {
            if user_data == DOORBELL_USER_DATA {
                self.doorbell_armed = false;
                self.entries_in_flight -= 1;
                continue;
            }
            let (slot, index) = (
                (user_data >> 32) as usize,
                (user_data & 0xffff_ffff) as usize,
            );
            let chain = self.chains[slot]
                .as_mut()
                .expect("a completion belongs to a chain in flight");
            let op = &mut chain.ops[index];
            assert!(op.result.is_none(), "one completion per entry");
            op.result = Some(result);
            op.reaped_at = Some(now);
            let zeroing = matches!(op.kind, OpKind::Zero { .. });
            if self.skip_success && chain.linked && !zeroing {
                // The one completion of the linked entries: every one before
                // this one succeeded silently, every one after it was
                // cancelled. A zeroing posts its own.
                for (other, op) in chain.ops.iter_mut().enumerate() {
                    if other != index && !matches!(op.kind, OpKind::Zero { .. }) {
                        op.result = Some(implied_result(op, other < index));
                    }
                }
            }
            chain.pending -= 1;
            self.entries_in_flight -= 1;
            if chain.pending == 0 {
                let chain = self.chains[slot].take().expect("checked above");
                self.free_slots.push(slot);
                self.finish_chain(chain, observer);
            }
        }
        reaped.clear();
        self.reaped = reaped;
    }

    fn finish_chain(&mut self, chain: Chain, observer: &dyn IoObserver) {
        let Chain {
            mut batch,
            iovecs: Iovecs(mut iovecs),
            mut ops,
            started,
            blocking,
            direct,
            ..
        } = chain;
        let outcome = self.settle_batch(&batch, &ops, direct.as_ref(), started, observer);
        if let Some(buffer) = direct {
            self.direct_buffers.put(buffer);
        }
        if self.spare_ops.len() < SPARE_LISTS_MAX {
            iovecs.clear();
            ops.clear();
            self.spare_iovecs.push(Iovecs(iovecs));
            self.spare_ops.push(ops);
        }
        batch.outcome = Some(outcome);
        self.push_finished(batch, blocking);
    }

    pub(super) fn push_finished(&mut self, batch: FileBatch, blocking: Option<usize>) {
        assert!(batch.outcome.is_some(), "a finished batch has its outcome");
        match blocking {
            Some(position) => self.finished_blocking.push((position, batch)),
            None => self.finished.push(batch),
        }
    }

    /// Settles the shared syncs the syncer thread has finished.
    pub(super) fn collect_shared(&mut self, observer: &dyn IoObserver) {
        let Some(syncer) = self.syncer.as_mut() else {
            return;
        };
        syncer.collect(&mut self.shared_done);
        for mut job in std::mem::take(&mut self.shared_done) {
            let result = job.result.take().expect("the syncer ran the job");
            self.disk
                .settle_shared_sync(&mut job.batches, result, observer);
            self.finished.append(&mut job.batches);
        }
    }

    /// Turns one chain's reaped results into its outcome, finishing short
    /// writes (a direct one rewritten whole from its piece of the buffer).
    fn settle_batch(
        &mut self,
        batch: &FileBatch,
        ops: &[Op],
        direct: Option<&AlignedBuffer>,
        started: Instant,
        observer: &dyn IoObserver,
    ) -> BatchOutcome {
        for op in ops {
            if let OpKind::Zero { offset, len, .. } = op.kind {
                note_zeroing(batch.file, offset, len, op.result.expect("reaped"));
            }
        }
        let repaired = match self.settle_writes(batch, ops, direct, observer) {
            Ok(repaired) => repaired,
            Err(failed) => return failed,
        };
        self.settle_sync(batch, ops, repaired, started, observer)
    }

    /// Checks every write of a chain, finishing a short (or cancelled) one
    /// with a plain call. Returns whether any was finished so, or the
    /// outcome of the first write that failed.
    fn settle_writes(
        &mut self,
        batch: &FileBatch,
        ops: &[Op],
        direct: Option<&AlignedBuffer>,
        observer: &dyn IoObserver,
    ) -> Result<bool, BatchOutcome> {
        let mut repaired = false;
        let first_offset = ops.iter().find_map(|op| match op.kind {
            OpKind::Write { offset, .. } => Some(offset),
            OpKind::Zero { .. } | OpKind::Sync => None,
        });
        for op in ops {
            let OpKind::Write {
                offset,
                len,
                frames,
                ..
            } = op.kind
            else {
                continue;
            };
            let result = op.result.expect("every submitted entry was reaped");
            let done = match result {
                res if res >= 0 && res as u64 == len => len,
                res if res >= 0 => res as u64,
                res if -res == libc::ECANCELED => 0,
                res => return Err(write_failed(observer, batch, -res)),
            };
            if done < len {
                repaired = true;
                let rewritten = match direct {
                    // Whole blocks again, from the first: the same bytes.
                    Some(buffer) => {
                        let start = (offset - first_offset.unwrap_or(offset)) as usize;
                        let piece = &buffer.as_bytes()[start..start + len as usize];
                        self.disk.write_whole(batch.file, offset, piece)
                    }
                    None => {
                        let parts = skip_bytes(frame_parts(batch, frames), done);
                        self.disk.write_at(batch.file, offset + done, &parts)
                    }
                };
                if let Err(error) = rewritten {
                    let errno = crate::error::errno_of(&error);
                    return Err(write_failed(observer, batch, errno));
                }
            }
            let file = batch.file;
            observer.on_event(IoEvent::Written { file, offset, len });
        }
        Ok(repaired)
    }

    /// The outcome of a chain whose writes are all in: from its fdatasync's
    /// result, or a plain fdatasync again when the ring's was cancelled or
    /// may have run before a write was finished (`repaired`).
    fn settle_sync(
        &mut self,
        batch: &FileBatch,
        ops: &[Op],
        repaired: bool,
        started: Instant,
        observer: &dyn IoObserver,
    ) -> BatchOutcome {
        let sync_result = ops.iter().find(|op| matches!(op.kind, OpKind::Sync));
        match sync_result.map(|op| (op.result.expect("reaped"), op.reaped_at)) {
            None => BatchOutcome::Done {
                synced: false,
                sync_latency: None,
            },
            Some((res, _)) if res < 0 && -res != libc::ECANCELED => {
                observer.on_event(IoEvent::Failed {
                    file: batch.file,
                    op: IoOp::Sync,
                    errno: -res,
                });
                BatchOutcome::SyncFailed { errno: -res }
            }
            Some((0, Some(reaped_at))) if !repaired => {
                observer.on_event(IoEvent::Synced {
                    file: batch.file,
                    durable_end: batch.offset + batch.len(),
                });
                BatchOutcome::Done {
                    synced: true,
                    sync_latency: Some(reaped_at.saturating_duration_since(started)),
                }
            }
            // Cancelled, or possibly run before a repair: sync again, plainly.
            Some(_) => sync_after_writes(&mut self.disk, batch, started, observer),
        }
    }
}

/// The result of an entry that posted no completion in a chain whose one
/// completion came from another entry: a full success before it, a
/// cancellation after it.
fn implied_result(op: &Op, before: bool) -> i32 {
    match (op.kind, before) {
        (OpKind::Write { len, .. } | OpKind::Zero { len, .. }, true) => {
            i32::try_from(len).expect("a writev is at most WRITE_BYTES_MAX")
        }
        (OpKind::Sync, true) => 0,
        (_, false) => -libc::ECANCELED,
    }
}

/// The byte slices of frames `range.0..range.1`.
fn frame_parts(batch: &FileBatch, range: (usize, usize)) -> Vec<&[u8]> {
    let mut parts = Vec::with_capacity((range.1 - range.0) * 3);
    for frame in &batch.frames[range.0..range.1] {
        parts.extend(frame.parts());
    }
    parts
}

/// `parts` without their first `skip` bytes.
fn skip_bytes(parts: Vec<&[u8]>, mut skip: u64) -> Vec<&[u8]> {
    let mut rest = Vec::with_capacity(parts.len());
    for part in parts {
        if skip >= part.len() as u64 {
            skip -= part.len() as u64;
        } else {
            rest.push(&part[skip as usize..]);
            skip = 0;
        }
    }
    rest
}

/// Logs a zeroing of room that failed or came back short: the room's blocks
/// read as zeros all the same, and the appends into them are issued more
/// slowly (see `direct`).
fn note_zeroing(file: FileId, offset: u64, len: u64, result: i32) {
    if result < 0 || result as u64 != len {
        tracing::debug!(%file, offset, len, result, "wal: zeroing room ahead came back short");
    }
}

pub(super) fn write_failed(
    observer: &dyn IoObserver,
    batch: &FileBatch,
    errno: i32,
) -> BatchOutcome {
    observer.on_event(IoEvent::Failed {
        file: batch.file,
        op: IoOp::Write,
        errno,
    });
    BatchOutcome::WriteFailed { errno }
}
