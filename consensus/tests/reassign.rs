//! Reassignment inside a group: memberships that change in place, through a
//! `Reconfigure` op in the group's own log, with no view change.

mod harness;

use harness::{Cluster, SyncMode};
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

/// Seeds 12581, 5250, 11260: a lone replica's view outlives the in-place
/// change that adds a second one. Its prepares past what it made durable
/// reach the newcomer; it crashes and loses them. Restarted, it must not
/// serve its view again as if it were still alone: it would prepare other
/// ops at those op numbers in the same view, and the newcomer would commit
/// its own, older copies there.
#[test]
fn a_lone_primary_whose_log_reached_an_epoch_with_others_does_not_resume_its_view() {
    let mut cluster = persisted(1, ConfirmPolicy::Count(1));
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.assign(Membership::new(
        1,
        SlotSet::first(2),
        ConfirmPolicy::Count(1),
    ));
    cluster.deliver_all();
    cluster.join(1);
    cluster.transfer(1, 0);
    cluster.tick(50);
    assert_eq!(cluster.replica(1).status(), Status::Normal);
    assert_eq!(cluster.replica(0).view(), strand_wire::ViewId::ZERO);
    let head = cluster.replica(0).op();
    // Replica 0 writes two more ops but fsyncs neither; replica 1 holds both.
    cluster.sync[0] = SyncMode::Manual;
    cluster.produce(1, 1);
    cluster.produce(1, 1);
    cluster.deliver_all();
    assert_eq!(cluster.storage[1].head(), head + 2);
    cluster.crash(0);
    cluster.sync[0] = SyncMode::Immediate;
    cluster.restart(0);
    assert_ne!(
        cluster.replica(0).status(),
        Status::Normal,
        "replica 1 takes part in view 0.0 since epoch 1"
    );
    cluster.tick(300);
    cluster.produce(2, 1);
    cluster.tick(50);
    cluster.assert_one_history();
    for replica in 0..2 {
        cluster.assert_acked_in_log(replica);
    }
}

// ----- changes through a view change at the new epoch ----------------------

#[test]
fn a_replica_added_before_anything_committed_joins_by_an_empty_transfer() {
    // Every copy confirms: nothing commits until the newcomer holds the log.
    let mut cluster = persisted(3, ConfirmPolicy::LocalDurable);
    cluster.assign(Membership::new(
        1,
        SlotSet::first(4),
        ConfirmPolicy::LocalDurable,
    ));
    cluster.join(3);
    cluster.tick(100);
    cluster.produce(1, 2);
    cluster.tick(20);
    assert!(cluster.acked().is_empty(), "the newcomer holds nothing yet");
    let primary = cluster.primary().expect("the new epoch started");
    assert_eq!(cluster.replica(primary).commit(), 0);
    cluster.transfer(3, primary);
    cluster.tick(100);
    assert_eq!(cluster.replica(3).status(), Status::Normal);
    assert_eq!(cluster.acked().len(), 1, "repaired, the newcomer confirms");
    cluster.assert_acked_in_log(3);
    cluster.assert_one_history();
}

/// A group of three (slots 0..3, majority) whose replica 2 is lost for good
/// is reassigned to slots {0, 1, 3}: slot 3 is a new, empty replica.
fn replace_two_by_three(cluster: &mut Cluster) -> Membership {
    let replaced = Membership::new(1, SlotSet::of(&[0, 1, 3]), ConfirmPolicy::MajorityDurable);
    cluster.assign(replaced);
    cluster.deliver_all();
    cluster.tick(100);
    replaced
}

#[test]
fn a_replacement_gathers_r_of_the_old_assignment_and_r_of_the_new_then_serves() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    for _ in 0..3 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    cluster.crash(2);
    replace_two_by_three(&mut cluster);
    let primary = cluster.primary().expect("the new epoch started");
    assert_eq!(cluster.replica(primary).view().epoch, 1);
    assert!(
        matches!(primary, 0 | 1),
        "a replica that holds the log leads"
    );
    assert_eq!(epochs_started(&cluster, primary), [1]);
    assert!(view_changes(&cluster) > 0);
    // The newcomer catches up by a state transfer, then counts.
    cluster.join(3);
    cluster.transfer(3, primary);
    cluster.tick(50);
    assert_eq!(cluster.replica(3).status(), Status::Normal);
    cluster.produce(1, 1);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 4);
    // Another original replica dies: the newcomer and the survivor carry on.
    let other = if primary == 0 { 1 } else { 0 };
    cluster.crash(primary);
    cluster.tick(300);
    let next = cluster
        .primary()
        .expect("fails over within the new membership");
    assert!(next == other || next == 3);
    cluster.produce(2, 1);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 5);
    for replica in [other, 3] {
        cluster.assert_acked_in_log(replica);
    }
    cluster.assert_one_history();
}

/// One op committed, replica 2 lost for good and replaced by slot 3 (see
/// [`replace_two_by_three`]), which catches up by a state transfer from the
/// new epoch's primary; returns that primary.
fn replaced_and_caught_up(cluster: &mut Cluster) -> u8 {
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.crash(2);
    replace_two_by_three(cluster);
    cluster.join(3);
    let primary = cluster.primary().expect("serves");
    cluster.transfer(3, primary);
    cluster.tick(50);
    primary
}

#[test]
fn a_removed_replica_that_comes_back_retires_and_is_never_counted() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    let primary = replaced_and_caught_up(&mut cluster);
    cluster.restart(2);
    cluster.tick(100);
    assert_eq!(cluster.replica(2).status(), Status::Retired);
    let normal_views = cluster.events_of(2, |event| match event {
        Event::Normal { view, .. } => Some(*view),
        _ => None,
    });
    assert!(
        normal_views.iter().all(|view| view.epoch == 0),
        "{normal_views:?}"
    );
    // Its acks never count: with both other members down, the primary and
    // the retired replica are not two copies.
    let other = if primary == 0 { 1 } else { 0 };
    cluster.crash(3);
    cluster.crash(other);
    cluster.produce(1, 1);
    cluster.tick(20);
    assert_eq!(cluster.acked().len(), 1, "a retired replica never confirms");
    cluster.restart(3);
    cluster.tick(100);
    assert_eq!(cluster.acked().len(), 2);
    cluster.assert_one_history();
}

#[test]
fn a_new_copy_in_a_reused_slot_never_enters_the_old_occupants_epochs() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    let primary = replaced_and_caught_up(&mut cluster);
    // Slot 2 is free again and a new copy takes it, in place (W' = W = 2):
    // epoch 0 named slot 2 for the lost replica; epoch 1's views go on.
    cluster.storage[2] = Default::default();
    cluster.assign(Membership::new(
        2,
        SlotSet::of(&[0, 1, 2, 3]),
        ConfirmPolicy::Count(2),
    ));
    cluster.deliver_all();
    cluster.join(2);
    assert_eq!(
        cluster.replica(2).view(),
        strand_wire::ViewId::new(1, 0),
        "the first view a copy placed at epoch 2 belongs to"
    );
    cluster.transfer(2, primary);
    cluster.tick(100);
    assert_eq!(cluster.replica(2).status(), Status::Normal);
    assert_eq!(cluster.replica(2).view().epoch, 1);
    cluster.produce(1, 1);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 2);
    cluster.assert_acked_in_log(2);
    cluster.assert_one_history();
}

#[test]
fn majority_to_local_goes_through_a_view_change_and_then_waits_for_every_copy() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.assign(Membership::new(
        1,
        SlotSet::first(3),
        ConfirmPolicy::LocalDurable,
    ));
    cluster.deliver_all();
    cluster.tick(100);
    let primary = cluster.primary().expect("serves in the new epoch");
    assert_eq!(cluster.replica(primary).view().epoch, 1);
    assert!(view_changes(&cluster) > 0, "W' > W takes a view change");
    let backup = (0..3)
        .find(|replica| *replica != primary)
        .expect("a backup");
    cluster.crash(backup);
    cluster.produce(1, 1);
    cluster.tick(20);
    assert_eq!(cluster.acked().len(), 1, "every copy must hold it now");
    cluster.restart(backup);
    cluster.tick(100);
    assert_eq!(cluster.acked().len(), 2);
    cluster.assert_one_history();
}

#[test]
fn right_after_a_replacement_the_view_change_waits_for_the_replica_with_the_log() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.crash(2);
    replace_two_by_three(&mut cluster);
    cluster.join(3);
    let primary = cluster.primary().expect("serves");
    let other = if primary == 0 { 1 } else { 0 };
    // The other original replica is down; the primary dies before the
    // newcomer caught up: no trusted pair is left.
    cluster.crash(other);
    cluster.produce(1, 1);
    cluster.tick(5);
    cluster.crash(primary);
    cluster.restart(other);
    cluster.tick(300);
    assert_eq!(cluster.primary(), None, "never from an empty replica");
    let (reason, awaited) = cluster
        .replica(other)
        .attention()
        .expect("the wait is reported");
    assert_eq!(reason, WaitReason::FewerTrustedThanQuorum);
    assert_ne!(awaited & 1 << primary, 0, "it names the replica it needs");
    cluster.restart(primary);
    cluster.tick(300);
    assert!(cluster.primary().is_some(), "it returns: the group serves");
    cluster.assert_one_history();
    for replica in [0, 1] {
        cluster.assert_acked_in_log(replica);
    }
}

/// Seeds 665, 761, 1322 and 4517 (`--reassign`): a newcomer's transferred
/// prefix ended below the latest history start; restarted before it adopted
/// a view, it came back trusted (`persisted`), so it counted toward the next
/// view change's quorum alone, knew no start for the guard, and its prefix
/// was chosen: the acknowledged ops above it were replaced.
#[test]
fn a_transferred_log_stays_untrusted_across_a_restart_until_it_adopts_a_view() {
    let mut cluster = persisted(3, ConfirmPolicy::LocalDurable);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(10);
    // Op 2 is acknowledged; only the primary (0) knows it committed.
    cluster.produce(1, 1);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 2);
    assert_eq!(cluster.replica(1).commit(), 1);
    cluster.crash(0);
    cluster.crash(2);
    // Epoch 1 replaces 2 by 3: replica 1 starts it alone (R = 1 of both
    // memberships) at op 2, its commit still 1.
    let replaced = Membership::new(1, SlotSet::of(&[0, 1, 3]), ConfirmPolicy::LocalDurable);
    cluster.assign(replaced);
    cluster.deliver_all();
    cluster.tick(100);
    assert_eq!(cluster.primary(), Some(1));
    let start = cluster.replica(1).durable_state().latest_start();
    assert_eq!(start.map(|start| start.op), Some(2));
    // The newcomer gets the committed prefix (op 1, below the start) and
    // restarts before it adopted the view.
    cluster.join(3);
    cluster.transfer(3, 1);
    cluster.network.clear();
    cluster.crash(3);
    cluster.restart(3);
    let newcomer = cluster.replica(3);
    assert!(!newcomer.trusted(), "a transferred log no view vouches for");
    assert!(newcomer.durable_state().log_unsettled);
    assert!(
        newcomer
            .own_summary()
            .flags
            .contains(strand_wire::DoViewChangeFlags::UNTRUSTED_LOG),
        "its DoViewChange never counts toward a quorum nor nacks"
    );
    // It adopts the view of the replica that holds the log: settled, trusted
    // (views whose primary is the missing replica 0 pass by backed-off
    // view-change timeouts, whose jitter decides how long that takes).
    cluster.tick(600);
    let newcomer = cluster.replica(3);
    assert_eq!(newcomer.status(), Status::Normal);
    assert!(newcomer.trusted());
    assert!(!newcomer.durable_state().log_unsettled);
    let persisted = cluster.storage[3].state.as_ref().expect("persisted");
    assert!(!persisted.log_unsettled, "settled on disk too");
    cluster.assert_one_history();
}

#[test]
fn an_operator_may_accept_the_loss_and_the_new_epochs_start_says_so() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.crash(2);
    replace_two_by_three(&mut cluster);
    cluster.join(3);
    let primary = cluster.primary().expect("serves");
    let other = if primary == 0 { 1 } else { 0 };
    cluster.crash(other);
    cluster.tick(5);
    cluster.crash(primary);
    cluster.restart(other);
    cluster.tick(300);
    assert_eq!(cluster.primary(), None);
    assert!(
        cluster.accept_loss(other),
        "the stuck group takes the operator's word"
    );
    cluster.tick(100);
    assert_eq!(cluster.primary(), Some(other));
    let start = cluster
        .replica(other)
        .durable_state()
        .latest_start()
        .expect("a start is recorded");
    assert!(start.accepted_loss);
    assert_eq!(start.view.epoch, 1);
    cluster.assert_one_history();
}

#[test]
fn a_change_the_whole_group_restarted_in_the_middle_of_is_still_taken_up() {
    let mut cluster = persisted(3, ConfirmPolicy::LocalDurable);
    cluster.produce(1, 1);
    cluster.deliver_all();
    // The metadata plane committed the change, but every replica restarts
    // before the primary prepared it: they learn it only from their config.
    cluster.config.memberships.push(Membership::new(
        1,
        SlotSet::first(3),
        ConfirmPolicy::MajorityDurable,
    ));
    for replica in 0..3 {
        cluster.crash(replica);
    }
    for replica in 0..3 {
        cluster.restart(replica);
    }
    cluster.tick(300);
    let primary = cluster.primary().expect("serves");
    assert_eq!(cluster.replica(primary).log_epoch(), 1);
    assert!(epochs_started(&cluster, primary).contains(&1));
    cluster.assert_one_history();
}

/// Seed 402002 (`--reassign`): a newcomer installed a transferred prefix
/// (committed through op 10), then moved to a higher view before adopting
/// one. That persist wrote the commit number of its empty log, so the
/// prefix's commit fell back; after a restart its commit lay below the
/// ops retention had dropped, no export could name its frontier, and a
/// later newcomer whose write quorum needed it waited for ever.
#[test]
fn a_transferred_prefix_stays_committed_through_the_next_persist() {
    let mut cluster = persisted(3, ConfirmPolicy::MajorityDurable);
    for _ in 0..3 {
        cluster.produce(1, 1);
        cluster.deliver_all();
    }
    cluster.tick(10);
    cluster.crash(2);
    replace_two_by_three(&mut cluster);
    let primary = cluster.primary().expect("the new epoch started");
    cluster.join(3);
    cluster.transfer(3, primary);
    let frontier = cluster.replica(3).commit();
    assert!(frontier >= 3, "the committed prefix: {frontier}");
    // The primary dies before the newcomer adopts its view: the newcomer
    // follows the survivor's view change, which persists its view first.
    cluster.network.clear();
    cluster.crash(primary);
    let view = cluster.replica(3).view();
    cluster.tick(100);
    let newcomer = cluster.replica(3);
    assert!(newcomer.view() > view, "it moved to a higher view");
    assert!(
        newcomer.durable_state().log_unsettled,
        "no view adopted yet"
    );
    let persisted = cluster.storage[3].state.as_ref().expect("persisted");
    assert!(persisted.view > view, "the higher view was persisted");
    assert_eq!(persisted.commit, frontier, "the persist kept the prefix");
    cluster.crash(3);
    cluster.restart(3);
    assert_eq!(cluster.replica(3).commit(), frontier, "and a restart too");
}
