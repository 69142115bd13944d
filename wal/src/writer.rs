//! [`Wal`]: the node's WAL writer — one thread, one bounded queue, one
//! [`WalCore`] over the chosen backend.
//!
//! The writer thread loops: settle the I/O that finished and deliver its
//! completions, take every message already queued (at most the queue
//! capacity), run them as one turn (one group commit) when the gather rule says
//! so, otherwise sleep until a message, a completion or the gather deadline.
//! Over io_uring the turn only starts its batches: the next turn's writes go
//! out while this turn's fdatasyncs run, and each file's acks are delivered the
//! moment its own fsync returns, not when the slowest file's does. While
//! fsyncs run, new requests pile up and form the next group: the slower the
//! disk, the bigger the groups.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::disk::DiskStorage;
use crate::engine::{SYNC_BYTES_MAX_DEFAULT, SYNCS_IN_FLIGHT_MAX_DEFAULT, WalCore};
use crate::error::{WalError, errno_of};
use crate::metrics;
use crate::request::{
    Ack, Completion, CompletionKind, CompletionSink, FileId, OpenMode, OpenedFile, Request,
    TrySubmitError,
};
use crate::storage::{IoObserver, Storage};
use crate::uring::{Doorbell, UringStorage};

/// Default bound of the request queue.
pub const QUEUE_CAPACITY_DEFAULT: usize = 4096;

/// Default [`WalConfig::gather_window`]: 250 µs.
///
/// The window only applies when fewer requests have come back than the
/// writer just answered (a lone appender never waits), and a group of n
/// requests costs one wake-up, not n. On the development VM (2 shared CPUs,
/// fdatasync 0.2-0.4 ms when the disk is not throttled), 64 appenders of
/// 1 KiB over 16 files ran at 64-77 MB/s with 100 µs and 98-119 MB/s with
/// 250 µs, at a lower median latency (0.5 ms against 0.8-0.9 ms); one file
/// was unaffected. With zero-filled room (see `preallocate`) that case
/// reached 25.9x the one-write-one-fsync baseline at 500 µs against ~21x at
/// 250 µs, but a 3-node cluster's peak (`strand-bench`, persisted, 1 KiB
/// records in batches of 100) fell from 115-125k to 105-119k msgs/s: a node's
/// few group actors do not all come back within the window, and the fsyncs
/// they would have shared wait for nothing. 250 µs stays.
pub const GATHER_WINDOW_DEFAULT: Duration = Duration::from_micros(250);

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
    /// fdatasyncs in flight at once over io_uring, all files together (see
    /// [`WalCore::set_syncs_in_flight_max`]).
    pub syncs_in_flight_max: usize,
    /// Descriptors held at once (see [`WalCore::set_descriptors_max`]);
    /// `usize::MAX` (the default) holds one per open file.
    pub descriptors_max: usize,
    /// Appends past the page cache where the backend can (see
    /// [`WalCore::set_direct_appends`]). Off by default.
    pub direct_appends: bool,
}

impl Default for WalConfig {
    fn default() -> WalConfig {
        WalConfig {
            backend: BackendChoice::Auto,
            queue_capacity: QUEUE_CAPACITY_DEFAULT,
            observer: None,
            gather_window: GATHER_WINDOW_DEFAULT,
            sync_bytes_max: SYNC_BYTES_MAX_DEFAULT,
            syncs_in_flight_max: SYNCS_IN_FLIGHT_MAX_DEFAULT,
            descriptors_max: usize::MAX,
            direct_appends: false,
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
    /// Wakes the writer when it waits inside io_uring (pipelined backends).
    doorbell: Option<Arc<Doorbell>>,
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
        core.set_syncs_in_flight_max(config.syncs_in_flight_max);
        core.set_descriptors_max(config.descriptors_max);
        core.set_direct_appends(config.direct_appends);
        let doorbell = core.doorbell();
        let (sender, receiver) = mpsc::sync_channel(config.queue_capacity);
        let capacity = config.queue_capacity;
        let writer = Writer {
            core,
            receiver,
            sinks: BTreeMap::new(),
            out: Vec::new(),
            turn_requests_max: capacity,
            gather_window: config.gather_window,
            doorbell: doorbell.clone(),
            fresh: 0,
            expected: 0,
            deadline: None,
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
            doorbell,
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
                self.inner.ring();
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

    /// Appends a frame built by the caller (e.g. [`crate::Frame::from_parts`])
    /// with the given [`Ack`]. Blocks at the queue bound.
    pub fn append_frame(
        &self,
        file: FileId,
        frame: crate::Frame,
        user_data: u64,
        ack: Ack,
    ) -> Result<(), WalError> {
        self.submit(Request::append_frame(file, frame, user_data, ack))
    }

    /// Overwrites the frame at `offset` with `payload` framed, in place
    /// ([`Request::WriteAt`]). Blocks at the queue bound.
    pub fn write_at(
        &self,
        file: FileId,
        offset: u64,
        payload: Bytes,
        user_data: u64,
        ack: Ack,
    ) -> Result<(), WalError> {
        self.submit(Request::write_at(file, offset, payload, user_data, ack)?)
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
        let request = matches!(message, Message::Request(_));
        self.inner
            .sender
            .send(message)
            .map_err(|_| WalError::ShutDown)?;
        if request {
            self.inner.ring();
        } else {
            self.inner.ring_now();
        }
        Ok(())
    }
}

impl Inner {
    /// Counts a queued request; wakes the writer if it waits inside
    /// io_uring for it.
    fn ring(&self) {
        if let Some(doorbell) = &self.doorbell {
            doorbell.ring();
        }
    }

    /// Wakes the writer if it waits inside io_uring, for a control message.
    fn ring_now(&self) {
        if let Some(doorbell) = &self.doorbell {
            doorbell.ring_now();
        }
    }

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
            self.ring_now();
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
    /// Rung by submitters while the writer waits inside io_uring.
    doorbell: Option<Arc<Doorbell>>,
    /// Requests taken since the last turn.
    fresh: usize,
    /// Completions delivered since the last turn: callers likely to submit
    /// again soon.
    expected: usize,
    /// When the turn being gathered runs at the latest.
    deadline: Option<Instant>,
}

/// Whether the loop goes on.
enum Flow {
    Continue,
    /// A shutdown was handled: the thread ends.
    Stop,
    /// Every handle is gone: finish what was queued and end.
    Disconnected,
}

/// How long the writer waits for I/O at a time when the backend has no
/// doorbell, before checking the queue again.
const WAIT_SLICE_WITHOUT_DOORBELL: Duration = Duration::from_micros(200);

impl Writer {
    /// The thread's body: settle finished I/O, take what is queued, run a
    /// turn when one is due, otherwise sleep until something happens.
    fn run(mut self) {
        loop {
            let finished = self.core.reap_io(&mut self.out);
            self.expected += self.deliver();
            match self.drain() {
                Flow::Continue => {}
                Flow::Stop => return,
                Flow::Disconnected => break,
            }
            let now = Instant::now();
            let pending = self.fresh > 0 || self.core.syncs_due();
            if pending && self.deadline.is_none() {
                self.deadline = Some(now + self.gather_window);
            }
            let leftovers = self.core.queued_requests() > self.fresh;
            let unblocked = leftovers && (finished > 0 || self.core.in_flight() == 0);
            if (pending && self.gathered(now)) || unblocked {
                self.turn();
                continue;
            }
            let timeout = self
                .deadline
                .filter(|_| pending)
                .map(|deadline| deadline.saturating_duration_since(now));
            match self.sleep(timeout) {
                Flow::Continue => {}
                Flow::Stop => return,
                Flow::Disconnected => break,
            }
        }
        // Every handle is gone: finish and sync what was queued.
        let _ = self.core.shutdown(&mut self.out);
        self.deliver();
    }

    /// Whether the requests taken so far (and the fsyncs due) should go out
    /// now. Fewer requests than were answered since the last turn means the
    /// rest of a closed loop is about to come back: one turn with all of them
    /// costs one fsync, not two (their appends ride on the fsync a file is
    /// due, linked after them), so it waits for them up to the gather window.
    /// A lone appender (one answered, one back) never waits.
    fn gathered(&self, now: Instant) -> bool {
        let expected = self.expected.min(self.turn_requests_max);
        self.fresh >= expected
            || self.deadline.is_some_and(|deadline| now >= deadline)
            || self.core.queued_requests() >= self.turn_requests_max
    }

    fn turn(&mut self) {
        let queued = self.core.queued_requests();
        let idle = self.core.in_flight() == 0;
        self.core.run_turn(&mut self.out);
        self.fresh = 0;
        self.deadline = None;
        self.expected = self.deliver();
        // With nothing in flight, what stays queued could wait forever: a turn
        // must answer, start or run something (else this loop would spin).
        assert!(
            !idle
                || queued == 0
                || self.expected > 0
                || self.core.in_flight() > 0
                || self.core.queued_requests() < queued,
            "wal: a turn with nothing in flight made no progress ({queued} queued)"
        );
    }

    /// Takes every message already queued, up to the turn's bound.
    fn drain(&mut self) -> Flow {
        while self.core.queued_requests() < self.turn_requests_max {
            match self.receiver.try_recv() {
                Ok(message) => match self.take(message) {
                    Flow::Continue => {}
                    other => return other,
                },
                Err(TryRecvError::Empty) => return Flow::Continue,
                Err(TryRecvError::Disconnected) => return Flow::Disconnected,
            }
        }
        Flow::Continue
    }

    /// Waits for a message, finished I/O or `timeout`. With I/O in flight it
    /// waits inside the backend, parked on the doorbell; otherwise on the queue.
    fn sleep(&mut self, timeout: Option<Duration>) -> Flow {
        if self.core.in_flight() == 0 {
            let message = match timeout {
                None => self
                    .receiver
                    .recv()
                    .map_err(|_| RecvTimeoutError::Disconnected),
                Some(timeout) => self.receiver.recv_timeout(timeout),
            };
            return match message {
                Ok(message) => self.take(message),
                Err(RecvTimeoutError::Timeout) => Flow::Continue,
                Err(RecvTimeoutError::Disconnected) => Flow::Disconnected,
            };
        }
        let Some(doorbell) = self.doorbell.clone() else {
            let slice = timeout.map_or(WAIT_SLICE_WITHOUT_DOORBELL, |timeout| {
                timeout.min(WAIT_SLICE_WITHOUT_DOORBELL)
            });
            self.core.wait_io(Some(slice));
            return Flow::Continue;
        };
        // While gathering, wake for the rest of the group (or the deadline),
        // not for each request of it.
        let awaited = if timeout.is_some() {
            self.expected
                .min(self.turn_requests_max)
                .saturating_sub(self.fresh)
        } else {
            1
        };
        doorbell.park(awaited);
        let flow = match self.receiver.try_recv() {
            Ok(message) => {
                doorbell.unpark();
                return self.take(message);
            }
            Err(TryRecvError::Disconnected) => Flow::Disconnected,
            Err(TryRecvError::Empty) => Flow::Continue,
        };
        self.core.wait_io(timeout);
        doorbell.unpark();
        flow
    }

    fn take(&mut self, message: Message) -> Flow {
        match message {
            Message::Request(request) => {
                self.core.enqueue(request);
                self.fresh += 1;
            }
            Message::Open {
                path,
                mode,
                sink,
                reply,
            } => {
                self.turn();
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

    /// Delivers what is due; returns how many completions went out.
    fn deliver(&mut self) -> usize {
        let count = self.out.len();
        deliver(&mut self.sinks, &mut self.out);
        count
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
        let sink = if completion.kind == CompletionKind::Closed {
            sinks.remove(&file)
        } else if let Some(sink) = sinks.get(&file) {
            // Borrowed: no reference count touched per completion.
            sink.complete(completion);
            continue;
        } else {
            None
        };
        match sink {
            Some(sink) => sink.complete(completion),
            None => tracing::error!(%file, ?completion, "wal: completion for a file with no sink"),
        }
    }
}
