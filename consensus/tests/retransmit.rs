//! Prepare retransmission, as stories: a busy pipeline whose backups keep
//! acking is never sent twice, however long its ops take; a prepare no
//! backup acked goes again at the timeout.

mod harness;

use std::collections::BTreeMap;

use harness::Cluster;
use strand_consensus::*;
use strand_wire::{Durability, Message};

/// Prepares the primary sent, by (backup, op): how many times each.
type Sent = BTreeMap<(u8, u64), u32>;

fn cluster() -> Cluster {
    Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Persisted)
}

/// Notes the prepare at the network's front, if it is one.
fn note_front(cluster: &Cluster, sent: &mut Sent) {
    if let Some((_, to, Message::Prepare(prepare))) = cluster.network.front() {
        *sent.entry((*to, prepare.header().op.get())).or_default() += 1;
    }
}

/// Delivers the `count` oldest messages, noting the prepares among them.
fn deliver_oldest(cluster: &mut Cluster, count: usize, sent: &mut Sent) {
    for _ in 0..count {
        note_front(cluster, sent);
        cluster.deliver_one();
    }
}

/// One round of a busy group: a new request, one tick everywhere, and only
/// what was sent before the round is delivered. Each op is acked two
/// rounds after it was prepared, so the pipeline is never empty.
fn busy_round(cluster: &mut Cluster, sent: &mut Sent) {
    let before = cluster.network.len();
    cluster.produce(1, 1);
    for index in 0..cluster.count() {
        cluster.tick_only(index, 1);
    }
    deliver_oldest(cluster, before, sent);
}

#[test]
fn a_pipeline_whose_backups_keep_acking_is_never_sent_twice() {
    let mut cluster = cluster();
    let interval = Timeouts::default().prepare_retransmit_ticks;
    let mut sent = Sent::new();
    let rounds = 4 * interval;
    for _ in 0..rounds {
        busy_round(&mut cluster, &mut sent);
    }
    let primary = cluster.replica(0);
    assert!(
        primary.commit() + 1 < rounds && primary.commit() + 3 >= rounds,
        "the ops kept committing, two rounds behind (commit {})",
        primary.commit()
    );
    let resent: Vec<_> = sent.iter().filter(|(_, times)| **times > 1).collect();
    assert!(resent.is_empty(), "prepares sent again: {resent:?}");
    assert_eq!(
        sent.len() as u64,
        2 * (rounds - 1),
        "each op reached both backups"
    );
}

#[test]
fn a_prepare_no_backup_acked_is_sent_again_at_the_timeout() {
    let mut cluster = cluster();
    let interval = Timeouts::default().prepare_retransmit_ticks;
    let mut sent = Sent::new();
    // Both backups lose op 1's prepare, and then cannot reach the primary
    // (their repair requests are lost too): only the primary's timeout can
    // bring the op back.
    cluster.cut.insert((0, 1));
    cluster.cut.insert((0, 2));
    cluster.produce(1, 1);
    let queued = cluster.network.len();
    deliver_oldest(&mut cluster, queued, &mut sent);
    cluster.cut.clear();
    cluster.cut.insert((1, 0));
    cluster.cut.insert((2, 0));
    for _ in 0..interval {
        for index in 0..cluster.count() {
            cluster.tick_only(index, 1);
        }
        let queued = cluster.network.len();
        deliver_oldest(&mut cluster, queued, &mut sent);
    }
    for backup in [1, 2] {
        assert_eq!(
            sent.get(&(backup, 1)),
            Some(&2),
            "backup {backup} got op 1 again"
        );
    }
    cluster.cut.clear();
    cluster.tick(interval);
    assert_eq!(cluster.replica(0).commit(), 1, "op 1 committed once acked");
}
