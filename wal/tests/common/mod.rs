//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use bytes::Bytes;
use strand_wal::{
    BackendChoice, BackendKind, Completion, CompletionKind, CompletionSink, FileId, FileRange, Wal,
    WalConfig, WalError,
};

/// A guard against a hung test, not a timing assumption: nothing here should
/// take more than a fraction of a second.
const RECV_GUARD: Duration = Duration::from_secs(60);

/// The two real-file backends every disk test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Uring,
    /// io_uring with appends past the page cache (`O_DIRECT`).
    UringDirect,
    Std,
}

impl Backend {
    pub fn choice(self) -> BackendChoice {
        match self {
            Backend::Uring | Backend::UringDirect => BackendChoice::Uring,
            Backend::Std => BackendChoice::Std,
        }
    }
}

/// Starts a WAL on `backend`; `None` (with a note) where io_uring is unavailable.
pub fn start(backend: Backend) -> Option<Wal> {
    start_with(config(backend))
}

/// The configuration a test of `backend` starts from.
pub fn config(backend: Backend) -> WalConfig {
    WalConfig {
        backend: backend.choice(),
        direct_appends: backend == Backend::UringDirect,
        ..WalConfig::default()
    }
}

pub fn start_with(config: WalConfig) -> Option<Wal> {
    match Wal::start(config) {
        Ok(wal) => Some(wal),
        Err(WalError::UringUnavailable { errno }) => {
            eprintln!("io_uring unavailable here (errno {errno}): uring test skipped");
            None
        }
        Err(error) => panic!("cannot start the WAL: {error}"),
    }
}

/// A sink that collects completions for the test thread.
pub struct Collector {
    receiver: Receiver<Completion>,
    pub sink: Arc<dyn CompletionSink>,
}

impl Collector {
    pub fn new() -> Collector {
        let (sender, receiver) = mpsc::channel();
        Collector {
            receiver,
            sink: Arc::new(sender),
        }
    }

    pub fn recv(&self) -> Completion {
        self.receiver
            .recv_timeout(RECV_GUARD)
            .expect("a completion arrives")
    }

    pub fn recv_n(&self, count: usize) -> Vec<Completion> {
        (0..count).map(|_| self.recv()).collect()
    }
}

/// A payload that names its writer and sequence, with a length that varies.
pub fn payload(writer: u64, sequence: u64) -> Bytes {
    let len = 16 + ((writer * 131 + sequence * 37) % 700) as usize;
    let mut bytes = Vec::with_capacity(len);
    bytes.extend_from_slice(&writer.to_le_bytes());
    bytes.extend_from_slice(&sequence.to_le_bytes());
    bytes.extend((16..len).map(|i| (i as u64 ^ sequence ^ writer) as u8));
    Bytes::from(bytes)
}

/// Appends every payload with a durable ack and waits for all the acks.
pub fn append_all(
    wal: &Wal,
    collector: &Collector,
    file: FileId,
    payloads: &[Bytes],
) -> Vec<FileRange> {
    for (index, payload) in payloads.iter().enumerate() {
        wal.append(file, payload.clone(), index as u64)
            .expect("queued");
    }
    let mut ranges = vec![None; payloads.len()];
    for completion in collector.recv_n(payloads.len()) {
        assert_eq!(completion.kind, CompletionKind::Durable);
        assert_eq!(completion.file, file);
        ranges[completion.user_data as usize] = Some(completion.result.expect("durable"));
    }
    ranges
        .into_iter()
        .map(|range| range.expect("every ack"))
        .collect()
}

/// Runs `test` for the io_uring backend and the std fallback.
#[macro_export]
macro_rules! for_each_backend {
    ($($name:ident),* $(,)?) => {
        mod uring {
            $( #[test] fn $name() { super::$name($crate::common::Backend::Uring) } )*
        }
        mod uring_direct {
            $( #[test] fn $name() { super::$name($crate::common::Backend::UringDirect) } )*
        }
        mod std_fallback {
            $( #[test] fn $name() { super::$name($crate::common::Backend::Std) } )*
        }
    };
}

pub fn backend_kind(backend: Backend) -> BackendKind {
    match backend {
        Backend::Uring | Backend::UringDirect => BackendKind::Uring,
        Backend::Std => BackendKind::Std,
    }
}
