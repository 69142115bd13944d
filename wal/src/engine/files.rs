//! The file table: open and recover a file, truncate, rename and close it,
//! the room written ahead of its appends, and the descriptors held (least
//! recently used first, released past the bound when idle).

use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::error::{IoOp, WalError, errno_of};
use crate::group_commit::FileState;
use crate::metrics;
use crate::request::{FileId, FileRange, OpenMode, OpenedFile};
use crate::scan::{ScanReport, Tail, scan};
use crate::storage::{BatchOutcome, FileBatch, Storage};

use super::{RELEASE_SCAN_MAX, WalCore};

impl<S: Storage> WalCore<S> {
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

    pub(super) fn truncate(&mut self, file: FileId, len: u64) -> Result<FileRange, WalError> {
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

    pub(super) fn rename(&mut self, file: FileId, to: PathBuf) -> Result<FileRange, WalError> {
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
    pub(super) fn close(&mut self, file: FileId) -> Result<FileRange, WalError> {
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
    pub(super) fn writable(&mut self, file: FileId) -> Result<&mut FileState, WalError> {
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

    /// Writes zero-filled room ahead of `file`'s appends when it has earned
    /// some and is running low, or allocates room ahead of a direct file's
    /// (see `preallocate`). A failure only stops the fills: the data writes
    /// meet the condition themselves and report it.
    pub(super) fn fill_ahead(&mut self, file: FileId) {
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

    /// Files the last use of `file` (it holds a descriptor from now on).
    pub(super) fn note_use(&mut self, file: FileId) {
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
    pub(super) fn release_idle_descriptors(&mut self) {
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
}
