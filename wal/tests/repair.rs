//! Repairing a damaged file through the writer: opening it with the damage
//! reported ([`OpenMode::AppendDamaged`]), rewriting the damaged frame in place
//! ([`Request::WriteAt`]) with a durable ack, and framing a header and a body
//! without copying the body ([`Frame::from_parts`]).

use std::path::Path;

use bytes::Bytes;
use strand_wal::{
    Ack, Completion, CompletionKind, CrashMode, FileId, FileRange, Frame, MemoryStorage, OpenMode,
    Request, Tail, WalCore, WalError, scan,
};

fn core_over(storage: MemoryStorage) -> WalCore<MemoryStorage> {
    WalCore::new(storage, 256)
}

fn turn(core: &mut WalCore<MemoryStorage>) -> Vec<Completion> {
    let mut out = Vec::new();
    core.run_turn(&mut out);
    out
}

fn payload(tag: u8) -> Bytes {
    Bytes::from(vec![tag; 30])
}

/// A durable file of three 38-byte frames, then a bit flipped in the second.
fn damaged_log() -> (MemoryStorage, Vec<FileRange>) {
    let mut core = core_over(MemoryStorage::new(3));
    let file = core
        .open(Path::new("log"), OpenMode::CreateNew)
        .expect("new")
        .file;
    for tag in 1..=3 {
        core.submit(Request::append(file, payload(tag), u64::from(tag)).expect("small"))
            .expect("room");
    }
    let ranges: Vec<FileRange> = turn(&mut core)
        .into_iter()
        .map(|c| c.result.expect("durable"))
        .collect();
    let mut storage = core.into_storage();
    storage.crash(CrashMode::LoseUnsynced);
    storage
        .flip_bit(Path::new("log"), ranges[1].offset + 12, 3)
        .expect("exists");
    (storage, ranges)
}

fn write_at(file: FileId, offset: u64, tag: u8, user_data: u64) -> Request {
    Request::write_at(file, offset, payload(tag), user_data, Ack::Durable).expect("small")
}

#[test]
fn a_damaged_file_opens_for_repair_with_the_fault_reported_and_nothing_cut() {
    let (storage, ranges) = damaged_log();
    let total = ranges[2].end();
    let mut core = core_over(storage);
    assert!(matches!(
        core.open(Path::new("log"), OpenMode::Append),
        Err(WalError::Corrupt { fault_offset, next_valid_offset, .. })
            if fault_offset == ranges[1].offset && next_valid_offset == ranges[2].offset
    ));
    let opened = core
        .open(Path::new("log"), OpenMode::AppendDamaged)
        .expect("opens for repair");
    assert_eq!(
        opened.scan.tail,
        Tail::Corrupt {
            fault_offset: ranges[1].offset,
            next_valid_offset: ranges[2].offset,
        }
    );
    assert_eq!(opened.len, total, "appends go after every byte");
    assert_eq!(
        opened.contents.len() as u64,
        total,
        "the caller sees it all"
    );
    let on_disk = core.storage().contents(Path::new("log")).expect("exists");
    assert_eq!(on_disk.len() as u64, total, "nothing was cut");
}

#[test]
fn an_in_place_rewrite_is_durable_when_acked_and_heals_the_file() {
    let (storage, ranges) = damaged_log();
    let mut core = core_over(storage);
    let file = core
        .open(Path::new("log"), OpenMode::AppendDamaged)
        .expect("opens for repair")
        .file;
    core.submit(write_at(file, ranges[1].offset, 2, 20))
        .expect("room");
    core.submit(Request::append(file, payload(4), 40).expect("small"))
        .expect("room");
    let first = turn(&mut core);
    assert_eq!(first.len(), 1, "the append waits for the rewrite's turn");
    assert_eq!(first[0].kind, CompletionKind::Durable);
    assert_eq!(first[0].result, Ok(ranges[1]), "the frame's range");
    let second = turn(&mut core);
    assert_eq!(second[0].user_data, 40);
    let status = core.file_status(file).expect("open");
    assert_eq!(status.durable_end, ranges[2].end() + 38);

    let mut storage = core.into_storage();
    storage.crash(CrashMode::LoseUnsynced);
    let bytes = storage.contents(Path::new("log")).expect("exists");
    let report = scan(bytes);
    assert_eq!(report.tail, Tail::Clean, "the acked rewrite survived");
    let tags: Vec<u8> = report.frames.iter().map(|f| f.payload(bytes)[0]).collect();
    assert_eq!(tags, [1, 2, 3, 4]);
}

#[test]
fn an_in_place_write_past_the_end_is_refused_without_poisoning() {
    let mut core = core_over(MemoryStorage::new(1));
    let file = core
        .open(Path::new("log"), OpenMode::CreateNew)
        .expect("new")
        .file;
    core.submit(Request::append(file, payload(1), 1).expect("small"))
        .expect("room");
    turn(&mut core);
    core.submit(write_at(file, 20, 9, 2)).expect("room");
    let refused = turn(&mut core);
    assert_eq!(
        refused[0].result,
        Err(WalError::WriteBeyondEnd {
            file,
            offset: 20,
            len: 38,
            end: 38
        })
    );
    core.submit(write_at(file, 0, 7, 3)).expect("room");
    let rewritten = turn(&mut core);
    assert_eq!(rewritten[0].result, Ok(FileRange { offset: 0, len: 38 }));
    let bytes = core.storage().contents(Path::new("log")).expect("exists");
    assert_eq!(scan(bytes).frames[0].payload(bytes), &payload(7)[..]);
}

#[test]
fn a_two_part_frame_reads_back_as_one_payload() {
    let mut core = core_over(MemoryStorage::new(2));
    let file = core
        .open(Path::new("log"), OpenMode::CreateNew)
        .expect("new")
        .file;
    let header = [0xabu8; 256];
    let body = Bytes::from_static(b"a prepare's body, framed without a copy");
    let frame = Frame::from_parts(&header, body.clone()).expect("small");
    core.submit(Request::append_frame(file, frame, 1, Ack::Durable))
        .expect("room");
    let acked = turn(&mut core);
    let range = acked[0].result.clone().expect("durable");
    assert_eq!(range.len, 8 + 256 + body.len() as u64);
    let mut storage = core.into_storage();
    storage.crash(CrashMode::LoseUnsynced);
    let bytes = storage.contents(Path::new("log")).expect("exists");
    let report = scan(bytes);
    assert!(report.is_clean());
    let read = report.frames[0].payload(bytes);
    assert_eq!(&read[..256], &header[..]);
    assert_eq!(&read[256..], &body[..]);
}

#[test]
fn open_for_repair_still_cuts_a_torn_tail_when_nothing_valid_follows() {
    let mut storage = MemoryStorage::new(4);
    let mut core = core_over(storage.clone());
    let file = core
        .open(Path::new("log"), OpenMode::CreateNew)
        .expect("new")
        .file;
    core.submit(Request::append(file, payload(1), 1).expect("small"))
        .expect("room");
    turn(&mut core);
    storage = core.into_storage();
    storage.crash(CrashMode::KeepAll);
    storage.cut(Path::new("log"), 20).expect("exists");
    let mut core = core_over(storage);
    let opened = core
        .open(Path::new("log"), OpenMode::AppendDamaged)
        .expect("opens");
    assert_eq!(opened.scan.tail, Tail::Torn { torn_bytes: 20 });
    assert_eq!(opened.len, 0);
    assert_eq!(core.storage().contents(Path::new("log")), Some(&[][..]));
}
