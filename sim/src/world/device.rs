//! A replica's disk as the simulated machine holds it: the world keeps one
//! handle ([`Device`]) to arm faults, run WAL turns and crash it, and the
//! group's host owns another through the partition's [`Disk`] trait. The
//! world never reaches the disk through the host, as a real machine's
//! failing hardware does not ask the process that uses it.

use std::cell::{Ref, RefCell, RefMut};
use std::io;
use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;
use strand_partition::{Disk, MemoryDisk, WaitError};
use strand_wal::{Completion, OpenMode, OpenedFile, Request, WalError};

/// One in-memory disk shared by the world and the host running on it.
#[derive(Clone)]
pub struct Device(Rc<RefCell<MemoryDisk>>);

impl Device {
    /// A device over `disk`.
    pub fn new(disk: MemoryDisk) -> Device {
        Device(Rc::new(RefCell::new(disk)))
    }

    /// The disk, to look at.
    pub fn get(&self) -> Ref<'_, MemoryDisk> {
        self.0.borrow()
    }

    /// The disk back from a host that let go of it (closed or abandoned),
    /// once the world dropped its own handle.
    pub fn into_disk(self) -> MemoryDisk {
        Rc::try_unwrap(self.0)
            .ok()
            .expect("only one holder is left of a stopped replica's disk")
            .into_inner()
    }

    /// The disk, to arm, run or crash (never while the host is inside a
    /// call of its own: the world acts between inputs).
    pub fn get_mut(&self) -> RefMut<'_, MemoryDisk> {
        self.0.borrow_mut()
    }
}

impl Disk for Device {
    fn wal_open(&mut self, path: &Path, mode: OpenMode) -> Result<OpenedFile, WalError> {
        self.get_mut().wal_open(path, mode)
    }

    fn wal_submit(&mut self, request: Request) -> Result<(), WalError> {
        self.get_mut().wal_submit(request)
    }

    fn wal_poll(&mut self, out: &mut Vec<Completion>) {
        self.get_mut().wal_poll(out);
    }

    fn wal_wait(&mut self, out: &mut Vec<Completion>) -> Result<(), WaitError> {
        self.get_mut().wal_wait(out)
    }

    fn read_file(&mut self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        self.get_mut().read_file(path)
    }

    fn read_at(&mut self, path: &Path, offset: u64, len: usize) -> io::Result<Bytes> {
        self.get_mut().read_at(path, offset, len)
    }

    fn file_len(&mut self, path: &Path) -> io::Result<Option<u64>> {
        self.get_mut().file_len(path)
    }

    fn write_at(&mut self, path: &Path, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.get_mut().write_at(path, offset, bytes)
    }

    fn set_len(&mut self, path: &Path, len: u64) -> io::Result<()> {
        self.get_mut().set_len(path, len)
    }

    fn sync_file(&mut self, path: &Path) -> io::Result<()> {
        self.get_mut().sync_file(path)
    }

    fn list_dir(&mut self, dir: &Path) -> io::Result<Vec<String>> {
        self.get_mut().list_dir(dir)
    }

    fn create_dir_all(&mut self, dir: &Path) -> io::Result<()> {
        self.get_mut().create_dir_all(dir)
    }

    fn remove_file(&mut self, path: &Path) -> io::Result<()> {
        self.get_mut().remove_file(path)
    }

    fn remove_dir_all(&mut self, dir: &Path) -> io::Result<()> {
        self.get_mut().remove_dir_all(dir)
    }

    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        self.get_mut().rename(from, to)
    }

    fn hard_link(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        self.get_mut().hard_link(from, to)
    }

    fn link_count(&mut self, path: &Path) -> io::Result<u64> {
        self.get_mut().link_count(path)
    }

    fn exists(&mut self, path: &Path) -> bool {
        self.get_mut().exists(path)
    }
}
