//! Clients' requests: produces, and cursor stores, deletes and expiries
//! with the census a host hands in from storage's cursor map.

use std::collections::BTreeMap;

use bytes::Bytes;
use strand_consensus::*;
use strand_wire::*;

use super::{CLUSTER, Cluster, GROUP};

impl Cluster {
    /// A produce of `records` records from `client`, sent to `to`.
    pub fn produce_to(&mut self, to: u8, client: u128, request: u64, records: u32) {
        let mut builder = BatchBuilder::default();
        for index in 0..records {
            builder.push(
                u64::from(index),
                b"key",
                format!("c{client}r{request}i{index}").as_bytes(),
                &[],
            );
        }
        let batch = builder.finish();
        let mut header = RequestHeader::new(CLUSTER, GROUP, ViewId::new(0, 0), 0);
        header.client.set(client);
        header.request.set(request);
        header.operation = Operation::Produce as u8;
        let request = ClientRequest {
            request: Msg::new(header, batch.bytes().clone()),
            record_count: records,
            timestamp_ns: 1,
        };
        let mut effects = Effects::new();
        self.replicas[usize::from(to)]
            .as_mut()
            .expect("up")
            .on_request(request, &mut effects);
        self.execute(to, effects);
    }

    /// `consumer` stores its cursor at `offset` on replica `to`.
    pub fn store_cursor(
        &mut self,
        to: u8,
        client: u128,
        request: u64,
        consumer: &str,
        offset: u64,
    ) -> CursorOutcome {
        let outcomes = self.store_cursors_at_once(to, client, request, &[(consumer, offset)]);
        outcomes[0]
    }

    /// Stores of consecutive requests of `client`, handed to replica `to`
    /// one after another before any of their effects is carried out (as a
    /// node does with requests that arrive together): each sees the map as
    /// storage held it before the first.
    pub fn store_cursors_at_once(
        &mut self,
        to: u8,
        client: u128,
        first_request: u64,
        cursors: &[(&str, u64)],
    ) -> Vec<CursorOutcome> {
        let mut effects = Effects::new();
        let mut outcomes = Vec::new();
        for (index, (consumer, offset)) in cursors.iter().enumerate() {
            let request =
                cursor_request(client, first_request + index as u64, Operation::StoreCursor);
            let cursor = ops::StoreCursor {
                consumer: (*consumer).to_owned(),
                offset: *offset,
                fence: None,
            };
            let census = self.cursor_census(to, consumer);
            let replica = self.replicas[usize::from(to)].as_mut().expect("up");
            let high_watermark = replica.machine().offset_end;
            outcomes.push(replica.on_store_cursor(
                &request,
                cursor,
                high_watermark,
                census,
                &mut effects,
            ));
        }
        self.execute(to, effects);
        outcomes
    }

    /// `consumer`'s cursor is deleted on replica `to`.
    pub fn delete_cursor(
        &mut self,
        to: u8,
        client: u128,
        request: u64,
        consumer: &str,
    ) -> CursorOutcome {
        let request = cursor_request(client, request, Operation::DeleteCursor);
        let delete = ops::DeleteCursor {
            consumer: consumer.to_owned(),
        };
        let census = self.cursor_census(to, consumer);
        let mut effects = Effects::new();
        let replica = self.replicas[usize::from(to)].as_mut().expect("up");
        let outcome = replica.on_delete_cursor(&request, delete, census, &mut effects);
        self.execute(to, effects);
        outcome
    }

    /// Replica `to` expires the cursors of `consumers` (as its driver does
    /// for idle ones).
    pub fn expire_cursors(&mut self, to: u8, consumers: &[&str]) -> usize {
        let mut effects = Effects::new();
        let replica = self.replicas[usize::from(to)].as_mut().expect("up");
        let names = consumers.iter().map(|name| (*name).to_owned()).collect();
        let count = replica.expire_cursors(names, &mut effects);
        self.execute(to, effects);
        count
    }

    /// Replica `index`'s cursor map: its storage's events, replayed.
    pub fn cursor_map(&self, index: u8) -> BTreeMap<String, u64> {
        let mut map = BTreeMap::new();
        for (consumer, offset) in &self.storage[usize::from(index)].cursor_events {
            if *offset == ops::CURSOR_TOMBSTONE_OFFSET {
                map.remove(consumer);
            } else {
                map.insert(consumer.clone(), *offset);
            }
        }
        map
    }

    /// What replica `index`'s storage says of `consumer`, as a host hands in.
    fn cursor_census(&self, index: u8, consumer: &str) -> CursorCensus {
        let map = self.cursor_map(index);
        CursorCensus {
            known: map.contains_key(consumer),
            consumers: map.len() as u64,
            applied_tail: self.storage[usize::from(index)].cursor_tail,
            consumers_max: self.cursor_consumers_max,
        }
    }

    /// The next request of `client` to the current primary.
    pub fn produce(&mut self, client: u128, records: u32) -> u64 {
        let primary = self.primary().expect("a primary serves");
        let request = *self
            .next_request
            .entry(client)
            .and_modify(|next| *next += 1)
            .or_insert(1);
        self.produce_to(primary, client, request, records);
        request
    }
}

/// A cursor request's envelope from `client`.
fn cursor_request(client: u128, request: u64, operation: Operation) -> Msg<RequestHeader> {
    let mut header = RequestHeader::new(CLUSTER, GROUP, ViewId::new(0, 0), 0);
    header.client.set(client);
    header.request.set(request);
    header.operation = operation as u8;
    Msg::new(header, Bytes::new())
}
