//! What callers hand the writer ([`Request`]) and what comes back
//! ([`Completion`]), plus the small value types both use.

use std::fmt;
use std::path::PathBuf;
use std::sync::mpsc;

use bytes::Bytes;

use crate::error::WalError;
use crate::frame::Frame;
use crate::scan::ScanReport;

/// Names one open file. Assigned by the writer at `open`, never reused within
/// one WAL instance, so a stale id fails with [`WalError::UnknownFile`] instead
/// of hitting another file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileId(pub u64);

impl fmt::Display for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "file#{}", self.0)
    }
}

/// How `open` treats the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Create a new empty file; fail if it exists. The parent directory is
    /// synced, so the new name survives a crash.
    CreateNew,
    /// Create the file, or cut an existing one to zero length (durably). For
    /// temp files that are filled and then renamed into place.
    Truncate,
    /// Open an existing file and recover it: scan it, cut a torn tail (durably),
    /// refuse it with [`WalError::Corrupt`] on a fault. Appends go after the
    /// valid prefix.
    Append,
    /// [`OpenMode::Append`] when the file exists, [`OpenMode::CreateNew`] when not.
    CreateOrAppend,
    /// Open an existing file that may be damaged, for the caller to repair.
    /// Like [`OpenMode::Append`] (a torn tail with nothing valid after it is
    /// cut, durably), except that corruption with valid frames after it is
    /// *reported* in [`OpenedFile::scan`] (`Tail::Corrupt`, with the fault's
    /// offset and the next valid frame's) instead of refused. Then nothing at
    /// all is cut, [`OpenedFile::len`] is the whole file and
    /// [`OpenedFile::contents`] holds every byte, so the caller can find the
    /// frames past the fault and decide: rewrite the damage in place
    /// ([`Request::WriteAt`]), cut what it knows is junk ([`Request::Truncate`]),
    /// or quarantine the file. Appends go after the last byte.
    AppendDamaged,
}

/// The result of a successful `open`.
#[derive(Debug, Clone)]
pub struct OpenedFile {
    /// The id to name the file in requests.
    pub file: FileId,
    /// Where the next append goes: the end of the valid prefix (the end of the
    /// file when [`OpenMode::AppendDamaged`] found corruption).
    pub len: u64,
    /// The recovery scan of what was on disk (empty for new or truncated files).
    /// If its tail is `Torn`, those bytes have been cut already; if it is
    /// `Corrupt` (only with [`OpenMode::AppendDamaged`]), nothing was cut.
    pub scan: ScanReport,
    /// The file's bytes as read for the scan, up to `len`, so the caller can
    /// rebuild its indexes without reading the file again.
    pub contents: Bytes,
}

/// Which acknowledgement an append wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// A [`CompletionKind::Durable`] completion once an fdatasync covering the
    /// entry has completed. The turn's group-commit fsync is issued for it.
    Durable,
    /// A [`CompletionKind::Written`] completion once the write reached the page
    /// cache. Asks for no fsync; the bytes become durable with the file's next
    /// sync (a later `Durable` append, a `sync`, `close` or shutdown).
    Written,
}

/// One request to the writer. Requests on one file are executed in the order
/// submitted, and their completions arrive in that order; requests on
/// different files are independent.
#[derive(Debug, Clone)]
pub enum Request {
    /// Append one framed entry at the file's end.
    Append {
        /// The file.
        file: FileId,
        /// The framed entry.
        frame: Frame,
        /// Returned in the completion.
        user_data: u64,
        /// Which acknowledgement to send.
        ack: Ack,
    },
    /// Overwrite bytes inside the file with one frame, in place: for
    /// rewriting a damaged entry exactly where it was. The range
    /// `offset..offset + frame.len()` must lie below the file's append end
    /// ([`WalError::WriteBeyondEnd`] otherwise); the append end does not move.
    /// Acknowledged like an append ([`Ack`]): `Durable` once an fdatasync
    /// issued after the write has completed. It waits for the file's writes
    /// already in flight, so it lands after every earlier request.
    WriteAt {
        /// The file.
        file: FileId,
        /// Where the frame's first byte goes.
        offset: u64,
        /// The frame to write.
        frame: Frame,
        /// Returned in the completion.
        user_data: u64,
        /// Which acknowledgement to send.
        ack: Ack,
    },
    /// Make every byte written to the file so far durable. The bytes a file
    /// held when it was opened count as durable already (this writer did not
    /// write them and has nothing to sync): a caller that cannot vouch for
    /// them (a crashed process may have left them in the page cache only)
    /// syncs the file itself.
    Sync {
        /// The file.
        file: FileId,
        /// Returned in the completion.
        user_data: u64,
    },
    /// Cut the file to `len` bytes, durably (`ftruncate` + `fdatasync`).
    Truncate {
        /// The file.
        file: FileId,
        /// The new length; at most the append end.
        len: u64,
        /// Returned in the completion.
        user_data: u64,
    },
    /// Rename the file, durably (the directories involved are synced). Replaces
    /// an existing file at `to`. Allowed on a poisoned file (to quarantine it).
    Rename {
        /// The file.
        file: FileId,
        /// The new path.
        to: PathBuf,
        /// Returned in the completion.
        user_data: u64,
    },
    /// Sync whatever is unsynced, then close the file and forget its id.
    Close {
        /// The file.
        file: FileId,
        /// Returned in the completion.
        user_data: u64,
    },
}

impl Request {
    /// An append that wants a durable ack. Fails only on an oversized payload.
    pub fn append(file: FileId, payload: Bytes, user_data: u64) -> Result<Request, WalError> {
        Request::append_with_ack(file, payload, user_data, Ack::Durable)
    }

    /// An append with an explicit [`Ack`].
    pub fn append_with_ack(
        file: FileId,
        payload: Bytes,
        user_data: u64,
        ack: Ack,
    ) -> Result<Request, WalError> {
        let frame = Frame::new(payload)?;
        Ok(Request::Append {
            file,
            frame,
            user_data,
            ack,
        })
    }

    /// An append of a frame built by the caller (e.g. [`Frame::from_parts`]:
    /// a prepare's header and body framed without copying the body).
    pub fn append_frame(file: FileId, frame: Frame, user_data: u64, ack: Ack) -> Request {
        Request::Append {
            file,
            frame,
            user_data,
            ack,
        }
    }

    /// An in-place rewrite of `payload` as one frame at `offset`. Fails only on
    /// an oversized payload.
    pub fn write_at(
        file: FileId,
        offset: u64,
        payload: Bytes,
        user_data: u64,
        ack: Ack,
    ) -> Result<Request, WalError> {
        let frame = Frame::new(payload)?;
        Ok(Request::WriteAt {
            file,
            offset,
            frame,
            user_data,
            ack,
        })
    }

    /// The file the request is about.
    pub fn file(&self) -> FileId {
        match self {
            Request::Append { file, .. }
            | Request::WriteAt { file, .. }
            | Request::Sync { file, .. }
            | Request::Truncate { file, .. }
            | Request::Rename { file, .. }
            | Request::Close { file, .. } => *file,
        }
    }

    /// The caller's correlation value.
    pub fn user_data(&self) -> u64 {
        match self {
            Request::Append { user_data, .. }
            | Request::WriteAt { user_data, .. }
            | Request::Sync { user_data, .. }
            | Request::Truncate { user_data, .. }
            | Request::Rename { user_data, .. }
            | Request::Close { user_data, .. } => *user_data,
        }
    }

    /// Bytes this request writes (frames only).
    pub fn queued_bytes(&self) -> u64 {
        match self {
            Request::Append { frame, .. } | Request::WriteAt { frame, .. } => frame.len(),
            _ => 0,
        }
    }

    /// The completion kind a successful execution reports.
    pub fn completion_kind(&self) -> CompletionKind {
        match self {
            Request::Append {
                ack: Ack::Durable, ..
            }
            | Request::WriteAt {
                ack: Ack::Durable, ..
            } => CompletionKind::Durable,
            Request::Append {
                ack: Ack::Written, ..
            }
            | Request::WriteAt {
                ack: Ack::Written, ..
            } => CompletionKind::Written,
            Request::Sync { .. } => CompletionKind::Synced,
            Request::Truncate { .. } => CompletionKind::Truncated,
            Request::Rename { .. } => CompletionKind::Renamed,
            Request::Close { .. } => CompletionKind::Closed,
        }
    }
}

/// What a completion reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionKind {
    /// An `Ack::Written` append reached the page cache (not durable).
    Written,
    /// An `Ack::Durable` append is covered by a completed fdatasync.
    Durable,
    /// A `sync`: everything written before it is durable.
    Synced,
    /// A `truncate` is done and durable.
    Truncated,
    /// A `rename` is done and durable.
    Renamed,
    /// A `close` is done; the id is forgotten.
    Closed,
}

/// A byte range of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileRange {
    /// First byte.
    pub offset: u64,
    /// Number of bytes.
    pub len: u64,
}

impl FileRange {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// The answer to one request.
///
/// `result` on success is, by kind: `Written`/`Durable` — the frame's range
/// (header included; the payload starts 8 bytes in), for appends and
/// in-place writes alike; `Synced`/`Closed` —
/// `0..durable end`; `Truncated` — `0..new length`; `Renamed` — `0..append end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The file the request named.
    pub file: FileId,
    /// The request's `user_data`.
    pub user_data: u64,
    /// What happened (on error: what was asked for).
    pub kind: CompletionKind,
    /// The outcome.
    pub result: Result<FileRange, WalError>,
}

/// Where the writer delivers a file's completions.
///
/// Called on the writer thread, so it must not block: an unbounded channel send
/// or a waker is right, a bounded send that may wait is not. Never call a
/// blocking `Wal` method (`open`, `submit`, `append`, `shutdown`...) from a sink:
/// the writer would wait for itself. `try_submit` is safe. Implemented for
/// closures and for `std::sync::mpsc::Sender<Completion>`; from tokio, wrap an
/// `UnboundedSender` in a closure.
pub trait CompletionSink: Send + Sync + 'static {
    /// Delivers one completion.
    fn complete(&self, completion: Completion);
}

impl<F> CompletionSink for F
where
    F: Fn(Completion) + Send + Sync + 'static,
{
    fn complete(&self, completion: Completion) {
        self(completion)
    }
}

impl CompletionSink for mpsc::Sender<Completion> {
    fn complete(&self, completion: Completion) {
        // A dropped receiver means the owner no longer listens; nothing to do.
        let _ = self.send(completion);
    }
}

/// Why a non-blocking submit did not take the request (which comes back).
#[derive(Debug, thiserror::Error)]
pub enum TrySubmitError {
    /// The queue holds its bound of requests; retry after completions drain it.
    #[error("the WAL queue is full")]
    Full(Request),
    /// The WAL has shut down.
    #[error("the WAL writer has shut down")]
    ShutDown(Request),
}

impl TrySubmitError {
    /// The request that was not taken.
    pub fn into_request(self) -> Request {
        match self {
            TrySubmitError::Full(request) | TrySubmitError::ShutDown(request) => request,
        }
    }
}
