//! # strand-wal: the node's WAL writer
//!
//! Every partition and the metadata plane on a node write through one writer
//! thread. A write gets two acks from here: **queued** (the submit returned: the
//! writer has it) and **durable** (an `fdatasync` covering it has completed).
//! The thread drives `io_uring` and falls back to `pwrite` + `fdatasync` where
//! io_uring cannot be set up. Everything queued during one loop turn is one
//! group commit: each dirty file gets one fdatasync linked after its writes.
//! Two knobs shape the groups, never correctness: a short gather window (a
//! turn under concurrent load waits up to 100 µs for the appenders the last
//! turn acked) and a per-file byte cap per turn (1 MiB; the rest of that file's
//! requests run, in order, in the next turn).
//!
//! Files are sequences of frames (`len u32 | crc32c u32 | payload`); a pure
//! [`scan()`] of a file's bytes finds the longest valid prefix and tells a torn
//! tail (cut it) from corruption with valid frames after it (a fault: never cut).
//!
//! Modules, in reading order:
//!
//! | module | owns |
//! |---|---|
//! | [`frame`] | the frame format, [`Frame`] |
//! | [`scan`](mod@scan) | recovery: `scan(&[u8]) -> ScanReport`, torn tail vs corruption |
//! | [`request`] | [`Request`], [`Completion`], [`FileId`], [`OpenMode`], [`CompletionSink`] |
//! | [`error`] | [`WalError`], poisoning causes |
//! | [`storage`] | the [`Storage`] backend trait, [`FileBatch`], [`IoObserver`] |
//! | `group_commit` | batching a turn per file; turning outcomes into acks |
//! | [`engine`] | [`WalCore`]: the writer logic, single-threaded, deterministic |
//! | [`writer`] | [`Wal`]: the writer thread, the bounded queue, backend choice |
//! | [`disk`] | [`DiskStorage`]: std files, `pwrite` + `fdatasync` (the fallback) |
//! | [`uring`] | [`UringStorage`]: the same files, batches through io_uring |
//! | [`memory`] | [`MemoryStorage`]: in-memory disk with crashes and faults |
//! | [`rng`] | [`SplitMix64`], the seeded generator behind simulated crashes |
//! | [`metrics`] | metric names and recording |
//!
//! Invariants that matter most:
//! - **Never durable before the fsync.** A `Durable` or `Synced` completion is
//!   produced only from a batch whose fdatasync ran after all its writes and
//!   succeeded (asserted in `group_commit::settle`).
//! - **A failed file stays failed.** After a failed write, fsync or truncate the
//!   file is poisoned: every later request on it fails with
//!   [`WalError::Poisoned`], whose docs say what the caller must do. Other files
//!   are unaffected.
//! - **Recovery never cuts past a fault.** Only a torn tail (nothing valid after
//!   it) is truncated; corruption is refused with its byte offset.

pub mod disk;
pub mod engine;
pub mod error;
pub mod frame;
mod group_commit;
pub mod memory;
pub mod metrics;
pub mod request;
pub mod rng;
pub mod scan;
pub mod storage;
pub mod uring;
pub mod writer;

pub use disk::DiskStorage;
pub use engine::{FileStatus, SYNC_BYTES_MAX_DEFAULT, WalCore};
pub use error::{IoOp, PoisonCause, WalError};
pub use frame::{FRAME_HEADER_BYTES, FRAME_PAYLOAD_BYTES_MAX, Frame, encode_frame_into};
pub use memory::{CrashMode, MemoryStorage};
pub use metrics::describe_metrics;
pub use request::{
    Ack, Completion, CompletionKind, CompletionSink, FileId, FileRange, OpenMode, OpenedFile,
    Request, TrySubmitError,
};
pub use rng::SplitMix64;
pub use scan::{FrameSpan, ScanReport, Tail, scan};
pub use storage::{BatchOutcome, FileBatch, IoEvent, IoObserver, NoObserver, Storage};
pub use uring::UringStorage;
pub use writer::{
    BackendChoice, BackendKind, GATHER_WINDOW_DEFAULT, QUEUE_CAPACITY_DEFAULT, Wal, WalConfig,
};
