//! An open after a crash makes what it read durable. Not by a sync alone:
//! a failed fdatasync in the crashed process may have left bytes in the page
//! cache, marked clean, which no later sync writes. So the bytes a sync has
//! not confirmed (the active segment past the superblock's op checkpoint,
//! the cursor log past its cursor checkpoint) are written again, then synced,
//! and only after a crash.

mod common;

use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use common::*;
use strand_partition::layout::{rewrite_intent_path, segment_path, superblock_path};
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
fn an_open_after_a_crash_writes_its_unconfirmed_tails_again_and_a_clean_one_nothing() {
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
        partition.disk().written,
        vec![superblock_path(dir, 0), segment_path(dir, 0)],
        "the superblock copy chosen, then the segment's ops past the checkpoint (none \
         confirmed yet), written again: a sync alone would not make bytes a failed \
         fsync left in the page cache durable"
    );
    assert!(partition.disk().synced.is_empty());

    // Now the checkpoint covers every op: a crash leaves nothing to write again.
    let mut disk = partition.abandon();
    disk.disk.crash(CrashMode::ProcessCrash);
    disk.written.clear();
    let (partition, _) = Partition::open(disk, dir, config).expect("reopen");
    assert_eq!(partition.disk().written, vec![superblock_path(dir, 1)]);

    let mut disk = partition.close().expect("close");
    disk.written.clear();
    let (partition, recovery) = Partition::open(disk, dir, config).expect("reopen clean");
    assert!(recovery.clean_shutdown);
    assert!(
        partition.disk().synced.is_empty() && partition.disk().written.is_empty(),
        "{:?}",
        partition.disk().written
    );
}

/// A failed fdatasync of the active segment, then a process crash before
/// the node reopened the group: the next process reads the failed ops back
/// whole from the page cache on some pages. What its open counts durable
/// must survive a power loss, or the replica vouches for ops no disk holds
/// (and an operator may remove the copies that do).
#[test]
fn after_a_failed_sync_and_a_crash_the_next_process_makes_what_it_reads_durable() {
    let dir = Path::new(MEMORY_DIR);
    let mut read_back_whole = 0;
    for seed in 0..16 {
        let (mut partition, _) = open_memory(MemoryDisk::new(400 + seed), small_config());
        append_durable(&mut partition, 3, 1, 50);
        persist_commit(&mut partition, 3, 1);
        partition
            .device_mut()
            .storage_mut()
            .fail_next_sync(&segment_path(dir, 0), libc::EIO)
            .expect("inject");
        append_queued(&mut partition, 2, 1, 50);
        let mut out = Vec::new();
        let _ = partition.flush(&mut out);
        let mut disk = partition.abandon();
        disk.crash(CrashMode::ProcessCrash);
        let (partition, recovery) = open_memory(disk, small_config());
        if recovery.op != 5 || !recovery.faulty.is_empty() {
            continue; // the kernel dropped a page: the open sees the damage
        }
        read_back_whole += 1;
        let mut disk = partition.abandon();
        disk.crash(CrashMode::LoseUnsynced);
        let (_, after) = open_memory(disk, small_config());
        assert_eq!(
            (after.op, after.faulty.len()),
            (5, 0),
            "seed {seed}: the ops the open read whole are gone after a power loss"
        );
    }
    assert!(
        read_back_whole > 0,
        "some seed kept the failed pages cached"
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

/// The same for a repair in place: a damaged op (in a sealed segment, and in
/// the active one) is rewritten, the sync of the rewrite fails, and the
/// process crashes before its node reopens the group. The next process may
/// read the repaired bytes back whole from the page cache; what it counts
/// whole must survive a power loss, so the repair's span, recorded before
/// its first write, is written again at open.
#[test]
fn after_a_failed_repair_sync_and_a_crash_the_next_process_makes_what_it_reads_durable() {
    let dir = Path::new(MEMORY_DIR);
    let mut read_back_whole = 0;
    for seed in 0..24 {
        let (mut partition, _) = open_memory(MemoryDisk::new(500 + seed), small_config());
        let written = append_durable(&mut partition, 40, 5, 200);
        persist_commit(&mut partition, 40, 1);
        let op = if seed % 2 == 0 { 3 } else { 39 };
        let location = partition.entry_location(op).expect("readable");
        let mut disk = partition.close().expect("close");
        let body = location.frame_len - 20;
        disk.storage_mut()
            .flip_bit(&location.path, location.position + body, 1)
            .expect("flip");
        let (mut partition, recovery) = open_memory(disk, small_config());
        assert_eq!(recovery.faulty, vec![op], "seed {seed}");
        partition
            .device_mut()
            .storage_mut()
            .fail_next_sync(&location.path, libc::EIO)
            .expect("inject");
        let _ = partition.write_prepare(written[op as usize - 1].clone());
        let mut out = Vec::new();
        let _ = partition.flush(&mut out);
        let mut disk = partition.abandon();
        disk.crash(CrashMode::ProcessCrash);
        let (partition, recovery) = open_memory(disk, small_config());
        if !recovery.faulty.is_empty() {
            continue; // the kernel dropped a page: the open sees the damage
        }
        read_back_whole += 1;
        assert!(
            !partition
                .disk()
                .storage()
                .paths()
                .contains(&rewrite_intent_path(dir)),
            "seed {seed}: the intents are forgotten once written again"
        );
        let mut disk = partition.abandon();
        disk.crash(CrashMode::LoseUnsynced);
        let (_, after) = open_memory(disk, small_config());
        assert!(
            after.faulty.is_empty(),
            "seed {seed}: op {op}, read whole at the open before, is damaged after a power loss"
        );
    }
    assert!(
        read_back_whole > 0,
        "some seed kept the repaired pages cached"
    );
}
