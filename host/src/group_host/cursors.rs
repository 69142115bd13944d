//! The door for a client's cursor stores and deletes: the replica decides
//! (it is the primary's rule), with what the partition's cursor map says
//! for the bound on consumer names handed in. The server and the simulator
//! both come through here, so both run the same rule.
//!
//! Expiry of idle cursors (Kafka's `offsets.retention.minutes`): the
//! primary remembers when each consumer last stored its cursor, by the
//! owner's clock handed in with each store, and [`GroupHost::expire_cursors`]
//! appends tombstones for the cursors idle past the retention. The times
//! are the primary's alone, kept for the view they were taken in: a replica
//! that becomes primary (or starts a new view) counts every cursor as
//! stored when it first looks, so a failover delays expiry by up to one
//! retention and never hastens it. The decision travels as ordinary delete
//! events, so every replica applies the same expiry at the same point of
//! the log.

use std::collections::BTreeMap;

use strand_consensus::{CursorCensus, CursorOutcome};
use strand_partition::Disk;
use strand_wire::ops::{DeleteCursor, StoreCursor};
use strand_wire::{Msg, RequestHeader, ViewId};

/// When each consumer last stored its cursor on this primary, in one view.
#[derive(Debug, Clone, Default)]
pub(super) struct CursorClock {
    /// The view the times were taken in (`None`: none taken).
    view: Option<ViewId>,
    /// Consumer → the owner's time of its last store, ns.
    stored_ns: BTreeMap<String, u64>,
}

use super::GroupHost;

impl<D: Disk> GroupHost<D> {
    /// A client stores `cursor` (the request's decoded body); the reply
    /// comes out of a later [`GroupHost::settle`]. Says whether it was
    /// accepted or refused at once (and with what), for the owner's metrics.
    /// `now_ns` is the owner's clock, for the expiry of idle cursors.
    pub fn store_cursor(
        &mut self,
        request: &Msg<RequestHeader>,
        cursor: StoreCursor,
        now_ns: u64,
    ) -> CursorOutcome {
        let census = self.cursor_census(&cursor.consumer);
        let high_watermark = self.replica.machine().high_watermark();
        let consumer = cursor.consumer.clone();
        let outcome = self.replica.on_store_cursor(
            request,
            cursor,
            high_watermark,
            census,
            &mut self.effects,
        );
        if outcome == CursorOutcome::Accepted {
            assert!(
                self.replica.is_serving_primary(),
                "a cursor store accepted by a replica that is not the serving primary"
            );
            self.cursor_clock_in_view()
                .stored_ns
                .insert(consumer, now_ns);
        }
        outcome
    }

    /// A client deletes a consumer's cursor (the request's decoded body);
    /// the reply comes out of a later [`GroupHost::settle`].
    pub fn delete_cursor(
        &mut self,
        request: &Msg<RequestHeader>,
        delete: DeleteCursor,
    ) -> CursorOutcome {
        let census = self.cursor_census(&delete.consumer);
        let consumer = delete.consumer.clone();
        let outcome = self
            .replica
            .on_delete_cursor(request, delete, census, &mut self.effects);
        if outcome == CursorOutcome::Accepted {
            assert!(
                self.replica.is_serving_primary(),
                "a cursor delete accepted by a replica that is not the serving primary"
            );
            self.cursor_clock.stored_ns.remove(&consumer);
        }
        outcome
    }

    /// As primary, deletes the cursors no consumer stored for
    /// `retention_ns` by the owner's clock `now_ns` (see the module docs),
    /// except those `keep` names (a consumer group with members, say): at
    /// most one frame of tombstones per call. Returns how many expired;
    /// they are written at the next [`GroupHost::settle`].
    pub fn expire_cursors(
        &mut self,
        now_ns: u64,
        retention_ns: u64,
        keep: &dyn Fn(&str) -> bool,
    ) -> usize {
        assert!(retention_ns > 0, "a retention of zero keeps no cursor");
        if !self.replica.is_serving_primary() || !self.storage_settled() {
            return 0;
        }
        self.cursor_clock_in_view();
        let map = self
            .partition
            .as_ref()
            .expect("the partition is open between operations")
            .cursors();
        let stored_ns = &mut self.cursor_clock.stored_ns;
        stored_ns.retain(|consumer, _| map.contains_key(consumer));
        let expired: Vec<String> = map
            .keys()
            .filter(|consumer| {
                let stored = *stored_ns.entry((*consumer).clone()).or_insert(now_ns);
                now_ns.saturating_sub(stored) >= retention_ns && !keep(consumer)
            })
            .cloned()
            .collect();
        let count = self
            .replica
            .expire_cursors(expired.clone(), &mut self.effects);
        assert!(
            count <= expired.len(),
            "{count} cursors expired of {} asked",
            expired.len()
        );
        for consumer in expired.iter().take(count) {
            self.cursor_clock.stored_ns.remove(consumer);
        }
        count
    }

    /// The clock of last stores, emptied if it was taken in another view
    /// than the replica's: only this view's stores reached this primary.
    fn cursor_clock_in_view(&mut self) -> &mut CursorClock {
        let view = self.replica.view();
        assert!(
            self.cursor_clock.view.is_none_or(|clock| clock <= view),
            "the cursor clock's view {:?} is past the replica's {view}",
            self.cursor_clock.view
        );
        if self.cursor_clock.view != Some(view) {
            self.cursor_clock = CursorClock {
                view: Some(view),
                stored_ns: BTreeMap::new(),
            };
        }
        &mut self.cursor_clock
    }

    /// Sets the most distinct consumer names this partition keeps cursors
    /// for (the node's setting;
    /// [`strand_consensus::CURSOR_CONSUMERS_MAX_DEFAULT`] until
    /// set). Lowering it deletes nothing: new names wait until enough are
    /// deleted.
    pub fn set_cursor_consumers_max(&mut self, consumers_max: u64) {
        assert!(consumers_max > 0, "a partition keeps some cursor");
        self.cursor_consumers_max = consumers_max;
    }

    /// The most distinct consumer names this partition keeps cursors for.
    pub fn cursor_consumers_max(&self) -> u64 {
        self.cursor_consumers_max
    }

    /// What the partition's cursor map says about `consumer`.
    fn cursor_census(&self, consumer: &str) -> CursorCensus {
        let partition = self.partition_view();
        let map = partition.cursors();
        CursorCensus {
            known: map.contains_key(consumer),
            consumers: map.len() as u64,
            applied_tail: partition.cursor_tail(),
            consumers_max: self.cursor_consumers_max,
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use strand_consensus::CURSOR_CONSUMERS_MAX_DEFAULT;
    use strand_wire::{Body, CommandHeader, Operation, ViewId};

    use super::super::tests::{answer_all, lone_host, produce};
    use super::*;

    const HOUR_NS: u64 = 3_600 * 1_000_000_000;

    fn store(
        host: &mut GroupHost<strand_partition::MemoryDisk>,
        request: u64,
        name: &str,
        now_ns: u64,
    ) {
        let mut header = RequestHeader::new(0, 1, ViewId::ZERO, 0);
        header.client.set(43);
        header.request.set(request);
        header.operation = Operation::StoreCursor as u8;
        let cursor = StoreCursor {
            consumer: name.to_owned(),
            offset: 1,
            fence: None,
        };
        let request = Msg::new(header, Bytes::from(cursor.to_vec()));
        assert_eq!(
            host.store_cursor(&request, cursor, now_ns),
            CursorOutcome::Accepted
        );
        answer_all(host, 1);
    }

    #[test]
    fn the_default_bound_is_the_documented_one() {
        assert_eq!(CURSOR_CONSUMERS_MAX_DEFAULT, 10_000);
    }

    #[test]
    fn cursors_idle_past_the_retention_expire_as_tombstones_and_kept_ones_stay() {
        let (mut host, _) = lone_host();
        host.submit(produce(1, &["a"]));
        answer_all(&mut host, 1);
        store(&mut host, 1, "idle", 0);
        store(&mut host, 2, "busy", 0);
        store(&mut host, 3, "group", 0);
        store(&mut host, 4, "busy", 5 * HOUR_NS);
        let keep = |consumer: &str| consumer == "group";
        let retention_ns = 6 * HOUR_NS;
        assert_eq!(host.expire_cursors(6 * HOUR_NS - 1, retention_ns, &keep), 0);
        assert_eq!(host.expire_cursors(6 * HOUR_NS, retention_ns, &keep), 1);
        host.settle(&mut Vec::new());
        let names: Vec<&String> = host.partition_view().cursors().keys().collect();
        assert_eq!(
            names,
            ["busy", "group"],
            "idle expired, busy stored since, group kept"
        );
        assert_eq!(
            host.partition_view().cursor_tail(),
            5,
            "one tombstone appended"
        );
        assert_eq!(host.expire_cursors(11 * HOUR_NS, retention_ns, &keep), 1);
        host.settle(&mut Vec::new());
        assert_eq!(host.partition_view().cursors().len(), 1);
    }

    #[test]
    fn a_cursor_never_seen_stored_by_this_primary_starts_its_idle_time_at_the_first_look() {
        let (mut host, _) = lone_host();
        host.submit(produce(1, &["a"]));
        answer_all(&mut host, 1);
        store(&mut host, 1, "old", 0);
        // As after a failover: this primary's clock knows nothing.
        host.cursor_clock = CursorClock::default();
        let retention_ns = HOUR_NS;
        assert_eq!(
            host.expire_cursors(10 * HOUR_NS, retention_ns, &|_| false),
            0
        );
        assert_eq!(
            host.expire_cursors(11 * HOUR_NS - 1, retention_ns, &|_| false),
            0
        );
        assert_eq!(
            host.expire_cursors(11 * HOUR_NS, retention_ns, &|_| false),
            1
        );
    }
}
