//! The client table: the replicated record of each client's latest requests
//! and their replies, so a retried request is answered, never appended twice.
//!
//! It is part of the replicated state: every replica applies the same
//! committed prepares in the same order, so every table is the same. It can be
//! rebuilt from the log's committed headers.
//!
//! Bounds and what happens at them:
//! - at most [`CLIENTS_MAX`] clients: adding one more evicts the client whose
//!   latest request committed earliest (smallest op; deterministic). An
//!   evicted client that comes back with a request number above 1 is told
//!   `SessionEvicted` and must start over with a new client id;
//! - at most [`EVICTED_REMEMBERED_MAX`] evicted clients are remembered (the
//!   oldest forgotten first): one of them retrying request 1 is told
//!   `SessionEvicted` too, since its request 1 may have committed already and
//!   taking it as new would apply it twice;
//! - at most [`REPLIES_PER_CLIENT`] replies per client (covering the SDK's
//!   requests in flight); a retry of an older request is refused as too old.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use strand_wire::{Operation, PrepareHeader, ResultCode};

/// Most clients the table remembers per group.
pub const CLIENTS_MAX: usize = 1024;

/// Evicted client ids remembered per group.
pub const EVICTED_REMEMBERED_MAX: usize = 4096;

/// Replies remembered per client: at least the SDK's in-flight bound.
pub const REPLIES_PER_CLIENT: usize = 32;

/// A committed request's reply, as kept for retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredReply {
    /// The request number.
    pub request: u64,
    /// The op it committed at.
    pub op: u64,
    /// Its operation.
    pub operation: Operation,
    /// Its result.
    pub result: ResultCode,
    /// The reply body.
    pub body: Bytes,
}

impl StoredReply {
    /// The reply a committed prepare gave.
    fn of(header: &PrepareHeader, result: ResultCode, body: Bytes) -> StoredReply {
        StoredReply {
            request: header.request.get(),
            op: header.op.get(),
            operation: header.operation(),
            result,
            body,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct ClientEntry {
    replies: VecDeque<StoredReply>,
}

impl ClientEntry {
    fn last(&self) -> &StoredReply {
        self.replies.back().expect("a client entry has a reply")
    }
}

/// What the table says about an incoming request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Not seen: it may be prepared (if the primary's pipeline does not hold it).
    New,
    /// Committed already: answer with this reply.
    Committed(StoredReply),
    /// Committed so long ago its reply is gone.
    TooOld {
        /// The oldest request whose reply is kept.
        oldest: u64,
    },
    /// Not the client's next request: resend from `expected`.
    OutOfOrder {
        /// The next request number the table expects.
        expected: u64,
    },
    /// An unknown client that does not start at request 1 (or was evicted).
    Evicted,
}

/// The table itself.
#[derive(Debug, Clone, Default)]
pub struct ClientTable {
    clients: BTreeMap<u128, ClientEntry>,
    evicted: BTreeSet<u128>,
    evicted_order: VecDeque<u128>,
}

impl ClientTable {
    /// An empty table.
    pub fn new() -> ClientTable {
        ClientTable::default()
    }

    /// Number of clients remembered.
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    /// True when no client is remembered.
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// The latest committed request of `client`, if remembered.
    pub fn last_request(&self, client: u128) -> Option<u64> {
        self.clients.get(&client).map(|entry| entry.last().request)
    }

    /// Classifies `request` from `client`; `in_flight_last` is the highest
    /// request of this client already in the primary's pipeline, if any.
    pub fn lookup(&self, client: u128, request: u64, in_flight_last: Option<u64>) -> Lookup {
        assert!(client != 0 && request != 0, "validated requests have ids");
        let Some(entry) = self.clients.get(&client) else {
            if in_flight_last.is_none() && self.evicted.contains(&client) {
                return Lookup::Evicted;
            }
            let expected = in_flight_last.map_or(1, |last| last + 1);
            return match request {
                _ if request == expected => Lookup::New,
                _ if in_flight_last.is_none() => Lookup::Evicted,
                _ if request < expected => Lookup::OutOfOrder { expected },
                _ => Lookup::OutOfOrder { expected },
            };
        };
        if let Some(reply) = entry.replies.iter().find(|reply| reply.request == request) {
            return Lookup::Committed(reply.clone());
        }
        let oldest = entry.replies.front().expect("non-empty").request;
        if request < oldest {
            return Lookup::TooOld { oldest };
        }
        let expected = in_flight_last
            .unwrap_or(entry.last().request)
            .max(entry.last().request)
            + 1;
        if request == expected {
            Lookup::New
        } else {
            Lookup::OutOfOrder { expected }
        }
    }

    /// Records a committed request's reply. Called for every committed prepare
    /// with a client, in op order, on every replica.
    pub fn commit(&mut self, header: &PrepareHeader, result: ResultCode, body: Bytes) {
        let client = header.client.get();
        if client == 0 {
            return;
        }
        let reply = StoredReply::of(header, result, body);
        if !self.clients.contains_key(&client) && self.clients.len() >= CLIENTS_MAX {
            self.evict_oldest();
        }
        let entry = self.clients.entry(client).or_default();
        if let Some(last) = entry.replies.back() {
            assert!(reply.op > last.op, "client table applied out of order");
            if reply.request <= last.request {
                // A duplicate that slipped into the log (prepared twice across
                // a view change): the first commit's reply stands.
                return;
            }
        }
        entry.replies.push_back(reply);
        if entry.replies.len() > REPLIES_PER_CLIENT {
            entry.replies.pop_front();
        }
        assert!(self.clients.len() <= CLIENTS_MAX);
    }

    /// Records a committed request learnt late: the header of a committed
    /// op that was unreadable when the table was rebuilt and was repaired
    /// since. Inserted in request order; ignored if already known or older
    /// than every reply kept.
    pub fn recover(&mut self, header: &PrepareHeader, result: ResultCode, body: Bytes) {
        let client = header.client.get();
        if client == 0 {
            return;
        }
        let reply = StoredReply::of(header, result, body);
        let Some(entry) = self.clients.get_mut(&client) else {
            self.commit(header, reply.result, reply.body);
            return;
        };
        if entry
            .replies
            .iter()
            .any(|kept| kept.request == reply.request)
        {
            return;
        }
        let position = entry
            .replies
            .partition_point(|kept| kept.request < reply.request);
        if position == 0 && entry.replies.len() >= REPLIES_PER_CLIENT {
            return;
        }
        entry.replies.insert(position, reply);
        if entry.replies.len() > REPLIES_PER_CLIENT {
            entry.replies.pop_front();
        }
    }

    fn evict_oldest(&mut self) {
        let oldest = self
            .clients
            .iter()
            .min_by_key(|(_, entry)| entry.last().op)
            .map(|(client, _)| *client)
            .expect("a full table has a client");
        self.clients.remove(&oldest);
        if self.evicted.insert(oldest) {
            self.evicted_order.push_back(oldest);
        }
        if self.evicted_order.len() > EVICTED_REMEMBERED_MAX {
            let forgotten = self.evicted_order.pop_front().expect("non-empty");
            self.evicted.remove(&forgotten);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::CommandHeader;

    fn committed(op: u64, client: u128, request: u64) -> PrepareHeader {
        let mut header = PrepareHeader::new(1, 1, strand_wire::ViewId::new(0, 1), 0);
        header.op.set(op);
        header.commit.set(op - 1);
        header.client.set(client);
        header.request.set(request);
        header.operation = Operation::Produce as u8;
        header.seal(&[]);
        header
    }

    #[test]
    fn an_evicted_client_retrying_request_one_is_not_applied_twice() {
        let mut table = ClientTable::new();
        table.commit(&committed(1, 7, 1), ResultCode::Ok, Bytes::new());
        for client in 0..CLIENTS_MAX as u128 {
            table.commit(
                &committed(2 + client as u64, 100 + client, 1),
                ResultCode::Ok,
                Bytes::new(),
            );
        }
        assert_eq!(table.last_request(7), None, "client 7 was evicted");
        assert_eq!(table.lookup(7, 1, None), Lookup::Evicted);
        assert_eq!(
            table.lookup(8, 1, None),
            Lookup::New,
            "a new client starts at 1"
        );
    }

    #[test]
    fn retries_are_answered_and_order_is_kept() {
        let mut table = ClientTable::new();
        assert_eq!(table.lookup(7, 1, None), Lookup::New);
        assert_eq!(table.lookup(7, 2, None), Lookup::Evicted);
        assert_eq!(table.lookup(7, 2, Some(1)), Lookup::New);
        table.commit(
            &committed(1, 7, 1),
            ResultCode::Ok,
            Bytes::from_static(b"r1"),
        );
        assert!(matches!(table.lookup(7, 1, None), Lookup::Committed(reply) if reply.body == "r1"));
        assert_eq!(table.lookup(7, 2, None), Lookup::New);
        assert_eq!(table.lookup(7, 3, None), Lookup::OutOfOrder { expected: 2 });
        assert_eq!(table.lookup(7, 3, Some(2)), Lookup::New);
    }

    #[test]
    fn old_replies_are_forgotten_and_clients_evicted_oldest_first() {
        let mut table = ClientTable::new();
        let mut op = 0;
        for request in 1..=(REPLIES_PER_CLIENT as u64 + 5) {
            op += 1;
            table.commit(&committed(op, 1, request), ResultCode::Ok, Bytes::new());
        }
        assert_eq!(table.lookup(1, 1, None), Lookup::TooOld { oldest: 6 });
        for client in 2..=(CLIENTS_MAX as u128) {
            op += 1;
            table.commit(&committed(op, client, 1), ResultCode::Ok, Bytes::new());
        }
        assert_eq!(table.len(), CLIENTS_MAX);
        op += 1;
        table.commit(&committed(op, 5_000, 1), ResultCode::Ok, Bytes::new());
        assert_eq!(table.len(), CLIENTS_MAX);
        assert_eq!(table.last_request(1), None, "client 1 committed earliest");
        assert_eq!(table.lookup(1, 38, None), Lookup::Evicted);
    }

    #[test]
    fn a_duplicate_commit_keeps_the_first_reply() {
        let mut table = ClientTable::new();
        table.commit(
            &committed(1, 9, 1),
            ResultCode::Ok,
            Bytes::from_static(b"first"),
        );
        table.commit(
            &committed(2, 9, 1),
            ResultCode::Ok,
            Bytes::from_static(b"second"),
        );
        assert!(
            matches!(table.lookup(9, 1, None), Lookup::Committed(reply) if reply.body == "first" && reply.op == 1)
        );
    }
}
