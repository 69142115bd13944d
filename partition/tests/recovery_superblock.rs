//! Opening after faults where the superblock decides: its two copies, the
//! persisted state and clean-shutdown mark, its listing of sealed segments, and
//! the tail cut back to its checkpoints after a failed write or sync in this
//! process (a full disk, a failed roll, a failed superblock or cursor sync).
//! Every fault is a typed error or a report.

mod common;

use std::path::Path;

use common::*;
use strand_partition::layout::{segment_path, superblock_path};
use strand_partition::superblock::HistoryStart;
use strand_partition::{
    Completed, DurableFields, MemoryDisk, Partition, PartitionError, WriteStage,
};
use strand_wal::FRAME_HEADER_BYTES;
use strand_wire::Durability;

/// Persisted state in view `view` with commit `commit`, whose one history
/// start is at that commit.
fn fields(view: u32, commit: u64) -> DurableFields {
    let view = strand_wire::ViewId::new(0, view);
    DurableFields {
        view,
        log_view: view,
        commit,
        history_starts: vec![HistoryStart {
            view,
            op: commit,
            cursor_tail: 0,
            replica: 1,
            accepted_loss: false,
            offset_end: Some(commit * 10),
            checksum: None,
        }],
        ..DurableFields::default()
    }
}

#[test]
fn persisted_state_and_the_clean_shutdown_mark_come_back() {
    let mut config = small_config();
    config.durability = Durability::Replicated;
    config.replica = 2;
    let (mut partition, recovery) = open_memory(MemoryDisk::new(1), config);
    assert!(recovery.fresh && recovery.log_trusted());
    append_durable(&mut partition, 5, 1, 10);
    partition.persist_state(fields(3, 4), 7).expect("persist");
    partition
        .persist_state(fields(4, 5), 8)
        .expect("queued behind the first");
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");
    assert!(out.contains(&Completed::StatePersisted { sequence: 7 }));
    assert!(out.contains(&Completed::StatePersisted { sequence: 8 }));
    let disk = partition.close().expect("close");
    let (partition, recovery) = open_memory(disk, config);
    assert!(recovery.recovered_from_disk && recovery.clean_shutdown && recovery.log_trusted());
    assert_eq!(recovery.durable, fields(4, 5));
    assert_eq!(
        (recovery.replica, recovery.durability),
        (2, Durability::Replicated)
    );
    assert_eq!(recovery.op, 5);
    assert_eq!(recovery.op_checkpoint, 5);
    // Opening cleared the mark: a crash now is not a clean shutdown.
    let mut disk = partition.abandon();
    disk.crash(strand_wal::CrashMode::LoseUnsynced);
    let (_, recovery) = open_memory(disk, config);
    assert!(!recovery.clean_shutdown);
    assert!(
        !recovery.log_trusted(),
        "replicated, recovered, not clean: untrusted"
    );
}

#[test]
fn a_truncated_superblock_copy_falls_back_to_the_other_and_both_is_an_error() {
    let (mut partition, _) = open_memory(MemoryDisk::new(2), small_config());
    partition.persist_state(fields(1, 0), 1).expect("persist");
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");
    let newest = partition.superblock().clone();
    let dir = Path::new(MEMORY_DIR);
    let mut disk = partition.abandon();
    disk.crash(strand_wal::CrashMode::ProcessCrash);
    let newest_path = superblock_path(dir, newest.copy());
    disk.storage_mut().cut(&newest_path, 10).expect("cut");
    let (partition, recovery) = open_memory(disk, small_config());
    assert_eq!(
        recovery.superblock_sequence,
        newest.sequence - 1,
        "the older copy"
    );
    let mut disk = partition.abandon();
    disk.crash(strand_wal::CrashMode::ProcessCrash);
    for copy in 0..2 {
        disk.storage_mut()
            .cut(&superblock_path(dir, copy), 30)
            .expect("cut");
    }
    let error = Partition::open(disk, dir, small_config())
        .err()
        .expect("refused");
    assert!(
        matches!(error, PartitionError::SuperblockUnreadable { .. }),
        "{error}"
    );
}

#[test]
fn superblock_copies_rewritten_in_place_hold_exactly_their_frame_and_reopen() {
    let wal = wal();
    let root = tempfile::tempdir().expect("temp dir");
    let dir = partition_dir(root.path());
    let config = small_config();
    let (mut partition, _) = open_file(&wal, &dir, config);
    let mut out = Vec::new();
    // Same lengths (rewritten in place) and changing ones (cleared, then
    // appended), each followed by its answer before the next.
    for sequence in 1..=40u64 {
        let mut state = fields(sequence as u32 + 1, 0);
        if sequence % 7 == 0 {
            let earlier = HistoryStart {
                view: strand_wire::ViewId::new(0, 1),
                ..state.history_starts[0]
            };
            state.history_starts.insert(0, earlier);
        }
        partition.persist_state(state, sequence).expect("persist");
        partition.flush(&mut out).expect("flush");
        assert!(
            out.contains(&Completed::StatePersisted { sequence }),
            "{sequence}: {out:?}"
        );
        out.clear();
        for copy in 0..2u8 {
            let bytes = std::fs::read(superblock_path(&dir, copy)).expect("a copy");
            let report = strand_wal::scan(&bytes);
            assert!(
                report.frames.len() == 1 && report.is_clean(),
                "{sequence}: copy {copy} is one frame and nothing after it (no zero room): {} bytes",
                bytes.len()
            );
        }
    }
    let expected = partition.superblock().clone();
    // A crash, not a clean close: the copies as the in-place writes left them.
    drop(partition.abandon());
    let (_, recovery) = open_file(&wal, &dir, config);
    assert_eq!(recovery.durable, expected.durable);
}

#[test]
fn a_new_partition_has_both_superblock_copies_and_reopens_with_the_second_empty() {
    let wal = wal();
    let root = tempfile::tempdir().expect("temp dir");
    let dir = partition_dir(root.path());
    let config = small_config();
    let (partition, _) = open_file(&wal, &dir, config);
    let second = std::fs::read(superblock_path(&dir, 1)).expect("the second copy exists");
    assert!(second.is_empty(), "created empty: {} bytes", second.len());
    let expected = partition.superblock().clone();
    drop(partition.abandon());
    let (mut partition, recovery) = open_file(&wal, &dir, config);
    assert_eq!(recovery.durable, expected.durable);
    // The first asynchronous write goes to the empty copy.
    let mut out = Vec::new();
    partition.persist_state(fields(3, 0), 1).expect("persist");
    partition.flush(&mut out).expect("flush");
    assert!(
        out.contains(&Completed::StatePersisted { sequence: 1 }),
        "{out:?}"
    );
    let second = std::fs::read(superblock_path(&dir, 1)).expect("the second copy");
    assert_eq!(
        second.len() % strand_partition::superblock::FRAME_BYTES_STEP,
        0
    );
    drop(partition.abandon());
    let (_, recovery) = open_file(&wal, &dir, config);
    assert_eq!(recovery.durable, fields(3, 0));
}

#[test]
fn a_joining_replica_stays_awaiting_its_transfer_and_a_retired_one_stays_retired() {
    let mut config = small_config();
    config.replica = 3;
    config.create_awaiting_transfer = true;
    let (partition, recovery) = open_memory(MemoryDisk::new(1), config);
    assert!(recovery.fresh && recovery.awaiting_state_transfer);
    // A crash before the transfer: the empty log is still not the group's.
    let mut disk = partition.abandon();
    disk.crash(strand_wal::CrashMode::LoseUnsynced);
    let (mut partition, recovery) = open_memory(disk, config);
    assert!(!recovery.fresh && recovery.awaiting_state_transfer);
    assert_eq!(recovery.retired_epoch, 0);
    partition.mark_retired(4).expect("mark retired");
    let mut disk = partition.abandon();
    disk.crash(strand_wal::CrashMode::LoseUnsynced);
    let (_, recovery) = open_memory(disk, config);
    assert_eq!(recovery.retired_epoch, 4, "durable at once");
}

/// Found by the simulator: a sealed segment cut to nothing, followed by a
/// segment whose first entry is damaged (so nothing on disk says where the
/// cut segment's ops end but the superblock's listing of it). Open used to
/// count the cut segment as empty and then refuse to write its own
/// superblock; every op of both runs must be reported, none lost.
#[test]
fn a_sealed_segment_cut_to_nothing_before_a_damaged_first_entry_reports_every_op() {
    let (mut partition, _) = open_memory(MemoryDisk::new(9), small_config());
    // Segment 0 is sealed and listed by a superblock; segment 1 is sealed
    // after that superblock, so only its own first entry names its ops.
    let written = append_durable(&mut partition, 20, 5, 200);
    assert!(partition.segment_count() >= 2);
    partition.persist_state(fields(1, 0), 1).expect("persist");
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");
    let listed = partition.superblock().sealed_segments.clone();
    assert!(!listed.is_empty(), "segment 0 is listed");
    append_durable(&mut partition, 40, 5, 200);
    let offsets = partition.segment_offsets();
    assert!(
        offsets.len() > listed.len() + 1,
        "a sealed segment not listed"
    );
    let dir = Path::new(MEMORY_DIR);
    let mut disk = partition.abandon();
    disk.crash(strand_wal::CrashMode::ProcessCrash);
    let cut = listed.last().expect("listed");
    disk.storage_mut()
        .cut(&segment_path(dir, cut.first_offset), 0)
        .expect("cut");
    let next = offsets
        .iter()
        .copied()
        .find(|offset| *offset > cut.first_offset)
        .expect("a segment after the cut one");
    // A bit of the first entry's prepare header: its op is unreadable.
    let header_byte = (FRAME_HEADER_BYTES + 40) as u64;
    disk.storage_mut()
        .flip_bit(&segment_path(dir, next), header_byte, 2)
        .expect("flip");
    let (_, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.op, 60, "nothing after the damage was cut");
    let first_of_next = cut.last_op + 1;
    let expected: Vec<u64> = (cut.first_op..=first_of_next).collect();
    assert_eq!(
        recovery.faulty,
        expected,
        "{written:?}",
        written = written.len()
    );
}

#[test]
fn a_full_disk_fails_the_append_clearly_and_harms_nothing_before_it() {
    let (mut partition, _) = open_memory(MemoryDisk::new(5), small_config());
    let written = append_durable(&mut partition, 4, 2, 100);
    let active = segment_path(
        Path::new(MEMORY_DIR),
        *partition.segment_offsets().last().expect("a segment"),
    );
    partition
        .device_mut()
        .storage_mut()
        .fail_next_write(&active, libc::ENOSPC)
        .expect("inject");
    let doomed = next_prepare(&partition, 2, 100);
    partition.write_prepare(doomed.clone()).expect("queued");
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");
    assert!(
        matches!(
            &out[..],
            [Completed::PrepareFailed {
                op: 5,
                error: PartitionError::NoSpace { .. },
                ..
            }]
        ),
        "{out:?}"
    );
    let next = next_prepare(&partition, 2, 100);
    assert!(matches!(
        partition.write_prepare(next),
        Err(PartitionError::LogFailed { .. })
    ));
    assert_eq!(
        read_all(&mut partition)[..4],
        written[..],
        "earlier ops are intact"
    );
    let mut disk = partition.abandon();
    disk.crash(strand_wal::CrashMode::ProcessCrash);
    let (mut partition, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.op, 4);
    // The durable mark went out in the append's turn and named op 5: open
    // cannot tell a failed write from a lost one, so op 5 may have been
    // acknowledged (faulty, repaired from peers), never "never had".
    assert_eq!(recovery.faulty, vec![5]);
    assert_eq!(recovery.lost_tail_from, Some(5));
    assert_eq!(read_all(&mut partition), written);
    partition
        .write_prepare(doomed)
        .expect("the retry after reopening succeeds");
}

#[test]
fn after_a_failed_write_the_tail_past_the_durable_checkpoint_is_cut_and_marked() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, small_config());
    append_durable(&mut partition, 5, 1, 50);
    persist_commit(&mut partition, 5, 1);
    append_durable(&mut partition, 3, 6, 50);
    drop(partition);
    let mut config = small_config();
    config.drop_unsynced = true;
    let (partition, recovery) = open_file(&wal, &dir, config);
    assert_eq!(recovery.op_checkpoint, 5);
    assert_eq!(recovery.op, 5, "ops past the checkpoint are cut");
    assert_eq!(recovery.unsynced_dropped_from, Some(6));
    assert_eq!(
        recovery.durable.maybe_acked_op, 8,
        "they may have been acked: never nacked, repaired from peers"
    );
    drop(partition);
    // An open without the flag keeps what is there.
    let (_, recovery) = open_file(&wal, &dir, small_config());
    assert_eq!((recovery.op, recovery.unsynced_dropped_from), (5, None));
    assert_eq!(recovery.durable.maybe_acked_op, 8);
    wal.shutdown().expect("shutdown");
}

/// A write that failed (queued, not yet reported) leaves the active segment
/// short of what the log counted; the WAL closes a poisoned file without a
/// sync and without an error. The roll that would seal it fails instead of
/// starting a successor, so sealed segments stay durable whole and a reopen
/// after the failure finds a consistent log.
#[test]
fn a_roll_after_a_failed_write_seals_nothing_and_the_reopen_is_consistent() {
    let mut disk = MemoryDisk::new(9);
    disk.set_manual_turns(true);
    let (mut partition, _) = open_memory(disk, small_config());
    append_durable(&mut partition, 2, 2, 1000);
    persist_commit(&mut partition, 2, 1);
    let active = segment_path(
        Path::new(MEMORY_DIR),
        *partition.segment_offsets().last().expect("a segment"),
    );
    partition
        .device_mut()
        .storage_mut()
        .fail_next_write(&active, libc::ENOSPC)
        .expect("inject");
    let refused = (0..20).find_map(|_| {
        let prepare = next_prepare(&partition, 2, 1000);
        partition.write_prepare(prepare).err()
    });
    assert!(
        matches!(refused, Some(PartitionError::LogFailed { .. })),
        "{refused:?}"
    );
    assert_eq!(partition.segment_offsets().len(), 1, "no successor started");
    let mut disk = partition.abandon();
    disk.crash(strand_wal::CrashMode::ProcessCrash);
    let mut config = small_config();
    config.drop_unsynced = true;
    let (mut partition, recovery) = open_memory(disk, config);
    assert_eq!(
        recovery.op, 2,
        "the failed ops are gone, and marked maybe acked"
    );
    append_durable(&mut partition, 12, 2, 1000);
    let mut disk = partition.abandon();
    disk.crash(strand_wal::CrashMode::ProcessCrash);
    let (_, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.op, 14);
}

/// A superblock write whose fsync failed may leave its copy whole in the
/// page cache, marked clean, where no later sync reaches it. The open in the
/// same process after the failure writes the chosen copy's bytes again
/// before it rewrites the other, so a power loss anywhere in that open
/// leaves a copy to open from.
#[test]
fn an_open_after_a_failed_superblock_sync_leaves_a_readable_copy_whatever_the_power_does() {
    use strand_wal::CrashMode;
    for ops in 0..8 {
        let (mut partition, _) = open_memory(MemoryDisk::new(ops), small_config());
        append_durable(&mut partition, 3, 1, 50);
        let copy = superblock_path(Path::new(MEMORY_DIR), 1);
        partition
            .device_mut()
            .storage_mut()
            .fail_next_sync(&copy, libc::EIO)
            .expect("inject");
        partition.persist_state(fields(1, 0), 1).expect("queued");
        let mut out = Vec::new();
        partition.flush(&mut out).expect("flush");
        assert!(
            out.iter()
                .any(|done| matches!(done, Completed::StatePersistFailed { .. })),
            "{out:?}"
        );
        let mut disk = partition.abandon();
        disk.crash(CrashMode::ProcessCrash);
        disk.lose_power_after(ops, CrashMode::Random);
        let mut config = small_config();
        config.drop_unsynced = true;
        let (partition, _) = open_memory(disk, config);
        let mut disk = partition.abandon();
        disk.crash(CrashMode::Random);
        let opened = Partition::open(disk, Path::new(MEMORY_DIR), small_config());
        assert!(opened.is_ok(), "power lost after {ops}: {:?}", opened.err());
    }
}

/// A failed sync of the cursor log may leave its events in the page cache,
/// marked clean, though they never reached the disk: a reopen in the same
/// process (after the failure) must not count them durable, or a later
/// power loss takes events the replica reported durable. Like the record
/// log's tail, the cursor log is cut back to the superblock's cursor
/// checkpoint (consumers may see records again: at-least-once).
#[test]
fn after_a_failed_cursor_sync_the_events_past_the_checkpoint_are_not_trusted() {
    for seed in 0..16 {
        let (mut partition, _) = open_memory(MemoryDisk::new(300 + seed), small_config());
        append_durable(&mut partition, 1, 1, 50);
        store_cursors(&mut partition, &[("a", 1)]);
        persist_commit(&mut partition, 1, 1);
        let path = strand_partition::layout::cursors_log_path(Path::new(MEMORY_DIR));
        partition
            .device_mut()
            .storage_mut()
            .fail_next_sync(&path, libc::EIO)
            .expect("inject");
        let base = partition.cursor_tail();
        partition
            .append_cursors(base, 1, &events(&[("b", 1)]))
            .expect("queued");
        let mut out = Vec::new();
        partition.flush(&mut out).expect("flush");
        assert!(
            !out.iter().any(|completed| matches!(
                completed,
                Completed::Cursors {
                    stage: WriteStage::Durable,
                    ..
                }
            )),
            "seed {seed}: the sync failed: {out:?}"
        );
        // Reopened with every byte as the kernel holds it (a process
        // crash changes none), as the node reopens a failed group.
        let mut disk = partition.abandon();
        disk.crash(strand_wal::CrashMode::ProcessCrash);
        let mut config = small_config();
        config.drop_unsynced = true;
        let (partition, recovery) = open_memory(disk, config);
        assert_eq!(
            partition.cursor_durable_tail(),
            1,
            "seed {seed}: only the checkpointed event is durable"
        );
        assert_eq!(partition.cursor("b"), None, "seed {seed}");
        assert!(recovery.cursors.cut_bytes > 0 || partition.cursor_tail() == 1);
    }
}
