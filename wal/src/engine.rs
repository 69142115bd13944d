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

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::error::{IoOp, WalError, errno_of};
use crate::frame::Frame;
use crate::group_commit::{FileState, Turn, WRITE_BATCHES_IN_FLIGHT_MAX};
use crate::metrics;
use crate::request::{
    Completion, CompletionKind, FileId, FileRange, OpenMode, OpenedFile, Request, TrySubmitError,
};
use crate::scan::{ScanReport, Tail, scan};
use crate::storage::{BatchOutcome, FileBatch, IoObserver, NoObserver, Storage};
use crate::uring::Doorbell;

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

    /// Opens (and for `Append` modes, recovers) `path`. See [`OpenMode`].
    pub fn open(&mut self, path: &Path, mode: OpenMode) -> Result<OpenedFile, WalError> {
        if let Some(file) = self.file_at(path) {
            return Err(WalError::AlreadyOpen {
                path: path.to_path_buf(),
                file,
            });
        }
        let file = FileId(self.next_file);
        self.next_file += 1;
        let open_error = |op, error: std::io::Error| WalError::Open {
            path: path.to_path_buf(),
            op,
            errno: errno_of(&error),
        };
        let len = self
            .storage
            .open(file, path, mode)
            .map_err(|error| open_error(IoOp::Open, error))?;
        let recovered = match (mode, len) {
            (OpenMode::CreateNew | OpenMode::Truncate, _) | (_, 0) => Ok((scan(&[]), Bytes::new())),
            _ => self.recover(file, path, mode),
        };
        let (report, contents) = recovered.inspect_err(|_| self.storage.close(file))?;
        let len = contents.len() as u64;
        assert!(len == report.valid_len || len == report.total_len);
        let mut state = FileState::recovered(path.to_path_buf(), len);
        state.direct = self.direct_appends && self.storage.set_direct(file, len, true);
        self.files.insert(file, state);
        self.paths.insert(path.to_path_buf(), file);
        self.note_use(file);
        self.release_idle_descriptors();
        Ok(OpenedFile {
            file,
            len,
            scan: report,
            contents,
        })
    }

    /// Reads and scans a file just opened; cuts a torn tail; refuses a fault,
    /// or with [`OpenMode::AppendDamaged`] reports it and keeps every byte.
    fn recover(
        &mut self,
        file: FileId,
        path: &Path,
        mode: OpenMode,
    ) -> Result<(ScanReport, Bytes), WalError> {
        let open_error = |op, error: std::io::Error| WalError::Open {
            path: path.to_path_buf(),
            op,
            errno: errno_of(&error),
        };
        let mut bytes = self
            .storage
            .read_all(file)
            .map_err(|error| open_error(IoOp::Read, error))?;
        let report = scan(&bytes);
        match report.tail {
            Tail::Clean => {}
            Tail::Torn { torn_bytes } => {
                let zeros = bytes[report.valid_len as usize..].iter().all(|&b| b == 0);
                if zeros {
                    tracing::info!(path = %path.display(), valid_len = report.valid_len, torn_bytes,
                        "wal: cutting zero-filled room (or a torn tail of zeros)");
                } else {
                    tracing::warn!(path = %path.display(), valid_len = report.valid_len, torn_bytes,
                        "wal: cutting a torn tail");
                }
                self.storage
                    .set_len(file, report.valid_len)
                    .map_err(|error| open_error(IoOp::Truncate, error))?;
            }
            Tail::Corrupt {
                fault_offset,
                next_valid_offset,
            } if mode == OpenMode::AppendDamaged => {
                tracing::warn!(path = %path.display(), fault_offset, next_valid_offset,
                    "wal: opening a damaged file for repair; nothing cut");
                return Ok((report, Bytes::from(bytes)));
            }
            Tail::Corrupt {
                fault_offset,
                next_valid_offset,
            } => {
                metrics::record_error("corrupt");
                return Err(WalError::Corrupt {
                    path: path.to_path_buf(),
                    fault_offset,
                    next_valid_offset,
                });
            }
        }
        bytes.truncate(report.valid_len as usize);
        Ok((report, Bytes::from(bytes)))
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

    /// Files the last use of `file` (it holds a descriptor from now on).
    fn note_use(&mut self, file: FileId) {
        let use_number = self.uses;
        self.uses += 1;
        if let Some(previous) = self.held_at.insert(file, use_number) {
            self.held.remove(&(previous, file));
        }
        self.held.insert((use_number, file));
    }

    /// Forgets a closed file's descriptor.
    fn forget_use(&mut self, file: FileId) {
        if let Some(previous) = self.held_at.remove(&file) {
            self.held.remove(&(previous, file));
        }
    }

    /// Releases the descriptors of the least recently used idle files until
    /// at most `descriptors_max` are held (or no candidate is idle). Idle:
    /// nothing in flight or waiting, every batch durable, no fsync queued.
    fn release_idle_descriptors(&mut self) {
        let Some(excess) = self.held.len().checked_sub(self.descriptors_max) else {
            return;
        };
        if excess == 0 {
            return;
        }
        let idle: Vec<(u64, FileId)> = self
            .held
            .iter()
            .take(RELEASE_SCAN_MAX)
            .filter(|(_, file)| self.is_idle(*file))
            .take(excess)
            .copied()
            .collect();
        for &(use_number, file) in &idle {
            self.storage.release_descriptor(file);
            self.held.remove(&(use_number, file));
            self.held_at.remove(&file);
        }
        metrics::record_descriptors(self.held.len(), idle.len());
    }

    /// True when `file`'s descriptor can go: no batch in flight, no waiter,
    /// every batch durable (so no writeback error can be lost) and no fsync
    /// waiting for a slot.
    fn is_idle(&self, file: FileId) -> bool {
        self.files.get(&file).is_some_and(|state| {
            state.is_quiescent() && state.all_durable() && !self.sync_waiting_set.contains(&file)
        })
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

    /// Writes zero-filled room ahead of `file`'s appends when it has earned
    /// some and is running low, or allocates room ahead of a direct file's
    /// (see `preallocate`). A failure only stops the fills: the data writes
    /// meet the condition themselves and report it.
    fn fill_ahead(&mut self, file: FileId) {
        let Some(state) = self.files.get_mut(&file).filter(|s| s.poisoned.is_none()) else {
            return;
        };
        let due = if state.direct {
            state.preallocation.room_due(state.append_end)
        } else {
            state.preallocation.fill_due(state.append_end)
        };
        let Some(fill) = due else {
            return;
        };
        match self.storage.zero_fill(file, fill.offset, fill.len) {
            Ok(()) => {
                state.preallocation.on_filled(fill);
                metrics::record_zero_fill(fill.len);
            }
            Err(error) => {
                tracing::warn!(%file, path = %state.path.display(), %error,
                    "wal: zero-filling room ahead failed; the file's appends go on without it");
                state.preallocation.on_fill_failed(fill);
            }
        }
    }

    /// Cuts a quiescent file's zero-filled room off (`ftruncate` + fdatasync),
    /// so that a file closed or renamed holds exactly its frames. A failure
    /// leaves zeros past the last frame, which recovery cuts as a torn tail:
    /// it is logged, never reported to the caller.
    fn trim_room(&mut self, file: FileId) {
        let Some(state) = self.files.get_mut(&file) else {
            return;
        };
        let end = state.append_end;
        let padded = state.direct && end % crate::direct::DIRECT_BLOCK_BYTES as u64 != 0;
        if state.poisoned.is_some() || !(state.preallocation.has_room_past(end) || padded) {
            return;
        }
        assert!(
            state.is_quiescent(),
            "{file}: trimmed with nothing in flight"
        );
        match self.storage.set_len(file, end) {
            Ok(()) => state.preallocation.on_set_len(end),
            Err(error) => tracing::warn!(%file, path = %state.path.display(), %error,
                "wal: cutting zero-filled room off failed; recovery will cut it"),
        }
    }

    /// Hands batches to the backend: started on a pipelined one, executed
    /// (and applied) on a synchronous one.
    fn start(&mut self, mut batches: Vec<FileBatch>) {
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
    fn settle_touched(&mut self, out: &mut Vec<Completion>, issue_syncs: bool) {
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

    fn truncate(&mut self, file: FileId, len: u64) -> Result<FileRange, WalError> {
        let state = self.writable(file)?;
        if len > state.append_end {
            let end = state.append_end;
            return Err(WalError::TruncateBeyondEnd { file, len, end });
        }
        assert!(state.is_quiescent(), "{file}: no batch in flight");
        assert_eq!(state.append_end, state.written_end, "{file}: all written");
        if let Err(error) = self.storage.set_len(file, len) {
            let errno = errno_of(&error);
            let state = self.files.get_mut(&file).expect("checked above");
            state.poison(IoOp::Truncate, errno);
            return Err(WalError::from_errno(file, IoOp::Truncate, errno));
        }
        let state = self.files.get_mut(&file).expect("checked above");
        // set_len syncs the file, so everything up to `len` is durable now.
        // The backend still writes it as it did (direct or not).
        let direct = state.direct;
        *state = FileState::recovered(state.path.clone(), len);
        state.direct = direct;
        Ok(FileRange { offset: 0, len })
    }

    fn rename(&mut self, file: FileId, to: PathBuf) -> Result<FileRange, WalError> {
        if let Some(other) = self.file_at(&to).filter(|&other| other != file) {
            return Err(WalError::AlreadyOpen {
                path: to,
                file: other,
            });
        }
        if !self.files.contains_key(&file) {
            return Err(WalError::UnknownFile { file });
        }
        self.trim_room(file);
        let state = self.files.get_mut(&file).expect("checked above");
        if let Err(error) = self.storage.rename(file, &to) {
            return Err(WalError::from_errno(file, IoOp::Rename, errno_of(&error)));
        }
        self.paths.remove(&state.path);
        self.paths.insert(to.clone(), file);
        state.path = to;
        Ok(FileRange {
            offset: 0,
            len: state.append_end,
        })
    }

    /// Syncs what is unsynced (unless poisoned), then forgets the file.
    fn close(&mut self, file: FileId) -> Result<FileRange, WalError> {
        let Some(state) = self.files.get(&file) else {
            return Err(WalError::UnknownFile { file });
        };
        assert!(
            state.is_quiescent(),
            "{file}: closed with nothing in flight"
        );
        let needs_sync = state.poisoned.is_none() && state.written_end > state.durable_end;
        let result = if needs_sync {
            self.sync_now(file)
        } else {
            Ok(())
        };
        if result.is_ok() {
            self.trim_room(file);
        }
        let state = self.files.remove(&file).expect("checked above");
        self.paths.remove(&state.path);
        self.forget_use(file);
        self.storage.close(file);
        result.map(|()| FileRange {
            offset: 0,
            len: state.durable_end,
        })
    }

    /// One bare fdatasync of a quiescent `file`, outside any turn.
    fn sync_now(&mut self, file: FileId) -> Result<(), WalError> {
        let id = self.next_batch;
        self.next_batch += 1;
        let state = self.files.get_mut(&file).expect("caller checked the file");
        let batch = FileBatch {
            id,
            file,
            offset: state.written_end,
            frames: Vec::new(),
            sync: true,
            outcome: None,
        };
        state.on_started(&batch, 0);
        let mut batches = [batch];
        self.storage.execute(&mut batches, &*self.observer);
        let [batch] = batches;
        let state = self.files.get_mut(&file).expect("still open");
        state.on_finished(&batch, false);
        match batch.outcome {
            Some(BatchOutcome::Done { .. }) => Ok(()),
            Some(BatchOutcome::SyncFailed { errno } | BatchOutcome::WriteFailed { errno }) => {
                Err(WalError::from_errno(file, IoOp::Sync, errno))
            }
            None => unreachable!("on_finished checked the outcome"),
        }
    }

    /// The state of an open, healthy file, or the error to answer with.
    fn writable(&mut self, file: FileId) -> Result<&mut FileState, WalError> {
        let state = self
            .files
            .get_mut(&file)
            .ok_or(WalError::UnknownFile { file })?;
        match state.poisoned {
            Some(cause) => Err(WalError::Poisoned { file, cause }),
            None => Ok(state),
        }
    }

    fn file_at(&self, path: &Path) -> Option<FileId> {
        self.paths.get(path).copied()
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
