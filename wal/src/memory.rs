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
//!
//! Rooms: this file holds the disk, its crashes and the [`Storage`] calls;
//! `file` is one inode's bytes (sync, failed sync, crash image), `names` the
//! paths, links and inodes, `faults` the injected faults.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use strand_prng::Prng;

use crate::request::{FileId, OpenMode};
use crate::storage::Storage;

mod faults;
mod file;
mod names;
#[cfg(test)]
mod tests;

use file::apply_write;

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
