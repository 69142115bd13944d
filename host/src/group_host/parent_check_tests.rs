//! What stops what (`docs/reference-points.md`, point 5): a prepare whose
//! parent does not chain to the log on disk (the partition's parent check on
//! append, the last guard against a divergence below the headers a view
//! carried) fails that group's storage on this node: the host keeps the
//! failure (`storage_failed` in `status` and `attention`; the node refuses
//! the group's produces and opens it again from disk after a pause) and
//! returns. It does not panic or end the process, so the node serves its
//! other groups, where reference B's node stopped on the WAL parent check.
//! This test fails if that failure is made fatal.

use std::path::PathBuf;

use crate::group_host::{GroupHost, HostSpec, Output};
use strand_consensus::{ClientRequest, Config, Effect};
use strand_partition::MemoryDisk;
use strand_partition::fixtures::produce;
use strand_wire::batch::BatchBuilder;
use strand_wire::{CommandHeader, Msg, Operation, RequestHeader, ResultCode, ViewId};

/// Replica 0 of `group`, alone in its membership (the host tests' lone
/// replica, in a group and directory of its own).
fn spec(group: u64) -> HostSpec {
    let lone = super::tests::lone_spec();
    HostSpec {
        replica: Config {
            group,
            ..lone.replica
        },
        dir: PathBuf::from(format!("/memory/group-{group}")),
        ..lone
    }
}

/// A started lone host of `group`.
fn lone_host(group: u64) -> GroupHost<MemoryDisk> {
    let (mut host, _) = GroupHost::open(
        &spec(group),
        MemoryDisk::new(group),
        Box::new(move || MemoryDisk::new(group + 100)),
    )
    .expect("open");
    host.start();
    host
}

/// A produce of one record, request `request` of group `group`.
fn produce_request(group: u64, request: u64) -> ClientRequest {
    let mut builder = BatchBuilder::with_capacity(256);
    builder.push(0, b"", b"value", &[]);
    let mut header = RequestHeader::new(0, group, ViewId::ZERO, 0);
    header.client.set(42);
    header.request.set(request);
    header.operation = Operation::Produce as u8;
    ClientRequest {
        request: Msg::new(header, builder.finish().bytes().clone()),
        record_count: 1,
        timestamp_ns: 0,
    }
}

/// Produces request `request` on `host` and returns how many Ok replies
/// its settles put out.
fn produce_and_settle(host: &mut GroupHost<MemoryDisk>, group: u64, request: u64) -> usize {
    host.submit(produce_request(group, request));
    let mut out = Vec::new();
    for _ in 0..50 {
        host.settle(&mut out);
    }
    out.iter()
        .filter(|output| {
            matches!(output, Output::Reply(reply) if reply.header().result() == ResultCode::Ok)
        })
        .count()
}

#[test]
fn a_prepare_failing_the_parent_check_stops_that_replica_alone() {
    let mut failing = lone_host(1);
    let mut neighbour = lone_host(2);
    assert_eq!(produce_and_settle(&mut failing, 1, 1), 1);
    assert_eq!(produce_and_settle(&mut neighbour, 2, 1), 1);

    // A write that does not chain to op 1 on disk, as a divergence below
    // the headers a view carried would leave it.
    let head = failing.partition_view().op();
    let offset_end = failing.partition_view().offset_end();
    let divergent = produce(head + 1, 0xdead_beef, offset_end, 1, 8);
    failing
        .effects
        .push(Effect::WritePrepare { prepare: divergent });
    let mut out = Vec::new();
    failing.settle(&mut out);

    assert!(failing.storage_failed(), "the failing replica stops");
    let failure = failing.storage_failure().expect("the failure is kept");
    assert!(failure.contains("does not chain"), "{failure}");
    assert_eq!(
        failing.partition_view().op(),
        head,
        "nothing that does not chain reaches the log"
    );
    assert_eq!(
        produce_and_settle(&mut neighbour, 2, 2),
        1,
        "another group on the same node serves on"
    );
    assert!(!neighbour.storage_failed());
}
