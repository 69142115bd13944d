//! [`Wal`]: the node's WAL writer — one thread, one bounded queue, one
//! [`WalCore`] over the chosen backend.
//!
//! The writer thread loops: block for the first message, take every message
//! already queued (at most the queue capacity), run them as one turn (one group
//! commit), deliver the completions to each file's sink, repeat. While a turn's
//! fsyncs run, new requests pile up in the queue and form the next turn: the
//! slower the disk, the bigger the groups.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::disk::DiskStorage;
use crate::engine::{SYNC_BYTES_MAX_DEFAULT, WalCore};
use crate::error::{WalError, errno_of};
use crate::metrics;
use crate::request::{
    Ack, Completion, CompletionKind, CompletionSink, FileId, OpenMode, OpenedFile, Request,
    TrySubmitError,
};
use crate::storage::{IoObserver, Storage};
use crate::uring::UringStorage;

/// Default bound of the request queue.
pub const QUEUE_CAPACITY_DEFAULT: usize = 4096;

/// Default [`WalConfig::gather_window`]: well under one fdatasync.
pub const GATHER_WINDOW_DEFAULT: Duration = Duration::from_micros(100);

/// Which backend the writer should use.
pub enum BackendChoice {
    /// io_uring where it can be set up, else the std fallback (logged once).
    Auto,
    /// io_uring or fail with [`WalError::UringUnavailable`].
    Uring,
    /// The std fallback: `pwrite` + `fdatasync` on the writer thread.
    Std,
    /// A caller-supplied backend (an in-memory disk, an instrumented wrapper).
    Storage(Box<dyn Storage + Send>),
}

impl std::fmt::Debug for BackendChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            BackendChoice::Auto => "Auto",
            BackendChoice::Uring => "Uring",
            BackendChoice::Std => "Std",
            BackendChoice::Storage(_) => "Storage(..)",
        };
        f.write_str(name)
    }
}

/// Which backend a started writer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// [`UringStorage`].
    Uring,
    /// [`DiskStorage`].
    Std,
    /// A caller-supplied [`Storage`].
    Custom,
}

/// How to start a [`Wal`].
pub struct WalConfig {
    /// The backend.
    pub backend: BackendChoice,
    /// Bound of the request queue: the most requests queued and not yet taken
    /// by the writer. At the bound, `try_submit` answers `Full` and the blocking
    /// calls wait. It also caps how many requests one turn takes.
    pub queue_capacity: usize,
    /// Sees every completed I/O on the writer thread (tests, tracing).
    pub observer: Option<Arc<dyn IoObserver>>,
    /// How long a turn may wait for more requests when fewer have arrived than
    /// the previous turn had (a commit delay that only applies under concurrent
    /// load). Zero disables it. Affects batching only, never correctness.
    pub gather_window: Duration,
    /// Per-file bytes per turn, and so per fdatasync (see
    /// [`WalCore::set_sync_bytes_max`]).
    pub sync_bytes_max: u64,
}

impl Default for WalConfig {
    fn default() -> WalConfig {
        WalConfig {
            backend: BackendChoice::Auto,
            queue_capacity: QUEUE_CAPACITY_DEFAULT,
            observer: None,
            gather_window: GATHER_WINDOW_DEFAULT,
            sync_bytes_max: SYNC_BYTES_MAX_DEFAULT,
        }
    }
}

/// A message to the writer thread.
enum Message {
    Request(Request),
    Open {
        path: PathBuf,
        mode: OpenMode,
        sink: Arc<dyn CompletionSink>,
        reply: SyncSender<Result<OpenedFile, WalError>>,
    },
    Shutdown {
        reply: SyncSender<Result<(), WalError>>,
    },
}

/// The node's WAL writer. Cheap to clone; every clone talks to the same thread.
///
/// The "queued" ack is the return of a submit; the "written" and "durable" acks
/// (and errors) arrive at the sink given to [`Wal::open`] for that file.
#[derive(Clone)]
pub struct Wal {
    inner: Arc<Inner>,
}

struct Inner {
    sender: SyncSender<Message>,
    writer: Mutex<Option<JoinHandle<()>>>,
    backend: BackendKind,
    queue_capacity: usize,
}

impl Wal {
    /// Chooses the backend and spawns the writer thread.
    pub fn start(config: WalConfig) -> Result<Wal, WalError> {
        assert!(
            config.queue_capacity > 0,
            "the queue needs room for one request"
        );
        let (storage, backend) = choose_backend(config.backend)?;
        let mut core = WalCore::new(storage, config.queue_capacity);
        if let Some(observer) = config.observer {
            core.set_observer(observer);
        }
        core.set_sync_bytes_max(config.sync_bytes_max);
        let (sender, receiver) = mpsc::sync_channel(config.queue_capacity);
        let capacity = config.queue_capacity;
        let writer = Writer {
            core,
            receiver,
            sinks: BTreeMap::new(),
            out: Vec::new(),
            turn_requests_max: capacity,
            gather_window: config.gather_window,
        };
        let writer = thread::Builder::new()
            .name("strand-wal".into())
            .spawn(move || writer.run())
            .map_err(|error| WalError::Spawn {
                errno: errno_of(&error),
            })?;
        let inner = Inner {
            sender,
            writer: Mutex::new(Some(writer)),
            backend,
            queue_capacity: capacity,
        };
        Ok(Wal {
            inner: Arc::new(inner),
        })
    }

    /// The backend the writer actually runs.
    pub fn backend(&self) -> BackendKind {
        self.inner.backend
    }

    /// The queue bound.
    pub fn queue_capacity(&self) -> usize {
        self.inner.queue_capacity
    }

    /// Opens (and for `Append` modes, recovers) `path`; the file's completions
    /// go to `sink`. Blocks until the writer has done it (it runs in the queue's
    /// order, after the requests before it); from async code call it in a
    /// blocking task. Recovery reads the whole file on the writer thread.
    pub fn open(
        &self,
        path: impl AsRef<Path>,
        mode: OpenMode,
        sink: Arc<dyn CompletionSink>,
    ) -> Result<OpenedFile, WalError> {
        let (reply, answer) = mpsc::sync_channel(1);
        let path = path.as_ref().to_path_buf();
        self.send(Message::Open {
            path,
            mode,
            sink,
            reply,
        })?;
        answer.recv().map_err(|_| WalError::ShutDown)?
    }

    /// Queues `request`, blocking while the queue is at its bound. Returning `Ok`
    /// is the "queued" ack.
    pub fn submit(&self, request: Request) -> Result<(), WalError> {
        let bytes = request.queued_bytes();
        self.send(Message::Request(request))?;
        metrics::record_queued(bytes);
        Ok(())
    }

    /// Queues `request` without blocking; at the bound answers
    /// [`TrySubmitError::Full`] with the request. For async callers.
    pub fn try_submit(&self, request: Request) -> Result<(), TrySubmitError> {
        let bytes = request.queued_bytes();
        match self.inner.sender.try_send(Message::Request(request)) {
            Ok(()) => {
                metrics::record_queued(bytes);
                Ok(())
            }
            Err(TrySendError::Full(Message::Request(request))) => {
                Err(TrySubmitError::Full(request))
            }
            Err(TrySendError::Disconnected(Message::Request(request))) => {
                Err(TrySubmitError::ShutDown(request))
            }
            Err(_) => unreachable!("only a request was sent"),
        }
    }

    /// Appends `payload` as one frame and asks for a `Durable` ack. Blocks at the
    /// queue bound.
    pub fn append(&self, file: FileId, payload: Bytes, user_data: u64) -> Result<(), WalError> {
        self.submit(Request::append(file, payload, user_data)?)
    }

    /// Appends `payload` with the given [`Ack`]. Blocks at the queue bound.
    pub fn append_with_ack(
        &self,
        file: FileId,
        payload: Bytes,
        user_data: u64,
        ack: Ack,
    ) -> Result<(), WalError> {
        self.submit(Request::append_with_ack(file, payload, user_data, ack)?)
    }

    /// Asks for a `Synced` completion once every byte written so far is durable.
    pub fn sync(&self, file: FileId, user_data: u64) -> Result<(), WalError> {
        self.submit(Request::Sync { file, user_data })
    }

    /// Cuts the file to `len`, durably.
    pub fn truncate(&self, file: FileId, len: u64, user_data: u64) -> Result<(), WalError> {
        self.submit(Request::Truncate {
            file,
            len,
            user_data,
        })
    }

    /// Renames the file to `to`, durably.
    pub fn rename(
        &self,
        file: FileId,
        to: impl Into<PathBuf>,
        user_data: u64,
    ) -> Result<(), WalError> {
        let to = to.into();
        self.submit(Request::Rename {
            file,
            to,
            user_data,
        })
    }

    /// Syncs what is unsynced and closes the file.
    pub fn close(&self, file: FileId, user_data: u64) -> Result<(), WalError> {
        self.submit(Request::Close { file, user_data })
    }

    /// Runs everything queued, syncs and closes every file, and joins the thread.
    /// Returns the first sync error met. Later calls answer `ShutDown`. Requests
    /// submitted concurrently with a shutdown may be dropped without completion.
    pub fn shutdown(&self) -> Result<(), WalError> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.send(Message::Shutdown { reply })?;
        let result = answer.recv().map_err(|_| WalError::ShutDown)?;
        self.inner.join();
        result
    }

    fn send(&self, message: Message) -> Result<(), WalError> {
        self.inner
            .sender
            .send(message)
            .map_err(|_| WalError::ShutDown)
    }
}

impl Inner {
    fn join(&self) {
        let handle = self.writer.lock().map(|mut guard| guard.take());
        if let Ok(Some(handle)) = handle {
            if handle.join().is_err() {
                tracing::error!("wal: the writer thread panicked");
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let (reply, answer) = mpsc::sync_channel(1);
        if self.sender.send(Message::Shutdown { reply }).is_ok() {
            let _ = answer.recv();
        }
        self.join();
    }
}

fn choose_backend(
    choice: BackendChoice,
) -> Result<(Box<dyn Storage + Send>, BackendKind), WalError> {
    match choice {
        BackendChoice::Auto => match UringStorage::new() {
            Ok(uring) => Ok((Box::new(uring), BackendKind::Uring)),
            Err(error) => {
                warn_fallback_once(&error);
                Ok((Box::new(DiskStorage::new()), BackendKind::Std))
            }
        },
        BackendChoice::Uring => match UringStorage::new() {
            Ok(uring) => Ok((Box::new(uring), BackendKind::Uring)),
            Err(error) => Err(WalError::UringUnavailable {
                errno: errno_of(&error),
            }),
        },
        BackendChoice::Std => Ok((Box::new(DiskStorage::new()), BackendKind::Std)),
        BackendChoice::Storage(storage) => Ok((storage, BackendKind::Custom)),
    }
}

fn warn_fallback_once(error: &std::io::Error) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(%error, "wal: io_uring unavailable, falling back to pwrite + fdatasync");
    }
}

/// The writer thread's state.
struct Writer {
    core: WalCore<Box<dyn Storage + Send>>,
    receiver: Receiver<Message>,
    sinks: BTreeMap<FileId, Arc<dyn CompletionSink>>,
    out: Vec<Completion>,
    turn_requests_max: usize,
    gather_window: Duration,
}

/// Whether the loop goes on after a message.
enum Flow {
    Continue,
    Stop,
}

impl Writer {
    /// The thread's body: one group commit per turn until shutdown.
    fn run(mut self) {
        let mut previous_turn = 0;
        loop {
            let leftovers = self.core.queued_requests() > 0;
            let first = if leftovers {
                self.receiver.try_recv().ok()
            } else {
                match self.receiver.recv() {
                    Ok(message) => Some(message),
                    Err(_) => break,
                }
            };
            if let Some(first) = first {
                let expected = if leftovers { 0 } else { previous_turn };
                let Some(taken) = self.gather(first, expected) else {
                    return;
                };
                previous_turn = taken;
            }
            self.core.run_turn(&mut self.out);
            self.deliver();
        }
        // Every handle is gone: finish and sync what was queued.
        let _ = self.core.shutdown(&mut self.out);
        self.deliver();
    }

    /// Takes `first` and what else is queued. If fewer requests came than the
    /// previous turn had, waits up to the gather window for the rest: under
    /// steady concurrent load the appenders acked by the last turn are about to
    /// append again, and one turn with all of them costs one fsync, not two.
    /// Returns the number of requests taken, or `None` after a shutdown.
    fn gather(&mut self, first: Message, expected: usize) -> Option<usize> {
        let expected = expected.min(self.turn_requests_max);
        let deadline = Instant::now() + self.gather_window;
        let mut taken = 0;
        let mut next = Some(first);
        loop {
            while let Some(message) = next.take() {
                if let Flow::Stop = self.take(message) {
                    return None;
                }
                taken += 1;
                if taken < self.turn_requests_max {
                    next = self.receiver.try_recv().ok();
                }
            }
            let now = Instant::now();
            if taken >= expected || now >= deadline {
                return Some(taken);
            }
            match self.receiver.recv_timeout(deadline - now) {
                Ok(message) => next = Some(message),
                Err(_) => return Some(taken),
            }
        }
    }

    fn take(&mut self, message: Message) -> Flow {
        match message {
            Message::Request(request) => self.core.enqueue(request),
            Message::Open {
                path,
                mode,
                sink,
                reply,
            } => {
                self.core.run_turn(&mut self.out);
                self.deliver();
                let result = self.core.open(&path, mode);
                if let Ok(opened) = &result {
                    self.sinks.insert(opened.file, sink);
                }
                let _ = reply.send(result);
            }
            Message::Shutdown { reply } => {
                let result = self.core.shutdown(&mut self.out);
                self.deliver();
                refuse_the_rest(&self.receiver, &self.sinks);
                let _ = reply.send(result);
                return Flow::Stop;
            }
        }
        Flow::Continue
    }

    fn deliver(&mut self) {
        deliver(&mut self.sinks, &mut self.out);
    }
}

/// Answers what is still queued after a shutdown.
fn refuse_the_rest(
    receiver: &Receiver<Message>,
    sinks: &BTreeMap<FileId, Arc<dyn CompletionSink>>,
) {
    while let Ok(message) = receiver.try_recv() {
        match message {
            Message::Request(request) => {
                if let Some(sink) = sinks.get(&request.file()) {
                    sink.complete(Completion {
                        file: request.file(),
                        user_data: request.user_data(),
                        kind: request.completion_kind(),
                        result: Err(WalError::ShutDown),
                    });
                }
            }
            Message::Open { reply, .. } => {
                let _ = reply.send(Err(WalError::ShutDown));
            }
            Message::Shutdown { reply } => {
                let _ = reply.send(Err(WalError::ShutDown));
            }
        }
    }
}

/// Hands each completion to its file's sink.
fn deliver(sinks: &mut BTreeMap<FileId, Arc<dyn CompletionSink>>, out: &mut Vec<Completion>) {
    for completion in out.drain(..) {
        let file = completion.file;
        let closed = completion.kind == CompletionKind::Closed;
        let sink = if closed {
            sinks.remove(&file)
        } else {
            sinks.get(&file).cloned()
        };
        match sink {
            Some(sink) => sink.complete(completion),
            None => tracing::error!(%file, ?completion, "wal: completion for a file with no sink"),
        }
    }
}
