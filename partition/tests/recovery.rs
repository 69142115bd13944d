//! Opening after faults: superblock copies, damaged and truncated segments,
//! damaged indexes, a full disk. Every fault is a typed error or a report.

mod common;

use std::path::Path;

use common::*;
use strand_partition::index::IndexDamage;
use strand_partition::layout::{index_path, segment_path, superblock_path};
use strand_partition::superblock::HistoryStart;
use strand_partition::{
    Completed, DurableFields, MemoryDisk, Partition, PartitionError, WriteStage,
};
use strand_wal::FRAME_HEADER_BYTES;
use strand_wire::{Durability, HEADER_SIZE};

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
fn a_damaged_entry_mid_log_is_reported_by_op_and_rewritten_in_place() {
    let (mut partition, _) = open_memory(MemoryDisk::new(3), small_config());
    let written = append_durable(&mut partition, 40, 5, 200);
    let offsets = partition.segment_offsets();
    let dir = Path::new(MEMORY_DIR);
    let mut disk = partition.close().expect("close");
    // Flip a body byte of op 3 (first segment) and a header byte of the
    // first op of the second segment.
    let frame_len = (FRAME_HEADER_BYTES + written[0].frame_size()) as u64;
    let body_byte = 2 * frame_len + (FRAME_HEADER_BYTES + HEADER_SIZE + 30) as u64;
    disk.storage_mut()
        .flip_bit(&segment_path(dir, offsets[0]), body_byte, 3)
        .expect("flip");
    disk.storage_mut()
        .flip_bit(&segment_path(dir, offsets[1]), 40, 0)
        .expect("flip");
    let (mut partition, recovery) = open_memory(disk, small_config());
    let second_first_op = offsets[1] / 5 + 1;
    assert_eq!(recovery.faulty, vec![3, second_first_op]);
    assert_eq!(recovery.op, 40, "nothing after the damage was cut");
    assert_eq!(recovery.damage.len(), 2);
    let header_ops: Vec<u64> = recovery
        .headers
        .iter()
        .map(|header| header.op.get())
        .collect();
    assert!(
        header_ops.contains(&3),
        "a damaged body leaves its header readable"
    );
    assert!(
        !header_ops.contains(&second_first_op),
        "a damaged header is left out"
    );
    assert_eq!(
        partition.read_prepare(3).expect("read"),
        None,
        "a damaged op is never served"
    );
    assert!(matches!(
        partition.fetch(10, 10),
        Err(PartitionError::EntryDamaged { op: 3, .. })
    ));
    let before_damage = partition.fetch(0, 1 << 20).expect("fetch up to the damage");
    assert_eq!(
        before_damage.len(),
        2,
        "the reply ends before the damaged op"
    );
    // Appending is still possible while repairs are pending.
    append_durable(&mut partition, 1, 5, 200);
    for op in [3, second_first_op] {
        let accepted = partition
            .write_prepare(written[op as usize - 1].clone())
            .expect("rewrite");
        assert_eq!(accepted.stage, WriteStage::Durable);
    }
    assert!(partition.faulty().is_empty());
    assert_eq!(read_all(&mut partition)[..40], written[..]);
    let disk = partition.close().expect("close");
    let (_, recovery) = open_memory(disk, small_config());
    assert!(recovery.faulty.is_empty() && recovery.damage.is_empty());
}

#[test]
fn a_rewrite_must_match_the_damaged_entry() {
    let (mut partition, _) = open_memory(MemoryDisk::new(4), small_config());
    let written = append_durable(&mut partition, 5, 2, 50);
    let dir = Path::new(MEMORY_DIR);
    let mut disk = partition.close().expect("close");
    let frame_len = (FRAME_HEADER_BYTES + written[0].frame_size()) as u64;
    disk.storage_mut()
        .flip_bit(&segment_path(dir, 0), frame_len + 300, 1)
        .expect("flip");
    let (mut partition, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.faulty, vec![2]);
    let impostor = strand_partition::fixtures::produce(2, written[0].checksum(), 2, 2, 51);
    assert_ne!(impostor.checksum(), written[1].checksum());
    assert!(matches!(
        partition.write_prepare(impostor),
        Err(PartitionError::RewriteMismatch { op: 2, .. })
    ));
    let intact_impostor = strand_partition::fixtures::produce(4, written[2].checksum(), 6, 2, 51);
    assert!(matches!(
        partition.write_prepare(intact_impostor),
        Err(PartitionError::OpNotNext { op: 4, .. })
    ));
}

#[test]
fn a_corrupt_index_is_rebuilt_from_the_log() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, small_config());
    let written = append_durable(&mut partition, 40, 5, 200);
    let offsets = partition.segment_offsets();
    partition.close().expect("close");
    let index = index_path(&dir, offsets[0]);
    let mut bytes = std::fs::read(&index).expect("read");
    bytes[12] ^= 0xff;
    std::fs::write(&index, &bytes).expect("write");
    std::fs::remove_file(index_path(&dir, offsets[1])).expect("remove");
    let (mut partition, recovery) = open_file(&wal, &dir, small_config());
    let rebuilt: Vec<_> = recovery
        .indexes_rebuilt
        .iter()
        .map(|rebuild| (rebuild.segment_first_offset, rebuild.damage.clone()))
        .collect();
    assert_eq!(rebuilt.len(), 2);
    assert!(
        matches!(rebuilt[0], (offset, IndexDamage::Corrupt { .. } | IndexDamage::Torn) if offset == offsets[0])
    );
    assert_eq!(rebuilt[1], (offsets[1], IndexDamage::Missing));
    assert!(recovery.faulty.is_empty());
    assert_eq!(read_all(&mut partition), written);
    partition.close().expect("close");
    let (_, recovery) = open_file(&wal, &dir, small_config());
    assert!(
        recovery.indexes_rebuilt.is_empty(),
        "the rebuilt indexes are good"
    );
    wal.shutdown().expect("shutdown");
}

#[test]
fn a_sealed_segment_cut_short_reports_its_lost_ops_as_faulty() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, small_config());
    let written = append_durable(&mut partition, 40, 5, 200);
    let offsets = partition.segment_offsets();
    partition.close().expect("close");
    let frame_len = (FRAME_HEADER_BYTES + written[0].frame_size()) as u64;
    let first = segment_path(&dir, offsets[0]);
    let len = std::fs::metadata(&first).expect("stat").len();
    let kept_ops = 2;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&first)
        .and_then(|file| file.set_len(kept_ops * frame_len + 17))
        .expect("truncate");
    let (mut partition, recovery) = open_file(&wal, &dir, small_config());
    let ops_in_first = len / frame_len;
    assert_eq!(
        recovery.faulty,
        (kept_ops + 1..=ops_in_first).collect::<Vec<_>>()
    );
    assert_eq!(recovery.op, 40);
    // The lost ops come back by rewrite, extending the file again.
    for op in kept_ops + 1..=ops_in_first {
        partition
            .write_prepare(written[op as usize - 1].clone())
            .expect("rewrite");
    }
    assert!(partition.faulty().is_empty());
    assert_eq!(read_all(&mut partition), written);
    wal.shutdown().expect("shutdown");
}

#[test]
fn the_log_cut_below_its_durable_checkpoint_reports_the_missing_ops() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, small_config());
    let written = append_durable(&mut partition, 10, 1, 50);
    partition.close().expect("close");
    let frame_len = (FRAME_HEADER_BYTES + written[0].frame_size()) as u64;
    let segment = segment_path(&dir, 0);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .and_then(|file| file.set_len(6 * frame_len + 3))
        .expect("truncate");
    let (mut partition, recovery) = open_file(&wal, &dir, small_config());
    assert_eq!(recovery.op, 6);
    assert_eq!(recovery.op_checkpoint, 10);
    assert_eq!(
        recovery.faulty,
        vec![7, 8, 9, 10],
        "durable ops lost are faulty, not silent"
    );
    assert_eq!(recovery.torn_bytes_cut, 3);
    // They come back as appends, which clear them.
    for prepare in &written[6..] {
        partition.write_prepare(prepare.clone()).expect("append");
    }
    assert!(partition.faulty().is_empty());
    // A crash before the repair still reports them.
    drop(partition);
    let (_, recovery) = open_file(&wal, &dir, small_config());
    assert!(recovery.faulty.is_empty());
    wal.shutdown().expect("shutdown");
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
        .disk_mut()
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
fn damage_found_in_the_active_segment_is_rewritten_through_the_wal() {
    let (mut partition, _) = open_memory(MemoryDisk::new(11), small_config());
    let written = append_durable(&mut partition, 8, 5, 200);
    assert_eq!(
        partition.segment_count(),
        1,
        "every op is in the active segment"
    );
    let active = partition.segment_offsets()[0];
    // Damage the body of op 3 while the segment is open in the WAL.
    let frame_len = (FRAME_HEADER_BYTES + written[0].frame_size()) as u64;
    let body_byte = 2 * frame_len + (FRAME_HEADER_BYTES + HEADER_SIZE + 30) as u64;
    partition
        .disk_mut()
        .storage_mut()
        .flip_bit(&segment_path(Path::new(MEMORY_DIR), active), body_byte, 5)
        .expect("flip");
    assert!(matches!(
        partition.read_prepare(3),
        Err(PartitionError::EntryDamaged { op: 3, .. })
    ));
    assert_eq!(partition.faulty(), vec![3], "found damaged on read");
    let accepted = partition
        .write_prepare(written[2].clone())
        .expect("rewrite");
    assert_eq!(accepted.stage, WriteStage::Durable);
    assert!(partition.faulty().is_empty());
    // Appends after the rewrite land after the segment's end, not over it.
    let more = append_durable(&mut partition, 2, 5, 200);
    let all = read_all(&mut partition);
    assert_eq!(all[..8], written[..]);
    assert_eq!(all[8..], more[..]);
    let mut disk = partition.close().expect("close");
    disk.crash(strand_wal::CrashMode::LoseUnsynced);
    let (_, recovery) = open_memory(disk, small_config());
    assert!(recovery.faulty.is_empty() && recovery.damage.is_empty());
    assert_eq!(recovery.op, 10, "the durable rewrite survived the crash");
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

/// Found by the simulator: a power loss between removing a segment's two
/// files left its index behind, and the next segment rolled at that offset
/// could not create its own. Open removes an index without its segment.
#[test]
fn an_index_whose_segment_is_gone_is_removed_at_open() {
    let (mut partition, _) = open_memory(MemoryDisk::new(11), small_config());
    append_durable(&mut partition, 5, 1, 10);
    let dir = Path::new(MEMORY_DIR);
    let mut disk = partition.close().expect("close");
    let orphan = index_path(dir, 4_000);
    use strand_partition::Disk as _;
    disk.write_at(&orphan, 0, b"stale").expect("write");
    let (partition, _) = open_memory(disk, small_config());
    let mut disk = partition.close().expect("close");
    assert!(!disk.exists(&orphan), "the orphan index is gone");
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

/// Found by the simulator: a damaged last segment that holds no record (its
/// ops carry none) cannot be followed by a new segment, which would take its
/// name. Open appends after the damage instead; the damage stays reported
/// for repair, and what is appended after it reads back.
#[test]
fn a_damaged_last_segment_without_records_takes_appends_after_the_damage() {
    let (mut partition, _) = open_memory(MemoryDisk::new(12), small_config());
    let written = append_durable(&mut partition, 4, 0, 0);
    assert_eq!(partition.offset_end(), 0, "no op carries a record");
    let frame_len = (FRAME_HEADER_BYTES + written[0].frame_size()) as u64;
    let header_byte = frame_len + (FRAME_HEADER_BYTES + 40) as u64;
    let mut disk = partition.close().expect("close");
    disk.storage_mut()
        .flip_bit(&segment_path(Path::new(MEMORY_DIR), 0), header_byte, 3)
        .expect("flip");
    let (mut partition, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.op, 4);
    assert_eq!(partition.faulty(), vec![2], "op 2 reported for repair");
    assert_eq!(partition.segment_offsets(), vec![0], "no second segment");
    let more = append_durable(&mut partition, 2, 3, 100);
    assert_eq!(partition.offset_end(), 6);
    let accepted = partition
        .write_prepare(written[1].clone())
        .expect("rewrite");
    assert_eq!(accepted.stage, WriteStage::Durable);
    let mut disk = partition.close().expect("close");
    disk.crash(strand_wal::CrashMode::LoseUnsynced);
    let (mut partition, recovery) = open_memory(disk, small_config());
    assert!(recovery.faulty.is_empty() && recovery.damage.is_empty());
    let all = read_all(&mut partition);
    assert_eq!(all[..4], written[..]);
    assert_eq!(all[4..], more[..]);
}

/// Found by the simulator: a replica may ask to rewrite a committed op it
/// counted as damaged that storage holds intact (below the journal's window
/// it cannot tell). The very prepare the log holds is nothing to write.
#[test]
fn rewriting_an_intact_op_with_its_own_prepare_is_a_durable_no_op() {
    let (mut partition, _) = open_memory(MemoryDisk::new(13), small_config());
    let written = append_durable(&mut partition, 3, 2, 50);
    let accepted = partition
        .write_prepare(written[1].clone())
        .expect("the same prepare");
    assert_eq!(accepted.stage, WriteStage::Durable);
    let other = strand_partition::fixtures::produce(2, written[0].checksum(), 2, 3, 50);
    assert!(matches!(
        partition.write_prepare(other),
        Err(PartitionError::OpNotNext { op: 2, head: 3 })
    ));
    assert_eq!(read_all(&mut partition), written);
}

/// Writes `count` durable ops and stops without a clean close (the
/// superblock's durable checkpoint still says nothing of them), then applies
/// `damage` to the segment's bytes given the last frame's start.
fn crash_with_the_last_entry_damaged(
    count: u64,
    damage: impl FnOnce(&mut Vec<u8>, usize),
) -> (tempfile::TempDir, strand_wal::Wal, std::path::PathBuf) {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, small_config());
    let written = append_durable(&mut partition, count, 1, 50);
    drop(partition);
    let frame_len = FRAME_HEADER_BYTES + written[0].frame_size();
    let segment = segment_path(&dir, 0);
    let mut bytes = std::fs::read(&segment).expect("read the segment");
    let last_frame = (count as usize - 1) * frame_len;
    damage(&mut bytes, last_frame);
    std::fs::write(&segment, &bytes).expect("write the segment");
    (root, wal, dir)
}

/// Damage done to a segment's bytes, given the last frame's start.
type DamageFn = dyn Fn(&mut Vec<u8>, usize);

#[test]
fn a_damaged_last_entry_is_cut_only_after_it_is_marked_maybe_acked() {
    let flip_in_payload = |bytes: &mut Vec<u8>, frame: usize| {
        bytes[frame + FRAME_HEADER_BYTES + HEADER_SIZE + 5] ^= 0x20;
    };
    let flip_in_header = |bytes: &mut Vec<u8>, frame: usize| {
        bytes[frame + FRAME_HEADER_BYTES + 40] ^= 0x01;
    };
    let cut_inside = |bytes: &mut Vec<u8>, frame: usize| bytes.truncate(frame + 20);
    let damages: [(&str, &DamageFn); 3] = [
        ("payload", &flip_in_payload),
        ("header", &flip_in_header),
        ("cut short", &cut_inside),
    ];
    for (name, damage) in damages {
        let (_root, wal, dir) = crash_with_the_last_entry_damaged(5, damage);
        let (partition, recovery) = open_file(&wal, &dir, small_config());
        assert_eq!(recovery.op, 4, "{name}: the damaged entry is cut");
        assert_eq!(recovery.damaged_tail_from, Some(5), "{name}");
        assert_eq!(
            recovery.durable.maybe_acked_op, 5,
            "{name}: op 5 may have been acked: never a nack"
        );
        drop(partition);
        // The cut left a clean end: the mark is what still says so.
        let (_, recovery) = open_file(&wal, &dir, small_config());
        assert_eq!(recovery.damaged_tail_from, None, "{name}");
        assert_eq!(recovery.durable.maybe_acked_op, 5, "{name}: durable");
        wal.shutdown().expect("shutdown");
    }
}

#[test]
fn zeros_after_the_last_entry_are_no_damage() {
    let (_root, wal, dir) = crash_with_the_last_entry_damaged(5, |bytes, _| {
        bytes.resize(bytes.len() + 8192, 0);
    });
    let (_, recovery) = open_file(&wal, &dir, small_config());
    assert_eq!(recovery.op, 5);
    assert_eq!(recovery.damaged_tail_from, None);
    assert_eq!(recovery.durable.maybe_acked_op, 0);
    wal.shutdown().expect("shutdown");
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

#[test]
fn a_last_segment_whose_only_entry_is_damaged_is_marked_not_dropped() {
    let (mut partition, _) = open_memory(MemoryDisk::new(11), small_config());
    // Append until an op opens a segment of its own.
    let location = loop {
        append_durable(&mut partition, 1, 1, 500);
        let location = partition
            .entry_location(partition.op())
            .expect("the newest entry");
        if location.position == 0 && partition.segment_count() > 1 {
            break location;
        }
    };
    let op = partition.op();
    let mut disk = partition.abandon();
    disk.crash(strand_wal::CrashMode::ProcessCrash);
    // A bit of its prepare header: nothing of the segment is readable.
    let within_header = location.position + FRAME_HEADER_BYTES as u64 + 40;
    disk.storage_mut()
        .flip_bit(&location.path, within_header, 0)
        .expect("flip");
    let (partition, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.op, op - 1, "the damaged entry is cut");
    assert_eq!(recovery.damaged_tail_from, Some(op));
    assert_eq!(
        recovery.durable.maybe_acked_op, op,
        "never counted as never had"
    );
    assert!(
        partition
            .disk()
            .storage()
            .contents(&location.path)
            .is_some()
    );
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
        .disk_mut()
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
            .disk_mut()
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

/// A misdirected write: op 3's entry landed over op 4's place and left zeros
/// where it belonged. The valid frame of op 3 now follows bytes that hold
/// no entry; taking it as op 3 would put op 4 in a region too small for it
/// (its repair could never fit). The open refuses the log as inconsistent,
/// and the node's open fences the copy and rebuilds it by state transfer.
#[test]
fn a_misdirected_write_makes_the_log_inconsistent_never_a_guessed_layout() {
    let (mut partition, _) = open_memory(MemoryDisk::new(5), small_config());
    // Bodies of different sizes, so no two frames are alike in length.
    append_durable(&mut partition, 2, 1, 100);
    append_durable(&mut partition, 1, 1, 300);
    append_durable(&mut partition, 1, 1, 600);
    append_durable(&mut partition, 3, 1, 100);
    let (three, four) = (
        partition.entry_location(3).expect("op 3"),
        partition.entry_location(4).expect("op 4"),
    );
    assert!(three.frame_len < four.frame_len);
    let mut disk = partition.close().expect("close");
    disk.storage_mut()
        .misdirect(
            &three.path,
            three.position,
            three.frame_len,
            &four.path,
            four.position,
        )
        .expect("misdirect");
    let opened = Partition::open(disk, Path::new(MEMORY_DIR), small_config());
    assert!(
        matches!(opened, Err(PartitionError::LogInconsistent { op: 3, .. })),
        "{:?}",
        opened.map(|(_, recovery)| recovery.faulty)
    );
}

/// A misdirected write the walk cannot see: op 1's header is damaged (its
/// length unknown), and op 3's entry, the log's last, landed over op 2's
/// place. The open takes the frame there for op 3 and guesses ops 1 and 2
/// shared op 1's bytes; only the repair learns that op 2 cannot fit. It
/// refuses, marks the copy, and the node's next open fences it (a state
/// transfer rebuilds it) instead of failing the same way at every reopen.
#[test]
fn a_repair_that_cannot_fit_fences_the_copy_at_its_next_open() {
    let (mut partition, _) = open_memory(MemoryDisk::new(6), small_config());
    let mut written = append_durable(&mut partition, 1, 1, 300);
    written.extend(append_durable(&mut partition, 1, 1, 600));
    written.extend(append_durable(&mut partition, 1, 1, 100));
    let locations: Vec<_> = (1..=3)
        .map(|op| partition.entry_location(op).expect("located"))
        .collect();
    let mut disk = partition.close().expect("close");
    let (one, two, three) = (&locations[0], &locations[1], &locations[2]);
    disk.storage_mut()
        .flip_bit(&one.path, one.position + 20, 1)
        .expect("flip");
    disk.storage_mut()
        .misdirect(
            &three.path,
            three.position,
            three.frame_len,
            &two.path,
            two.position,
        )
        .expect("misdirect");
    let (mut partition, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.faulty, vec![1, 2], "the guessed layout");
    partition
        .write_prepare(written[0].clone())
        .expect("op 1 fits its bytes");
    let refused = partition.write_prepare(written[1].clone());
    assert!(
        matches!(
            refused,
            Err(PartitionError::RewriteMismatch { op: 2, reason }) if reason == strand_partition::REWRITE_DOES_NOT_FIT
        ),
        "{refused:?}"
    );
    // The node gives the group up and opens it again (a process crash
    // closes what the partition held open).
    let mut disk = partition.abandon();
    disk.crash(strand_wal::CrashMode::ProcessCrash);
    let (_, recovery, fenced) =
        Partition::open_or_fence(disk, Path::new(MEMORY_DIR), small_config()).expect("open");
    assert!(fenced.is_some(), "the copy is fenced");
    assert!(recovery.awaiting_state_transfer, "and rebuilt by transfer");
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
            .disk_mut()
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
