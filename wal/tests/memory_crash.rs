//! `WalCore` over the in-memory disk, single-threaded as the simulator runs it:
//! group commit, crashes (unsynced bytes lost, prefixes kept, torn tails found by
//! the scan), injected faults, and determinism.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use strand_prng::Prng;
use strand_wal::{
    Ack, Completion, CompletionKind, CrashMode, FileId, IoEvent, IoObserver, IoOp, MemoryStorage,
    OpenMode, PoisonCause, Request, Tail, WalCore, WalError, scan,
};

const QUEUE: usize = 1024;

fn core(seed: u64) -> WalCore<MemoryStorage> {
    WalCore::new(MemoryStorage::new(seed), QUEUE)
}

fn entry(tag: u64) -> Bytes {
    let len = 10 + (tag % 90) as usize;
    let mut bytes = tag.to_le_bytes().to_vec();
    bytes.resize(len, tag as u8);
    Bytes::from(bytes)
}

fn append(core: &mut WalCore<MemoryStorage>, file: FileId, tag: u64, ack: Ack) {
    let request = Request::append_with_ack(file, entry(tag), tag, ack).expect("small");
    core.submit(request).expect("room in the queue");
}

fn turn(core: &mut WalCore<MemoryStorage>) -> Vec<Completion> {
    let mut out = Vec::new();
    core.run_turn(&mut out);
    out
}

fn tags_in(bytes: &[u8]) -> Vec<u64> {
    scan(bytes)
        .frames
        .iter()
        .map(|span| u64::from_le_bytes(span.payload(bytes)[..8].try_into().expect("tag")))
        .collect()
}

#[derive(Default)]
struct SyncCounter(Mutex<BTreeMap<FileId, usize>>);

impl IoObserver for SyncCounter {
    fn on_event(&self, event: IoEvent) {
        if let IoEvent::Synced { file, .. } = event {
            *self.0.lock().expect("counter").entry(file).or_default() += 1;
        }
    }
}

#[test]
fn one_turn_is_one_fsync_per_dirty_file_and_every_durable_waiter_is_covered() {
    let mut core = core(1);
    let counter = Arc::new(SyncCounter::default());
    core.set_observer(counter.clone());
    let a = core
        .open(Path::new("a"), OpenMode::CreateNew)
        .expect("a")
        .file;
    let b = core
        .open(Path::new("b"), OpenMode::CreateNew)
        .expect("b")
        .file;
    let c = core
        .open(Path::new("c"), OpenMode::CreateNew)
        .expect("c")
        .file;
    for tag in 0..10 {
        append(&mut core, a, tag, Ack::Durable);
    }
    for tag in 10..15 {
        append(&mut core, b, tag, Ack::Durable);
    }
    append(&mut core, c, 15, Ack::Written);
    let out = turn(&mut core);
    assert_eq!(out.len(), 16);
    let durable = out
        .iter()
        .filter(|c| c.kind == CompletionKind::Durable)
        .count();
    assert_eq!(durable, 15);
    let syncs = counter.0.lock().expect("counter").clone();
    assert_eq!(
        syncs,
        BTreeMap::from([(a, 1), (b, 1)]),
        "c asked for no sync"
    );
    let status = core.file_status(c).expect("open");
    assert!(status.durable_end < status.written_end);
}

#[test]
fn a_crash_loses_unsynced_appends_and_keeps_durable_ones() {
    let mut core = core(2);
    let file = core
        .open(Path::new("log"), OpenMode::CreateNew)
        .expect("new")
        .file;
    for tag in 0..3 {
        append(&mut core, file, tag, Ack::Durable);
    }
    turn(&mut core);
    for tag in 3..5 {
        append(&mut core, file, tag, Ack::Written);
        turn(&mut core);
    }
    let mut storage = core.into_storage();
    storage.crash(CrashMode::LoseUnsynced);
    let mut core = WalCore::new(storage, QUEUE);
    let reopened = core
        .open(Path::new("log"), OpenMode::Append)
        .expect("recovers");
    assert_eq!(reopened.scan.tail, Tail::Clean);
    assert_eq!(tags_in(&reopened.contents), [0, 1, 2]);
}

#[test]
fn a_crash_keeps_a_prefix_of_unsynced_writes_and_recovery_sees_a_clean_prefix() {
    let mut seen_lengths = std::collections::BTreeSet::new();
    for seed in 0..40 {
        let mut core = core(seed);
        let file = core
            .open(Path::new("log"), OpenMode::CreateNew)
            .expect("new")
            .file;
        append(&mut core, file, 0, Ack::Durable);
        turn(&mut core);
        for tag in 1..5 {
            append(&mut core, file, tag, Ack::Written);
            turn(&mut core);
        }
        let mut storage = core.into_storage();
        storage.crash(CrashMode::KeepPrefix);
        let mut core = WalCore::new(storage, QUEUE);
        let reopened = core
            .open(Path::new("log"), OpenMode::Append)
            .expect("recovers");
        assert_eq!(reopened.scan.tail, Tail::Clean, "seed {seed}");
        let tags = tags_in(&reopened.contents);
        assert_eq!(
            tags,
            (0..tags.len() as u64).collect::<Vec<_>>(),
            "seed {seed}"
        );
        seen_lengths.insert(tags.len());
    }
    assert!(
        seen_lengths.len() > 2,
        "the seeds explore several prefixes: {seen_lengths:?}"
    );
}

#[test]
fn a_torn_write_is_reported_by_the_scan_and_cut_on_open() {
    let mut torn_seen = 0;
    for seed in 0..40 {
        let mut core = core(seed);
        let file = core
            .open(Path::new("log"), OpenMode::CreateNew)
            .expect("new")
            .file;
        append(&mut core, file, 0, Ack::Durable);
        turn(&mut core);
        for tag in 1..4 {
            append(&mut core, file, tag, Ack::Written);
        }
        turn(&mut core);
        let mut storage = core.into_storage();
        storage.crash(CrashMode::TornWrite);
        let image = storage.contents(Path::new("log")).expect("exists").to_vec();
        let report = scan(&image);
        assert!(!matches!(report.tail, Tail::Corrupt { .. }), "seed {seed}");
        if let Tail::Torn { torn_bytes } = report.tail {
            torn_seen += 1;
            assert_eq!(report.valid_len + torn_bytes, image.len() as u64);
        }
        let mut core = WalCore::new(storage, QUEUE);
        let reopened = core
            .open(Path::new("log"), OpenMode::Append)
            .expect("recovers");
        assert_eq!(reopened.scan, report);
        let tags = tags_in(&reopened.contents);
        assert!(
            [0, 1, 2, 3].starts_with(&tags) && !tags.is_empty(),
            "seed {seed}: {tags:?}"
        );
        assert!(
            tags.len() < 4,
            "seed {seed}: the one unsynced write was torn"
        );
        let again = core.storage().contents(Path::new("log")).expect("exists");
        assert_eq!(
            again.len() as u64,
            report.valid_len,
            "the torn tail was cut"
        );
    }
    assert!(
        torn_seen > 20,
        "most torn crashes leave bytes behind ({torn_seen})"
    );
}

/// The simulator's promise: whatever the crash, every entry acked durable is
/// recovered, in order, and recovery never finds a fault.
#[test]
fn every_durable_ack_survives_any_crash() {
    for seed in 0..200 {
        let mut rng = Prng::new(seed);
        let mut core = core(seed);
        let paths: Vec<PathBuf> = (0..3).map(|i| PathBuf::from(format!("p{i}"))).collect();
        let files: Vec<FileId> = paths
            .iter()
            .map(|path| core.open(path, OpenMode::CreateNew).expect("new").file)
            .collect();
        let mut written: BTreeMap<FileId, Vec<u64>> = BTreeMap::new();
        let mut acked: BTreeMap<FileId, usize> = BTreeMap::new();
        let mut tag = 0;
        for _ in 0..rng.up_to(12) {
            for _ in 0..rng.up_to(6) {
                let file = files[rng.below(3) as usize];
                let ack = if rng.below(2) == 0 {
                    Ack::Durable
                } else {
                    Ack::Written
                };
                append(&mut core, file, tag, ack);
                written.entry(file).or_default().push(tag);
                tag += 1;
            }
            for completion in turn(&mut core) {
                assert!(completion.result.is_ok(), "seed {seed}");
                if completion.kind == CompletionKind::Durable {
                    let position = written[&completion.file]
                        .iter()
                        .position(|&t| t == completion.user_data)
                        .expect("known tag");
                    let count = acked.entry(completion.file).or_default();
                    *count = (*count).max(position + 1);
                }
            }
        }
        let mut storage = core.into_storage();
        storage.crash(CrashMode::Random);
        let mut core = WalCore::new(storage, QUEUE);
        for (path, file) in paths.iter().zip(&files) {
            let reopened = core.open(path, OpenMode::Append).expect("never corrupt");
            let tags = tags_in(&reopened.contents);
            let all = written.get(file).cloned().unwrap_or_default();
            assert!(
                all.starts_with(&tags),
                "seed {seed}: recovered a prefix of what was written"
            );
            let durable = acked.get(file).copied().unwrap_or(0);
            assert!(
                tags.len() >= durable,
                "seed {seed}: lost an entry acked durable"
            );
        }
    }
}

#[test]
fn enospc_fails_that_batch_poisons_the_file_and_spares_the_others() {
    let mut core = core(3);
    let a = core
        .open(Path::new("a"), OpenMode::CreateNew)
        .expect("a")
        .file;
    let b = core
        .open(Path::new("b"), OpenMode::CreateNew)
        .expect("b")
        .file;
    append(&mut core, a, 0, Ack::Durable);
    turn(&mut core);
    core.storage_mut()
        .fail_next_write(Path::new("a"), libc::ENOSPC)
        .expect("exists");
    append(&mut core, a, 1, Ack::Durable);
    append(&mut core, a, 2, Ack::Written);
    append(&mut core, b, 3, Ack::Durable);
    let out = turn(&mut core);
    let results: BTreeMap<u64, _> = out
        .iter()
        .map(|c| (c.user_data, c.result.clone()))
        .collect();
    assert_eq!(results[&1], Err(WalError::NoSpace { file: a }));
    assert_eq!(results[&2], Err(WalError::NoSpace { file: a }));
    assert!(results[&3].is_ok());
    append(&mut core, a, 4, Ack::Durable);
    let poisoned = turn(&mut core).remove(0).result;
    let cause = PoisonCause {
        op: IoOp::Write,
        errno: libc::ENOSPC,
    };
    assert_eq!(poisoned, Err(WalError::Poisoned { file: a, cause }));
    // What the caller does: close, reopen (re-scan), carry on.
    core.submit(Request::Close {
        file: a,
        user_data: 9,
    })
    .expect("room");
    assert!(turn(&mut core)[0].result.is_ok());
    let reopened = core
        .open(Path::new("a"), OpenMode::Append)
        .expect("recovers");
    assert_eq!(tags_in(&reopened.contents), [0]);
    append(&mut core, reopened.file, 5, Ack::Durable);
    assert!(turn(&mut core)[0].result.is_ok());
}

#[test]
fn a_failed_fsync_fails_durable_waiters_keeps_written_acks_and_poisons() {
    let mut core = core(4);
    let a = core
        .open(Path::new("a"), OpenMode::CreateNew)
        .expect("a")
        .file;
    append(&mut core, a, 0, Ack::Durable);
    turn(&mut core);
    core.storage_mut()
        .fail_next_sync(Path::new("a"), libc::EIO)
        .expect("exists");
    append(&mut core, a, 1, Ack::Written);
    append(&mut core, a, 2, Ack::Durable);
    core.submit(Request::Sync {
        file: a,
        user_data: 3,
    })
    .expect("room");
    let out = turn(&mut core);
    assert_eq!(out[0].kind, CompletionKind::Written);
    assert!(out[0].result.is_ok());
    assert_eq!(
        out[1].result,
        Err(WalError::SyncFailed {
            file: a,
            errno: libc::EIO
        })
    );
    assert_eq!(
        out[2].result,
        Err(WalError::SyncFailed {
            file: a,
            errno: libc::EIO
        })
    );
    core.submit(Request::Truncate {
        file: a,
        len: 0,
        user_data: 4,
    })
    .expect("room");
    assert!(matches!(
        turn(&mut core)[0].result,
        Err(WalError::Poisoned { .. })
    ));
    // The page cache still shows the bytes; a crash shows they never made it.
    let mut storage = core.into_storage();
    assert_eq!(
        tags_in(storage.contents(Path::new("a")).expect("exists")),
        [0, 1, 2]
    );
    storage.crash(CrashMode::KeepPrefix);
    assert_eq!(
        tags_in(storage.contents(Path::new("a")).expect("exists")),
        [0]
    );
}

#[test]
fn a_flipped_bit_on_disk_is_refused_as_corruption_at_its_frame() {
    let mut core = core(5);
    let file = core
        .open(Path::new("log"), OpenMode::CreateNew)
        .expect("new")
        .file;
    for tag in 0..6 {
        append(&mut core, file, tag, Ack::Durable);
    }
    let ranges: Vec<_> = turn(&mut core)
        .into_iter()
        .map(|c| c.result.expect("ok"))
        .collect();
    core.submit(Request::Close { file, user_data: 0 })
        .expect("room");
    turn(&mut core);
    let mut storage = core.into_storage();
    storage
        .flip_bit(Path::new("log"), ranges[2].offset + 12, 3)
        .expect("exists");
    let mut core = WalCore::new(storage, QUEUE);
    let error = core
        .open(Path::new("log"), OpenMode::Append)
        .expect_err("corrupt");
    assert_eq!(
        error,
        WalError::Corrupt {
            path: PathBuf::from("log"),
            fault_offset: ranges[2].offset,
            next_valid_offset: ranges[3].offset,
        }
    );
    let untouched = core.storage().contents(Path::new("log")).expect("exists");
    assert_eq!(untouched.len() as u64, ranges[5].end(), "nothing was cut");
}

#[test]
fn an_outside_truncation_reads_as_a_torn_tail() {
    let mut core = core(6);
    let file = core
        .open(Path::new("log"), OpenMode::CreateNew)
        .expect("new")
        .file;
    for tag in 0..4 {
        append(&mut core, file, tag, Ack::Durable);
    }
    let ranges: Vec<_> = turn(&mut core)
        .into_iter()
        .map(|c| c.result.expect("ok"))
        .collect();
    core.submit(Request::Close { file, user_data: 0 })
        .expect("room");
    turn(&mut core);
    let mut storage = core.into_storage();
    storage
        .cut(Path::new("log"), ranges[3].offset + 5)
        .expect("exists");
    let mut core = WalCore::new(storage, QUEUE);
    let reopened = core
        .open(Path::new("log"), OpenMode::Append)
        .expect("torn is recoverable");
    assert_eq!(reopened.scan.tail, Tail::Torn { torn_bytes: 5 });
    assert_eq!(tags_in(&reopened.contents), [0, 1, 2]);
}

#[test]
fn shutdown_makes_written_only_appends_durable() {
    let mut core = core(7);
    let file = core
        .open(Path::new("log"), OpenMode::CreateNew)
        .expect("new")
        .file;
    append(&mut core, file, 0, Ack::Written);
    append(&mut core, file, 1, Ack::Written);
    let mut out = Vec::new();
    core.shutdown(&mut out).expect("clean");
    let mut storage = core.into_storage();
    storage.crash(CrashMode::LoseUnsynced);
    assert_eq!(
        tags_in(storage.contents(Path::new("log")).expect("exists")),
        [0, 1]
    );
}

#[test]
fn misuse_gets_typed_errors() {
    let mut core = core(8);
    let file = core
        .open(Path::new("log"), OpenMode::CreateNew)
        .expect("new")
        .file;
    assert!(matches!(
        core.open(Path::new("log"), OpenMode::Append),
        Err(WalError::AlreadyOpen { file: f, .. }) if f == file
    ));
    assert!(matches!(
        core.open(Path::new("missing"), OpenMode::Append),
        Err(WalError::Open {
            op: IoOp::Open,
            errno: libc::ENOENT,
            ..
        })
    ));
    let stranger = FileId(999);
    core.submit(Request::Sync {
        file: stranger,
        user_data: 1,
    })
    .expect("room");
    core.submit(Request::Truncate {
        file,
        len: 1,
        user_data: 2,
    })
    .expect("room");
    let out = turn(&mut core);
    assert_eq!(out[0].result, Err(WalError::UnknownFile { file: stranger }));
    assert_eq!(
        out[1].result,
        Err(WalError::TruncateBeyondEnd {
            file,
            len: 1,
            end: 0
        })
    );
    let big = Bytes::from(vec![0u8; strand_wal::FRAME_PAYLOAD_BYTES_MAX + 1]);
    assert!(matches!(
        Request::append(file, big, 0),
        Err(WalError::EntryTooLarge { .. })
    ));
}

#[test]
fn the_queue_bound_is_enforced() {
    let mut core = WalCore::new(MemoryStorage::new(9), 2);
    let file = core
        .open(Path::new("log"), OpenMode::CreateNew)
        .expect("new")
        .file;
    for tag in 0..2 {
        core.submit(Request::append(file, entry(tag), tag).expect("small"))
            .expect("room");
    }
    let refused = core.submit(Request::append(file, entry(2), 2).expect("small"));
    assert!(matches!(refused, Err(strand_wal::TrySubmitError::Full(_))));
    assert_eq!(turn(&mut core).len(), 2);
    assert_eq!(core.queued_requests(), 0);
}

#[test]
fn the_same_seed_gives_the_same_completions_and_bytes() {
    let run = |seed: u64| {
        let mut core = core(seed);
        let file = core
            .open(Path::new("log"), OpenMode::CreateNew)
            .expect("new")
            .file;
        let mut all = Vec::new();
        for tag in 0..20 {
            let ack = if tag % 3 == 0 {
                Ack::Written
            } else {
                Ack::Durable
            };
            append(&mut core, file, tag, ack);
            if tag % 4 == 3 {
                all.extend(turn(&mut core));
            }
        }
        let mut storage = core.into_storage();
        storage.crash(CrashMode::Random);
        let bytes = storage.contents(Path::new("log")).expect("exists").to_vec();
        (all, bytes)
    };
    for seed in 0..10 {
        assert_eq!(run(seed), run(seed));
    }
}

#[test]
fn a_file_past_the_per_turn_byte_cap_continues_next_turn_in_order() {
    let mut core = core(10);
    core.set_sync_bytes_max(250);
    let counter = Arc::new(SyncCounter::default());
    core.set_observer(counter.clone());
    let a = core
        .open(Path::new("a"), OpenMode::CreateNew)
        .expect("a")
        .file;
    let b = core
        .open(Path::new("b"), OpenMode::CreateNew)
        .expect("b")
        .file;
    let frame_of_100 = |tag: u64| {
        let mut bytes = tag.to_le_bytes().to_vec();
        bytes.resize(92, 0);
        Bytes::from(bytes)
    };
    for tag in 0..5 {
        core.submit(Request::append(a, frame_of_100(tag), tag).expect("small"))
            .expect("room");
    }
    core.submit(Request::Sync {
        file: a,
        user_data: 50,
    })
    .expect("room");
    core.submit(Request::append(b, frame_of_100(9), 9).expect("small"))
        .expect("room");
    let first: Vec<u64> = turn(&mut core).iter().map(|c| c.user_data).collect();
    assert_eq!(first, [0, 1, 9], "a stops at the cap; b is unaffected");
    assert_eq!(core.queued_requests(), 4);
    let second: Vec<u64> = turn(&mut core).iter().map(|c| c.user_data).collect();
    assert_eq!(second, [2, 3]);
    let third: Vec<u64> = turn(&mut core).iter().map(|c| c.user_data).collect();
    assert_eq!(
        third,
        [4, 50],
        "the sync stays behind the appends it follows"
    );
    assert_eq!(
        counter.0.lock().expect("counter")[&a],
        3,
        "one fsync per capped turn"
    );
    let contents = core.storage().contents(Path::new("a")).expect("exists");
    assert_eq!(tags_in(contents), [0, 1, 2, 3, 4]);
}

#[test]
fn small_fsyncs_earn_zero_filled_room_that_close_cuts_and_recovery_cuts_after_a_crash() {
    use strand_wal::preallocate::{FILL_BYTES, SMALL_SYNCS_BEFORE_FILL};
    let mut core = core(11);
    let paths = [Path::new("closed"), Path::new("crashed")];
    let files: Vec<FileId> = paths
        .iter()
        .map(|path| core.open(path, OpenMode::CreateNew).expect("new").file)
        .collect();
    let appends = u64::from(SMALL_SYNCS_BEFORE_FILL) + 4;
    for tag in 0..appends {
        for &file in &files {
            append(&mut core, file, tag, Ack::Durable);
        }
        let out = turn(&mut core);
        assert!(out.iter().all(|c| c.result.is_ok()), "{out:?}");
    }
    for (&file, path) in files.iter().zip(paths) {
        let data_end = core.file_status(file).expect("open").durable_end;
        let bytes = core.storage().contents(path).expect("exists");
        assert!(
            bytes.len() as u64 >= data_end + FILL_BYTES / 2,
            "room ahead of the appends: {} bytes for {data_end} of frames",
            bytes.len()
        );
        assert!(bytes[data_end as usize..].iter().all(|&b| b == 0));
        assert_eq!(tags_in(bytes), (0..appends).collect::<Vec<_>>());
    }
    core.submit(Request::Close {
        file: files[0],
        user_data: 0,
    })
    .expect("room");
    let closed = turn(&mut core);
    let range = closed[0].result.clone().expect("closed");
    let bytes = core.storage().durable_contents(paths[0]).expect("exists");
    assert_eq!(
        bytes.len() as u64,
        range.len,
        "close cut the room off, durably"
    );
    assert!(scan(bytes).is_clean());

    // A process crash: the kernel keeps every written byte, zeros included.
    let mut storage = core.into_storage();
    storage.crash(CrashMode::ProcessCrash);
    let mut core = WalCore::new(storage, QUEUE);
    let reopened = core.open(paths[1], OpenMode::Append).expect("recovers");
    assert!(
        matches!(reopened.scan.tail, Tail::Torn { .. }),
        "zeros past the frames"
    );
    assert_eq!(
        tags_in(&reopened.contents),
        (0..appends).collect::<Vec<_>>()
    );
    let on_disk = core.storage().contents(paths[1]).expect("exists");
    assert_eq!(on_disk.len() as u64, reopened.len, "the zeros were cut");
    append(&mut core, reopened.file, 99, Ack::Durable);
    turn(&mut core);
    let on_disk = core.storage().contents(paths[1]).expect("exists");
    assert_eq!(
        tags_in(on_disk).last(),
        Some(&99),
        "appends follow the frames"
    );
}

#[test]
fn large_fsyncs_never_get_zero_filled_room() {
    use strand_wal::preallocate::{SMALL_SYNC_BYTES_BELOW, SMALL_SYNCS_BEFORE_FILL};
    let mut core = core(12);
    let path = Path::new("big");
    let file = core.open(path, OpenMode::CreateNew).expect("new").file;
    let payload = Bytes::from(vec![7u8; SMALL_SYNC_BYTES_BELOW as usize]);
    for tag in 0..u64::from(SMALL_SYNCS_BEFORE_FILL) * 2 {
        let request = Request::append(file, payload.clone(), tag).expect("fits");
        core.submit(request).expect("room");
        turn(&mut core);
    }
    let data_end = core.file_status(file).expect("open").durable_end;
    let bytes = core.storage().contents(path).expect("exists");
    assert_eq!(bytes.len() as u64, data_end, "no zeros written");
}

/// Every write and sync event, in order.
#[derive(Default)]
struct EventLog(Mutex<Vec<IoEvent>>);

impl IoObserver for EventLog {
    fn on_event(&self, event: IoEvent) {
        self.0.lock().expect("log").push(event);
    }
}

fn open_files(core: &mut WalCore<MemoryStorage>, count: usize) -> Vec<FileId> {
    (0..count)
        .map(|index| {
            let path = PathBuf::from(format!("f{index}"));
            core.open(&path, OpenMode::CreateNew).expect("new").file
        })
        .collect()
}

#[test]
fn many_files_wanting_a_sync_in_one_turn_share_one_sync_after_all_their_writes() {
    let files_count = strand_wal::engine::SHARED_SYNC_FILES_MIN + 2;
    let mut core = core(11);
    let log = Arc::new(EventLog::default());
    core.set_observer(log.clone());
    let files = open_files(&mut core, files_count);
    for (index, &file) in files.iter().enumerate() {
        append(&mut core, file, index as u64, Ack::Durable);
    }
    let out = turn(&mut core);
    assert_eq!(out.len(), files_count);
    assert!(
        out.iter()
            .all(|c| c.kind == CompletionKind::Durable && c.result.is_ok())
    );
    // Linked syncs would interleave (write a, sync a, write b, ...): a shared
    // sync comes after every write of the turn.
    let events = log.0.lock().expect("log").clone();
    let first_sync = events
        .iter()
        .position(|event| matches!(event, IoEvent::Synced { .. }))
        .expect("synced");
    assert_eq!(
        first_sync, files_count,
        "every write precedes the shared sync"
    );
    assert!(
        events[first_sync..]
            .iter()
            .all(|event| matches!(event, IoEvent::Synced { .. }))
    );
    let mut storage = core.into_storage();
    storage.crash(CrashMode::KeepPrefix);
    for index in 0..files_count {
        let path = PathBuf::from(format!("f{index}"));
        assert_eq!(
            tags_in(storage.contents(&path).expect("exists")),
            [index as u64]
        );
    }
}

#[test]
fn a_few_files_wanting_a_sync_keep_their_own_linked_fsyncs() {
    let files_count = strand_wal::engine::SHARED_SYNC_FILES_MIN - 1;
    let mut core = core(12);
    let log = Arc::new(EventLog::default());
    core.set_observer(log.clone());
    let files = open_files(&mut core, files_count);
    for (index, &file) in files.iter().enumerate() {
        append(&mut core, file, index as u64, Ack::Durable);
    }
    assert!(turn(&mut core).iter().all(|c| c.result.is_ok()));
    let events = log.0.lock().expect("log").clone();
    assert!(
        matches!(events[1], IoEvent::Synced { .. }),
        "the first file's fsync follows its own write: {events:?}"
    );
}

#[test]
fn a_failed_sync_in_a_shared_sync_poisons_only_its_file() {
    let files_count = strand_wal::engine::SHARED_SYNC_FILES_MIN + 1;
    let mut core = core(13);
    let files = open_files(&mut core, files_count);
    core.storage_mut()
        .fail_next_sync(Path::new("f1"), libc::EIO)
        .expect("exists");
    for (index, &file) in files.iter().enumerate() {
        append(&mut core, file, index as u64, Ack::Durable);
    }
    let out = turn(&mut core);
    for completion in &out {
        if completion.user_data == 1 {
            assert_eq!(
                completion.result,
                Err(WalError::SyncFailed {
                    file: files[1],
                    errno: libc::EIO
                })
            );
        } else {
            assert!(completion.result.is_ok(), "{completion:?}");
        }
    }
    assert!(core.file_status(files[1]).expect("open").poisoned.is_some());
    assert!(core.file_status(files[0]).expect("open").poisoned.is_none());
}

#[test]
fn files_synced_by_shared_syncs_earn_no_zero_filled_room() {
    let files_count = strand_wal::engine::SHARED_SYNC_FILES_MIN + 2;
    let mut core = core(14);
    let files = open_files(&mut core, files_count);
    for round in 0..8u64 {
        for (index, &file) in files.iter().enumerate() {
            append(&mut core, file, round * 100 + index as u64, Ack::Durable);
        }
        assert!(turn(&mut core).iter().all(|c| c.result.is_ok()));
    }
    for (index, &file) in files.iter().enumerate() {
        let status = core.file_status(file).expect("open");
        let path = PathBuf::from(format!("f{index}"));
        let bytes = core.storage().contents(&path).expect("exists");
        assert_eq!(
            bytes.len() as u64,
            status.written_end,
            "no zeros past the frames of {path:?}"
        );
    }
}

#[test]
fn a_read_fault_strikes_once_and_changes_no_byte() {
    use strand_wal::Storage;
    let mut storage = MemoryStorage::new(9);
    let file = FileId(1);
    storage
        .open(file, Path::new("a"), OpenMode::CreateNew)
        .expect("new file");
    storage.write_at(file, 0, &[b"bytes"]).expect("write");
    storage
        .fail_next_read(Path::new("a"), libc::EIO)
        .expect("exists");
    assert!(storage.has_armed_faults());
    let error = storage.read_all(file).expect_err("the read fails");
    assert_eq!(error.raw_os_error(), Some(libc::EIO));
    assert_eq!(storage.read_all(file).expect("once"), b"bytes");
    storage
        .fail_next_read(Path::new("a"), libc::EIO)
        .expect("exists");
    assert!(storage.take_read_fault(Path::new("a")).is_err());
    assert!(storage.take_read_fault(Path::new("a")).is_ok());
    storage
        .fail_next_read(Path::new("a"), libc::EIO)
        .expect("exists");
    assert!(
        storage.disarm_read_fault(Path::new("a")),
        "it had not struck"
    );
    storage
        .fail_next_sync(Path::new("a"), libc::EIO)
        .expect("exists");
    storage.clear_faults();
    assert!(!storage.has_armed_faults());
    assert_eq!(storage.faults_struck(), 2);
}
