//! [`DiskStorage`]: real files through std — `pwrite` + `fdatasync`.
//!
//! The fallback backend where io_uring cannot be set up, and the engine under
//! [`crate::UringStorage`] for everything but batched writes and syncs.
//!
//! A file's descriptor may be released while the file stays open
//! ([`Storage::release_descriptor`]); the next operation on it reopens its
//! path and checks that it is still the same file (device and inode), so a
//! path that now names another file fails the operation instead of writing
//! into the wrong one.
//!
//! Shared syncs (the bare syncs of many files at once) run as one `syncfs`
//! per file system, while the kernel reports its errors and none has failed
//! (see `syncfs`).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::request::{FileId, OpenMode};
use crate::storage::{FileBatch, IoObserver, Storage, execute_sequential, shared_sync_succeeded};
use crate::syncfs;

/// Writes are gathered into one buffer up to this size before a `pwrite`, so
/// small frames cost one syscall per batch rather than two per frame.
const COALESCE_BYTES_MAX: usize = 1 << 20;

/// Real files, driven with plain blocking syscalls.
#[derive(Debug)]
pub struct DiskStorage {
    files: BTreeMap<FileId, DiskFile>,
    /// Reused buffer for coalescing small parts into one `pwrite`.
    scratch: Vec<u8>,
    /// Whether shared syncs go through `syncfs` (see `syncfs`): the kernel
    /// reports its errors, and none has failed yet.
    syncfs_trusted: bool,
}

impl Default for DiskStorage {
    fn default() -> DiskStorage {
        DiskStorage {
            files: BTreeMap::new(),
            scratch: Vec::new(),
            syncfs_trusted: syncfs::kernel_reports_syncfs_errors(),
        }
    }
}

#[derive(Debug)]
struct DiskFile {
    /// `None` while the descriptor is released; reopened on the next use.
    handle: Option<File>,
    path: PathBuf,
    /// Device and inode at open: what a reopen of `path` must find.
    identity: (u64, u64),
    /// Written past the page cache: the descriptor is opened `O_DIRECT`.
    direct: bool,
}

impl DiskFile {
    /// The descriptor, reopening the path if it was released.
    fn handle(&mut self) -> io::Result<&File> {
        if self.handle.is_none() {
            let mut options = OpenOptions::new();
            options.read(true).write(true);
            if self.direct {
                options.custom_flags(libc::O_DIRECT);
            }
            let handle = options.open(&self.path)?;
            if identity_of(&handle)? != self.identity {
                // The path now names another file (moved or replaced).
                return Err(io::Error::from_raw_os_error(libc::ESTALE));
            }
            self.handle = Some(handle);
        }
        Ok(self.handle.as_ref().expect("just opened"))
    }
}

fn identity_of(handle: &File) -> io::Result<(u64, u64)> {
    let metadata = handle.metadata()?;
    Ok((metadata.dev(), metadata.ino()))
}

impl DiskStorage {
    /// An empty backend with no open files.
    pub fn new() -> DiskStorage {
        DiskStorage::default()
    }

    /// The raw descriptor of an open file (for the io_uring backend),
    /// reopened if it was released.
    /// Writes `file` past the page cache from now on (`O_DIRECT`), or through
    /// it again: the descriptor is reopened with the new flags on its next use.
    /// Fails where the file system refuses `O_DIRECT` (the file stays as it was).
    pub(crate) fn set_direct(&mut self, file: FileId, direct: bool) -> io::Result<()> {
        let entry = self.files.get_mut(&file).ok_or_else(unknown_file)?;
        if entry.direct == direct {
            return Ok(());
        }
        let held = entry.handle.take();
        entry.direct = direct;
        if let Err(error) = entry.handle() {
            entry.direct = !direct;
            entry.handle = held;
            return Err(error);
        }
        Ok(())
    }

    /// Reads up to `buffer.len()` bytes at `offset`, fewer only at the end of
    /// the file; returns how many.
    pub(crate) fn read_at_most(
        &mut self,
        file: FileId,
        offset: u64,
        buffer: &mut [u8],
    ) -> io::Result<usize> {
        let handle = self.handle(file)?;
        let mut done = 0;
        while done < buffer.len() {
            match handle.read_at(&mut buffer[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(read) => done += read,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(done)
    }

    /// Writes `bytes` at `offset` as they are (a direct write's whole blocks).
    pub(crate) fn write_whole(
        &mut self,
        file: FileId,
        offset: u64,
        bytes: &[u8],
    ) -> io::Result<()> {
        self.handle(file)?.write_all_at(bytes, offset)
    }

    pub(crate) fn raw_fd(&mut self, file: FileId) -> io::Result<RawFd> {
        Ok(self.handle(file)?.as_raw_fd())
    }

    fn handle(&mut self, file: FileId) -> io::Result<&File> {
        self.files.get_mut(&file).ok_or_else(unknown_file)?.handle()
    }

    /// One descriptor (a duplicate, so it outlives a release) per file system
    /// holding one of `files`: what a shared sync of them calls `syncfs` on.
    pub(crate) fn filesystems_of(
        &mut self,
        files: impl Iterator<Item = FileId>,
    ) -> io::Result<Vec<File>> {
        let mut filesystems = BTreeMap::new();
        for file in files {
            let entry = self.files.get_mut(&file).ok_or_else(unknown_file)?;
            if let std::collections::btree_map::Entry::Vacant(slot) =
                filesystems.entry(entry.identity.0)
            {
                slot.insert(entry.handle()?.try_clone()?);
            }
        }
        Ok(filesystems.into_values().collect())
    }

    /// Fills in a shared sync's outcomes from the `syncfs` result: all synced,
    /// or (after a failure, which also ends the use of `syncfs`) each file
    /// synced on its own, so that each learns its own fate.
    pub(crate) fn settle_shared_sync(
        &mut self,
        batches: &mut [FileBatch],
        result: io::Result<Duration>,
        observer: &dyn IoObserver,
    ) {
        match result {
            Ok(latency) => shared_sync_succeeded(batches, latency, observer),
            Err(error) => {
                tracing::warn!(%error, files = batches.len(),
                    "wal: syncfs failed; syncing each file on its own from now on");
                self.syncfs_trusted = false;
                for batch in batches.iter_mut() {
                    execute_sequential(self, batch, observer);
                }
            }
        }
    }

    /// Writes `parts` from `offset`, coalescing small ones into `scratch`.
    fn write_parts(&mut self, file: FileId, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        let mut next = offset;
        for part in parts {
            if self.scratch.len() + part.len() > COALESCE_BYTES_MAX {
                next = self.flush_scratch(file, next)?;
            }
            if part.len() >= COALESCE_BYTES_MAX {
                self.handle(file)?.write_all_at(part, next)?;
                next += part.len() as u64;
            } else {
                self.scratch.extend_from_slice(part);
            }
        }
        let end = self.flush_scratch(file, next)?;
        assert_eq!(
            end - offset,
            parts.iter().map(|p| p.len() as u64).sum::<u64>()
        );
        Ok(())
    }

    /// Flushes the coalescing buffer at `offset`, returning the next offset.
    fn flush_scratch(&mut self, file: FileId, offset: u64) -> io::Result<u64> {
        if self.scratch.is_empty() {
            return Ok(offset);
        }
        let handle = self
            .files
            .get_mut(&file)
            .ok_or_else(unknown_file)?
            .handle()?;
        handle.write_all_at(&self.scratch, offset)?;
        let next = offset + self.scratch.len() as u64;
        self.scratch.clear();
        Ok(next)
    }
}

impl Storage for DiskStorage {
    fn open(&mut self, file: FileId, path: &Path, mode: OpenMode) -> io::Result<u64> {
        assert!(!self.files.contains_key(&file), "{file} opened twice");
        let (handle, created) = open_path(path, mode)?;
        if created {
            sync_parent_dir(path)?;
        }
        if mode == OpenMode::Truncate && !created {
            handle.set_len(0)?;
            handle.sync_data()?;
        }
        let len = handle.metadata()?.len();
        let identity = identity_of(&handle)?;
        let path = path.to_path_buf();
        let handle = Some(handle);
        self.files.insert(
            file,
            DiskFile {
                handle,
                path,
                identity,
                direct: false,
            },
        );
        Ok(len)
    }

    fn read_all(&mut self, file: FileId) -> io::Result<Vec<u8>> {
        let entry = self.files.get_mut(&file).ok_or_else(unknown_file)?;
        if entry.direct {
            // A direct descriptor reads only into aligned memory: read through
            // the cache instead (the kernel keeps the two coherent).
            return std::fs::read(&entry.path);
        }
        let mut handle = self.handle(file)?;
        let mut bytes = Vec::new();
        handle.seek(SeekFrom::Start(0))?;
        handle.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    fn write_at(&mut self, file: FileId, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        assert!(self.scratch.is_empty());
        let result = self.write_parts(file, offset, parts);
        self.scratch.clear();
        result
    }

    fn sync_data(&mut self, file: FileId) -> io::Result<()> {
        self.handle(file)?.sync_data()
    }

    fn set_len(&mut self, file: FileId, len: u64) -> io::Result<()> {
        let handle = self.handle(file)?;
        handle.set_len(len)?;
        handle.sync_data()
    }

    fn rename(&mut self, file: FileId, to: &Path) -> io::Result<()> {
        let entry = self.files.get_mut(&file).ok_or_else(unknown_file)?;
        std::fs::rename(&entry.path, to)?;
        let from = std::mem::replace(&mut entry.path, to.to_path_buf());
        sync_parent_dir(to)?;
        if parent_dir(&from) != parent_dir(to) {
            sync_parent_dir(&from)?;
        }
        Ok(())
    }

    fn close(&mut self, file: FileId) {
        self.files.remove(&file);
    }

    fn release_descriptor(&mut self, file: FileId) {
        if let Some(entry) = self.files.get_mut(&file) {
            entry.handle = None;
        }
    }

    fn shares_syncs(&self) -> bool {
        self.syncfs_trusted
    }

    fn execute_shared_sync(&mut self, batches: &mut [FileBatch], observer: &dyn IoObserver) {
        if !self.syncfs_trusted {
            for batch in batches.iter_mut() {
                execute_sequential(self, batch, observer);
            }
            return;
        }
        let started = Instant::now();
        let result = self
            .filesystems_of(batches.iter().map(|batch| batch.file))
            .and_then(|filesystems| syncfs::sync_filesystems(&filesystems))
            .map(|()| started.elapsed());
        self.settle_shared_sync(batches, result, observer);
    }
}

/// Opens `path` per `mode`; returns the handle and whether it was created.
fn open_path(path: &Path, mode: OpenMode) -> io::Result<(File, bool)> {
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    match mode {
        OpenMode::CreateNew => Ok((options.create_new(true).open(path)?, true)),
        OpenMode::Append | OpenMode::AppendDamaged => Ok((options.open(path)?, false)),
        OpenMode::Truncate | OpenMode::CreateOrAppend => {
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(path)
            {
                Ok(handle) => Ok((handle, true)),
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                    Ok((options.open(path)?, false))
                }
                Err(error) => Err(error),
            }
        }
    }
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Syncs the directory holding `path`, so a create or rename in it is durable.
pub(crate) fn sync_parent_dir(path: &Path) -> io::Result<()> {
    File::open(parent_dir(path))?.sync_all()
}

fn unknown_file() -> io::Error {
    io::Error::from_raw_os_error(libc::EBADF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{BatchOutcome, IoEvent};
    use std::sync::Mutex;

    #[derive(Default)]
    struct Events(Mutex<Vec<IoEvent>>);

    impl IoObserver for Events {
        fn on_event(&self, event: IoEvent) {
            self.0.lock().expect("events").push(event);
        }
    }

    #[test]
    fn a_failed_syncfs_syncs_each_file_on_its_own_and_is_not_trusted_again() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut storage = DiskStorage::new();
        storage.syncfs_trusted = true;
        let mut batches: Vec<FileBatch> = (0..3)
            .map(|index| {
                let file = FileId(index);
                let path = dir.path().join(format!("f{index}"));
                storage.open(file, &path, OpenMode::CreateNew).expect("new");
                storage.write_at(file, 0, &[b"data"]).expect("write");
                FileBatch {
                    id: index,
                    file,
                    offset: 4,
                    frames: Vec::new(),
                    sync: true,
                    outcome: None,
                }
            })
            .collect();
        let events = Events::default();
        let failure = io::Error::from_raw_os_error(libc::EIO);
        storage.settle_shared_sync(&mut batches, Err(failure), &events);
        assert!(
            !storage.shares_syncs(),
            "one failure ends the use of syncfs"
        );
        for batch in &batches {
            assert!(
                matches!(batch.outcome, Some(BatchOutcome::Done { synced: true, .. })),
                "each file's own fdatasync decides: {batch:?}"
            );
        }
        let synced = events
            .0
            .lock()
            .expect("events")
            .iter()
            .filter(|event| matches!(event, IoEvent::Synced { .. }))
            .count();
        assert_eq!(synced, 3);
    }
}
