//! The group host's own tests: retention, cursor compaction, the order of
//! a produce's steps, a transferred copy reopened, clean closes.

use strand_consensus::epoch::{Membership, SlotSet};
use strand_consensus::{ClientRequest, Config, Timeouts};
use strand_partition::{ExportConfig, MemoryDisk};
use strand_wal::CrashMode;
use strand_wire::batch::BatchBuilder;
use strand_wire::{ConfirmPolicy, Durability, Operation, RequestHeader, ResultCode, ViewId};

use super::*;

const DIR: &str = "/memory/group-1";

/// The spec of replica 0 of group 1, alone in its membership.
pub(super) fn lone_spec() -> HostSpec {
    HostSpec {
        replica: Config {
            cluster: 0,
            group: 1,
            replica: 0,
            memberships: vec![Membership::new(
                0,
                SlotSet::of(&[0]),
                ConfirmPolicy::MajorityDurable,
            )],
            durability: Durability::Persisted,
            cursor_durability: Durability::Persisted,
            timeouts: Timeouts::default(),
            seed: 7,
        },
        confirm: ConfirmPolicy::MajorityDurable,
        dir: DIR.into(),
        catalog_nodes: None,
        storage: PartitionConfig::default(),
        retention: RetentionPolicy::default(),
    }
}

/// A lone replica of group 1 over an in-memory partition, started.
pub(super) fn lone_host() -> (GroupHost<MemoryDisk>, Vec<Output>) {
    let (mut host, recovery) = GroupHost::open(
        &lone_spec(),
        MemoryDisk::new(1),
        Box::new(|| MemoryDisk::new(2)),
    )
    .expect("open");
    assert!(recovery.fresh);
    host.start();
    let mut out = Vec::new();
    host.settle(&mut out);
    (host, out)
}

pub(super) fn produce(request: u64, values: &[&str]) -> ClientRequest {
    let mut builder = BatchBuilder::with_capacity(256);
    for value in values {
        builder.push(0, b"", value.as_bytes(), &[]);
    }
    let mut header = RequestHeader::new(0, 1, ViewId::ZERO, 0);
    header.client.set(42);
    header.request.set(request);
    header.operation = Operation::Produce as u8;
    ClientRequest {
        request: Msg::new(header, builder.finish().bytes().clone()),
        record_count: values.len() as u32,
        timestamp_ns: 0,
    }
}

/// Runs requests on a lone host until each is answered.
pub(super) fn answer_all(host: &mut GroupHost<MemoryDisk>, requests: usize) {
    let mut out = Vec::new();
    for _ in 0..requests * 10 + 10 {
        host.settle(&mut out);
    }
    let replies = out
        .iter()
        .filter(|output| matches!(output, Output::Reply(reply) if reply.header().result() == ResultCode::Ok))
        .count();
    assert_eq!(replies, requests, "every request answered Ok");
}

#[test]
fn retention_drops_committed_segments_and_tells_consensus_where_the_log_starts() {
    let mut spec = lone_spec();
    spec.storage.log.segment_bytes_max = 2048;
    spec.storage.headers_committed_max = 4;
    spec.retention = RetentionPolicy {
        retention_bytes: Some(4096),
        retention_ms: None,
    };
    let (mut host, recovery) =
        GroupHost::open(&spec, MemoryDisk::new(1), Box::new(|| MemoryDisk::new(2))).expect("open");
    assert!(recovery.fresh);
    host.start();
    let value = "v".repeat(200);
    for request in 1..=60 {
        host.submit(produce(request, &[value.as_str()]));
        answer_all(&mut host, 1);
    }
    assert!(host.retention_due(), "segments were sealed");
    assert_eq!(
        host.retain(0),
        0,
        "nothing while the commit is not persisted"
    );
    // The commit is persisted on its timer; then the segments past the
    // limit and the kept headers go.
    let mut out = Vec::new();
    for _ in 0..200 {
        host.on_tick(&mut out);
        host.settle(&mut out);
    }
    let removed = host.retain(0);
    assert!(removed > 0);
    let start = host.partition_view().head_op();
    assert!(start > 1 && start <= 60 - 4);
    assert_eq!(host.replica.log_start(), start);
    assert!(!host.retention_due(), "looked since the last seal");
    assert!(!host.storage_failed());
}

#[test]
fn a_long_cursor_log_is_folded_into_its_snapshot() {
    let (mut host, _) = lone_host();
    host.submit(produce(1, &["a"]));
    answer_all(&mut host, 1);
    let events = CURSOR_EVENTS_BEFORE_COMPACTION + 10;
    for request in 0..events {
        let mut header = RequestHeader::new(0, 1, ViewId::ZERO, 0);
        header.client.set(43);
        header.request.set(request + 1);
        header.operation = Operation::StoreCursor as u8;
        let cursor = strand_wire::ops::StoreCursor {
            consumer: format!("c{}", request % 7),
            offset: 1,
            fence: None,
        };
        let request = Msg::new(header, bytes::Bytes::from(cursor.to_vec()));
        host.store_cursor(&request, cursor, 0);
        answer_all(&mut host, 1);
    }
    let mut header = RequestHeader::new(0, 1, ViewId::ZERO, 0);
    header.client.set(43);
    header.request.set(events + 1);
    header.operation = Operation::DeleteCursor as u8;
    let delete = strand_wire::ops::DeleteCursor {
        consumer: "c0".to_owned(),
    };
    host.delete_cursor(&Msg::new(header, bytes::Bytes::new()), delete);
    answer_all(&mut host, 1);
    assert_eq!(host.partition_view().cursor_tail(), events + 1);
    assert!(host.compact_cursors() > 0, "frames dropped");
    assert_eq!(host.partition_view().cursor_snapshot_covers(), events + 1);
    assert_eq!(host.partition_view().cursors().len(), 6, "c0 deleted");
    assert_eq!(host.compact_cursors(), 0, "nothing new to fold");
    assert!(!host.storage_failed());
}

#[test]
fn a_produce_is_written_made_durable_committed_and_answered_in_that_order() {
    let (mut host, _) = lone_host();
    assert!(host.replica.is_serving_primary(), "alone, it serves");
    host.submit(produce(1, &["a", "b"]));
    let mut out = Vec::new();
    for _ in 0..10 {
        host.settle(&mut out);
        if out.iter().any(|output| matches!(output, Output::Reply(_))) {
            break;
        }
    }
    let kinds: Vec<&str> = out
        .iter()
        .map(|output| match output {
            Output::WriteStage { durable: false, .. } => "queued",
            Output::WriteStage { durable: true, .. } => "durable",
            Output::Committed { .. } => "committed",
            Output::Reply(_) => "reply",
            Output::Send { .. } => "send",
            Output::Event(_) => "event",
            Output::Quarantined { .. } => "quarantined",
            Output::TransferInstalled { .. } => "transfer",
            Output::Stop => "stop",
        })
        .filter(|kind| *kind != "event")
        .collect();
    assert_eq!(kinds, ["queued", "durable", "committed", "reply"]);
    let Some(Output::Reply(reply)) = out.last() else {
        panic!("no reply");
    };
    assert_eq!(reply.header().result(), ResultCode::Ok);
    assert_eq!(host.replica.commit(), 1);
    assert_eq!(host.partition_mut().op(), 1, "the op is in the partition");
    assert!(!host.storage_failed());
}

/// The spec of a copy placed in slot 1 at epoch 1, which a view change
/// reaches (slot 2 leaves): slot 1 named another copy in epoch 0, and
/// this copy belongs to none of epoch 0's views.
fn joined_spec() -> HostSpec {
    let mut spec = lone_spec();
    spec.replica.replica = 1;
    spec.replica.memberships = vec![
        Membership::new(0, SlotSet::of(&[0, 1, 2]), ConfirmPolicy::MajorityDurable),
        Membership::new(1, SlotSet::of(&[0, 1]), ConfirmPolicy::MajorityDurable),
    ];
    spec
}

/// Found by the simulator: a joining copy that installed its state
/// transfer and crashed before adopting a view reopened at view zero, as
/// if it were a member of epoch 0, under history starts of a later epoch.
#[test]
fn a_copy_that_installed_a_transfer_reopens_in_the_epoch_it_joined() {
    let (mut source, _) = lone_host();
    source.submit(produce(1, &["a", "b"]));
    let mut out = Vec::new();
    for _ in 0..10 {
        source.settle(&mut out);
    }
    let frontier = source.replica.commit();
    assert_eq!(frontier, 1);
    let export = source
        .partition_mut()
        .export(frontier, ExportConfig::default(), bytes::Bytes::new())
        .expect("export");

    let spec = joined_spec();
    let (mut target, recovery) =
        GroupHost::open(&spec, MemoryDisk::new(3), Box::new(|| MemoryDisk::new(4)))
            .expect("open the joining copy");
    assert!(recovery.awaiting_state_transfer);
    let joined_view = target.replica.view();
    assert_eq!(joined_view, ViewId::new(1, 0), "a copy placed at epoch 1");

    let mut partition = target.partition.take().expect("the partition");
    let manifest = source
        .partition_mut()
        .export_chunk(&export, 0)
        .expect("manifest");
    let mut import = partition.import_begin(&manifest).expect("begin");
    for chunk in import.needed_chunks() {
        let body = source
            .partition_mut()
            .export_chunk(&export, chunk)
            .expect("chunk");
        partition
            .import_chunk(&mut import, chunk, &body)
            .expect("import");
    }
    let (installed, _) = partition.install(import).expect("install");
    target.partition = Some(installed);
    let mut disk = target.abandon().expect("the disk");
    disk.crash(CrashMode::LoseUnsynced);

    let (reopened, recovery) =
        GroupHost::open(&spec, disk, Box::new(|| MemoryDisk::new(5))).expect("reopen");
    assert!(!recovery.awaiting_state_transfer && recovery.durable.log_unsettled);
    assert_eq!(
        recovery.durable.commit, frontier,
        "the transfer is installed"
    );
    assert_eq!(
        reopened.replica.view(),
        joined_view,
        "back in the epoch it joined, not in epoch 0's views"
    );
}

#[test]
fn a_closed_trusted_host_leaves_a_clean_mark() {
    let (mut host, _) = lone_host();
    host.submit(produce(1, &["kept"]));
    let mut out = Vec::new();
    for _ in 0..10 {
        host.settle(&mut out);
    }
    assert!(
        host.close().expect("close").clean_mark,
        "trusted: a clean mark"
    );
}

#[test]
fn a_clean_close_persists_the_commit_number_first() {
    let (mut host, _) = lone_host();
    let mut out = Vec::new();
    for request in 1..=3 {
        host.submit(produce(request, &["kept"]));
        for _ in 0..10 {
            host.settle(&mut out);
        }
    }
    assert_eq!(host.replica.commit(), 3);
    let persisted = host.partition_view().persisted_commit();
    assert!(persisted < 3, "the commit persists on a timer: {persisted}");
    let closed = host.close().expect("close");
    assert!(closed.clean_mark);
    let disk = closed.disk.expect("the disk");
    let (reopened, recovery) =
        GroupHost::open(&lone_spec(), disk, Box::new(|| MemoryDisk::new(9))).expect("reopen");
    assert_eq!(recovery.durable.commit, 3, "the commit at the stop");
    assert_eq!(reopened.replica.commit(), 3);
}
