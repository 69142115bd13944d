//! [`UringStorage`]: group commits driven through one io_uring instance.
//!
//! Each [`FileBatch`] becomes one linked chain: `writev` SQEs (at most
//! [`IOVECS_PER_WRITE_MAX`] iovecs and [`WRITE_BYTES_MAX`] bytes each) with
//! `IOSQE_IO_LINK`, then one `IORING_OP_FSYNC` with `IORING_FSYNC_DATASYNC`. The
//! chains of every file in the turn are submitted together and the turn waits
//! for all of them. Opens, truncates and renames go through [`DiskStorage`].
//!
//! A chain whose write came back short (the kernel then cancels the rest of the
//! chain) is finished with plain `pwrite`s and a plain `fdatasync`: the sync that
//! makes it durable always runs after every byte of the batch was written.
#![allow(unsafe_code)]

use std::io;
use std::path::Path;
use std::time::Instant;

use io_uring::{IoUring, opcode, squeue, types};

use crate::disk::DiskStorage;
use crate::error::IoOp;
use crate::request::{FileId, OpenMode};
use crate::storage::{
    BatchOutcome, FileBatch, IoEvent, IoObserver, Storage, execute_sequential, sync_after_writes,
};

/// Submission queue entries of the ring. A turn with more work is submitted in
/// waves; one file's chain must fit in it (longer chains run without the ring).
pub const RING_ENTRIES: u32 = 256;

/// iovecs per `writev` (the kernel's `IOV_MAX`).
pub const IOVECS_PER_WRITE_MAX: usize = 1024;

/// Bytes per `writev`, well below the kernel's per-call cap of 2 GiB - 4 KiB.
pub const WRITE_BYTES_MAX: u64 = 1 << 30;

/// One SQE of a turn and, once reaped, its result.
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
    /// from iovecs `iovecs.0..iovecs.1` of the turn.
    Write {
        offset: u64,
        len: u64,
        frames: (usize, usize),
        iovecs: (usize, usize),
    },
    Sync,
}

/// Real files, with group commits executed through io_uring.
pub struct UringStorage {
    disk: DiskStorage,
    ring: IoUring,
}

impl std::fmt::Debug for UringStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringStorage").finish_non_exhaustive()
    }
}

impl UringStorage {
    /// Sets up the ring and proves it works (opcodes probed, one NOP round trip).
    /// Fails where io_uring is missing or blocked (old kernel, seccomp, EPERM).
    pub fn new() -> io::Result<UringStorage> {
        let mut ring = IoUring::new(RING_ENTRIES)?;
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        let needed = [opcode::Writev::CODE, opcode::Fsync::CODE, opcode::Nop::CODE];
        if !needed.iter().all(|&code| probe.is_supported(code)) {
            return Err(io::Error::from_raw_os_error(libc::ENOSYS));
        }
        let nop = opcode::Nop::new().build().user_data(u64::MAX);
        // SAFETY: a NOP references no memory.
        unsafe { ring.submission().push(&nop) }
            .map_err(|_| io::Error::from_raw_os_error(libc::EBUSY))?;
        ring.submit_and_wait(1)?;
        let nop_result = ring.completion().next().map(|cqe| cqe.result());
        if nop_result != Some(0) {
            return Err(io::Error::from_raw_os_error(libc::ENOSYS));
        }
        Ok(UringStorage {
            disk: DiskStorage::new(),
            ring,
        })
    }

    /// Plans every SQE of the turn. Fills `iovecs` completely before any SQE
    /// is built, so the pointers handed to the kernel never move.
    fn plan(
        &self,
        batches: &[FileBatch],
        iovecs: &mut Vec<libc::iovec>,
    ) -> (Vec<Op>, Vec<(usize, usize)>) {
        let mut ops = Vec::new();
        let mut chains = Vec::with_capacity(batches.len());
        for batch in batches {
            let first = ops.len();
            plan_writes(batch, iovecs, &mut ops);
            if batch.sync {
                ops.push(Op {
                    kind: OpKind::Sync,
                    result: None,
                    reaped_at: None,
                });
            }
            chains.push((first, ops.len()));
        }
        (ops, chains)
    }

    /// Submits every chain that fits the ring and waits for all completions.
    /// Returns, per batch, whether it went through the ring and when it started.
    fn run_chains(
        &mut self,
        batches: &[FileBatch],
        iovecs: &[libc::iovec],
        ops: &mut [Op],
        chains: &[(usize, usize)],
    ) -> Vec<Option<Instant>> {
        let sq_capacity = self.ring.params().sq_entries() as usize;
        let cq_capacity = self.ring.params().cq_entries() as usize;
        let mut started = vec![None; batches.len()];
        let mut in_flight = 0usize;
        for (index, &(first, end)) in chains.iter().enumerate() {
            let chain_len = end - first;
            if chain_len == 0 || chain_len > sq_capacity {
                continue;
            }
            let Ok(fd) = self.disk.raw_fd(batches[index].file) else {
                continue;
            };
            while self.ring.submission().len() + chain_len > sq_capacity
                || in_flight + chain_len > cq_capacity
            {
                let want = usize::from(in_flight + chain_len > cq_capacity);
                self.submit(want);
                in_flight -= self.reap(ops);
            }
            for (op_index, op) in ops.iter().enumerate().take(end).skip(first) {
                let link = op_index + 1 < end;
                let entry = build_entry(fd, op, iovecs, op_index, link);
                // SAFETY: the entry points at `iovecs[..]`, which point at frame
                // headers and payloads owned by `batches`. Neither is moved, changed
                // or dropped before this function returns, and it returns only once
                // every submitted entry has completed (`in_flight == 0`). The fd
                // stays open: files are closed only between turns.
                unsafe { self.ring.submission().push(&entry) }
                    .expect("the chain fits: room was made above");
            }
            in_flight += chain_len;
            started[index] = Some(Instant::now());
        }
        while in_flight > 0 {
            self.submit(1);
            in_flight -= self.reap(ops);
        }
        started
    }

    /// `io_uring_enter`, retried on EINTR/EBUSY. Any other failure means the
    /// ring itself is broken, which leaves in-flight buffers in the kernel's
    /// hands: we cannot continue safely, so we stop loudly.
    fn submit(&mut self, want: usize) {
        loop {
            match self.ring.submit_and_wait(want) {
                Ok(_) => return,
                Err(error)
                    if matches!(
                        error.raw_os_error(),
                        Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)
                    ) =>
                {
                    if error.raw_os_error() != Some(libc::EINTR) {
                        return;
                    }
                }
                Err(error) => panic!("wal: io_uring_enter failed: {error}"),
            }
        }
    }

    /// Records every available completion; returns how many.
    fn reap(&mut self, ops: &mut [Op]) -> usize {
        let now = Instant::now();
        let mut reaped = 0;
        for cqe in self.ring.completion() {
            let op = &mut ops[cqe.user_data() as usize];
            assert!(op.result.is_none(), "one completion per entry");
            op.result = Some(cqe.result());
            op.reaped_at = Some(now);
            reaped += 1;
        }
        reaped
    }

    /// Turns one batch's reaped results into its outcome, finishing short writes.
    fn settle_batch(
        &mut self,
        batch: &FileBatch,
        ops: &[Op],
        started: Instant,
        observer: &dyn IoObserver,
    ) -> BatchOutcome {
        let mut repaired = false;
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
                let parts = skip_bytes(frame_parts(batch, frames), done);
                if let Err(error) = self.disk.write_at(batch.file, offset + done, &parts) {
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

/// Splits a batch's frames into `writev` operations.
fn plan_writes(batch: &FileBatch, iovecs: &mut Vec<libc::iovec>, ops: &mut Vec<Op>) {
    let mut offset = batch.offset;
    let mut frame = 0;
    while frame < batch.frames.len() {
        let (first_frame, first_iovec) = (frame, iovecs.len());
        let mut len = 0u64;
        while frame < batch.frames.len()
            && iovecs.len() - first_iovec + 2 <= IOVECS_PER_WRITE_MAX
            && (len == 0 || len + batch.frames[frame].len() <= WRITE_BYTES_MAX)
        {
            let entry = &batch.frames[frame];
            iovecs.push(iovec_of(&entry.header()[..]));
            iovecs.push(iovec_of(&entry.payload()[..]));
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
    op_index: usize,
    link: bool,
) -> io_uring::squeue::Entry {
    let entry = match op.kind {
        OpKind::Write {
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
    let flags = if link {
        squeue::Flags::IO_LINK
    } else {
        squeue::Flags::empty()
    };
    entry.flags(flags).user_data(op_index as u64)
}

/// Header and payload slices of frames `range.0..range.1`.
fn frame_parts(batch: &FileBatch, range: (usize, usize)) -> Vec<&[u8]> {
    let mut parts = Vec::with_capacity((range.1 - range.0) * 2);
    for frame in &batch.frames[range.0..range.1] {
        parts.push(&frame.header()[..]);
        parts.push(&frame.payload()[..]);
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
        self.disk.set_len(file, len)
    }
    fn rename(&mut self, file: FileId, to: &Path) -> io::Result<()> {
        self.disk.rename(file, to)
    }
    fn close(&mut self, file: FileId) {
        self.disk.close(file)
    }

    fn execute(&mut self, batches: &mut [FileBatch], observer: &dyn IoObserver) {
        let mut iovecs = Vec::new();
        let (mut ops, chains) = self.plan(batches, &mut iovecs);
        let started = self.run_chains(batches, &iovecs, &mut ops, &chains);
        for (index, batch) in batches.iter_mut().enumerate() {
            assert!(batch.outcome.is_none(), "batch executed twice");
            let (first, end) = chains[index];
            batch.outcome = started[index]
                .map(|start| self.settle_batch(batch, &ops[first..end], start, observer));
            if batch.outcome.is_none() {
                // Empty, unknown to the disk, or longer than the ring: plain calls.
                execute_sequential(&mut self.disk, batch, observer);
            }
        }
    }
}
