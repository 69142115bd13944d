//! # strand-wal: the node's WAL writer
//!
//! Every partition and the metadata plane on a node write through one writer
//! thread. A write gets two acks from here: **queued** (the submit returned: the
//! writer has it) and **durable** (an `fdatasync` covering it has completed).
//! The thread drives `io_uring` and falls back to `pwrite` + `fdatasync` where
//! io_uring cannot be set up.
//!
//! Group commit is pipelined: everything queued during one loop turn becomes
//! one batch per file (its frames in one `writev` chain, with an fdatasync
//! linked after them when the file has nothing else in flight). Over io_uring
//! the turn only starts its batches; the next turn's writes go out while this
//! turn's fsyncs run, and each file's acks go out the moment its own fsync
//! returns. A file's batches are settled strictly in order. Bounds: at most
//! one fdatasync in flight per file, [`WRITE_BATCHES_IN_FLIGHT_MAX`] write
//! batches per file, [`SYNCS_IN_FLIGHT_MAX_DEFAULT`] fsyncs over all files
//! (configurable); requests past a bound wait in the queue, in order. Three
//! knobs shape the groups, never correctness: a short gather window (a turn,
//! and the fsyncs due with it, waits up to 250 µs for the callers the writer
//! just answered, so their appends share those fsyncs; a lone appender never
//! waits), the fsync cap just named, and a per-file byte cap (4 MiB queued
//! past what the file's fsync in flight covers).
//!
//! With [`WalConfig::direct_appends`] (off in a bare `WalConfig`; the server's
//! `direct_io` turns it on by default), files append past the page cache
//! (`O_DIRECT`, see [`direct`]) where the io_uring backend and the file system
//! allow: one write batch in flight per such file, each a run of whole blocks,
//! into room allocated ahead once the file has grown and written with zeros
//! beside the next append (so that appends overwrite written blocks); an
//! in-place write takes the file back through the cache.
//!
//! A file whose fsyncs keep carrying only a few KiB gets zero-filled room
//! written ahead of its appends (see [`preallocate`]): its fsyncs then flush
//! data into existing blocks and skip the size commit. Close and rename cut
//! the room off again.
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
//! | `crc` | a frame's checksum combined from its parts' (a prepare's body is not read twice) |
//! | [`scan`](mod@scan) | recovery: `scan(&[u8]) -> ScanReport`, torn tail vs corruption |
//! | [`request`] | [`Request`], [`Completion`], [`FileId`], [`OpenMode`], [`CompletionSink`] |
//! | [`error`] | [`WalError`], poisoning causes |
//! | [`storage`] | the [`Storage`] backend trait, [`Pipeline`], [`FileBatch`], [`IoObserver`] |
//! | `group_commit` | per-file watermarks of writes and fsyncs in flight; batching a turn; acks in order |
//! | [`engine`] | [`WalCore`]: the writer logic, single-threaded, deterministic; rooms: the turn, the file table, settling batches |
//! | [`writer`] | [`Wal`]: the writer thread, the bounded queue, backend choice |
//! | [`disk`] | [`DiskStorage`]: std files, `pwrite` + `fdatasync` (the fallback) |
//! | [`syncfs`] | shared syncs: one `syncfs` for the bare syncs of many files; the [`syncfs::Syncer`] thread |
//! | [`uring`] | [`UringStorage`]: the same files, batches pipelined through io_uring; rooms: submission, completion, the [`Doorbell`] |
//! | [`memory`] | [`MemoryStorage`]: in-memory disk with crashes and faults; rooms: one file's bytes, names, faults |
//! | [`preallocate`] | room ahead of appends: zero-filled for files whose fsyncs are small, allocated (then zeroed beside an append) for direct files |
//! | [`direct`] | appends past the page cache: whole-block writes planned around a kept tail block, pooled aligned buffers (the io_uring backend's, with [`WalConfig::direct_appends`]) |
//! | [`metrics`] | metric names and recording |
//!
//! Invariants that matter most:
//! - **Never durable before the fsync.** A `Durable` or `Synced` completion is
//!   produced only once an fdatasync issued after all the writes it covers
//!   has succeeded (asserted in `group_commit`); with fsyncs of one file never
//!   overlapping, so no writeback error can be reported to the wrong one.
//! - **A failed file stays failed.** After a failed write, fsync or truncate the
//!   file is poisoned: every waiter not yet answered fails (even one whose own
//!   pipelined fsync may still succeed), and every later request on it fails
//!   with [`WalError::Poisoned`], whose docs say what the caller must do. Other
//!   files are unaffected.
//! - **Recovery never cuts past a fault.** Only a torn tail (nothing valid after
//!   it) is truncated; corruption is refused with its byte offset, or, with
//!   [`OpenMode::AppendDamaged`], reported for the caller to repair.

mod crc;
pub mod direct;
pub mod disk;
pub mod engine;
pub mod error;
pub mod frame;
mod group_commit;
pub mod memory;
pub mod metrics;
pub mod preallocate;
pub mod request;
pub mod scan;
pub mod storage;
pub mod syncfs;
pub mod uring;
pub mod writer;

pub use disk::DiskStorage;
pub use engine::{FileStatus, SYNC_BYTES_MAX_DEFAULT, SYNCS_IN_FLIGHT_MAX_DEFAULT, WalCore};
pub use error::{IoOp, PoisonCause, WalError};
pub use frame::{FRAME_HEADER_BYTES, FRAME_PAYLOAD_BYTES_MAX, Frame, encode_frame_into};
pub use group_commit::WRITE_BATCHES_IN_FLIGHT_MAX;
pub use memory::{ArmedOutcome, CrashMode, MemoryStorage};
pub use metrics::describe_metrics;
pub use request::{
    Ack, Completion, CompletionKind, CompletionSink, FileId, FileRange, OpenMode, OpenedFile,
    Request, TrySubmitError,
};
pub use scan::{FrameSpan, ScanReport, Tail, scan};
pub use storage::{BatchOutcome, FileBatch, IoEvent, IoObserver, NoObserver, Pipeline, Storage};
pub use uring::{Doorbell, UringStorage};
pub use writer::{
    BackendChoice, BackendKind, GATHER_WINDOW_DEFAULT, QUEUE_CAPACITY_DEFAULT, Wal, WalConfig,
};
