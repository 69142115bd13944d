//! Restarts, as stories: a cleanly stopped replica resumes in its view (a
//! clean restart of the whole group changes no view); a group whose
//! primary does not come back elects once; a group whose every replica
//! crashed elects its preferred primary at once; a crashed replica is not
//! taken at its word and rejoins through the primary.

mod harness;

use harness::{Cluster, SyncMode};
use strand_consensus::*;
use strand_wire::{Durability, ViewId};

/// A 3-replica group that committed `writes` writes and settled.
fn settled_after(durability: Durability, writes: u32) -> Cluster {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, durability);
    for _ in 0..writes {
        cluster.produce(1, 5);
        cluster.deliver_all();
    }
    cluster.tick(50);
    cluster
}

fn view_changes_started(cluster: &Cluster, replica: u8) -> Vec<ViewId> {
    cluster.events_of(replica, |event| match event {
        Event::ViewChangeStarted { view } => Some(*view),
        _ => None,
    })
}

fn assert_normal_in(cluster: &Cluster, view: ViewId) {
    for index in 0..cluster.count() {
        let replica = cluster.replica(index);
        assert_eq!(replica.status(), Status::Normal, "replica {index}");
        assert_eq!(replica.view(), view, "replica {index}");
    }
}

#[test]
fn a_clean_restart_of_every_replica_resumes_the_view_without_a_view_change() {
    for durability in [Durability::Persisted, Durability::Replicated] {
        let mut cluster = settled_after(durability, 3);
        let view = cluster.replica(0).view();
        for index in 0..3 {
            cluster.shutdown(index);
        }
        for index in [2, 1, 0] {
            cluster.restart(index);
            assert_eq!(
                cluster.replica(index).status(),
                Status::Normal,
                "{durability:?}: replica {index} serves at once"
            );
        }
        cluster.tick(200);
        assert_normal_in(&cluster, view);
        assert_eq!(cluster.primary(), Some(0));
        for index in 0..3 {
            assert_eq!(
                view_changes_started(&cluster, index),
                vec![],
                "{durability:?}"
            );
        }
        cluster.produce(1, 5);
        cluster.deliver_all();
        assert_eq!(cluster.acked().len(), 4, "{durability:?}: writes go on");
        cluster.tick(10);
        cluster.assert_one_history();
        for index in 0..3 {
            cluster.assert_acked_in_log(index);
        }
    }
}

#[test]
fn a_clean_restart_without_its_primary_costs_one_view_change() {
    let mut cluster = settled_after(Durability::Persisted, 2);
    let view = cluster.replica(0).view();
    for index in 0..3 {
        cluster.shutdown(index);
    }
    cluster.restart(1);
    cluster.restart(2);
    cluster.tick(500);
    let next = ViewId::new(view.epoch, view.view + 1);
    for index in [1, 2] {
        let replica = cluster.replica(index);
        assert_eq!(replica.status(), Status::Normal, "replica {index}");
        assert_eq!(replica.view(), next, "one view change, not more");
    }
    // The old primary comes back in its old view and learns the new one.
    cluster.restart(0);
    cluster.tick(200);
    assert_normal_in(&cluster, next);
    cluster.produce(1, 5);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 3);
    cluster.assert_one_history();
}

#[test]
fn a_crash_of_every_replica_elects_the_preferred_primary_in_one_view_change() {
    for durability in [Durability::Persisted, Durability::Replicated] {
        let mut cluster = settled_after(durability, 3);
        let view = cluster.replica(0).view();
        assert_eq!(cluster.primary(), Some(0), "replica 0 is preferred");
        for index in 0..3 {
            cluster.crash(index);
        }
        for index in [1, 2, 0] {
            cluster.restart(index);
        }
        cluster.tick(500);
        // Views 1 and 2 are led by replicas 1 and 2: the group goes straight
        // to the next view replica 0 leads, no election and handover after it.
        let preferred = ViewId::new(view.epoch, view.view + 3);
        assert_normal_in(&cluster, preferred);
        assert_eq!(cluster.primary(), Some(0), "{durability:?}");
        for index in 0..3 {
            assert_eq!(
                view_changes_started(&cluster, index),
                vec![preferred],
                "{durability:?}: replica {index}"
            );
        }
        cluster.produce(1, 5);
        cluster.deliver_all();
        assert_eq!(cluster.acked().len(), 4, "{durability:?}: writes go on");
        cluster.assert_one_history();
    }
}

#[test]
fn a_crash_of_every_replica_without_the_preferred_node_elects_the_next_view() {
    let mut cluster = settled_after(Durability::Persisted, 2);
    let view = cluster.replica(0).view();
    for index in 0..3 {
        cluster.crash(index);
    }
    cluster.restart(1);
    cluster.restart(2);
    // The node-level signal says the preferred primary's node is down.
    cluster.signal_liveness(1, 0, false);
    cluster.signal_liveness(2, 0, false);
    cluster.tick(500);
    let next = ViewId::new(view.epoch, view.view + 1);
    for index in [1, 2] {
        assert_eq!(cluster.replica(index).status(), Status::Normal);
        assert_eq!(view_changes_started(&cluster, index), vec![next]);
    }
    cluster.produce(1, 5);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 3);
    cluster.assert_one_history();
}

#[test]
fn a_crashed_backup_rejoins_through_its_primary_not_at_its_word() {
    let mut cluster = settled_after(Durability::Persisted, 2);
    let view = cluster.replica(0).view();
    cluster.crash(2);
    cluster.restart(2);
    assert_eq!(
        cluster.replica(2).status(),
        Status::Recovering,
        "no clean mark: it asks for the view"
    );
    cluster.tick(50);
    assert_normal_in(&cluster, view);
    assert_eq!(view_changes_started(&cluster, 2), vec![]);
}

#[test]
fn an_unsynced_replica_is_never_clean_and_a_crash_under_replicated_distrusts_it() {
    let mut cluster = settled_after(Durability::Replicated, 1);
    cluster.sync[2] = SyncMode::Manual;
    cluster.produce(1, 5);
    cluster.deliver_all();
    cluster.crash(2);
    cluster.restart(2);
    let replica = cluster.replica(2);
    assert_eq!(replica.status(), Status::Recovering);
    assert!(!replica.trusted(), "it may lack what it acked");
    cluster.tick(100);
    cluster.assert_one_history();
    assert_eq!(cluster.replica(2).status(), Status::Normal);
}

#[test]
fn a_primary_back_from_a_crash_never_resumes_its_view_even_after_a_clean_stop() {
    let mut cluster = settled_after(Durability::Persisted, 1);
    let view = cluster.replica(0).view();
    // The primary sends a prepare it never gets to write.
    cluster.sync[0] = SyncMode::Manual;
    cluster.produce(1, 5);
    cluster.deliver_all();
    cluster.crash(0);
    cluster.sync[0] = SyncMode::Immediate;
    cluster.restart(0);
    assert_eq!(
        cluster.replica(0).op(),
        1,
        "it forgot op 2, which its backups hold"
    );
    assert!(!cluster.replica(0).resumable_in_view());
    // Stopped cleanly before it learned the view again: the stop is clean,
    // but it must not resume as primary and prepare another op 2.
    cluster.shutdown(0);
    cluster.restart(0);
    assert_eq!(cluster.replica(0).status(), Status::Recovering);
    cluster.tick(300);
    cluster.produce(1, 5);
    cluster.deliver_all();
    cluster.tick(50);
    cluster.assert_one_history();
    for index in 0..3 {
        cluster.assert_acked_in_log(index);
        assert!(cluster.replica(index).view() >= view);
    }
}

#[test]
fn a_retry_of_a_request_whose_op_open_no_longer_reads_is_answered_not_applied_again() {
    for durability in [Durability::Persisted, Durability::Replicated] {
        let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, durability);
        cluster.produce_to(0, 7, 1, 3);
        cluster.deliver_all();
        let first = cluster.acked()[&(7, 1)];
        for _ in 0..10 {
            cluster.produce(1, 5);
            cluster.deliver_all();
        }
        cluster.tick(50);
        for index in 0..3 {
            cluster.shutdown(index);
            // The window open reads no longer holds client 7's op.
            cluster.storage[usize::from(index)].headers_from = first.0 + 4;
        }
        for index in [2, 1, 0] {
            cluster.restart(index);
        }
        cluster.tick(200);
        let primary = cluster.primary().expect("a primary serves");
        let ops_before = cluster.replica(primary).commit();
        // The client never heard its reply and retries request 1.
        cluster.produce_to(primary, 7, 1, 3);
        cluster.deliver_all();
        cluster.tick(10);
        assert_eq!(
            cluster.replica(primary).commit(),
            ops_before,
            "{durability:?}: the retry is answered from the table, not prepared again"
        );
        assert_eq!(cluster.acked()[&(7, 1)], first, "{durability:?}");
        cluster.assert_one_history();
    }
}
