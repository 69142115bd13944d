//! Handover, as stories: after a failover moved leadership away from a
//! group's preferred primary, the serving primary gives it back once the
//! preferred replica is caught up, and nothing acknowledged is lost or
//! applied twice.

mod harness;

use harness::Cluster;
use strand_consensus::*;
use strand_wire::{Durability, ResultCode};

/// Three replicas whose preferred primary (slot 0) was killed and replaced,
/// then restarted and caught up: replica `new primary` leads.
fn led_away_from_preferred() -> (Cluster, u8) {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Persisted);
    cluster.produce(1, 3);
    cluster.deliver_all();
    let primary = cluster.fail_over_from(0);
    cluster.produce_to(primary, 1, 2, 2);
    cluster.deliver_all();
    cluster.restart(0);
    cluster.tick(200);
    assert_eq!(
        cluster.replica(0).commit(),
        2,
        "the returned replica caught up"
    );
    assert_eq!(cluster.replica(primary).preferred_primary(), 0);
    assert_eq!(
        cluster.replica(primary).leads_in_place_of_preferred(),
        Some(0)
    );
    (cluster, primary)
}

#[test]
fn a_primary_hands_its_role_back_to_the_caught_up_preferred_replica() {
    let (mut cluster, primary) = led_away_from_preferred();
    let view_before = cluster.replica(primary).view();
    assert!(
        cluster.hand_over(primary),
        "caught up and idle: it hands over"
    );
    cluster.deliver_all();
    cluster.tick(50);
    assert_eq!(cluster.primary(), Some(0), "the preferred replica leads");
    let view = cluster.replica(0).view();
    assert!(view > view_before);
    assert_eq!(
        view.view % 3,
        0,
        "the lowest view above it that slot 0 leads"
    );
    assert_eq!(cluster.replica(0).leads_in_place_of_preferred(), None);
    // It serves, and nothing acknowledged before is lost.
    cluster.produce_to(0, 1, 3, 1);
    cluster.deliver_all();
    assert_eq!(cluster.acked().len(), 3);
    for index in 0..3 {
        cluster.assert_acked_in_log(index);
    }
    cluster.assert_one_history();
}

#[test]
fn a_handover_drains_the_requests_in_flight_and_refuses_new_ones_meanwhile() {
    let (mut cluster, primary) = led_away_from_preferred();
    // Request 3 is in flight when the handover begins: it drains first.
    cluster.produce_to(primary, 1, 3, 1);
    assert!(cluster.hand_over(primary), "a drain begins");
    assert!(cluster.replica(primary).handing_over());
    assert_eq!(cluster.primary(), Some(primary), "still serving: draining");
    // A new request meanwhile is told to retry soon, not prepared.
    cluster.produce_to(primary, 2, 1, 1);
    let refused = cluster.replies.last().expect("an answer").header();
    assert_eq!(
        (refused.client.get(), refused.result()),
        (2, ResultCode::Unavailable)
    );
    cluster.deliver_all();
    cluster.tick(50);
    assert_eq!(cluster.primary(), Some(0), "the preferred replica leads");
    assert!(!cluster.replica(primary).handing_over());
    // Request 3 was acked once; the refused one goes to the new primary.
    cluster.produce_to(0, 2, 1, 1);
    cluster.deliver_all();
    let acked = cluster.acked();
    assert_eq!(acked.len(), 4, "requests 1..=3 of client 1, 1 of client 2");
    assert_eq!(cluster.replica(0).commit(), 4, "each applied once");
    cluster.assert_one_history();
}

#[test]
fn a_request_retried_across_the_handover_is_applied_once() {
    let (mut cluster, primary) = led_away_from_preferred();
    cluster.produce_to(primary, 1, 3, 1);
    assert!(cluster.hand_over(primary));
    cluster.deliver_all();
    cluster.tick(50);
    assert_eq!(cluster.primary(), Some(0));
    // The client did not hear back in time and retries at the new primary.
    cluster.produce_to(0, 1, 3, 1);
    cluster.deliver_all();
    let acked = cluster.acked();
    assert_eq!(acked.len(), 3, "request 3 is acked once");
    assert_eq!(cluster.replica(0).commit(), 3, "and applied once");
    cluster.assert_one_history();
}

#[test]
fn a_drain_that_does_not_end_is_called_off_and_the_primary_serves_on() {
    let (mut cluster, primary) = led_away_from_preferred();
    // The prepare of request 3 waits in the network while the primary's
    // clock runs: nothing commits, the drain cannot end.
    cluster.produce_to(primary, 1, 3, 1);
    assert!(cluster.hand_over(primary));
    cluster.tick_only(primary, u64::from(handover::DRAIN_TICKS_MAX) - 1);
    assert!(cluster.replica(primary).handing_over(), "still draining");
    cluster.tick_only(primary, 1);
    assert!(
        !cluster.replica(primary).handing_over(),
        "called off after its ticks"
    );
    cluster.deliver_all();
    assert_eq!(cluster.primary(), Some(primary), "it serves on");
    cluster.produce_to(primary, 2, 1, 1);
    cluster.deliver_all();
    assert!(cluster.acked().contains_key(&(1, 3)));
    assert!(
        cluster.acked().contains_key(&(2, 1)),
        "requests admitted again"
    );
    cluster.assert_one_history();
}

#[test]
fn no_handover_to_a_preferred_replica_that_is_behind_or_suspected() {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Persisted);
    cluster.produce(1, 1);
    cluster.deliver_all();
    let primary = cluster.fail_over_from(0);
    assert!(!cluster.hand_over(primary), "the preferred replica is down");
    cluster.produce_to(primary, 1, 2, 1);
    cluster.deliver_all();
    assert_eq!(cluster.primary(), Some(primary), "it goes on leading");
    // A backup has no role to hand over.
    assert!(!cluster.hand_over(3 - primary));
}
