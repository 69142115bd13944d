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
//!
//! The backend's rooms: this file sets the ring up and holds the storage,
//! its chains and the trait impls; `submission` plans a batch into a chain
//! and pushes it; `completion` enters the ring, drains completions and
//! settles finished chains; `doorbell` is the [`Doorbell`] and its armed read.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{IoUring, opcode};

use crate::direct::{AlignedBuffer, BufferPool, DIRECT_BLOCK_BYTES, DirectFile};
use crate::disk::DiskStorage;
use crate::request::{FileId, OpenMode};
use crate::storage::{FileBatch, IoObserver, NoObserver, Pipeline, Storage};
use crate::syncfs::{SharedSyncJob, Syncer};

mod completion;
mod doorbell;
mod submission;

use doorbell::DOORBELL_USER_DATA;
pub use doorbell::Doorbell;

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
