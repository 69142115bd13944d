//! [`MemoryDisk`]: the WAL's deterministic in-memory disk ([`MemoryStorage`])
//! driven by a single-threaded [`WalCore`], for the simulator and crash tests.
//!
//! WAL requests run when the caller polls (one writer turn per poll), so a test
//! decides exactly which writes have happened before it crashes the disk.
//! Plain operations act on the storage directly through a reserved file id.
//!
//! A crash (a power loss, or a process crash) can be armed to strike between
//! two operations ([`MemoryDisk::lose_power_after`]): the disk then keeps the
//! image a crash at that instant would leave, while the caller runs on
//! unaware; the next [`MemoryDisk::crash`] restores that image. Each `Disk`
//! call is one operation, atomic as on a real file system (a directory
//! rename included); a WAL writer turn is one operation per storage call it
//! makes (each write, fdatasync, truncation, rename), so a crash can fall
//! between a turn's write and the fdatasync meant to cover it.
//!
//! A process crash leaves written bytes unsynced ([`CrashMode::ProcessCrash`]):
//! [`Disk::sync_file`] really syncs them. Faults injected into the storage
//! strike here too: a failed write or sync of a plain operation, and a read
//! fault armed on a file fails its next [`Disk::read_file`] or
//! [`Disk::read_at`] (the bytes stay as they were).
//!
//! Names follow the storage's POSIX model, as [`super::FileDisk`] sees a real
//! file system: a removed file is unlinked (its bytes go with its last name),
//! and a hard link is a second name of the same bytes, so a write through
//! one name shows through the other (the partition links only sealed
//! segments into and out of quarantined copies). Directories are implicit:
//! one exists while a file under it does.

use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use strand_wal::{
    ArmedOutcome, Completion, CrashMode, FileId, MemoryStorage, OpenMode, OpenedFile, Request,
    Storage, WalCore, WalError,
};

use super::{Disk, WaitError};

/// The file id plain operations use; the WAL core counts its ids up from 1.
const PLAIN_FILE: FileId = FileId(u64::MAX);

/// Bound of the WAL core's request queue.
const QUEUE_CAPACITY: usize = 1 << 16;

/// An in-memory disk with crashes and faults. See the module docs.
pub struct MemoryDisk {
    core: WalCore<MemoryStorage>,
    buffered: Vec<Completion>,
    /// WAL turns run only through [`MemoryDisk::run_turn`] (and waits).
    manual_turns: bool,
    /// An armed or struck power loss.
    power_loss: Option<PowerLoss>,
}

/// A power loss armed to strike after some operations.
struct PowerLoss {
    /// Operations still to complete before it strikes.
    ops_left: u64,
    /// What the crash keeps of unsynced writes.
    mode: CrashMode,
    /// The image it left, once it struck.
    image: Option<MemoryStorage>,
}

impl MemoryDisk {
    /// An empty disk whose crash choices are fixed by `seed`.
    pub fn new(seed: u64) -> MemoryDisk {
        MemoryDisk::from_storage(MemoryStorage::new(seed))
    }

    /// A disk over existing storage (as a restarted process finds it).
    pub fn from_storage(storage: MemoryStorage) -> MemoryDisk {
        MemoryDisk {
            core: WalCore::new(storage, QUEUE_CAPACITY),
            buffered: Vec::new(),
            manual_turns: false,
            power_loss: None,
        }
    }

    /// Arms a power loss that strikes once `ops` more operations completed
    /// (0: now), keeping what `mode` says of unsynced writes. The caller
    /// runs on unaware; [`MemoryDisk::crash`] then restores the image the
    /// power loss left.
    pub fn lose_power_after(&mut self, ops: u64, mode: CrashMode) {
        self.power_loss = Some(PowerLoss {
            ops_left: ops,
            mode,
            image: None,
        });
        self.strike_if_due();
    }

    /// Whether an armed power loss struck.
    pub fn power_lost(&self) -> bool {
        self.power_loss
            .as_ref()
            .is_some_and(|loss| loss.image.is_some())
    }

    /// Disarms a power loss (struck or not): the disk is as the caller sees it.
    pub fn restore_power(&mut self) {
        self.power_loss = None;
    }

    /// One operation completed: an armed power loss counts it.
    fn operation_done(&mut self) {
        if let Some(loss) = &mut self.power_loss
            && loss.image.is_none()
            && loss.ops_left > 0
        {
            loss.ops_left -= 1;
        }
        self.strike_if_due();
    }

    fn strike_if_due(&mut self) {
        let storage = self.core.storage();
        if let Some(loss) = &mut self.power_loss
            && loss.image.is_none()
            && loss.ops_left == 0
        {
            let mut image = storage.clone();
            image.crash(loss.mode);
            loss.image = Some(image);
        }
    }

    /// Runs one WAL writer turn: an armed crash counts each storage call of
    /// it as an operation, and may strike between two of them.
    fn turn(&mut self, out: &mut Vec<Completion>) {
        let armed = self
            .power_loss
            .as_ref()
            .filter(|loss| loss.image.is_none())
            .map(|loss| (loss.ops_left, loss.mode));
        let Some((ops_left, mode)) = armed else {
            self.core.run_turn(out);
            return;
        };
        assert!(ops_left > 0, "a loss due now struck when it came due");
        self.core.storage_mut().arm_crash(ops_left, mode);
        self.core.run_turn(out);
        let outcome = self.core.storage_mut().disarm_crash();
        let loss = self.power_loss.as_mut().expect("armed above");
        match outcome.expect("armed above") {
            ArmedOutcome::Struck(image) => {
                loss.ops_left = 0;
                loss.image = Some(image);
            }
            ArmedOutcome::Pending(calls_left) => loss.ops_left = calls_left,
        }
        self.strike_if_due();
    }

    /// With `manual` on, a poll no longer runs the WAL writer: requests wait
    /// until [`MemoryDisk::run_turn`] (the simulator's fsync latency), or
    /// until a synchronous step waits for them. Off by default.
    pub fn set_manual_turns(&mut self, manual: bool) {
        self.manual_turns = manual;
    }

    /// Runs one WAL writer turn now; its completions come with the next poll.
    pub fn run_turn(&mut self) {
        let mut out = std::mem::take(&mut self.buffered);
        self.turn(&mut out);
        self.buffered = out;
    }

    /// Whether WAL requests wait for a turn.
    pub fn has_queued(&self) -> bool {
        self.core.queued_requests() > 0
    }

    /// Simulates a crash: queued WAL requests vanish, every file keeps what
    /// `mode` says of its unsynced writes, and the WAL core starts over (as a
    /// restarted process's would).
    pub fn crash(&mut self, mode: CrashMode) {
        let core = std::mem::replace(
            &mut self.core,
            WalCore::new(MemoryStorage::new(0), QUEUE_CAPACITY),
        );
        let mut storage = core.into_storage();
        match self.power_loss.take().and_then(|loss| loss.image) {
            Some(image) => storage = image,
            None => storage.crash(mode),
        }
        self.core = WalCore::new(storage, QUEUE_CAPACITY);
        self.buffered.clear();
    }

    /// The storage (to inspect files).
    pub fn storage(&self) -> &MemoryStorage {
        self.core.storage()
    }

    /// The storage, mutably (to inject faults: bit flips, cuts, failed writes).
    pub fn storage_mut(&mut self) -> &mut MemoryStorage {
        self.core.storage_mut()
    }

    /// Runs WAL turns until nothing is queued, keeping the completions for
    /// the next poll.
    fn drain_queue(&mut self) {
        while self.core.queued_requests() > 0 {
            self.run_turn();
        }
    }

    /// Runs `action` on `path` opened under the reserved id, then closes it.
    fn with_plain<T>(
        &mut self,
        path: &Path,
        mode: OpenMode,
        action: impl FnOnce(&mut MemoryStorage) -> io::Result<T>,
    ) -> io::Result<T> {
        let storage = self.core.storage_mut();
        storage.open(PLAIN_FILE, path, mode)?;
        let result = action(storage);
        storage.close(PLAIN_FILE);
        result
    }

    /// Runs one plain operation (counted by an armed power loss).
    fn operation<T>(
        &mut self,
        action: impl FnOnce(&mut MemoryDisk) -> io::Result<T>,
    ) -> io::Result<T> {
        let result = action(self);
        self.operation_done();
        result
    }

    fn is_file(&self, path: &Path) -> bool {
        self.storage().contents(path).is_some()
    }

    fn files_under(&self, dir: &Path) -> Vec<PathBuf> {
        self.storage()
            .paths()
            .into_iter()
            .filter(|path| path.starts_with(dir) && path != dir)
            .collect()
    }
}

/// The plain operations themselves (each one operation for a power loss).
impl MemoryDisk {
    fn write_at_now(&mut self, path: &Path, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.with_plain(path, OpenMode::CreateOrAppend, |storage| {
            storage.write_at(PLAIN_FILE, offset, &[bytes])?;
            storage.sync_data(PLAIN_FILE)
        })
    }

    fn set_len_now(&mut self, path: &Path, len: u64) -> io::Result<()> {
        self.with_plain(path, OpenMode::Append, |storage| {
            storage.set_len(PLAIN_FILE, len)
        })
    }

    fn remove_file_now(&mut self, path: &Path) -> io::Result<()> {
        if !self.is_file(path) {
            return Ok(());
        }
        self.storage_mut().remove(path)
    }

    fn remove_dir_all_now(&mut self, dir: &Path) -> io::Result<()> {
        for path in self.files_under(dir) {
            self.remove_file_now(&path)?;
        }
        Ok(())
    }

    fn rename_now(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        if self.is_file(from) {
            return self.with_plain(from, OpenMode::Append, |storage| {
                storage.rename(PLAIN_FILE, to)
            });
        }
        let files = self.files_under(from);
        if files.is_empty() {
            return Err(io::ErrorKind::NotFound.into());
        }
        if self.exists(to) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        for path in files {
            let relative = path
                .strip_prefix(from)
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            let target = to.join(relative);
            self.with_plain(&path, OpenMode::Append, |storage| {
                storage.rename(PLAIN_FILE, &target)
            })?;
        }
        Ok(())
    }

    fn hard_link_now(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        self.storage_mut().link(from, to)
    }
}

impl Disk for MemoryDisk {
    fn wal_open(&mut self, path: &Path, mode: OpenMode) -> Result<OpenedFile, WalError> {
        self.drain_queue();
        self.core.open(path, mode)
    }

    fn wal_submit(&mut self, request: Request) -> Result<(), WalError> {
        self.core.submit(request).map_err(|_| WalError::ShutDown)
    }

    fn wal_poll(&mut self, out: &mut Vec<Completion>) {
        out.append(&mut self.buffered);
        if !self.manual_turns {
            self.turn(out);
        }
    }

    fn wal_wait(&mut self, out: &mut Vec<Completion>) -> Result<(), WaitError> {
        let before = out.len();
        out.append(&mut self.buffered);
        self.turn(out);
        while out.len() == before && self.core.queued_requests() > 0 {
            self.turn(out);
        }
        if out.len() == before {
            return Err(WaitError::NothingOutstanding);
        }
        Ok(())
    }

    fn read_file(&mut self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        self.storage_mut().take_read_fault(path)?;
        Ok(self.storage().contents(path).map(<[u8]>::to_vec))
    }

    fn read_at(&mut self, path: &Path, offset: u64, len: usize) -> io::Result<Bytes> {
        self.storage_mut().take_read_fault(path)?;
        let contents = self
            .storage()
            .contents(path)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let end = start.checked_add(len).ok_or(io::ErrorKind::UnexpectedEof)?;
        let slice = contents
            .get(start..end)
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        Ok(Bytes::copy_from_slice(slice))
    }

    fn file_len(&mut self, path: &Path) -> io::Result<Option<u64>> {
        Ok(self
            .storage()
            .contents(path)
            .map(|contents| contents.len() as u64))
    }

    fn write_at(&mut self, path: &Path, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.operation(|disk| disk.write_at_now(path, offset, bytes))
    }

    fn set_len(&mut self, path: &Path, len: u64) -> io::Result<()> {
        self.operation(|disk| disk.set_len_now(path, len))
    }

    /// Syncs every write the file holds, whoever made it: a process crash
    /// leaves its writes unsynced, and the WAL, which counts a file's bytes
    /// at open as durable, would never sync them.
    fn sync_file(&mut self, path: &Path) -> io::Result<()> {
        self.operation(|disk| {
            disk.with_plain(path, OpenMode::Append, |storage| {
                storage.sync_data(PLAIN_FILE)
            })
        })
    }

    fn list_dir(&mut self, dir: &Path) -> io::Result<Vec<String>> {
        Ok(self.storage().list_dir(dir))
    }

    fn create_dir_all(&mut self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn remove_file(&mut self, path: &Path) -> io::Result<()> {
        self.operation(|disk| disk.remove_file_now(path))
    }

    fn remove_dir_all(&mut self, dir: &Path) -> io::Result<()> {
        self.operation(|disk| disk.remove_dir_all_now(dir))
    }

    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        self.operation(|disk| disk.rename_now(from, to))
    }

    fn hard_link(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        self.operation(|disk| disk.hard_link_now(from, to))
    }

    fn link_count(&mut self, path: &Path) -> io::Result<u64> {
        self.storage().link_count(path)
    }

    fn exists(&mut self, path: &Path) -> bool {
        self.is_file(path) || !self.files_under(path).is_empty()
    }
}
