//! Reassignment inside a group: memberships that change in place, through a
//! `Reconfigure` op in the group's own log, with no view change.

mod harness;

use harness::Cluster;
use strand_consensus::epoch::{Membership, SlotSet};
use strand_consensus::*;
use strand_wire::{Durability, Operation};

fn persisted(replica_count: u8, confirm: ConfirmPolicy) -> Cluster {
    Cluster::new(replica_count, confirm, Durability::Persisted)
}

fn view_changes(cluster: &Cluster) -> usize {
    (0..cluster.count())
        .map(|replica| {
            cluster
                .events_of(replica, |event| {
                    matches!(event, Event::ViewChangeStarted { .. }).then_some(())
                })
                .len()
        })
        .sum()
}

fn epochs_started(cluster: &Cluster, replica: u8) -> Vec<u32> {
    cluster.events_of(replica, |event| match event {
        Event::EpochStarted { epoch } => Some(*epoch),
        _ => None,
    })
}

/// The op of the `Reconfigure` in `replica`'s log, if any.
fn reconfigure_op(cluster: &Cluster, replica: u8) -> Option<u64> {
    cluster.storage[usize::from(replica)]
        .log
        .iter()
        .find(|prepare| prepare.header().operation() == Operation::Reconfigure)
        .map(|prepare| prepare.header().op.get())
}

#[test]
fn local_to_majority_commits_in_place_with_no_view_change() {
    let mut cluster = persisted(3, ConfirmPolicy::LocalDurable);
    for _ in 0..3 {
        cluster.produce(1, 2);
        cluster.deliver_all();
    }
    let majority = Membership::new(1, SlotSet::first(3), ConfirmPolicy::MajorityDurable);
    cluster.assign(majority);
    cluster.deliver_all();
    cluster.tick(10);
    assert_eq!(reconfigure_op(&cluster, 0), Some(4));
    for replica in 0..3 {
        assert_eq!(cluster.replica(replica).commit(), 4, "replica {replica}");
        assert_eq!(cluster.replica(replica).log_epoch(), 1);
    }
    assert_eq!(epochs_started(&cluster, 0), [1]);
    assert_eq!(view_changes(&cluster), 0, "no view change");
    assert_eq!(cluster.replica(0).view(), strand_wire::ViewId::ZERO);
    // Two copies now confirm: one backup down no longer stops writes.
    cluster.crash(2);
    cluster.produce(1, 2);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 4, "W' = 2 of 3 confirms");
    cluster.assert_one_history();
}

#[test]
fn the_epoch_op_commits_on_the_old_write_quorum_and_holds_back_what_follows() {
    let mut cluster = persisted(3, ConfirmPolicy::LocalDurable);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.crash(2);
    cluster.assign(Membership::new(
        1,
        SlotSet::first(3),
        ConfirmPolicy::MajorityDurable,
    ));
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(5);
    // The Reconfigure (op 2) needs all three old copies; op 3 follows it.
    assert_eq!(cluster.replica(0).commit(), 1);
    assert_eq!(cluster.acked().len(), 1);
    cluster.restart(2);
    cluster.tick(80);
    assert_eq!(cluster.replica(0).commit(), 3);
    assert_eq!(cluster.acked().len(), 2);
    assert_eq!(epochs_started(&cluster, 0), [1]);
    cluster.assert_one_history();
}

#[test]
fn a_joining_replica_counts_toward_w_only_once_it_holds_the_prefix() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    for _ in 0..4 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    // Grow to four replicas, two of them confirming: in place (W' = W = 2).
    cluster.assign(Membership::new(
        1,
        SlotSet::first(4),
        ConfirmPolicy::Count(2),
    ));
    cluster.deliver_all();
    assert_eq!(cluster.replica(0).commit(), 5, "the epoch op committed");
    cluster.join(3);
    cluster.tick(5);
    cluster.crash(1);
    cluster.crash(2);
    cluster.produce(1, 1);
    cluster.tick(20);
    assert_eq!(
        cluster.acked().len(),
        4,
        "a replica that holds nothing yet never confirms"
    );
    cluster.transfer(3, 0);
    cluster.tick(100);
    assert_eq!(
        cluster.acked().len(),
        5,
        "caught up, it confirms with the primary"
    );
    assert_eq!(cluster.replica(3).status(), Status::Normal);
    cluster.assert_acked_in_log(3);
    cluster.assert_one_history();
}

#[test]
fn a_view_change_after_an_in_place_change_moves_to_the_new_epoch() {
    let mut cluster = persisted(3, ConfirmPolicy::LocalDurable);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.assign(Membership::new(
        1,
        SlotSet::first(3),
        ConfirmPolicy::MajorityDurable,
    ));
    cluster.deliver_all();
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(10);
    cluster.crash(0);
    cluster.tick(300);
    let primary = cluster.primary().expect("a new primary");
    assert_eq!(cluster.replica(primary).view().epoch, 1);
    cluster.produce(2, 1);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 3);
    for replica in [1, 2] {
        cluster.assert_acked_in_log(replica);
    }
    cluster.assert_one_history();
}

#[test]
fn a_replica_holding_an_uncommitted_epoch_op_never_joins_an_old_epoch_view() {
    let mut cluster = persisted(3, ConfirmPolicy::LocalDurable);
    cluster.produce(1, 1);
    cluster.deliver_all();
    // The Reconfigure reaches replica 1 only, then the primary dies.
    cluster.cut.insert((0, 2));
    cluster.assign(Membership::new(
        1,
        SlotSet::first(3),
        ConfirmPolicy::MajorityDurable,
    ));
    cluster.deliver_all();
    assert_eq!(cluster.replica(1).log_epoch(), 1);
    assert_eq!(cluster.replica(2).log_epoch(), 0);
    cluster.crash(0);
    cluster.cut.clear();
    cluster.tick(300);
    for replica in [1, 2] {
        let views = cluster.events_of(replica, |event| match event {
            Event::Normal { view, .. } => Some(*view),
            _ => None,
        });
        assert!(
            views.iter().skip(1).all(|view| view.epoch == 1),
            "replica {replica} served an epoch-0 view after the change: {views:?}"
        );
    }
    let primary = cluster.primary().expect("the group serves again");
    assert_eq!(cluster.replica(primary).view().epoch, 1);
    cluster.produce(2, 1);
    cluster.deliver_all();
    assert_eq!(
        cluster.acked().len(),
        2,
        "two of three confirm in the new epoch"
    );
    cluster.assert_one_history();
}

#[test]
fn an_epoch_op_nobody_received_is_proposed_again_by_the_next_primary() {
    let mut cluster = persisted(3, ConfirmPolicy::LocalDurable);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.isolate(0);
    cluster.assign(Membership::new(
        1,
        SlotSet::first(3),
        ConfirmPolicy::MajorityDurable,
    ));
    cluster.deliver_all();
    assert_eq!(reconfigure_op(&cluster, 0), Some(2));
    cluster.crash(0);
    cluster.heal(0);
    cluster.tick(300);
    let primary = cluster.primary().expect("a new primary");
    assert_ne!(primary, 0);
    assert_eq!(reconfigure_op(&cluster, primary), Some(2));
    assert_eq!(epochs_started(&cluster, primary), [1]);
    cluster.assert_one_history();
}

/// Without the rule that a replica never joins a view of an epoch below its
/// log's, replicas of the old membership could start an old-epoch view from
/// R of the old membership and miss an op the new membership confirmed.
#[test]
fn an_old_epoch_view_never_loses_what_the_new_membership_confirmed() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    cluster.produce(1, 1);
    cluster.deliver_all();
    // Grow to four, two confirming (in place). The epoch op reaches 0 and 1.
    cluster.cut.insert((0, 2));
    cluster.assign(Membership::new(
        1,
        SlotSet::first(4),
        ConfirmPolicy::Count(2),
    ));
    cluster.deliver_all();
    assert_eq!(cluster.replica(0).commit(), 2);
    cluster.join(3);
    cluster.transfer(3, 0);
    cluster.tick(20);
    assert_eq!(cluster.replica(3).status(), Status::Normal);
    // Op 3 is confirmed by the primary and the newcomer only.
    cluster.cut.insert((0, 1));
    cluster.produce(1, 1);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 2);
    assert_eq!(cluster.replica(1).op(), 2);
    // The primary dies and the newcomer is cut off: replicas 1 (log epoch 1)
    // and 2 (log epoch 0) are R of the old membership, but not R' of the new.
    cluster.crash(0);
    cluster.cut.clear();
    cluster.isolate(3);
    cluster.tick(300);
    assert_eq!(cluster.primary(), None, "R' = 3 of 4 cannot be gathered");
    cluster.heal(3);
    cluster.tick(500);
    let primary = cluster.primary().expect("the group serves again");
    assert_eq!(cluster.replica(primary).view().epoch, 1);
    cluster.produce(2, 1);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 3);
    for replica in [1, 2, 3] {
        cluster.assert_acked_in_log(replica);
    }
    cluster.assert_one_history();
}
