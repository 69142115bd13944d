//! The record log on real files: appends, reads by op and by offset across
//! segment rolls, refusals, truncation, retention.

mod common;

use common::*;
use strand_partition::fixtures::produce;
use strand_partition::{PartitionError, RetentionPolicy};
use strand_wire::{CommandHeader, RecordBatch};
use zerocopy::IntoBytes;

#[test]
fn appends_roll_segments_and_read_back_by_op_and_by_offset() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, recovery) = open_file(&wal, &dir, small_config());
    assert!(recovery.fresh && !recovery.recovered_from_disk);
    let written = append_durable(&mut partition, 60, 5, 200);
    assert!(partition.segment_count() > 3, "16 KiB segments rolled");
    assert_eq!(partition.op(), 60);
    assert_eq!(partition.offset_end(), 300);
    assert_eq!(
        read_all(&mut partition),
        written,
        "prepares come back byte for byte"
    );
    let headers = partition.read_headers(10, 20).expect("headers");
    let ops: Vec<u64> = headers.iter().map(|header| header.op.get()).collect();
    assert_eq!(ops, (10..=20).collect::<Vec<_>>());
    assert_eq!(headers[0], *written[9].header());

    let batches = fetch_all(&mut partition, 0, 3000);
    assert_eq!(batches.len(), 60);
    for (index, (base, count)) in batches.iter().enumerate() {
        assert_eq!((*base, *count), (index as u64 * 5, 5));
    }
    // A fetch from the middle of a batch starts with the batch holding it,
    // and the patched header makes a valid batch with the right offsets.
    let fetched = partition.fetch(137, 1).expect("fetch");
    assert_eq!(fetched.len(), 1, "max_bytes 1 still gives one batch");
    let batch = &fetched[0];
    assert_eq!(batch.offset_base, 135);
    assert_eq!(
        batch.bytes.as_ref(),
        written[27].body().as_ref(),
        "stored bytes, offset_base 0"
    );
    let mut patched = batch.patched_header().as_bytes().to_vec();
    patched.extend_from_slice(&batch.records());
    let batch = RecordBatch::from_bytes(patched.into()).expect("patched batch is valid");
    let offsets: Vec<u64> = batch.records().map(|record| record.offset).collect();
    assert_eq!(offsets, (135..140).collect::<Vec<_>>());
    // A fetch never carries more than `max_bytes` past its first batch.
    let batch_bytes = written[0].body().len() as u64;
    for max_bytes in [
        batch_bytes,
        batch_bytes + 1,
        3 * batch_bytes - 1,
        3 * batch_bytes,
    ] {
        let fetched = partition.fetch(0, max_bytes).expect("fetch");
        let total: u64 = fetched.iter().map(|batch| batch.bytes.len() as u64).sum();
        assert_eq!(fetched.len() as u64, (max_bytes / batch_bytes).max(1));
        assert!(
            total <= max_bytes,
            "{total} bytes for max_bytes {max_bytes}"
        );
    }
    assert_eq!(partition.fetch(300, 100).expect("at the end"), Vec::new());
    assert!(matches!(
        partition.fetch(301, 100),
        Err(PartitionError::OffsetOutOfRange { .. })
    ));

    partition.close().expect("close");
    let (mut partition, recovery) = open_file(&wal, &dir, small_config());
    assert!(recovery.recovered_from_disk && recovery.clean_shutdown);
    assert!(recovery.faulty.is_empty());
    assert_eq!(
        recovery.indexes_rebuilt,
        Vec::new(),
        "a clean shutdown leaves good indexes"
    );
    assert_eq!(read_all(&mut partition), written);
    assert_eq!(
        partition.offset_for_timestamp(written[40].header().timestamp_ns.get()),
        Some(200)
    );
    wal.shutdown().expect("shutdown");
}

#[test]
fn appends_that_do_not_follow_the_log_are_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let (mut partition, _) = open_file(&wal, &partition_dir(root.path()), small_config());
    append_durable(&mut partition, 3, 2, 10);
    let skip = produce(5, partition.checksum(3).expect("known"), 6, 2, 10);
    assert!(matches!(
        partition.write_prepare(skip),
        Err(PartitionError::OpNotNext { op: 5, head: 3 })
    ));
    let unchained = produce(4, 0xdead_beef, 6, 2, 10);
    assert!(matches!(
        partition.write_prepare(unchained),
        Err(PartitionError::ParentMismatch { op: 4, .. })
    ));
    let gap = produce(4, partition.checksum(3).expect("known"), 7, 2, 10);
    assert!(matches!(
        partition.write_prepare(gap),
        Err(PartitionError::OffsetsNotContiguous { op: 4, .. })
    ));
    assert_eq!(partition.op(), 3, "refusals change nothing");
    wal.shutdown().expect("shutdown");
}

#[test]
fn truncation_removes_ops_above_durably_even_inside_a_sealed_segment() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, small_config());
    let written = append_durable(&mut partition, 50, 5, 200);
    let segments_before = partition.segment_count();
    partition
        .cut(strand_partition::CutPoint {
            op: 12,
            cursor_tail: None,
        })
        .expect("cut");
    assert_eq!(partition.op(), 12);
    assert_eq!(partition.offset_end(), 60);
    assert!(partition.segment_count() < segments_before);
    assert_eq!(read_all(&mut partition), written[..12].to_vec());
    // The log continues from op 13 with new prepares.
    let more = append_durable(&mut partition, 20, 5, 200);
    assert_eq!(more[0].header().op.get(), 13);
    drop(partition); // no clean shutdown
    let (mut partition, recovery) = open_file(&wal, &dir, small_config());
    assert!(
        recovery.faulty.is_empty(),
        "truncated ops are not reported lost"
    );
    assert_eq!(recovery.op, 32);
    let mut expected = written[..12].to_vec();
    expected.extend(more);
    assert_eq!(read_all(&mut partition), expected);
    wal.shutdown().expect("shutdown");
}

#[test]
fn truncation_below_the_persisted_commit_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let (mut partition, _) = open_file(&wal, &partition_dir(root.path()), small_config());
    append_durable(&mut partition, 10, 1, 10);
    let mut fields = partition.superblock().durable.clone();
    fields.commit = 8;
    partition.persist_state(fields, 1).expect("persist");
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");
    assert!(out.contains(&strand_partition::Completed::StatePersisted { sequence: 1 }));
    assert!(matches!(
        partition.cut(strand_partition::CutPoint {
            op: 7,
            cursor_tail: None
        }),
        Err(PartitionError::TruncateBelowCommit { op: 7, commit: 8 })
    ));
    partition
        .cut(strand_partition::CutPoint {
            op: 8,
            cursor_tail: None,
        })
        .expect("at the commit is allowed");
    assert_eq!(partition.op(), 8);
    wal.shutdown().expect("shutdown");
}

#[test]
fn retention_by_size_and_by_age_moves_the_head_but_never_past_the_callers_bound() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, small_config());
    let written = append_durable(&mut partition, 80, 5, 200);
    let segments = partition.segment_count();
    // Nothing past the persisted commit's op may go, whatever the caller says.
    persist_commit(&mut partition, 8, 1);
    assert!(
        partition.retention_waits_for_commit(by_size(1), 0, 80),
        "persisting commit 80 would let retention drop more"
    );
    assert!(!partition.retention_waits_for_commit(by_size(1), 0, 8));
    assert!(!partition.retention_waits_for_commit(by_size(u64::MAX), 0, 80));
    let unpersisted = partition
        .apply_retention(by_size(1), 0, u64::MAX)
        .expect("retention");
    assert!(unpersisted.head_op <= 8);
    assert_eq!(
        partition.read_prepare(8).expect("read"),
        Some(written[7].clone())
    );
    persist_commit(&mut partition, 80, 2);
    assert!(!partition.retention_waits_for_commit(by_size(1), 0, 80));
    // The caller still needs op 10: nothing holding it may go.
    let bound = partition
        .apply_retention(by_size(1), 0, 10)
        .expect("retention");
    assert!(bound.head_op <= 10);
    // Size: keep about 40 KiB.
    let outcome = partition
        .apply_retention(by_size(40 * 1024), 0, u64::MAX)
        .expect("retention");
    assert!(outcome.segments_removed > 0 && partition.segment_count() < segments);
    assert_eq!(partition.head_op(), outcome.head_op);
    assert_eq!(partition.head_offset(), (outcome.head_op - 1) * 5);
    assert!(matches!(
        partition.fetch(0, 100),
        Err(PartitionError::OffsetOutOfRange { .. })
    ));
    assert_eq!(partition.read_prepare(1).expect("read"), None);
    let head = outcome.head_op;
    // Age: everything older than 1 ms at a clock far in the future goes,
    // but the active segment always stays.
    let far_future_ns = u64::MAX / 2;
    let aged = partition
        .apply_retention(
            RetentionPolicy {
                retention_bytes: None,
                retention_ms: Some(1),
            },
            far_future_ns,
            u64::MAX,
        )
        .expect("retention");
    // What stays: the active segment, and the one holding the persisted
    // commit (80) if the active one does not.
    assert!(partition.segment_count() <= 2);
    assert!(aged.head_op > head && aged.head_op <= 80);
    let kept: Vec<_> = written[(aged.head_op - 1) as usize..].to_vec();
    drop(partition);
    let (mut partition, recovery) = open_file(&wal, &dir, small_config());
    assert_eq!(recovery.head_op, aged.head_op);
    assert!(recovery.faulty.is_empty());
    assert_eq!(read_all(&mut partition), kept);
    // Appends still chain after the head moved.
    append_durable(&mut partition, 2, 5, 200);
    wal.shutdown().expect("shutdown");
}

#[test]
fn a_segment_left_behind_by_an_interrupted_retention_is_removed_at_open() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, small_config());
    append_durable(&mut partition, 60, 5, 200);
    persist_commit(&mut partition, 60, 1);
    let first = partition.segment_offsets()[0];
    let first_path = strand_partition::layout::segment_path(&dir, first);
    let saved = std::fs::read(&first_path).expect("read");
    partition
        .apply_retention(by_size(1), 0, u64::MAX)
        .expect("retention");
    drop(partition);
    // As if the crash came after the superblock write but before the unlink.
    std::fs::write(&first_path, saved).expect("restore");
    let (_, recovery) = open_file(&wal, &dir, small_config());
    assert!(recovery.faulty.is_empty());
    assert!(!first_path.exists(), "the leftover was removed");
    assert_eq!(
        recovery.head_op,
        recovery.op - recovery.op + recovery.head_op
    );
    wal.shutdown().expect("shutdown");
}

#[test]
fn checksums_of_written_ops_are_known() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let (mut partition, _) = open_file(&wal, &partition_dir(root.path()), small_config());
    let written = append_durable(&mut partition, 3, 1, 10);
    assert_eq!(partition.checksum(0), Some(0));
    assert_eq!(partition.checksum(2), Some(written[1].header().checksum()));
    assert_eq!(partition.checksum(4), None);
    wal.shutdown().expect("shutdown");
}

/// A size limit of `bytes`, no age limit.
fn by_size(bytes: u64) -> RetentionPolicy {
    RetentionPolicy {
        retention_bytes: Some(bytes),
        retention_ms: None,
    }
}
