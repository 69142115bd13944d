//! Scenario tests of what each replica's logs keep across views, written
//! as stories: applied history is never contradicted (the partition is
//! quarantined instead), damaged committed entries are repaired and never
//! truncated, a backup behind its peers' log start catches up by state
//! transfer, and cursor logs are cut where their history leaves the view's.

mod harness;

use harness::Cluster;
use strand_consensus::*;
use strand_wire::{Durability, ResultCode};

fn persisted(replica_count: u8, confirm: ConfirmPolicy) -> Cluster {
    Cluster::new(replica_count, confirm, Durability::Persisted)
}

#[test]
fn adopting_a_view_that_contradicts_applied_history_quarantines() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    cluster.isolate(2);
    for _ in 0..3 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    cluster.tick(150);
    // The group is quiet: the driver's check persists the commit numbers.
    cluster.persist_commits();
    assert_eq!(
        cluster.storage[1].state.as_ref().map(|state| state.commit),
        Some(3)
    );
    cluster.crash(0);
    cluster.crash(1);
    cluster.heal(2);
    // Replica 2 alone: its view change waits until an operator accepts loss.
    cluster.tick(200);
    assert_eq!(cluster.primary(), None, "alone, it cannot start a view");
    assert!(cluster.accept_loss(2));
    cluster.tick(20);
    assert_eq!(cluster.primary(), Some(2));
    assert!(
        cluster
            .events_of(2, |event| matches!(event, Event::AcceptedLoss { .. })
                .then_some(()))
            .len()
            == 1
    );
    cluster.produce(2, 1);
    cluster.deliver_all();
    cluster.tick(10);
    // Replica 1 applied ops 1..=3; the view it now adopts has other history.
    cluster.restart(1);
    cluster.tick(100);
    assert!(
        cluster
            .quarantined
            .iter()
            .any(|(index, agreed)| *index == 1 && *agreed == 0),
        "{:?}",
        cluster.quarantined
    );
    assert_eq!(cluster.replica(1).status(), Status::AwaitingStateTransfer);
    assert_eq!(
        cluster.events_of(1, |event| match event {
            Event::AppliedDivergence { op } => Some(*op),
            _ => None,
        }),
        vec![1]
    );
}

fn corrupt_and_fail_over(replica_count: u8, corrupt: &[u8], header_too: bool) {
    let mut cluster = persisted(replica_count, ConfirmPolicy::MajorityDurable);
    for _ in 0..6 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    cluster.tick(150);
    for index in corrupt {
        cluster.crash(*index);
        let storage = &mut cluster.storage[usize::from(*index)];
        if header_too {
            storage.faulty_headers.insert(3);
        } else {
            storage.faulty.insert(3);
        }
    }
    // The primary dies too: replica 1 (corrupted) is the next primary.
    cluster.crash(0);
    for index in corrupt {
        cluster.restart(*index);
    }
    cluster.tick(600);
    let primary = cluster.primary().expect("a primary serves");
    assert_eq!(primary, 1, "the corrupted replica is the new primary");
    for index in corrupt {
        let storage = &cluster.storage[usize::from(*index)];
        assert!(
            storage.faulty.is_empty() && storage.faulty_headers.is_empty(),
            "replica {index} repaired op 3"
        );
        assert_eq!(storage.head(), 6, "replica {index}: nothing truncated");
    }
    for index in 1..replica_count {
        cluster.assert_acked_in_log(index);
    }
    cluster.assert_one_history();
}

#[test]
fn a_corrupted_committed_entry_on_one_of_three_is_repaired_never_truncated() {
    corrupt_and_fail_over(3, &[1], false);
    corrupt_and_fail_over(3, &[1], true);
}

#[test]
fn corrupted_committed_entries_on_two_of_five_are_repaired_never_truncated() {
    corrupt_and_fail_over(5, &[1, 2], false);
    corrupt_and_fail_over(5, &[1, 2], true);
}

/// A backup that lacks ops its primary no longer holds (retention dropped
/// them) is told where the primary's log starts instead of getting silence,
/// and waits for a state transfer; a backup that holds everything up to
/// there ignores the notice.
#[test]
fn a_backup_behind_the_primarys_log_start_waits_for_a_state_transfer() {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Persisted);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(150);
    cluster.shutdown(2);
    for _ in 0..12 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    cluster.tick(150);
    let commit = cluster.replica(0).commit();
    assert!(commit >= 13);
    for index in 0..2 {
        let replica = cluster.replicas[index].as_mut().expect("up");
        replica.note_log_start(commit - 2);
        assert_eq!(replica.log_start(), commit - 2);
    }
    cluster.restart(2);
    for _ in 0..400 {
        if !cluster.deliver_one() {
            cluster.tick(1);
        }
        if cluster.replica(2).status() == Status::AwaitingStateTransfer {
            break;
        }
    }
    assert_eq!(cluster.replica(2).status(), Status::AwaitingStateTransfer);
    let behind = cluster.events_of(2, |event| match event {
        Event::BehindLogStart { log_start, .. } => Some(*log_start),
        _ => None,
    });
    assert!(behind.contains(&(commit - 2)), "{behind:?}");
    assert!(
        cluster
            .events_of(1, |event| matches!(event, Event::BehindLogStart { .. })
                .then_some(()))
            .is_empty(),
        "replica 1 holds every op"
    );
}

/// The result code of the reply to `client`'s request `request`.
fn reply_result(cluster: &Cluster, client: u128, request: u64) -> Option<ResultCode> {
    cluster
        .replies
        .iter()
        .rev()
        .find(|reply| {
            reply.header().client.get() == client && reply.header().request.get() == request
        })
        .map(|reply| reply.header().result())
}

/// A consumer read records the old primary committed, then the primary
/// crashed before any backup heard of that commit. The new primary holds
/// those records but commits them only once a backup acks its view: a
/// cursor stored at their end meanwhile is told to retry, not that it is
/// wrong. A cursor past everything the log holds stays refused.
#[test]
fn a_cursor_read_from_the_old_primary_is_retried_until_the_new_one_commits_it() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    cluster.produce(1, 2);
    cluster.deliver_all();
    cluster.tick(5);
    // Op 2 (offsets 2..5) commits on the primary alone: no heartbeat tells
    // the backups before it crashes.
    cluster.produce(1, 3);
    cluster.deliver_all();
    assert_eq!(cluster.replica(0).machine().offset_end, 5, "read up to 5");
    cluster.crash(0);
    let mut steps = 0;
    let primary = loop {
        if let Some(primary) = (1..3).find(|index| cluster.replica(*index).is_serving_primary()) {
            break primary;
        }
        if !cluster.deliver_one() {
            for index in 1..3 {
                cluster.tick_only(index, 1);
            }
            cluster.watch_liveness();
        }
        steps += 1;
        assert!(steps < 100_000, "a new primary serves");
    };
    let replica = cluster.replica(primary);
    assert_eq!(replica.machine().offset_end, 2, "its commit trails its log");
    assert_eq!(replica.log_offset_end(), 5);
    cluster.store_cursor(primary, 7, 1, "reader", 5);
    assert_eq!(
        reply_result(&cluster, 7, 1),
        Some(ResultCode::Unavailable),
        "within the log: retry"
    );
    cluster.store_cursor(primary, 7, 2, "reader", 6);
    assert_eq!(
        reply_result(&cluster, 7, 2),
        Some(ResultCode::InvalidRequest),
        "past the log: a wrong argument"
    );
    cluster.deliver_all();
    assert_eq!(cluster.replica(primary).machine().offset_end, 5);
    cluster.store_cursor(primary, 7, 3, "reader", 5);
    assert_eq!(reply_result(&cluster, 7, 3), Some(ResultCode::Ok));
}

/// The skipped view: the primary of view 0 stores cursor events only it
/// holds and is cut off; view 1 starts on replica 1 at cursor tail 2, whose
/// primary stores other events at 2.. that reach its backups; view 2 starts
/// on replica 2 without replica 0. Replica 0 returns and adopts view 2: its
/// own events at 2..4 are on no view's history from view 1 on, so it cuts
/// at view 1's start (the lowest start after its log view), not view 2's.
#[test]
fn a_replica_that_missed_a_view_cuts_its_cursor_log_at_that_views_start() {
    let mut cluster = persisted(5, ConfirmPolicy::MajorityDurable);
    cluster.produce(1, 4);
    cluster.deliver_all();
    cluster.tick(5);
    cluster.store_cursor(0, 7, 1, "shared", 1);
    cluster.store_cursor(0, 7, 2, "shared", 2);
    cluster.deliver_all();
    for index in 0..5 {
        assert_eq!(cluster.storage[index].cursor_tail, 2, "replica {index}");
    }
    // Two more events that only replica 0 holds (durable there).
    cluster.isolate(0);
    cluster.store_cursor(0, 7, 3, "old", 3);
    cluster.store_cursor(0, 7, 4, "old", 4);
    assert_eq!(cluster.storage[0].cursor_tail, 4);
    cluster.tick(harness::LIVENESS_SUSPECT_TICKS + 200);
    assert_eq!(cluster.primary(), Some(1), "view 1 starts on replica 1");
    let view_1 = cluster.replica(1).view();
    assert_eq!(
        cluster
            .replica(1)
            .durable_state()
            .latest_start()
            .map(|start| start.cursor_tail),
        Some(2)
    );
    // Its primary stores other events at 2..5; its backups receive them.
    cluster.store_cursor(1, 8, 1, "new", 1);
    cluster.store_cursor(1, 8, 2, "new", 2);
    cluster.store_cursor(1, 8, 3, "new", 3);
    cluster.deliver_all();
    for index in 1..5 {
        assert_eq!(cluster.storage[index].cursor_tail, 5, "replica {index}");
    }
    // View 2 starts on replica 2, without replica 0 (nor replica 1).
    cluster.crash(1);
    cluster.tick(harness::LIVENESS_SUSPECT_TICKS + 200);
    assert_eq!(cluster.primary(), Some(2), "view 2 starts on replica 2");
    assert!(cluster.replica(2).view() > view_1);
    cluster.store_cursor(2, 9, 1, "newer", 4);
    cluster.deliver_all();
    // Replica 0 returns and adopts the view.
    cluster.heal(0);
    cluster.tick(300);
    assert_eq!(cluster.replica(0).status(), Status::Normal);
    assert_eq!(cluster.replica(0).view(), cluster.replica(2).view());
    cluster.assert_cursor_logs_agree();
    assert_eq!(
        cluster.storage[0].cursor_events, cluster.storage[2].cursor_events,
        "replica 0 caught up with the primary's cursor log"
    );
    cluster.assert_acked_in_log(0);
}

/// The new primary missed the views in between: replica 3 holds events of
/// view 0's primary that view 1's primary never had, sleeps through view 1
/// (whose primary stores other events at the same positions), and leads
/// view 3 from a quorum that reports view 1. Its cursor log is the view's:
/// every replica that adopts it ends up with the same events.
#[test]
fn a_new_primary_that_missed_a_view_leaves_one_cursor_history() {
    let mut cluster = persisted(5, ConfirmPolicy::MajorityDurable);
    cluster.produce(1, 4);
    cluster.deliver_all();
    cluster.tick(5);
    cluster.store_cursor(0, 7, 1, "shared", 1);
    cluster.store_cursor(0, 7, 2, "shared", 2);
    cluster.deliver_all();
    // Two events that reach replica 3 alone; then replica 3 stops.
    for to in [1, 2, 4] {
        cluster.cut.insert((0, to));
    }
    cluster.store_cursor(0, 7, 3, "old", 3);
    cluster.store_cursor(0, 7, 4, "old", 4);
    cluster.deliver_all();
    assert_eq!(cluster.storage[3].cursor_tail, 4);
    assert_eq!(cluster.storage[1].cursor_tail, 2);
    cluster.crash(3);
    cluster.isolate(0);
    cluster.tick(harness::LIVENESS_SUSPECT_TICKS + 200);
    assert_eq!(cluster.primary(), Some(1), "view 1 starts on replica 1");
    cluster.store_cursor(1, 8, 1, "new", 1);
    cluster.store_cursor(1, 8, 2, "new", 2);
    cluster.store_cursor(1, 8, 3, "new", 3);
    cluster.deliver_all();
    assert_eq!(cluster.storage[4].cursor_tail, 5);
    // Replicas 1 and 2 stop; 0, 3 and 4 start a view led by replica 3.
    cluster.crash(1);
    cluster.crash(2);
    cluster.restart(3);
    cluster.heal(0);
    cluster.tick(harness::LIVENESS_SUSPECT_TICKS + 600);
    let primary = cluster.primary().expect("a primary serves");
    assert_eq!(primary, 3, "the view is led by replica 3");
    cluster.store_cursor(3, 9, 1, "newer", 4);
    cluster.deliver_all();
    cluster.tick(50);
    for index in [0, 4] {
        assert_eq!(cluster.replica(index).status(), Status::Normal);
    }
    cluster.assert_cursor_logs_agree();
    for index in [0, 4] {
        assert_eq!(
            cluster.storage[index].cursor_events, cluster.storage[3].cursor_events,
            "replica {index} holds the primary's cursor log"
        );
    }
}

/// A view that started unseen: replica 1 starts view 1 from replica 2's
/// DoViewChange, but its StartView never reaches replica 2, and it stores a
/// cursor event at 2 before it is cut off. Replicas 0 and 2 start view 2
/// without knowing view 1 started, from replica 0's events at 2..4. When
/// replica 1 returns, the history its log followed (view 1's) left view 2's
/// below its own start: it cuts there, not at view 2's start.
#[test]
fn a_primary_of_a_view_nobody_adopted_cuts_its_cursor_events_on_return() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    cluster.produce(1, 4);
    cluster.deliver_all();
    cluster.tick(5);
    cluster.store_cursor(0, 7, 1, "shared", 1);
    cluster.store_cursor(0, 7, 2, "shared", 2);
    cluster.deliver_all();
    cluster.cut.insert((0, 1));
    cluster.store_cursor(0, 7, 3, "old", 3);
    cluster.store_cursor(0, 7, 4, "old", 4);
    cluster.deliver_all();
    assert_eq!(cluster.storage[2].cursor_tail, 4);
    cluster.isolate(0);
    // Message by message until replica 1 serves view 1; its StartView to
    // replica 2 is lost, and so is everything after it.
    'started: for _ in 0..600 {
        for index in [1, 2] {
            cluster.tick_only(index, 1);
        }
        cluster.watch_liveness();
        while cluster.deliver_one() {
            if cluster.up(1) && cluster.replica(1).is_serving_primary() {
                cluster.cut.insert((1, 2));
                break 'started;
            }
        }
    }
    assert!(
        cluster.replica(1).is_serving_primary(),
        "view 1 starts on replica 1"
    );
    assert_eq!(cluster.replica(2).status(), Status::ViewChange);
    cluster.store_cursor(1, 8, 1, "new", 1);
    cluster.deliver_all();
    assert_eq!(cluster.storage[1].cursor_tail, 3);
    // Replicas 0 and 2 hear each other again; replica 1 hears nobody.
    cluster.isolate(1);
    cluster
        .cut
        .retain(|link| *link != (0, 2) && *link != (2, 0));
    cluster.tick(harness::LIVENESS_SUSPECT_TICKS + 600);
    let primary = cluster.primary().expect("a primary serves");
    assert_ne!(primary, 1);
    assert!(cluster.replica(primary).view().view >= 2);
    assert!(
        cluster
            .replica(primary)
            .durable_state()
            .history_starts
            .iter()
            .all(|start| start.view.view != 1),
        "the view started without knowing view 1 did"
    );
    cluster.heal(0);
    cluster.heal(1);
    cluster.tick(300);
    assert_eq!(cluster.replica(1).status(), Status::Normal);
    assert_eq!(cluster.replica(1).view(), cluster.replica(primary).view());
    assert_eq!(
        cluster.storage[1].cursor_events,
        cluster.storage[usize::from(primary)].cursor_events,
        "replica 1's own event is gone, the view's in its place"
    );
    cluster.assert_cursor_logs_agree();
}
