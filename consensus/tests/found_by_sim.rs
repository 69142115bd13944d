//! Scenario tests for the bugs the simulator found, one story each. The
//! simulator's seed that found it is named in each test's doc comment.

mod harness;

use harness::{Cluster, SyncMode};
use strand_consensus::*;
use strand_wire::{CommandHeader, Durability};

/// Runs the harness one message at a time until `done` holds (bounded).
fn step_until(cluster: &mut Cluster, done: impl Fn(&Cluster) -> bool) {
    for _ in 0..10_000 {
        if done(cluster) {
            return;
        }
        if !cluster.deliver_one() {
            cluster.tick(1);
        }
    }
    panic!("the condition never held");
}

/// Seed 17775: the next primary's copy of a committed op had an unreadable
/// header, so its client table missed that request and prepared a retry of
/// it a second time (the same records at two offsets).
#[test]
fn a_retry_whose_committed_header_was_damaged_is_not_appended_again() {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Persisted);
    for _ in 0..4 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    cluster.tick(150);
    cluster.crash(1);
    cluster.storage[1].faulty_headers.insert(3);
    cluster.crash(0);
    cluster.restart(1);
    cluster.tick(300);
    assert_eq!(cluster.primary(), Some(1));
    let head = cluster.replica(1).op();
    for _ in 0..2 {
        cluster.produce_to(1, 1, 3, 1);
        cluster.deliver_all();
        cluster.tick(50);
    }
    assert_eq!(
        cluster.replica(1).op(),
        head,
        "request 3 is not appended a second time"
    );
    assert_eq!(
        cluster.acked()[&(1, 3)].0,
        3,
        "it is answered with its original op"
    );
    cluster.assert_one_history();
}

/// Seed 36883: a replica whose entries were damaged (one header unreadable,
/// one body) reported them as never received, a lying nack; with R = 1 its
/// view change alone dropped committed ops.
#[test]
fn damaged_entries_are_never_nacked() {
    let mut cluster = Cluster::new(3, ConfirmPolicy::LocalDurable, Durability::Persisted);
    for _ in 0..3 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    cluster.tick(150);
    cluster.crash(2);
    cluster.storage[2].faulty_headers.insert(2);
    cluster.storage[2].faulty.insert(3);
    cluster.restart(2);
    let summary = cluster.replica(2).own_summary();
    assert!(
        summary.ack_op >= 3,
        "it may have acked ops 2 and 3: {summary:?}"
    );
    assert_eq!(summary.nack, 0, "nothing it holds damaged is nacked");
    // A view change that hears from it keeps every committed op.
    cluster.crash(0);
    cluster.tick(400);
    assert!(cluster.primary().is_some());
    for index in [1, 2] {
        cluster.assert_acked_in_log(index);
    }
    cluster.assert_one_history();
}

/// Seed 15361: under `replicated`, a backup that lost acked ops in a crash
/// became trusted by adopting a view, then nacked the very ops it had acked
/// before the crash (they were missing from its log).
#[test]
fn an_untrusted_replica_adopting_a_view_never_nacks_what_it_may_have_acked() {
    let mut cluster = Cluster::new(3, ConfirmPolicy::LocalDurable, Durability::Replicated);
    cluster.sync = vec![SyncMode::Immediate, SyncMode::Immediate, SyncMode::Manual];
    for _ in 0..3 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    assert_eq!(
        cluster.acked().len(),
        3,
        "every copy acked (replica 2 on queueing)"
    );
    cluster.crash(2);
    assert_eq!(cluster.storage[2].head(), 0, "replica 2 lost what it acked");
    cluster.restart(2);
    step_until(&mut cluster, |cluster| {
        cluster.replica(2).status() == Status::Normal
    });
    let summary = cluster.replica(2).own_summary();
    assert!(cluster.replica(2).trusted());
    assert!(
        summary.ack_op >= 3,
        "ops 1..3 may have been acked before the crash: {summary:?}"
    );
    assert_eq!(summary.nack, 0);
    // A crash before it repairs them keeps that knowledge.
    cluster.crash(2);
    cluster.restart(2);
    let recovered = cluster.storage[2].state.clone().expect("persisted");
    assert!(recovered.maybe_acked_op >= 3, "{recovered:?}");
    cluster.tick(300);
    cluster.assert_acked_in_log(2);
}

/// Seeds 2686 and 4368: a backup adopted a view (log view 3) but crashed
/// before the view's bodies were durable; restarted, its log looked shorter
/// than the view's start and the view change waited forever below it.
#[test]
fn the_adopted_view_headers_survive_a_crash() {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Persisted);
    cluster.isolate(2);
    for _ in 0..5 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    cluster.heal(2);
    cluster.crash(0);
    step_until(&mut cluster, |cluster| {
        cluster.replica(2).status() == Status::Normal && cluster.replica(2).view() >= 1
    });
    assert!(
        cluster.storage[2].head() < 5,
        "replica 2 has not repaired the bodies yet"
    );
    cluster.crash(2);
    cluster.restart(2);
    let summary = cluster.replica(2).own_summary();
    assert!(summary.log_view >= 1);
    assert_eq!(
        summary.op, 5,
        "it still knows the view's log reaches op 5: {summary:?}"
    );
    let stored = cluster.storage[2].head();
    for header in summary
        .headers
        .iter()
        .filter(|header| header.op.get() > stored)
    {
        let index = summary
            .headers
            .iter()
            .position(|candidate| candidate.checksum() == header.checksum());
        let bit = 1u128 << index.expect("listed");
        assert_eq!(
            summary.present & bit,
            0,
            "op {} has no body here",
            header.op.get()
        );
    }
    cluster.tick(300);
    cluster.assert_acked_in_log(2);
    cluster.assert_one_history();
}

/// Seed 1535: a primary left behind in a lower view kept serving (no one
/// told it) while the others ran a higher view that needed its copy.
#[test]
fn a_stale_primary_learns_the_group_moved_on() {
    let mut cluster = Cluster::new(3, ConfirmPolicy::LocalDurable, Durability::Persisted);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.isolate(0);
    cluster.tick(300);
    assert!(cluster.replica(1).view() >= 1, "the others moved on");
    cluster.heal(0);
    cluster.tick(600);
    let view = cluster.replica(1).view();
    assert_eq!(
        cluster.replica(0).view(),
        view,
        "the old primary joined the new view"
    );
    cluster.produce(2, 1);
    cluster.deliver_all();
    cluster.tick(20);
    assert!(
        cluster.acked().contains_key(&(2, 1)),
        "with every copy back, it commits"
    );
}
