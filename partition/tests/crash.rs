//! Crashes at random points, then open: the log comes back as a prefix of
//! what was written, holding every op acknowledged durable, and the report
//! says so. Seeded; a failure prints its seed.

mod common;

use std::path::Path;

use common::*;
use strand_partition::layout::segment_path;
use strand_partition::{
    Completed, Disk, DurableFields, HistoryStart, MemoryDisk, Partition, WriteStage,
};
use strand_prng::Prng;
use strand_wal::{CrashMode, FRAME_HEADER_BYTES};
use strand_wire::{Msg, PrepareHeader};

/// What the test knows was acknowledged before a crash.
#[derive(Default)]
struct Acked {
    sync_failed: bool,
    op_durable: u64,
    cursor_durable: u64,
    persisted_commit: u64,
}

fn note(acked: &mut Acked, completions: &[Completed], commits: &[(u64, u64)]) {
    for completed in completions {
        match completed {
            Completed::Prepare {
                op,
                stage: WriteStage::Durable,
                ..
            } => acked.op_durable = acked.op_durable.max(*op),
            Completed::Cursors { cursor_end, .. } => {
                acked.cursor_durable = acked.cursor_durable.max(*cursor_end)
            }
            Completed::StatePersisted { sequence } => {
                let commit = commits
                    .iter()
                    .find(|(request, _)| request == sequence)
                    .map_or(0, |(_, commit)| *commit);
                acked.persisted_commit = acked.persisted_commit.max(commit);
            }
            Completed::PrepareFailed { .. } | Completed::StatePersistFailed { .. } => {}
            other => panic!("unexpected: {other:?}"),
        }
    }
}

/// Random appends, cursor stores, persists and polls, then a crash.
fn run_until_crash(
    partition: &mut Partition<MemoryDisk>,
    rng: &mut Prng,
    written: &mut Vec<Msg<PrepareHeader>>,
    acked: &mut Acked,
) {
    let mut commits = Vec::new();
    let mut out = Vec::new();
    for step in 0..rng.below(60) + 1 {
        match rng.below(10) {
            0..=5 => {
                let prepare = next_prepare(partition, rng.below(4) as u32 + 1, 300);
                if partition.write_prepare(prepare.clone()).is_ok() {
                    written.truncate(partition.op() as usize - 1);
                    written.push(prepare);
                }
            }
            6 if rng.below(8) == 0 => {
                // A failed fsync: the bytes it covered never reach the disk.
                let offsets = partition.segment_offsets();
                let active =
                    segment_path(Path::new(MEMORY_DIR), *offsets.last().expect("a segment"));
                let storage = partition.device_mut().storage_mut();
                storage.fail_next_sync(&active, libc::EIO).expect("inject");
                acked.sync_failed = true;
            }
            6 => {
                let base = partition.cursor_tail();
                let pairs = [("c1", rng.below(100)), ("c2", rng.below(100))];
                partition
                    .append_cursors(base, 2, &events(&pairs))
                    .expect("cursors");
            }
            7 => {
                let commit = acked.op_durable.min(partition.op());
                let sequence = step + 1000 * written.len() as u64;
                commits.push((sequence, commit));
                let fields = DurableFields {
                    view: strand_wire::ViewId::new(0, 1),
                    log_view: strand_wire::ViewId::new(0, 1),
                    commit,
                    // A start or none: the superblock's length changes, so
                    // some writes rewrite their copy in place and some clear
                    // it and append.
                    history_starts: (0..rng.below(2))
                        .map(|_| HistoryStart {
                            view: strand_wire::ViewId::new(0, 1),
                            op: 0,
                            cursor_tail: 0,
                            replica: 0,
                            accepted_loss: false,
                            offset_end: Some(0),
                            checksum: None,
                        })
                        .collect(),
                    ..DurableFields::default()
                };
                partition.persist_state(fields, sequence).expect("persist");
            }
            _ => {
                partition.poll(&mut out);
                note(acked, &out, &commits);
                out.clear();
            }
        }
    }
}

fn check_recovered(
    seed: u64,
    partition: &mut Partition<MemoryDisk>,
    written: &[Msg<PrepareHeader>],
    acked: &Acked,
    faulty: &[u64],
) {
    let op = partition.op();
    assert!(
        op >= acked.op_durable,
        "seed {seed}: durable op {} lost (log ends at {op}, a sync failed: {})",
        acked.op_durable,
        acked.sync_failed
    );
    assert!(
        op as usize <= written.len(),
        "seed {seed}: ops never written"
    );
    // A crash alone damages nothing. After a failed fsync, a process crash
    // can reopen on bytes the page cache kept but the disk lost; once later
    // writes or a checkpoint made the log depend on them, losing them shows
    // as faulty ops: reported, never silent, and repairable in place.
    assert!(
        faulty.is_empty() || acked.sync_failed,
        "seed {seed}: faulty {faulty:?} without a failed fsync"
    );
    for at in partition.head_op()..=op {
        let read = partition.read_prepare(at).expect("read");
        if faulty.contains(&at) {
            assert_eq!(read, None, "seed {seed}: faulty op {at} is not served");
            partition
                .write_prepare(written[at as usize - 1].clone())
                .unwrap_or_else(|error| panic!("seed {seed}: rewrite {at}: {error}"));
        } else {
            assert_eq!(
                read.as_ref(),
                Some(&written[at as usize - 1]),
                "seed {seed}: op {at}"
            );
        }
    }
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");
    assert!(
        partition.faulty().iter().all(|&at| at > op),
        "seed {seed}: every damaged op was rewritten"
    );
    assert_eq!(
        read_all(partition),
        written[..op as usize].to_vec(),
        "seed {seed}: a prefix"
    );
    assert!(
        partition.cursor_tail() >= acked.cursor_durable,
        "seed {seed}: durable cursor events lost"
    );
    assert!(
        partition.superblock().durable.commit >= acked.persisted_commit,
        "seed {seed}: persisted state lost"
    );
    let batches = fetch_all(partition, partition.head_offset(), 4096);
    let records: u64 = batches.iter().map(|(_, count)| u64::from(*count)).sum();
    assert_eq!(
        records,
        partition.offset_end(),
        "seed {seed}: every record fetchable"
    );
}

#[test]
fn crashes_at_random_points_recover_a_prefix_holding_every_durable_op() {
    let mut config = small_config();
    config.log.segment_bytes_max = 8 * 1024;
    let (mut damage_repaired, mut ops_lost, mut rolled) = (0usize, 0u64, 0usize);
    for seed in 0..60 {
        let mut rng = Prng::new(seed);
        let (mut partition, _) = open_memory(MemoryDisk::new(seed), config);
        let mut written = Vec::new();
        let mut sync_failed = false;
        let mut op_durable = 0;
        for round in 0..4 {
            let mut acked = Acked {
                sync_failed,
                ..Acked::default()
            };
            // The open made what it found durable, except bytes a failed
            // fsync left in the page cache only (a process crash keeps them
            // readable; no sync can make them durable any more).
            acked.op_durable = if sync_failed {
                op_durable
            } else {
                partition.op()
            };
            acked.cursor_durable = partition.cursor_tail();
            acked.persisted_commit = partition.superblock().durable.commit;
            run_until_crash(&mut partition, &mut rng, &mut written, &mut acked);
            sync_failed = acked.sync_failed;
            op_durable = acked.op_durable;
            let mut disk = partition.abandon();
            let mode = [
                CrashMode::LoseUnsynced,
                CrashMode::KeepPrefix,
                CrashMode::TornWrite,
                CrashMode::KeepAll,
                CrashMode::ProcessCrash,
                CrashMode::PowerLoss,
                CrashMode::Random,
            ][rng.below(7) as usize];
            disk.crash(mode);
            let (reopened, recovery) = Partition::open(disk, Path::new(MEMORY_DIR), config)
                .unwrap_or_else(|error| panic!("seed {seed} round {round} {mode:?}: {error}"));
            partition = reopened;
            assert!(recovery.recovered_from_disk && !recovery.clean_shutdown);
            let last_header = recovery.headers.last().map_or(0, |header| header.op.get());
            assert_eq!(
                last_header, recovery.op,
                "seed {seed}: headers end at the head"
            );
            check_recovered(seed, &mut partition, &written, &acked, &recovery.faulty);
            damage_repaired += recovery.faulty.len();
            ops_lost += written.len() as u64 - partition.op();
            rolled = rolled.max(partition.segment_count());
            written.truncate(partition.op() as usize);
        }
    }
    // Torn tails are the real-file test's: the WAL core syncs every turn, so
    // only a failed fsync leaves bytes a crash can take.
    assert!(
        damage_repaired > 0,
        "some failed fsync left damage to repair"
    );
    assert!(ops_lost > 0, "some crash lost unsynced ops");
    assert!(rolled > 2, "segments rolled");
}

#[test]
fn real_files_cut_at_every_kind_of_point_recover_a_prefix_and_report_what_was_durable() {
    let source = tempfile::tempdir().expect("tempdir");
    let wal = wal();
    let dir = partition_dir(source.path());
    let (mut partition, _) = open_file(&wal, &dir, small_config());
    let written = append_durable(&mut partition, 30, 3, 150);
    let active = *partition.segment_offsets().last().expect("a segment");
    let first_active_op = written
        .iter()
        .position(|prepare| prepare.header().offset_base.get() == active)
        .expect("an op starts the active segment") as u64
        + 1;
    partition.close().expect("close");
    wal.shutdown().expect("shutdown");
    let frame_len = (FRAME_HEADER_BYTES + written[0].frame_size()) as u64;
    let active_len = std::fs::metadata(segment_path(&dir, active))
        .expect("stat")
        .len();
    let mut rng = Prng::new(99);
    for trial in 0..24 {
        let copy = tempfile::tempdir().expect("tempdir");
        let copy_dir = partition_dir(copy.path());
        copy_tree(&dir, &copy_dir);
        let path = segment_path(&copy_dir, active);
        let cut = if trial == 0 {
            active_len
        } else {
            rng.below(active_len + 1)
        };
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        file.set_len(cut).expect("cut");
        if trial % 3 == 1 {
            // A torn write: garbage where the next frame would go.
            use std::os::unix::fs::FileExt;
            file.write_all_at(&[0xa5; 100], cut).expect("garbage");
        }
        let kept_in_active = cut / frame_len;
        let op = first_active_op - 1 + kept_in_active;
        let wal = common::wal();
        let (mut partition, recovery) = open_file(&wal, &copy_dir, small_config());
        assert_eq!(recovery.op, op, "trial {trial} cut {cut}");
        assert_eq!(recovery.op_checkpoint, 30);
        assert_eq!(
            recovery.faulty,
            (op + 1..=30).collect::<Vec<_>>(),
            "trial {trial}"
        );
        assert_eq!(read_all(&mut partition), written[..op as usize].to_vec());
        assert_eq!(partition.offset_end(), op * 3);
        drop(partition);
        wal.shutdown().expect("shutdown");
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

#[test]
fn a_crash_right_after_a_roll_leaves_no_empty_segment_behind() {
    let mut config = small_config();
    config.log.segment_bytes_max = 4096;
    let (mut partition, _) = open_memory(MemoryDisk::new(8), config);
    let written = append_durable(&mut partition, 6, 5, 200);
    let segments = partition.segment_count();
    assert!(segments > 1);
    // Roll happens inside the next append; crash before anything is synced.
    partition
        .write_prepare(next_prepare(&partition, 5, 200))
        .expect("append");
    let mut disk = partition.abandon();
    disk.crash(CrashMode::LoseUnsynced);
    let (mut partition, recovery) = open_memory(disk, config);
    assert_eq!(recovery.op, 6);
    assert!(recovery.faulty.is_empty());
    assert_eq!(read_all(&mut partition), written);
    let _ = partition.device_mut().file_len(Path::new(MEMORY_DIR));
}
