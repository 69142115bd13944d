//! An open after a crash makes what it read durable: the active segment and
//! the cursor log are synced by the disk itself (the WAL counts what a file holds at open as
//! durable, so a sync through it would do nothing), and only then.

mod common;

use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use common::*;
use strand_partition::layout::{cursors_log_path, segment_path, superblock_path};
use strand_partition::{Disk, MemoryDisk, Partition, WaitError};
use strand_wal::{Completion, CrashMode, OpenMode, OpenedFile, Request, Storage, WalError};

/// A [`MemoryDisk`] that records the files synced through
/// [`Disk::sync_file`], and those written (and synced) with
/// [`Disk::write_at`].
struct SyncRecording {
    disk: MemoryDisk,
    synced: Vec<PathBuf>,
    written: Vec<PathBuf>,
}

impl Disk for SyncRecording {
    fn wal_open(&mut self, path: &Path, mode: OpenMode) -> Result<OpenedFile, WalError> {
        self.disk.wal_open(path, mode)
    }
    fn wal_submit(&mut self, request: Request) -> Result<(), WalError> {
        self.disk.wal_submit(request)
    }
    fn wal_poll(&mut self, out: &mut Vec<Completion>) {
        self.disk.wal_poll(out)
    }
    fn wal_wait(&mut self, out: &mut Vec<Completion>) -> Result<(), WaitError> {
        self.disk.wal_wait(out)
    }
    fn read_file(&mut self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        self.disk.read_file(path)
    }
    fn read_at(&mut self, path: &Path, offset: u64, len: usize) -> io::Result<Bytes> {
        self.disk.read_at(path, offset, len)
    }
    fn file_len(&mut self, path: &Path) -> io::Result<Option<u64>> {
        self.disk.file_len(path)
    }
    fn write_at(&mut self, path: &Path, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.written.push(path.to_path_buf());
        self.disk.write_at(path, offset, bytes)
    }
    fn set_len(&mut self, path: &Path, len: u64) -> io::Result<()> {
        self.disk.set_len(path, len)
    }
    fn sync_file(&mut self, path: &Path) -> io::Result<()> {
        self.synced.push(path.to_path_buf());
        self.disk.sync_file(path)
    }
    fn list_dir(&mut self, dir: &Path) -> io::Result<Vec<String>> {
        self.disk.list_dir(dir)
    }
    fn create_dir_all(&mut self, dir: &Path) -> io::Result<()> {
        self.disk.create_dir_all(dir)
    }
    fn remove_file(&mut self, path: &Path) -> io::Result<()> {
        self.disk.remove_file(path)
    }
    fn remove_dir_all(&mut self, dir: &Path) -> io::Result<()> {
        self.disk.remove_dir_all(dir)
    }
    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        self.disk.rename(from, to)
    }
    fn hard_link(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        self.disk.hard_link(from, to)
    }
    fn link_count(&mut self, path: &Path) -> io::Result<u64> {
        self.disk.link_count(path)
    }
    fn exists(&mut self, path: &Path) -> bool {
        self.disk.exists(path)
    }
}

fn recording(disk: MemoryDisk) -> SyncRecording {
    SyncRecording {
        disk,
        synced: Vec::new(),
        written: Vec::new(),
    }
}

#[test]
fn an_open_after_a_crash_syncs_its_appended_files_and_a_clean_one_syncs_nothing() {
    let dir = Path::new(MEMORY_DIR);
    let config = small_config();
    let (mut partition, _) =
        Partition::open(recording(MemoryDisk::new(1)), dir, config).expect("create");
    append_durable(&mut partition, 3, 1, 10);
    assert!(
        partition.disk().synced.is_empty(),
        "a fresh partition syncs nothing"
    );

    // A process crash: the bytes stay where reads see them.
    let mut disk = partition.abandon();
    disk.disk.crash(CrashMode::ProcessCrash);
    disk.synced.clear();
    disk.written.clear();
    let (partition, recovery) = Partition::open(disk, dir, config).expect("reopen");
    assert!(!recovery.clean_shutdown);
    assert_eq!(recovery.op, 3);
    assert_eq!(
        partition.disk().written.first(),
        Some(&superblock_path(dir, 0)),
        "the superblock copy chosen is written again first (a sync alone would not \
         make bytes a failed fsync left in the page cache durable)"
    );
    assert_eq!(
        partition.disk().synced,
        vec![segment_path(dir, 0), cursors_log_path(dir)],
        "the active segment and the cursor log, synced by the disk"
    );

    let mut disk = partition.close().expect("close");
    disk.synced.clear();
    let (partition, recovery) = Partition::open(disk, dir, config).expect("reopen clean");
    assert!(recovery.clean_shutdown);
    assert!(
        partition.disk().synced.is_empty(),
        "{:?}",
        partition.disk().synced
    );
}

#[test]
fn a_sync_of_a_file_makes_durable_what_a_crashed_process_left_unsynced() {
    let mut disk = MemoryDisk::new(2);
    let path = Path::new("/left/behind");
    let storage = disk.storage_mut();
    let file = strand_wal::FileId(7);
    storage
        .open(file, path, OpenMode::CreateNew)
        .expect("create");
    storage.write_at(file, 0, &[b"written"]).expect("write");
    storage.close(file);
    disk.crash(CrashMode::ProcessCrash);
    assert_eq!(disk.storage().contents(path), Some(&b"written"[..]));
    assert_eq!(disk.storage().durable_contents(path), Some(&b""[..]));
    disk.sync_file(path).expect("sync");
    disk.crash(CrashMode::LoseUnsynced);
    assert_eq!(
        disk.storage().contents(path),
        Some(&b"written"[..]),
        "the sync covered the crashed process's write"
    );
    assert!(disk.sync_file(Path::new("/absent")).is_err());
}
