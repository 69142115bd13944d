//! The durable mark: a `persisted` log that the disk cut short without a
//! trace still knows which ops it may have acknowledged.
//!
//! A lost write of the log's tail block leaves a log that simply ends
//! earlier (cut at an entry's boundary, or zeros after the last whole
//! entry), which no scan can tell from one that never had the ops. Before
//! the mark, only ops up to the superblock's checkpoint (written every few
//! seconds) were known: the others counted as never had, and a view change
//! could drop an acknowledged op on this replica's word.

mod common;

use std::path::Path;

use common::*;
use strand_partition::durable_mark::{MarkSlot, decode_file};
use strand_partition::layout::{durable_mark_path, segment_path};
use strand_partition::{Completed, CutPoint, Disk, MemoryDisk, PartitionError, WriteStage};
use strand_wal::CrashMode;
use strand_wire::Durability;

/// Appends five durable ops, crashes the process, and lets `lose` take the
/// newest writes from the active segment (the disk lost them); returns the
/// reopened recovery's op, faulty ops and lost-tail start.
fn lose_tail(lose: impl Fn(&mut MemoryDisk, &Path, u64, u64)) -> (u64, Vec<u64>, Option<u64>) {
    lose_tail_after(|_| {}, lose)
}

/// [`lose_tail`], with `before` run on the partition once the ops are
/// durable (a superblock write, say).
fn lose_tail_after(
    before: impl Fn(&mut strand_partition::Partition<MemoryDisk>),
    lose: impl Fn(&mut MemoryDisk, &Path, u64, u64),
) -> (u64, Vec<u64>, Option<u64>) {
    let (mut partition, _) = open_memory(MemoryDisk::new(3), small_config());
    append_durable(&mut partition, 5, 2, 100);
    before(&mut partition);
    let active = segment_path(
        Path::new(MEMORY_DIR),
        *partition.segment_offsets().last().expect("a segment"),
    );
    let from = partition
        .entry_location(4)
        .expect("op 4 is readable")
        .position;
    let len = partition
        .disk()
        .storage()
        .contents(&active)
        .expect("the active segment")
        .len() as u64;
    let mut disk = partition.abandon();
    disk.crash(CrashMode::ProcessCrash);
    lose(&mut disk, &active, from, len);
    let (_, recovery) = open_memory(disk, small_config());
    (recovery.op, recovery.faulty, recovery.lost_tail_from)
}

#[test]
fn a_tail_cut_at_an_entry_boundary_is_lost_not_never_had() {
    let (op, faulty, lost) = lose_tail(|disk, active, from, _| {
        disk.storage_mut().cut(active, from).expect("cut");
    });
    assert_eq!(op, 3, "the log reads as ending at op 3");
    assert_eq!(faulty, vec![4, 5], "ops 4 and 5 may have been acked");
    assert_eq!(lost, Some(4));
}

#[test]
fn a_tail_block_read_back_as_zeros_is_lost_not_never_had() {
    let (op, faulty, lost) = lose_tail(|disk, active, from, len| {
        let zeros = vec![0u8; (len - from) as usize];
        disk.write_at(active, from, &zeros).expect("zero the tail");
    });
    assert_eq!((op, faulty, lost), (3, vec![4, 5], Some(4)));
}

/// Opens a partition on disk seed `seed` with two durable ops, lets
/// `inject` arm a fault on the mark's first file, writes op 3 and returns
/// the partition and what the flush reported.
fn write_after_mark_fault(
    seed: u64,
    inject: impl Fn(&mut strand_wal::MemoryStorage, &Path),
) -> (strand_partition::Partition<MemoryDisk>, Vec<Completed>) {
    let (mut partition, _) = open_memory(MemoryDisk::new(seed), small_config());
    append_durable(&mut partition, 2, 2, 100);
    let mark = durable_mark_path(Path::new(MEMORY_DIR), 0);
    inject(partition.device_mut().storage_mut(), &mark);
    let prepare = next_prepare(&partition, 2, 100);
    partition.write_prepare(prepare).expect("queued");
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");
    (partition, out)
}

#[test]
fn a_prepare_is_durable_only_once_the_mark_covers_it() {
    let (mut partition, out) = write_after_mark_fault(4, |storage, mark| {
        storage.fail_next_write(mark, libc::EIO).expect("inject");
    });
    assert!(
        matches!(&out[..], [Completed::PrepareFailed { op: 3, .. }]),
        "the log's copy is durable, the mark's is not: {out:?}"
    );
    let next = next_prepare(&partition, 2, 100);
    assert!(matches!(
        partition.write_prepare(next),
        Err(PartitionError::LogFailed { .. })
    ));
}

/// Found by the simulator (seed 1591): the mark's sync failed before the
/// log's completion of the op it covered arrived; the op was then held for
/// a mark that would never come, no failure was reported, and the group
/// never reopened. A prepare the log makes durable after a mark write
/// failed is reported failed.
#[test]
fn a_failed_mark_sync_fails_the_prepares_it_would_have_covered() {
    for seed in 0..8 {
        let (_, out) = write_after_mark_fault(40 + seed, |storage, mark| {
            storage.fail_next_sync(mark, libc::EIO).expect("inject");
        });
        assert!(
            matches!(&out[..], [Completed::PrepareFailed { op: 3, .. }]),
            "seed {seed}: {out:?}"
        );
    }
}

#[test]
fn ops_a_cut_removed_are_never_taken_for_lost() {
    let (mut partition, _) = open_memory(MemoryDisk::new(5), small_config());
    append_durable(&mut partition, 5, 2, 100);
    partition
        .cut(CutPoint {
            op: 3,
            cursor_tail: None,
        })
        .expect("cut");
    let mut disk = partition.abandon();
    disk.crash(CrashMode::LoseUnsynced);
    let (_, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.op, 3);
    assert!(recovery.faulty.is_empty(), "{:?}", recovery.faulty);
    assert_eq!(recovery.lost_tail_from, None);
}

#[test]
fn the_mark_follows_the_log_and_a_replicated_partition_keeps_none() {
    let (mut partition, _) = open_memory(MemoryDisk::new(6), small_config());
    append_durable(&mut partition, 3, 2, 100);
    let mark = durable_mark_path(Path::new(MEMORY_DIR), 0);
    let bytes = partition.disk().storage().contents(&mark).expect("a mark");
    assert_eq!(decode_file(bytes).map(|slot: MarkSlot| slot.op), Some(3));
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");

    let replicated = strand_partition::PartitionConfig {
        durability: Durability::Replicated,
        ..small_config()
    };
    let (mut partition, _) = open_memory(MemoryDisk::new(7), replicated);
    append_durable(&mut partition, 3, 2, 100);
    let stage = partition.write_prepare(next_prepare(&partition, 2, 100));
    assert_eq!(stage.expect("queued").stage, WriteStage::Queued);
    assert!(
        partition.disk().storage().contents(&mark).is_none(),
        "replicated logs ack before the fsync and reopen untrusted: no mark"
    );
}

/// Found by the simulator (seed 11285, with an earlier layout of the
/// mark): a crash left the mark's newest write torn, and the next open
/// could not go on writing it. Whatever a crash left of the newest mark
/// (torn, or damaged with nothing after it), the mark opens, reads the
/// newest valid one and takes the next.
#[test]
fn a_mark_whose_newest_write_is_torn_or_damaged_opens_and_goes_on() {
    for damage in ["torn", "flipped"] {
        let (mut partition, _) = open_memory(MemoryDisk::new(9), small_config());
        append_durable(&mut partition, 2, 2, 100);
        let mark = durable_mark_path(Path::new(MEMORY_DIR), 0);
        let mut disk = partition.abandon();
        disk.crash(CrashMode::ProcessCrash);
        let len = disk.storage().contents(&mark).expect("a mark").len() as u64;
        match damage {
            "torn" => disk.storage_mut().cut(&mark, len - 5).expect("tear"),
            _ => disk.write_at(&mark, len - 3, &[0xEE]).expect("flip"),
        }
        let (mut partition, recovery) = open_memory(disk, small_config());
        assert!(
            recovery.faulty.is_empty(),
            "{damage}: {:?}",
            recovery.faulty
        );
        append_durable(&mut partition, 3, 2, 100);
        assert_eq!(partition.durable_op(), 5, "{damage}");
        let bytes = partition.disk().storage().contents(&mark).expect("a mark");
        assert_eq!(decode_file(bytes).map(|mark| mark.op), Some(5), "{damage}");
    }
}

/// The marks move to the other file once one holds `ROTATE_BYTES`; the
/// newest mark is found after a crash whichever file holds it.
#[test]
fn the_marks_move_between_two_files_and_the_newest_survives_a_crash() {
    use strand_partition::durable_mark::{MARK_BYTES, ROTATE_BYTES};
    let ops = ROTATE_BYTES / MARK_BYTES as u64 + 20;
    let (mut partition, _) = open_memory(MemoryDisk::new(10), small_config());
    append_durable(&mut partition, 3, 2, 16);
    let second = durable_mark_path(Path::new(MEMORY_DIR), 1);
    assert!(
        partition.disk().storage().contents(&second).is_none(),
        "one file until it fills"
    );
    append_durable(&mut partition, ops - 3, 2, 16);
    partition.flush(&mut Vec::new()).expect("flush");
    let dir = Path::new(MEMORY_DIR);
    let newest = |partition: &strand_partition::Partition<MemoryDisk>, index| {
        let bytes = partition
            .disk()
            .storage()
            .contents(&durable_mark_path(dir, index));
        bytes.and_then(decode_file).map(|mark| mark.op)
    };
    assert_eq!(
        newest(&partition, 1),
        Some(ops),
        "the second file took over"
    );
    let older = newest(&partition, 0).expect("the first keeps its marks until reused");
    assert!(older < ops, "{older}");
    let mut disk = partition.abandon();
    disk.crash(CrashMode::LoseUnsynced);
    let (_, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.op, ops);
    assert!(recovery.faulty.is_empty());
}

#[test]
fn a_tail_the_checkpoint_vouches_for_is_lost_too() {
    // The superblock's checkpoint caught up with the newest ops before the
    // disk lost them: the mark vouches for no more than the checkpoint, and
    // the loss is the same loss, reported the same way (it used to count
    // only when the mark reached past the checkpoint, so whether it showed
    // depended on when the superblock was last written).
    let (op, faulty, lost) = lose_tail_after(
        |partition| persist_commit(partition, 5, 1),
        |disk, active, from, _| disk.storage_mut().cut(active, from).expect("cut"),
    );
    assert_eq!(op, 3, "the log reads as ending at op 3");
    assert_eq!(faulty, vec![4, 5], "ops 4 and 5 may have been acked");
    assert_eq!(lost, Some(4), "a lost tail below the checkpoint is counted");
}
