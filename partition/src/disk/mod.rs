//! [`Disk`]: every I/O the partition does, behind one trait, so the same
//! partition code runs on real files with the node's threaded [`strand_wal::Wal`]
//! ([`FileDisk`]) and on the WAL's deterministic in-memory disk with crash
//! modelling ([`MemoryDisk`], for the simulator and crash tests).
//!
//! Two kinds of operations:
//! - **WAL requests** (`wal_*`): appends, syncs, truncations, renames and
//!   closes of the files the partition appends to (segments, their indexes,
//!   `cursors.log`, superblock copies). They complete asynchronously; the
//!   completions come back through [`Disk::wal_poll`] / [`Disk::wal_wait`].
//! - **Plain operations**: reads, directory listing, and the few writes that
//!   are not appends (rewriting a damaged entry in place, writing imported
//!   chunks, rebuilding an index). Each is durable when it returns (data
//!   fdatasynced, directory entries synced).
//!
//! Rule for callers: never use a plain operation to rename or remove a file the
//! WAL has open, and never rename a directory holding one. The WAL tracks its
//! files by path.

mod file;
mod memory;
mod read_handles;

use std::io;
use std::path::Path;

use bytes::Bytes;
use strand_wal::{Completion, OpenMode, OpenedFile, Request, WalError};

pub use file::FileDisk;
pub use memory::MemoryDisk;
pub use read_handles::ReadHandles;

/// Every I/O a partition does. See the module docs.
pub trait Disk {
    /// Opens `path` through the WAL (recovering it for append modes).
    /// Requests submitted earlier run first.
    fn wal_open(&mut self, path: &Path, mode: OpenMode) -> Result<OpenedFile, WalError>;

    /// Queues a request; returning `Ok` is the "queued" ack.
    fn wal_submit(&mut self, request: Request) -> Result<(), WalError>;

    /// Moves the completions that have arrived into `out` without waiting.
    /// (The in-memory disk runs one writer turn here.)
    fn wal_poll(&mut self, out: &mut Vec<Completion>);

    /// Like [`Disk::wal_poll`] but waits until at least one completion has
    /// arrived. Call only while a request is outstanding.
    fn wal_wait(&mut self, out: &mut Vec<Completion>) -> Result<(), WaitError>;

    /// The whole file, or `None` when it does not exist.
    fn read_file(&mut self, path: &Path) -> io::Result<Option<Vec<u8>>>;

    /// `len` bytes from `offset`; an error if the file is shorter.
    fn read_at(&mut self, path: &Path, offset: u64, len: usize) -> io::Result<Bytes>;

    /// The file's length, or `None` when it does not exist.
    fn file_len(&mut self, path: &Path) -> io::Result<Option<u64>>;

    /// Writes `bytes` at `offset` (creating the file if needed) and fdatasyncs.
    fn write_at(&mut self, path: &Path, offset: u64, bytes: &[u8]) -> io::Result<()>;

    /// Cuts (or extends) the file to `len` and syncs it.
    fn set_len(&mut self, path: &Path, len: u64) -> io::Result<()>;

    /// Makes every byte of the file durable, whoever wrote it: a file read
    /// back after a process crash may hold bytes the crashed process left in
    /// the page cache only, which the WAL (it counts what it finds at open as
    /// durable) would never sync. `NotFound` when it does not exist.
    fn sync_file(&mut self, path: &Path) -> io::Result<()>;

    /// Names in directory `dir` (files and subdirectories); empty when absent.
    fn list_dir(&mut self, dir: &Path) -> io::Result<Vec<String>>;

    /// Creates `dir` and its parents, durably.
    fn create_dir_all(&mut self, dir: &Path) -> io::Result<()>;

    /// Removes a file, durably; absent is fine.
    fn remove_file(&mut self, path: &Path) -> io::Result<()>;

    /// Removes a directory and everything in it, durably; absent is fine.
    fn remove_dir_all(&mut self, dir: &Path) -> io::Result<()>;

    /// Renames a file or a directory, replacing a file at `to`; durable (the
    /// directories involved are synced).
    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()>;

    /// Makes `to` name the same bytes as `from` (a hard link where the disk
    /// has them, a copy otherwise), durably.
    fn hard_link(&mut self, from: &Path, to: &Path) -> io::Result<()>;

    /// How many names the file at `path` has: above one it shares its bytes
    /// with another name (a hard link into a quarantined copy), and must be
    /// copied before it is changed in place.
    fn link_count(&mut self, path: &Path) -> io::Result<u64>;

    /// Whether a file or directory exists at `path`.
    fn exists(&mut self, path: &Path) -> bool;
}

/// Why [`Disk::wal_wait`] returned without a completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitError {
    /// Nothing arrived within the guard (the writer is stuck or gone).
    TimedOut {
        /// The guard, in seconds.
        seconds: u64,
    },
    /// Nothing is outstanding, so nothing can arrive: a caller bug.
    NothingOutstanding,
}
