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

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use crate::request::{FileId, OpenMode};
use crate::storage::Storage;

/// Writes are gathered into one buffer up to this size before a `pwrite`, so
/// small frames cost one syscall per batch rather than two per frame.
const COALESCE_BYTES_MAX: usize = 1 << 20;

/// Real files, driven with plain blocking syscalls.
#[derive(Debug, Default)]
pub struct DiskStorage {
    files: BTreeMap<FileId, DiskFile>,
    /// Reused buffer for coalescing small parts into one `pwrite`.
    scratch: Vec<u8>,
}

#[derive(Debug)]
struct DiskFile {
    /// `None` while the descriptor is released; reopened on the next use.
    handle: Option<File>,
    path: PathBuf,
    /// Device and inode at open: what a reopen of `path` must find.
    identity: (u64, u64),
}

impl DiskFile {
    /// The descriptor, reopening the path if it was released.
    fn handle(&mut self) -> io::Result<&File> {
        if self.handle.is_none() {
            let handle = OpenOptions::new().read(true).write(true).open(&self.path)?;
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
    pub(crate) fn raw_fd(&mut self, file: FileId) -> io::Result<RawFd> {
        Ok(self.handle(file)?.as_raw_fd())
    }

    fn handle(&mut self, file: FileId) -> io::Result<&File> {
        self.files.get_mut(&file).ok_or_else(unknown_file)?.handle()
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
            },
        );
        Ok(len)
    }

    fn read_all(&mut self, file: FileId) -> io::Result<Vec<u8>> {
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
