//! Tests of the in-memory disk's model: crashes, torn writes, failed syncs,
//! hard links, armed crashes.

use super::*;

fn written(storage: &mut MemoryStorage, path: &str, writes: &[&[u8]]) -> FileId {
    let file = FileId(1);
    storage
        .open(file, Path::new(path), OpenMode::CreateNew)
        .expect("new file");
    let mut offset = 0;
    for data in writes {
        storage.write_at(file, offset, &[data]).expect("write");
        offset += data.len() as u64;
    }
    file
}

#[test]
fn a_crash_loses_unsynced_writes_and_keeps_synced_ones() {
    let mut storage = MemoryStorage::new(1);
    let file = written(&mut storage, "a", &[b"durable"]);
    storage.sync_data(file).expect("sync");
    storage.write_at(file, 7, &[b"-lost"]).expect("write");
    assert_eq!(storage.contents(Path::new("a")), Some(&b"durable-lost"[..]));
    storage.crash(CrashMode::LoseUnsynced);
    assert_eq!(storage.contents(Path::new("a")), Some(&b"durable"[..]));
}

#[test]
fn keep_prefix_keeps_whole_writes_in_order() {
    for seed in 0..50 {
        let mut storage = MemoryStorage::new(seed);
        written(&mut storage, "a", &[b"11", b"22", b"33"]);
        storage.crash(CrashMode::KeepPrefix);
        let image = storage.contents(Path::new("a")).expect("exists").to_vec();
        assert!([&b""[..], b"11", b"1122", b"112233"].contains(&&image[..]));
    }
}

#[test]
fn a_torn_write_keeps_a_strict_prefix_of_one_write() {
    for seed in 0..50 {
        let mut storage = MemoryStorage::new(seed);
        written(&mut storage, "a", &[b"1111", b"2222"]);
        storage.crash(CrashMode::TornWrite);
        let image = storage.contents(Path::new("a")).expect("exists").to_vec();
        assert!(b"11112222".starts_with(&image));
        assert!(image.len() < 8, "seed {seed}: a torn crash loses something");
    }
}

#[test]
fn a_failed_sync_loses_the_writes_it_covered_even_after_a_later_sync() {
    let mut storage = MemoryStorage::new(3);
    let file = written(&mut storage, "a", &[b"gone"]);
    storage
        .fail_next_sync(Path::new("a"), libc::EIO)
        .expect("exists");
    assert!(storage.sync_data(file).is_err());
    let read = storage.contents(Path::new("a")).expect("exists");
    assert!(
        read == b"gone" || read == b"\0\0\0\0",
        "the page was kept or dropped: {read:?}"
    );
    storage.write_at(file, 4, &[b"next"]).expect("write");
    storage.sync_data(file).expect("sync");
    storage.crash(CrashMode::LoseUnsynced);
    assert_eq!(storage.contents(Path::new("a")), Some(&b"\0\0\0\0next"[..]));
}

#[test]
fn a_failed_sync_keeps_or_drops_each_page_it_covered() {
    let page = FAILED_SYNC_PAGE_BYTES as usize;
    let (mut kept, mut dropped) = (0, 0);
    for seed in 0..40 {
        let mut storage = MemoryStorage::new(seed);
        let file = written(&mut storage, "a", &[&vec![1u8; page]]);
        storage.sync_data(file).expect("sync");
        storage
            .write_at(file, 0, &[&vec![2u8; 3 * page]])
            .expect("write");
        storage
            .fail_next_sync(Path::new("a"), libc::EIO)
            .expect("exists");
        assert!(storage.sync_data(file).is_err());
        assert_eq!(storage.faults_struck(), 1);
        let read = storage.contents(Path::new("a")).expect("exists").to_vec();
        assert_eq!(read.len(), 3 * page, "the file keeps its length");
        for (index, chunk) in read.chunks(page).enumerate() {
            let old = if index == 0 { 1 } else { 0 };
            assert!(
                chunk.iter().all(|&byte| byte == 2) || chunk.iter().all(|&byte| byte == old),
                "seed {seed}: page {index} is whole, old or new"
            );
            if chunk[0] == 2 {
                kept += 1;
            } else {
                dropped += 1;
            }
        }
        storage.sync_data(file).expect("a later sync succeeds");
        storage.crash(CrashMode::LoseUnsynced);
        assert_eq!(
            storage.contents(Path::new("a")),
            Some(&vec![1u8; page][..]),
            "seed {seed}: nothing of the failed write is durable"
        );
    }
    assert!(kept > 0 && dropped > 0, "both choices occur");
}

#[test]
fn a_hard_link_shares_the_bytes_and_survives_removing_the_first_name() {
    let mut storage = MemoryStorage::new(4);
    let file = written(&mut storage, "dir/a", &[b"sealed"]);
    storage.sync_data(file).expect("sync");
    storage.close(file);
    storage
        .link(Path::new("dir/a"), Path::new("fenced/a"))
        .expect("link");
    assert_eq!(
        storage
            .link(Path::new("dir/a"), Path::new("fenced/a"))
            .map_err(|error| error.raw_os_error()),
        Err(Some(libc::EEXIST))
    );
    storage.remove(Path::new("dir/a")).expect("remove");
    assert_eq!(storage.contents(Path::new("dir/a")), None);
    assert_eq!(storage.list_dir(Path::new("dir")), Vec::<String>::new());
    storage.crash(CrashMode::LoseUnsynced);
    assert_eq!(
        storage.contents(Path::new("fenced/a")),
        Some(&b"sealed"[..])
    );
    assert_eq!(storage.list_dir(Path::new("fenced")), ["a"]);
    assert_eq!(storage.list_dir(Path::new("")), ["fenced"]);
    assert!(storage.remove(Path::new("dir/a")).is_err());
}

#[test]
fn a_removed_file_stays_readable_through_its_open_handle_until_closed() {
    let mut storage = MemoryStorage::new(5);
    let file = written(&mut storage, "a", &[b"kept"]);
    storage.remove(Path::new("a")).expect("remove");
    assert_eq!(storage.read_all(file).expect("still open"), b"kept");
    storage.close(file);
    assert!(
        storage.inodes.is_empty(),
        "the inode went with its last handle"
    );
}

#[test]
fn a_process_crash_keeps_writes_visible_but_unsynced() {
    let mut storage = MemoryStorage::new(6);
    let file = written(&mut storage, "a", &[b"durable"]);
    storage.sync_data(file).expect("sync");
    storage.write_at(file, 7, &[b"-pending"]).expect("write");
    storage.crash(CrashMode::ProcessCrash);
    assert_eq!(
        storage.contents(Path::new("a")),
        Some(&b"durable-pending"[..]),
        "reads still see every written byte"
    );
    assert_eq!(
        storage.durable_contents(Path::new("a")),
        Some(&b"durable"[..])
    );
    storage.crash(CrashMode::ProcessCrash);
    storage.crash(CrashMode::LoseUnsynced);
    assert_eq!(
        storage.contents(Path::new("a")),
        Some(&b"durable"[..]),
        "a power loss after the process crashes still takes them"
    );
}

#[test]
fn a_sync_after_a_process_crash_makes_the_pending_writes_durable() {
    let mut storage = MemoryStorage::new(7);
    written(&mut storage, "a", &[b"pending"]);
    storage.crash(CrashMode::ProcessCrash);
    let file = FileId(2);
    storage
        .open(file, Path::new("a"), OpenMode::Append)
        .expect("reopen");
    storage.sync_data(file).expect("sync");
    storage.crash(CrashMode::LoseUnsynced);
    assert_eq!(storage.contents(Path::new("a")), Some(&b"pending"[..]));
}

#[test]
fn an_armed_crash_strikes_between_a_write_and_its_sync() {
    let mut storage = MemoryStorage::new(8);
    let file = written(&mut storage, "a", &[b"durable"]);
    storage.sync_data(file).expect("sync");
    storage.arm_crash(1, CrashMode::ProcessCrash);
    storage.write_at(file, 7, &[b"-written"]).expect("write");
    storage.sync_data(file).expect("sync");
    let Some(ArmedOutcome::Struck(mut image)) = storage.disarm_crash() else {
        panic!("the crash struck before the sync");
    };
    assert_eq!(
        image.contents(Path::new("a")),
        Some(&b"durable-written"[..])
    );
    assert_eq!(
        image.durable_contents(Path::new("a")),
        Some(&b"durable"[..])
    );
    image.crash(CrashMode::LoseUnsynced);
    assert_eq!(image.contents(Path::new("a")), Some(&b"durable"[..]));
    assert_eq!(
        storage.durable_contents(Path::new("a")),
        Some(&b"durable-written"[..]),
        "the storage itself ran on unaware"
    );
    storage.arm_crash(5, CrashMode::LoseUnsynced);
    storage.sync_data(file).expect("sync");
    assert!(matches!(
        storage.disarm_crash(),
        Some(ArmedOutcome::Pending(4))
    ));
}

#[test]
fn same_seed_same_crash() {
    let image = |seed| {
        let mut storage = MemoryStorage::new(seed);
        written(&mut storage, "a", &[b"aaaa", b"bbbb", b"cccc", b"dddd"]);
        storage.crash(CrashMode::Random);
        storage.contents(Path::new("a")).expect("exists").to_vec()
    };
    for seed in 0..20 {
        assert_eq!(image(seed), image(seed));
    }
}
