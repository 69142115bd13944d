//! Typed errors. Every failure a caller can see is a [`WalError`] value; none is
//! a panic. Errors are `Clone` because one failed write or fsync is reported to
//! every waiter it covers.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::request::FileId;

/// The file operation that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoOp {
    /// Creating or opening a file.
    Open,
    /// Reading a file back for recovery.
    Read,
    /// Writing frames.
    Write,
    /// `fdatasync` of a file.
    Sync,
    /// Cutting a file to a length (and syncing it).
    Truncate,
    /// Renaming a file (and syncing its directories).
    Rename,
}

impl fmt::Display for IoOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            IoOp::Open => "open",
            IoOp::Read => "read",
            IoOp::Write => "write",
            IoOp::Sync => "fdatasync",
            IoOp::Truncate => "truncate",
            IoOp::Rename => "rename",
        };
        f.write_str(name)
    }
}

/// Why a file was poisoned: the operation and the OS error number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PoisonCause {
    /// The operation that failed.
    pub op: IoOp,
    /// The OS error number (`libc::EIO`, `libc::ENOSPC`, ...).
    pub errno: i32,
}

impl fmt::Display for PoisonCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {}", self.op, errno_text(self.errno))
    }
}

/// Every error the WAL reports.
///
/// An error on an append or sync means the entry's fate is **unknown**: it may
/// or may not be on disk. It is never a promise that the bytes are absent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WalError {
    /// A write hit ENOSPC. The file is poisoned (see [`WalError::Poisoned`]).
    #[error("{file}: no space left on device")]
    NoSpace {
        /// The file written to.
        file: FileId,
    },
    /// A write, truncate or rename failed with an OS error. Write and truncate
    /// failures poison the file; a rename failure does not.
    #[error("{file}: {op} failed: {}", errno_text(*.errno))]
    Io {
        /// The file operated on.
        file: FileId,
        /// The failed operation.
        op: IoOp,
        /// The OS error number.
        errno: i32,
    },
    /// `fdatasync` failed: nothing written since the last successful sync of this
    /// file may be on disk, and the kernel may already have dropped those pages
    /// while still serving them from cache. The file is poisoned.
    #[error("{file}: fdatasync failed: {}", errno_text(*.errno))]
    SyncFailed {
        /// The file synced.
        file: FileId,
        /// The OS error number.
        errno: i32,
    },
    /// The file failed earlier and accepts nothing more but `close` and `rename`.
    ///
    /// What the caller must do: stop trusting every byte of this file that was
    /// not acknowledged durable before the failure, `close` it, then either
    /// reopen the path with `open` (which re-reads and re-scans it; after a
    /// *failed fsync* prefer a process restart first, because the page cache may
    /// serve bytes the disk lost) and rewrite the unacknowledged entries, or treat
    /// the file as lost and repair it from peers (state transfer).
    #[error("{file} is poisoned after an earlier failure ({cause}); close it and reopen or repair")]
    Poisoned {
        /// The poisoned file.
        file: FileId,
        /// The failure that poisoned it.
        cause: PoisonCause,
    },
    /// No open file has this id (never opened, or already closed).
    #[error("{file} is not open")]
    UnknownFile {
        /// The id the request named.
        file: FileId,
    },
    /// A truncate asked for a length past the file's append end.
    #[error("{file}: cannot truncate to {len}, the file ends at {end}")]
    TruncateBeyondEnd {
        /// The file.
        file: FileId,
        /// The requested length.
        len: u64,
        /// The file's append end.
        end: u64,
    },
    /// An in-place write ([`crate::Request::WriteAt`]) reaching past the
    /// file's append end. Nothing was written; the file is not poisoned.
    #[error("{file}: cannot write {len} bytes at {offset} in place, the file ends at {end}")]
    WriteBeyondEnd {
        /// The file.
        file: FileId,
        /// The requested position.
        offset: u64,
        /// The frame's length.
        len: u64,
        /// The file's append end.
        end: u64,
    },
    /// A payload above [`crate::FRAME_PAYLOAD_BYTES_MAX`].
    #[error("entry of {len} bytes exceeds the {max}-byte frame limit")]
    EntryTooLarge {
        /// The payload length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Opening (or recovering) a path failed.
    #[error("{}: {op} failed: {}", .path.display(), errno_text(*.errno))]
    Open {
        /// The path.
        path: PathBuf,
        /// The failed step.
        op: IoOp,
        /// The OS error number.
        errno: i32,
    },
    /// The path is already open under another id; one file, one writer.
    #[error("{} is already open as {file}", .path.display())]
    AlreadyOpen {
        /// The path.
        path: PathBuf,
        /// The id it is open under.
        file: FileId,
    },
    /// Recovery found an invalid frame with valid frames after it. The file was
    /// not opened and nothing was truncated. Quarantine it or repair it.
    #[error(
        "{}: corrupt frame at byte {fault_offset}, valid frame again at {next_valid_offset}",
        .path.display()
    )]
    Corrupt {
        /// The path.
        path: PathBuf,
        /// Offset of the first invalid frame (= end of the valid prefix).
        fault_offset: u64,
        /// Offset of the first valid frame after it.
        next_valid_offset: u64,
    },
    /// `BackendChoice::Uring` was required but io_uring cannot be set up here.
    #[error("io_uring is unavailable: {}", errno_text(*.errno))]
    UringUnavailable {
        /// The OS error number from setup or the probe.
        errno: i32,
    },
    /// The writer thread could not be spawned.
    #[error("cannot spawn the WAL writer thread: {}", errno_text(*.errno))]
    Spawn {
        /// The OS error number.
        errno: i32,
    },
    /// The WAL has shut down (or its writer thread died); nothing more is accepted.
    #[error("the WAL writer has shut down")]
    ShutDown,
}

impl WalError {
    /// The error for a failed `op` on `file` with OS error `errno`.
    pub(crate) fn from_errno(file: FileId, op: IoOp, errno: i32) -> WalError {
        match op {
            IoOp::Sync => WalError::SyncFailed { file, errno },
            IoOp::Write if errno == libc::ENOSPC => WalError::NoSpace { file },
            _ => WalError::Io { file, op, errno },
        }
    }

    /// A short label for the `wal_errors_total` metric.
    pub(crate) fn metric_kind(&self) -> &'static str {
        match self {
            WalError::NoSpace { .. } => "no_space",
            WalError::Io { .. } => "io",
            WalError::SyncFailed { .. } => "sync_failed",
            WalError::Poisoned { .. } => "poisoned",
            WalError::Corrupt { .. } => "corrupt",
            WalError::Open { .. } => "open",
            _ => "other",
        }
    }
}

/// The OS error number carried by `error` (EIO when it carries none).
pub(crate) fn errno_of(error: &io::Error) -> i32 {
    error.raw_os_error().unwrap_or(libc::EIO)
}

/// Human text for an OS error number.
fn errno_text(errno: i32) -> String {
    io::Error::from_raw_os_error(errno).to_string()
}
