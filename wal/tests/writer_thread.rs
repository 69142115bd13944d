//! The threaded writer over instrumented and in-memory backends: the order of
//! fsyncs and acks as the storage itself saw it, the queue bound, and typed
//! errors reaching the callers of the affected file only.

mod common;

use std::io;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use common::{Collector, payload};
use strand_wal::{
    BackendChoice, BackendKind, Completion, CompletionKind, DiskStorage, FileBatch, FileId,
    IoObserver, MemoryStorage, OpenMode, Request, Storage, TrySubmitError, Wal, WalConfig,
    WalError,
};

/// What the storage saw, in order, next to what the callers were told.
#[derive(Debug, Clone)]
enum Seen {
    /// `sync_data` returned Ok; every byte written to the file before it is durable.
    SyncReturned {
        file: FileId,
        written_end: u64,
    },
    Ack(Completion),
}

/// Wraps a storage and records every successful sync with the written end it
/// covers. It knows nothing of the WAL's bookkeeping: it only counts bytes.
struct Recording<S> {
    inner: S,
    written_end: std::collections::BTreeMap<FileId, u64>,
    log: Arc<Mutex<Vec<Seen>>>,
}

impl<S: Storage> Storage for Recording<S> {
    fn open(&mut self, file: FileId, path: &Path, mode: OpenMode) -> io::Result<u64> {
        let len = self.inner.open(file, path, mode)?;
        self.written_end.insert(file, len);
        Ok(len)
    }
    fn read_all(&mut self, file: FileId) -> io::Result<Vec<u8>> {
        self.inner.read_all(file)
    }
    fn write_at(&mut self, file: FileId, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        self.inner.write_at(file, offset, parts)?;
        let end = offset + parts.iter().map(|part| part.len() as u64).sum::<u64>();
        let known = self.written_end.entry(file).or_default();
        *known = (*known).max(end);
        Ok(())
    }
    fn sync_data(&mut self, file: FileId) -> io::Result<()> {
        self.inner.sync_data(file)?;
        let written_end = self.written_end.get(&file).copied().unwrap_or(0);
        self.log
            .lock()
            .expect("log")
            .push(Seen::SyncReturned { file, written_end });
        Ok(())
    }
    fn set_len(&mut self, file: FileId, len: u64) -> io::Result<()> {
        self.inner.set_len(file, len)?;
        self.written_end.insert(file, len);
        Ok(())
    }
    fn rename(&mut self, file: FileId, to: &Path) -> io::Result<()> {
        self.inner.rename(file, to)
    }
    fn close(&mut self, file: FileId) {
        self.inner.close(file)
    }
    fn release_descriptor(&mut self, file: FileId) {
        self.inner.release_descriptor(file)
    }
}

#[test]
fn durable_acks_follow_the_sync_the_storage_itself_saw_return() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let recording = Recording {
        inner: DiskStorage::new(),
        written_end: Default::default(),
        log: log.clone(),
    };
    let wal = Wal::start(WalConfig {
        backend: BackendChoice::Storage(Box::new(recording)),
        ..WalConfig::default()
    })
    .expect("started");
    assert_eq!(wal.backend(), BackendKind::Custom);
    let dir = tempfile::tempdir().expect("temp dir");
    let sink_log = log.clone();
    let sink = Arc::new(move |completion: Completion| {
        sink_log.lock().expect("log").push(Seen::Ack(completion));
    });
    let files: Vec<FileId> = (0..3)
        .map(|index| {
            let path = dir.path().join(format!("f{index}.log"));
            wal.open(&path, OpenMode::CreateNew, sink.clone())
                .expect("new")
                .file
        })
        .collect();
    for sequence in 0..300u64 {
        let file = files[(sequence % 3) as usize];
        wal.append(file, payload(7, sequence), sequence)
            .expect("queued");
    }
    wal.shutdown().expect("clean shutdown");

    let mut synced_to = std::collections::BTreeMap::new();
    let mut acks = 0;
    for seen in log.lock().expect("log").iter() {
        match seen {
            Seen::SyncReturned { file, written_end } => {
                synced_to.insert(*file, *written_end);
            }
            Seen::Ack(completion) => {
                let end = completion.result.clone().expect("durable").end();
                let covered = synced_to.get(&completion.file).copied().unwrap_or(0);
                assert!(
                    end <= covered,
                    "ack to {end} before a sync covering it ({covered})"
                );
                acks += 1;
            }
        }
    }
    assert_eq!(acks, 300);
}

/// A storage whose group commits wait for the test's word, so the queue can be
/// filled deterministically while the writer is busy.
struct Gate {
    inner: MemoryStorage,
    entered: Sender<()>,
    release: Receiver<()>,
}

impl Storage for Gate {
    fn open(&mut self, file: FileId, path: &Path, mode: OpenMode) -> io::Result<u64> {
        self.inner.open(file, path, mode)
    }
    fn read_all(&mut self, file: FileId) -> io::Result<Vec<u8>> {
        self.inner.read_all(file)
    }
    fn write_at(&mut self, file: FileId, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        self.inner.write_at(file, offset, parts)
    }
    fn sync_data(&mut self, file: FileId) -> io::Result<()> {
        self.inner.sync_data(file)
    }
    fn set_len(&mut self, file: FileId, len: u64) -> io::Result<()> {
        self.inner.set_len(file, len)
    }
    fn rename(&mut self, file: FileId, to: &Path) -> io::Result<()> {
        self.inner.rename(file, to)
    }
    fn close(&mut self, file: FileId) {
        self.inner.close(file)
    }
    fn release_descriptor(&mut self, file: FileId) {
        self.inner.release_descriptor(file)
    }
    fn execute(&mut self, batches: &mut [FileBatch], observer: &dyn IoObserver) {
        let _ = self.entered.send(());
        let _ = self.release.recv();
        for batch in batches.iter_mut() {
            strand_wal::storage::execute_sequential(&mut self.inner, batch, observer);
        }
    }
}

#[test]
fn try_submit_answers_full_at_the_bound_and_blocking_submit_waits() {
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let gate = Gate {
        inner: MemoryStorage::new(1),
        entered: entered_tx,
        release: release_rx,
    };
    let wal = Wal::start(WalConfig {
        backend: BackendChoice::Storage(Box::new(gate)),
        queue_capacity: 2,
        ..WalConfig::default()
    })
    .expect("started");
    let collector = Collector::new();
    let file = wal
        .open("/mem/a.log", OpenMode::CreateNew, collector.sink.clone())
        .expect("new")
        .file;
    wal.append(file, payload(0, 0), 0).expect("queued");
    entered.recv().expect("the writer is inside a group commit");
    // The writer holds request 0; the queue takes exactly two more.
    wal.append(file, payload(0, 1), 1).expect("queued");
    wal.append(file, payload(0, 2), 2).expect("queued");
    let extra = Request::append(file, payload(0, 3), 3).expect("small");
    let refused = wal
        .try_submit(extra)
        .expect_err("the queue is at its bound");
    assert!(matches!(refused, TrySubmitError::Full(_)));
    release.send(()).expect("writer waits");
    release.send(()).expect("writer waits for the second turn");
    wal.submit(refused.into_request()).expect("room again");
    let _ = release.send(());
    let acks: Vec<u64> = collector.recv_n(4).iter().map(|c| c.user_data).collect();
    assert_eq!(acks, [0, 1, 2, 3]);
    drop(release);
    wal.shutdown().expect("clean shutdown");
}

#[test]
fn a_failed_fsync_reaches_only_the_callers_of_that_file_then_poisons_it() {
    let mut storage = MemoryStorage::new(5);
    for name in ["/mem/a.log", "/mem/b.log"] {
        storage
            .open(FileId(u64::MAX), Path::new(name), OpenMode::CreateNew)
            .expect("created");
        storage.close(FileId(u64::MAX));
    }
    storage
        .fail_next_sync(Path::new("/mem/a.log"), libc::EIO)
        .expect("exists");
    let wal = Wal::start(WalConfig {
        backend: BackendChoice::Storage(Box::new(storage)),
        ..WalConfig::default()
    })
    .expect("started");
    let (a_sink, b_sink) = (Collector::new(), Collector::new());
    let a = wal
        .open("/mem/a.log", OpenMode::Append, a_sink.sink.clone())
        .expect("a")
        .file;
    let b = wal
        .open("/mem/b.log", OpenMode::Append, b_sink.sink.clone())
        .expect("b")
        .file;
    wal.append(a, Bytes::from_static(b"lost"), 1)
        .expect("queued");
    wal.append(b, Bytes::from_static(b"kept"), 2)
        .expect("queued");
    assert_eq!(
        a_sink.recv().result,
        Err(WalError::SyncFailed {
            file: a,
            errno: libc::EIO
        })
    );
    assert!(b_sink.recv().result.is_ok());
    wal.append(a, Bytes::from_static(b"refused"), 3)
        .expect("queued");
    wal.append(b, Bytes::from_static(b"fine"), 4)
        .expect("queued");
    assert!(matches!(a_sink.recv().result, Err(WalError::Poisoned { file, .. }) if file == a));
    assert_eq!(b_sink.recv().kind, CompletionKind::Durable);
    wal.close(a, 5).expect("queued");
    assert!(
        a_sink.recv().result.is_ok(),
        "a poisoned file can still be closed"
    );
    wal.shutdown().expect("b syncs cleanly");
}

#[test]
fn requests_after_shutdown_are_refused() {
    let wal = Wal::start(WalConfig {
        backend: BackendChoice::Storage(Box::new(MemoryStorage::new(0))),
        ..WalConfig::default()
    })
    .expect("started");
    wal.shutdown().expect("clean");
    let collector = Collector::new();
    assert!(matches!(
        wal.open("/mem/x", OpenMode::CreateNew, collector.sink.clone()),
        Err(WalError::ShutDown)
    ));
    assert_eq!(wal.sync(FileId(1), 0), Err(WalError::ShutDown));
    assert_eq!(wal.shutdown(), Err(WalError::ShutDown));
}
