//! Group commit: gathering one turn's appends and syncs into one [`FileBatch`]
//! per file, and turning each executed batch into completions.
//!
//! The rule this module exists to keep: a `Durable` or `Synced` completion is
//! produced only from a batch whose outcome says an fdatasync ran after all of
//! the batch's writes and succeeded.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::{IoOp, PoisonCause, WalError};
use crate::frame::Frame;
use crate::metrics;
use crate::request::{Ack, Completion, CompletionKind, FileId, FileRange};
use crate::storage::{BatchOutcome, FileBatch};

/// What the writer knows about one open file.
#[derive(Debug, Clone)]
pub(crate) struct FileState {
    /// Current path (follows renames).
    pub path: PathBuf,
    /// Where the next append goes: the end of everything queued so far.
    pub append_end: u64,
    /// End of the bytes known written.
    pub written_end: u64,
    /// End of the bytes known durable.
    pub durable_end: u64,
    /// Set by the first failed write, sync or truncate; never cleared.
    pub poisoned: Option<PoisonCause>,
}

impl FileState {
    /// A file whose first `len` bytes are on disk and durable.
    pub fn recovered(path: PathBuf, len: u64) -> FileState {
        FileState {
            path,
            append_end: len,
            written_end: len,
            durable_end: len,
            poisoned: None,
        }
    }

    /// Checks the ordering of the three ends (our own state: a violation is a bug).
    pub fn assert_invariants(&self, file: FileId) {
        assert!(
            self.durable_end <= self.written_end && self.written_end <= self.append_end,
            "{file}: durable {} <= written {} <= append {} violated",
            self.durable_end,
            self.written_end,
            self.append_end
        );
    }

    /// Marks the file failed; the first cause wins.
    pub fn poison(&mut self, op: IoOp, errno: i32) {
        if self.poisoned.is_none() {
            self.poisoned = Some(PoisonCause { op, errno });
        }
    }
}

/// Someone waiting on a batch.
#[derive(Debug)]
pub(crate) enum Waiter {
    Append {
        user_data: u64,
        range: FileRange,
        ack: Ack,
    },
    Sync {
        user_data: u64,
    },
}

/// One turn's batches, one per file, in order of first appearance (so the
/// simulator sees a deterministic order).
#[derive(Debug, Default)]
pub(crate) struct Turn {
    batches: Vec<FileBatch>,
    waiters: Vec<Vec<Waiter>>,
    index: BTreeMap<FileId, usize>,
}

impl Turn {
    /// True when `file` has work in this turn.
    pub fn contains(&self, file: FileId) -> bool {
        self.index.contains_key(&file)
    }

    /// True when nothing is batched.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Adds an append to `file`'s batch; the caller has reserved `range`.
    pub fn add_append(
        &mut self,
        file: FileId,
        range: FileRange,
        frame: Frame,
        user_data: u64,
        ack: Ack,
    ) {
        assert_eq!(range.len, frame.len());
        let slot = self.slot(file, range.offset);
        let batch = &mut self.batches[slot];
        assert_eq!(
            batch.offset + batch.len(),
            range.offset,
            "{file}: appends are contiguous"
        );
        batch.frames.push(frame);
        batch.sync |= ack == Ack::Durable;
        self.waiters[slot].push(Waiter::Append {
            user_data,
            range,
            ack,
        });
    }

    /// Adds a sync to `file`'s batch, which starts at `offset` if new.
    pub fn add_sync(&mut self, file: FileId, offset: u64, user_data: u64) {
        let slot = self.slot(file, offset);
        self.batches[slot].sync = true;
        self.waiters[slot].push(Waiter::Sync { user_data });
    }

    /// The batches to execute, leaving the turn empty.
    pub fn take(&mut self) -> (Vec<FileBatch>, Vec<Vec<Waiter>>) {
        self.index.clear();
        (
            std::mem::take(&mut self.batches),
            std::mem::take(&mut self.waiters),
        )
    }

    fn slot(&mut self, file: FileId, offset: u64) -> usize {
        if let Some(&slot) = self.index.get(&file) {
            return slot;
        }
        self.batches.push(FileBatch {
            file,
            offset,
            frames: Vec::new(),
            sync: false,
            outcome: None,
        });
        self.waiters.push(Vec::new());
        self.index.insert(file, self.batches.len() - 1);
        self.batches.len() - 1
    }
}

/// Applies an executed batch to its file's state and produces its completions.
pub(crate) fn settle(
    state: &mut FileState,
    batch: &FileBatch,
    waiters: Vec<Waiter>,
    out: &mut Vec<Completion>,
) {
    let outcome = batch
        .outcome
        .expect("every batch is executed before it settles");
    assert_eq!(
        batch.offset, state.written_end,
        "{}: batches are contiguous",
        batch.file
    );
    let file = batch.file;
    match outcome {
        BatchOutcome::Done {
            synced,
            sync_latency,
        } => {
            assert!(
                synced || !batch.sync,
                "{file}: a requested sync was skipped"
            );
            state.written_end = batch.offset + batch.len();
            if synced {
                metrics::record_sync(state.written_end - state.durable_end, sync_latency);
                state.durable_end = state.written_end;
            }
            for waiter in waiters {
                out.push(success(file, waiter, state.durable_end, synced));
            }
        }
        BatchOutcome::WriteFailed { errno } => {
            state.poison(IoOp::Write, errno);
            let error = WalError::from_errno(file, IoOp::Write, errno);
            for waiter in waiters {
                out.push(failure(file, waiter, error.clone()));
            }
        }
        BatchOutcome::SyncFailed { errno } => {
            state.written_end = batch.offset + batch.len();
            state.poison(IoOp::Sync, errno);
            let error = WalError::from_errno(file, IoOp::Sync, errno);
            for waiter in waiters {
                out.push(match waiter {
                    Waiter::Append {
                        ack: Ack::Written, ..
                    } => success(file, waiter, state.durable_end, false),
                    _ => failure(file, waiter, error.clone()),
                });
            }
        }
    }
    state.assert_invariants(file);
}

fn success(file: FileId, waiter: Waiter, durable_end: u64, synced: bool) -> Completion {
    let (user_data, kind, range) = match waiter {
        Waiter::Append {
            user_data,
            range,
            ack,
        } => {
            let kind = match ack {
                Ack::Durable => CompletionKind::Durable,
                Ack::Written => CompletionKind::Written,
            };
            (user_data, kind, range)
        }
        Waiter::Sync { user_data } => (
            user_data,
            CompletionKind::Synced,
            FileRange {
                offset: 0,
                len: durable_end,
            },
        ),
    };
    if kind != CompletionKind::Written {
        assert!(synced, "{file}: durable ack without a completed sync");
        assert!(
            range.end() <= durable_end,
            "{file}: durable ack past the durable end"
        );
    }
    Completion {
        file,
        user_data,
        kind,
        result: Ok(range),
    }
}

fn failure(file: FileId, waiter: Waiter, error: WalError) -> Completion {
    let (user_data, kind) = match waiter {
        Waiter::Append {
            user_data,
            ack: Ack::Durable,
            ..
        } => (user_data, CompletionKind::Durable),
        Waiter::Append { user_data, .. } => (user_data, CompletionKind::Written),
        Waiter::Sync { user_data } => (user_data, CompletionKind::Synced),
    };
    metrics::record_error(error.metric_kind());
    Completion {
        file,
        user_data,
        kind,
        result: Err(error),
    }
}
