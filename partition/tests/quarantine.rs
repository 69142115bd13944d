//! Quarantine on real files: `<dir>.fenced.0`, `.fenced.1`, … kept intact,
//! the partition rebuilt from the agreed prefix (hard links for whole
//! segments), then completed by a state transfer that reuses that prefix.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use common::*;
use strand_partition::fixtures::produce;
use strand_partition::layout::{fenced_path, segment_path};
use strand_partition::{ExportConfig, next_fenced_number};
use strand_wire::CommandHeader;

/// Every file under `dir` with its bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir).expect("under dir").to_path_buf();
                files.insert(relative, std::fs::read(&path).expect("read"));
            }
        }
    }
    files
}

#[test]
fn quarantine_fences_in_order_keeps_the_copy_and_rebuilds_from_the_agreed_op() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, small_config());
    let written = append_durable(&mut partition, 50, 4, 150);
    store_cursors(&mut partition, &[("a", 10)]);
    let offsets = partition.segment_offsets();
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");
    assert_eq!(
        next_fenced_number(partition.device_mut(), &dir).expect("number"),
        0
    );

    let agreed = 30;
    let (mut rebuilt, recovery, quarantined) = partition.quarantine(agreed).expect("quarantine");
    assert_eq!(quarantined.fenced_dir, fenced_path(&dir, 0));
    assert_eq!(quarantined.fenced_number, 0);
    let fenced_tree = tree(&quarantined.fenced_dir);
    assert!(recovery.awaiting_state_transfer);
    assert_eq!(recovery.op, agreed);
    assert!(recovery.durable.commit <= agreed);
    assert!(recovery.faulty.is_empty());
    assert_eq!(
        rebuilt.cursor_tail(),
        0,
        "cursors come with the state transfer"
    );
    assert_eq!(read_all(&mut rebuilt), written[..agreed as usize].to_vec());
    assert!(quarantined.segments_linked > 0 && quarantined.segments_copied == 1);
    let inode = |path: PathBuf| std::fs::metadata(path).expect("stat").ino();
    assert_eq!(
        inode(segment_path(&dir, offsets[0])),
        inode(segment_path(&quarantined.fenced_dir, offsets[0])),
        "a whole segment is a hard link"
    );

    // Writing to the rebuilt partition never changes the fenced copy.
    append_durable(&mut rebuilt, 5, 4, 150);
    rebuilt
        .cut(strand_partition::CutPoint {
            op: agreed,
            cursor_tail: None,
        })
        .expect("cut");
    let (rebuilt, recovery, quarantined) = rebuilt.quarantine(10).expect("quarantine again");
    assert_eq!(quarantined.fenced_number, 1);
    assert_eq!(quarantined.fenced_dir, fenced_path(&dir, 1));
    assert_eq!(recovery.op, 10);
    assert_eq!(
        tree(&fenced_path(&dir, 0)),
        fenced_tree,
        "the first copy is untouched"
    );
    drop(rebuilt);
    let (_, recovery) = open_file(&wal, &dir, small_config());
    assert!(
        recovery.awaiting_state_transfer,
        "still awaiting after a restart"
    );
    wal.shutdown().expect("shutdown");
}

#[test]
fn a_quarantined_partition_is_completed_by_a_transfer_that_reuses_its_prefix() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    // The replica's history and the primary's share ops 1..=30, then differ.
    let dir = partition_dir(root.path());
    let (mut replica, _) = open_file(&wal, &dir, small_config());
    let shared = append_durable(&mut replica, 30, 4, 150);
    let (mut primary, _) = open_file(&wal, &root.path().join("primary"), small_config());
    for prepare in &shared {
        primary.write_prepare(prepare.clone()).expect("append");
    }
    append_durable(&mut replica, 10, 4, 150);
    for op in 31..=45u64 {
        let parent = primary.checksum(op - 1).expect("chained");
        let prepare = produce(op, parent, primary.offset_end(), 3, 90);
        assert_ne!(Some(prepare.header().checksum()), replica.checksum(op));
        primary.write_prepare(prepare).expect("append");
    }
    store_cursors(&mut primary, &[("a", 100)]);
    let mut out = Vec::new();
    primary.flush(&mut out).expect("flush");

    let (mut replica, _, _) = replica.quarantine(30).expect("quarantine");
    let export = primary
        .export(
            45,
            ExportConfig {
                chunk_data_bytes_max: 4096,
            },
            bytes::Bytes::new(),
        )
        .expect("export");
    let manifest = primary.export_chunk(&export, 0).expect("manifest");
    let mut import = replica.import_begin(&manifest).expect("begin");
    assert!(
        import.segments_reused() > 0,
        "whole shared segments are not fetched again"
    );
    let needed = import.needed_chunks();
    assert!(needed.len() < export.chunk_count() as usize - 1);
    for chunk in needed {
        let body = primary.export_chunk(&export, chunk).expect("chunk");
        replica
            .import_chunk(&mut import, chunk, &body)
            .expect("import");
    }
    let (mut replica, recovery) = replica.install(import).expect("install");
    assert!(!recovery.awaiting_state_transfer);
    assert_eq!(recovery.op, 45);
    assert_eq!(replica.cursor("a"), Some(100));
    for op in 1..=45 {
        assert_eq!(
            replica.read_prepare(op).expect("read"),
            primary.read_prepare(op).expect("read")
        );
    }
    assert!(
        fenced_path(&dir, 0).exists(),
        "the fenced copy outlives the transfer"
    );
    wal.shutdown().expect("shutdown");
}

#[test]
fn quarantine_and_transfer_work_on_the_in_memory_disk_too() {
    use strand_partition::MemoryDisk;
    let (mut primary, _) = open_memory(MemoryDisk::new(1), small_config());
    let written = append_durable(&mut primary, 40, 4, 150);
    let (mut replica, _) = open_memory(MemoryDisk::new(2), small_config());
    for prepare in &written[..25] {
        replica.write_prepare(prepare.clone()).expect("append");
    }
    append_durable(&mut replica, 5, 1, 10);
    let (mut replica, recovery, quarantined) = replica.quarantine(25).expect("quarantine");
    assert_eq!(quarantined.fenced_number, 0);
    assert!(recovery.awaiting_state_transfer && recovery.op == 25);
    let dir = Path::new(MEMORY_DIR);
    assert!(
        replica
            .device_mut()
            .storage()
            .contents(&segment_path(&fenced_path(dir, 0), 0))
            .is_some()
    );
    let export = primary
        .export(
            40,
            ExportConfig {
                chunk_data_bytes_max: 3000,
            },
            bytes::Bytes::new(),
        )
        .expect("export");
    let manifest = primary.export_chunk(&export, 0).expect("manifest");
    let mut import = replica.import_begin(&manifest).expect("begin");
    for chunk in import.needed_chunks() {
        let body = primary.export_chunk(&export, chunk).expect("chunk");
        replica
            .import_chunk(&mut import, chunk, &body)
            .expect("import");
    }
    let (mut replica, recovery) = replica.install(import).expect("install");
    assert!(!recovery.awaiting_state_transfer && recovery.faulty.is_empty());
    assert_eq!(read_all(&mut replica), written);
    let mut disk = replica.abandon();
    disk.crash(strand_wal::CrashMode::LoseUnsynced);
    let (mut replica, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.op, 40);
    assert_eq!(read_all(&mut replica), written);
}

#[test]
fn an_unopenable_partition_is_fenced_and_recreated_awaiting_a_transfer() {
    use strand_partition::{FileDisk, Partition, PartitionError};
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, small_config());
    append_durable(&mut partition, 5, 2, 50);
    let mut fields = partition.superblock().durable.clone();
    fields.view = strand_wire::ViewId::new(2, 7);
    fields.log_view = strand_wire::ViewId::new(2, 6);
    partition.persist_state(fields, 1).expect("persist");
    partition.close().expect("close");
    // A valid frame holding an op that does not belong: the log contradicts itself.
    let stray = produce(100, 1, 10, 2, 50).to_bytes();
    let mut frame = Vec::new();
    strand_wal::encode_frame_into(&stray, &mut frame).expect("frame");
    let segment = segment_path(&dir, 0);
    let mut bytes = std::fs::read(&segment).expect("read");
    bytes.extend_from_slice(&frame);
    std::fs::write(&segment, bytes).expect("write");
    let error = Partition::open(FileDisk::new(wal.clone()), &dir, small_config())
        .err()
        .expect("refused");
    assert!(
        matches!(error, PartitionError::LogInconsistent { op: 100, .. }),
        "{error}"
    );
    let (partition, recovery, quarantined) =
        Partition::fence_unopenable(FileDisk::new(wal.clone()), &dir, small_config())
            .expect("fence");
    assert_eq!(quarantined.fenced_dir, fenced_path(&dir, 0));
    assert!(recovery.awaiting_state_transfer && recovery.op == 0);
    assert_eq!(
        (recovery.durable.view, recovery.durable.log_view),
        (
            strand_wire::ViewId::new(2, 7),
            strand_wire::ViewId::new(2, 6)
        ),
        "the view never goes back"
    );
    assert!(segment_path(&quarantined.fenced_dir, 0).exists());
    drop(partition);
    wal.shutdown().expect("shutdown");
}

/// A storage fault empties the first segment, another damages the first
/// entry of the second, consensus cuts the log to op 0, and the power goes
/// after the cut's superblock (nothing sealed) but before the second
/// segment's removal. Nothing on disk says which ops the leftover holds:
/// the open refuses it rather than number it on from op 1 (which once
/// wrote a superblock listing two segments starting at op 1, and panicked),
/// and a node's open fences it and awaits a transfer.
#[test]
fn a_cut_leftover_behind_an_empty_segment_is_refused_and_fenced_not_misnumbered() {
    use strand_partition::{CutPoint, FileDisk, Partition, PartitionError};
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, small_config());
    append_durable(&mut partition, 12, 2, 1000);
    let records = dir.join("records");
    let mut segments: Vec<PathBuf> = std::fs::read_dir(&records)
        .expect("list")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    segments.sort();
    assert!(segments.len() >= 2, "{segments:?}");
    let leftover = segments[1].clone();
    let mut leftover_bytes = std::fs::read(&leftover).expect("read");
    partition
        .cut(CutPoint {
            op: 0,
            cursor_tail: None,
        })
        .expect("cut");
    drop(partition.abandon());
    assert_eq!(std::fs::metadata(&segments[0]).expect("first").len(), 0);
    // The removal never happened, and the leftover's first header is damaged.
    leftover_bytes[12] ^= 0xff;
    std::fs::write(&leftover, &leftover_bytes).expect("write");

    let error = Partition::open(FileDisk::new(wal.clone()), &dir, small_config())
        .err()
        .expect("refused");
    assert!(
        matches!(error, PartitionError::LogInconsistent { op: 1, .. }),
        "{error}"
    );
    let (partition, recovery, fenced) =
        Partition::open_or_fence(FileDisk::new(wal.clone()), &dir, small_config()).expect("fenced");
    let fenced = fenced.expect("the log was fenced");
    assert_eq!(fenced.fenced_dir, fenced_path(&dir, 0));
    assert!(recovery.awaiting_state_transfer && recovery.op == 0);
    assert!(
        fenced
            .fenced_dir
            .join("records")
            .join(leftover.file_name().expect("name"))
            .exists()
    );
    drop(partition);
    wal.shutdown().expect("shutdown");
}

#[test]
fn repairing_a_linked_segment_never_changes_the_fenced_copy() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(root.path());
    let (mut partition, _) = open_file(&wal, &dir, small_config());
    let written = append_durable(&mut partition, 50, 4, 150);
    let offsets = partition.segment_offsets();
    let (rebuilt, _, quarantined) = partition.quarantine(30).expect("quarantine");
    drop(rebuilt);
    let shared = segment_path(&dir, offsets[0]);
    let fenced_segment = segment_path(&quarantined.fenced_dir, offsets[0]);
    let links = |path: &Path| std::fs::metadata(path).expect("stat").nlink();
    assert_eq!(links(&shared), 2, "the first segment is a hard link");
    // Damage the body of op 2 in the shared bytes: both names see it.
    let frame_len = (strand_wal::FRAME_HEADER_BYTES + written[0].frame_size()) as u64;
    let body_byte =
        frame_len + (strand_wal::FRAME_HEADER_BYTES + strand_wire::HEADER_SIZE) as u64 + 30;
    let mut bytes = std::fs::read(&shared).expect("read");
    bytes[body_byte as usize] ^= 0x10;
    std::fs::write(&shared, &bytes).expect("damage");
    let damaged_fenced = std::fs::read(&fenced_segment).expect("read fenced");
    assert_eq!(damaged_fenced, bytes);

    let (mut rebuilt, recovery) = open_file(&wal, &dir, small_config());
    assert_eq!(recovery.faulty, vec![2]);
    rebuilt
        .write_prepare(written[1].clone())
        .expect("rewrite the damaged op");
    assert!(rebuilt.faulty().is_empty());
    assert_eq!(
        rebuilt.read_prepare(2).expect("read"),
        Some(written[1].clone())
    );
    assert_eq!(
        links(&shared),
        1,
        "the repaired segment is a file of its own"
    );
    assert_eq!(links(&fenced_segment), 1);
    assert_eq!(
        std::fs::read(&fenced_segment).expect("read fenced"),
        damaged_fenced,
        "the fenced copy is evidence: never changed"
    );
    wal.shutdown().expect("shutdown");
}

/// A partition at view 0.7 with 30 ops, closed or open, on an in-memory disk.
fn memory_partition_in_view(
    seed: u64,
    view: strand_wire::ViewId,
) -> strand_partition::Partition<strand_partition::MemoryDisk> {
    let (mut partition, _) = open_memory(strand_partition::MemoryDisk::new(seed), small_config());
    append_durable(&mut partition, 30, 4, 150);
    let mut fields = partition.superblock().durable.clone();
    fields.view = view;
    fields.log_view = view;
    partition.persist_state(fields, 1).expect("persist");
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");
    partition
}

/// A power loss at any step of a quarantine or of a fence leaves a
/// partition that opens with the views it had: the rebuild is complete
/// before anything moves, and an open finishes a swap a power loss cut
/// between its two renames (a directory left without its superblock would
/// open as a fresh partition at view 0).
#[test]
fn a_power_loss_anywhere_in_a_quarantine_or_a_fence_keeps_the_views() {
    use strand_partition::Partition;
    use strand_wal::CrashMode;
    let view = strand_wire::ViewId::new(0, 7);
    for ops in 0..24 {
        for fence in [false, true] {
            let mut partition = memory_partition_in_view(ops, view);
            let rebuilt = if fence {
                let mut disk = partition.close().expect("close");
                disk.lose_power_after(ops, CrashMode::Random);
                let (rebuilt, _, _) =
                    Partition::fence_unopenable(disk, Path::new(MEMORY_DIR), small_config())
                        .expect("fence");
                rebuilt
            } else {
                partition
                    .device_mut()
                    .lose_power_after(ops, CrashMode::Random);
                let (rebuilt, _, _) = partition.quarantine(20).expect("quarantine");
                rebuilt
            };
            let mut disk = rebuilt.abandon();
            disk.crash(CrashMode::Random);
            let (_, recovery) = open_memory(disk, small_config());
            assert!(
                !recovery.fresh,
                "fence {fence}, power lost after {ops} operations"
            );
            assert_eq!(
                (recovery.durable.view, recovery.durable.log_view),
                (view, view),
                "fence {fence}, power lost after {ops} operations: the view never goes back"
            );
        }
    }
}
