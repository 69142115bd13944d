//! Submission: a batch planned into one chain of entries (its `writev`s, a
//! direct append's whole blocks and the zeros beside them, its fdatasync),
//! pushed onto the ring with room made first; shared syncs handed to the
//! syncer thread.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Instant;

use io_uring::{opcode, squeue, types};

use crate::direct::{AlignedBuffer, DIRECT_BLOCK_BYTES, Plan, Zeroing, room_zeros};
use crate::frame::Frame;
use crate::storage::{FileBatch, IoObserver, execute_sequential};
use crate::syncfs::{self, SharedSyncJob, Syncer};

use super::completion::write_failed;
use super::{Chain, IOVECS_PER_WRITE_MAX, Iovecs, Op, OpKind, UringStorage, WRITE_BYTES_MAX};

impl UringStorage {
    /// For a direct file's append: plans its whole-block write (reading
    /// the tail block first if it is not known) and returns its buffer, and
    /// the room to zero beside it. `None` for any other batch.
    fn plan_direct(
        &mut self,
        batch: &FileBatch,
        iovecs: &mut Vec<libc::iovec>,
        ops: &mut Vec<Op>,
    ) -> io::Result<Option<(AlignedBuffer, Option<Zeroing>)>> {
        if batch.frames.is_empty() {
            return Ok(None);
        }
        let Some(direct) = self.direct.get_mut(&batch.file) else {
            return Ok(None);
        };
        let parts = batch.frames.iter().flat_map(Frame::parts);
        let mut buffer = self.direct_buffers.take();
        let write = loop {
            match direct.plan(batch.offset, parts.clone(), &mut buffer) {
                Plan::Ready(write) => break write,
                Plan::ReadTail { offset } => {
                    let block = buffer.block_mut();
                    let read = self.disk.read_at_most(batch.file, offset, block)?;
                    direct
                        .set_tail(offset, &block[..read])
                        .map_err(|short| io::Error::new(io::ErrorKind::UnexpectedEof, short))?;
                }
            }
        };
        let zeroing = direct.take_zeroing(write);
        let bytes = buffer.as_bytes();
        let frames = (0, batch.frames.len());
        let head_len = if split_direct_write(batch, write) {
            DIRECT_BLOCK_BYTES
        } else {
            bytes.len()
        };
        let (head, rest) = bytes.split_at(head_len);
        let mut offset = write.offset;
        for piece in [head, rest].into_iter().filter(|piece| !piece.is_empty()) {
            let index = iovecs.len();
            iovecs.push(iovec_of(piece));
            ops.push(Op {
                kind: OpKind::Write {
                    offset,
                    len: piece.len() as u64,
                    frames,
                    iovecs: (index, index + 1),
                },
                result: None,
                reaped_at: None,
            });
            offset += piece.len() as u64;
        }
        Ok(Some((buffer, zeroing)))
    }

    /// Starts one batch: pushes its chain, or runs it with plain calls when it
    /// cannot go through the ring (too long, or the descriptor is unknown).
    pub(super) fn start_chain(
        &mut self,
        mut batch: FileBatch,
        blocking: Option<usize>,
        observer: &dyn IoObserver,
    ) {
        assert!(batch.outcome.is_none(), "batch started twice");
        let Iovecs(mut iovecs) = self.spare_iovecs.pop().unwrap_or(Iovecs(Vec::new()));
        let mut ops = self.spare_ops.pop().unwrap_or_default();
        let (direct, linked_len) = match self.plan_chain(&batch, &mut iovecs, &mut ops) {
            Ok(planned) => planned,
            Err(error) => {
                let errno = crate::error::errno_of(&error);
                batch.outcome = Some(write_failed(observer, &batch, errno));
                self.push_finished(batch, blocking);
                return;
            }
        };
        let fd = self.disk.raw_fd(batch.file);
        let sq_capacity = self.ring.params().sq_entries() as usize;
        if ops.is_empty() || ops.len() > sq_capacity || fd.is_err() {
            self.run_without_ring(batch, blocking, direct, fd.err(), observer);
            return;
        }
        let fd = fd.expect("checked above");
        let chain_len = ops.len();
        // A split direct append's two writes go side by side; every other
        // chain's entries run in order. A zeroing goes beside them, last.
        let linked = !(direct.is_some() && linked_len > 1 && !batch.sync);
        let completions = if self.skip_success && linked {
            1 + (chain_len - linked_len)
        } else {
            chain_len
        };
        // One more completion of room for the doorbell's read.
        self.make_room(chain_len, completions + 1, observer);
        let slot = self.free_slots.pop().unwrap_or_else(|| {
            self.chains.push(None);
            self.chains.len() - 1
        });
        self.chains[slot] = Some(Chain {
            batch,
            iovecs: Iovecs(iovecs),
            ops,
            pending: completions,
            started: Instant::now(),
            blocking,
            direct,
            linked,
        });
        self.push_chain_entries(slot, fd, linked_len);
        self.entries_in_flight += completions;
    }

    /// Plans a batch's entries into `iovecs` and `ops`: its writes (a direct
    /// append's whole blocks, or the frames), its fdatasync if it asks for
    /// one, then a direct append's zeroing beside them. Returns the direct
    /// append's buffer and how many entries come before the zeroing.
    fn plan_chain(
        &mut self,
        batch: &FileBatch,
        iovecs: &mut Vec<libc::iovec>,
        ops: &mut Vec<Op>,
    ) -> io::Result<(Option<AlignedBuffer>, usize)> {
        let (direct, zeroing) = match self.plan_direct(batch, iovecs, ops)? {
            Some((buffer, zeroing)) => (Some(buffer), zeroing),
            None => (None, None),
        };
        if direct.is_none() {
            plan_writes(batch, iovecs, ops);
        }
        if batch.sync {
            ops.push(Op {
                kind: OpKind::Sync,
                result: None,
                reaped_at: None,
            });
        }
        let linked_len = ops.len();
        if let Some(zeroing) = zeroing {
            push_zeroing(zeroing, iovecs, ops);
        }
        Ok((direct, linked_len))
    }

    /// Finishes a batch that cannot go through the ring with plain calls; a
    /// direct append (only a descriptor that cannot be had brings one here)
    /// fails instead, with the descriptor's error.
    fn run_without_ring(
        &mut self,
        mut batch: FileBatch,
        blocking: Option<usize>,
        direct: Option<AlignedBuffer>,
        fd_error: Option<io::Error>,
        observer: &dyn IoObserver,
    ) {
        if let Some(buffer) = direct {
            let errno = fd_error.map_or(libc::EIO, |error| crate::error::errno_of(&error));
            self.direct_buffers.put(buffer);
            batch.outcome = Some(write_failed(observer, &batch, errno));
            self.push_finished(batch, blocking);
            return;
        }
        execute_sequential(&mut self.disk, &mut batch, observer);
        self.push_finished(batch, blocking);
    }

    /// Pushes the entries of the chain in `slot` onto the submission queue
    /// (room was made for them): the first `linked_len` linked in order when
    /// the chain is linked (all but the last of them silent on success where
    /// the kernel allows), a zeroing after them on its own.
    fn push_chain_entries(&mut self, slot: usize, fd: RawFd, linked_len: usize) {
        let skip_success = self.skip_success;
        let chain = self.chains[slot]
            .as_ref()
            .expect("the chain was just placed in its slot");
        for (index, op) in chain.ops.iter().enumerate() {
            let link = chain.linked && index + 1 < linked_len;
            let user_data = (slot as u64) << 32 | index as u64;
            let mut flags = squeue::Flags::empty();
            if link {
                flags |= squeue::Flags::IO_LINK;
                if skip_success {
                    flags |= squeue::Flags::SKIP_SUCCESS;
                }
            }
            let entry = build_entry(fd, op, &chain.iovecs.0, user_data, flags);
            // SAFETY: the entry points at `chain.iovecs`, which point at frame
            // headers and payloads owned by `chain.batch`, or at the blocks of
            // `chain.direct` (a heap buffer, unmoved while the chain lives), or
            // at the static zeros of `room_zeros`. The chain stays in its
            // slot, unchanged, until the completion of its last entry is reaped
            // (`drain_completions`), and `Drop` waits for that. The fd stays
            // open: the engine closes a file only when nothing of it is in flight.
            unsafe { self.ring.submission().push(&entry) }
                .expect("the chain fits: room was made above");
        }
    }

    /// Hands a shared sync to the syncer thread (started now if need be), or
    /// runs it here when there is no thread to run it.
    pub(super) fn start_shared(&mut self, mut batches: Vec<FileBatch>, observer: &dyn IoObserver) {
        let filesystems = match self
            .disk
            .filesystems_of(batches.iter().map(|batch| batch.file))
        {
            Ok(filesystems) => filesystems,
            Err(error) => {
                self.disk
                    .settle_shared_sync(&mut batches, Err(error), observer);
                self.finished.append(&mut batches);
                return;
            }
        };
        if self.syncer.is_none() {
            match Syncer::spawn(Arc::clone(&self.doorbell)) {
                Ok(syncer) => self.syncer = Some(syncer),
                Err(error) => {
                    tracing::warn!(%error, "wal: no syncfs thread; shared syncs run on the writer");
                }
            }
        }
        let job = SharedSyncJob {
            batches,
            filesystems,
            started: Instant::now(),
            result: None,
        };
        let refused = match self.syncer.as_mut() {
            Some(syncer) => syncer.start(job).err(),
            None => Some(job),
        };
        if let Some(mut job) = refused {
            let result = syncfs::sync_filesystems(&job.filesystems).map(|()| job.started.elapsed());
            self.disk
                .settle_shared_sync(&mut job.batches, result, observer);
            self.finished.append(&mut job.batches);
        }
    }

    /// Makes room for `entries` more SQEs in the submission queue and
    /// `completions` more in the completion queue, submitting and reaping if
    /// needed.
    pub(super) fn make_room(
        &mut self,
        entries: usize,
        completions: usize,
        observer: &dyn IoObserver,
    ) {
        let sq_capacity = self.ring.params().sq_entries() as usize;
        let cq_capacity = self.ring.params().cq_entries() as usize;
        while self.ring.submission().len() + entries > sq_capacity
            || self.entries_in_flight + completions > cq_capacity
        {
            let want = usize::from(self.entries_in_flight + completions > cq_capacity);
            self.enter(want, None);
            self.drain_completions(observer);
        }
    }
}

/// Splits a batch's frames into `writev` operations.
fn plan_writes(batch: &FileBatch, iovecs: &mut Vec<libc::iovec>, ops: &mut Vec<Op>) {
    let mut offset = batch.offset;
    let mut frame = 0;
    while frame < batch.frames.len() {
        let (first_frame, first_iovec) = (frame, iovecs.len());
        let mut len = 0u64;
        while frame < batch.frames.len()
            && iovecs.len() - first_iovec + 3 <= IOVECS_PER_WRITE_MAX
            && (len == 0 || len + batch.frames[frame].len() <= WRITE_BYTES_MAX)
        {
            let entry = &batch.frames[frame];
            iovecs.extend(entry.parts().map(iovec_of));
            len += entry.len();
            frame += 1;
        }
        assert!(
            frame > first_frame,
            "every writev carries at least one frame"
        );
        ops.push(Op {
            kind: OpKind::Write {
                offset,
                len,
                frames: (first_frame, frame),
                iovecs: (first_iovec, iovecs.len()),
            },
            result: None,
            reaped_at: None,
        });
        offset += len;
    }
}

fn iovec_of(bytes: &[u8]) -> libc::iovec {
    libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    }
}

fn build_entry(
    fd: i32,
    op: &Op,
    iovecs: &[libc::iovec],
    user_data: u64,
    flags: squeue::Flags,
) -> io_uring::squeue::Entry {
    let entry = match op.kind {
        OpKind::Write {
            offset,
            iovecs: (first, end),
            ..
        }
        | OpKind::Zero {
            offset,
            iovecs: (first, end),
            ..
        } => opcode::Writev::new(
            types::Fd(fd),
            iovecs[first..end].as_ptr(),
            (end - first) as u32,
        )
        .offset(offset)
        .build(),
        OpKind::Sync => opcode::Fsync::new(types::Fd(fd))
            .flags(types::FsyncFlags::DATASYNC)
            .build(),
    };
    entry.flags(flags).user_data(user_data)
}

/// Whether a direct append goes as two writes: its first block, which
/// rewrites the block the file's last append ended in, and the rest. The
/// first lands on a block the file system holds as written, the rest on room
/// allocated ahead and not zeroed yet (unwritten); one write spanning both is
/// not an overwrite of one extent, so the kernel hands it to an io_uring
/// worker, where each half alone is issued at once. An append that only
/// overwrites written blocks stays whole, and a batch that carries its fsync
/// keeps one write, linked before it.
fn split_direct_write(batch: &FileBatch, write: crate::direct::DirectWrite) -> bool {
    let rewrites_last_block = write.offset < batch.offset;
    rewrites_last_block && !write.overwrite && write.len > DIRECT_BLOCK_BYTES as u64 && !batch.sync
}

/// Pushes the write of `zeroing`'s zeros (from the static `room_zeros`, one
/// iovec per piece of it), at most [`IOVECS_PER_WRITE_MAX`] pieces: room
/// past them stays unwritten.
fn push_zeroing(zeroing: Zeroing, iovecs: &mut Vec<libc::iovec>, ops: &mut Vec<Op>) {
    let zeros = room_zeros();
    let first = iovecs.len();
    let mut at = zeroing.start;
    while at < zeroing.end && iovecs.len() - first < IOVECS_PER_WRITE_MAX {
        let piece = (zeroing.end - at).min(zeros.len() as u64) as usize;
        iovecs.push(iovec_of(&zeros[..piece]));
        at += piece as u64;
    }
    ops.push(Op {
        kind: OpKind::Zero {
            offset: zeroing.start,
            len: at - zeroing.start,
            iovecs: (first, iovecs.len()),
        },
        result: None,
        reaped_at: None,
    });
}
