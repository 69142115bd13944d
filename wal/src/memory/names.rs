//! Names and inodes: paths naming inodes, hard links, removal (an inode
//! goes with its last name and handle), implicit directories.

use std::io;
use std::path::Path;

use crate::request::FileId;

use super::{MemoryFile, MemoryStorage, errno};

impl MemoryStorage {
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
    pub(super) fn free_if_unreferenced(&mut self, inode: u64) {
        let named = self.names.values().any(|&named| named == inode);
        let held = self.handles.values().any(|handle| handle.inode == inode);
        if !named && !held {
            self.inodes.remove(&inode);
        }
    }

    pub(super) fn create(&mut self, path: &Path) -> u64 {
        let inode = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(inode, MemoryFile::default());
        self.names.insert(path.to_path_buf(), inode);
        inode
    }

    pub(super) fn file_at(&self, path: &Path) -> Option<&MemoryFile> {
        self.inodes.get(self.names.get(path)?)
    }

    pub(super) fn file_at_mut(&mut self, path: &Path) -> io::Result<&mut MemoryFile> {
        let inode = *self.names.get(path).ok_or_else(|| errno(libc::ENOENT))?;
        Ok(self
            .inodes
            .get_mut(&inode)
            .expect("every name points at an inode"))
    }

    pub(super) fn handle_file(&mut self, file: FileId) -> io::Result<&mut MemoryFile> {
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
}
