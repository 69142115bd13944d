//! State transfer on real files: export, import, install; interrupted at
//! every chunk; a bad chunk refused; an interrupted swap finished at open.

mod common;

use std::path::Path;

use bytes::Bytes;

use common::*;
use strand_partition::layout::{install_marker_path, replaced_path, staging_path};
use strand_partition::{
    Disk, ExportConfig, FileDisk, Partition, PartitionError, Recovery, RetentionPolicy,
};
use strand_wal::Wal;
use strand_wire::{Msg, PrepareHeader};

const SMALL_CHUNKS: ExportConfig = ExportConfig {
    chunk_data_bytes_max: 6000,
};

/// An exporter with `ops` ops, cursors and a moved retention head.
fn exporter(wal: &Wal, dir: &Path, ops: u64) -> (Partition<FileDisk>, Vec<Msg<PrepareHeader>>) {
    let (mut partition, _) = open_file(wal, dir, small_config());
    let written = append_durable(&mut partition, ops, 4, 120);
    store_cursors(&mut partition, &[("a", 40), ("b", 400)]);
    store_cursors(&mut partition, &[("a", 80)]);
    persist_commit(&mut partition, ops, 1);
    // Entries of about 950 bytes, 17 to a 16 KiB segment: a limit of
    // 20 KiB keeps the active segment and the one or two sealed ones it
    // takes to reach the limit, dropping one segment of 40 ops and two of 60.
    let policy = RetentionPolicy {
        retention_bytes: Some(20 * 1024),
        retention_ms: None,
    };
    partition
        .apply_retention(policy, 0, u64::MAX)
        .expect("retention");
    (partition, written)
}

fn check_installed(
    installed: &mut Partition<FileDisk>,
    recovery: &Recovery,
    source: &mut Partition<FileDisk>,
    frontier: u64,
) {
    assert!(!recovery.awaiting_state_transfer);
    assert!(recovery.faulty.is_empty());
    assert_eq!(recovery.op, frontier);
    assert_eq!(recovery.head_op, source.head_op());
    assert_eq!(recovery.durable.commit, frontier);
    assert_eq!(
        recovery.headers.last().map(|header| header.op.get()),
        Some(frontier)
    );
    assert_eq!(installed.cursor_tail(), source.cursor_tail());
    let mut expected = source.cursors().clone();
    for offset in expected.values_mut() {
        *offset = (*offset).min(installed.offset_end());
    }
    assert_eq!(installed.cursors(), &expected);
    for op in installed.head_op()..=frontier {
        assert_eq!(
            installed.read_prepare(op).expect("read"),
            source.read_prepare(op).expect("read")
        );
    }
    let batches = fetch_all(installed, installed.head_offset(), 8192);
    assert_eq!(
        batches.last().map(|(base, count)| base + u64::from(*count)),
        Some(installed.offset_end())
    );
}

#[test]
fn a_partition_round_trips_through_a_state_transfer() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let (mut source, _) = exporter(&wal, &root.path().join("source"), 60);
    let frontier = 55;
    // Large enough to span chunks: the table is a file of the stream.
    let client_table = Bytes::from(vec![7u8; 3000]);
    let export = source
        .export(frontier, SMALL_CHUNKS, client_table.clone())
        .expect("export");
    assert!(export.chunk_count() > 5, "{} chunks", export.chunk_count());
    let (mut target, _) = open_file(&wal, &root.path().join("target"), small_config());
    let manifest = source.export_chunk(&export, 0).expect("manifest");
    let mut import = target.import_begin(&manifest).expect("begin");
    assert_eq!(import.segments_reused(), 0);
    for chunk in import.needed_chunks() {
        let body = source.export_chunk(&export, chunk).expect("chunk");
        assert!(body.len() <= strand_wire::STATE_TRANSFER_CHUNK_SIZE_MAX);
        target
            .import_chunk(&mut import, chunk, &body)
            .expect("import");
    }
    let (mut installed, recovery) = target.install(import).expect("install");
    check_installed(&mut installed, &recovery, &mut source, frontier);
    assert!(!staging_path(installed.dir()).exists());
    assert_eq!(
        recovery.durable.client_table, client_table,
        "the installed superblock records the source's client table"
    );
    // The installed partition goes on from the frontier.
    append_durable(&mut installed, 3, 4, 120);
    wal.shutdown().expect("shutdown");
}

#[test]
fn a_source_that_committed_nothing_hands_over_an_empty_partition() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let (mut source, _) = open_file(&wal, &root.path().join("source"), small_config());
    append_durable(&mut source, 5, 4, 120);
    let export = source
        .export(0, SMALL_CHUNKS, Bytes::new())
        .expect("export at op 0");
    assert!(export.manifest().frontier_header.is_none());
    let (mut target, _) = open_file(&wal, &root.path().join("target"), small_config());
    let manifest = source.export_chunk(&export, 0).expect("manifest");
    let mut import = target.import_begin(&manifest).expect("begin");
    for chunk in import.needed_chunks() {
        let body = source.export_chunk(&export, chunk).expect("chunk");
        target
            .import_chunk(&mut import, chunk, &body)
            .expect("import");
    }
    let (mut installed, recovery) = target.install(import).expect("install");
    assert!(!recovery.awaiting_state_transfer);
    assert_eq!((recovery.op, recovery.durable.commit), (0, 0));
    assert!(recovery.headers.is_empty());
    assert_eq!(installed.offset_end(), 0);
    // The installed partition takes ops from op 1 (the group's, repaired).
    append_durable(&mut installed, 3, 4, 120);
    assert_eq!(installed.offset_end(), 12);
    wal.shutdown().expect("shutdown");
}

#[test]
fn an_import_interrupted_at_every_chunk_resumes_and_installs_the_same_partition() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let (mut source, _) = exporter(&wal, &root.path().join("source"), 40);
    let frontier = 40;
    let export = source
        .export(frontier, SMALL_CHUNKS, Bytes::new())
        .expect("export");
    let manifest = source.export_chunk(&export, 0).expect("manifest");
    let chunks: Vec<_> = (0..export.chunk_count())
        .map(|chunk| source.export_chunk(&export, chunk).expect("chunk"))
        .collect();
    for interrupted_after in 0..export.chunk_count() {
        let dir = root.path().join(format!("target-{interrupted_after}"));
        let (mut target, _) = open_file(&wal, &dir, small_config());
        let mut import = target.import_begin(&manifest).expect("begin");
        for chunk in 1..=interrupted_after {
            target
                .import_chunk(&mut import, chunk, &chunks[chunk as usize])
                .expect("import");
        }
        // The process dies here: the import state is gone, the partition
        // directory untouched.
        drop(import);
        drop(target);
        let (mut target, recovery) = open_file(&wal, &dir, small_config());
        assert_eq!(
            recovery.op, 0,
            "interrupted at {interrupted_after}: nothing half-installed"
        );
        let mut import = target.import_begin(&manifest).expect("resume");
        let needed = import.needed_chunks();
        assert_eq!(
            needed,
            (interrupted_after.max(1)..export.chunk_count())
                .filter(|&c| c > interrupted_after)
                .collect::<Vec<_>>()
        );
        for chunk in needed {
            target
                .import_chunk(&mut import, chunk, &chunks[chunk as usize])
                .expect("import");
        }
        let (mut installed, recovery) = target.install(import).expect("install");
        check_installed(&mut installed, &recovery, &mut source, frontier);
    }
    wal.shutdown().expect("shutdown");
}

#[test]
fn a_chunk_with_a_bad_checksum_is_refused_and_writes_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let (mut source, _) = exporter(&wal, &root.path().join("source"), 30);
    let export = source
        .export(30, SMALL_CHUNKS, Bytes::new())
        .expect("export");
    let (mut target, _) = open_file(&wal, &root.path().join("target"), small_config());
    let mut import = target
        .import_begin(&source.export_chunk(&export, 0).expect("manifest"))
        .expect("begin");
    let good = source.export_chunk(&export, 1).expect("chunk");
    let mut bad = good.to_vec();
    bad[40] ^= 0x20;
    assert!(matches!(
        target.import_chunk(&mut import, 1, &bad),
        Err(PartitionError::ChunkChecksum { chunk: 1, .. })
    ));
    assert!(matches!(
        target.import_chunk(&mut import, 2, &good),
        Err(PartitionError::ChunkInvalid { chunk: 2, .. })
    ));
    assert!(
        import.needed_chunks().contains(&1),
        "the refused chunk is still needed"
    );
    let mut bad_manifest = source.export_chunk(&export, 0).expect("manifest").to_vec();
    bad_manifest[9] ^= 1;
    assert!(target.import_begin(&bad_manifest).is_err());
    target
        .import_chunk(&mut import, 1, &good)
        .expect("the good copy is taken");
    assert!(matches!(
        target.finish_staging(&import),
        Err(PartitionError::ImportRejected { .. })
    ));
    wal.shutdown().expect("shutdown");
}

#[test]
fn another_manifest_starts_the_import_over() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let (mut source, _) = exporter(&wal, &root.path().join("source"), 30);
    let first = source
        .export(20, SMALL_CHUNKS, Bytes::new())
        .expect("export");
    let second = source
        .export(30, SMALL_CHUNKS, Bytes::new())
        .expect("export");
    let (mut target, _) = open_file(&wal, &root.path().join("target"), small_config());
    let mut import = target
        .import_begin(&source.export_chunk(&first, 0).expect("manifest"))
        .expect("begin");
    let body = source.export_chunk(&first, 1).expect("chunk");
    target.import_chunk(&mut import, 1, &body).expect("import");
    let import = target
        .import_begin(&source.export_chunk(&second, 0).expect("manifest"))
        .expect("begin");
    assert_eq!(
        import.needed_chunks(),
        (1..second.chunk_count()).collect::<Vec<_>>()
    );
    wal.shutdown().expect("shutdown");
}

#[test]
fn a_swap_interrupted_by_a_crash_is_finished_by_the_next_open() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let (mut source, _) = exporter(&wal, &root.path().join("source"), 30);
    let export = source
        .export(30, SMALL_CHUNKS, Bytes::new())
        .expect("export");
    for moved_aside in [false, true] {
        let dir = root.path().join(format!("target-{moved_aside}"));
        let (mut target, _) = open_file(&wal, &dir, small_config());
        let mut import = target
            .import_begin(&source.export_chunk(&export, 0).expect("manifest"))
            .expect("begin");
        for chunk in import.needed_chunks() {
            let body = source.export_chunk(&export, chunk).expect("chunk");
            target
                .import_chunk(&mut import, chunk, &body)
                .expect("import");
        }
        target.finish_staging(&import).expect("staged");
        drop(target);
        // The crash came after the marker (and maybe the first rename).
        std::fs::write(install_marker_path(&dir), b"install").expect("marker");
        if moved_aside {
            std::fs::rename(&dir, replaced_path(&dir)).expect("rename");
        }
        let (mut installed, recovery) = open_file(&wal, &dir, small_config());
        check_installed(&mut installed, &recovery, &mut source, 30);
        assert!(!install_marker_path(&dir).exists() && !replaced_path(&dir).exists());
        assert!(installed.device_mut().exists(&dir));
    }
    wal.shutdown().expect("shutdown");
}

#[test]
fn an_export_needs_a_durable_undamaged_frontier() {
    let root = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let (mut source, _) = exporter(&wal, &root.path().join("source"), 40);
    assert!(matches!(
        source.export(41, SMALL_CHUNKS, Bytes::new()),
        Err(PartitionError::ExportUnavailable {
            frontier_op: 41,
            ..
        })
    ));
    let head = source.head_op();
    assert!(head > 2, "retention moved the head");
    assert!(matches!(
        source.export(head - 2, SMALL_CHUNKS, Bytes::new()),
        Err(PartitionError::ExportUnavailable { .. })
    ));
    wal.shutdown().expect("shutdown");
}
