//! [`UringStorage`]: batches driven through one io_uring instance, pipelined.
//!
//! Each [`FileBatch`] becomes one linked chain: `writev` SQEs (at most
//! [`IOVECS_PER_WRITE_MAX`] iovecs and [`WRITE_BYTES_MAX`] bytes each) with
//! `IOSQE_IO_LINK`, then, if the batch asks for it, one `IORING_OP_FSYNC` with
//! `IORING_FSYNC_DATASYNC`. A direct file's append may carry one more write
//! beside the chain, unlinked and last: zeros into the room past it (see
//! `direct`), which posts its own completion. [`Pipeline::start`] pushes a
//! chain and returns; the chains started in one turn reach the kernel together
//! at the next `reap` or `wait` (one `io_uring_enter`), and the writer plans
//! the next turn while they run. Opens, truncates and renames go through [`DiskStorage`].
//!
//! Memory the kernel reads (the frames, and the iovec array pointing into
//! them) is owned by the chain's slot from the push until its last completion
//! is reaped; dropping the storage first waits for every chain in flight.
//!
//! A chain whose write came back short (the kernel then cancels the rest of the
//! chain) is finished with plain `pwrite`s and a plain `fdatasync`: the sync that
//! makes it durable always runs after every byte of the batch was written.
//!
//! Where the kernel supports it, every entry of a chain but the last carries
//! `IOSQE_CQE_SKIP_SUCCESS`: a chain then posts exactly one completion, its last
//! entry's when all went well, or the first failed (or short) entry's, after
//! which the kernel cancels the rest without posting. ext4 runs buffered writes
//! on io_uring's workers, so without this every chain would wake the writer
//! once for its write and again for its fsync.
//!
//! Shared syncs (one `syncfs` for the bare syncs of many files, see `syncfs`)
//! have no io_uring operation: a [`Syncer`] thread runs them and rings the
//! doorbell when one is done.
//!
//! The writer waits for completions inside `io_uring_enter`. To be woken by a
//! new request as well, it parks on the [`Doorbell`]: an eventfd on which the
//! ring keeps a read armed, written by a submitter that finds the writer
//! parked.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

use io_uring::{IoUring, opcode, squeue, types};

use crate::direct::{
    AlignedBuffer, BufferPool, DIRECT_BLOCK_BYTES, DirectFile, Plan, Zeroing, room_zeros,
};
use crate::disk::DiskStorage;
use crate::engine::SPARE_LISTS_MAX;
use crate::error::IoOp;
use crate::frame::Frame;
use crate::request::{FileId, OpenMode};
use crate::storage::{
    BatchOutcome, FileBatch, IoEvent, IoObserver, NoObserver, Pipeline, Storage,
    execute_sequential, sync_after_writes,
};
use crate::syncfs::{self, SharedSyncJob, Syncer};

/// Submission queue entries of the ring. One file's chain must fit in it
/// (longer chains run without the ring); completions in flight are kept below
/// the completion queue's size (twice this).
pub const RING_ENTRIES: u32 = 256;

/// iovecs per `writev` (the kernel's `IOV_MAX`).
pub const IOVECS_PER_WRITE_MAX: usize = 1024;

/// Bytes per `writev`, well below the kernel's per-call cap of 2 GiB - 4 KiB.
pub const WRITE_BYTES_MAX: u64 = 1 << 30;

// A completion's result is an i32; a full write's length must fit in it.
const _: () = assert!(WRITE_BYTES_MAX <= i32::MAX as u64);

/// The most io_uring workers for regular-file work (writes that must block,
/// fdatasyncs), so the fsyncs of that many files run at once. The kernel's
/// default is `min(ring entries, 4 x CPUs)`: 8 on a 2-CPU machine, which
/// would serialise the fsyncs of a turn with 16 dirty files in two waves.
pub const IO_WORKERS_MAX: u32 = 64;

/// The `user_data` of the doorbell's read; chains use `slot << 32 | op`.
const DOORBELL_USER_DATA: u64 = u64::MAX;

/// Wakes the writer thread out of an io_uring wait.
///
/// An eventfd on which the ring keeps a read armed while the writer waits,
/// a count of requests submitted, and the count at which the parked writer
/// wants to be woken (one more request when it waits for I/O; the rest of
/// the group when it gathers one, so a group of n requests costs one wake,
/// not n). A submitter rings after queueing its request; only the ring that
/// reaches the mark costs a syscall.
#[derive(Debug)]
pub struct Doorbell {
    eventfd: File,
    /// Requests rung in so far.
    arrivals: AtomicU64,
    /// Wake the writer when `arrivals` reaches this; `NOT_PARKED` while it runs.
    wake_at: AtomicU64,
}

/// `Doorbell::wake_at` while the writer is not parked.
const NOT_PARKED: u64 = u64::MAX;

impl Doorbell {
    fn new() -> io::Result<Doorbell> {
        // SAFETY: eventfd takes no pointers; its result is checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a descriptor we just created and nobody else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Doorbell {
            eventfd: File::from(owned),
            arrivals: AtomicU64::new(0),
            wake_at: AtomicU64::new(NOT_PARKED),
        })
    }

    /// Counts one queued request and wakes the writer if it is parked and
    /// this request is the one it waits for. Call after the request is queued.
    pub fn ring(&self) {
        let arrived = self.arrivals.fetch_add(1, Ordering::SeqCst) + 1;
        // Pairs with the fence in `park`: either the writer sees the request
        // when it checks the queue after parking, or we see its mark.
        fence(Ordering::SeqCst);
        if arrived >= self.wake_at.load(Ordering::SeqCst) {
            self.ring_now();
        }
    }

    /// Wakes the writer if it is parked, whatever it waits for (an open or a
    /// shutdown must not wait for a group to fill).
    pub(crate) fn ring_now(&self) {
        if self.wake_at.swap(NOT_PARKED, Ordering::SeqCst) != NOT_PARKED {
            self.signal();
        }
    }

    /// Marks the writer as about to wait until `requests` more arrive (at
    /// least one). It must check its queue after this.
    pub(crate) fn park(&self, requests: usize) {
        let requests = requests.max(1) as u64;
        let mark = self
            .arrivals
            .load(Ordering::SeqCst)
            .saturating_add(requests);
        self.wake_at
            .store(mark.min(NOT_PARKED - 1), Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Marks the writer as running.
    pub(crate) fn unpark(&self) {
        self.wake_at.store(NOT_PARKED, Ordering::SeqCst);
    }

    pub(crate) fn signal(&self) {
        // EAGAIN means the counter is already non-zero: the wake is pending.
        let _ = (&self.eventfd).write(&1u64.to_ne_bytes());
    }

    fn raw_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.eventfd.as_raw_fd()
    }
}

/// One SQE of a chain and, once reaped, its result.
#[derive(Debug)]
struct Op {
    kind: OpKind,
    /// The CQE result, once reaped.
    result: Option<i32>,
    /// When the CQE was reaped.
    reaped_at: Option<Instant>,
}

#[derive(Debug, Clone, Copy)]
enum OpKind {
    /// Writes frames `frames.0..frames.1` of the batch, `len` bytes at `offset`,
    /// from iovecs `iovecs.0..iovecs.1` of the chain.
    Write {
        offset: u64,
        len: u64,
        frames: (usize, usize),
        iovecs: (usize, usize),
    },
    /// Writes zeros into a direct file's room, `len` bytes at `offset`, from
    /// iovecs `iovecs.0..iovecs.1` (see `direct`): never linked, and its
    /// failure fails nothing (the room then reads as zeros unwritten).
    Zero {
        offset: u64,
        len: u64,
        iovecs: (usize, usize),
    },
    Sync,
}

/// The iovec array of one chain: pointers into the frames of the same chain.
struct Iovecs(Vec<libc::iovec>);

// SAFETY: the pointers are into the `Bytes` and headers of the frames owned by
// the same `Chain`, which is `Send` (or into static zeros); they are only
// dereferenced by the kernel, never through this array by any thread, so
// moving both together to another thread is sound. A spare array kept for
// reuse is empty.
unsafe impl Send for Iovecs {}

/// One batch in flight, owning everything the kernel reads for it.
struct Chain {
    batch: FileBatch,
    iovecs: Iovecs,
    ops: Vec<Op>,
    /// Completions still expected: one per op, or one in all with
    /// `IOSQE_CQE_SKIP_SUCCESS`.
    pending: usize,
    started: Instant,
    /// Started by [`Storage::execute`] at this position of its slice; it
    /// waits for the chain itself.
    blocking: Option<usize>,
    /// A direct append's whole blocks (its writes point here instead of at
    /// the frames); back to the pool when the chain finishes.
    direct: Option<AlignedBuffer>,
    /// Whether each entry (but a zeroing) waits for the one before
    /// (`IOSQE_IO_LINK`): every chain but the split direct append, whose two
    /// writes are independent.
    linked: bool,
}

/// Real files, with group commits executed through io_uring, pipelined.
pub struct UringStorage {
    disk: DiskStorage,
    /// Files whose appends go past the page cache, and their tail blocks.
    direct: BTreeMap<FileId, DirectFile>,
    /// Buffers of direct writes.
    direct_buffers: BufferPool,
    /// The iovec and entry lists of finished chains, emptied, for the next
    /// chains (at most `SPARE_LISTS_MAX` of each).
    spare_iovecs: Vec<Iovecs>,
    spare_ops: Vec<Vec<Op>>,
    ring: IoUring,
    chains: Vec<Option<Chain>>,
    free_slots: Vec<usize>,
    /// Completions expected and not yet reaped (chains' and the doorbell's).
    entries_in_flight: usize,
    /// Finished batches not yet handed back by `reap`.
    finished: Vec<FileBatch>,
    /// Finished batches an `execute` call waits for, by position.
    finished_blocking: Vec<(usize, FileBatch)>,
    /// Batches started by `Pipeline::start` and not yet handed back.
    outstanding: usize,
    /// Reused buffer for the completions of one drain.
    reaped: Vec<(u64, i32)>,
    doorbell: Arc<Doorbell>,
    /// Where the doorbell's armed read puts the eventfd counter.
    doorbell_buffer: Box<[u8; 8]>,
    doorbell_armed: bool,
    /// The kernel takes a timeout on `io_uring_enter` (IORING_FEAT_EXT_ARG).
    timed_waits: bool,
    /// The kernel honours `IOSQE_CQE_SKIP_SUCCESS` (IORING_FEAT_CQE_SKIP).
    skip_success: bool,
    /// Runs shared syncs (`syncfs`) off the writer thread; started on first use.
    syncer: Option<Syncer>,
    /// Reused buffer for the shared syncs of one collection.
    shared_done: Vec<SharedSyncJob>,
}

impl std::fmt::Debug for UringStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringStorage")
            .field("entries_in_flight", &self.entries_in_flight)
            .field("outstanding", &self.outstanding)
            .finish_non_exhaustive()
    }
}

impl UringStorage {
    /// Sets up the ring and proves it works (opcodes probed, one NOP round trip).
    /// Fails where io_uring is missing or blocked (old kernel, seccomp, EPERM).
    pub fn new() -> io::Result<UringStorage> {
        let mut ring = IoUring::new(RING_ENTRIES)?;
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        let needed = [
            opcode::Writev::CODE,
            opcode::Fsync::CODE,
            opcode::Nop::CODE,
            opcode::Read::CODE,
        ];
        if !needed.iter().all(|&code| probe.is_supported(code)) {
            return Err(io::Error::from_raw_os_error(libc::ENOSYS));
        }
        let nop = opcode::Nop::new().build().user_data(DOORBELL_USER_DATA);
        // SAFETY: a NOP references no memory.
        unsafe { ring.submission().push(&nop) }
            .map_err(|_| io::Error::from_raw_os_error(libc::EBUSY))?;
        ring.submit_and_wait(1)?;
        let nop_result = ring.completion().next().map(|cqe| cqe.result());
        if nop_result != Some(0) {
            return Err(io::Error::from_raw_os_error(libc::ENOSYS));
        }
        // Older kernels lack the call; their default worker count then applies.
        let _ = ring
            .submitter()
            .register_iowq_max_workers(&mut [IO_WORKERS_MAX, 0]);
        let timed_waits = ring.params().is_feature_ext_arg();
        let skip_success = ring.params().is_feature_skip_cqe_on_success();
        Ok(UringStorage {
            disk: DiskStorage::new(),
            direct: BTreeMap::new(),
            direct_buffers: BufferPool::default(),
            spare_iovecs: Vec::new(),
            spare_ops: Vec::new(),
            ring,
            chains: Vec::new(),
            free_slots: Vec::new(),
            entries_in_flight: 0,
            finished: Vec::new(),
            finished_blocking: Vec::new(),
            outstanding: 0,
            reaped: Vec::new(),
            doorbell: Arc::new(Doorbell::new()?),
            doorbell_buffer: Box::new([0; 8]),
            doorbell_armed: false,
            timed_waits,
            skip_success,
            syncer: None,
            shared_done: Vec::new(),
        })
    }

    /// Starts one batch: pushes its chain, or runs it with plain calls when it
    /// cannot go through the ring (too long, or the descriptor is unknown).
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

    fn start_chain(
        &mut self,
        mut batch: FileBatch,
        blocking: Option<usize>,
        observer: &dyn IoObserver,
    ) {
        assert!(batch.outcome.is_none(), "batch started twice");
        let Iovecs(mut iovecs) = self.spare_iovecs.pop().unwrap_or(Iovecs(Vec::new()));
        let mut ops = self.spare_ops.pop().unwrap_or_default();
        let (direct, zeroing) = match self.plan_direct(&batch, &mut iovecs, &mut ops) {
            Ok(Some((buffer, zeroing))) => (Some(buffer), zeroing),
            Ok(None) => (None, None),
            Err(error) => {
                let errno = crate::error::errno_of(&error);
                batch.outcome = Some(write_failed(observer, &batch, errno));
                self.push_finished(batch, blocking);
                return;
            }
        };
        if direct.is_none() {
            plan_writes(&batch, &mut iovecs, &mut ops);
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
            push_zeroing(zeroing, &mut iovecs, &mut ops);
        }
        let fd = self.disk.raw_fd(batch.file);
        let sq_capacity = self.ring.params().sq_entries() as usize;
        if ops.is_empty() || ops.len() > sq_capacity || fd.is_err() {
            if let Some(buffer) = direct {
                // Only a descriptor that cannot be had brings a direct write here.
                let errno = fd
                    .err()
                    .map_or(libc::EIO, |error| crate::error::errno_of(&error));
                self.direct_buffers.put(buffer);
                batch.outcome = Some(write_failed(observer, &batch, errno));
                self.push_finished(batch, blocking);
                return;
            }
            execute_sequential(&mut self.disk, &mut batch, observer);
            self.push_finished(batch, blocking);
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
        let skip_success = self.skip_success;
        let chain = self.chains[slot].insert(Chain {
            batch,
            iovecs: Iovecs(iovecs),
            ops,
            pending: completions,
            started: Instant::now(),
            blocking,
            direct,
            linked,
        });
        for (index, op) in chain.ops.iter().enumerate() {
            let link = linked && index + 1 < linked_len;
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
        self.entries_in_flight += completions;
    }

    /// Hands a shared sync to the syncer thread (started now if need be), or
    /// runs it here when there is no thread to run it.
    fn start_shared(&mut self, mut batches: Vec<FileBatch>, observer: &dyn IoObserver) {
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

    /// Settles the shared syncs the syncer thread has finished.
    fn collect_shared(&mut self, observer: &dyn IoObserver) {
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

    /// Makes room for `entries` more SQEs in the submission queue and
    /// `completions` more in the completion queue, submitting and reaping if
    /// needed.
    fn make_room(&mut self, entries: usize, completions: usize, observer: &dyn IoObserver) {
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

    /// `io_uring_enter`: submits what is queued and waits for `want`
    /// completions, at most `timeout`. EINTR, EBUSY, EAGAIN and ETIME end the
    /// wait early. Any other failure means the ring itself is broken, which
    /// leaves buffers in the kernel's hands: we cannot continue safely, so we
    /// stop loudly.
    fn enter(&mut self, want: usize, timeout: Option<Duration>) {
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
    fn drain_completions(&mut self, observer: &dyn IoObserver) {
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

    fn push_finished(&mut self, batch: FileBatch, blocking: Option<usize>) {
        assert!(batch.outcome.is_some(), "a finished batch has its outcome");
        match blocking {
            Some(position) => self.finished_blocking.push((position, batch)),
            None => self.finished.push(batch),
        }
    }

    /// Keeps a read of the doorbell's eventfd armed, so a ring ends a wait.
    fn arm_doorbell(&mut self, observer: &dyn IoObserver) {
        if self.doorbell_armed {
            return;
        }
        self.make_room(1, 1, observer);
        let entry = opcode::Read::new(
            types::Fd(self.doorbell.raw_fd()),
            self.doorbell_buffer.as_mut_ptr(),
            8,
        )
        .build()
        .user_data(DOORBELL_USER_DATA);
        // SAFETY: the read fills `doorbell_buffer`, a heap buffer owned by the
        // storage and never touched elsewhere while the read is armed; `Drop`
        // completes the read before freeing it.
        unsafe { self.ring.submission().push(&entry) }.expect("room was made above");
        self.doorbell_armed = true;
        self.entries_in_flight += 1;
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
        let mut repaired = false;
        let first_offset = ops.iter().find_map(|op| match op.kind {
            OpKind::Write { offset, .. } => Some(offset),
            OpKind::Zero { .. } | OpKind::Sync => None,
        });
        for op in ops {
            if let OpKind::Zero { offset, len, .. } = op.kind {
                note_zeroing(batch.file, offset, len, op.result.expect("reaped"));
            }
        }
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
                res => return write_failed(observer, batch, -res),
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
                    return write_failed(observer, batch, crate::error::errno_of(&error));
                }
            }
            let file = batch.file;
            observer.on_event(IoEvent::Written { file, offset, len });
        }
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

impl Drop for UringStorage {
    /// Waits until the kernel is done with every buffer it was given: each
    /// chain in flight, and the doorbell's read (rung to complete it).
    fn drop(&mut self) {
        // Its jobs hold only bare syncs: no memory the kernel reads.
        self.syncer = None;
        if self.doorbell_armed {
            self.doorbell.signal();
        }
        while self.entries_in_flight > 0 {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(error)
                    if matches!(
                        error.raw_os_error(),
                        Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)
                    ) => {}
                Err(error) => {
                    // The ring is broken and the kernel may still use the
                    // buffers: leak them rather than free memory it may touch.
                    tracing::error!(%error, "wal: io_uring broken at shutdown; leaking its buffers");
                    std::mem::forget(std::mem::take(&mut self.chains));
                    std::mem::forget(std::mem::replace(
                        &mut self.doorbell_buffer,
                        Box::new([0; 8]),
                    ));
                    return;
                }
            }
            self.drain_completions(&NoObserver);
        }
    }
}

impl Pipeline for UringStorage {
    fn start(&mut self, batch: FileBatch, observer: &dyn IoObserver) {
        self.outstanding += 1;
        self.start_chain(batch, None, observer);
    }

    fn start_shared_sync(&mut self, batches: Vec<FileBatch>, observer: &dyn IoObserver) {
        self.outstanding += batches.len();
        self.start_shared(batches, observer);
    }

    fn reap(&mut self, done: &mut Vec<FileBatch>, observer: &dyn IoObserver) {
        if !self.ring.submission().is_empty() {
            self.enter(0, None);
        }
        self.drain_completions(observer);
        self.collect_shared(observer);
        self.outstanding -= self.finished.len();
        done.append(&mut self.finished);
    }

    fn in_flight(&self) -> usize {
        self.outstanding
    }

    fn wait(&mut self, timeout: Option<Duration>, observer: &dyn IoObserver) {
        self.collect_shared(observer);
        if !self.finished.is_empty() || self.outstanding == 0 {
            return;
        }
        // The syncer rings the doorbell when it finishes a job: the armed
        // read ends this wait, or completes at once if it rang already.
        self.arm_doorbell(observer);
        self.enter(1, timeout);
        self.drain_completions(observer);
        self.collect_shared(observer);
    }

    fn doorbell(&self) -> Option<Arc<Doorbell>> {
        Some(Arc::clone(&self.doorbell))
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

fn write_failed(observer: &dyn IoObserver, batch: &FileBatch, errno: i32) -> BatchOutcome {
    observer.on_event(IoEvent::Failed {
        file: batch.file,
        op: IoOp::Write,
        errno,
    });
    BatchOutcome::WriteFailed { errno }
}

impl Storage for UringStorage {
    fn open(&mut self, file: FileId, path: &Path, mode: OpenMode) -> io::Result<u64> {
        self.disk.open(file, path, mode)
    }
    fn read_all(&mut self, file: FileId) -> io::Result<Vec<u8>> {
        self.disk.read_all(file)
    }
    fn write_at(&mut self, file: FileId, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        self.disk.write_at(file, offset, parts)
    }
    fn sync_data(&mut self, file: FileId) -> io::Result<()> {
        self.disk.sync_data(file)
    }
    fn set_len(&mut self, file: FileId, len: u64) -> io::Result<()> {
        self.disk.set_len(file, len)?;
        if let Some(direct) = self.direct.get_mut(&file) {
            direct.cut(len.min(direct.end()));
        }
        Ok(())
    }
    fn zero_fill(&mut self, file: FileId, offset: u64, len: u64) -> io::Result<()> {
        if let Some(direct) = self.direct.get_mut(&file) {
            // Whole blocks: the zeros written into the room cover its last one.
            let end = (offset + len).next_multiple_of(DIRECT_BLOCK_BYTES as u64);
            allocate(self.disk.raw_fd(file)?, offset, end - offset)?;
            direct.zero_room(offset, len);
            return Ok(());
        }
        self.disk.zero_fill(file, offset, len)
    }
    fn set_direct(&mut self, file: FileId, end: u64, direct: bool) -> bool {
        if self.disk.set_direct(file, direct).is_err() {
            return self.direct.contains_key(&file);
        }
        if direct {
            self.direct.insert(file, DirectFile::new(end));
        } else {
            self.direct.remove(&file);
        }
        direct
    }
    fn rename(&mut self, file: FileId, to: &Path) -> io::Result<()> {
        self.disk.rename(file, to)
    }
    fn close(&mut self, file: FileId) {
        self.direct.remove(&file);
        self.disk.close(file)
    }
    fn release_descriptor(&mut self, file: FileId) {
        self.disk.release_descriptor(file)
    }
    fn shares_syncs(&self) -> bool {
        self.disk.shares_syncs()
    }
    fn execute_shared_sync(&mut self, batches: &mut [FileBatch], observer: &dyn IoObserver) {
        self.disk.execute_shared_sync(batches, observer)
    }

    /// Runs the batches through the ring and waits for them (batches started
    /// by [`Pipeline::start`] keep running and are reaped as usual).
    fn execute(&mut self, batches: &mut [FileBatch], observer: &dyn IoObserver) {
        assert!(self.finished_blocking.is_empty());
        for (position, slot) in batches.iter_mut().enumerate() {
            let placeholder = FileBatch {
                id: slot.id,
                file: slot.file,
                offset: slot.offset,
                frames: Vec::new(),
                sync: false,
                outcome: None,
            };
            let batch = std::mem::replace(slot, placeholder);
            self.start_chain(batch, Some(position), observer);
        }
        while self.finished_blocking.len() < batches.len() {
            self.enter(1, None);
            self.drain_completions(observer);
        }
        for (position, batch) in self.finished_blocking.drain(..) {
            batches[position] = batch;
        }
    }

    fn pipeline(&mut self) -> Option<&mut dyn Pipeline> {
        Some(self)
    }
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

/// Logs a zeroing of room that failed or came back short: the room's blocks
/// read as zeros all the same, and the appends into them are issued more
/// slowly (see `direct`).
fn note_zeroing(file: FileId, offset: u64, len: u64, result: i32) {
    if result < 0 || result as u64 != len {
        tracing::debug!(%file, offset, len, result, "wal: zeroing room ahead came back short");
    }
}

/// Allocates `len` bytes at `offset` of `fd`'s file that read as zeros,
/// growing the file over them (`fallocate`, nothing written): room that a
/// direct append then writes into without extending the file, which the
/// kernel issues at once instead of handing it to an io_uring worker.
fn allocate(fd: RawFd, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    };
    loop {
        // SAFETY: a plain system call on a descriptor the storage holds open;
        // no memory is passed.
        let result = unsafe { libc::fallocate(fd, 0, offset, len) };
        if result == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}
