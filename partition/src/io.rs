//! [`Io`]: the partition's side of the WAL conversation. It names every
//! request it submits (a `user_data` counter), remembers what each one was
//! for ([`Pending`]), and sorts completions: those a synchronous step waits
//! for are kept by id, everything else is stashed in arrival order for the
//! partition to turn into [`crate::Completed`] events.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use strand_wal::{
    Ack, Completion, FileId, FileRange, Frame, OpenMode, OpenedFile, Request, WalError,
};

use crate::disk::{Disk, WaitError};
use crate::error::PartitionError;

/// What a submitted request was for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pending {
    /// A prepare append.
    Prepare {
        /// The op.
        op: u64,
        /// Its checksum.
        checksum: u32,
    },
    /// A cursor event append.
    Cursors {
        /// The cursor log's length once this append is in.
        cursor_end: u64,
    },
    /// An asynchronous durable-mark write.
    Mark {
        /// The write's sequence.
        sequence: u64,
    },
    /// A step of an asynchronous superblock write.
    Superblock {
        /// Which step.
        step: SuperblockStep,
    },
    /// A step some synchronous operation waits for.
    Internal,
    /// Nothing to report (index appends).
    Ignored,
}

/// The steps of a superblock write (see `writes::SuperblockWriter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SuperblockStep {
    /// The copy was cut to nothing (durably); the frame is appended next.
    Cleared,
    /// The frame is in the copy (durably): the write is done.
    Written,
    /// The copy's file was closed after a failure.
    Closed,
}

/// The WAL conversation. See the module docs.
pub(crate) struct Io<D: Disk> {
    pub disk: D,
    next_user_data: u64,
    pending: BTreeMap<u64, Pending>,
    internal_done: BTreeMap<u64, Result<FileRange, WalError>>,
    stash: VecDeque<(Pending, Completion)>,
    paths: BTreeMap<FileId, PathBuf>,
}

impl<D: Disk> Io<D> {
    pub fn new(disk: D) -> Io<D> {
        Io {
            disk,
            next_user_data: 1,
            pending: BTreeMap::new(),
            internal_done: BTreeMap::new(),
            stash: VecDeque::new(),
            paths: BTreeMap::new(),
        }
    }

    /// Opens a file through the WAL.
    pub fn open(&mut self, path: &Path, mode: OpenMode) -> Result<OpenedFile, PartitionError> {
        let opened = self
            .disk
            .wal_open(path, mode)
            .map_err(|error| PartitionError::wal(path, error))?;
        self.paths.insert(opened.file, path.to_path_buf());
        Ok(opened)
    }

    /// The path a WAL file was opened at (for errors).
    pub fn path_of(&self, file: FileId) -> PathBuf {
        self.paths.get(&file).cloned().unwrap_or_default()
    }

    fn take_user_data(&mut self, pending: Pending) -> u64 {
        let user_data = self.next_user_data;
        self.next_user_data += 1;
        self.pending.insert(user_data, pending);
        user_data
    }

    /// Submits an append; returns its id.
    pub fn append(
        &mut self,
        file: FileId,
        payload: Bytes,
        ack: Ack,
        pending: Pending,
    ) -> Result<u64, PartitionError> {
        let user_data = self.take_user_data(pending);
        let request = Request::append_with_ack(file, payload, user_data, ack);
        self.submit_built(file, user_data, request)
    }

    /// Submits an append of a frame built by the caller (a prepare's header
    /// and body framed without copying the body); returns its id.
    pub fn append_frame(
        &mut self,
        file: FileId,
        frame: Frame,
        ack: Ack,
        pending: Pending,
    ) -> Result<u64, PartitionError> {
        let user_data = self.take_user_data(pending);
        let request = Request::append_frame(file, frame, user_data, ack);
        self.submit_built(file, user_data, Ok(request))
    }

    /// Submits a non-append request built from its id.
    pub fn request(
        &mut self,
        file: FileId,
        pending: Pending,
        build: impl FnOnce(u64) -> Request,
    ) -> Result<u64, PartitionError> {
        let user_data = self.take_user_data(pending);
        self.submit_built(file, user_data, Ok(build(user_data)))
    }

    fn submit_built(
        &mut self,
        file: FileId,
        user_data: u64,
        request: Result<Request, WalError>,
    ) -> Result<u64, PartitionError> {
        let submitted = request.and_then(|request| self.disk.wal_submit(request));
        match submitted {
            Ok(()) => Ok(user_data),
            Err(error) => {
                self.pending.remove(&user_data);
                Err(PartitionError::wal(&self.path_of(file), error))
            }
        }
    }

    /// Sorts completions that have arrived, without waiting.
    pub fn poll(&mut self) {
        let mut arrived = Vec::new();
        self.disk.wal_poll(&mut arrived);
        self.route(arrived);
    }

    /// Waits for at least one completion, then sorts what arrived.
    pub fn wait_once(&mut self) -> Result<(), PartitionError> {
        let mut arrived = Vec::new();
        match self.disk.wal_wait(&mut arrived) {
            Ok(()) => {}
            Err(WaitError::TimedOut { seconds }) => {
                return Err(PartitionError::WaitTimedOut { seconds });
            }
            Err(WaitError::NothingOutstanding) => {
                panic!(
                    "waited on the WAL with nothing outstanding ({} pending)",
                    self.pending.len()
                );
            }
        }
        self.route(arrived);
        Ok(())
    }

    fn route(&mut self, arrived: Vec<Completion>) {
        for completion in arrived {
            let Some(pending) = self.pending.remove(&completion.user_data) else {
                tracing::warn!(?completion, "partition: completion for no request");
                continue;
            };
            match pending {
                Pending::Internal => {
                    self.internal_done
                        .insert(completion.user_data, completion.result);
                }
                Pending::Ignored => {
                    if let Err(error) = &completion.result {
                        tracing::warn!(%error, "partition: index write failed");
                    }
                }
                other => self.stash.push_back((other, completion)),
            }
        }
    }

    /// Submits `request` (built from its id) and waits until it completes.
    pub fn run(
        &mut self,
        file: FileId,
        build: impl FnOnce(u64) -> Request,
    ) -> Result<FileRange, PartitionError> {
        let user_data = self.request(file, Pending::Internal, build)?;
        self.finish(file, user_data)
    }

    /// Waits for an internal request to complete and returns its result.
    pub fn finish(&mut self, file: FileId, user_data: u64) -> Result<FileRange, PartitionError> {
        loop {
            if let Some(result) = self.internal_done.remove(&user_data) {
                return result.map_err(|error| PartitionError::wal(&self.path_of(file), error));
            }
            assert!(
                self.pending.contains_key(&user_data),
                "waiting for request {user_data} that was never submitted"
            );
            self.wait_once()?;
        }
    }

    /// Closes a WAL file (syncing it) and waits.
    pub fn close(&mut self, file: FileId) -> Result<(), PartitionError> {
        self.close_durable(file).map(|_| ())
    }

    /// Closes a WAL file (syncing it), waits, and returns how many of its
    /// bytes are durable. A file an earlier write or sync poisoned is closed
    /// without a sync: its durable length then falls short of what was
    /// appended, and the close itself reports no error.
    pub fn close_durable(&mut self, file: FileId) -> Result<u64, PartitionError> {
        let result = self.run(file, |user_data| Request::Close { file, user_data });
        self.paths.remove(&file);
        result.map(|range| range.offset + range.len)
    }

    /// The first failed completion of an append or sync of `file` that is
    /// stashed and not yet reported, if any.
    pub fn stashed_failure(&self, file: FileId) -> Option<WalError> {
        self.stash
            .iter()
            .filter(|(_, completion)| completion.file == file)
            .find_map(|(_, completion)| completion.result.clone().err())
    }

    /// The stashed completions, in arrival order.
    pub fn take_stash(&mut self) -> VecDeque<(Pending, Completion)> {
        std::mem::take(&mut self.stash)
    }

    /// True while some request has not completed.
    pub fn outstanding(&self) -> bool {
        !self.pending.is_empty()
    }
}
