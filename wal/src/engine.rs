//! [`WalCore`]: the whole writer logic, driven by the caller's thread.
//!
//! The threaded [`crate::Wal`] runs one of these on its writer thread; the
//! simulator and partition tests run one directly over a [`crate::MemoryStorage`]
//! with no threads at all. Both get the same group commit, poisoning and
//! recovery.
//!
//! A turn ([`WalCore::run_turn`]) takes every queued request in order. Appends
//! and syncs are batched per file; a truncate, rename or close of a file that
//! has batched work first executes the batch (so per-file order holds), then
//! runs on its own. Requests on other files do not wait for it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{IoOp, WalError, errno_of};
use crate::group_commit::{FileState, Turn, settle};
use crate::metrics;
use crate::request::{
    Completion, CompletionKind, FileId, FileRange, OpenMode, OpenedFile, Request, TrySubmitError,
};
use crate::scan::{ScanReport, Tail, scan};
use crate::storage::{BatchOutcome, FileBatch, IoObserver, NoObserver, Storage};

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
    queue: VecDeque<Request>,
    queue_capacity: usize,
    sync_bytes_max: u64,
    observer: Arc<dyn IoObserver>,
}

/// Default [`WalCore::set_sync_bytes_max`]: 1 MiB.
///
/// Measured on the development VM's virtio disk: `dd oflag=dsync` ran at
/// 930 MB/s with 1 MiB writes, 414 MB/s with 3 MiB and 299 MB/s with 8 MiB, so
/// one fsync over a huge batch is slower than a chain of 1 MiB ones. On any disk
/// it also bounds how long the first waiter of a big batch waits.
pub const SYNC_BYTES_MAX_DEFAULT: u64 = 1 << 20;

impl<S: Storage> WalCore<S> {
    /// A core over `storage` whose queue holds at most `queue_capacity` requests
    /// ([`WalCore::submit`] answers `Full` beyond it).
    pub fn new(storage: S, queue_capacity: usize) -> WalCore<S> {
        assert!(queue_capacity > 0, "a queue needs room for one request");
        WalCore {
            storage,
            files: BTreeMap::new(),
            next_file: 1,
            queue: VecDeque::new(),
            queue_capacity,
            sync_bytes_max: SYNC_BYTES_MAX_DEFAULT,
            observer: Arc::new(NoObserver),
        }
    }

    /// Caps the bytes one file writes per turn: once a file's batch holds at
    /// least one frame and the next would take it past `bytes`, that file's
    /// remaining requests wait for the next turn (in order), which the writer
    /// runs at once. A single larger frame still goes alone.
    pub fn set_sync_bytes_max(&mut self, bytes: u64) {
        assert!(bytes > 0);
        self.sync_bytes_max = bytes;
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
            _ => self.recover(file, path),
        };
        let (report, contents) = recovered.inspect_err(|_| self.storage.close(file))?;
        assert_eq!(contents.len() as u64, report.valid_len);
        let state = FileState::recovered(path.to_path_buf(), report.valid_len);
        self.files.insert(file, state);
        Ok(OpenedFile {
            file,
            len: report.valid_len,
            scan: report,
            contents,
        })
    }

    /// Reads and scans a file just opened; cuts a torn tail, refuses a fault.
    fn recover(&mut self, file: FileId, path: &Path) -> Result<(ScanReport, Bytes), WalError> {
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
                tracing::warn!(path = %path.display(), valid_len = report.valid_len, torn_bytes,
                    "wal: cutting a torn tail");
                self.storage
                    .set_len(file, report.valid_len)
                    .map_err(|error| open_error(IoOp::Truncate, error))?;
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

    /// Runs one turn: executes every queued request, group-committing appends
    /// and syncs, and pushes every completion into `out`. Requests of a file
    /// whose batch reached the per-turn byte cap stay queued, in order, for the
    /// next turn (see [`WalCore::set_sync_bytes_max`]).
    pub fn run_turn(&mut self, out: &mut Vec<Completion>) {
        let mut turn = Turn::default();
        let mut deferred = VecDeque::new();
        let mut deferred_files = BTreeSet::new();
        while let Some(request) = self.queue.pop_front() {
            let file = request.file();
            if deferred_files.contains(&file) || self.batch_is_full(&request) {
                deferred_files.insert(file);
                deferred.push_back(request);
                continue;
            }
            match request {
                Request::Append { .. } | Request::Sync { .. } => {
                    self.plan_data(request, &mut turn, out)
                }
                _ => {
                    if turn.contains(file) {
                        self.flush(&mut turn, out);
                    }
                    self.run_alone(request, out);
                }
            }
        }
        self.flush(&mut turn, out);
        assert!(turn.is_empty() && self.queue.is_empty());
        self.queue = deferred;
    }

    /// True when `request` is an append that would take its file's batch in
    /// this turn past the byte cap.
    fn batch_is_full(&self, request: &Request) -> bool {
        let Request::Append { file, frame, .. } = request else {
            return false;
        };
        let Some(state) = self.files.get(file) else {
            return false;
        };
        let batched = state.append_end - state.written_end;
        batched > 0 && batched + frame.len() > self.sync_bytes_max
    }

    /// Runs every queued request, then syncs and closes every file.
    /// Returns the first error met while syncing.
    pub fn shutdown(&mut self, out: &mut Vec<Completion>) -> Result<(), WalError> {
        while !self.queue.is_empty() {
            self.run_turn(out);
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

    /// Adds an append or sync to the turn, or answers it at once.
    fn plan_data(&mut self, request: Request, turn: &mut Turn, out: &mut Vec<Completion>) {
        let file = request.file();
        let kind = request.completion_kind();
        let user_data = request.user_data();
        let state = match self.writable(file) {
            Ok(state) => state,
            Err(error) => return out.push(rejected(file, user_data, kind, error)),
        };
        if !turn.contains(file) {
            assert_eq!(
                state.append_end, state.written_end,
                "{file}: idle file has no queued bytes"
            );
        }
        match request {
            Request::Append {
                frame,
                user_data,
                ack,
                ..
            } => {
                let range = FileRange {
                    offset: state.append_end,
                    len: frame.len(),
                };
                state.append_end += frame.len();
                turn.add_append(file, range, frame, user_data, ack);
            }
            Request::Sync { user_data, .. } => {
                if !turn.contains(file) && state.durable_end == state.written_end {
                    let range = FileRange {
                        offset: 0,
                        len: state.durable_end,
                    };
                    return out.push(completion(file, user_data, kind, Ok(range)));
                }
                turn.add_sync(file, state.written_end, user_data);
            }
            _ => unreachable!("only appends and syncs are batched"),
        }
    }

    /// Executes the turn's batches and settles them.
    fn flush(&mut self, turn: &mut Turn, out: &mut Vec<Completion>) {
        if turn.is_empty() {
            return;
        }
        let (mut batches, waiters) = turn.take();
        self.storage.execute(&mut batches, &*self.observer);
        for (batch, waiters) in batches.iter().zip(waiters) {
            let state = self
                .files
                .get_mut(&batch.file)
                .expect("batched files stay open");
            settle(state, batch, waiters, out);
        }
    }

    /// Runs a truncate, rename or close by itself.
    fn run_alone(&mut self, request: Request, out: &mut Vec<Completion>) {
        let file = request.file();
        let user_data = request.user_data();
        let kind = request.completion_kind();
        let result = match request {
            Request::Truncate { len, .. } => self.truncate(file, len),
            Request::Rename { to, .. } => self.rename(file, to),
            Request::Close { .. } => self.close(file),
            _ => unreachable!("appends and syncs are batched"),
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
        assert_eq!(
            state.append_end, state.written_end,
            "{file}: no batch in flight"
        );
        if let Err(error) = self.storage.set_len(file, len) {
            let errno = errno_of(&error);
            let state = self.files.get_mut(&file).expect("checked above");
            state.poison(IoOp::Truncate, errno);
            return Err(WalError::from_errno(file, IoOp::Truncate, errno));
        }
        let state = self.files.get_mut(&file).expect("checked above");
        // set_len syncs the file, so everything up to `len` is durable now.
        *state = FileState::recovered(state.path.clone(), len);
        Ok(FileRange { offset: 0, len })
    }

    fn rename(&mut self, file: FileId, to: PathBuf) -> Result<FileRange, WalError> {
        if let Some(other) = self.file_at(&to).filter(|&other| other != file) {
            return Err(WalError::AlreadyOpen {
                path: to,
                file: other,
            });
        }
        let Some(state) = self.files.get_mut(&file) else {
            return Err(WalError::UnknownFile { file });
        };
        if let Err(error) = self.storage.rename(file, &to) {
            return Err(WalError::from_errno(file, IoOp::Rename, errno_of(&error)));
        }
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
        let needs_sync = state.poisoned.is_none() && state.written_end > state.durable_end;
        let result = if needs_sync {
            self.sync_now(file)
        } else {
            Ok(())
        };
        let state = self.files.remove(&file).expect("checked above");
        self.storage.close(file);
        result.map(|()| FileRange {
            offset: 0,
            len: state.durable_end,
        })
    }

    /// One bare fdatasync of `file`, outside any turn.
    fn sync_now(&mut self, file: FileId) -> Result<(), WalError> {
        let state = self.files.get_mut(&file).expect("caller checked the file");
        let mut batch = [FileBatch {
            file,
            offset: state.written_end,
            frames: Vec::new(),
            sync: true,
            outcome: None,
        }];
        self.storage.execute(&mut batch, &*self.observer);
        let [batch] = batch;
        let mut out = Vec::new();
        settle(state, &batch, Vec::new(), &mut out);
        assert!(out.is_empty());
        match batch.outcome {
            Some(BatchOutcome::Done { .. }) => Ok(()),
            Some(BatchOutcome::SyncFailed { errno } | BatchOutcome::WriteFailed { errno }) => {
                Err(WalError::from_errno(file, IoOp::Sync, errno))
            }
            None => unreachable!("settle checked the outcome"),
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
        self.files
            .iter()
            .find(|(_, state)| state.path == path)
            .map(|(&file, _)| file)
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
