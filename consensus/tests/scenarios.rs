//! Scenario tests: replicas driven message by message, written as stories.
//! Here the normal path, the view change and the trust it rests on; what
//! the logs keep across views (applied history, damaged entries, log
//! starts, cursor logs) is in `logs_across_views.rs`.

mod harness;

use harness::{Cluster, SyncMode};
use strand_consensus::*;
use strand_wire::{Durability, ResultCode};

fn persisted(replica_count: u8, confirm: ConfirmPolicy) -> Cluster {
    Cluster::new(replica_count, confirm, Durability::Persisted)
}

#[test]
fn a_fresh_cluster_commits_and_replies_with_contiguous_offsets() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    assert_eq!(cluster.primary(), Some(0));
    for _ in 0..5 {
        cluster.produce(1, 10);
        cluster.deliver_all();
    }
    let acked = cluster.acked();
    assert_eq!(acked.len(), 5);
    let offsets: Vec<_> = acked
        .values()
        .map(|(op, base, count)| (*op, *base, *count))
        .collect();
    assert_eq!(
        offsets,
        vec![
            (1, 0, 10),
            (2, 10, 10),
            (3, 20, 10),
            (4, 30, 10),
            (5, 40, 10)
        ]
    );
    cluster.tick(10);
    for replica in 0..3 {
        assert_eq!(cluster.replica(replica).commit(), 5, "replica {replica}");
        cluster.assert_acked_in_log(replica);
    }
}

#[test]
fn majority_commits_with_one_backup_down() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    cluster.crash(2);
    cluster.produce(1, 1);
    cluster.deliver_all();
    assert_eq!(
        cluster.acked().len(),
        1,
        "W=2 of 3: primary and one backup confirm"
    );
}

#[test]
fn local_durable_waits_for_every_copy() {
    let mut cluster = persisted(3, ConfirmPolicy::LocalDurable);
    cluster.crash(2);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(5);
    assert_eq!(cluster.acked().len(), 0, "W=3: two copies are not enough");
    cluster.restart(2);
    cluster.tick(60);
    assert_eq!(cluster.acked().len(), 1, "the third copy confirms it");
}

#[test]
fn a_count_above_the_replica_count_caps_at_every_copy() {
    assert_eq!(
        confirm_rule(ConfirmPolicy::Count(5), 3),
        confirm_rule(ConfirmPolicy::LocalDurable, 3)
    );
    let mut cluster = persisted(3, ConfirmPolicy::Count(5));
    cluster.crash(1);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(5);
    assert_eq!(cluster.acked().len(), 0, "Count(5) on E=3 needs all three");
    cluster.restart(1);
    cluster.tick(60);
    assert_eq!(cluster.acked().len(), 1);
}

#[test]
fn a_full_pipeline_answers_busy_and_drops_nothing() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    cluster.isolate(0);
    for client in 1..=(PIPELINE_PREPARES_MAX as u128 + 1) {
        cluster.produce(client, 1);
    }
    let busy = cluster
        .replies
        .iter()
        .filter(|reply| reply.header().result() == ResultCode::Busy)
        .count();
    assert_eq!(
        busy, 1,
        "the request past the pipeline bound is told to retry"
    );
    cluster.heal(0);
    cluster.tick(20);
    assert_eq!(cluster.acked().len(), PIPELINE_PREPARES_MAX as usize);
}

#[test]
fn a_primary_crash_keeps_every_committed_op_at_the_same_offsets() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    for _ in 0..8 {
        cluster.produce(1, 3);
        cluster.deliver_all();
    }
    assert_eq!(cluster.acked().len(), 8);
    cluster.crash(0);
    cluster.tick(200);
    let primary = cluster.primary().expect("a new primary serves");
    assert_ne!(primary, 0);
    assert!(cluster.replica(primary).view().view >= 1);
    for replica in [1, 2] {
        cluster.assert_acked_in_log(replica);
    }
    // It keeps serving: the next record lands right after the acked ones.
    cluster.produce(2, 1);
    cluster.deliver_all();
    let acked = cluster.acked();
    assert_eq!(
        acked[&(2, 1)].1,
        24,
        "offsets continue after the last acked record"
    );
    // The old primary comes back as a backup without another view change.
    let view = cluster.replica(primary).view();
    cluster.restart(0);
    cluster.tick(100);
    assert_eq!(cluster.replica(0).status(), Status::Normal);
    assert_eq!(
        cluster.replica(0).view(),
        view,
        "rejoined without a view change"
    );
    assert_eq!(cluster.replica(primary).view(), view);
    cluster.assert_acked_in_log(0);
    cluster.assert_one_history();
}

#[test]
fn a_retried_request_after_a_view_change_is_answered_once_at_the_same_offsets() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    let request = cluster.produce(9, 4);
    cluster.deliver_all();
    let first = cluster.acked()[&(9, request)];
    cluster.crash(0);
    cluster.tick(200);
    let primary = cluster.primary().expect("new primary");
    cluster.replies.clear();
    cluster.produce_to(primary, 9, request, 4);
    cluster.deliver_all();
    assert_eq!(cluster.replies.len(), 1, "answered from the client table");
    assert_eq!(
        cluster.acked()[&(9, request)],
        first,
        "same op, same offsets"
    );
    assert_eq!(
        cluster.replica(primary).op(),
        first.0,
        "nothing appended twice"
    );
}

#[test]
fn a_returning_old_primary_with_a_longer_uncommitted_tail_is_cut() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    cluster.produce(1, 1);
    cluster.deliver_all();
    // The primary prepares two more ops nobody else receives.
    cluster.isolate(0);
    cluster.produce(1, 1);
    cluster.produce(1, 1);
    assert_eq!(cluster.storage[0].head(), 3);
    cluster.crash(0);
    cluster.heal(0);
    cluster.tick(200);
    let primary = cluster.primary().expect("new primary");
    cluster.produce(2, 1);
    cluster.deliver_all();
    cluster.restart(0);
    cluster.tick(100);
    assert_eq!(cluster.replica(0).status(), Status::Normal);
    let canonical = cluster.stored(primary, 2).expect("op 2").checksum();
    assert_eq!(
        cluster.stored(0, 2).map(|prepare| prepare.checksum()),
        Some(canonical),
        "op 2 replaced"
    );
    assert_eq!(
        cluster.storage[0].head(),
        cluster.storage[usize::from(primary)].head(),
        "tail cut"
    );
    cluster.assert_acked_in_log(0);
}

/// Reference A's cut in one piece: the old primary's record log goes down
/// to the view's head and its cursor log to the view's history start.
#[test]
fn a_returning_old_primary_cuts_its_cursor_events_past_the_start_too() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    cluster.produce(1, 2);
    cluster.deliver_all();
    cluster.tick(5);
    // The primary prepares an op and stores two cursors nobody else hears of.
    cluster.isolate(0);
    cluster.produce(1, 1);
    cluster.store_cursor(0, 7, 1, "reader", 1);
    cluster.store_cursor(0, 7, 2, "reader", 2);
    assert_eq!(cluster.storage[0].cursor_tail, 2);
    cluster.crash(0);
    cluster.heal(0);
    cluster.tick(200);
    let primary = cluster.primary().expect("new primary");
    assert_ne!(primary, 0);
    cluster.restart(0);
    cluster.tick(100);
    assert_eq!(cluster.replica(0).status(), Status::Normal);
    assert_eq!(
        cluster.storage[0].head(),
        1,
        "the record log cut to the view's head"
    );
    assert_eq!(
        cluster.storage[0].cursor_tail, 0,
        "the cursor log cut to the view's start"
    );
    assert_eq!(cluster.replica(0).cursor_tail(), 0);
    cluster.assert_acked_in_log(0);
}

#[test]
fn fewer_than_r_trusted_dvcs_wait_and_name_the_awaited_replicas() {
    // E=5, majority: W=3, R=3. Replicas 3 and 4 are untrusted (replicated
    // restart); 0 (the old primary) is gone: only 1 and 2 are trusted.
    let mut cluster = Cluster::new(5, ConfirmPolicy::MajorityDurable, Durability::Replicated);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(10);
    cluster.crash(0);
    cluster.crash(3);
    cluster.crash(4);
    cluster.restart(3);
    cluster.restart(4);
    cluster.tick(300);
    assert_eq!(
        cluster.primary(),
        None,
        "no view starts without R trusted logs"
    );
    let waiting: Vec<_> = (1..5)
        .filter_map(|index| cluster.replica(index).attention())
        .filter(|(reason, _)| *reason == WaitReason::FewerTrustedThanQuorum)
        .collect();
    assert!(!waiting.is_empty(), "the candidate says why it waits");
    for (_, awaited) in waiting {
        assert_eq!(
            awaited, 0b00001,
            "it waits for replica 0, the one that has not reported"
        );
    }
    let warnings = (1..5).flat_map(|index| {
        cluster.events_of(index, |event| match event {
            Event::ViewChangeWaiting {
                reason: WaitReason::FewerTrustedThanQuorum,
                awaited,
                ..
            } => Some(*awaited),
            _ => None,
        })
    });
    assert!(
        warnings.count() >= 1,
        "a warning names the awaited replicas"
    );
    // Once every replica reports, the view starts and nothing acked is lost.
    cluster.restart(0);
    cluster.tick(300);
    assert!(cluster.primary().is_some());
    for index in 0..5 {
        cluster.assert_acked_in_log(index);
    }
}

/// Reference B's failure: under `replicated`, the primary and one backup
/// confirm ops; the backup and the third replica crash in quick succession and
/// return without them, while the primary is unreachable.
fn reference_b_schedule(gate: bool) -> Cluster {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Replicated);
    cluster.untrusted_gate = gate;
    cluster.sync = vec![SyncMode::Immediate, SyncMode::Manual, SyncMode::Manual];
    cluster.isolate(2);
    for _ in 0..5 {
        cluster.produce(1, 2);
        cluster.deliver_all();
    }
    assert_eq!(
        cluster.acked().len(),
        5,
        "confirmed by the primary and replica 1 (queued)"
    );
    cluster.crash(1);
    cluster.crash(2);
    assert_eq!(cluster.storage[1].head(), 0, "replica 1 lost what it acked");
    cluster.heal(2);
    cluster.isolate(0);
    cluster.restart(1);
    cluster.restart(2);
    cluster.tick(400);
    cluster
}

#[test]
fn untrusted_restarts_wait_for_the_replica_holding_the_committed_ops() {
    let mut cluster = reference_b_schedule(true);
    for index in [1, 2] {
        assert_ne!(
            cluster.replica(index).status(),
            Status::Normal,
            "replica {index} must not serve without A"
        );
    }
    assert!(!cluster.replica(1).trusted() && !cluster.replica(2).trusted());
    let awaited: Vec<_> = [1, 2]
        .iter()
        .filter_map(|index| cluster.replica(*index).attention())
        .collect();
    assert!(
        awaited.contains(&(WaitReason::FewerTrustedThanQuorum, 0b001)),
        "{awaited:?}"
    );
    cluster.heal(0);
    cluster.tick(400);
    assert!(cluster.primary().is_some());
    for index in 0..3 {
        assert!(
            cluster.replica(index).trusted(),
            "replica {index} adopted a settled view"
        );
        cluster.assert_acked_in_log(index);
    }
    assert!(cluster.quarantined.is_empty());
    cluster.assert_one_history();
}

#[cfg(feature = "mutations")]
#[test]
fn without_the_trusted_gate_the_same_schedule_loses_committed_ops() {
    let mut cluster = reference_b_schedule(false);
    let primary = cluster
        .primary()
        .expect("the untrusted replicas started a view on their own");
    cluster.produce(2, 1);
    cluster.deliver_all();
    let acked = cluster.acked();
    assert_eq!(
        acked[&(2, 1)].1,
        0,
        "a new record took offset 0, which an acked record had"
    );
    let lost = acked.iter().filter(|((client, _), (op, _, _))| {
        *client == 1
            && cluster
                .stored(primary, *op)
                .is_none_or(|prepare| prepare.header().client.get() != 1)
    });
    assert_eq!(
        lost.count(),
        5,
        "every op confirmed before the crashes is gone"
    );
    // The old primary comes back and finds its applied history contradicted.
    cluster.heal(0);
    cluster.tick(400);
    assert!(cluster.quarantined.iter().any(|(index, _)| *index == 0));
}

#[test]
fn an_untrusted_replica_never_acks_nor_serves_until_it_adopts_a_view() {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Replicated);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.crash(2);
    cluster.restart(2);
    assert!(!cluster.replica(2).trusted());
    assert!(
        cluster
            .events_of(2, |event| matches!(
                event,
                Event::UntrustedLog { untrusted: true }
            )
            .then_some(()))
            .len()
            == 1
    );
    // It hears nobody: it may only probe and then try view changes.
    cluster.cut.insert((0, 2));
    cluster.cut.insert((1, 2));
    let mark = cluster.sent.len();
    for _ in 0..4 {
        cluster.produce(1, 1);
        cluster.tick(60);
    }
    let from_two: Vec<_> = cluster.sent[mark..]
        .iter()
        .filter(|(from, ..)| *from == 2)
        .map(|(_, _, command, _)| *command)
        .collect();
    assert!(!from_two.is_empty());
    assert!(
        !from_two.contains(&strand_wire::Command::PrepareOk),
        "{from_two:?}"
    );
    assert_ne!(cluster.replica(2).status(), Status::Normal);
    // The others settled a view without it (its DoViewChange is untrusted).
    let primary = cluster.primary().expect("a primary serves");
    assert_ne!(primary, 2);
    cluster.heal(2);
    cluster.tick(200);
    assert_eq!(cluster.replica(2).status(), Status::Normal);
    assert!(cluster.replica(2).trusted());
    assert!(
        cluster
            .events_of(2, |event| matches!(
                event,
                Event::UntrustedLog { untrusted: false }
            )
            .then_some(()))
            .len()
            == 1
    );
    let mark = cluster.sent.len();
    cluster.produce(1, 1);
    cluster.tick(20);
    assert!(
        cluster.sent[mark..]
            .iter()
            .any(|(from, _, command, _)| *from == 2 && *command == strand_wire::Command::PrepareOk)
    );
    cluster.assert_acked_in_log(2);
}

#[test]
fn an_empty_flagged_dvc_counts_as_reported_and_a_full_restart_goes_on() {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Replicated);
    for _ in 0..4 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    for index in 0..3 {
        cluster.crash(index);
    }
    cluster.awaiting.insert(2);
    for index in 0..3 {
        cluster.restart(index);
    }
    assert_eq!(cluster.replica(2).status(), Status::AwaitingStateTransfer);
    cluster.tick(600);
    let primary = cluster
        .primary()
        .expect("the full restart does not halt on the empty DoViewChange");
    assert_ne!(primary, 2);
    assert!(
        cluster
            .sent
            .iter()
            .any(|(from, _, command, _)| *from == 2
                && *command == strand_wire::Command::DoViewChange)
    );
    for index in 0..2 {
        cluster.assert_acked_in_log(index);
    }
    assert_eq!(
        cluster.replica(primary).op(),
        4,
        "the empty log dropped nothing"
    );
}

#[test]
fn the_same_schedule_gives_the_same_choices_and_effects() {
    let run = || {
        let mut cluster = persisted(5, ConfirmPolicy::MajorityDurable);
        for client in 1..=6 {
            cluster.produce(client, 2);
            cluster.deliver_all();
        }
        cluster.crash(0);
        cluster.crash(3);
        cluster.tick(300);
        cluster.restart(3);
        cluster.restart(0);
        cluster.tick(300);
        (
            format!("{:?}", cluster.events),
            cluster.sent.clone(),
            cluster.committed.clone(),
        )
    };
    assert_eq!(run(), run());
}

/// Seeds 15920 and 17171 (`--reassign`): an operator accepted loss on a
/// replica that was not the candidate of the stuck view. It moved to a view
/// of its own and merged its own, shorter log alone, though it held the
/// DoViewChanges of longer logs: acked records were lost.
#[test]
fn accept_loss_starts_from_the_logs_at_hand_not_from_its_own_alone() {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Replicated);
    cluster.produce(1, 1);
    cluster.deliver_all();
    // Replica 2 misses the next ops; 0 and 1 confirm them.
    cluster.isolate(2);
    for _ in 0..3 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    assert_eq!(cluster.acked().len(), 4);
    let short = cluster.replica(2).op();
    // Everyone restarts untrusted; replica 0 stays down, so the view change
    // of 1 and 2 waits for it.
    for replica in 0..3 {
        cluster.crash(replica);
    }
    cluster.heal(2);
    cluster.restart(1);
    cluster.restart(2);
    let mut stuck = false;
    for _ in 0..2_000 {
        cluster.tick(1);
        let replica = cluster.replica(2);
        stuck = replica.status() == Status::ViewChange
            && !replica.is_primary()
            && replica.attention().map(|(_, awaited)| awaited) == Some(0b001);
        if stuck {
            break;
        }
    }
    assert!(
        stuck,
        "replica 2 waits on a candidate, having heard replica 1"
    );
    assert!(cluster.replica(1).op() > short);
    assert!(cluster.accept_loss(2));
    cluster.tick(50);
    assert_eq!(cluster.primary(), Some(2));
    cluster.assert_acked_in_log(2);
    cluster.assert_one_history();
}

#[test]
fn a_frame_of_an_epoch_without_a_membership_is_dropped_whatever_its_view() {
    use strand_wire::{CommandHeader, Message, Msg, StartViewChangeHeader, ViewId};
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    cluster.produce(1, 1);
    cluster.deliver_all();
    let before = cluster.replica(0).view();
    let svc = StartViewChangeHeader::new(harness::CLUSTER, harness::GROUP, ViewId::new(7, 90), 1);
    for to in [0, 2] {
        let message = Message::StartViewChange(Msg::new(svc, bytes::Bytes::new()));
        cluster.network.push_back((1, to, message));
    }
    cluster.deliver_all();
    let dropped = cluster.events_of(0, |event| match event {
        Event::Dropped {
            reason: DropReason::UnknownEpoch,
        } => Some(()),
        _ => None,
    });
    assert_eq!(dropped.len(), 1);
    assert_eq!(cluster.replica(0).view(), before, "no view was entered");
    assert_eq!(cluster.replica(0).status(), Status::Normal);
    cluster.produce(1, 1);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 2, "the group serves on");
}
