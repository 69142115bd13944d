//! Quiescence, as stories: an idle group goes silent and its ticks do
//! nothing; any request wakes it; node-level liveness, not heartbeats,
//! tells a quiet backup that its primary is gone.

mod harness;

use bytes::Bytes;
use harness::{Cluster, LIVENESS_SUSPECT_TICKS};
use strand_consensus::*;
use strand_wire::{
    Command, CommandHeader, Durability, Message, Msg, PrepareOkFlags, PrepareOkHeader,
    RequestPrepareHeader, RequestStartViewHeader,
};

fn cluster() -> Cluster {
    Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Persisted)
}

fn all_quiet(cluster: &Cluster) -> bool {
    (0..cluster.count())
        .filter(|index| cluster.up(*index))
        .all(|index| cluster.replica(index).is_quiet())
}

/// Every replica is quiet and applied every op up to `commit`.
fn assert_quiet_having_applied(cluster: &Cluster, commit: u64) {
    assert!(all_quiet(cluster));
    for index in 0..cluster.count() {
        assert_eq!(
            cluster.replica(index).commit(),
            commit,
            "replica {index} applied through op {commit}"
        );
    }
}

/// A cluster that committed one write and went quiet.
fn quiet_after_one_write() -> Cluster {
    let mut cluster = cluster();
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(50);
    assert!(all_quiet(&cluster), "one write, then idle: quiet");
    cluster
}

/// Messages sent during `ticks` ticks.
fn sent_during(cluster: &mut Cluster, ticks: u64) -> usize {
    let before = cluster.sent.len();
    cluster.tick(ticks);
    cluster.sent.len() - before
}

#[test]
fn a_group_that_never_wrote_goes_quiet_and_sends_nothing() {
    let mut cluster = cluster();
    cluster.tick(50);
    assert!(all_quiet(&cluster), "an empty, idle group is quiet");
    assert_eq!(sent_during(&mut cluster, 1000), 0, "and silent");
}

#[test]
fn an_idle_group_goes_quiet_once_every_backup_applied_everything() {
    let mut cluster = cluster();
    for _ in 0..3 {
        cluster.produce(1, 10);
        cluster.deliver_all();
    }
    cluster.tick(50);
    assert_quiet_having_applied(&cluster, 3);
    assert_eq!(sent_during(&mut cluster, 1000), 0);
}

/// A group that each write wakes (a thousand partitions each written a few
/// times a second) pays for the write and one quiesce heartbeat: no
/// heartbeat ahead of the prepares, no heartbeat-and-ack round before the
/// quiesce, and no superblock write on any replica.
#[test]
fn a_write_to_a_quiet_group_costs_its_prepares_acks_and_one_quiesce_heartbeat() {
    let mut cluster = quiet_after_one_write();
    let persisted = |cluster: &Cluster| {
        cluster
            .storage
            .iter()
            .map(|storage| storage.state.as_ref().map(|state| state.commit))
            .collect::<Vec<_>>()
    };
    let persisted_before = persisted(&cluster);
    let sent_before = cluster.sent.len();
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(50);
    assert_quiet_having_applied(&cluster, 2);
    let sent: Vec<Command> = cluster.sent[sent_before..]
        .iter()
        .map(|(_, _, command, _)| *command)
        .collect();
    let count = |wanted: Command| sent.iter().filter(|command| **command == wanted).count();
    assert_eq!(count(Command::Prepare), 2, "{sent:?}");
    assert_eq!(count(Command::PrepareOk), 2, "{sent:?}");
    assert_eq!(
        count(Command::Commit),
        2,
        "one quiesce heartbeat each: {sent:?}"
    );
    assert_eq!(sent.len(), 6, "{sent:?}");
    assert_eq!(persisted(&cluster), persisted_before, "no superblock write");
    // The driver's periodic check persists what the quiet group committed.
    cluster.persist_commits();
    assert!(persisted(&cluster).iter().all(|commit| *commit == Some(2)));
    assert!(all_quiet(&cluster), "and the group stays quiet");
}

#[test]
fn a_request_wakes_a_quiet_group_which_commits_and_goes_quiet_again() {
    let mut cluster = quiet_after_one_write();
    cluster.produce(1, 1);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 2, "a quiet primary serves at once");
    assert!(!cluster.replica(0).is_quiet());
    cluster.tick(50);
    assert!(all_quiet(&cluster));
    assert_eq!(cluster.replica(1).commit(), 2);
    cluster.assert_one_history();
}

#[test]
fn a_crashed_quiet_primary_is_replaced_once_its_node_is_suspected() {
    let mut cluster = quiet_after_one_write();
    let primary = cluster.fail_over_from(0);
    cluster.produce_to(primary, 2, 1, 1);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 2, "the new primary serves");
    cluster.restart(0);
    cluster.tick(200);
    assert!(all_quiet(&cluster), "back together and idle: quiet again");
    assert_eq!(cluster.replica(0).commit(), 2);
    cluster.assert_one_history();
}

#[test]
fn an_isolated_quiet_primary_is_replaced_and_rejoins_after_the_heal() {
    let mut cluster = quiet_after_one_write();
    cluster.isolate(0);
    cluster.tick(LIVENESS_SUSPECT_TICKS + 200);
    let primary = (1..3)
        .find(|index| cluster.replica(*index).is_serving_primary())
        .expect("the connected two elect a primary");
    cluster.produce_to(primary, 2, 1, 1);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 2);
    cluster.heal(0);
    cluster.tick(300);
    assert!(cluster.replica(0).view() >= cluster.replica(primary).view());
    assert_eq!(cluster.replica(0).commit(), 2, "the old primary caught up");
    assert!(all_quiet(&cluster));
    cluster.assert_one_history();
}

#[test]
fn a_quiet_primary_stays_quiet_when_a_backup_dies_and_wakes_when_it_returns() {
    let mut cluster = quiet_after_one_write();
    cluster.crash(2);
    cluster.tick(LIVENESS_SUSPECT_TICKS + 10);
    assert!(
        cluster.replica(0).is_quiet(),
        "a lost backup changes nothing"
    );
    assert!(cluster.replica(1).is_quiet());
    // Written while replica 2 is away: it lacks op 2 when it returns.
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(50);
    assert!(
        cluster.replica(0).is_quiet(),
        "quiet without the suspected backup"
    );
    cluster.restart(2);
    cluster.tick(200);
    assert_eq!(
        cluster.replica(2).commit(),
        2,
        "the returning backup caught up"
    );
    assert!(all_quiet(&cluster));
    cluster.assert_one_history();
}

/// Found by the simulator: a repair answer the network delivered after the
/// quiesce heartbeat woke the quiet backup that asked for it, and the group
/// never went quiet again. A prepare the backup holds and applied is nothing
/// new.
#[test]
fn a_late_prepare_the_backup_holds_keeps_it_quiet() {
    let mut cluster = quiet_after_one_write();
    let prepare = cluster
        .stored(0, 1)
        .expect("the primary holds op 1")
        .clone();
    cluster.network.push_back((0, 1, Message::Prepare(prepare)));
    cluster.deliver_all();
    assert!(cluster.replica(1).is_quiet(), "nothing new: still quiet");
    assert_eq!(sent_during(&mut cluster, 1000), 0);
}

/// Found by the simulator: a backup that installed a state transfer asked
/// every peer for the view (a RequestStartView), adopted the first answer
/// and went quiet with the group; the primary's answer to an earlier request,
/// delivered late, woke it. A StartView of the view a Normal backup is in
/// holds nothing new for it.
#[test]
fn a_late_start_view_of_the_backups_own_view_keeps_it_quiet() {
    let mut cluster = quiet_after_one_write();
    let view = cluster.replica(1).view();
    let mut request = RequestStartViewHeader::new(harness::CLUSTER, harness::GROUP, view, 1);
    request.nonce.set(7);
    cluster.network.push_back((
        1,
        0,
        Message::RequestStartView(Msg::new(request, Bytes::new())),
    ));
    assert!(cluster.deliver_one());
    let answer = cluster
        .network
        .iter()
        .find_map(|(from, to, message)| match message {
            Message::StartView(start) if (*from, *to) == (0, 1) => Some(start.clone()),
            _ => None,
        })
        .expect("the primary answers");
    cluster.deliver_all();
    cluster.tick(50);
    assert!(all_quiet(&cluster), "quiet again after the answer");
    cluster
        .network
        .push_back((0, 1, Message::StartView(answer)));
    cluster.deliver_all();
    assert!(cluster.replica(1).is_quiet(), "nothing new: still quiet");
    assert_eq!(sent_during(&mut cluster, 1000), 0);
}

/// Found by the simulator: a backup asked for the same repairs round after
/// round, finished them, said so, and its primary went quiet; a request it
/// sent before then, delivered late, woke the primary. A backup whose latest
/// ack says it lacks nothing gets its answer and the group stays quiet.
#[test]
fn a_late_repair_request_from_a_caught_up_backup_keeps_the_primary_quiet() {
    let mut cluster = quiet_after_one_write();
    let checksum = cluster
        .stored(0, 1)
        .expect("the primary holds op 1")
        .checksum();
    let view = cluster.replica(0).view();
    let mut request = RequestPrepareHeader::new(harness::CLUSTER, harness::GROUP, view, 1);
    request.op.set(1);
    request.prepare_checksum.set(checksum);
    cluster.network.push_back((
        1,
        0,
        Message::RequestPrepare(Msg::new(request, Bytes::new())),
    ));
    assert!(cluster.deliver_one());
    let answered = cluster.network.iter().any(|(from, to, message)| {
        (*from, *to) == (0, 1) && matches!(message, Message::Prepare(_))
    });
    assert!(answered, "the request is answered");
    cluster.deliver_all();
    assert!(all_quiet(&cluster), "and wakes nobody");
    assert_eq!(sent_during(&mut cluster, 1000), 0);
}

/// An ack that says the backup is repairing wakes a quiet primary: the
/// backup is not caught up whatever op it acks.
#[test]
fn an_ack_from_a_repairing_backup_wakes_the_quiet_primary() {
    let mut cluster = quiet_after_one_write();
    let checksum = cluster.stored(0, 1).expect("op 1").checksum();
    let view = cluster.replica(0).view();
    let mut ok = PrepareOkHeader::new(harness::CLUSTER, harness::GROUP, view, 1);
    ok.op.set(1);
    ok.prepare_checksum.set(checksum);
    ok.commit.set(1);
    ok.flags = PrepareOkFlags::REPAIRING.bits();
    cluster
        .network
        .push_back((1, 0, Message::PrepareOk(Msg::new(ok, Bytes::new()))));
    cluster.deliver_all();
    assert!(!cluster.replica(0).is_quiet(), "a repairing backup: awake");
    // The backup's own acks (it lacks nothing) let the group quiesce again.
    cluster.tick(50);
    assert!(all_quiet(&cluster));
}

/// Found by the simulator: a backup restarted, caught up and acked before
/// the node-level signal that it was back reached its quiet primary; the
/// late signal woke the primary for nothing. A peer that came back and said
/// since that it lacks nothing keeps the primary quiet; one that said
/// nothing since it went wakes it.
#[test]
fn a_peer_back_and_caught_up_keeps_the_quiet_primary_quiet() {
    let mut cluster = quiet_after_one_write();
    cluster.signal_liveness(0, 2, false);
    cluster.signal_liveness(0, 2, true);
    assert!(
        !cluster.replica(0).is_quiet(),
        "no word from it since it went: the primary wakes to catch it up"
    );
    cluster.tick(50);
    assert!(all_quiet(&cluster));

    cluster.signal_liveness(0, 2, false);
    let checksum = cluster.stored(0, 1).expect("op 1").checksum();
    let view = cluster.replica(0).view();
    let mut ok = PrepareOkHeader::new(harness::CLUSTER, harness::GROUP, view, 2);
    ok.op.set(1);
    ok.prepare_checksum.set(checksum);
    ok.commit.set(1);
    cluster
        .network
        .push_back((2, 0, Message::PrepareOk(Msg::new(ok, Bytes::new()))));
    cluster.deliver_all();
    cluster.signal_liveness(0, 2, true);
    assert!(cluster.replica(0).is_quiet(), "it said it lacks nothing");
    assert_eq!(sent_during(&mut cluster, 1000), 0);
}
