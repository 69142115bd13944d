//! [`WalCore`]: the whole writer logic, driven by the caller's thread.
//!
//! The threaded [`crate::Wal`] runs one of these on its writer thread; the
//! simulator and partition tests run one directly over a [`crate::MemoryStorage`]
//! with no threads at all. Both get the same group commit, poisoning and
//! recovery.
//!
//! A turn ([`WalCore::run_turn`]) first settles the I/O that finished, then
//! takes every queued request in order. Appends, in-place writes and syncs are
//! batched per file (see `group_commit`); a truncate, rename or close of a
//! file waits until nothing of that file is in flight, then runs on its own.
//! Requests on other files do not wait for it.
//!
//! Over a synchronous backend ([`crate::MemoryStorage`], [`crate::DiskStorage`])
//! every batch of a turn is finished when the turn returns. Over a pipelined
//! one ([`crate::UringStorage`]) the turn only starts them: the next turn's
//! writes go out while this turn's fdatasyncs run, and
//! [`WalCore::poll_io`] / [`WalCore::wait_io`] collect what finished.
//!
//! Descriptors are bounded ([`WalCore::set_descriptors_max`]): a node with
//! thousands of partitions keeps more files open than it may hold
//! descriptors. Past the bound, at the end of a turn, the least recently used
//! files with nothing in flight and every byte durable give their descriptor
//! back; the file stays open under its id and the next write reopens it.
//!
//! The core's rooms: `turn` (a turn: planning requests into batches, what
//! waits, the completions), `files` (the file table: open and recover,
//! truncate, rename, close, room ahead, descriptors held) and `settle`
//! (batches started and finished, waiters answered, fsyncs issued).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::WalError;
use crate::frame::Frame;
use crate::group_commit::FileState;
use crate::metrics;
use crate::request::{Completion, FileId, Request, TrySubmitError};
use crate::storage::{FileBatch, IoObserver, NoObserver, Storage};

mod files;
mod settle;
mod turn;

/// A public snapshot of one open file, for tests and the admin view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStatus {
    /// Current path.
    pub path: PathBuf,
    /// End of the bytes known written.
    pub written_end: u64,
    /// End of the bytes known durable.
    pub durable_end: u64,
    /// Whether (and why) the file is poisoned.
    pub poisoned: Option<crate::error::PoisonCause>,
}

/// The writer's logic over a [`Storage`], single-threaded and deterministic
/// (given a deterministic storage).
pub struct WalCore<S: Storage> {
    storage: S,
    files: BTreeMap<FileId, FileState>,
    next_file: u64,
    next_batch: u64,
    queue: VecDeque<Request>,
    queue_capacity: usize,
    sync_bytes_max: u64,
    /// Files opened from now on append past the page cache, where they can.
    direct_appends: bool,
    observer: Arc<dyn IoObserver>,
    /// Batches handed to the pipeline and not yet reaped.
    in_flight: usize,
    /// Files whose waiters may be answerable or that may need a bare fsync.
    touched: BTreeSet<FileId>,
    /// fdatasyncs started on the pipeline and not yet finished, all files.
    syncs_in_flight: usize,
    syncs_in_flight_max: usize,
    /// Files that need an fdatasync while `syncs_in_flight_max` are running,
    /// oldest first (and the same files as a set).
    sync_waiting: VecDeque<FileId>,
    sync_waiting_set: BTreeSet<FileId>,
    /// Batch ids of the shared sync in flight (empty: none). Its files count
    /// as having their fsync in flight, not against `syncs_in_flight_max`.
    shared_sync: BTreeSet<u64>,
    /// Open files by path (paths are unique among open files).
    paths: BTreeMap<PathBuf, FileId>,
    /// Files holding a descriptor, least recently used first, and the use
    /// number each is filed under.
    held: BTreeSet<(u64, FileId)>,
    held_at: BTreeMap<FileId, u64>,
    uses: u64,
    descriptors_max: usize,
    /// Frame lists of finished batches, emptied, for the next turns' batches
    /// (at most [`SPARE_LISTS_MAX`]): a batch per file per turn would
    /// otherwise allocate its list anew.
    spare_frames: Vec<Vec<Frame>>,
    /// The batches a reap hands back, kept between reaps.
    reaped: Vec<FileBatch>,
}

/// Emptied lists kept for reuse, of each kind: about one per file written in
/// a turn; beyond it they are freed.
pub(crate) const SPARE_LISTS_MAX: usize = 1024;

/// How many of the least recently used files one release pass looks at (it
/// runs after every turn and reap, so it must stay cheap when many files are
/// busy; the oldest are almost always idle).
const RELEASE_SCAN_MAX: usize = 256;

/// Default [`WalCore::set_syncs_in_flight_max`]: 8.
///
/// Measured on the development VM (virtio disk, ext4 without a journal, where
/// an fdatasync of a grown file writes its inode block synchronously and files
/// created together share one): 16 threads fsyncing 16 files reached 18k
/// fsyncs/s, 8 threads 23k. Beyond a few, concurrent fsyncs only queue in the
/// device and the file system; holding them back lets each file gather more
/// appends for its next fsync instead.
pub const SYNCS_IN_FLIGHT_MAX_DEFAULT: usize = 8;

/// Files that must want a sync at once before one shared sync covers them
/// (over a backend that [`Storage::shares_syncs`]): 4.
///
/// Below it each file gets its own fdatasync, linked after its writes, which
/// saves a round trip; a node with many busy partitions is far above it,
/// where one `syncfs` costs about what one fdatasync does.
pub const SHARED_SYNC_FILES_MIN: usize = 4;

/// Default [`WalCore::set_sync_bytes_max`]: 4 MiB.
///
/// Bounds how much one fdatasync of a file covers under a flood, and so how
/// long the first waiter of a big group waits, while letting a closed loop
/// of 64 appenders of 64 KiB (4 MiB outstanding) go out at once. On the
/// development VM's rate-limited virtio disk, when the limiter charges per
/// operation, 4 MiB groups ran at about twice the throughput of 1 MiB ones;
/// when it does not, the two were within the run-to-run noise.
pub const SYNC_BYTES_MAX_DEFAULT: u64 = 4 << 20;

impl<S: Storage> WalCore<S> {
    /// A core over `storage` whose queue holds at most `queue_capacity` requests
    /// ([`WalCore::submit`] answers `Full` beyond it).
    pub fn new(storage: S, queue_capacity: usize) -> WalCore<S> {
        assert!(queue_capacity > 0, "a queue needs room for one request");
        WalCore {
            storage,
            files: BTreeMap::new(),
            next_file: 1,
            next_batch: 1,
            queue: VecDeque::new(),
            queue_capacity,
            sync_bytes_max: SYNC_BYTES_MAX_DEFAULT,
            direct_appends: false,
            observer: Arc::new(NoObserver),
            in_flight: 0,
            touched: BTreeSet::new(),
            spare_frames: Vec::new(),
            reaped: Vec::new(),
            syncs_in_flight: 0,
            syncs_in_flight_max: SYNCS_IN_FLIGHT_MAX_DEFAULT,
            sync_waiting: VecDeque::new(),
            sync_waiting_set: BTreeSet::new(),
            shared_sync: BTreeSet::new(),
            paths: BTreeMap::new(),
            held: BTreeSet::new(),
            held_at: BTreeMap::new(),
            uses: 0,
            descriptors_max: usize::MAX,
        }
    }

    /// Bounds the descriptors held at once (default: no bound). Past it, the
    /// least recently used idle files release theirs at the end of a turn (see
    /// the module docs). Files in use are never released, so the bound can be
    /// passed for a while when more files than it are busy at once.
    pub fn set_descriptors_max(&mut self, descriptors: usize) {
        assert!(descriptors > 0, "at least one file must be writable");
        self.descriptors_max = descriptors;
    }

    /// Descriptors held now.
    pub fn descriptors_held(&self) -> usize {
        self.held.len()
    }

    /// Caps the fdatasyncs in flight at once over a pipelined backend, over
    /// all files (a file never has more than one). A file that needs one
    /// while the cap is reached waits, oldest first, and meanwhile keeps
    /// gathering appends for it. No effect over a synchronous backend.
    pub fn set_syncs_in_flight_max(&mut self, syncs: usize) {
        assert!(syncs > 0, "at least one fsync must be able to run");
        self.syncs_in_flight_max = syncs;
    }

    /// Caps the bytes one fdatasync of a file covers: once a file has at least
    /// one byte queued past what its fsync in flight covers (past its written
    /// end when none is in flight) and the next frame would take that past
    /// `bytes`, the file's remaining requests wait for a later turn (in order).
    /// Over a synchronous backend that is the next turn, which the writer runs
    /// at once; over a pipelined one, the turn after the fsync returns. A
    /// single larger frame still goes alone.
    pub fn set_sync_bytes_max(&mut self, bytes: u64) {
        assert!(bytes > 0);
        self.sync_bytes_max = bytes;
    }

    /// Appends to files opened from now on past the page cache, where the
    /// backend can (see [`crate::direct`]). Off by default. A file written
    /// in place goes back through the cache for good.
    pub fn set_direct_appends(&mut self, direct: bool) {
        self.direct_appends = direct;
    }

    /// Installs an observer that sees every completed I/O.
    pub fn set_observer(&mut self, observer: Arc<dyn IoObserver>) {
        self.observer = observer;
    }

    /// The storage (to inspect an in-memory disk).
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// The storage, mutably (to inject faults).
    pub fn storage_mut(&mut self) -> &mut S {
        &mut self.storage
    }

    /// Gives the storage back (e.g. to crash it and build a new core over it).
    pub fn into_storage(self) -> S {
        self.storage
    }

    /// A snapshot of an open file.
    pub fn file_status(&self, file: FileId) -> Option<FileStatus> {
        self.files.get(&file).map(|state| FileStatus {
            path: state.path.clone(),
            written_end: state.written_end,
            durable_end: state.durable_end,
            poisoned: state.poisoned,
        })
    }

    /// Requests waiting for the next turn.
    pub fn queued_requests(&self) -> usize {
        self.queue.len()
    }

    /// Queues a request for the next turn; `Full` at the bound.
    pub fn submit(&mut self, request: Request) -> Result<(), TrySubmitError> {
        if self.queue.len() >= self.queue_capacity {
            return Err(TrySubmitError::Full(request));
        }
        metrics::record_queued(request.queued_bytes());
        self.queue.push_back(request);
        Ok(())
    }

    /// Queues a request without the bound (the threaded writer's queue already
    /// bounded it).
    pub(crate) fn enqueue(&mut self, request: Request) {
        self.queue.push_back(request);
    }

    /// Runs every queued request and waits for every batch in flight, then
    /// syncs and closes every file. Returns the first error met while syncing.
    pub fn shutdown(&mut self, out: &mut Vec<Completion>) -> Result<(), WalError> {
        loop {
            let queued = self.queue.len();
            let answered = out.len();
            self.run_turn(out);
            if self.queue.is_empty() && self.in_flight == 0 {
                break;
            }
            if self.in_flight > 0 {
                self.wait_io(None);
            } else {
                assert!(
                    self.queue.len() < queued || out.len() > answered,
                    "a turn with nothing in flight makes progress"
                );
            }
        }
        let files: Vec<FileId> = self.files.keys().copied().collect();
        let mut first_error = None;
        for file in files {
            if let Err(error) = self.close(file) {
                tracing::error!(%file, %error, "wal: sync at shutdown failed");
                first_error.get_or_insert(error);
            }
        }
        assert!(self.files.is_empty());
        first_error.map_or(Ok(()), Err)
    }

    /// Batches started on a pipelined backend and not yet finished (always 0
    /// over a synchronous backend).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
}
