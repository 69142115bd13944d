//! The WAL on real files in temp dirs, run against io_uring and the std fallback.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;

use bytes::Bytes;
use common::{Backend, Collector, append_all, backend_kind, payload, start, start_with};
use strand_wal::{
    Ack, Completion, CompletionKind, IoEvent, IoObserver, OpenMode, Tail, WalConfig, WalError, scan,
};

for_each_backend!(
    append_then_recover_round_trips,
    truncating_the_last_entry_at_every_byte_recovers_the_prefix,
    a_flipped_byte_in_the_middle_is_reported_at_its_position_and_nothing_is_cut,
    concurrent_appenders_to_many_files_each_land_exactly_once_in_order,
    a_durable_ack_never_precedes_the_fsync_that_covers_it,
    written_acks_sync_and_close_make_bytes_durable,
    superblock_style_replace_via_temp_file_and_rename,
    truncate_request_cuts_and_later_appends_follow,
    a_damaged_frame_is_rewritten_in_place_through_the_writer,
    small_fsyncs_get_zero_filled_room_that_close_and_rename_cut_off,
    many_files_share_a_small_descriptor_budget,
    a_released_file_whose_path_now_names_another_file_fails_instead_of_writing_into_it,
);

/// Whether files under `dir` can be opened `O_DIRECT` (tmpfs before Linux
/// 6.6 cannot: the WAL then writes through the page cache).
fn direct_io_works(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let probe = dir.join("direct-probe");
    let opened = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe);
    let _ = std::fs::remove_file(&probe);
    opened.is_ok()
}

/// Direct appends (`O_DIRECT`) pad the file to whole blocks while it is open;
/// a close cuts the padding off, a reopened file appends after its frames,
/// and an in-place write takes the file back through the page cache.
#[test]
fn direct_appends_pad_to_blocks_and_close_cuts_the_padding() {
    let Some(wal) = start(Backend::UringDirect) else {
        return;
    };
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let path = dir.path().join("direct.log");
    let collector = Collector::new();
    let opened = wal
        .open(&path, OpenMode::CreateNew, collector.sink.clone())
        .expect("new file");
    let first: Vec<Bytes> = (0..20).map(|sequence| payload(3, sequence)).collect();
    let end = append_all(&wal, &collector, opened.file, &first)
        .last()
        .expect("acks")
        .end();
    if !direct_io_works(dir.path()) {
        eprintln!(
            "no O_DIRECT under {}: nothing checked",
            dir.path().display()
        );
        return;
    }
    let physical = std::fs::metadata(&path).expect("exists").len();
    assert_eq!(physical % 4096, 0, "whole blocks while open");
    assert!(physical > end);
    wal.close(opened.file, 0).expect("queued");
    assert_eq!(collector.recv().kind, CompletionKind::Closed);
    assert_eq!(
        std::fs::metadata(&path).expect("exists").len(),
        end,
        "cut at close"
    );

    let reopened = wal
        .open(&path, OpenMode::Append, collector.sink.clone())
        .expect("reopened");
    assert_eq!(reopened.len, end);
    let second: Vec<Bytes> = (20..45).map(|sequence| payload(3, sequence)).collect();
    let ranges = append_all(&wal, &collector, reopened.file, &second);
    // A cut, as a view change makes: the file stays direct behind it.
    wal.truncate(reopened.file, ranges[19].end(), 7)
        .expect("queued");
    assert_eq!(collector.recv().kind, CompletionKind::Truncated);
    let second = &second[..20];
    // In place: the first frame again, same bytes, through the page cache.
    wal.write_at(reopened.file, 0, first[0].clone(), 99, Ack::Durable)
        .expect("queued");
    let written = collector.recv();
    assert_eq!(written.user_data, 99);
    written.result.expect("an in-place write to a direct file");
    let third: Vec<Bytes> = (45..50).map(|sequence| payload(3, sequence)).collect();
    append_all(&wal, &collector, reopened.file, &third);
    wal.close(reopened.file, 0).expect("queued");
    assert_eq!(collector.recv().kind, CompletionKind::Closed);

    let bytes = std::fs::read(&path).expect("read back");
    let payloads = exactly_the_frames(&bytes);
    let expected: Vec<&[u8]> = first
        .iter()
        .chain(second)
        .chain(&third)
        .map(|p| &p[..])
        .collect();
    assert_eq!(payloads, expected);
}

/// A direct file that has grown past 64 KiB gets room allocated ahead (the
/// file is longer than its padded frames while open), the room is written
/// with zeros beside the next append (so that appends overwrite written
/// blocks), and a close cuts the room off: the file holds exactly its frames.
#[test]
fn direct_appends_write_into_room_allocated_ahead() {
    let Some(wal) = start(Backend::UringDirect) else {
        return;
    };
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    if !direct_io_works(dir.path()) {
        eprintln!(
            "no O_DIRECT under {}: nothing checked",
            dir.path().display()
        );
        return;
    }
    let path = dir.path().join("roomy.log");
    let collector = Collector::new();
    let file = wal
        .open(&path, OpenMode::CreateNew, collector.sink.clone())
        .expect("new file")
        .file;
    let payloads: Vec<Bytes> = (0..400).map(|sequence| payload(5, sequence)).collect();
    let mut end = 0;
    let mut most_room = 0;
    let mut most_zeroed: Option<u64> = None;
    // Waves of written acks: batches without an fsync, each starting in the
    // block the one before ended in.
    for (wave, chunk) in payloads.chunks(7).enumerate() {
        for (index, payload) in chunk.iter().enumerate() {
            let tag = (wave * 7 + index) as u64;
            wal.append_with_ack(file, payload.clone(), tag, Ack::Written)
                .expect("queued");
        }
        for completion in collector.recv_n(chunk.len()) {
            assert_eq!(completion.kind, CompletionKind::Written);
            end = end.max(completion.result.expect("written").end());
        }
        let physical = std::fs::metadata(&path).expect("exists").len();
        assert!(physical >= end, "the file holds its frames");
        most_room = most_room.max(physical - end);
        let padded_end = end.next_multiple_of(4096);
        if let Some(zeroed) = written_bytes_from(&path, padded_end) {
            most_zeroed = Some(most_zeroed.unwrap_or(0).max(zeroed));
        }
    }
    // Durable appends: each batch carries its fsync, room is zeroed beside it.
    let durable: Vec<Bytes> = (400..1000).map(|sequence| payload(5, sequence)).collect();
    for chunk in durable.chunks(4) {
        let ranges = append_all(&wal, &collector, file, chunk);
        end = end.max(ranges.last().expect("acks").end());
    }
    assert!(end > 128 << 10, "grew well past the room threshold: {end}");
    assert!(
        most_room > 4096,
        "room allocated ahead, beyond the last block's padding: {most_room}"
    );
    match most_zeroed {
        Some(zeroed) => assert!(
            zeroed >= 32 << 10,
            "room written with zeros ahead of the appends: {zeroed} bytes at most"
        ),
        None => eprintln!("no FIEMAP under {}: room not checked", dir.path().display()),
    }
    wal.sync(file, 1000).expect("queued");
    assert_eq!(collector.recv().kind, CompletionKind::Synced);
    wal.close(file, 0).expect("queued");
    assert_eq!(collector.recv().kind, CompletionKind::Closed);
    let bytes = std::fs::read(&path).expect("read back");
    assert_eq!(bytes.len() as u64, end, "room cut at close");
    let expected: Vec<&[u8]> = payloads.iter().chain(&durable).map(|p| &p[..]).collect();
    assert_eq!(exactly_the_frames(&bytes), expected);
}

/// Bytes of `path` from `offset` on that the file system holds as written
/// blocks (not allocated-and-unwritten ones), by `FS_IOC_FIEMAP`; `None`
/// where the file system cannot say.
#[allow(unsafe_code)]
fn written_bytes_from(path: &Path, offset: u64) -> Option<u64> {
    use std::os::fd::AsRawFd;
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    const FIEMAP_FLAG_SYNC: u32 = 0x1;
    const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
    const EXTENTS_MAX: usize = 64;
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Extent {
        logical: u64,
        physical: u64,
        length: u64,
        reserved64: [u64; 2],
        flags: u32,
        reserved: [u32; 3],
    }
    #[repr(C)]
    struct Map {
        start: u64,
        length: u64,
        flags: u32,
        mapped_extents: u32,
        extent_count: u32,
        reserved: u32,
        extents: [Extent; EXTENTS_MAX],
    }
    let file = std::fs::File::open(path).ok()?;
    let mut map = Map {
        start: offset,
        length: u64::MAX - offset,
        flags: FIEMAP_FLAG_SYNC,
        mapped_extents: 0,
        extent_count: EXTENTS_MAX as u32,
        reserved: 0,
        extents: [Extent::default(); EXTENTS_MAX],
    };
    // SAFETY: FS_IOC_FIEMAP reads the header of `map` and writes at most
    // `extent_count` extents into its array, all inside `map`, which lives
    // across the call; the descriptor is open.
    let result = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, &mut map) };
    if result != 0 {
        return None;
    }
    let mapped = (map.mapped_extents as usize).min(EXTENTS_MAX);
    let written = map.extents[..mapped]
        .iter()
        .filter(|extent| extent.flags & FIEMAP_EXTENT_UNWRITTEN == 0)
        .map(|extent| {
            let end = extent.logical + extent.length;
            end.saturating_sub(extent.logical.max(offset))
        })
        .sum();
    Some(written)
}

/// The payloads of a file's frames, checking that it holds exactly frames
/// (nothing torn or padded after them).
fn exactly_the_frames(bytes: &[u8]) -> Vec<&[u8]> {
    let report = scan(bytes);
    assert!(report.is_clean(), "exactly the frames: {:?}", report.tail);
    report
        .frames
        .iter()
        .map(|frame| {
            let start = frame.offset as usize + strand_wal::FRAME_HEADER_BYTES;
            &bytes[start..start + frame.payload_len as usize]
        })
        .collect()
}

/// Descriptors this process holds on files under `dir`.
fn descriptors_under(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    entries
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

fn many_files_share_a_small_descriptor_budget(backend: Backend) {
    const BUDGET: usize = 4;
    const FILES: u64 = 24;
    const ROUNDS: u64 = 5;
    let config = WalConfig {
        descriptors_max: BUDGET,
        ..common::config(backend)
    };
    let Some(wal) = start_with(config) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let collector = Collector::new();
    let path = |index: u64| dir.path().join(format!("f{index}.log"));
    let files: Vec<_> = (0..FILES)
        .map(|index| {
            wal.open(path(index), OpenMode::CreateNew, collector.sink.clone())
                .expect("new file")
                .file
        })
        .collect();
    let held = descriptors_under(dir.path());
    assert!(held <= BUDGET, "{held} descriptors held after the opens");
    for round in 0..ROUNDS {
        for (index, &file) in files.iter().enumerate() {
            append_all(&wal, &collector, file, &[payload(index as u64, round)]);
            assert!(
                descriptors_under(dir.path()) <= BUDGET,
                "idle durable files give their descriptors back"
            );
        }
    }
    for &file in &files {
        wal.close(file, 0).expect("queued");
        assert_eq!(collector.recv().kind, CompletionKind::Closed);
    }
    wal.shutdown().expect("clean shutdown");
    for index in 0..FILES {
        let bytes = std::fs::read(path(index)).expect("readable");
        let report = scan(&bytes);
        assert!(report.is_clean());
        let payloads: Vec<&[u8]> = report.frames.iter().map(|f| f.payload(&bytes)).collect();
        let expected: Vec<Bytes> = (0..ROUNDS).map(|round| payload(index, round)).collect();
        let expected: Vec<&[u8]> = expected.iter().map(|p| &p[..]).collect();
        assert_eq!(payloads, expected, "file {index}: every append, in order");
    }
}

fn a_released_file_whose_path_now_names_another_file_fails_instead_of_writing_into_it(
    backend: Backend,
) {
    let config = WalConfig {
        descriptors_max: 1,
        ..common::config(backend)
    };
    let Some(wal) = start_with(config) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let collector = Collector::new();
    let (first, second) = (dir.path().join("first.log"), dir.path().join("second.log"));
    let first_file = wal
        .open(&first, OpenMode::CreateNew, collector.sink.clone())
        .expect("new file")
        .file;
    append_all(&wal, &collector, first_file, &[payload(1, 0)]);
    let second_file = wal
        .open(&second, OpenMode::CreateNew, collector.sink.clone())
        .expect("new file")
        .file;
    append_all(&wal, &collector, second_file, &[payload(2, 0)]);
    // `first` gave its descriptor back; its path now names another file.
    std::fs::rename(&first, dir.path().join("moved.log")).expect("move");
    std::fs::write(&first, b"someone else's file").expect("replace");
    wal.append(first_file, payload(1, 1), 5).expect("queued");
    let answer = collector.recv();
    assert_eq!(answer.user_data, 5);
    assert!(answer.result.is_err(), "the append fails: {answer:?}");
    assert_eq!(
        std::fs::read(&first).expect("readable"),
        b"someone else's file"
    );
    let moved = std::fs::read(dir.path().join("moved.log")).expect("readable");
    assert_eq!(scan(&moved).frames.len(), 1, "the moved file is untouched");
    wal.shutdown().expect("shutdown");
}

fn append_then_recover_round_trips(backend: Backend) {
    let Some(wal) = start(backend) else { return };
    assert_eq!(wal.backend(), backend_kind(backend));
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("records.log");
    let collector = Collector::new();
    let opened = wal
        .open(&path, OpenMode::CreateNew, collector.sink.clone())
        .expect("new file");
    assert_eq!(opened.len, 0);
    let payloads: Vec<Bytes> = (0..100).map(|sequence| payload(1, sequence)).collect();
    let ranges = append_all(&wal, &collector, opened.file, &payloads);
    let mut expected_offset = 0;
    for (range, payload) in ranges.iter().zip(&payloads) {
        assert_eq!(
            range.offset, expected_offset,
            "appends are contiguous, in order"
        );
        assert_eq!(range.len, 8 + payload.len() as u64);
        expected_offset = range.end();
    }
    wal.close(opened.file, 0).expect("queued");
    assert_eq!(collector.recv().kind, CompletionKind::Closed);

    let reopened = wal
        .open(&path, OpenMode::Append, collector.sink.clone())
        .expect("recovers");
    assert!(reopened.scan.is_clean());
    assert_eq!(reopened.len, expected_offset);
    let recovered: Vec<&[u8]> = reopened
        .scan
        .frames
        .iter()
        .map(|span| span.payload(&reopened.contents))
        .collect();
    let written: Vec<&[u8]> = payloads.iter().map(|p| &p[..]).collect();
    assert_eq!(recovered, written);
    let on_disk = std::fs::read(&path).expect("readable");
    assert_eq!(
        scan(&on_disk),
        reopened.scan,
        "the pure scan agrees with open"
    );
    wal.shutdown().expect("clean shutdown");
}

fn truncating_the_last_entry_at_every_byte_recovers_the_prefix(backend: Backend) {
    let Some(wal) = start(backend) else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let original = dir.path().join("original.log");
    let collector = Collector::new();
    let opened = wal
        .open(&original, OpenMode::CreateNew, collector.sink.clone())
        .expect("new file");
    let payloads: Vec<Bytes> = (0..5).map(|sequence| payload(2, sequence)).collect();
    let ranges = append_all(&wal, &collector, opened.file, &payloads);
    wal.close(opened.file, 0).expect("queued");
    collector.recv();
    let bytes = std::fs::read(&original).expect("readable");
    let last = ranges[4];
    assert_eq!(bytes.len() as u64, last.end());

    for cut in last.offset..last.end() {
        let path = dir.path().join(format!("cut-{cut}.log"));
        std::fs::write(&path, &bytes[..cut as usize]).expect("copy written");
        let reopened = wal
            .open(&path, OpenMode::Append, collector.sink.clone())
            .expect("a torn tail is recoverable");
        assert_eq!(reopened.scan.frames.len(), 4, "cut at {cut}");
        assert_eq!(reopened.len, last.offset, "cut at {cut}");
        let expected_tail = match cut - last.offset {
            0 => Tail::Clean,
            torn_bytes => Tail::Torn { torn_bytes },
        };
        assert_eq!(reopened.scan.tail, expected_tail, "cut at {cut}");
        assert_eq!(std::fs::metadata(&path).expect("exists").len(), last.offset);
        // Appending after recovery lands right after the valid prefix.
        wal.append(reopened.file, payloads[4].clone(), 9)
            .expect("queued");
        let ack = collector.recv();
        assert_eq!(ack.result, Ok(last), "cut at {cut}");
        wal.close(reopened.file, 0).expect("queued");
        collector.recv();
        assert_eq!(
            std::fs::read(&path).expect("readable"),
            bytes,
            "cut at {cut}"
        );
    }
    wal.shutdown().expect("clean shutdown");
}

fn a_flipped_byte_in_the_middle_is_reported_at_its_position_and_nothing_is_cut(backend: Backend) {
    let Some(wal) = start(backend) else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("records.log");
    let collector = Collector::new();
    let opened = wal
        .open(&path, OpenMode::CreateNew, collector.sink.clone())
        .expect("new file");
    let payloads: Vec<Bytes> = (0..10).map(|sequence| payload(3, sequence)).collect();
    let ranges = append_all(&wal, &collector, opened.file, &payloads);
    wal.close(opened.file, 0).expect("queued");
    collector.recv();

    let clean = std::fs::read(&path).expect("readable");
    // A byte in the payload, one in the length field, one in the checksum.
    for position in [
        ranges[4].offset + 20,
        ranges[4].offset + 1,
        ranges[4].offset + 6,
    ] {
        let mut damaged = clean.clone();
        damaged[position as usize] ^= 0x40;
        std::fs::write(&path, &damaged).expect("damage written");
        let result = wal.open(&path, OpenMode::Append, collector.sink.clone());
        match result {
            Err(WalError::Corrupt {
                fault_offset,
                next_valid_offset,
                ..
            }) => {
                assert_eq!(fault_offset, ranges[4].offset, "flip at {position}");
                assert_eq!(next_valid_offset, ranges[5].offset, "flip at {position}");
            }
            other => panic!("flip at {position}: expected Corrupt, got {other:?}"),
        }
        assert_eq!(
            std::fs::read(&path).expect("readable"),
            damaged,
            "nothing was cut"
        );
        assert!(matches!(scan(&damaged).tail, Tail::Corrupt { .. }));
    }
    wal.shutdown().expect("clean shutdown");
}

fn concurrent_appenders_to_many_files_each_land_exactly_once_in_order(backend: Backend) {
    const FILES: usize = 16;
    const THREADS: u64 = 8;
    const PER_THREAD_PER_FILE: u64 = 25;
    let Some(wal) = start(backend) else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let collector = Collector::new();
    let files: Vec<_> = (0..FILES)
        .map(|index| {
            let path = dir.path().join(format!("partition-{index}.log"));
            let opened = wal.open(&path, OpenMode::CreateNew, collector.sink.clone());
            (path, opened.expect("new file").file)
        })
        .collect();
    let appenders: Vec<_> = (0..THREADS)
        .map(|writer| {
            let wal = wal.clone();
            let files: Vec<_> = files.iter().map(|(_, file)| *file).collect();
            thread::spawn(move || {
                for sequence in 0..PER_THREAD_PER_FILE {
                    for &file in &files {
                        let user_data = writer << 32 | sequence;
                        wal.append(file, payload(writer, sequence), user_data)
                            .expect("queued");
                    }
                }
            })
        })
        .collect();
    for appender in appenders {
        appender.join().expect("appender finished");
    }
    let total = FILES * (THREADS * PER_THREAD_PER_FILE) as usize;
    let mut ends: BTreeMap<_, Vec<_>> = BTreeMap::new();
    for completion in collector.recv_n(total) {
        let range = completion.result.expect("durable");
        assert_eq!(completion.kind, CompletionKind::Durable);
        ends.entry(completion.file).or_default().push(range);
    }
    for (_, file) in &files {
        wal.close(*file, 0).expect("queued");
    }
    collector.recv_n(FILES);
    for (path, file) in &files {
        let mut ranges = ends.remove(file).expect("acks for every file");
        ranges.sort_by_key(|range| range.offset);
        let mut offset = 0;
        for range in &ranges {
            assert_eq!(range.offset, offset, "acked ranges tile the file");
            offset = range.end();
        }
        assert_recovered_in_order(path, offset, THREADS, PER_THREAD_PER_FILE);
    }
    wal.shutdown().expect("clean shutdown");
}

/// Every (writer, sequence) appears once and each writer's entries in order.
fn assert_recovered_in_order(path: &Path, len: u64, writers: u64, per_writer: u64) {
    let bytes = std::fs::read(path).expect("readable");
    assert_eq!(bytes.len() as u64, len);
    let report = scan(&bytes);
    assert!(report.is_clean());
    let mut next = vec![0u64; writers as usize];
    for span in &report.frames {
        let entry = span.payload(&bytes);
        let writer = u64::from_le_bytes(entry[..8].try_into().expect("8 bytes"));
        let sequence = u64::from_le_bytes(entry[8..16].try_into().expect("8 bytes"));
        assert_eq!(entry, &payload(writer, sequence)[..]);
        assert_eq!(
            next[writer as usize], sequence,
            "writer {writer} in order, once"
        );
        next[writer as usize] += 1;
    }
    assert!(next.iter().all(|&count| count == per_writer));
}

/// One log of I/O events and completions, in the order they happened.
#[derive(Default)]
struct EventLog {
    entries: Mutex<Vec<Logged>>,
}

#[derive(Debug, Clone)]
enum Logged {
    Io(IoEvent),
    Done(Completion),
}

impl IoObserver for EventLog {
    fn on_event(&self, event: IoEvent) {
        self.entries.lock().expect("log").push(Logged::Io(event));
    }
}

fn a_durable_ack_never_precedes_the_fsync_that_covers_it(backend: Backend) {
    let log = Arc::new(EventLog::default());
    let config = WalConfig {
        observer: Some(log.clone()),
        ..common::config(backend)
    };
    let Some(wal) = start_with(config) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let sink_log = log.clone();
    let sink = Arc::new(move |completion: Completion| {
        sink_log
            .entries
            .lock()
            .expect("log")
            .push(Logged::Done(completion));
    });
    let files: Vec<_> = (0..4)
        .map(|index| {
            let path = dir.path().join(format!("f{index}.log"));
            wal.open(&path, OpenMode::CreateNew, sink.clone())
                .expect("new file")
                .file
        })
        .collect();
    for sequence in 0..400u64 {
        let file = files[(sequence % 4) as usize];
        let ack = if sequence % 5 == 0 {
            Ack::Written
        } else {
            Ack::Durable
        };
        wal.append_with_ack(file, payload(0, sequence), sequence, ack)
            .expect("queued");
        if sequence % 97 == 0 {
            wal.sync(file, 1000 + sequence).expect("queued");
        }
    }
    wal.shutdown().expect("clean shutdown");

    let entries = log.entries.lock().expect("log").clone();
    let mut durable_end: BTreeMap<_, u64> = BTreeMap::new();
    let mut acks = 0;
    for entry in entries {
        match entry {
            Logged::Io(IoEvent::Synced {
                file,
                durable_end: end,
            }) => {
                let known = durable_end.entry(file).or_default();
                *known = (*known).max(end);
            }
            Logged::Io(_) => {}
            Logged::Done(completion) => {
                let range = completion.result.clone().expect("no failures here");
                let covered = durable_end.get(&completion.file).copied().unwrap_or(0);
                if matches!(
                    completion.kind,
                    CompletionKind::Durable | CompletionKind::Synced
                ) {
                    assert!(
                        range.end() <= covered,
                        "{:?} acked durable up to {} before an fsync covered past {covered}",
                        completion,
                        range.end()
                    );
                    acks += 1;
                }
            }
        }
    }
    assert_eq!(acks, 320 + 5, "every durable append and sync was acked");
}

fn written_acks_sync_and_close_make_bytes_durable(backend: Backend) {
    let Some(wal) = start(backend) else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("cursors.log");
    let collector = Collector::new();
    let file = wal
        .open(&path, OpenMode::CreateOrAppend, collector.sink.clone())
        .expect("new file")
        .file;
    for sequence in 0..3 {
        wal.append_with_ack(file, payload(4, sequence), sequence, Ack::Written)
            .expect("queued");
    }
    wal.sync(file, 99).expect("queued");
    let completions = collector.recv_n(4);
    assert!(
        completions[..3]
            .iter()
            .all(|c| c.kind == CompletionKind::Written)
    );
    let synced = &completions[3];
    assert_eq!(synced.kind, CompletionKind::Synced);
    assert_eq!(
        synced.result.clone().expect("synced").end(),
        completions[2].result.clone().expect("written").end()
    );
    // A sync with nothing new to cover answers at once.
    wal.sync(file, 100).expect("queued");
    assert_eq!(collector.recv().result, synced.result);
    wal.close(file, 7).expect("queued");
    let closed = collector.recv();
    assert_eq!((closed.kind, closed.user_data), (CompletionKind::Closed, 7));
    wal.shutdown().expect("clean shutdown");
    assert!(scan(&std::fs::read(&path).expect("readable")).is_clean());
}

fn superblock_style_replace_via_temp_file_and_rename(backend: Backend) {
    let Some(wal) = start(backend) else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let target = dir.path().join("superblock");
    let temp = dir.path().join("superblock.tmp");
    let collector = Collector::new();
    for version in 0..3u8 {
        let file = wal
            .open(&temp, OpenMode::Truncate, collector.sink.clone())
            .expect("temp file")
            .file;
        wal.append(file, Bytes::from(vec![version; 64]), 0)
            .expect("queued");
        wal.rename(file, &target, 1).expect("queued");
        wal.close(file, 2).expect("queued");
        let kinds: Vec<_> = collector
            .recv_n(3)
            .into_iter()
            .map(|c| (c.kind, c.result.is_ok()))
            .collect();
        assert_eq!(
            kinds,
            [
                (CompletionKind::Durable, true),
                (CompletionKind::Renamed, true),
                (CompletionKind::Closed, true),
            ]
        );
        let reopened = wal
            .open(&target, OpenMode::Append, collector.sink.clone())
            .expect("superblock");
        assert_eq!(reopened.scan.frames.len(), 1);
        assert_eq!(
            reopened.scan.frames[0].payload(&reopened.contents),
            &[version; 64][..]
        );
        wal.close(reopened.file, 0).expect("queued");
        collector.recv();
    }
    assert!(!temp.exists());
    wal.shutdown().expect("clean shutdown");
}

fn truncate_request_cuts_and_later_appends_follow(backend: Backend) {
    let Some(wal) = start(backend) else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("records.log");
    let collector = Collector::new();
    let file = wal
        .open(&path, OpenMode::CreateNew, collector.sink.clone())
        .expect("new file")
        .file;
    let payloads: Vec<Bytes> = (0..6).map(|sequence| payload(5, sequence)).collect();
    let ranges = append_all(&wal, &collector, file, &payloads);
    wal.truncate(file, ranges[3].offset, 1).expect("queued");
    wal.append(file, payloads[5].clone(), 2).expect("queued");
    let truncated = collector.recv();
    assert_eq!(truncated.kind, CompletionKind::Truncated);
    let appended = collector.recv().result.expect("durable");
    assert_eq!(appended.offset, ranges[3].offset);
    wal.truncate(file, appended.end() + 1, 3).expect("queued");
    assert!(matches!(
        collector.recv().result,
        Err(WalError::TruncateBeyondEnd { .. })
    ));
    wal.shutdown().expect("clean shutdown");
    let bytes = std::fs::read(&path).expect("readable");
    let report = scan(&bytes);
    assert_eq!(report.frames.len(), 4);
    assert_eq!(report.frames[3].payload(&bytes), &payloads[5][..]);
}

fn a_damaged_frame_is_rewritten_in_place_through_the_writer(backend: Backend) {
    let Some(wal) = start(backend) else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("segment.log");
    let collector = Collector::new();
    let opened = wal
        .open(&path, OpenMode::CreateNew, collector.sink.clone())
        .expect("new file");
    let payloads: Vec<Bytes> = (0..6).map(|sequence| payload(4, sequence)).collect();
    let ranges = append_all(&wal, &collector, opened.file, &payloads);
    wal.close(opened.file, 0).expect("queued");
    collector.recv();
    let clean = std::fs::read(&path).expect("readable");
    let mut damaged = clean.clone();
    damaged[ranges[2].offset as usize + 10] ^= 0x01;
    std::fs::write(&path, &damaged).expect("damage written");

    let reopened = wal
        .open(&path, OpenMode::AppendDamaged, collector.sink.clone())
        .expect("opens for repair");
    assert_eq!(
        reopened.scan.tail,
        Tail::Corrupt {
            fault_offset: ranges[2].offset,
            next_valid_offset: ranges[3].offset
        }
    );
    assert_eq!(reopened.len, clean.len() as u64);
    wal.write_at(
        reopened.file,
        ranges[2].offset,
        payloads[2].clone(),
        7,
        Ack::Durable,
    )
    .expect("queued");
    let rewritten = collector.recv();
    assert_eq!(rewritten.kind, CompletionKind::Durable);
    assert_eq!(rewritten.result, Ok(ranges[2]));
    wal.close(reopened.file, 0).expect("queued");
    collector.recv();
    assert_eq!(std::fs::read(&path).expect("readable"), clean, "healed");
    let healed = wal
        .open(&path, OpenMode::Append, collector.sink.clone())
        .expect("clean again");
    assert!(healed.scan.is_clean());
    wal.shutdown().expect("clean shutdown");
}

fn small_fsyncs_get_zero_filled_room_that_close_and_rename_cut_off(backend: Backend) {
    let Some(wal) = start(backend) else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let collector = Collector::new();
    let appends = u64::from(strand_wal::preallocate::SMALL_SYNCS_BEFORE_FILL) + 4;
    let mut ends = Vec::new();
    let paths = [
        dir.path().join("closed.log"),
        dir.path().join("renamed.log"),
    ];
    let mut files = Vec::new();
    for path in &paths {
        let opened = wal
            .open(path, OpenMode::CreateNew, collector.sink.clone())
            .expect("new file");
        let mut end = 0;
        for sequence in 0..appends {
            // One at a time: each append is its own small fsync.
            end = append_all(&wal, &collector, opened.file, &[payload(1, sequence)])[0].end();
        }
        let physical = std::fs::metadata(path).expect("exists").len();
        assert!(
            physical > end,
            "{}: room ahead while open ({physical} bytes for {end} of frames)",
            path.display()
        );
        ends.push(end);
        files.push(opened.file);
    }
    wal.close(files[0], 0).expect("queued");
    assert_eq!(collector.recv().kind, CompletionKind::Closed);
    let renamed = dir.path().join("renamed-into-place.log");
    wal.rename(files[1], renamed.clone(), 1).expect("queued");
    assert!(collector.recv().result.is_ok());
    for (path, end) in [(&paths[0], ends[0]), (&renamed, ends[1])] {
        let bytes = std::fs::read(path).expect("readable");
        assert_eq!(
            bytes.len() as u64,
            end,
            "{}: exactly its frames",
            path.display()
        );
        let report = scan(&bytes);
        assert!(report.is_clean());
        assert_eq!(report.frames.len() as u64, appends);
    }
    wal.shutdown().expect("clean shutdown");
}
