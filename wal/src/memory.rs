//! [`MemoryStorage`]: a deterministic in-memory disk with a crash and fault
//! model, for partition tests and the single-threaded simulator.
//!
//! Each file keeps three things: `current` (what reads see — the page cache),
//! `synced` (what survived the last successful fdatasync — the platter) and the
//! list of writes since then. A sync applies those writes to `synced`. A power
//! loss replaces every file by `synced` plus, depending on [`CrashMode`],
//! nothing, a prefix of the unsynced writes in order, or such a prefix and then
//! a torn piece of the next write. A process crash ([`CrashMode::ProcessCrash`])
//! changes no byte: the kernel still holds what was written, reads see it, and
//! it stays unsynced, so a power loss later (before a sync covers it) can still
//! take it. Randomness comes from a seeded [`Prng`](strand_prng::Prng) (the
//! workspace's one generator), so a crash replays exactly from its seed.
//!
//! A crash can be armed to strike between two storage calls
//! ([`MemoryStorage::arm_crash`]), inside a WAL turn: after a write and before
//! the fdatasync that was to cover it.
//!
//! Names follow POSIX: a path names an inode; [`MemoryStorage::link`] adds a
//! second name for the same inode (a hard link: a write through either name
//! is seen through both, and both keep the bytes after a crash);
//! [`MemoryStorage::remove`] drops a name, and the inode goes with its last
//! name once no handle holds it open. Directories are implicit: one exists
//! while a path below it does ([`MemoryStorage::list_dir`]).
//!
//! Simplifications, stated so nobody relies on them by accident:
//! - Name operations (create, rename, link, remove) are durable at once, as
//!   the WAL and the partition always sync the directory right after them.
//! - Pages persist in write order; the real-disk case of a later page persisting
//!   before an earlier one is not modelled (the scan would report it as a fault).
//! - A failed fdatasync drops the unsynced writes from the crash image, and a
//!   later successful sync does not bring them back: after a crash they read
//!   as zeros or are gone. What reads see of them is Linux's choice per page
//!   ([`FAILED_SYNC_PAGE_BYTES`]): a page the kernel kept, marked clean, still
//!   reads the new bytes; a page it dropped reads what the disk holds (the
//!   synced bytes, zeros past them). A reader may so see some of a failed
//!   write and not the rest.
//!
//! Injected faults ([`MemoryStorage::fail_next_write`],
//! [`MemoryStorage::fail_next_sync`], [`MemoryStorage::fail_next_read`])
//! strike the next such call on a file, once; [`MemoryStorage::faults_struck`]
//! counts those that struck.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use strand_prng::Prng;

use crate::request::{FileId, OpenMode};
use crate::storage::Storage;

/// What a simulated crash keeps of the bytes that were written but not synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Power loss before any unsynced byte reached the disk: all are lost.
    LoseUnsynced,
    /// Power loss after the disk kept a random prefix (possibly none, possibly
    /// all) of each file's unsynced writes, in order.
    KeepPrefix,
    /// A random prefix of the unsynced writes short of all of them, then a random
    /// strict prefix of the next one: a torn write, usually mid-entry. (With
    /// nothing unsynced, nothing changes.)
    TornWrite,
    /// Power loss after the kernel flushed every write: every file keeps what
    /// reads saw (every written byte), and it is all durable.
    KeepAll,
    /// A process crash: the kernel survived. Every written byte stays visible
    /// to reads but stays unsynced: a later power loss, before a sync covers
    /// it, keeps of it only what that loss's mode says.
    ProcessCrash,
    /// A power loss in which each file independently picks `LoseUnsynced`,
    /// `KeepPrefix` or `TornWrite`.
    PowerLoss,
    /// A process crash (one crash in three) or else a `PowerLoss`.
    Random,
}

/// The page size a failed fdatasync keeps or drops as a whole.
pub const FAILED_SYNC_PAGE_BYTES: u64 = 4096;

/// One write not yet covered by a successful sync.
#[derive(Debug, Clone)]
struct PendingWrite {
    offset: u64,
    data: Vec<u8>,
}

/// One in-memory file (an inode).
#[derive(Debug, Clone, Default)]
struct MemoryFile {
    current: Vec<u8>,
    synced: Vec<u8>,
    unsynced: Vec<PendingWrite>,
    fail_next_write: Option<i32>,
    fail_next_sync: Option<i32>,
    fail_next_read: Option<i32>,
}

impl MemoryFile {
    fn sync(&mut self) {
        for write in self.unsynced.drain(..) {
            apply_write(&mut self.synced, write.offset, &write.data);
        }
    }

    /// A failed fdatasync: the unsynced writes never reach the disk, and each
    /// page they touched is kept in the cache (reads see the new bytes) or
    /// dropped from it (reads see the disk's), as `rng` draws.
    fn fail_sync(&mut self, rng: &mut Prng) {
        let pages: std::collections::BTreeSet<u64> = self
            .unsynced
            .iter()
            .filter(|write| !write.data.is_empty())
            .flat_map(|write| {
                let first = write.offset / FAILED_SYNC_PAGE_BYTES;
                let last = (write.offset + write.data.len() as u64 - 1) / FAILED_SYNC_PAGE_BYTES;
                first..=last
            })
            .collect();
        self.unsynced.clear();
        for page in pages {
            if rng.below(2) == 0 {
                continue; // kept, marked clean
            }
            let start = (page * FAILED_SYNC_PAGE_BYTES) as usize;
            let end = (start + FAILED_SYNC_PAGE_BYTES as usize).min(self.current.len());
            for at in start..end {
                self.current[at] = self.synced.get(at).copied().unwrap_or(0);
            }
        }
    }

    /// Forgets the faults armed on this file that have not struck.
    fn clear_faults(&mut self) {
        self.fail_next_write = None;
        self.fail_next_sync = None;
        self.fail_next_read = None;
    }

    /// The bytes a crash in `mode` leaves, drawing from `rng`.
    fn crash_image(&self, mode: CrashMode, rng: &mut Prng) -> Vec<u8> {
        if mode == CrashMode::KeepAll {
            return self.current.clone();
        }
        let mut image = self.synced.clone();
        let pending = self.unsynced.len() as u64;
        let (kept, torn) = match mode {
            CrashMode::LoseUnsynced => (0, false),
            CrashMode::KeepAll | CrashMode::ProcessCrash => unreachable!("handled by the caller"),
            CrashMode::KeepPrefix => (rng.up_to(pending), false),
            CrashMode::TornWrite if pending == 0 => (0, false),
            CrashMode::TornWrite => (rng.below(pending), true),
            CrashMode::PowerLoss | CrashMode::Random => unreachable!("resolved by the caller"),
        };
        for write in &self.unsynced[..kept as usize] {
            apply_write(&mut image, write.offset, &write.data);
        }
        if let (true, Some(next)) = (torn, self.unsynced.get(kept as usize)) {
            let piece = rng.below(next.data.len().max(1) as u64) as usize;
            apply_write(&mut image, next.offset, &next.data[..piece]);
        }
        image
    }
}

fn apply_write(buffer: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = offset as usize;
    let end = start + data.len();
    if buffer.len() < end {
        buffer.resize(end, 0);
    }
    buffer[start..end].copy_from_slice(data);
}

#[derive(Debug, Clone)]
struct OpenHandle {
    inode: u64,
    path: PathBuf,
}

/// A deterministic in-memory disk. See the module docs for the model.
#[derive(Debug, Clone)]
pub struct MemoryStorage {
    names: BTreeMap<PathBuf, u64>,
    inodes: BTreeMap<u64, MemoryFile>,
    handles: BTreeMap<FileId, OpenHandle>,
    next_inode: u64,
    rng: Prng,
    /// A crash armed to strike between two storage calls.
    armed: Option<ArmedCrash>,
    /// Injected faults (failed writes, syncs, reads) that struck.
    faults_struck: u64,
}

/// A crash armed to strike after some more storage calls.
#[derive(Debug, Clone)]
struct ArmedCrash {
    /// Storage calls still to run before it strikes.
    calls_left: u64,
    /// What the crash keeps of unsynced writes.
    mode: CrashMode,
    /// The image it left, once it struck.
    image: Option<Box<MemoryStorage>>,
}

/// What became of a crash armed with [`MemoryStorage::arm_crash`].
#[derive(Debug)]
pub enum ArmedOutcome {
    /// It has not struck: this many storage calls were still to run.
    Pending(u64),
    /// It struck, leaving this image (what a restart would find).
    Struck(MemoryStorage),
}

impl MemoryStorage {
    /// An empty disk whose crash choices are fixed by `seed`.
    pub fn new(seed: u64) -> MemoryStorage {
        MemoryStorage {
            names: BTreeMap::new(),
            inodes: BTreeMap::new(),
            handles: BTreeMap::new(),
            next_inode: 1,
            rng: Prng::new(seed),
            armed: None,
            faults_struck: 0,
        }
    }

    /// Simulates a crash: every open handle is gone and every file keeps what
    /// `mode` says of its unsynced writes (a process crash keeps them all,
    /// still unsynced). Build a new `WalCore` over the storage afterwards, as
    /// a restarted process would.
    pub fn crash(&mut self, mode: CrashMode) {
        self.handles.clear();
        self.armed = None;
        let linked: Vec<u64> = self.names.values().copied().collect();
        self.inodes.retain(|inode, _| linked.contains(inode));
        let mode = match mode {
            CrashMode::Random if self.rng.below(3) == 0 => CrashMode::ProcessCrash,
            CrashMode::Random => CrashMode::PowerLoss,
            other => other,
        };
        for file in self.inodes.values_mut() {
            file.clear_faults();
            if mode == CrashMode::ProcessCrash {
                continue;
            }
            let file_mode = match mode {
                CrashMode::PowerLoss => power_loss_mode(&mut self.rng),
                other => other,
            };
            let image = file.crash_image(file_mode, &mut self.rng);
            *file = MemoryFile {
                current: image.clone(),
                synced: image,
                ..MemoryFile::default()
            };
        }
    }

    /// Arms a crash in `mode` that strikes once `calls` more storage calls
    /// (writes, syncs, truncations, renames, zero fills) ran, `calls` >= 1:
    /// the storage runs on unaware, keeping the image the crash left for
    /// [`MemoryStorage::disarm_crash`]. A WAL turn is several calls, so the
    /// crash may fall between a write and the fdatasync meant to cover it.
    pub fn arm_crash(&mut self, calls: u64, mode: CrashMode) {
        assert!(calls >= 1, "a crash due now is the caller's to take");
        self.armed = Some(ArmedCrash {
            calls_left: calls,
            mode,
            image: None,
        });
    }

    /// Disarms the crash [`MemoryStorage::arm_crash`] armed and tells what
    /// became of it; `None` when none was armed.
    pub fn disarm_crash(&mut self) -> Option<ArmedOutcome> {
        let armed = self.armed.take()?;
        Some(match armed.image {
            Some(image) => ArmedOutcome::Struck(*image),
            None => ArmedOutcome::Pending(armed.calls_left),
        })
    }

    /// Counts a storage call about to run: an armed crash whose calls ran
    /// out strikes first, leaving the image of the storage as it is now.
    fn before_call(&mut self) {
        let Some(armed) = &mut self.armed else {
            return;
        };
        if armed.image.is_some() {
            return;
        }
        if armed.calls_left > 0 {
            armed.calls_left -= 1;
            return;
        }
        let mode = armed.mode;
        let mut image = self.clone();
        image.crash(mode);
        if let Some(armed) = &mut self.armed {
            armed.image = Some(Box::new(image));
        }
    }

    /// What a read of `path` returns now (synced or not).
    pub fn contents(&self, path: &Path) -> Option<&[u8]> {
        Some(&self.file_at(path)?.current)
    }

    /// What `path` holds as of its last successful sync: what survives
    /// a `LoseUnsynced` crash.
    pub fn durable_contents(&self, path: &Path) -> Option<&[u8]> {
        Some(&self.file_at(path)?.synced)
    }

    /// Every path that exists, in order.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.names.keys().cloned().collect()
    }

    /// The names directly inside directory `dir` (files, and the
    /// subdirectories implied by deeper paths), sorted; empty when nothing is
    /// under it.
    pub fn list_dir(&self, dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = self
            .names
            .keys()
            .filter(|path| path.as_path() != dir)
            .filter_map(|path| path.strip_prefix(dir).ok()?.components().next())
            .map(|component| component.as_os_str().to_string_lossy().into_owned())
            .collect();
        names.dedup();
        names
    }

    /// Removes the name `path` (`unlink`), durably. The bytes stay reachable
    /// through other names of the same inode and through handles still open
    /// on it; the inode is freed with its last name and handle. `ENOENT` when
    /// there is no such file.
    pub fn remove(&mut self, path: &Path) -> io::Result<()> {
        let inode = self.names.remove(path).ok_or_else(|| errno(libc::ENOENT))?;
        self.free_if_unreferenced(inode);
        Ok(())
    }

    /// Makes `to` a second name of the file at `from` (`link`), durably: a
    /// hard link, sharing the bytes, synced and not. `ENOENT` when `from` does
    /// not exist, `EEXIST` when `to` does.
    pub fn link(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        let inode = *self.names.get(from).ok_or_else(|| errno(libc::ENOENT))?;
        if self.names.contains_key(to) {
            return Err(errno(libc::EEXIST));
        }
        self.names.insert(to.to_path_buf(), inode);
        Ok(())
    }

    /// How many names `path`'s file has (`st_nlink`): above one, writing to
    /// it changes the bytes under its other names too. `ENOENT` when absent.
    pub fn link_count(&self, path: &Path) -> io::Result<u64> {
        let inode = *self.names.get(path).ok_or_else(|| errno(libc::ENOENT))?;
        Ok(self.names.values().filter(|named| **named == inode).count() as u64)
    }

    /// Drops an inode nothing names and no handle holds.
    fn free_if_unreferenced(&mut self, inode: u64) {
        let named = self.names.values().any(|&named| named == inode);
        let held = self.handles.values().any(|handle| handle.inode == inode);
        if !named && !held {
            self.inodes.remove(&inode);
        }
    }

    /// Fault: flips bit `bit` (0..8) of byte `offset`, in the cache, on
    /// "disk" and in the unsynced writes over it (a later sync or crash keeps
    /// the flip).
    pub fn flip_bit(&mut self, path: &Path, offset: u64, bit: u8) -> io::Result<()> {
        assert!(bit < 8);
        let file = self.file_at_mut(path)?;
        for bytes in [&mut file.current, &mut file.synced] {
            if let Some(byte) = bytes.get_mut(offset as usize) {
                *byte ^= 1 << bit;
            }
        }
        for write in &mut file.unsynced {
            if let Some(byte) = offset
                .checked_sub(write.offset)
                .and_then(|within| write.data.get_mut(within as usize))
            {
                *byte ^= 1 << bit;
            }
        }
        Ok(())
    }

    /// Fault: a misdirected write. The `len` bytes meant for `from` at
    /// `from_offset` landed at `to_offset` of `to` instead (within its
    /// length): `from` holds zeros there, as a fresh or preallocated region
    /// did before the write, and `to` holds those bytes over what was there.
    /// Applied in the cache, on "disk" and in the unsynced writes over them.
    pub fn misdirect(
        &mut self,
        from: &Path,
        from_offset: u64,
        len: u64,
        to: &Path,
        to_offset: u64,
    ) -> io::Result<()> {
        let source = self.file_at_mut(from)?;
        let start = (from_offset as usize).min(source.current.len());
        let end = (from_offset.saturating_add(len) as usize).min(source.current.len());
        let data = source.current[start..end].to_vec();
        overwrite(source, from_offset, &vec![0; data.len()]);
        let target = self.file_at_mut(to)?;
        let room = target.current.len().saturating_sub(to_offset as usize);
        overwrite(target, to_offset, &data[..data.len().min(room)]);
        Ok(())
    }

    /// Fault: cuts `path` to `len` bytes, in the cache, on "disk" and in the
    /// unsynced writes (what lay past `len` is gone whatever a crash keeps),
    /// as an outside actor or a broken file system might.
    pub fn cut(&mut self, path: &Path, len: u64) -> io::Result<()> {
        let file = self.file_at_mut(path)?;
        file.current.truncate(len as usize);
        file.synced.truncate(len as usize);
        file.unsynced.retain_mut(|write| {
            let kept = len.saturating_sub(write.offset) as usize;
            write.data.truncate(kept);
            !write.data.is_empty()
        });
        Ok(())
    }

    /// Fault: the next write to `path` fails with `errno` (e.g. `libc::ENOSPC`)
    /// and writes nothing.
    pub fn fail_next_write(&mut self, path: &Path, errno: i32) -> io::Result<()> {
        self.file_at_mut(path)?.fail_next_write = Some(errno);
        Ok(())
    }

    /// Fault: the next fdatasync of `path` fails with `errno` (e.g. `libc::EIO`),
    /// dropping the unsynced writes from what a crash keeps and, page by
    /// page, from what reads see (see the module docs).
    pub fn fail_next_sync(&mut self, path: &Path, errno: i32) -> io::Result<()> {
        self.file_at_mut(path)?.fail_next_sync = Some(errno);
        Ok(())
    }

    /// Fault: the next read of `path` (through [`Storage::read_all`] or
    /// [`MemoryStorage::take_read_fault`]) fails with `errno` (e.g.
    /// `libc::EIO`); the bytes stay as they are.
    pub fn fail_next_read(&mut self, path: &Path, errno: i32) -> io::Result<()> {
        self.file_at_mut(path)?.fail_next_read = Some(errno);
        Ok(())
    }

    /// A read of `path` is about to run: the read fault armed on it, if any,
    /// strikes now (an error, once). A disk reading through
    /// [`MemoryStorage::contents`] calls it first. Absent files read no fault.
    pub fn take_read_fault(&mut self, path: &Path) -> io::Result<()> {
        let Ok(file) = self.file_at_mut(path) else {
            return Ok(());
        };
        match file.fail_next_read.take() {
            Some(number) => {
                self.faults_struck += 1;
                Err(errno(number))
            }
            None => Ok(()),
        }
    }

    /// Disarms the read fault armed on `path`; true when it had not struck.
    pub fn disarm_read_fault(&mut self, path: &Path) -> bool {
        self.file_at_mut(path)
            .is_ok_and(|file| file.fail_next_read.take().is_some())
    }

    /// Forgets every injected fault that has not struck (a process that
    /// stops takes its pending I/O with it).
    pub fn clear_faults(&mut self) {
        for file in self.inodes.values_mut() {
            file.clear_faults();
        }
    }

    /// Whether an injected fault is armed and has not struck.
    pub fn has_armed_faults(&self) -> bool {
        self.inodes.values().any(|file| {
            file.fail_next_write.is_some()
                || file.fail_next_sync.is_some()
                || file.fail_next_read.is_some()
        })
    }

    /// How many injected faults (failed writes, syncs, reads) struck.
    pub fn faults_struck(&self) -> u64 {
        self.faults_struck
    }

    fn file_at(&self, path: &Path) -> Option<&MemoryFile> {
        self.inodes.get(self.names.get(path)?)
    }

    fn file_at_mut(&mut self, path: &Path) -> io::Result<&mut MemoryFile> {
        let inode = *self.names.get(path).ok_or_else(|| errno(libc::ENOENT))?;
        Ok(self
            .inodes
            .get_mut(&inode)
            .expect("every name points at an inode"))
    }

    fn handle_file(&mut self, file: FileId) -> io::Result<&mut MemoryFile> {
        let inode = self
            .handles
            .get(&file)
            .ok_or_else(|| errno(libc::EBADF))?
            .inode;
        Ok(self
            .inodes
            .get_mut(&inode)
            .expect("every handle points at an inode"))
    }

    fn create(&mut self, path: &Path) -> u64 {
        let inode = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(inode, MemoryFile::default());
        self.names.insert(path.to_path_buf(), inode);
        inode
    }
}

/// What one file keeps in a power loss.
fn power_loss_mode(rng: &mut Prng) -> CrashMode {
    match rng.below(3) {
        0 => CrashMode::LoseUnsynced,
        1 => CrashMode::KeepPrefix,
        _ => CrashMode::TornWrite,
    }
}

fn errno(number: i32) -> io::Error {
    io::Error::from_raw_os_error(number)
}

impl Storage for MemoryStorage {
    fn open(&mut self, file: FileId, path: &Path, mode: OpenMode) -> io::Result<u64> {
        assert!(!self.handles.contains_key(&file), "{file} opened twice");
        let existing = self.names.get(path).copied();
        let inode = match (mode, existing) {
            (OpenMode::CreateNew, Some(_)) => return Err(errno(libc::EEXIST)),
            (OpenMode::Append | OpenMode::AppendDamaged, None) => return Err(errno(libc::ENOENT)),
            (_, None) => self.create(path),
            (_, Some(inode)) => inode,
        };
        let path = path.to_path_buf();
        self.handles.insert(file, OpenHandle { inode, path });
        let entry = self.inodes.get_mut(&inode).expect("inode just resolved");
        if mode == OpenMode::Truncate {
            entry.sync();
            entry.current.clear();
            entry.synced.clear();
        }
        Ok(entry.current.len() as u64)
    }

    fn read_all(&mut self, file: FileId) -> io::Result<Vec<u8>> {
        let entry = self.handle_file(file)?;
        if let Some(number) = entry.fail_next_read.take() {
            self.faults_struck += 1;
            return Err(errno(number));
        }
        Ok(self.handle_file(file)?.current.clone())
    }

    fn write_at(&mut self, file: FileId, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        self.before_call();
        let entry = self.handle_file(file)?;
        if let Some(number) = entry.fail_next_write.take() {
            self.faults_struck += 1;
            return Err(errno(number));
        }
        let data = parts.concat();
        apply_write(&mut entry.current, offset, &data);
        entry.unsynced.push(PendingWrite { offset, data });
        Ok(())
    }

    /// Zero-filled room is visible to reads at once and never survives a
    /// crash (the model's disk drops it; kept zeros would read the same to
    /// the scan: a tail with nothing valid in it). It never consumes an
    /// injected write failure: those are meant for the data. Modelled without
    /// a pending write, so that crash images stay cheap to build.
    fn zero_fill(&mut self, file: FileId, offset: u64, len: u64) -> io::Result<()> {
        self.before_call();
        let entry = self.handle_file(file)?;
        let end = (offset + len) as usize;
        if entry.current.len() < end {
            entry.current.resize(end, 0);
        }
        Ok(())
    }

    fn sync_data(&mut self, file: FileId) -> io::Result<()> {
        self.before_call();
        let inode = self
            .handles
            .get(&file)
            .ok_or_else(|| errno(libc::EBADF))?
            .inode;
        let entry = self
            .inodes
            .get_mut(&inode)
            .expect("every handle points at an inode");
        if let Some(number) = entry.fail_next_sync.take() {
            entry.fail_sync(&mut self.rng);
            self.faults_struck += 1;
            return Err(errno(number));
        }
        entry.sync();
        Ok(())
    }

    fn set_len(&mut self, file: FileId, len: u64) -> io::Result<()> {
        self.before_call();
        let entry = self.handle_file(file)?;
        entry.sync();
        entry.current.resize(len as usize, 0);
        entry.synced.resize(len as usize, 0);
        Ok(())
    }

    fn rename(&mut self, file: FileId, to: &Path) -> io::Result<()> {
        self.before_call();
        let handle = self
            .handles
            .get_mut(&file)
            .ok_or_else(|| errno(libc::EBADF))?;
        if self.names.get(&handle.path) != Some(&handle.inode) {
            // The name was removed (or replaced) while the file was open.
            return Err(errno(libc::ENOENT));
        }
        let inode = handle.inode;
        self.names.remove(&handle.path);
        handle.path = to.to_path_buf();
        if let Some(replaced) = self.names.insert(to.to_path_buf(), inode) {
            if replaced != inode {
                self.free_if_unreferenced(replaced);
            }
        }
        Ok(())
    }

    fn close(&mut self, file: FileId) {
        if let Some(handle) = self.handles.remove(&file) {
            self.free_if_unreferenced(handle.inode);
        }
    }

    /// Handles here are not descriptors: nothing to give back.
    fn release_descriptor(&mut self, _file: FileId) {}

    /// Yes, so that the simulator runs the engine's shared-sync path. The
    /// model syncs each named file (the default `execute_shared_sync`), which
    /// makes less durable than a real `syncfs` would: never more.
    fn shares_syncs(&self) -> bool {
        true
    }
}

/// Writes `data` at `offset` of `file` wherever its bytes are (the cache,
/// "disk", the unsynced writes over them), never growing any of them: a
/// fault that rewrites bytes in place.
fn overwrite(file: &mut MemoryFile, offset: u64, data: &[u8]) {
    for bytes in [&mut file.current, &mut file.synced] {
        for (at, byte) in data.iter().enumerate() {
            if let Some(slot) = bytes.get_mut(offset as usize + at) {
                *slot = *byte;
            }
        }
    }
    for write in &mut file.unsynced {
        for (at, byte) in data.iter().enumerate() {
            let position = offset + at as u64;
            if let Some(slot) = position
                .checked_sub(write.offset)
                .and_then(|within| write.data.get_mut(within as usize))
            {
                *slot = *byte;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(storage: &mut MemoryStorage, path: &str, writes: &[&[u8]]) -> FileId {
        let file = FileId(1);
        storage
            .open(file, Path::new(path), OpenMode::CreateNew)
            .expect("new file");
        let mut offset = 0;
        for data in writes {
            storage.write_at(file, offset, &[data]).expect("write");
            offset += data.len() as u64;
        }
        file
    }

    #[test]
    fn a_crash_loses_unsynced_writes_and_keeps_synced_ones() {
        let mut storage = MemoryStorage::new(1);
        let file = written(&mut storage, "a", &[b"durable"]);
        storage.sync_data(file).expect("sync");
        storage.write_at(file, 7, &[b"-lost"]).expect("write");
        assert_eq!(storage.contents(Path::new("a")), Some(&b"durable-lost"[..]));
        storage.crash(CrashMode::LoseUnsynced);
        assert_eq!(storage.contents(Path::new("a")), Some(&b"durable"[..]));
    }

    #[test]
    fn keep_prefix_keeps_whole_writes_in_order() {
        for seed in 0..50 {
            let mut storage = MemoryStorage::new(seed);
            written(&mut storage, "a", &[b"11", b"22", b"33"]);
            storage.crash(CrashMode::KeepPrefix);
            let image = storage.contents(Path::new("a")).expect("exists").to_vec();
            assert!([&b""[..], b"11", b"1122", b"112233"].contains(&&image[..]));
        }
    }

    #[test]
    fn a_torn_write_keeps_a_strict_prefix_of_one_write() {
        for seed in 0..50 {
            let mut storage = MemoryStorage::new(seed);
            written(&mut storage, "a", &[b"1111", b"2222"]);
            storage.crash(CrashMode::TornWrite);
            let image = storage.contents(Path::new("a")).expect("exists").to_vec();
            assert!(b"11112222".starts_with(&image));
            assert!(image.len() < 8, "seed {seed}: a torn crash loses something");
        }
    }

    #[test]
    fn a_failed_sync_loses_the_writes_it_covered_even_after_a_later_sync() {
        let mut storage = MemoryStorage::new(3);
        let file = written(&mut storage, "a", &[b"gone"]);
        storage
            .fail_next_sync(Path::new("a"), libc::EIO)
            .expect("exists");
        assert!(storage.sync_data(file).is_err());
        let read = storage.contents(Path::new("a")).expect("exists");
        assert!(
            read == b"gone" || read == b"\0\0\0\0",
            "the page was kept or dropped: {read:?}"
        );
        storage.write_at(file, 4, &[b"next"]).expect("write");
        storage.sync_data(file).expect("sync");
        storage.crash(CrashMode::LoseUnsynced);
        assert_eq!(storage.contents(Path::new("a")), Some(&b"\0\0\0\0next"[..]));
    }

    #[test]
    fn a_failed_sync_keeps_or_drops_each_page_it_covered() {
        let page = FAILED_SYNC_PAGE_BYTES as usize;
        let (mut kept, mut dropped) = (0, 0);
        for seed in 0..40 {
            let mut storage = MemoryStorage::new(seed);
            let file = written(&mut storage, "a", &[&vec![1u8; page]]);
            storage.sync_data(file).expect("sync");
            storage
                .write_at(file, 0, &[&vec![2u8; 3 * page]])
                .expect("write");
            storage
                .fail_next_sync(Path::new("a"), libc::EIO)
                .expect("exists");
            assert!(storage.sync_data(file).is_err());
            assert_eq!(storage.faults_struck(), 1);
            let read = storage.contents(Path::new("a")).expect("exists").to_vec();
            assert_eq!(read.len(), 3 * page, "the file keeps its length");
            for (index, chunk) in read.chunks(page).enumerate() {
                let old = if index == 0 { 1 } else { 0 };
                assert!(
                    chunk.iter().all(|&byte| byte == 2) || chunk.iter().all(|&byte| byte == old),
                    "seed {seed}: page {index} is whole, old or new"
                );
                if chunk[0] == 2 {
                    kept += 1;
                } else {
                    dropped += 1;
                }
            }
            storage.sync_data(file).expect("a later sync succeeds");
            storage.crash(CrashMode::LoseUnsynced);
            assert_eq!(
                storage.contents(Path::new("a")),
                Some(&vec![1u8; page][..]),
                "seed {seed}: nothing of the failed write is durable"
            );
        }
        assert!(kept > 0 && dropped > 0, "both choices occur");
    }

    #[test]
    fn a_hard_link_shares_the_bytes_and_survives_removing_the_first_name() {
        let mut storage = MemoryStorage::new(4);
        let file = written(&mut storage, "dir/a", &[b"sealed"]);
        storage.sync_data(file).expect("sync");
        storage.close(file);
        storage
            .link(Path::new("dir/a"), Path::new("fenced/a"))
            .expect("link");
        assert_eq!(
            storage
                .link(Path::new("dir/a"), Path::new("fenced/a"))
                .map_err(|error| error.raw_os_error()),
            Err(Some(libc::EEXIST))
        );
        storage.remove(Path::new("dir/a")).expect("remove");
        assert_eq!(storage.contents(Path::new("dir/a")), None);
        assert_eq!(storage.list_dir(Path::new("dir")), Vec::<String>::new());
        storage.crash(CrashMode::LoseUnsynced);
        assert_eq!(
            storage.contents(Path::new("fenced/a")),
            Some(&b"sealed"[..])
        );
        assert_eq!(storage.list_dir(Path::new("fenced")), ["a"]);
        assert_eq!(storage.list_dir(Path::new("")), ["fenced"]);
        assert!(storage.remove(Path::new("dir/a")).is_err());
    }

    #[test]
    fn a_removed_file_stays_readable_through_its_open_handle_until_closed() {
        let mut storage = MemoryStorage::new(5);
        let file = written(&mut storage, "a", &[b"kept"]);
        storage.remove(Path::new("a")).expect("remove");
        assert_eq!(storage.read_all(file).expect("still open"), b"kept");
        storage.close(file);
        assert!(
            storage.inodes.is_empty(),
            "the inode went with its last handle"
        );
    }

    #[test]
    fn a_process_crash_keeps_writes_visible_but_unsynced() {
        let mut storage = MemoryStorage::new(6);
        let file = written(&mut storage, "a", &[b"durable"]);
        storage.sync_data(file).expect("sync");
        storage.write_at(file, 7, &[b"-pending"]).expect("write");
        storage.crash(CrashMode::ProcessCrash);
        assert_eq!(
            storage.contents(Path::new("a")),
            Some(&b"durable-pending"[..]),
            "reads still see every written byte"
        );
        assert_eq!(
            storage.durable_contents(Path::new("a")),
            Some(&b"durable"[..])
        );
        storage.crash(CrashMode::ProcessCrash);
        storage.crash(CrashMode::LoseUnsynced);
        assert_eq!(
            storage.contents(Path::new("a")),
            Some(&b"durable"[..]),
            "a power loss after the process crashes still takes them"
        );
    }

    #[test]
    fn a_sync_after_a_process_crash_makes_the_pending_writes_durable() {
        let mut storage = MemoryStorage::new(7);
        written(&mut storage, "a", &[b"pending"]);
        storage.crash(CrashMode::ProcessCrash);
        let file = FileId(2);
        storage
            .open(file, Path::new("a"), OpenMode::Append)
            .expect("reopen");
        storage.sync_data(file).expect("sync");
        storage.crash(CrashMode::LoseUnsynced);
        assert_eq!(storage.contents(Path::new("a")), Some(&b"pending"[..]));
    }

    #[test]
    fn an_armed_crash_strikes_between_a_write_and_its_sync() {
        let mut storage = MemoryStorage::new(8);
        let file = written(&mut storage, "a", &[b"durable"]);
        storage.sync_data(file).expect("sync");
        storage.arm_crash(1, CrashMode::ProcessCrash);
        storage.write_at(file, 7, &[b"-written"]).expect("write");
        storage.sync_data(file).expect("sync");
        let Some(ArmedOutcome::Struck(mut image)) = storage.disarm_crash() else {
            panic!("the crash struck before the sync");
        };
        assert_eq!(
            image.contents(Path::new("a")),
            Some(&b"durable-written"[..])
        );
        assert_eq!(
            image.durable_contents(Path::new("a")),
            Some(&b"durable"[..])
        );
        image.crash(CrashMode::LoseUnsynced);
        assert_eq!(image.contents(Path::new("a")), Some(&b"durable"[..]));
        assert_eq!(
            storage.durable_contents(Path::new("a")),
            Some(&b"durable-written"[..]),
            "the storage itself ran on unaware"
        );
        storage.arm_crash(5, CrashMode::LoseUnsynced);
        storage.sync_data(file).expect("sync");
        assert!(matches!(
            storage.disarm_crash(),
            Some(ArmedOutcome::Pending(4))
        ));
    }

    #[test]
    fn same_seed_same_crash() {
        let image = |seed| {
            let mut storage = MemoryStorage::new(seed);
            written(&mut storage, "a", &[b"aaaa", b"bbbb", b"cccc", b"dddd"]);
            storage.crash(CrashMode::Random);
            storage.contents(Path::new("a")).expect("exists").to_vec()
        };
        for seed in 0..20 {
            assert_eq!(image(seed), image(seed));
        }
    }
}
