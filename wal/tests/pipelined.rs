//! `WalCore` over a pipelined backend whose batches finish only when the test
//! says so, in the order it chooses: acks come in request order, never before
//! the fsync that covers them, a file never has two fsyncs in flight, and a
//! failed fsync in a pipelined turn fails every later waiter of its file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use strand_wal::storage::execute_sequential;
use strand_wal::{
    Ack, Completion, CompletionKind, FileBatch, FileId, IoEvent, IoObserver, MemoryStorage,
    OpenMode, Pipeline, Request, Storage, WRITE_BATCHES_IN_FLIGHT_MAX, WalCore, WalError,
};

/// What happened, in order: fsyncs as the disk completed them, acks as the
/// core delivered them.
#[derive(Debug, Clone)]
enum Seen {
    Synced { file: FileId, durable_end: u64 },
    Ack(Completion),
}

#[derive(Default)]
struct Log(Mutex<Vec<Seen>>);

impl IoObserver for Log {
    fn on_event(&self, event: IoEvent) {
        if let IoEvent::Synced { file, durable_end } = event {
            let seen = Seen::Synced { file, durable_end };
            self.0.lock().expect("log").push(seen);
        }
    }
}

/// A pipelined backend over the in-memory disk. Started batches wait in
/// `started` until [`Scripted::finish`] runs one.
struct Scripted {
    inner: MemoryStorage,
    paths: Vec<(FileId, PathBuf)>,
    started: Vec<FileBatch>,
    finished: Vec<FileBatch>,
    /// Files whose descriptor was released, in order.
    released: Vec<FileId>,
    log: Arc<Log>,
}

impl Scripted {
    fn new(log: Arc<Log>) -> Scripted {
        Scripted {
            inner: MemoryStorage::new(7),
            paths: Vec::new(),
            started: Vec::new(),
            finished: Vec::new(),
            released: Vec::new(),
            log,
        }
    }

    /// The started batches of `file`, oldest first: (frames, sync).
    fn started_of(&self, file: FileId) -> Vec<(usize, bool)> {
        self.started
            .iter()
            .filter(|batch| batch.file == file)
            .map(|batch| (batch.frames.len(), batch.sync))
            .collect()
    }

    /// Runs the `nth` started batch of `file` on the disk, failing its sync
    /// with `fail_sync` if given.
    fn finish(&mut self, file: FileId, nth: usize, fail_sync: Option<i32>) {
        let index = self
            .started
            .iter()
            .enumerate()
            .filter(|(_, batch)| batch.file == file)
            .nth(nth)
            .map(|(index, _)| index)
            .expect("such a batch is in flight");
        let mut batch = self.started.remove(index);
        if let Some(errno) = fail_sync {
            let path = self.path_of(file);
            self.inner.fail_next_sync(&path, errno).expect("exists");
        }
        execute_sequential(&mut self.inner, &mut batch, &*self.log);
        self.finished.push(batch);
    }

    fn path_of(&self, file: FileId) -> PathBuf {
        let (_, path) = self
            .paths
            .iter()
            .find(|(id, _)| *id == file)
            .expect("opened");
        path.clone()
    }
}

impl Storage for Scripted {
    fn open(&mut self, file: FileId, path: &Path, mode: OpenMode) -> std::io::Result<u64> {
        self.paths.push((file, path.to_path_buf()));
        self.inner.open(file, path, mode)
    }
    fn read_all(&mut self, file: FileId) -> std::io::Result<Vec<u8>> {
        self.inner.read_all(file)
    }
    fn write_at(&mut self, file: FileId, offset: u64, parts: &[&[u8]]) -> std::io::Result<()> {
        self.inner.write_at(file, offset, parts)
    }
    fn sync_data(&mut self, file: FileId) -> std::io::Result<()> {
        self.inner.sync_data(file)
    }
    fn set_len(&mut self, file: FileId, len: u64) -> std::io::Result<()> {
        self.inner.set_len(file, len)
    }
    fn rename(&mut self, file: FileId, to: &Path) -> std::io::Result<()> {
        self.inner.rename(file, to)
    }
    fn release_descriptor(&mut self, file: FileId) {
        assert!(
            self.started.iter().all(|batch| batch.file != file),
            "{file}'s descriptor released with a batch in flight"
        );
        self.released.push(file);
    }
    fn close(&mut self, file: FileId) {
        assert!(
            self.started.iter().all(|batch| batch.file != file),
            "{file} closed with a batch in flight"
        );
        self.inner.close(file)
    }
    fn pipeline(&mut self) -> Option<&mut dyn Pipeline> {
        Some(self)
    }
}

impl Pipeline for Scripted {
    fn start(&mut self, batch: FileBatch, _observer: &dyn IoObserver) {
        if batch.sync {
            assert!(
                !self
                    .started
                    .iter()
                    .any(|other| other.file == batch.file && other.sync),
                "{}: a second fsync while one is in flight",
                batch.file
            );
        }
        self.started.push(batch);
    }
    fn reap(&mut self, done: &mut Vec<FileBatch>, _observer: &dyn IoObserver) {
        done.append(&mut self.finished);
    }
    fn in_flight(&self) -> usize {
        self.started.len() + self.finished.len()
    }
    fn wait(&mut self, _timeout: Option<Duration>, _observer: &dyn IoObserver) {}
}

struct Harness {
    core: WalCore<Scripted>,
    log: Arc<Log>,
}

impl Harness {
    fn new() -> Harness {
        let log = Arc::new(Log::default());
        let mut core = WalCore::new(Scripted::new(log.clone()), 1024);
        core.set_observer(log.clone());
        Harness { core, log }
    }

    fn open(&mut self, path: &str) -> FileId {
        self.core
            .open(Path::new(path), OpenMode::CreateNew)
            .expect("new file")
            .file
    }

    fn append(&mut self, file: FileId, tag: u64, ack: Ack) {
        let payload = Bytes::from(vec![tag as u8; 40]);
        let request = Request::append_with_ack(file, payload, tag, ack).expect("small");
        self.core.submit(request).expect("room");
    }

    /// Runs a turn and returns (and logs) what it answered.
    fn turn(&mut self) -> Vec<Completion> {
        let mut out = Vec::new();
        self.core.run_turn(&mut out);
        self.logged(out)
    }

    fn finish(&mut self, file: FileId, nth: usize, fail_sync: Option<i32>) -> Vec<Completion> {
        self.core.storage_mut().finish(file, nth, fail_sync);
        let mut out = Vec::new();
        self.core.poll_io(&mut out);
        self.logged(out)
    }

    fn logged(&self, out: Vec<Completion>) -> Vec<Completion> {
        let mut log = self.log.0.lock().expect("log");
        log.extend(out.iter().cloned().map(Seen::Ack));
        out
    }

    fn started_of(&self, file: FileId) -> Vec<(usize, bool)> {
        self.core.storage().started_of(file)
    }

    /// Every durable ack came after an fsync of its file covering its range,
    /// and each file's acks came in request (tag) order.
    fn check_log(&self) {
        let log = self.log.0.lock().expect("log");
        let mut durable = std::collections::BTreeMap::<FileId, u64>::new();
        let mut last_tag = std::collections::BTreeMap::<FileId, u64>::new();
        for seen in log.iter() {
            match seen {
                Seen::Synced { file, durable_end } => {
                    let known = durable.entry(*file).or_default();
                    *known = (*known).max(*durable_end);
                }
                Seen::Ack(completion) => {
                    let previous = last_tag.insert(completion.file, completion.user_data);
                    assert!(
                        previous.is_none_or(|previous| previous < completion.user_data),
                        "{completion:?} answered out of order"
                    );
                    let durable_kind = matches!(
                        completion.kind,
                        CompletionKind::Durable | CompletionKind::Synced
                    );
                    if let (true, Ok(range)) = (durable_kind, &completion.result) {
                        let covered = durable.get(&completion.file).copied().unwrap_or(0);
                        assert!(
                            range.end() <= covered,
                            "{completion:?} acked before an fsync covered it ({covered})"
                        );
                    }
                }
            }
        }
    }
}

fn tags(completions: &[Completion]) -> Vec<u64> {
    completions.iter().map(|c| c.user_data).collect()
}

#[test]
fn the_next_turn_writes_while_an_fsync_runs_and_acks_stay_in_order() {
    let mut h = Harness::new();
    let a = h.open("a");
    h.append(a, 1, Ack::Durable);
    assert!(h.turn().is_empty());
    assert_eq!(h.started_of(a), [(1, true)], "write + linked fsync");

    h.append(a, 2, Ack::Durable);
    h.append(a, 3, Ack::Written);
    h.append(a, 4, Ack::Durable);
    assert!(h.turn().is_empty());
    assert_eq!(
        h.started_of(a),
        [(1, true), (3, false)],
        "turn 2's writes start at once; its fsync waits for turn 1's"
    );

    // Turn 2's writes finish first: nothing may be answered yet (1 is ahead).
    assert!(h.finish(a, 1, None).is_empty());
    // Turn 1's fsync returns: 1 is durable; one fsync now covers 2..=4.
    assert_eq!(tags(&h.finish(a, 0, None)), [1]);
    assert_eq!(
        h.started_of(a),
        [(0, true)],
        "a bare fsync after the writes"
    );
    let rest = h.finish(a, 0, None);
    assert_eq!(tags(&rest), [2, 3, 4]);
    assert_eq!(rest[1].kind, CompletionKind::Written);
    assert_eq!(h.core.in_flight(), 0);
    h.check_log();

    let status = h.core.file_status(a).expect("open");
    assert_eq!(status.durable_end, status.written_end);
    assert_eq!(status.written_end, 4 * 48);
}

#[test]
fn a_sync_request_waits_for_the_writes_before_it_even_across_turns() {
    let mut h = Harness::new();
    let a = h.open("a");
    h.append(a, 1, Ack::Written);
    h.turn();
    assert_eq!(h.started_of(a), [(1, false)], "no fsync asked for");
    h.core
        .submit(Request::Sync {
            file: a,
            user_data: 2,
        })
        .expect("room");
    assert!(h.turn().is_empty(), "the write is still in flight");
    assert!(h.started_of(a).iter().all(|&(_, sync)| !sync));
    assert_eq!(
        tags(&h.finish(a, 0, None)),
        [1],
        "written, then a fsync is due"
    );
    assert_eq!(h.started_of(a), [(0, true)]);
    let synced = h.finish(a, 0, None);
    assert_eq!(tags(&synced), [2]);
    assert_eq!(synced[0].kind, CompletionKind::Synced);
    h.check_log();
}

#[test]
fn a_failed_fsync_in_a_pipelined_turn_poisons_the_file_and_fails_every_later_waiter() {
    let mut h = Harness::new();
    let a = h.open("a");
    let b = h.open("b");
    h.append(a, 1, Ack::Durable);
    h.turn();
    h.append(a, 2, Ack::Durable);
    h.append(a, 3, Ack::Written);
    h.append(a, 4, Ack::Durable);
    h.append(b, 10, Ack::Durable);
    h.turn();
    h.core
        .submit(Request::Close {
            file: a,
            user_data: 5,
        })
        .expect("room");
    assert!(h.turn().is_empty());
    assert_eq!(h.core.queued_requests(), 1, "the close waits for a's I/O");

    // Turn 2's writes and b's batch succeed; a's first fsync fails.
    assert!(h.finish(a, 1, None).is_empty());
    assert_eq!(tags(&h.finish(b, 0, None)), [10]);
    let failed = h.finish(a, 0, Some(libc::EIO));
    assert_eq!(tags(&failed), [1, 2, 3, 4], "every waiter of a is answered");
    for completion in &failed {
        match completion.user_data {
            3 => assert_eq!(
                completion.result.as_ref().map(|range| range.offset),
                Ok(48 * 2),
                "a written-only ack whose bytes were written still succeeds"
            ),
            _ => assert_eq!(
                completion.result,
                Err(WalError::SyncFailed {
                    file: a,
                    errno: libc::EIO
                }),
                "{completion:?}: turn 2 fails too, though its own bytes were written"
            ),
        }
    }
    assert!(h.started_of(a).is_empty(), "no fsync after the failure");

    h.append(a, 6, Ack::Durable);
    h.append(b, 11, Ack::Durable);
    let answered = h.turn();
    let closed = answered
        .iter()
        .find(|c| c.user_data == 5)
        .expect("the close ran once a was idle");
    assert_eq!(closed.kind, CompletionKind::Closed);
    let late = answered
        .iter()
        .find(|c| c.user_data == 6)
        .expect("answered");
    assert!(
        matches!(late.result, Err(WalError::UnknownFile { .. })),
        "{late:?}: submitted after the close"
    );
    assert_eq!(tags(&h.finish(b, 0, None)), [11], "b is unaffected");
    h.check_log();
}

#[test]
fn a_failed_write_fails_the_waiters_of_the_turns_in_flight_behind_it() {
    let mut h = Harness::new();
    let a = h.open("a");
    h.append(a, 1, Ack::Durable);
    h.turn();
    h.append(a, 2, Ack::Durable);
    h.turn();
    h.core
        .storage_mut()
        .inner
        .fail_next_write(Path::new("a"), libc::ENOSPC)
        .expect("exists");
    let failed = h.finish(a, 0, None);
    assert_eq!(tags(&failed), [1, 2]);
    assert!(
        failed
            .iter()
            .all(|c| c.result == Err(WalError::NoSpace { file: a }))
    );
    assert!(
        h.finish(a, 0, None).is_empty(),
        "turn 2's write lands unanswered"
    );
    h.append(a, 3, Ack::Durable);
    let poisoned = h.turn();
    assert!(matches!(poisoned[0].result, Err(WalError::Poisoned { .. })));
    assert_eq!(h.core.in_flight(), 0);
}

#[test]
fn a_file_keeps_at_most_the_bounded_number_of_write_batches_in_flight() {
    let mut h = Harness::new();
    let a = h.open("a");
    for tag in 0..(WRITE_BATCHES_IN_FLIGHT_MAX as u64 + 2) {
        h.append(a, tag, Ack::Durable);
        h.turn();
    }
    assert_eq!(h.started_of(a).len(), WRITE_BATCHES_IN_FLIGHT_MAX);
    assert_eq!(h.core.queued_requests(), 2, "the rest wait in order");
    let mut answered = Vec::new();
    while h.core.in_flight() > 0 || h.core.queued_requests() > 0 {
        answered.extend(h.finish(a, 0, None));
        answered.extend(h.turn());
    }
    assert_eq!(tags(&answered), (0..6).collect::<Vec<_>>());
    h.check_log();
}

#[test]
fn only_idle_durable_files_give_their_descriptors_back() {
    let mut h = Harness::new();
    h.core.set_descriptors_max(1);
    let a = h.open("a");
    let b = h.open("b");
    assert_eq!(
        h.core.descriptors_held(),
        1,
        "idle new files release theirs"
    );
    assert_eq!(h.core.storage().released, [a]);
    h.append(a, 1, Ack::Written);
    h.append(b, 2, Ack::Durable);
    assert!(h.turn().is_empty());
    // Both are in flight: the storage asserts neither is released now.
    assert_eq!(
        h.core.descriptors_held(),
        2,
        "the bound yields to files in use"
    );
    assert_eq!(tags(&h.finish(a, 0, None)), [1]);
    assert_eq!(tags(&h.finish(b, 0, None)), [2]);
    assert_eq!(
        h.core.descriptors_held(),
        1,
        "b is durable and idle and gives its descriptor back; a has unsynced bytes and keeps it"
    );
    assert_eq!(h.core.storage().released, [a, b]);
    h.core
        .submit(Request::Sync {
            file: a,
            user_data: 3,
        })
        .expect("room");
    assert!(h.turn().is_empty());
    assert_eq!(tags(&h.finish(a, 0, None)), [3]);
    assert_eq!(h.core.descriptors_held(), 1);
    assert_eq!(
        h.core.storage().released,
        [a, b],
        "a is the one in use last"
    );
    h.check_log();
}
