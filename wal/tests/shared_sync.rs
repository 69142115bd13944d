//! Shared syncs on real files: one `syncfs` covers the bare syncs of many
//! files, through the std backend and through io_uring's syncer thread.

use std::path::Path;
use std::time::Duration;

use strand_wal::storage::execute_sequential;
use strand_wal::{
    BatchOutcome, DiskStorage, FileBatch, FileId, NoObserver, OpenMode, Storage, UringStorage,
};

const FILES: u64 = 6;

/// Opens `FILES` files under `dir`, writes a few bytes to each and returns the
/// bare syncs that would make them durable.
fn written_files(storage: &mut dyn Storage, dir: &Path) -> Vec<FileBatch> {
    (0..FILES)
        .map(|index| {
            let file = FileId(index);
            let path = dir.join(format!("f{index}.log"));
            storage
                .open(file, &path, OpenMode::CreateNew)
                .expect("new file");
            storage
                .write_at(file, 0, &[b"hello ", b"world"])
                .expect("write");
            FileBatch {
                id: index,
                file,
                offset: 11,
                frames: Vec::new(),
                sync: true,
                outcome: None,
            }
        })
        .collect()
}

fn assert_all_synced(batches: &[FileBatch]) {
    assert_eq!(batches.len() as u64, FILES);
    for batch in batches {
        assert!(
            matches!(batch.outcome, Some(BatchOutcome::Done { synced: true, .. })),
            "{batch:?}"
        );
    }
}

#[test]
fn the_std_backend_syncs_many_files_with_one_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut storage = DiskStorage::new();
    assert!(
        storage.shares_syncs(),
        "this kernel's syncfs reports writeback errors"
    );
    let mut batches = written_files(&mut storage, dir.path());
    storage.execute_shared_sync(&mut batches, &NoObserver);
    assert_all_synced(&batches);
}

#[test]
fn the_io_uring_backend_runs_shared_syncs_off_the_writer_and_hands_them_back() {
    let Ok(mut storage) = UringStorage::new() else {
        eprintln!("io_uring unavailable here: skipped");
        return;
    };
    assert!(storage.shares_syncs());
    let dir = tempfile::tempdir().expect("temp dir");
    let batches = written_files(&mut storage, dir.path());
    // One file synced alone alongside, through the ring.
    let mut alone = FileBatch {
        id: 99,
        file: FileId(0),
        offset: 11,
        frames: Vec::new(),
        sync: true,
        outcome: None,
    };
    execute_sequential(&mut storage, &mut alone, &NoObserver);
    let pipeline = storage.pipeline().expect("io_uring pipelines");
    pipeline.start_shared_sync(batches, &NoObserver);
    assert_eq!(pipeline.in_flight() as u64, FILES);
    let mut done = Vec::new();
    for _ in 0..1000 {
        pipeline.wait(Some(Duration::from_millis(100)), &NoObserver);
        pipeline.reap(&mut done, &NoObserver);
        if pipeline.in_flight() == 0 {
            break;
        }
    }
    assert_eq!(pipeline.in_flight(), 0, "the shared sync came back");
    done.sort_by_key(|batch| batch.id);
    assert_all_synced(&done);
}
