//! Scenario tests for the bugs the simulator found, one story each. The
//! simulator's seed that found it is named in each test's doc comment.

mod harness;

use harness::{Cluster, SyncMode};
use strand_consensus::*;
use strand_wire::{CommandHeader, Durability, ViewId};

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
        cluster.replica(2).status() == Status::Normal && cluster.replica(2).view().view >= 1
    });
    assert!(
        cluster.storage[2].head() < 5,
        "replica 2 has not repaired the bodies yet"
    );
    cluster.crash(2);
    cluster.restart(2);
    let summary = cluster.replica(2).own_summary();
    assert!(summary.log_view.view >= 1);
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
    assert!(cluster.replica(1).view().view >= 1, "the others moved on");
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

/// Delivers queued messages one at a time until `stop` matches the next one
/// (left queued) or the network is quiet; returns whether `stop` matched.
fn deliver_until(
    cluster: &mut Cluster,
    stop: impl Fn(u8, u8, &strand_wire::Message) -> bool,
) -> bool {
    for _ in 0..100_000 {
        let Some((from, to, message)) = cluster.network.front() else {
            return false;
        };
        if stop(*from, *to, message) {
            return true;
        }
        cluster.deliver_one();
    }
    panic!("the network never went quiet");
}

/// One tick of every live replica; what they send stays queued.
fn tick_without_delivery(cluster: &mut Cluster) {
    for index in 0..cluster.count() {
        let Some(replica) = cluster.replicas[usize::from(index)].as_mut() else {
            continue;
        };
        let mut effects = Effects::new();
        replica.on_tick(&mut effects);
        cluster.execute(index, effects);
    }
}

/// Seed 44837: an old primary's own uncommitted ops sat below a gap that an
/// unfinished adoption had left (it removed a divergent op and was still
/// waiting for the canonical header there). A newer StartView's chain
/// matched the op above the gap, the walk took that as proof for everything
/// below, and the replica committed one of its own old ops: two prepares at
/// one op.
#[test]
fn an_adoption_never_vouches_for_own_ops_below_a_gap() {
    use strand_wire::Message;
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Persisted);
    for _ in 0..2 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    // Replica 1 becomes primary of view 1 and prepares ops 3..=12 that no
    // one else receives.
    cluster.crash(0);
    cluster.tick(300);
    assert_eq!(cluster.primary(), Some(1));
    cluster.restart(0);
    cluster.tick(100);
    cluster.isolate(1);
    for request in 1..=10 {
        cluster.produce_to(1, 7, request, 1);
    }
    cluster.deliver_all();
    assert_eq!(cluster.replica(1).op(), 12);
    // The others move on (view 2, primary 2) and commit a history whose
    // length puts the lower end of one canonical-header answer right above
    // replica 1's own ops: the StartView carries ops 141..=268, the first
    // answer 13..=140.
    cluster.tick(300);
    let primary = cluster.primary().expect("a primary without replica 1");
    assert_ne!(primary, 1);
    let suffix = strand_wire::DVC_SUFFIX_HEADERS_MAX as u64;
    let answer = strand_wire::HEADERS_PER_MESSAGE_MAX as u64;
    let head = 12 + suffix + answer;
    for _ in 2..head {
        cluster.produce(2, 1);
        cluster.deliver_all();
    }
    cluster.tick(20);
    // Replica 1 hears of that view and starts verifying its log downward,
    // asking for canonical headers; once it has removed its top divergent
    // op (a gap) and asks for the headers below it, it is cut off again.
    cluster.heal(1);
    let mut removed_top = false;
    for _ in 0..2_000 {
        let waiting_below_gap = deliver_until(&mut cluster, |_, to, message| {
            to == 1 && matches!(message, Message::Headers(_))
        });
        if !waiting_below_gap {
            tick_without_delivery(&mut cluster);
            continue;
        }
        let replica = cluster.replica(1);
        removed_top = replica.header(12).is_none() && replica.header(11).is_some();
        if removed_top {
            break;
        }
        cluster.deliver_one();
    }
    assert!(
        removed_top,
        "replica 1 reached its own ops and left a gap at 12"
    );
    cluster.isolate(1);
    cluster
        .network
        .retain(|(from, to, _)| *from != 1 && *to != 1);
    // A newer view starts among the others; replica 1 then adopts it.
    let old_primary = cluster.primary().expect("serving");
    cluster.crash(old_primary);
    cluster.restart(old_primary);
    cluster.tick(400);
    assert!(cluster.primary().is_some());
    // It hears of the newer view before any answer about the gap arrives.
    cluster.heal(1);
    let newer_view = cluster.replica(0).view();
    for _ in 0..2_000 {
        if cluster.replica(1).view() >= newer_view {
            break;
        }
        if deliver_until(&mut cluster, |_, to, message| {
            to == 1 && matches!(message, Message::Headers(_))
        }) {
            cluster.network.pop_front();
        } else {
            tick_without_delivery(&mut cluster);
        }
    }
    assert_eq!(cluster.replica(1).view(), newer_view);
    cluster.tick(600);
    cluster.produce(3, 1);
    cluster.deliver_all();
    cluster.tick(100);
    assert_eq!(cluster.replica(1).status(), Status::Normal);
    cluster.assert_one_history();
    assert!(cluster.replica(1).commit() > head, "replica 1 caught up");
}

/// Seed 91300: after a full crash under `replicated`, the chosen log's
/// lowest uncommitted op had an unreadable header and no one else held it.
/// The merge started its walk at the first readable header, called the log
/// complete, and the new primary waited forever for an op no one had.
#[test]
fn the_merge_accounts_for_an_unreadable_lowest_header() {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Replicated);
    // The primary's prepares reach no one: nothing commits.
    cluster.cut.insert((0, 1));
    cluster.cut.insert((0, 2));
    for _ in 0..3 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    assert!(cluster.acked().is_empty());
    for index in 0..3 {
        cluster.crash(index);
    }
    assert_eq!(cluster.storage[1].head(), 0);
    assert_eq!(cluster.storage[2].head(), 0);
    assert_eq!(cluster.storage[0].head(), 3);
    cluster.storage[0].faulty_headers.insert(1);
    cluster.cut.clear();
    for index in 0..3 {
        cluster.restart(index);
    }
    cluster.tick(600);
    assert!(cluster.primary().is_some(), "the view change completes");
    cluster.produce(2, 1);
    cluster.deliver_all();
    cluster.tick(20);
    assert!(
        cluster.acked().contains_key(&(2, 1)),
        "and the group serves"
    );
    cluster.assert_one_history();
}

/// Seeds 17941 and 91935: with `Count(1)` every view change needs all three
/// DoViewChanges. A new primary, slow to install its view, voted to leave
/// it; with the backups' votes that made a quorum, and they moved to the
/// next view. The primary then finished its install and served, answering
/// their calls only by asking the next view's primary for a StartView; the
/// backups restarted into that view, probing, and nobody ever answered.
#[test]
fn a_healthy_primary_joins_a_higher_view_that_needs_it() {
    let mut cluster = Cluster::new(3, ConfirmPolicy::Count(1), Durability::Replicated);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(20);
    assert_eq!(cluster.primary(), Some(0));
    // The quorum that left view 0 (the primary's vote among them) reached
    // view 1 and shut down; the primary kept serving view 0.
    for backup in [1, 2] {
        cluster.shutdown(backup);
        let state = cluster.storage[usize::from(backup)]
            .state
            .get_or_insert_with(Default::default);
        state.view = ViewId::new(0, 1);
        cluster.restart(backup);
    }
    cluster.tick(3_000);
    let view = cluster.replica(0).view();
    assert!(view > ViewId::ZERO, "the primary joined the higher view");
    for index in 0..3 {
        assert_eq!(cluster.replica(index).view(), view);
        assert_eq!(cluster.replica(index).status(), Status::Normal);
    }
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(20);
    assert!(
        cluster.acked().contains_key(&(1, 2)),
        "the group serves again"
    );
    cluster.assert_one_history();
}

/// Seed 18661 (`--reassign`): a joining replica installed a transfer whose
/// history starts named a view above its own (the source had started view
/// 8 of the epoch while the newcomer sat in view 0). Restarted, it took part
/// in view 1 and adopted it after the later start it had recorded. A
/// replica now opens in at least the view of the latest start it knows.
#[test]
fn a_replica_never_opens_below_a_history_start_it_knows() {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Persisted);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(50);
    cluster.shutdown(2);
    let later = ViewId::new(0, 8);
    // (A quiet replica need not have persisted anything yet.)
    let state = cluster.storage[2]
        .state
        .get_or_insert_with(Default::default);
    assert!(state.view < later);
    let op = state.commit;
    state.record_start(HistoryStart {
        view: later,
        op,
        cursor_tail: 0,
        replica: 2,
        ..HistoryStart::default()
    });
    cluster.restart(2);
    assert!(
        cluster.replica(2).view() >= later,
        "opened in view {}",
        cluster.replica(2).view()
    );
}
