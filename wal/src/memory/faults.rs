//! Injected faults: flipped bits, misdirected and cut writes, and failed
//! writes, syncs and reads armed to strike once.

use std::io;
use std::path::Path;

use super::file::overwrite;
use super::{MemoryStorage, errno};

impl MemoryStorage {
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

    /// Fault: the next read of `path` (through [`Storage::read_all`](crate::Storage::read_all) or
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
}
