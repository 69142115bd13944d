//! The bound on distinct consumer names per partition, as stories: the
//! primary refuses a store that would add a name past the bound, counting
//! the names its map holds and the new ones it accepted that storage has
//! not applied yet; a store for a consumer that has a cursor always passes;
//! a delete (a tombstone event) frees a slot on every replica, and so does
//! an expiry decided by the primary; a new primary applies the same bound
//! to the map it inherited.

mod harness;

use harness::Cluster;
use strand_consensus::*;
use strand_wire::{Durability, ResultCode};

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

/// A 3-replica group with 10 committed records and a bound of `max` names.
fn bounded(max: u64) -> Cluster {
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Persisted);
    cluster.cursor_consumers_max = max;
    cluster.produce(1, 10);
    cluster.deliver_all();
    cluster
}

#[test]
fn a_store_past_the_bound_on_consumer_names_is_refused_and_an_existing_one_passes() {
    let mut cluster = bounded(3);
    for (request, name) in ["a", "b", "c"].into_iter().enumerate() {
        let outcome = cluster.store_cursor(0, 7, request as u64 + 1, name, 1);
        assert_eq!(outcome, CursorOutcome::Accepted);
    }
    let refused = cluster.store_cursor(0, 7, 4, "d", 1);
    assert_eq!(refused, CursorOutcome::Refused(ResultCode::LimitExceeded));
    assert_eq!(
        reply_result(&cluster, 7, 4),
        Some(ResultCode::LimitExceeded)
    );
    assert_eq!(cluster.storage[0].cursor_tail, 3, "nothing appended");
    let again = cluster.store_cursor(0, 7, 5, "b", 9);
    assert_eq!(
        again,
        CursorOutcome::Accepted,
        "an existing consumer always stores"
    );
    assert_eq!(reply_result(&cluster, 7, 5), Some(ResultCode::Ok));
    cluster.deliver_all();
    for replica in 0..3 {
        let map = cluster.cursor_map(replica);
        assert_eq!(map.len(), 3, "replica {replica}: {map:?}");
        assert_eq!(map.get("b"), Some(&9));
    }
}

#[test]
fn new_names_accepted_but_not_yet_applied_count_toward_the_bound() {
    let mut cluster = bounded(3);
    cluster.store_cursor(0, 7, 1, "a", 1);
    // Four stores reach the primary together: storage applies none of them
    // before the last is decided, yet only two new names fit. A name
    // repeated among them is one name.
    let outcomes =
        cluster.store_cursors_at_once(0, 7, 2, &[("b", 1), ("b", 2), ("c", 1), ("d", 1)]);
    assert_eq!(
        outcomes,
        [
            CursorOutcome::Accepted,
            CursorOutcome::Accepted,
            CursorOutcome::Accepted,
            CursorOutcome::Refused(ResultCode::LimitExceeded),
        ]
    );
    cluster.deliver_all();
    assert_eq!(cluster.cursor_map(0).len(), 3);
    assert_eq!(cluster.cursor_map(0).get("b"), Some(&2));
}

#[test]
fn a_deleted_cursor_frees_its_slot_on_every_replica() {
    let mut cluster = bounded(2);
    cluster.store_cursor(0, 7, 1, "a", 1);
    cluster.store_cursor(0, 7, 2, "b", 2);
    assert_eq!(
        cluster.store_cursor(0, 7, 3, "c", 3),
        CursorOutcome::Refused(ResultCode::LimitExceeded)
    );
    assert_eq!(cluster.delete_cursor(0, 7, 4, "a"), CursorOutcome::Accepted);
    assert_eq!(reply_result(&cluster, 7, 4), Some(ResultCode::Ok));
    assert_eq!(
        cluster.store_cursor(0, 7, 5, "c", 3),
        CursorOutcome::Accepted
    );
    // Deleting a consumer without a cursor is answered at once, appending
    // nothing.
    let tail = cluster.storage[0].cursor_tail;
    assert_eq!(
        cluster.delete_cursor(0, 7, 6, "never"),
        CursorOutcome::Accepted
    );
    assert_eq!(reply_result(&cluster, 7, 6), Some(ResultCode::Ok));
    assert_eq!(cluster.storage[0].cursor_tail, tail);
    cluster.deliver_all();
    cluster.tick(20);
    for replica in 0..3 {
        let names: Vec<String> = cluster.cursor_map(replica).into_keys().collect();
        assert_eq!(names, ["b", "c"], "replica {replica}");
    }
}

#[test]
fn a_new_primary_applies_the_bound_to_the_map_it_inherited() {
    let mut cluster = bounded(2);
    cluster.store_cursor(0, 7, 1, "a", 1);
    cluster.store_cursor(0, 7, 2, "b", 2);
    cluster.deliver_all();
    cluster.tick(20);
    cluster.crash(0);
    cluster.tick(300);
    let primary = cluster.primary().expect("a new primary");
    assert_ne!(primary, 0);
    assert_eq!(
        cluster.store_cursor(primary, 8, 1, "c", 1),
        CursorOutcome::Refused(ResultCode::LimitExceeded)
    );
    assert_eq!(
        cluster.store_cursor(primary, 8, 2, "a", 5),
        CursorOutcome::Accepted
    );
}

#[test]
fn an_expiry_is_tombstones_every_replica_applies_and_frees_slots() {
    let mut cluster = bounded(2);
    cluster.store_cursor(0, 7, 1, "a", 1);
    cluster.store_cursor(0, 7, 2, "b", 2);
    assert_eq!(
        cluster.expire_cursors(1, &["a"]),
        0,
        "a backup expires nothing"
    );
    assert_eq!(cluster.expire_cursors(0, &["a", "b"]), 2);
    assert_eq!(
        cluster.store_cursor(0, 7, 3, "c", 3),
        CursorOutcome::Accepted
    );
    cluster.deliver_all();
    cluster.tick(20);
    for replica in 0..3 {
        let names: Vec<String> = cluster.cursor_map(replica).into_keys().collect();
        assert_eq!(names, ["c"], "replica {replica}");
    }
}
