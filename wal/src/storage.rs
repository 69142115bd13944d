//! The storage backend abstraction: the few file operations the writer needs,
//! and the one batched operation group commit is built on.
//!
//! Implementations: [`crate::DiskStorage`] (std files: `pwrite` + `fdatasync`,
//! the fallback), [`crate::UringStorage`] (the same, with batches driven through
//! io_uring) and [`crate::MemoryStorage`] (deterministic, crash and fault model,
//! for partition tests and the simulator).
//!
//! Contract every implementation keeps:
//! - `open` with creation, `rename` and `set_len` are durable when they return
//!   (directories synced, truncation followed by fdatasync).
//! - `write_at` writes every byte or fails; it never reports a short write.
//! - `execute` runs each [`FileBatch`]: all writes in order, then (if asked) one
//!   fdatasync after them, and fills in the batch's [`BatchOutcome`]. A sync is
//!   reported successful only if it ran after every write of the batch succeeded.
//! - A backend that can keep batches in flight (io_uring) also offers a
//!   [`Pipeline`]: `start` hands a batch to the device and returns, `reap` hands
//!   finished batches back. The engine keeps the ordering rules (see
//!   `group_commit`): at most one fdatasync in flight per file, and an fsync is
//!   linked after a batch's writes only when no earlier write of that file is
//!   still in flight, so every fsync covers exactly the writes that finished
//!   before it was issued.
//! - A backend that [`Storage::shares_syncs`] makes the bare syncs of many
//!   files durable with one call ([`Storage::execute_shared_sync`],
//!   [`Pipeline::start_shared_sync`]): every write that finished before it was
//!   issued, of every file it names, is durable when it reports success. A
//!   file in a shared sync counts as having its one fdatasync in flight.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{IoOp, errno_of};
use crate::frame::Frame;
use crate::request::{FileId, OpenMode};

/// A backend the writer drives. See the module docs for the contract.
pub trait Storage {
    /// Opens `path` under the id `file` (the caller guarantees the id is unused)
    /// and returns the file's current length.
    fn open(&mut self, file: FileId, path: &Path, mode: OpenMode) -> io::Result<u64>;

    /// Reads the whole file as it is now.
    fn read_all(&mut self, file: FileId) -> io::Result<Vec<u8>>;

    /// Writes `parts`, back to back, starting at `offset`. All or error.
    fn write_at(&mut self, file: FileId, offset: u64, parts: &[&[u8]]) -> io::Result<()>;

    /// `fdatasync`.
    fn sync_data(&mut self, file: FileId) -> io::Result<()>;

    /// Cuts (or extends) the file to `len` and syncs it.
    fn set_len(&mut self, file: FileId, len: u64) -> io::Result<()>;

    /// Renames the file to `to` (replacing what is there) and syncs the
    /// directories involved.
    fn rename(&mut self, file: FileId, to: &Path) -> io::Result<()>;

    /// Forgets the id (closes the descriptor). Syncs nothing.
    fn close(&mut self, file: FileId);

    /// Closes the file's descriptor but keeps the file open under its id:
    /// the next operation on it reopens its path (and fails if the path no
    /// longer names the same file). The engine calls it only for a file with
    /// nothing in flight and every write durable (no writeback error can be
    /// lost with the descriptor). A backend without descriptors has nothing
    /// to release. No default: a wrapper that forgot to forward it would
    /// quietly keep every descriptor.
    fn release_descriptor(&mut self, file: FileId);

    /// Writes `file`'s appends past the page cache (`direct`: see
    /// [`crate::direct`]), its end being `end`, or through the cache again.
    /// Returns whether its appends now go direct: a backend (or file system)
    /// without direct writes answers false, and the file stays as it was.
    /// While a file is direct its writes are appends at its end, one batch in
    /// flight at a time.
    fn set_direct(&mut self, file: FileId, end: u64, direct: bool) -> bool {
        let _ = (file, end, direct);
        false
    }

    /// Makes `len` bytes at `offset` hold zeros on allocated blocks (room
    /// ahead of the appends, see `preallocate`). Syncs nothing. The default
    /// writes them through [`Storage::write_at`] in pieces of at most 1 MiB;
    /// the io_uring backend allocates a direct file's with `fallocate`.
    fn zero_fill(&mut self, file: FileId, offset: u64, len: u64) -> io::Result<()> {
        let mut done = 0u64;
        while done < len {
            let piece = (len - done).min(ZEROS.len() as u64);
            self.write_at(file, offset + done, &[&ZEROS[..piece as usize]])?;
            done += piece;
        }
        Ok(())
    }

    /// Executes one group commit: every batch's writes, then its fsync.
    /// The default runs them one after the other with the methods above.
    fn execute(&mut self, batches: &mut [FileBatch], observer: &dyn IoObserver) {
        for batch in batches.iter_mut() {
            execute_sequential(self, batch, observer);
        }
    }

    /// Whether [`Storage::execute_shared_sync`] (and the pipeline's
    /// [`Pipeline::start_shared_sync`]) make many files durable for about the
    /// price of one fdatasync. The engine then covers the files of a busy turn
    /// with one shared sync instead of one fsync each. Default: no.
    fn shares_syncs(&self) -> bool {
        false
    }

    /// Runs bare syncs (empty batches with `sync`) of several files as one
    /// operation where the backend can, and fills in each outcome. The default
    /// syncs them one by one.
    fn execute_shared_sync(&mut self, batches: &mut [FileBatch], observer: &dyn IoObserver) {
        for batch in batches.iter_mut() {
            assert!(
                batch.is_empty() && batch.sync,
                "a shared sync holds bare syncs"
            );
            execute_sequential(self, batch, observer);
        }
    }

    /// The asynchronous side of a backend that keeps batches in flight while
    /// the writer plans the next group. `None` (the default): every batch is
    /// finished when [`Storage::execute`] returns.
    fn pipeline(&mut self) -> Option<&mut dyn Pipeline> {
        None
    }
}

/// A backend that runs batches asynchronously (see the module docs).
///
/// The engine starts a batch, keeps planning, and later reaps it finished,
/// with its [`BatchOutcome`] filled in. Batches of one file may finish in any
/// order; the engine settles them in order. [`Storage::execute`] on the same
/// backend must still work (the engine uses it for the rare synchronous step,
/// e.g. the sync of a `close`) and must not lose batches started here.
pub trait Pipeline {
    /// Hands `batch` to the device and returns without waiting for it.
    fn start(&mut self, batch: FileBatch, observer: &dyn IoObserver);

    /// Starts bare syncs of several files as one shared sync (see
    /// [`Storage::shares_syncs`]); each batch comes back through
    /// [`Pipeline::reap`] like any other. The default starts them one by one.
    fn start_shared_sync(&mut self, batches: Vec<FileBatch>, observer: &dyn IoObserver) {
        for batch in batches {
            self.start(batch, observer);
        }
    }

    /// Submits what was started and moves every finished batch into `done`.
    /// Never blocks.
    fn reap(&mut self, done: &mut Vec<FileBatch>, observer: &dyn IoObserver);

    /// Batches started and not yet handed back by [`Pipeline::reap`].
    fn in_flight(&self) -> usize;

    /// Blocks until a batch finishes, the [`Pipeline::doorbell`] rings, or
    /// `timeout` passes (`None`: no limit). May return early for no reason.
    fn wait(&mut self, timeout: Option<Duration>, observer: &dyn IoObserver);

    /// What other threads ring to end a [`Pipeline::wait`] early. `None` when
    /// waits cannot be interrupted (the writer then waits in short slices).
    fn doorbell(&self) -> Option<Arc<crate::uring::Doorbell>> {
        None
    }
}

/// The zeros [`Storage::zero_fill`] writes from (in the zero-initialised data
/// segment: costs no binary size).
static ZEROS: [u8; 1 << 20] = [0; 1 << 20];

impl<S: Storage + ?Sized> Storage for Box<S> {
    fn open(&mut self, file: FileId, path: &Path, mode: OpenMode) -> io::Result<u64> {
        (**self).open(file, path, mode)
    }
    fn read_all(&mut self, file: FileId) -> io::Result<Vec<u8>> {
        (**self).read_all(file)
    }
    fn write_at(&mut self, file: FileId, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        (**self).write_at(file, offset, parts)
    }
    fn sync_data(&mut self, file: FileId) -> io::Result<()> {
        (**self).sync_data(file)
    }
    fn set_len(&mut self, file: FileId, len: u64) -> io::Result<()> {
        (**self).set_len(file, len)
    }
    fn zero_fill(&mut self, file: FileId, offset: u64, len: u64) -> io::Result<()> {
        (**self).zero_fill(file, offset, len)
    }
    fn set_direct(&mut self, file: FileId, end: u64, direct: bool) -> bool {
        (**self).set_direct(file, end, direct)
    }
    fn rename(&mut self, file: FileId, to: &Path) -> io::Result<()> {
        (**self).rename(file, to)
    }
    fn close(&mut self, file: FileId) {
        (**self).close(file)
    }
    fn release_descriptor(&mut self, file: FileId) {
        (**self).release_descriptor(file)
    }
    fn execute(&mut self, batches: &mut [FileBatch], observer: &dyn IoObserver) {
        (**self).execute(batches, observer)
    }
    fn pipeline(&mut self) -> Option<&mut dyn Pipeline> {
        (**self).pipeline()
    }
    fn shares_syncs(&self) -> bool {
        (**self).shares_syncs()
    }
    fn execute_shared_sync(&mut self, batches: &mut [FileBatch], observer: &dyn IoObserver) {
        (**self).execute_shared_sync(batches, observer)
    }
}

/// One file's share of a group commit: frames written back to back from
/// `offset`, then one fdatasync if `sync`. A batch with no frames is a bare
/// fdatasync.
#[derive(Debug)]
pub struct FileBatch {
    /// Names the batch among those in flight (assigned by the engine; a
    /// backend hands it back unchanged).
    pub id: u64,
    /// The file.
    pub file: FileId,
    /// Where the first frame goes (the file's append end, or the position of
    /// an in-place rewrite).
    pub offset: u64,
    /// The frames, in append order.
    pub frames: Vec<Frame>,
    /// Whether an fdatasync must follow the writes.
    pub sync: bool,
    /// Filled in by [`Storage::execute`].
    pub outcome: Option<BatchOutcome>,
}

impl FileBatch {
    /// Total bytes the batch writes.
    pub fn len(&self) -> u64 {
        self.frames.iter().map(Frame::len).sum()
    }

    /// True when the batch writes nothing (a bare sync).
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The byte slices of every frame (header, then payload parts), in write
    /// order.
    pub fn parts(&self) -> Vec<&[u8]> {
        let mut parts = Vec::with_capacity(self.frames.len() * 3);
        for frame in &self.frames {
            parts.extend(frame.parts());
        }
        parts
    }
}

/// How a [`FileBatch`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Every write succeeded; `synced` says whether an fdatasync then completed
    /// (false when none was asked for). `sync_latency` is the time from the start
    /// of the batch's writes to the sync's completion.
    Done {
        /// An fdatasync ran after the writes and succeeded.
        synced: bool,
        /// Writes + fsync wall time, when a sync ran.
        sync_latency: Option<Duration>,
    },
    /// A write failed with `errno`; what was written of the batch is unknown and
    /// no sync was claimed.
    WriteFailed {
        /// The OS error number.
        errno: i32,
    },
    /// Every write succeeded but the fdatasync failed with `errno`.
    SyncFailed {
        /// The OS error number.
        errno: i32,
    },
}

/// One completed I/O, reported by a backend at the moment it learns of it
/// (for io_uring: when the completion is reaped). A test hook and a tracing aid:
/// it proves durable acks follow the fsyncs that cover them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoEvent {
    /// `len` bytes at `offset` were written.
    Written {
        /// The file.
        file: FileId,
        /// First byte written.
        offset: u64,
        /// Bytes written.
        len: u64,
    },
    /// An fdatasync completed: every byte below `durable_end` is durable.
    Synced {
        /// The file.
        file: FileId,
        /// End of the bytes the sync covers.
        durable_end: u64,
    },
    /// An operation failed.
    Failed {
        /// The file.
        file: FileId,
        /// The operation.
        op: IoOp,
        /// The OS error number.
        errno: i32,
    },
}

/// Receives [`IoEvent`]s on the writer thread. Must be quick and must not block.
pub trait IoObserver: Send + Sync {
    /// One event.
    fn on_event(&self, event: IoEvent);
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl IoObserver for NoObserver {
    fn on_event(&self, _event: IoEvent) {}
}

/// Runs one batch with plain calls: the writes, then the sync.
/// The default [`Storage::execute`], and the io_uring backend's repair path.
pub fn execute_sequential<S: Storage + ?Sized>(
    storage: &mut S,
    batch: &mut FileBatch,
    observer: &dyn IoObserver,
) {
    assert!(batch.outcome.is_none(), "batch executed twice");
    let started = Instant::now();
    let len = batch.len();
    if !batch.is_empty() {
        let parts = batch.parts();
        if let Err(error) = storage.write_at(batch.file, batch.offset, &parts) {
            let errno = errno_of(&error);
            report_failure(observer, batch, IoOp::Write, errno);
            batch.outcome = Some(BatchOutcome::WriteFailed { errno });
            return;
        }
        observer.on_event(IoEvent::Written {
            file: batch.file,
            offset: batch.offset,
            len,
        });
    }
    batch.outcome = Some(sync_after_writes(storage, batch, started, observer));
}

/// Fills in the outcomes of a shared sync's bare syncs once the one call
/// covering them all succeeded `latency` after it started.
pub(crate) fn shared_sync_succeeded(
    batches: &mut [FileBatch],
    latency: Duration,
    observer: &dyn IoObserver,
) {
    for batch in batches.iter_mut() {
        assert!(
            batch.is_empty() && batch.sync,
            "a shared sync holds bare syncs"
        );
        assert!(batch.outcome.is_none(), "batch executed twice");
        observer.on_event(IoEvent::Synced {
            file: batch.file,
            durable_end: batch.offset,
        });
        batch.outcome = Some(BatchOutcome::Done {
            synced: true,
            sync_latency: Some(latency),
        });
    }
}

/// The sync step of a batch whose writes all succeeded.
pub(crate) fn sync_after_writes<S: Storage + ?Sized>(
    storage: &mut S,
    batch: &FileBatch,
    started: Instant,
    observer: &dyn IoObserver,
) -> BatchOutcome {
    if !batch.sync {
        return BatchOutcome::Done {
            synced: false,
            sync_latency: None,
        };
    }
    match storage.sync_data(batch.file) {
        Ok(()) => {
            observer.on_event(IoEvent::Synced {
                file: batch.file,
                durable_end: batch.offset + batch.len(),
            });
            BatchOutcome::Done {
                synced: true,
                sync_latency: Some(started.elapsed()),
            }
        }
        Err(error) => {
            let errno = errno_of(&error);
            report_failure(observer, batch, IoOp::Sync, errno);
            BatchOutcome::SyncFailed { errno }
        }
    }
}

fn report_failure(observer: &dyn IoObserver, batch: &FileBatch, op: IoOp, errno: i32) {
    observer.on_event(IoEvent::Failed {
        file: batch.file,
        op,
        errno,
    });
}
