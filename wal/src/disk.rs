//! [`DiskStorage`]: real files through std — `pwrite` + `fdatasync`.
//!
//! The fallback backend where io_uring cannot be set up, and the engine under
//! [`crate::UringStorage`] for everything but batched writes and syncs.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
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
    handle: File,
    path: PathBuf,
}

impl DiskStorage {
    /// An empty backend with no open files.
    pub fn new() -> DiskStorage {
        DiskStorage::default()
    }

    /// The raw descriptor of an open file (for the io_uring backend).
    pub(crate) fn raw_fd(&self, file: FileId) -> io::Result<RawFd> {
        Ok(self.get(file)?.handle.as_raw_fd())
    }

    fn get(&self, file: FileId) -> io::Result<&DiskFile> {
        self.files.get(&file).ok_or_else(unknown_file)
    }

    /// Writes `parts` from `offset`, coalescing small ones into `scratch`.
    fn write_parts(&mut self, file: FileId, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        let mut next = offset;
        for part in parts {
            if self.scratch.len() + part.len() > COALESCE_BYTES_MAX {
                next = self.flush_scratch(file, next)?;
            }
            if part.len() >= COALESCE_BYTES_MAX {
                self.get(file)?.handle.write_all_at(part, next)?;
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
        let handle = &self.files.get(&file).ok_or_else(unknown_file)?.handle;
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
        let path = path.to_path_buf();
        self.files.insert(file, DiskFile { handle, path });
        Ok(len)
    }

    fn read_all(&mut self, file: FileId) -> io::Result<Vec<u8>> {
        let mut handle = &self.get(file)?.handle;
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
        self.get(file)?.handle.sync_data()
    }

    fn set_len(&mut self, file: FileId, len: u64) -> io::Result<()> {
        let handle = &self.get(file)?.handle;
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
