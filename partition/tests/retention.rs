//! Retention by size on real files: a limit of B bytes keeps at least B
//! bytes of the log (whole oldest segments go only while what remains is
//! still at least B), with segments larger and smaller than the limit, and
//! what a reader sees afterwards: the earliest offset, the bytes behind it,
//! every record from there on, the same after a reopen.

mod common;

use std::path::PathBuf;

use common::*;
use strand_partition::index::IndexConfig;
use strand_partition::{
    FileDisk, LogConfig, Partition, PartitionConfig, PartitionError, RetentionPolicy,
};

const KIB: u64 = 1024;

/// Records per prepare and value bytes per record: entries of about 4 KiB.
const RECORDS_PER_ENTRY: u32 = 4;
const VALUE_BYTES: usize = 1000;

/// Segments of `segment_bytes`, few committed headers kept at open.
fn config(segment_bytes: u64) -> PartitionConfig {
    PartitionConfig {
        log: LogConfig {
            segment_bytes_max: segment_bytes,
            index: IndexConfig {
                interval_bytes: 4096,
            },
        },
        ..small_config()
    }
}

/// A size limit of `bytes`, no age limit.
fn by_size(bytes: u64) -> RetentionPolicy {
    RetentionPolicy {
        retention_bytes: Some(bytes),
        retention_ms: None,
    }
}

/// One segment as a reader finds it: its first record offset and the log
/// bytes of its entries.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SegmentBytes {
    first_offset: u64,
    bytes: u64,
}

/// The segments from the earliest offset on (oldest first, the active one
/// last), each with the bytes of its entries as the reads locate them.
fn segments(partition: &Partition<FileDisk>) -> Vec<SegmentBytes> {
    let mut by_path: Vec<(PathBuf, u64)> = Vec::new();
    for op in partition.head_op()..=partition.op() {
        let location = partition.entry_location(op).expect("a retained op");
        match by_path.last_mut() {
            Some((path, bytes)) if *path == location.path => *bytes += location.frame_len,
            _ => by_path.push((location.path, location.frame_len)),
        }
    }
    let offsets = partition.segment_offsets();
    assert_eq!(offsets.len(), by_path.len(), "every segment holds an entry");
    offsets
        .into_iter()
        .zip(by_path)
        .map(|(first_offset, (_, bytes))| SegmentBytes {
            first_offset,
            bytes,
        })
        .collect()
}

/// Log bytes from the earliest offset to the end.
fn retained_bytes(partition: &Partition<FileDisk>) -> u64 {
    segments(partition)
        .iter()
        .map(|segment| segment.bytes)
        .sum()
}

/// Where the earliest offset must land under a limit of `limit` bytes: the
/// oldest segments go while what remains after each is still at least the
/// limit; the active (last) segment never goes.
fn expected_earliest(before: &[SegmentBytes], limit: u64) -> u64 {
    let mut remaining: u64 = before.iter().map(|segment| segment.bytes).sum();
    let mut kept = 0;
    while kept + 1 < before.len() && remaining - before[kept].bytes >= limit {
        remaining -= before[kept].bytes;
        kept += 1;
    }
    before[kept].first_offset
}

/// Appends entries of about 4 KiB until the log holds at least `bytes`,
/// then one by one until an entry opens a new segment: the active segment
/// holds a single entry, far less than any limit of the tests.
fn write_until_a_roll_past(partition: &mut Partition<FileDisk>, bytes: u64) {
    while partition.offset_end() == 0 || retained_bytes(partition) < bytes {
        append_durable(partition, 8, RECORDS_PER_ENTRY, VALUE_BYTES);
    }
    let segment_count = partition.segment_count();
    while partition.segment_count() == segment_count {
        append_durable(partition, 1, RECORDS_PER_ENTRY, VALUE_BYTES);
    }
    let active = segments(partition).pop().expect("an active segment");
    assert_eq!(
        active.first_offset,
        partition.offset_end() - u64::from(RECORDS_PER_ENTRY)
    );
}

/// Applies `limit` with the whole log committed; returns the earliest offset.
fn retain(partition: &mut Partition<FileDisk>, limit: u64) -> u64 {
    if partition.persisted_commit() < partition.op() {
        persist_commit(partition, partition.op(), partition.op());
    }
    let outcome = partition
        .apply_retention(by_size(limit), 0, u64::MAX)
        .expect("retention");
    assert_eq!(outcome.head_offset, partition.head_offset());
    outcome.head_offset
}

/// What a reader of `partition` sees from `earliest`: below it the typed
/// refusal, from it every record to the end, batch after batch.
fn check_reader_sees(partition: &mut Partition<FileDisk>, earliest: u64) {
    assert_eq!(partition.head_offset(), earliest);
    if earliest > 0 {
        assert!(matches!(
            partition.fetch(earliest - 1, 4096),
            Err(PartitionError::OffsetOutOfRange { head_offset, .. }) if head_offset == earliest
        ));
    }
    let batches = fetch_all(partition, earliest, 64 * KIB);
    let mut next = earliest;
    for (base, count) in batches {
        assert_eq!(base, next, "records contiguous from the earliest offset");
        next += u64::from(count);
    }
    assert_eq!(next, partition.offset_end(), "every record to the end");
}

#[test]
fn a_limit_smaller_than_a_segment_keeps_at_least_the_limit_of_the_newest_records() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let limit = 64 * KIB;
    let (mut partition, _) = open_file(&wal, &dir, config(256 * KIB));
    write_until_a_roll_past(&mut partition, 2048 * KIB);
    let before = segments(&partition);
    assert!(before.len() > 8, "2 MiB in 256 KiB segments");
    assert!(before.last().expect("active").bytes < limit);
    let earliest = retain(&mut partition, limit);
    // The active segment alone is less than the limit: the newest sealed
    // one stays beside it, and every older one goes.
    let newest_sealed = &before[before.len() - 2];
    assert_eq!(earliest, newest_sealed.first_offset);
    assert_eq!(earliest, expected_earliest(&before, limit));
    assert_eq!(partition.segment_count(), 2);
    let retained = retained_bytes(&partition);
    assert!(
        retained >= limit,
        "{retained} bytes kept under a {limit}-byte limit"
    );
    // The newest 64 KiB of entries, counted at their largest, are readable.
    let entry_bytes_max = (partition.head_op()..=partition.op())
        .map(|op| partition.entry_location(op).expect("retained").frame_len)
        .max()
        .expect("entries");
    let newest_records = limit.div_ceil(entry_bytes_max) * u64::from(RECORDS_PER_ENTRY);
    assert!(earliest <= partition.offset_end() - newest_records);
    check_reader_sees(&mut partition, earliest);
    // A second pass drops nothing more; a reopen finds the same log.
    assert_eq!(retain(&mut partition, limit), earliest);
    drop(partition);
    let (mut partition, recovery) = open_file(&wal, &dir, config(256 * KIB));
    assert!(recovery.faulty.is_empty());
    assert_eq!(retained_bytes(&partition), retained);
    check_reader_sees(&mut partition, earliest);
    wal.shutdown().expect("shutdown");
}

#[test]
fn a_limit_larger_than_a_segment_keeps_the_limit_and_at_most_a_segment_more() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (limit, segment_bytes) = (64 * KIB, 16 * KIB);
    let (mut partition, _) = open_file(&wal, &dir, config(segment_bytes));
    write_until_a_roll_past(&mut partition, 512 * KIB);
    let before = segments(&partition);
    let earliest = retain(&mut partition, limit);
    assert_eq!(earliest, expected_earliest(&before, limit));
    let after = segments(&partition);
    let retained = retained_bytes(&partition);
    assert!(
        retained >= limit,
        "{retained} bytes kept under a {limit}-byte limit"
    );
    // One more segment gone would have left less than the limit.
    assert!(retained - after[0].bytes < limit);
    let active = after.last().expect("active").bytes;
    assert!(retained <= limit + segment_bytes + active);
    check_reader_sees(&mut partition, earliest);
    drop(partition);
    let (mut partition, recovery) = open_file(&wal, &dir, config(segment_bytes));
    assert!(recovery.faulty.is_empty());
    assert_eq!(segments(&partition), after);
    check_reader_sees(&mut partition, earliest);
    wal.shutdown().expect("shutdown");
}

#[test]
fn a_limit_equal_to_the_newest_segments_keeps_exactly_them() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, config(16 * KIB));
    write_until_a_roll_past(&mut partition, 128 * KIB);
    let before = segments(&partition);
    let newest_three: u64 = before[before.len() - 3..]
        .iter()
        .map(|segment| segment.bytes)
        .sum();
    // One byte more than the newest three hold: a fourth stays.
    assert_eq!(
        retain(&mut partition, newest_three + 1),
        before[before.len() - 4].first_offset
    );
    assert_eq!(
        retained_bytes(&partition),
        newest_three + before[before.len() - 4].bytes
    );
    // Exactly what they hold: what remains after the drop is the limit.
    assert_eq!(
        retain(&mut partition, newest_three),
        before[before.len() - 3].first_offset
    );
    assert_eq!(retained_bytes(&partition), newest_three);
    // A limit below the active segment alone: every sealed one goes.
    let active = before.last().expect("active");
    assert_eq!(retain(&mut partition, active.bytes), active.first_offset);
    assert_eq!(partition.segment_count(), 1, "the active segment stays");
    check_reader_sees(&mut partition, active.first_offset);
    wal.shutdown().expect("shutdown");
}

#[test]
fn an_age_limit_still_drops_old_segments_a_size_limit_would_keep() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, config(16 * KIB));
    write_until_a_roll_past(&mut partition, 128 * KIB);
    let active = segments(&partition).pop().expect("active");
    let op = partition.op();
    persist_commit(&mut partition, op, 1);
    let both = RetentionPolicy {
        retention_bytes: Some(u64::MAX),
        retention_ms: Some(1),
    };
    let outcome = partition
        .apply_retention(both, u64::MAX / 2, u64::MAX)
        .expect("retention");
    assert_eq!(outcome.head_offset, active.first_offset);
    check_reader_sees(&mut partition, active.first_offset);
    wal.shutdown().expect("shutdown");
}

/// While a superblock write is in flight, the superblock in memory holds a
/// commit the disk may never get: a failed write takes it back, with the
/// client table that went with it. Retention drops segments only below the
/// commit the disk holds, so no op leaves the log that neither the
/// persisted client table nor the log still accounts for.
#[test]
fn retention_keeps_what_a_failed_persist_of_a_higher_commit_would_have_let_go() {
    let (mut partition, _) = open_memory(strand_partition::MemoryDisk::new(21), small_config());
    append_durable(&mut partition, 60, 4, 150);
    persist_commit(&mut partition, 10, 1);
    let mut fields = partition.superblock().durable.clone();
    fields.commit = 55;
    let copy = partition.superblock().copy() ^ 1;
    let path = strand_partition::layout::superblock_path(std::path::Path::new(MEMORY_DIR), copy);
    partition
        .device_mut()
        .storage_mut()
        .fail_next_sync(&path, libc::EIO)
        .expect("inject");
    partition.persist_state(fields, 2).expect("queued");
    partition
        .apply_retention(by_size(1), 0, u64::MAX)
        .expect("retention");
    assert_eq!(
        partition.persisted_commit(),
        10,
        "the failed write took 55 back"
    );
    assert!(
        partition.head_op() <= 10,
        "ops above the durable commit stay: head {}",
        partition.head_op()
    );
}
