//! The cursor map on disk in bounded pieces: a map larger than a WAL frame
//! snapshots and reopens (one frame per map made the snapshot of a
//! partition with enough consumer names panic the node); a snapshot missing
//! a piece or with a damaged one is refused whole at open, which falls back
//! to the events the log holds; a deleted cursor (a tombstone event) stays
//! deleted through snapshot, compaction and reopen.

mod common;

use std::collections::BTreeMap;

use common::*;
use strand_partition::layout::cursors_snapshot_path;
use strand_partition::{MemoryDisk, SNAPSHOT_PIECE_BYTES_MAX};
use strand_wal::{CrashMode, FRAME_PAYLOAD_BYTES_MAX, scan};
use strand_wire::Body;
use strand_wire::ops::{CursorEvent, CursorEvents};

/// A consumer name of 252 bytes (the size that took a cluster down).
fn long_name(index: usize) -> String {
    format!("{index:0>252}")
}

/// Appends `count` stores of long names, 256 events a frame.
fn store_many(partition: &mut strand_partition::Partition<MemoryDisk>, count: usize) {
    let mut index = 0;
    while index < count {
        let chunk = (count - index).min(256);
        let events = (index..index + chunk)
            .map(|name| CursorEvent {
                consumer: long_name(name),
                offset: 1,
            })
            .collect();
        let body = bytes::Bytes::from(CursorEvents { events }.to_vec());
        let base = partition.cursor_tail();
        partition
            .append_cursors(base, chunk as u32, &body)
            .expect("append cursors");
        let mut out = Vec::new();
        partition.flush(&mut out).expect("flush");
        index += chunk;
    }
}

fn snapshot_pieces(disk: &MemoryDisk) -> Vec<(u64, u64)> {
    let path = cursors_snapshot_path(std::path::Path::new(MEMORY_DIR));
    let bytes = disk.storage().contents(&path).expect("a snapshot").to_vec();
    let report = scan(&bytes);
    assert!(report.is_clean());
    report
        .frames
        .iter()
        .map(|span| {
            assert!(span.payload(&bytes).len() <= SNAPSHOT_PIECE_BYTES_MAX);
            (span.offset, span.end())
        })
        .collect()
}

#[test]
fn a_cursor_map_larger_than_a_wal_frame_snapshots_in_pieces_and_reopens() {
    let (mut partition, _) = open_memory(MemoryDisk::new(1), small_config());
    append_durable(&mut partition, 2, 10, 20);
    let count = FRAME_PAYLOAD_BYTES_MAX / (2 + 252 + 8) + 1_000;
    store_many(&mut partition, count);
    assert_eq!(partition.cursors().len(), count);
    partition.snapshot_cursors().expect("snapshot in pieces");
    assert!(partition.compact_cursors(u64::MAX).expect("compact") > 0);
    let mut disk = partition.close().expect("close");
    let pieces = snapshot_pieces(&disk);
    assert!(pieces.len() > 64, "{} pieces", pieces.len());
    disk.crash(CrashMode::LoseUnsynced);
    let (partition, recovery) = open_memory(disk, small_config());
    assert!(!recovery.cursors.snapshot_damaged);
    assert_eq!(partition.cursors().len(), count);
    assert_eq!(partition.cursor(&long_name(count - 1)), Some(1));
}

#[test]
fn a_snapshot_missing_or_damaging_a_piece_is_refused_whole_and_the_log_serves() {
    for damage in ["missing last", "flipped middle"] {
        let (mut partition, _) = open_memory(MemoryDisk::new(2), small_config());
        append_durable(&mut partition, 2, 10, 20);
        store_many(&mut partition, 12_000);
        partition.snapshot_cursors().expect("snapshot");
        store_cursors(&mut partition, &[("after", 7)]);
        let mut disk = partition.close().expect("close");
        let pieces = snapshot_pieces(&disk);
        assert!(pieces.len() >= 3, "{damage}: {} pieces", pieces.len());
        let path = cursors_snapshot_path(std::path::Path::new(MEMORY_DIR));
        let storage = disk.storage_mut();
        match damage {
            "missing last" => storage.cut(&path, pieces[pieces.len() - 1].0),
            _ => storage.flip_bit(&path, pieces[1].0 + 200, 3),
        }
        .expect("damage the snapshot");
        let (partition, recovery) = open_memory(disk, small_config());
        assert!(recovery.cursors.snapshot_damaged, "{damage}");
        // The log still holds every event (nothing compacted), so the map
        // is whole again: at-least-once at worst, never a panic.
        assert_eq!(partition.cursors().len(), 12_001, "{damage}");
        assert_eq!(partition.cursor("after"), Some(7));
    }
}

#[test]
fn a_deleted_cursor_stays_deleted_through_snapshot_compaction_and_reopen() {
    let (mut partition, _) = open_memory(MemoryDisk::new(3), small_config());
    append_durable(&mut partition, 2, 10, 20);
    store_cursors(&mut partition, &[("a", 5), ("b", 7), ("c", 9)]);
    let tombstone = CursorEvent::tombstone("b".to_owned());
    let base = partition.cursor_tail();
    let body = bytes::Bytes::from(
        CursorEvents {
            events: vec![tombstone],
        }
        .to_vec(),
    );
    partition.append_cursors(base, 1, &body).expect("append");
    partition.flush(&mut Vec::new()).expect("flush");
    let expected: BTreeMap<String, u64> = [("a".to_owned(), 5), ("c".to_owned(), 9)].into();
    assert_eq!(partition.cursors(), &expected);
    // Reopened from the log alone.
    let disk = partition.close().expect("close");
    let (mut partition, _) = open_memory(disk, small_config());
    assert_eq!(partition.cursors(), &expected);
    // Folded into the snapshot, the log compacted, reopened.
    partition.snapshot_cursors().expect("snapshot");
    partition.compact_cursors(u64::MAX).expect("compact");
    store_cursors(&mut partition, &[("b", 1)]);
    partition.append_cursors(5, 1, &body).expect("append");
    partition.flush(&mut Vec::new()).expect("flush");
    let disk = partition.close().expect("close");
    let (partition, _) = open_memory(disk, small_config());
    assert_eq!(partition.cursors(), &expected);
    assert_eq!(partition.cursor("b"), None);
}
