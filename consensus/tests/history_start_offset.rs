//! A history start records its record offset, and a view change that waits
//! below the latest start names it (`docs/reference-points.md`, point 1;
//! reference A: "the controller lists the wait under attention with the
//! start's record count and the node that took over there").
//!
//! The new primary takes the offset from the canonical header at the
//! start's op; it travels in the StartView header to the backups that adopt
//! the view, and in the DoViewChange header to a candidate that never saw
//! the view start. The candidate's `awaited_start` is what the node's
//! `attention` turns into the start's record offset and node.

mod harness;

use harness::Cluster;
use strand_consensus::*;
use strand_wire::{Durability, ViewId};

/// Records per produce in this story.
const RECORDS: u32 = 3;

#[test]
fn a_wait_below_the_latest_history_start_names_its_record_offset_and_replica() {
    // Every copy confirms (W = 3), so one trusted log is a view-change
    // quorum (R = 1): only the history-start guard can make a view wait.
    let mut cluster = Cluster::new(3, ConfirmPolicy::LocalDurable, Durability::Replicated);
    for _ in 0..2 {
        cluster.produce(1, RECORDS);
        cluster.deliver_all();
    }
    cluster.tick(20);
    assert_eq!(cluster.replica(0).commit(), 2);

    // The primary stops cleanly (its log stays trusted). Replica 1 starts
    // view 1 and takes two more produces, which replica 2 holds but cannot
    // confirm without replica 0.
    cluster.shutdown(0);
    cluster.tick(300);
    assert_eq!(cluster.primary(), Some(1));
    for _ in 0..2 {
        cluster.produce(1, RECORDS);
        cluster.deliver_all();
    }
    assert_eq!(cluster.replica(2).op(), 4);

    // Replica 1 crashes and comes back at once (untrusted: `replicated`);
    // a later view starts from the trusted log at op 4: the records below
    // offset 12.
    cluster.crash(1);
    cluster.restart(1);
    cluster.tick(400);
    let leader = [1u8, 2]
        .into_iter()
        .filter(|index| cluster.replica(*index).is_serving_primary())
        .max_by_key(|index| cluster.replica(*index).view())
        .expect("a later view starts");
    let follower = 3 - leader;
    let view = cluster.replica(leader).view();
    assert!(view > ViewId::new(0, 1));
    let offset_end = cluster
        .stored(leader, 4)
        .expect("op 4")
        .header()
        .offset_end();
    assert_eq!(offset_end, 4 * u64::from(RECORDS));
    let recorded = cluster.replica(leader).durable_state().latest_start();
    let recorded = recorded.expect("the view's start");
    assert_eq!((recorded.view, recorded.op), (view, 4));
    assert_eq!(
        recorded.offset_end,
        Some(offset_end),
        "recorded by the new primary"
    );
    // The follower adopted the view: the StartView's header carried the
    // start's record offset.
    assert_eq!(cluster.replica(follower).view(), view);
    assert_eq!(cluster.replica(follower).log_view(), view);
    let adopted = cluster.replica(follower).durable_state().latest_start();
    assert_eq!(adopted.and_then(|start| start.offset_end), Some(offset_end));

    // The leader dies; the follower crashes and returns untrusted. Replica
    // 0 comes back trusted, its log (op 2, settled in view 0) below the
    // start, which only the follower's untrusted report names, with the
    // offset in its DoViewChange header.
    cluster.crash(leader);
    cluster.crash(follower);
    cluster.restart(follower);
    cluster.restart(0);
    cluster.tick(400);
    assert!(!cluster.replica(follower).trusted());
    assert_eq!(cluster.primary(), None, "no view starts below the start");
    assert_eq!(
        cluster.replica(0).attention(),
        Some((WaitReason::BelowHistoryStart, 1 << leader)),
        "it waits for the leader, the one that holds the start"
    );
    let awaited = cluster.replica(0).awaited_start().expect("the start");
    assert_eq!(
        (awaited.view, awaited.op, awaited.replica),
        (view, 4, leader)
    );
    assert_eq!(
        awaited.offset_end,
        Some(offset_end),
        "named by its record offset"
    );

    // The leader returns: a view starts from its log.
    cluster.restart(leader);
    cluster.tick(400);
    let primary = cluster.primary().expect("a view starts");
    assert!(cluster.replica(primary).view() > view);
    assert_eq!(cluster.replica(0).attention(), None);
    assert_eq!(cluster.replica(0).awaited_start(), None);
    cluster.assert_one_history();
}
