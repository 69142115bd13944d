//! Cursors and the cut (reference A): a returning replica with a longer tail
//! is brought down to a history start, its snapshot boundary lowered, its
//! cursors clamped; nothing at or below the start is touched, and a repeated
//! cut changes nothing.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use strand_partition::{
    CutOutcome, CutPoint, DurableFields, MemoryDisk, PartitionError, RetentionPolicy,
};
use strand_wal::CrashMode;

fn map(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs
        .iter()
        .map(|(name, offset)| ((*name).to_owned(), *offset))
        .collect()
}

fn storage_image(disk: &MemoryDisk) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let storage = disk.storage();
    storage
        .paths()
        .into_iter()
        .map(|path| {
            let bytes = storage.contents(&path).unwrap_or_default().to_vec();
            (path, bytes)
        })
        .collect()
}

#[test]
fn cursor_events_ship_snapshot_compact_and_replay_at_open() {
    let (mut partition, _) = open_memory(MemoryDisk::new(1), small_config());
    append_durable(&mut partition, 10, 10, 20);
    store_cursors(&mut partition, &[("a", 5), ("b", 7)]);
    store_cursors(&mut partition, &[("a", 9)]);
    assert_eq!(partition.cursor_tail(), 3);
    assert_eq!(partition.cursors(), &map(&[("a", 9), ("b", 7)]));
    let shipped = partition.read_cursor_events(1, 3).expect("events");
    let shipped: Vec<(String, u64)> = shipped
        .into_iter()
        .map(|event| (event.consumer, event.offset))
        .collect();
    assert_eq!(shipped, vec![("b".to_owned(), 7), ("a".to_owned(), 9)]);
    assert!(matches!(
        partition.append_cursors(7, 1, &events(&[("x", 1)])),
        Err(PartitionError::CursorEventsMisaligned { .. })
    ));
    partition.snapshot_cursors().expect("snapshot");
    assert_eq!(partition.cursor_snapshot_covers(), 3);
    store_cursors(&mut partition, &[("c", 50)]);
    assert_eq!(partition.compact_cursors(u64::MAX).expect("compact"), 2);
    assert_eq!(partition.cursor_log_start(), 3);
    assert!(matches!(
        partition.read_cursor_events(0, 3),
        Err(PartitionError::CursorEventsCompacted { log_start: 3, .. })
    ));
    let mut disk = partition.abandon();
    disk.crash(CrashMode::LoseUnsynced);
    let (mut partition, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.cursor_tail, 4);
    assert_eq!(partition.cursors(), &map(&[("a", 9), ("b", 7), ("c", 50)]));
    store_cursors(&mut partition, &[("b", 60)]);
    assert_eq!(partition.cursor("b"), Some(60));
}

#[test]
fn a_returning_replica_cuts_its_records_and_cursors_to_the_start() {
    let (mut partition, _) = open_memory(MemoryDisk::new(2), small_config());
    let written = append_durable(&mut partition, 30, 10, 20);
    store_cursors(&mut partition, &[("a", 100), ("b", 150)]);
    store_cursors(&mut partition, &[("a", 250), ("c", 290)]);
    let outcome = partition
        .cut(CutPoint {
            op: 20,
            cursor_tail: Some(3),
        })
        .expect("cut");
    assert_eq!(
        outcome,
        CutOutcome {
            ops_removed: 10,
            cursor_events_removed: 1,
            snapshot_boundary_lowered: false,
            cursors_clamped: 1,
        }
    );
    assert_eq!((partition.op(), partition.offset_end()), (20, 200));
    assert_eq!(partition.cursor_tail(), 3);
    assert_eq!(
        partition.cursors(),
        &map(&[("a", 200), ("b", 150)]),
        "a clamped, c cut"
    );
    assert_eq!(
        read_all(&mut partition),
        written[..20].to_vec(),
        "nothing at or below the start changed"
    );
    // The new primary's history continues from the start.
    append_durable(&mut partition, 2, 10, 20);
    store_cursors(&mut partition, &[("d", 210)]);
    let mut disk = partition.abandon();
    disk.crash(CrashMode::LoseUnsynced);
    let (partition, recovery) = open_memory(disk, small_config());
    assert!(
        recovery.faulty.is_empty(),
        "the cut ops are not reported lost"
    );
    assert_eq!(recovery.op, 22);
    assert_eq!(recovery.cursor_tail, 4);
    assert_eq!(
        partition.cursors(),
        &map(&[("a", 220), ("b", 150), ("d", 210)])
    );
}

#[test]
fn a_snapshot_past_the_cut_keeps_its_state_and_lowers_its_boundary() {
    let (mut partition, _) = open_memory(MemoryDisk::new(3), small_config());
    append_durable(&mut partition, 10, 10, 20);
    store_cursors(&mut partition, &[("a", 10), ("b", 20)]);
    store_cursors(&mut partition, &[("a", 30), ("b", 40)]);
    partition.snapshot_cursors().expect("snapshot");
    partition.compact_cursors(u64::MAX).expect("compact");
    assert_eq!(
        (
            partition.cursor_snapshot_covers(),
            partition.cursor_log_start()
        ),
        (4, 4)
    );
    let outcome = partition
        .cut(CutPoint {
            op: 10,
            cursor_tail: Some(2),
        })
        .expect("cut");
    assert!(outcome.snapshot_boundary_lowered);
    assert_eq!(partition.cursor_tail(), 2);
    assert_eq!(partition.cursor_snapshot_covers(), 2);
    assert_eq!(
        partition.cursors(),
        &map(&[("a", 30), ("b", 40)]),
        "the snapshot's state stays"
    );
    // The new primary's events at sequence 2 and 3 replay over it.
    store_cursors(&mut partition, &[("a", 15)]);
    store_cursors(&mut partition, &[("c", 5)]);
    let expected = map(&[("a", 15), ("b", 40), ("c", 5)]);
    assert_eq!(partition.cursors(), &expected);
    let mut disk = partition.abandon();
    disk.crash(CrashMode::LoseUnsynced);
    let (partition, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.cursor_tail, 4);
    assert_eq!(partition.cursors(), &expected, "replayed the same at open");
}

#[test]
fn cursors_above_the_record_log_end_are_clamped_on_open() {
    let (mut partition, _) = open_memory(MemoryDisk::new(4), small_config());
    append_durable(&mut partition, 5, 10, 20);
    store_cursors(&mut partition, &[("ahead", 500), ("behind", 30)]);
    partition.snapshot_cursors().expect("snapshot");
    partition
        .cut(strand_partition::CutPoint {
            op: 3,
            cursor_tail: None,
        })
        .expect("cut");
    let mut disk = partition.abandon();
    disk.crash(CrashMode::LoseUnsynced);
    let (partition, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.offset_end, 30);
    assert_eq!(recovery.cursors.cursors_clamped, 1);
    assert_eq!(partition.cursors(), &map(&[("ahead", 30), ("behind", 30)]));
}

#[test]
fn a_repeated_cut_changes_nothing() {
    let (mut partition, _) = open_memory(MemoryDisk::new(5), small_config());
    append_durable(&mut partition, 20, 10, 20);
    store_cursors(&mut partition, &[("a", 100)]);
    store_cursors(&mut partition, &[("a", 190)]);
    partition.snapshot_cursors().expect("snapshot");
    let start = CutPoint {
        op: 12,
        cursor_tail: Some(1),
    };
    partition.cut(start).expect("first cut");
    let before = storage_image(partition.device_mut());
    let state = (
        partition.op(),
        partition.cursor_tail(),
        partition.cursors().clone(),
    );
    assert_eq!(
        partition.cut(start).expect("second cut"),
        CutOutcome::default()
    );
    assert_eq!(
        storage_image(partition.device_mut()),
        before,
        "not a byte changed"
    );
    assert_eq!(
        (
            partition.op(),
            partition.cursor_tail(),
            partition.cursors().clone()
        ),
        state
    );
}

#[test]
fn the_cut_never_goes_below_the_retained_head_or_the_commit() {
    let (mut partition, _) = open_memory(MemoryDisk::new(6), small_config());
    append_durable(&mut partition, 60, 10, 200);
    persist_commit(&mut partition, 50, 1);
    let retention = RetentionPolicy {
        retention_bytes: Some(1),
        retention_ms: None,
    };
    let head = partition
        .apply_retention(retention, 0, u64::MAX)
        .expect("retention")
        .head_op;
    assert!(head > 2, "head {head}");
    assert!(matches!(
        partition.cut(CutPoint {
            op: head - 2,
            cursor_tail: Some(0),
        }),
        Err(PartitionError::BelowRetainedHead { .. } | PartitionError::TruncateBelowCommit { .. })
    ));
    let fields = DurableFields {
        view: strand_wire::ViewId::new(0, 2),
        log_view: strand_wire::ViewId::new(0, 2),
        commit: 55,
        history_starts: Vec::new(),
        ..DurableFields::default()
    };
    partition.persist_state(fields, 2).expect("persist");
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");
    assert!(matches!(
        partition.cut(CutPoint {
            op: 50,
            cursor_tail: Some(0),
        }),
        Err(PartitionError::TruncateBelowCommit { op: 50, commit: 51 })
    ));
    assert_eq!(partition.op(), 60, "refused cuts touch nothing");
    let _ = Path::new(MEMORY_DIR);
}

/// A cut whose superblock write fails leaves files that still hold the ops
/// consensus dropped: no superblock is written after it (a newer log view
/// would vouch for them) until the partition is reopened.
#[test]
fn after_a_failed_cut_no_superblock_is_written_until_a_reopen() {
    let (mut partition, _) = open_memory(strand_partition::MemoryDisk::new(11), small_config());
    append_durable(&mut partition, 6, 1, 50);
    for copy in 0..2 {
        let path = strand_partition::layout::superblock_path(Path::new(MEMORY_DIR), copy);
        partition
            .device_mut()
            .storage_mut()
            .fail_next_sync(&path, libc::EIO)
            .expect("inject");
    }
    let cut = partition.cut(strand_partition::CutPoint {
        op: 3,
        cursor_tail: None,
    });
    assert!(cut.is_err(), "{cut:?}");
    let fields = partition.superblock().durable.clone();
    assert!(matches!(
        partition.persist_state(fields, 9),
        Err(strand_partition::PartitionError::LogFailed { .. })
    ));
    let mut disk = partition.abandon();
    disk.crash(strand_wal::CrashMode::ProcessCrash);
    let (_, recovery) = open_memory(disk, small_config());
    assert_eq!(
        recovery.op, 6,
        "the reopen finds the ops the cut never removed"
    );
}

/// Found by the simulator (seed 83337): a cut failed half way (a read of
/// the segment it keeps failed after the later segments were gone), and a
/// view change asked for another cut before the group was reopened; the
/// log's head no longer matched its segments and the second cut panicked.
/// A log that failed changes no more until it is reopened.
#[test]
fn a_cut_after_one_that_failed_half_way_is_refused_not_a_panic() {
    let (mut partition, _) = open_memory(MemoryDisk::new(12), small_config());
    append_durable(&mut partition, 120, 1, 200);
    assert!(partition.segment_count() > 2, "several segments");
    let keep = partition.entry_location(11).expect("op 11").path;
    partition
        .device_mut()
        .storage_mut()
        .fail_next_read(&keep, libc::EIO)
        .expect("inject");
    let first = partition.cut(CutPoint {
        op: 10,
        cursor_tail: None,
    });
    assert!(first.is_err(), "{first:?}");
    // A later view cuts higher, where the segments the first cut dropped were.
    let second = partition.cut(CutPoint {
        op: 100,
        cursor_tail: None,
    });
    assert!(
        matches!(second, Err(PartitionError::LogFailed { .. })),
        "{second:?}"
    );
}

/// A cut of the cursor log lowers the superblock's cursor checkpoint to the
/// first event it writes again (the base of the frame it splits) before it
/// touches the file: the events written after the cut land below the old
/// checkpoint, and an open after a crash trusts, without writing them again,
/// only the events below the checkpoint.
#[test]
fn a_cursor_cut_lowers_the_cursor_checkpoint_to_the_first_event_it_writes_again() {
    let (mut partition, _) = open_memory(MemoryDisk::new(7), small_config());
    append_durable(&mut partition, 30, 10, 20);
    store_cursors(&mut partition, &[("a", 100), ("b", 150)]);
    store_cursors(&mut partition, &[("a", 250), ("c", 290), ("d", 10)]);
    persist_commit(&mut partition, 30, 1);
    assert_eq!(partition.superblock().cursor_checkpoint, 5);
    partition
        .cut(CutPoint {
            op: 30,
            cursor_tail: Some(3),
        })
        .expect("cut");
    assert_eq!(
        partition.superblock().cursor_checkpoint,
        2,
        "the second frame (events 2..5) is split: its first event is written again"
    );
    let before = partition.superblock().cursor_checkpoint;
    partition
        .cut(CutPoint {
            op: 30,
            cursor_tail: Some(2),
        })
        .expect("cut at a frame boundary");
    assert_eq!(partition.superblock().cursor_checkpoint, before.min(2));
}
