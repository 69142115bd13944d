//! Opening after damage in the log's files: damaged entries (reported by op,
//! rewritten in place or through the WAL), segments cut short, damaged
//! indexes, misdirected writes, repairs that cannot fit. Every fault is a
//! typed error or a report. Faults where the superblock decides (its copies,
//! the persisted state, the tail past its checkpoints) are in
//! `recovery_superblock.rs`.

mod common;

use std::path::Path;

use common::*;
use strand_partition::index::IndexDamage;
use strand_partition::layout::{index_path, segment_path};
use strand_partition::{MemoryDisk, Partition, PartitionError, WriteStage};
use strand_wal::FRAME_HEADER_BYTES;
use strand_wire::HEADER_SIZE;

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
        .device_mut()
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
