//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use bytes::Bytes;
use strand_partition::fixtures::produce;
use strand_partition::index::IndexConfig;
use strand_partition::{
    Completed, Disk, FileDisk, LogConfig, MemoryDisk, Partition, PartitionConfig, Recovery,
    WriteStage,
};
use strand_wal::{BackendChoice, Wal, WalConfig};
use strand_wire::ops::{CursorEvent, CursorEvents};
use strand_wire::{Body, Msg, PrepareHeader};

/// Where in-memory partitions live.
pub const MEMORY_DIR: &str = "/data/partitions/s/t/0";

/// Small segments so tests roll often.
pub fn small_config() -> PartitionConfig {
    PartitionConfig {
        log: LogConfig {
            segment_bytes_max: 16 * 1024,
            index: IndexConfig {
                interval_bytes: 2048,
            },
        },
        // Few committed headers kept at open, so that retention (which keeps
        // that many below the commit) drops segments of a short log.
        headers_committed_max: 4,
        ..PartitionConfig::default()
    }
}

/// A WAL on real files (the std backend: deterministic enough for tests).
pub fn wal() -> Wal {
    Wal::start(WalConfig {
        backend: BackendChoice::Std,
        ..WalConfig::default()
    })
    .expect("start the WAL")
}

/// The partition directory under a temp dir.
pub fn partition_dir(root: &Path) -> PathBuf {
    strand_partition::layout::partition_dir(root, "s", "t", 0, 1)
}

pub fn open_file(
    wal: &Wal,
    dir: &Path,
    config: PartitionConfig,
) -> (Partition<FileDisk>, Recovery) {
    Partition::open(FileDisk::new(wal.clone()), dir, config).expect("open the partition")
}

pub fn open_memory(disk: MemoryDisk, config: PartitionConfig) -> (Partition<MemoryDisk>, Recovery) {
    Partition::open(disk, Path::new(MEMORY_DIR), config).expect("open the partition")
}

/// The next produce prepare for `partition`, chaining to its head.
pub fn next_prepare<D: Disk>(
    partition: &Partition<D>,
    records: u32,
    record_bytes: usize,
) -> Msg<PrepareHeader> {
    let op = partition.op() + 1;
    let parent = partition.checksum(op - 1).unwrap_or(0);
    produce(op, parent, partition.offset_end(), records, record_bytes)
}

/// Appends `count` prepares and waits until all are durable.
pub fn append_durable<D: Disk>(
    partition: &mut Partition<D>,
    count: u64,
    records: u32,
    record_bytes: usize,
) -> Vec<Msg<PrepareHeader>> {
    let prepares = append_queued(partition, count, records, record_bytes);
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");
    for prepare in &prepares {
        let durable = out.iter().any(|completed| {
            *completed
                == Completed::Prepare {
                    op: prepare.header().op.get(),
                    checksum: prepare.checksum(),
                    stage: WriteStage::Durable,
                }
        });
        assert!(durable, "op {} reported durable", prepare.header().op.get());
    }
    prepares
}

/// Appends `count` prepares without waiting.
pub fn append_queued<D: Disk>(
    partition: &mut Partition<D>,
    count: u64,
    records: u32,
    record_bytes: usize,
) -> Vec<Msg<PrepareHeader>> {
    let mut prepares = Vec::new();
    for _ in 0..count {
        let prepare = next_prepare(partition, records, record_bytes);
        let accepted = partition.write_prepare(prepare.clone()).expect("append");
        assert_eq!(accepted.stage, WriteStage::Queued);
        prepares.push(prepare);
    }
    prepares
}

/// Encoded cursor events.
pub fn events(pairs: &[(&str, u64)]) -> Bytes {
    let events = pairs
        .iter()
        .map(|(consumer, offset)| CursorEvent {
            consumer: (*consumer).to_owned(),
            offset: *offset,
        })
        .collect();
    Bytes::from(CursorEvents { events }.to_vec())
}

/// Appends cursor events at the tail and waits until durable.
pub fn store_cursors<D: Disk>(partition: &mut Partition<D>, pairs: &[(&str, u64)]) {
    let base = partition.cursor_tail();
    partition
        .append_cursors(base, pairs.len() as u32, &events(pairs))
        .expect("append cursors");
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");
    let end = base + pairs.len() as u64;
    assert!(out.contains(&Completed::Cursors {
        cursor_end: end,
        stage: WriteStage::Durable
    }));
}

/// Every prepare the partition holds from its head, read back.
pub fn read_all<D: Disk>(partition: &mut Partition<D>) -> Vec<Msg<PrepareHeader>> {
    (partition.head_op()..=partition.op())
        .map(|op| {
            partition
                .read_prepare(op)
                .expect("read")
                .unwrap_or_else(|| panic!("op {op} readable"))
        })
        .collect()
}

/// Total records fetched sequentially from `offset` to the end.
pub fn fetch_all<D: Disk>(
    partition: &mut Partition<D>,
    offset: u64,
    max_bytes: u64,
) -> Vec<(u64, u32)> {
    let mut at = offset;
    let mut batches = Vec::new();
    while at < partition.offset_end() {
        let fetched = partition.fetch(at, max_bytes).expect("fetch");
        assert!(!fetched.is_empty(), "fetch at {at} returned nothing");
        for batch in fetched {
            let count = batch.record_count();
            assert!(batch.offset_base + u64::from(count) > at || count == 0);
            at = batch.offset_base + u64::from(count);
            batches.push((batch.offset_base, count));
        }
    }
    batches
}

/// Persists a superblock whose commit is `commit` (retention keeps the op
/// of the persisted commit) and waits for it.
pub fn persist_commit<D: Disk>(partition: &mut Partition<D>, commit: u64, sequence: u64) {
    let mut fields = partition.superblock().durable.clone();
    fields.commit = commit;
    partition.persist_state(fields, sequence).expect("persist");
    let mut out = Vec::new();
    partition.flush(&mut out).expect("flush");
    assert!(out.contains(&Completed::StatePersisted { sequence }));
}
