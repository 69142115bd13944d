//! Writes and their completions: prepares (append, rewrite in place),
//! truncation, the superblock (`PersistState`), cursor events, retention.
//!
//! Every asynchronous write answers twice: `Ok` from the call is the
//! *queued* stage, and a [`Completed`] from [`Partition::poll`] (or
//! [`Partition::wait`]) the *durable* stage or the failure. Truncation,
//! retention, cursor snapshots and compaction are synchronous: durable when
//! they return.

use bytes::Bytes;
use strand_wal::{Ack, Completion, FRAME_HEADER_BYTES, FileId, Frame, OpenMode, Request};
use strand_wire::{Msg, PrepareHeader};

use crate::disk::Disk;
use crate::durable_mark::Admitted;
use crate::error::PartitionError;
use crate::io::{Pending, SuperblockStep};
use crate::layout::superblock_path;
use crate::partition::Partition;
use crate::record_log::RetentionPolicy;
use crate::superblock::{DurableFields, Superblock};

/// How far a write has been taken (consensus's `WriteStage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteStage {
    /// Handed to the WAL writer.
    Queued,
    /// Fsynced.
    Durable,
}

/// A write's later answer, from [`Partition::poll`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completed {
    /// A prepare reached `stage` (report `on_write(op, checksum, stage)`).
    Prepare {
        /// The op.
        op: u64,
        /// Its checksum.
        checksum: u32,
        /// How far.
        stage: WriteStage,
    },
    /// A prepare's write failed: its fate on disk is unknown, and the log takes
    /// no more appends until the partition is reopened.
    PrepareFailed {
        /// The op.
        op: u64,
        /// Its checksum.
        checksum: u32,
        /// Why.
        error: PartitionError,
    },
    /// Cursor events up to `cursor_end` reached `stage` (report
    /// `on_cursors_written(cursor_end, stage)`).
    Cursors {
        /// The cursor log's length covered.
        cursor_end: u64,
        /// How far.
        stage: WriteStage,
    },
    /// A cursor append failed.
    CursorsFailed {
        /// The length it would have reached.
        cursor_end: u64,
        /// Why.
        error: PartitionError,
    },
    /// The superblock of `PersistState` request `sequence` is durable (report
    /// `on_state_persisted(sequence)`).
    StatePersisted {
        /// The request's sequence.
        sequence: u64,
    },
    /// Persisting request `sequence` failed; the previous superblock stands.
    StatePersistFailed {
        /// The request's sequence.
        sequence: u64,
        /// Why.
        error: PartitionError,
    },
}

/// The answer to [`Partition::write_prepare`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteAccepted {
    /// The op.
    pub op: u64,
    /// Its checksum.
    pub checksum: u32,
    /// `Queued` for an append (or a rewrite waiting for the damaged ops before
    /// it), `Durable` for a rewrite done in place already.
    pub stage: WriteStage,
}

/// What a `PersistState` write is doing.
#[derive(Debug, Clone)]
struct AsyncWrite {
    /// The copy written (`superblock.copy()`), and its WAL file.
    copy: u8,
    file: FileId,
    /// The `PersistState` request it answers (`None`: a synchronous write
    /// waits for it, see [`Partition::write_superblock_now`]).
    request_sequence: Option<u64>,
    /// The encoded superblock, appended once the copy is cleared.
    payload: Bytes,
    failed: bool,
    /// The superblock before this write: it stands again if the write fails
    /// (the next write then goes to the same copy, never over the other,
    /// the last one known durable).
    previous: Box<Superblock>,
}

/// A superblock copy the WAL keeps open between writes, and its length
/// (one frame: the copy's last write; 0 once cleared).
#[derive(Debug, Clone, Copy)]
struct OpenCopy {
    file: FileId,
    len: u64,
}

/// The one asynchronous superblock write in flight, the newest request
/// waiting for it (only the newest matters), and the copies kept open.
///
/// A `PersistState` rewrites its copy in place: a frame of the same length
/// as the copy's goes over it (one fdatasync, no size change), any other is
/// appended after clearing the copy (truncate, then append). Either way a
/// crash mid-write leaves that copy invalid and the other, written and
/// synced before this write began, valid: open takes it. No file is
/// created or renamed, so no directory is synced and nothing blocks.
#[derive(Debug, Default)]
pub(crate) struct SuperblockWriter {
    in_flight: Option<AsyncWrite>,
    queued: Option<(DurableFields, u64)>,
    copies: [Option<OpenCopy>; 2],
    /// How the last synchronous write failed, for the caller waiting on it.
    failure: Option<PartitionError>,
    /// A cut failed: every later write is refused with it (see `cut`).
    refused_after_cut: Option<PartitionError>,
}

impl SuperblockWriter {
    /// True while a write is in flight or queued.
    pub fn busy(&self) -> bool {
        self.in_flight.is_some() || self.queued.is_some()
    }
}

/// What [`Partition::apply_retention`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionOutcome {
    /// Segments removed.
    pub segments_removed: usize,
    /// The retained head op now.
    pub head_op: u64,
    /// The retained head offset now.
    pub head_offset: u64,
}

impl<D: Disk> Partition<D> {
    /// Writes `prepare` at its op: an append when its op is the head + 1 (it
    /// must chain), a rewrite in place when the op was reported damaged, and
    /// nothing when the log holds that very prepare intact.
    pub fn write_prepare(
        &mut self,
        prepare: Msg<PrepareHeader>,
    ) -> Result<WriteAccepted, PartitionError> {
        let op = prepare.header().op.get();
        let checksum = prepare.checksum();
        if op == self.log.op + 1 {
            self.log.append(&mut self.io, prepare)?;
            // In the same WAL turn: the mark that will let it count durable.
            self.mark.want(&mut self.io, op)?;
            return Ok(WriteAccepted {
                op,
                checksum,
                stage: WriteStage::Queued,
            });
        }
        if op <= self.log.op
            && !self.log.faulty.contains(&op)
            && self.log.checksum_of(op) == Some(checksum)
        {
            // The very prepare the log holds intact (a repair its replica
            // asked for before learning the entry was sound): nothing to
            // write; durable once the log's copy is.
            let stage = if op <= self.durable_op() {
                WriteStage::Durable
            } else {
                WriteStage::Queued
            };
            return Ok(WriteAccepted {
                op,
                checksum,
                stage,
            });
        }
        if op > self.log.op || !self.log.faulty.contains(&op) {
            return Err(PartitionError::OpNotNext {
                op,
                head: self.log.op,
            });
        }
        let written = self.log.rewrite(&mut self.io, prepare)?;
        let mut stage = WriteStage::Queued;
        for (written_op, written_checksum) in written {
            if written_op == op {
                stage = WriteStage::Durable;
                continue;
            }
            self.events.push_back(Completed::Prepare {
                op: written_op,
                checksum: written_checksum,
                stage: WriteStage::Durable,
            });
        }
        Ok(WriteAccepted {
            op,
            checksum,
            stage,
        })
    }

    /// Moves the answers that have arrived into `out`, without waiting.
    pub fn poll(&mut self, out: &mut Vec<Completed>) {
        self.io.poll();
        self.process_stash();
        out.extend(self.events.drain(..));
    }

    /// Like [`Partition::poll`], but waits for at least one answer when a
    /// write is outstanding and none has arrived.
    pub fn wait(&mut self, out: &mut Vec<Completed>) -> Result<(), PartitionError> {
        self.poll(out);
        if out.is_empty() && self.io.outstanding() {
            self.io.wait_once()?;
            self.poll(out);
        }
        Ok(())
    }

    /// Waits until nothing this partition submitted is outstanding, moving
    /// every answer into `out` (before a snapshot, a shutdown, a test check).
    pub fn flush(&mut self, out: &mut Vec<Completed>) -> Result<(), PartitionError> {
        self.settle()?;
        out.extend(self.events.drain(..));
        Ok(())
    }

    /// Turns stashed WAL completions into events, in arrival order.
    pub(crate) fn process_stash(&mut self) {
        for (pending, completion) in self.io.take_stash() {
            match pending {
                Pending::Prepare { op, checksum } => {
                    self.prepare_completed(op, checksum, completion)
                }
                Pending::Cursors { cursor_end } => self.cursors_completed(cursor_end, completion),
                Pending::Mark { sequence } => self.mark_completed(sequence, completion),
                Pending::Superblock { step } => self.superblock_step_completed(step, completion),
                Pending::Internal | Pending::Ignored => unreachable!("never stashed"),
            }
        }
    }

    fn prepare_completed(&mut self, op: u64, checksum: u32, completion: Completion) {
        match completion.result {
            Ok(_) if self.log.on_durable(op, checksum) => match self.mark.admit(op, checksum) {
                Admitted::Durable => self.events.push_back(Completed::Prepare {
                    op,
                    checksum,
                    stage: WriteStage::Durable,
                }),
                Admitted::Held => {}
                Admitted::Failed(error) => self.events.push_back(Completed::PrepareFailed {
                    op,
                    checksum,
                    error,
                }),
            },
            Ok(_) => {}
            Err(error) => {
                let error = PartitionError::wal(&self.io.path_of(completion.file), error);
                tracing::error!(op, %error, "partition: a prepare write failed");
                self.log.failure.get_or_insert(error.clone());
                self.events.push_back(Completed::PrepareFailed {
                    op,
                    checksum,
                    error,
                });
            }
        }
    }

    /// A durable-mark write completed: the prepares it covers are durable
    /// now; after a failure, every prepare waiting for it failed (the log
    /// takes no more appends until the partition is reopened).
    fn mark_completed(&mut self, sequence: u64, completion: Completion) {
        let path = self.io.path_of(completion.file);
        let result = completion
            .result
            .map(|_| ())
            .map_err(|error| PartitionError::wal(&path, error));
        let mut released = Vec::new();
        let outcome = self.mark.on_written(sequence, result, &mut released);
        for (op, checksum) in released {
            self.events.push_back(Completed::Prepare {
                op,
                checksum,
                stage: WriteStage::Durable,
            });
        }
        if let Err(error) = outcome {
            tracing::error!(%error, "partition: a durable-mark write failed");
            self.log.failure.get_or_insert(error.clone());
            for (op, checksum) in self.mark.take_awaiting() {
                self.events.push_back(Completed::PrepareFailed {
                    op,
                    checksum,
                    error: error.clone(),
                });
            }
        }
    }

    fn cursors_completed(&mut self, cursor_end: u64, completion: Completion) {
        match completion.result {
            Ok(_) => {
                if self.cursors.on_durable(cursor_end) {
                    self.events.push_back(Completed::Cursors {
                        cursor_end,
                        stage: WriteStage::Durable,
                    });
                }
            }
            Err(error) => {
                let error = PartitionError::wal(&self.io.path_of(completion.file), error);
                tracing::error!(cursor_end, %error, "partition: a cursor write failed");
                self.cursors.failure.get_or_insert(error.clone());
                self.events
                    .push_back(Completed::CursorsFailed { cursor_end, error });
            }
        }
    }

    /// Persists consensus's durable state (a `PersistState` effect) in the
    /// superblock, asynchronously: `Completed::StatePersisted { sequence }`
    /// follows. While a write is in flight the newest request waits for it.
    pub fn persist_state(
        &mut self,
        fields: DurableFields,
        sequence: u64,
    ) -> Result<(), PartitionError> {
        if self.writer.in_flight.is_some() {
            self.writer.queued = Some((fields, sequence));
            return Ok(());
        }
        self.start_async_write(fields, sequence)
    }

    fn start_async_write(
        &mut self,
        fields: DurableFields,
        request_sequence: u64,
    ) -> Result<(), PartitionError> {
        let mut next = self.next_superblock();
        next.durable = fields;
        // Ops retention dropped were committed: a commit number below them
        // (consensus may reopen with a lower one than it persisted, when the
        // ops at its commit are unreadable) says less than the log shows.
        next.durable.commit = next.durable.commit.max(next.head_op.saturating_sub(1));
        self.start_superblock_write(next, Some(request_sequence))
    }

    /// After a failed cut, refuses every later superblock write (see the
    /// `cut` module): the files may still hold ops consensus dropped.
    pub(crate) fn refuse_superblocks_after_failed_cut(&mut self, error: &PartitionError) {
        tracing::error!(%error, "partition: a cut failed; no superblock is written until a reopen");
        let cause = Box::new(error.clone());
        self.writer
            .refused_after_cut
            .get_or_insert(PartitionError::LogFailed { cause });
        self.log.failure.get_or_insert(error.clone());
        self.writer.queued = None;
    }

    /// Starts writing `next` over its copy (see [`SuperblockWriter`]).
    fn start_superblock_write(
        &mut self,
        next: Superblock,
        request_sequence: Option<u64>,
    ) -> Result<(), PartitionError> {
        assert!(
            self.writer.in_flight.is_none(),
            "one superblock write at a time"
        );
        if let Some(refused) = &self.writer.refused_after_cut {
            return Err(refused.clone());
        }
        let copy = next.copy();
        let open = self.open_copy(copy)?;
        let payload = Bytes::from(next.encode());
        let frame_len = (FRAME_HEADER_BYTES + payload.len()) as u64;
        let file = open.file;
        let submitted = if open.len == frame_len {
            self.submit_copy_write(file, 0, payload.clone())
        } else if open.len == 0 {
            let pending = Pending::Superblock {
                step: SuperblockStep::Written,
            };
            self.io
                .append(file, payload.clone(), Ack::Durable, pending)
                .map(|_| ())
        } else {
            let pending = Pending::Superblock {
                step: SuperblockStep::Cleared,
            };
            self.io
                .request(file, pending, |user_data| Request::Truncate {
                    file,
                    len: 0,
                    user_data,
                })
                .map(|_| ())
        };
        if let Err(error) = submitted {
            self.close_copy(copy);
            return Err(error);
        }
        let previous = Box::new(std::mem::replace(&mut self.superblock, next));
        self.writer.in_flight = Some(AsyncWrite {
            copy,
            file,
            request_sequence,
            payload,
            failed: false,
            previous,
        });
        Ok(())
    }

    /// The WAL file of superblock copy `copy`, opened if it is not open yet.
    /// It holds the older state, about to be replaced: it is opened as it is
    /// (whatever its bytes: a damaged copy is only rewritten), so the open
    /// reads a few hundred bytes and syncs nothing.
    fn open_copy(&mut self, copy: u8) -> Result<OpenCopy, PartitionError> {
        if let Some(open) = self.writer.copies[usize::from(copy)] {
            return Ok(open);
        }
        let path = superblock_path(&self.dir, copy);
        let mode = if self.io.disk.exists(&path) {
            OpenMode::AppendDamaged
        } else {
            OpenMode::CreateNew
        };
        let opened = self.io.open(&path, mode)?;
        let open = OpenCopy {
            file: opened.file,
            len: opened.len,
        };
        self.writer.copies[usize::from(copy)] = Some(open);
        Ok(open)
    }

    /// Closes copy `copy`'s file, if open (after a failure, so that the next
    /// write reopens it; before a synchronous write replaces it).
    fn close_copy(&mut self, copy: u8) {
        if let Some(open) = self.writer.copies[usize::from(copy)].take() {
            if let Err(error) = self.io.close(open.file) {
                tracing::warn!(%error, copy, "partition: closing a superblock copy failed");
            }
        }
    }

    /// Closes both superblock copies' files (nothing may be in flight): before
    /// a synchronous superblock write renames over one, and before the
    /// partition directory is moved.
    pub(crate) fn close_superblock_copies(&mut self) {
        assert!(
            self.writer.in_flight.is_none(),
            "no superblock write in flight"
        );
        self.close_copy(0);
        self.close_copy(1);
    }

    fn submit_copy_write(
        &mut self,
        file: FileId,
        offset: u64,
        payload: Bytes,
    ) -> Result<(), PartitionError> {
        let frame = Frame::new(payload).map_err(|error| PartitionError::wal(&self.dir, error))?;
        let pending = Pending::Superblock {
            step: SuperblockStep::Written,
        };
        self.io
            .request(file, pending, |user_data| Request::WriteAt {
                file,
                offset,
                frame,
                user_data,
                ack: Ack::Durable,
            })
            .map(|_| ())
    }

    /// Advances the in-flight superblock write: (clear →) write, or after a
    /// failure, close the copy.
    fn superblock_step_completed(&mut self, step: SuperblockStep, completion: Completion) {
        let write = self
            .writer
            .in_flight
            .as_mut()
            .expect("a superblock step is in flight");
        let (copy, file, sequence) = (write.copy, write.file, write.request_sequence);
        let payload = write.payload.clone();
        let first_failure = !write.failed;
        if let Err(error) = completion.result {
            write.failed = true;
            let error = PartitionError::wal(&self.io.path_of(file), error);
            tracing::error!(%error, ?step, "partition: superblock write failed");
            if first_failure {
                self.superblock_write_failed(sequence, error);
            }
            if step != SuperblockStep::Closed {
                self.writer.copies[usize::from(copy)] = None;
                self.submit_superblock_close(file);
                return;
            }
        }
        match step {
            SuperblockStep::Cleared => {
                if let Some(open) = self.writer.copies[usize::from(copy)].as_mut() {
                    open.len = 0;
                }
                let pending = Pending::Superblock {
                    step: SuperblockStep::Written,
                };
                if let Err(error) = self.io.append(file, payload, Ack::Durable, pending) {
                    self.superblock_submit_failed(copy, file, error);
                }
            }
            SuperblockStep::Written => {
                let len = (FRAME_HEADER_BYTES + payload.len()) as u64;
                if let Some(open) = self.writer.copies[usize::from(copy)].as_mut() {
                    open.len = len;
                }
                if let Some(sequence) = sequence {
                    self.events
                        .push_back(Completed::StatePersisted { sequence });
                }
                self.finish_superblock_write();
            }
            SuperblockStep::Closed => self.finish_superblock_write(),
        }
    }

    /// The WAL refused a step: the write failed; the copy is closed.
    fn superblock_submit_failed(&mut self, copy: u8, file: FileId, error: PartitionError) {
        tracing::error!(%error, "partition: the WAL refused a superblock step");
        let write = self
            .writer
            .in_flight
            .as_mut()
            .expect("a superblock write is in flight");
        let (first_failure, sequence) = (!write.failed, write.request_sequence);
        write.failed = true;
        if first_failure {
            self.superblock_write_failed(sequence, error);
        }
        self.writer.copies[usize::from(copy)] = None;
        self.submit_superblock_close(file);
    }

    fn submit_superblock_close(&mut self, file: FileId) {
        let pending = Pending::Superblock {
            step: SuperblockStep::Closed,
        };
        let submitted = self.io.request(file, pending, |user_data| Request::Close {
            file,
            user_data,
        });
        if let Err(error) = submitted {
            tracing::error!(%error, "partition: the WAL refused to close a superblock copy");
            self.finish_superblock_write();
        }
    }

    /// The write in flight failed: the superblock before it stands again
    /// (what the failed copy holds is unknown, and what reads show of it may
    /// never reach the disk), and the failure is reported.
    fn superblock_write_failed(&mut self, sequence: Option<u64>, error: PartitionError) {
        let write = self
            .writer
            .in_flight
            .as_ref()
            .expect("a superblock write is in flight");
        self.superblock = (*write.previous).clone();
        self.report_superblock_failure(sequence, error);
    }

    /// A failed write answers its `PersistState`, or the synchronous caller.
    fn report_superblock_failure(&mut self, sequence: Option<u64>, error: PartitionError) {
        match sequence {
            Some(sequence) => self
                .events
                .push_back(Completed::StatePersistFailed { sequence, error }),
            None => self.writer.failure = Some(error),
        }
    }

    /// Ends the write in flight and starts the newest one queued behind it.
    fn finish_superblock_write(&mut self) {
        self.writer.in_flight = None;
        if let Some((fields, sequence)) = self.writer.queued.take() {
            if let Err(error) = self.start_async_write(fields, sequence) {
                self.events
                    .push_back(Completed::StatePersistFailed { sequence, error });
            }
        }
    }

    /// The next superblock: sequence + 1, the log's current shape, the
    /// clean-shutdown mark cleared.
    fn next_superblock(&self) -> Superblock {
        let mut next = self.superblock.clone();
        next.sequence += 1;
        next.clean_shutdown = false;
        next.stopped_in_view = false;
        next.op_checkpoint = next.op_checkpoint.max(self.log.durable_op);
        next.cursor_checkpoint = self.cursors.durable_tail;
        next.head_op = self.log.head_op;
        next.head_offset = self.log.head_offset;
        next.head_parent_checksum = self.log.head_parent_checksum;
        next.sealed_segments = self.log.sealed_list();
        next
    }

    /// Writes the next superblock now (after any asynchronous one), durably,
    /// with `change` applied last.
    pub(crate) fn write_superblock_now(
        &mut self,
        change: impl FnOnce(&mut Superblock),
    ) -> Result<(), PartitionError> {
        self.wait_for_superblock_writer(|writer| writer.busy())?;
        let mut next = self.next_superblock();
        change(&mut next);
        self.start_superblock_write(next, None)?;
        self.wait_for_superblock_writer(|writer| writer.in_flight.is_some())?;
        match self.writer.failure.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Waits while `busy` says the superblock writer is.
    pub(crate) fn wait_for_superblock_writer(
        &mut self,
        busy: impl Fn(&SuperblockWriter) -> bool,
    ) -> Result<(), PartitionError> {
        loop {
            self.process_stash();
            if !busy(&self.writer) {
                return Ok(());
            }
            self.io.wait_once()?;
        }
    }

    /// Records, durably, that a reassignment at `epoch` removed this replica
    /// from its group: a restart reopens it retired (it never serves again;
    /// its data stays until an operator drops it).
    pub fn mark_retired(&mut self, epoch: u32) -> Result<(), PartitionError> {
        assert!(epoch > 0, "epoch 0 removes nobody");
        if self.superblock.retired_epoch == epoch {
            return Ok(());
        }
        self.write_superblock_now(|superblock| superblock.retired_epoch = epoch)
    }

    /// The record log's part of [`Partition::cut`]: superblock first (so
    /// open never mistakes the removed ops for lost ones), then the files.
    pub(crate) fn truncate_log(&mut self, op: u64) -> Result<(), PartitionError> {
        // A log that failed (a write, or a cut that stopped half way: its
        // segments no longer match its head) changes no more until reopened.
        self.log.refuse_if_failed()?;
        if op + 1 < self.log.head_op {
            return Err(PartitionError::BelowRetainedHead {
                op,
                head_op: self.log.head_op,
            });
        }
        // The mark first: a crash after the files shrank must not take the
        // ops the cut removes for ones the disk lost.
        let mut released = Vec::new();
        self.mark.lower_now(&mut self.io, op, &mut released)?;
        for (released_op, checksum) in released {
            self.events.push_back(Completed::Prepare {
                op: released_op,
                checksum,
                stage: WriteStage::Durable,
            });
        }
        let lowers_checkpoint = self.superblock.op_checkpoint > op;
        if op >= self.log.op {
            self.log.faulty.retain(|&faulty| faulty <= op);
            if lowers_checkpoint {
                self.write_superblock_now(|superblock| superblock.op_checkpoint = op)?;
            }
            return Ok(());
        }
        let keep = self.log.segment_of(op + 1).expect("op + 1 is in the log");
        let sealed: Vec<_> = self
            .log
            .sealed_list()
            .into_iter()
            .filter(|segment| segment.first_offset < self.log.segments[keep].first_offset)
            .collect();
        self.write_superblock_now(|superblock| {
            superblock.op_checkpoint = superblock.op_checkpoint.min(op);
            superblock.sealed_segments = sealed;
        })?;
        tracing::info!(
            op,
            head = self.log.op,
            "partition: truncating the record log"
        );
        self.log.truncate_files(&mut self.io, op)
    }

    /// Appends cursor events (an `AppendCursors` effect); `Ok` is the queued
    /// stage, `Completed::Cursors` the durable one.
    pub fn append_cursors(
        &mut self,
        cursor_base: u64,
        event_count: u32,
        events: &Bytes,
    ) -> Result<(), PartitionError> {
        self.cursors
            .append(&mut self.io, cursor_base, event_count, events)
    }

    /// Waits until every cursor append is durable; fails once one failed
    /// (its events never become durable, and nothing more is in flight to
    /// wait for).
    pub(crate) fn drain_cursor_appends(&mut self) -> Result<(), PartitionError> {
        loop {
            self.process_stash();
            if let Some(failure) = &self.cursors.failure {
                return Err(failure.clone());
            }
            if !self.cursors.has_in_flight() {
                return Ok(());
            }
            self.io.wait_once()?;
        }
    }

    /// Writes a cursor snapshot covering every event so far, durably.
    pub fn snapshot_cursors(&mut self) -> Result<(), PartitionError> {
        self.drain_cursor_appends()?;
        self.cursors.snapshot(&mut self.io)
    }

    /// Drops cursor log frames the snapshot covers and no backup needs
    /// (`keep_from`: the lowest event a backup may still be shipped).
    /// Returns the frames dropped.
    pub fn compact_cursors(&mut self, keep_from: u64) -> Result<usize, PartitionError> {
        self.drain_cursor_appends()?;
        self.cursors.compact(&mut self.io, keep_from)
    }

    /// Whether retention would drop more segments were the superblock's
    /// commit `commit` (the replica's commit, ahead of the persisted one):
    /// the driver then persists the commit now rather than on its timer, so
    /// that a flood does not keep a second of writes past the limit.
    pub fn retention_waits_for_commit(
        &self,
        policy: RetentionPolicy,
        now_ns: u64,
        commit: u64,
    ) -> bool {
        let persisted = self.superblock.durable.commit;
        if commit <= persisted {
            return false;
        }
        let droppable = |commit: u64| self.log.retention_count(policy, now_ns, commit);
        droppable(commit) > droppable(persisted)
    }

    /// Drops the oldest sealed segments the policy allows, never one holding
    /// `keep_from_op` or later (the caller's bound: what consensus still
    /// needs), nor one holding an op past the superblock's commit: a reopen
    /// resumes from the op of its persisted commit. The table of clients'
    /// requests (what makes a retried produce land once) needs no op of the
    /// log: consensus persists it in the superblock. Durable when it returns.
    pub fn apply_retention(
        &mut self,
        policy: RetentionPolicy,
        now_ns: u64,
        keep_from_op: u64,
    ) -> Result<RetentionOutcome, PartitionError> {
        // The superblock in memory is the one being written while a write
        // is in flight: its commit (and the client table that goes with it)
        // is not durable yet, and a failed write takes it back. Segments go
        // only below a commit the disk holds.
        self.wait_for_superblock_writer(SuperblockWriter::busy)?;
        let keep_from_op = keep_from_op.min(self.superblock.durable.commit);
        let count = self.log.retention_count(policy, now_ns, keep_from_op);
        if count > 0 {
            let (head_op, head_offset, parent) = self.log.head_after_dropping(count);
            let first_kept = self.log.segments[count].first_offset;
            self.write_superblock_now(|superblock| {
                superblock.head_op = head_op;
                superblock.head_offset = head_offset;
                superblock.head_parent_checksum = parent;
                superblock
                    .sealed_segments
                    .retain(|segment| segment.first_offset >= first_kept);
            })?;
            self.log.drop_head_segments(&mut self.io, count)?;
            tracing::info!(
                segments = count,
                head_op,
                "partition: retention moved the head"
            );
        }
        Ok(RetentionOutcome {
            segments_removed: count,
            head_op: self.log.head_op,
            head_offset: self.log.head_offset,
        })
    }
}
