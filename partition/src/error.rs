//! Typed errors. Everything read from disk or received from a peer is input,
//! never our state: when it is wrong the caller gets one of these values, never
//! a panic. Errors are `Clone` because one failed write is reported to every
//! waiter it covers.

use std::io;
use std::path::{Path, PathBuf};

use strand_wal::{PoisonCause, WalError};

/// Every error the partition reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    /// A plain file operation failed (reads, directory operations, raw writes).
    #[error("{}: {action} failed: {kind} ({})", .path.display(), errno_text(*.errno))]
    Io {
        /// The path operated on.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The error kind.
        kind: io::ErrorKind,
        /// The OS error number (0 when the error carried none).
        errno: i32,
    },
    /// The disk is full. Nothing written before the failed write is harmed;
    /// the failed file accepts nothing more until the partition is reopened.
    #[error("{}: no space left on device", .path.display())]
    NoSpace {
        /// The file written to.
        path: PathBuf,
    },
    /// The WAL writer refused or failed a request on a partition file.
    #[error("{}: {error}", .path.display())]
    Wal {
        /// The file.
        path: PathBuf,
        /// What the WAL said.
        error: WalError,
    },
    /// An earlier write failed, so the log's tail is unknown: no more appends
    /// until the partition is closed and reopened (reopening re-scans the log).
    #[error("the record log failed earlier ({cause}); close and reopen the partition")]
    LogFailed {
        /// The first failure.
        cause: Box<PartitionError>,
    },
    /// Neither superblock copy could be read although the partition has files.
    #[error("{}: no readable superblock: copy 0: {copy0}; copy 1: {copy1}", .dir.display())]
    SuperblockUnreadable {
        /// The partition directory.
        dir: PathBuf,
        /// Why copy 0 was refused.
        copy0: String,
        /// Why copy 1 was refused.
        copy1: String,
    },
    /// A superblock copy is malformed.
    #[error("superblock: {reason}")]
    SuperblockInvalid {
        /// What is wrong with it.
        reason: String,
    },
    /// A prepare was offered for an op that is neither the next one nor a
    /// damaged one awaiting its rewrite.
    #[error("cannot write op {op}: the log's head is {head} and op {op} is not damaged")]
    OpNotNext {
        /// The op offered.
        op: u64,
        /// The log's head op.
        head: u64,
    },
    /// The prepare does not chain to the log: its parent is not the checksum of
    /// the previous op.
    #[error("op {op}: parent {parent:#010x} does not chain to {expected:#010x}")]
    ParentMismatch {
        /// The op offered.
        op: u64,
        /// Its parent field.
        parent: u32,
        /// The checksum of the op before it.
        expected: u32,
    },
    /// A produce's records do not start where the log's records end.
    #[error("op {op}: records start at offset {offset_base}, the log ends at {offset_end}")]
    OffsetsNotContiguous {
        /// The op offered.
        op: u64,
        /// Its first record offset.
        offset_base: u64,
        /// The log's record offset end.
        offset_end: u64,
    },
    /// A rewrite of a damaged entry does not match what the log knows of it.
    #[error("op {op}: the rewrite does not match the damaged entry: {reason}")]
    RewriteMismatch {
        /// The op.
        op: u64,
        /// What disagrees.
        reason: &'static str,
    },
    /// A truncation would drop a readable op at or below the persisted
    /// commit number.
    #[error("cannot truncate to op {op}: op {commit} is committed")]
    TruncateBelowCommit {
        /// The op asked for.
        op: u64,
        /// The first readable committed op it would drop.
        commit: u64,
    },
    /// A truncation or cut would reach below the retained head of the log.
    #[error("op {op} is below the retained head op {head_op}")]
    BelowRetainedHead {
        /// The op asked for.
        op: u64,
        /// The first retained op.
        head_op: u64,
    },
    /// A read found an entry whose bytes no longer match their checksums. The
    /// op is now listed as faulty; repair it from a peer.
    #[error("op {op}: entry damaged on disk ({reason})")]
    EntryDamaged {
        /// The op.
        op: u64,
        /// What failed.
        reason: String,
    },
    /// A fetch asked for an offset the log does not hold.
    #[error("offset {offset} is outside the log ({head_offset}..{offset_end})")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: u64,
        /// The first retained offset.
        head_offset: u64,
        /// One past the last record offset.
        offset_end: u64,
    },
    /// Cursor events below the cursor log's start were compacted away.
    #[error("cursor events from {from} were compacted; the log starts at {log_start}")]
    CursorEventsCompacted {
        /// The first event asked for.
        from: u64,
        /// The first event the log still holds.
        log_start: u64,
    },
    /// Cursor events offered or asked for do not line up with the log.
    #[error("cursor events {base}..{end} do not line up with the cursor log's tail {tail}")]
    CursorEventsMisaligned {
        /// First event sequence number.
        base: u64,
        /// One past the last.
        end: u64,
        /// The log's tail.
        tail: u64,
    },
    /// An encoded cursor event body is malformed.
    #[error("cursor events: {reason}")]
    CursorEventsInvalid {
        /// What is wrong.
        reason: String,
    },
    /// A state machine snapshot cannot be written or installed as it is.
    #[error("machine snapshot: {reason}")]
    MachineSnapshotInvalid {
        /// What is wrong.
        reason: String,
    },
    /// The log's contents contradict themselves (ops out of sequence, a broken
    /// hash chain). The partition needs a state transfer.
    #[error("record log inconsistent at op {op}: {reason}")]
    LogInconsistent {
        /// Where.
        op: u64,
        /// What.
        reason: String,
    },
    /// An export cannot be taken at this frontier.
    #[error("cannot export at op {frontier_op}: {reason}")]
    ExportUnavailable {
        /// The frontier asked for.
        frontier_op: u64,
        /// Why.
        reason: String,
    },
    /// A state-transfer chunk's checksum does not match its bytes.
    #[error("state-transfer chunk {chunk}: checksum {expected:#010x}, bytes give {actual:#010x}")]
    ChunkChecksum {
        /// The chunk index.
        chunk: u32,
        /// Stored checksum.
        expected: u32,
        /// Computed checksum.
        actual: u32,
    },
    /// A state-transfer chunk is malformed or does not belong to this import.
    #[error("state-transfer chunk {chunk}: {reason}")]
    ChunkInvalid {
        /// The chunk index.
        chunk: u32,
        /// What is wrong.
        reason: String,
    },
    /// An imported partition failed verification before being swapped in.
    #[error("state-transfer import rejected: {reason}")]
    ImportRejected {
        /// What failed.
        reason: String,
    },
    /// Waiting for the WAL writer took longer than the guard allows.
    #[error("no WAL completion arrived within {seconds} s")]
    WaitTimedOut {
        /// The guard.
        seconds: u64,
    },
}

impl PartitionError {
    /// The error for a failed plain file operation.
    pub fn io(path: &Path, action: &'static str, error: &io::Error) -> PartitionError {
        let errno = error.raw_os_error().unwrap_or(0);
        if errno == libc::ENOSPC {
            return PartitionError::NoSpace {
                path: path.to_path_buf(),
            };
        }
        PartitionError::Io {
            path: path.to_path_buf(),
            action,
            kind: error.kind(),
            errno,
        }
    }

    /// The error for a WAL failure on `path` (ENOSPC becomes [`PartitionError::NoSpace`]).
    pub(crate) fn wal(path: &Path, error: WalError) -> PartitionError {
        let no_space = match &error {
            WalError::NoSpace { .. } => true,
            WalError::Poisoned {
                cause: PoisonCause { errno, .. },
                ..
            } => *errno == libc::ENOSPC,
            _ => false,
        };
        if no_space {
            return PartitionError::NoSpace {
                path: path.to_path_buf(),
            };
        }
        PartitionError::Wal {
            path: path.to_path_buf(),
            error,
        }
    }
}

/// An operation that consumed the partition (a quarantine, an install)
/// failed: the error, and the disk back to reopen the partition from (it
/// holds the only copy of an in-memory disk's files). Reopening finishes a
/// swap the operation had committed, or finds the partition as it was.
pub struct FailedSwap<D> {
    /// What failed.
    pub error: PartitionError,
    /// The disk, its partition files closed; `None` only when the failure
    /// left it unusable.
    pub disk: Option<D>,
}

impl<D> FailedSwap<D> {
    /// The failure `error`, with the disk `disk` handed back.
    pub fn with_disk(error: PartitionError, disk: D) -> FailedSwap<D> {
        FailedSwap {
            error,
            disk: Some(disk),
        }
    }
}

impl<D> std::fmt::Debug for FailedSwap<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FailedSwap")
            .field("error", &self.error)
            .field("disk", &self.disk.is_some())
            .finish()
    }
}

impl<D> std::fmt::Display for FailedSwap<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

fn errno_text(errno: i32) -> String {
    if errno == 0 {
        return "no errno".to_owned();
    }
    io::Error::from_raw_os_error(errno).to_string()
}
