//! [`FileDisk`]: real files. WAL requests go to the node's threaded
//! [`Wal`]; plain operations are std calls on the caller's thread.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use bytes::Bytes;
use strand_wal::{
    Completion, CompletionKind, CompletionSink, FileId, OpenMode, OpenedFile, Request, Wal,
    WalError,
};

use super::{Disk, ReadHandles, WaitError};
use crate::layout::parent_dir;

/// How long [`Disk::wal_wait`] waits for one completion before giving up. A
/// guard against a dead writer, not a timing assumption: an fdatasync takes
/// milliseconds.
const WAIT_GUARD: Duration = Duration::from_secs(120);

/// Most read handles a disk made with [`FileDisk::new`] keeps open (a
/// node's partitions share one [`ReadHandles`] instead, see
/// [`FileDisk::with_read_handles`]).
const READ_HANDLES_MAX: usize = 64;

/// Real files: the WAL for appends, std for everything else.
///
/// One per partition: the partition's WAL completions arrive on its own
/// channel, so partitions sharing the node's [`Wal`] never see each other's.
pub struct FileDisk {
    wal: Wal,
    sink: Arc<dyn CompletionSink>,
    receiver: Receiver<Completion>,
    read_handles: ReadHandles,
    open_files: BTreeSet<FileId>,
}

impl FileDisk {
    /// A disk whose appends go through `wal` (a clone of the node's writer).
    pub fn new(wal: Wal) -> FileDisk {
        let (sender, receiver): (Sender<Completion>, Receiver<Completion>) = mpsc::channel();
        FileDisk {
            wal,
            sink: Arc::new(sender),
            receiver,
            read_handles: ReadHandles::new(READ_HANDLES_MAX),
            open_files: BTreeSet::new(),
        }
    }

    /// Like [`FileDisk::new`], and `notify` runs after each completion is
    /// queued: an owner that sleeps on its own inbox (a group's actor) is
    /// woken to call [`Disk::wal_poll`] instead of polling on a timer.
    pub fn with_notify(wal: Wal, notify: impl Fn() + Send + Sync + 'static) -> FileDisk {
        let (sender, receiver): (Sender<Completion>, Receiver<Completion>) = mpsc::channel();
        let sink = move |completion: Completion| {
            // A dropped receiver means the owner no longer listens.
            if sender.send(completion).is_ok() {
                notify();
            }
        };
        FileDisk {
            wal,
            sink: Arc::new(sink),
            receiver,
            read_handles: ReadHandles::new(READ_HANDLES_MAX),
            open_files: BTreeSet::new(),
        }
    }

    /// Reads through `handles` (shared by the node's partitions, so that
    /// their read descriptors stay under one bound) instead of a cache of
    /// its own.
    pub fn with_read_handles(mut self, handles: ReadHandles) -> FileDisk {
        self.read_handles = handles;
        self
    }

    /// The WAL writer this disk submits to.
    pub fn wal(&self) -> &Wal {
        &self.wal
    }

    fn forget_closed(&mut self, completions: &[Completion]) {
        for completion in completions {
            if completion.kind == CompletionKind::Closed {
                self.open_files.remove(&completion.file);
            }
        }
    }

    fn forget_handles_under(&mut self, path: &Path) {
        self.read_handles.forget_under(path);
    }
}

impl Disk for FileDisk {
    fn wal_open(&mut self, path: &Path, mode: OpenMode) -> Result<OpenedFile, WalError> {
        let opened = self.wal.open(path, mode, Arc::clone(&self.sink))?;
        self.open_files.insert(opened.file);
        Ok(opened)
    }

    fn wal_submit(&mut self, request: Request) -> Result<(), WalError> {
        self.wal.submit(request)
    }

    fn wal_poll(&mut self, out: &mut Vec<Completion>) {
        let first = out.len();
        out.extend(self.receiver.try_iter());
        self.forget_closed(&out[first..]);
    }

    fn wal_wait(&mut self, out: &mut Vec<Completion>) -> Result<(), WaitError> {
        match self.receiver.recv_timeout(WAIT_GUARD) {
            Ok(completion) => {
                self.forget_closed(std::slice::from_ref(&completion));
                out.push(completion);
                self.wal_poll(out);
                Ok(())
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                Err(WaitError::TimedOut {
                    seconds: WAIT_GUARD.as_secs(),
                })
            }
        }
    }

    fn read_file(&mut self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        match fs::read(path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn read_at(&mut self, path: &Path, offset: u64, len: usize) -> io::Result<Bytes> {
        let mut buffer = vec![0u8; len];
        self.read_handles
            .get(path)?
            .read_exact_at(&mut buffer, offset)?;
        Ok(Bytes::from(buffer))
    }

    fn file_len(&mut self, path: &Path) -> io::Result<Option<u64>> {
        match fs::metadata(path) {
            Ok(metadata) => Ok(Some(metadata.len())),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn write_at(&mut self, path: &Path, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let existed = path.exists();
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        file.write_all_at(bytes, offset)?;
        file.sync_data()?;
        if !existed {
            sync_dir(&parent_dir(path))?;
        }
        Ok(())
    }

    fn set_len(&mut self, path: &Path, len: u64) -> io::Result<()> {
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(len)?;
        file.sync_data()
    }

    fn sync_file(&mut self, path: &Path) -> io::Result<()> {
        // fdatasync through a descriptor of its own: the file's writeback
        // errors are the inode's, reported to any descriptor that has not
        // seen them.
        File::open(path)?.sync_data()
    }

    fn list_dir(&mut self, dir: &Path) -> io::Result<Vec<String>> {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let mut names = Vec::new();
        for entry in entries {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn create_dir_all(&mut self, dir: &Path) -> io::Result<()> {
        let mut missing = Vec::new();
        let mut current = dir;
        while !current.exists() {
            missing.push(current.to_path_buf());
            match current.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => current = parent,
                _ => break,
            }
        }
        fs::create_dir_all(dir)?;
        // Sync each new level's parent so the whole chain survives a crash.
        for created in missing.iter().rev() {
            sync_dir(&parent_dir(created))?;
        }
        Ok(())
    }

    fn remove_file(&mut self, path: &Path) -> io::Result<()> {
        self.forget_handles_under(path);
        match fs::remove_file(path) {
            Ok(()) => sync_dir(&parent_dir(path)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error),
        }
    }

    fn remove_dir_all(&mut self, dir: &Path) -> io::Result<()> {
        self.forget_handles_under(dir);
        match fs::remove_dir_all(dir) {
            Ok(()) => sync_dir(&parent_dir(dir)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error),
        }
    }

    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        self.forget_handles_under(from);
        self.forget_handles_under(to);
        fs::rename(from, to)?;
        sync_dir(&parent_dir(to))?;
        if parent_dir(from) != parent_dir(to) {
            sync_dir(&parent_dir(from))?;
        }
        Ok(())
    }

    fn hard_link(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)?;
        sync_dir(&parent_dir(to))
    }

    fn link_count(&mut self, path: &Path) -> io::Result<u64> {
        Ok(fs::metadata(path)?.nlink())
    }

    fn exists(&mut self, path: &Path) -> bool {
        path.exists()
    }
}

impl Drop for FileDisk {
    /// Closes (and so syncs) every WAL file still open and waits until the
    /// writer has done it: writes still queued land before the drop returns,
    /// so a partition reopened next never races its predecessor's writes.
    fn drop(&mut self) {
        let mut closing = BTreeSet::new();
        for &file in &self.open_files {
            match self.wal.submit(Request::Close { file, user_data: 0 }) {
                Ok(()) => {
                    closing.insert(file);
                }
                Err(error) => {
                    tracing::warn!(%error, "partition: could not close a WAL file on drop")
                }
            }
        }
        while !closing.is_empty() {
            match self.receiver.recv_timeout(WAIT_GUARD) {
                Ok(completion) if completion.kind == CompletionKind::Closed => {
                    closing.remove(&completion.file);
                }
                Ok(_) => {}
                Err(_) => {
                    tracing::error!("partition: the WAL did not close files on drop");
                    return;
                }
            }
        }
    }
}

/// Syncs a directory so the entries created, removed or renamed in it survive a crash.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
