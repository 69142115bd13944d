//! A replica that joined a view and then awaits a state transfer
//! (`docs/reference-points.md`, point 4). Reference B's limitation: such a
//! replica "stays out of later elections until the transfer completes".
//! Strand narrows it: the replica still votes (StartViewChange) and answers
//! with an empty DoViewChange flagged untrusted and awaiting state
//! transfer, so it counts toward "every replica reported" (a group whose
//! other replicas restarted untrusted starts a view with it) but is never
//! chosen and never nacks. The story fails if the replica is left out again.

mod harness;

use harness::Cluster;
use strand_consensus::*;
use strand_wire::{Command, DoViewChangeFlags, Durability, ViewId};

/// A 3-replica `replicated` group in view 0 whose replica 2 rejoined the
/// view after a clean stop and then fell behind its peers' log start: it
/// awaits a state transfer while the others serve.
fn replica_2_joined_then_pending() -> Cluster {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Replicated);
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
    for index in 0..2 {
        let replica = cluster.replicas[index].as_mut().expect("up");
        replica.note_log_start(commit - 2);
    }
    cluster.restart(2);
    assert_eq!(
        cluster.replica(2).status(),
        Status::Normal,
        "a clean stop resumes in its view: replica 2 joined view 0"
    );
    for _ in 0..400 {
        if !cluster.deliver_one() {
            cluster.tick(1);
        }
        if cluster.replica(2).status() == Status::AwaitingStateTransfer {
            break;
        }
    }
    assert_eq!(cluster.replica(2).status(), Status::AwaitingStateTransfer);
    assert_eq!(cluster.replica(2).view(), ViewId::ZERO);
    cluster
}

#[test]
fn a_replica_awaiting_a_transfer_after_joining_a_view_still_reports_in_later_view_changes() {
    let mut cluster = replica_2_joined_then_pending();
    let sent_before = cluster.sent.len();
    let dvcs_before = cluster.dvcs_sent.len();

    // The primary crashes. Replica 1 (trusted) is below R = 2 trusted logs
    // on its own; the view change waits for replica 0 alone: replica 2's
    // empty report is in.
    cluster.crash(0);
    cluster.tick(300);
    assert_eq!(cluster.primary(), None);
    let waits: Vec<(WaitReason, u32)> = [1u8, 2]
        .iter()
        .filter_map(|index| cluster.replica(*index).attention())
        .filter(|(reason, _)| *reason == WaitReason::FewerTrustedThanQuorum)
        .collect();
    assert!(!waits.is_empty(), "a candidate waits for a trusted log");
    for (_, awaited) in &waits {
        assert_eq!(
            *awaited, 0b001,
            "it awaits replica 0 only: replica 2 reported"
        );
    }

    // Replica 2 voted and reported in views after the one it joined.
    let votes = cluster.sent[sent_before..]
        .iter()
        .filter(|(from, _, command, view)| {
            *from == 2 && *command == Command::StartViewChange && *view > 0
        })
        .count();
    assert!(votes > 0, "the pending replica votes to leave view 0");
    let reports: Vec<_> = cluster.dvcs_sent[dvcs_before..]
        .iter()
        .filter(|(from, _)| *from == 2)
        .map(|(_, dvc)| dvc.clone())
        .collect();
    assert!(
        !reports.is_empty(),
        "the pending replica answers with a DoViewChange"
    );
    for dvc in &reports {
        let header = dvc.header();
        assert!(header.prefix.view.get() > 0);
        assert_eq!(
            header.flags(),
            DoViewChangeFlags::UNTRUSTED_LOG | DoViewChangeFlags::AWAITING_STATE_TRANSFER,
            "empty and flagged"
        );
        assert!(dvc.body().is_empty(), "it carries no log");
    }

    // The old primary returns untrusted: still one trusted log, but now
    // every replica has reported, so the view starts from a usable log
    // (never replica 2's) and loses nothing acked.
    cluster.restart(0);
    cluster.tick(300);
    let primary = cluster.primary().expect("the view starts");
    assert_ne!(primary, 2);
    let sources = (0..3).flat_map(|index| {
        cluster.events_of(index, |event| match event {
            Event::Merged { source, .. } => Some(*source),
            _ => None,
        })
    });
    for source in sources {
        assert_ne!(source, 2, "the empty log is never chosen");
    }
    assert_eq!(cluster.replica(2).status(), Status::AwaitingStateTransfer);
    for index in 0..2 {
        cluster.assert_acked_in_log(index);
    }

    // Its transfer done, replica 2 joins the new view.
    cluster.transfer(2, primary);
    cluster.tick(300);
    let view = cluster.replica(primary).view();
    assert!(view > ViewId::ZERO);
    assert_eq!(cluster.replica(2).status(), Status::Normal);
    assert_eq!(cluster.replica(2).view(), view);
    cluster.assert_one_history();
}
