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
//!
//! Persisted: the replica writes the table with every superblock
//! ([`ClientTable::encode`], in `DurableState::client_table`) and a state
//! transfer carries the source's, so a restarted or transferred replica
//! knows every client retention or its journal window no longer shows. A
//! table knows the op it is complete through ([`ClientTable::through`]):
//! committing an op at or below it again (a replica re-applying ops its
//! persisted table already covers) changes nothing.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use strand_wire::codec::{BodyReader, BodyWriter};
use strand_wire::error::BodyError;
use strand_wire::ops::ProduceReply;
use strand_wire::sequenced::request_span;
use strand_wire::{Body, Operation, PrepareHeader, ResultCode};

use crate::journal::Journal;
use crate::state_machine::reply_from_header;

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
    /// How many request numbers this request of `client` took (see
    /// [`strand_wire::sequenced`]): a sequenced client's produce takes one
    /// per record, read from its reply (a committed produce that did not
    /// succeed took one).
    fn span(&self, client: u128) -> u64 {
        let records = match (self.operation, self.result) {
            (Operation::Produce, ResultCode::Ok) => {
                ProduceReply::from_bytes(&self.body).map_or(1, |reply| reply.record_count)
            }
            _ => 1,
        };
        request_span(client, self.operation, records)
    }

    /// The number the client's next request takes.
    fn next(&self, client: u128) -> u64 {
        self.request + self.span(client)
    }

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

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ClientEntry {
    replies: VecDeque<StoredReply>,
}

impl ClientEntry {
    fn last(&self) -> &StoredReply {
        self.replies.back().expect("a client entry has a reply")
    }

    /// The kept reply to `request` (the replies ascend by request).
    fn reply_to(&self, request: u64) -> Option<&StoredReply> {
        let index = self
            .replies
            .binary_search_by_key(&request, |reply| reply.request)
            .ok()?;
        self.replies.get(index)
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

/// The encoding's first bytes ("STCT").
const MAGIC: u32 = 0x5443_5453;
/// The encoding's version.
const VERSION: u16 = 1;
/// Bytes a stored reply takes at least in the encoding.
const REPLY_BYTES_MIN: usize = 8 + 8 + 1 + 2 + 4;
/// Bytes a client takes at least in the encoding.
const CLIENT_BYTES_MIN: usize = 16 + 4 + REPLY_BYTES_MIN;

/// The table itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTable {
    clients: BTreeMap<u128, ClientEntry>,
    evicted: BTreeSet<u128>,
    evicted_order: VecDeque<u128>,
    /// The highest op applied: the table is every committed request up to it.
    through: u64,
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

    /// The highest op the table has applied (0: none): committing an op at
    /// or below it changes nothing.
    pub fn through(&self) -> u64 {
        self.through
    }

    /// Marks every op up to `op` as applied: the table was restored (from
    /// the log's headers, or persisted) at a replica whose commit is `op`.
    pub fn applied_through(&mut self, op: u64) {
        self.through = self.through.max(op);
    }

    /// The latest committed request of `client`, if remembered.
    pub fn last_request(&self, client: u128) -> Option<u64> {
        self.clients.get(&client).map(|entry| entry.last().request)
    }

    /// Classifies `request` from `client`; `in_flight_next` is the number
    /// that follows this client's requests already in the primary's
    /// pipeline, if it has any there.
    pub fn lookup(&self, client: u128, request: u64, in_flight_next: Option<u64>) -> Lookup {
        assert!(client != 0 && request != 0, "validated requests have ids");
        let Some(entry) = self.clients.get(&client) else {
            if in_flight_next.is_none() && self.evicted.contains(&client) {
                return Lookup::Evicted;
            }
            let expected = in_flight_next.unwrap_or(1);
            return match request {
                _ if request == expected => Lookup::New,
                _ if in_flight_next.is_none() => Lookup::Evicted,
                _ if request < expected => Lookup::OutOfOrder { expected },
                _ => Lookup::OutOfOrder { expected },
            };
        };
        // A client's replies ascend by request (commit, recover and decode
        // keep them so): the usual request, the next one, is past them all
        // and reads one reply, not every one kept.
        if request <= entry.last().request {
            if let Some(reply) = entry.reply_to(request) {
                return Lookup::Committed(reply.clone());
            }
            let oldest = entry.replies.front().expect("non-empty").request;
            if request < oldest {
                return Lookup::TooOld { oldest };
            }
        }
        let committed_next = entry.last().next(client);
        let expected = in_flight_next.map_or(committed_next, |next| next.max(committed_next));
        if request == expected {
            Lookup::New
        } else {
            Lookup::OutOfOrder { expected }
        }
    }

    /// Records a committed request's reply. Called for every committed prepare
    /// with a client, in op order, on every replica.
    pub fn commit(&mut self, header: &PrepareHeader, result: ResultCode, body: Bytes) {
        let op = header.op.get();
        if op <= self.through {
            return; // applied already: the table was restored past it
        }
        self.through = op;
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
        if !self.clients.contains_key(&client) && self.clients.len() >= CLIENTS_MAX {
            self.evict_oldest();
        }
        let entry = self.clients.entry(client).or_default();
        if entry.reply_to(reply.request).is_some() {
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
        assert!(
            self.clients.len() <= CLIENTS_MAX,
            "{} clients in the table",
            self.clients.len()
        );
    }

    /// The table as the superblock and a state transfer keep it.
    pub fn encode(&self) -> Vec<u8> {
        // What `decode` refuses must never be written: a restarted replica
        // would rebuild the table from the log's headers alone.
        assert!(
            self.clients.len() <= CLIENTS_MAX,
            "{} clients in the table",
            self.clients.len()
        );
        assert!(
            self.evicted.len() == self.evicted_order.len()
                && self.evicted_order.len() <= EVICTED_REMEMBERED_MAX,
            "evicted clients: {} remembered, {} in order",
            self.evicted.len(),
            self.evicted_order.len()
        );
        debug_assert!(
            self.clients.iter().all(|(client, entry)| {
                let replies = &entry.replies;
                *client != 0
                    && (1..=REPLIES_PER_CLIENT).contains(&replies.len())
                    && replies.iter().all(|reply| reply.op <= self.through)
                    && replies
                        .iter()
                        .zip(replies.iter().skip(1))
                        .all(|(a, b)| a.request < b.request && a.op < b.op)
            }),
            "a client's replies out of order, out of bounds or past the table's op {}",
            self.through
        );
        let mut writer = BodyWriter::default();
        writer.u32(MAGIC);
        writer.u16(VERSION);
        writer.u64(self.through);
        writer.u32(u32::try_from(self.clients.len()).expect("bounded by CLIENTS_MAX"));
        for (client, entry) in &self.clients {
            writer.u128(*client);
            writer.u32(u32::try_from(entry.replies.len()).expect("bounded by REPLIES_PER_CLIENT"));
            for reply in &entry.replies {
                writer.u64(reply.request);
                writer.u64(reply.op);
                writer.u8(reply.operation as u8);
                writer.u16(reply.result as u16);
                writer.bytes(&reply.body);
            }
        }
        writer.u32(u32::try_from(self.evicted_order.len()).expect("bounded"));
        for client in &self.evicted_order {
            writer.u128(*client);
        }
        writer.into_vec()
    }

    /// Reads a table [`ClientTable::encode`] wrote. Bytes that break its
    /// bounds or order are refused: the table decides which requests are
    /// applied, so a table that is not one is never taken.
    pub fn decode(bytes: &[u8]) -> Result<ClientTable, BodyError> {
        let invalid = |reason| BodyError::Invalid {
            field: "client table",
            reason,
        };
        let mut reader = BodyReader::new(bytes);
        if reader.u32("client table magic")? != MAGIC {
            return Err(invalid("not a client table"));
        }
        let version = reader.u16("client table version")?;
        if version != VERSION {
            return Err(BodyError::UnknownValue {
                field: "client table version",
                value: u64::from(version),
            });
        }
        let mut table = ClientTable {
            through: reader.u64("through")?,
            ..ClientTable::default()
        };
        let clients = reader.u32("clients")? as usize;
        if clients > CLIENTS_MAX || clients > reader.remaining() / CLIENT_BYTES_MIN {
            return Err(invalid("more clients than the table holds"));
        }
        for _ in 0..clients {
            let client = reader.u128("client id")?;
            let entry = read_entry(&mut reader, table.through)?;
            if client == 0 || table.clients.insert(client, entry).is_some() {
                return Err(invalid("a client id is zero or repeated"));
            }
        }
        let evicted = reader.u32("evicted")? as usize;
        if evicted > EVICTED_REMEMBERED_MAX || evicted > reader.remaining() / 16 {
            return Err(invalid("more evicted clients than the table remembers"));
        }
        for _ in 0..evicted {
            let client = reader.u128("client id")?;
            if !table.evicted.insert(client) {
                return Err(invalid("an evicted client is repeated"));
            }
            table.evicted_order.push_back(client);
        }
        reader.finish()?;
        Ok(table)
    }

    fn evict_oldest(&mut self) {
        assert!(
            self.clients.len() >= CLIENTS_MAX,
            "evicting a client from a table with room"
        );
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
        assert_eq!(
            self.evicted.len(),
            self.evicted_order.len(),
            "the evicted clients and their order disagree"
        );
    }
}

/// One client's replies: 1 to [`REPLIES_PER_CLIENT`], requests and ops
/// ascending, none past the table's `through`.
fn read_entry(reader: &mut BodyReader<'_>, through: u64) -> Result<ClientEntry, BodyError> {
    let invalid = |reason| BodyError::Invalid {
        field: "client table",
        reason,
    };
    let count = reader.u32("replies")? as usize;
    if count == 0 || count > REPLIES_PER_CLIENT || count > reader.remaining() / REPLY_BYTES_MIN {
        return Err(invalid("a client's reply count is out of range"));
    }
    let mut entry = ClientEntry::default();
    for _ in 0..count {
        let request = reader.u64("request")?;
        let op = reader.u64("op")?;
        let operation = reader.u8("operation")?;
        let operation = Operation::from_u8(operation).ok_or(BodyError::UnknownValue {
            field: "operation",
            value: u64::from(operation),
        })?;
        let result = reader.u16("result")?;
        let result = ResultCode::from_u16(result).ok_or(BodyError::UnknownValue {
            field: "result",
            value: u64::from(result),
        })?;
        let body = Bytes::copy_from_slice(reader.bytes("reply body")?);
        if request == 0 || op == 0 || op > through {
            return Err(invalid("a reply's request or op is out of range"));
        }
        if let Some(last) = entry.replies.back()
            && (request <= last.request || op <= last.op)
        {
            return Err(invalid("a client's replies are out of order"));
        }
        entry.replies.push_back(StoredReply {
            request,
            op,
            operation,
            result,
            body,
        });
    }
    Ok(entry)
}

/// The client table of a replica opening at `commit`: the persisted one
/// (`encoded`), then every committed header the journal holds above it; or,
/// when none was persisted (or it cannot be read), every committed header
/// the journal holds.
pub(crate) fn restore_client_table(encoded: &[u8], journal: &Journal, commit: u64) -> ClientTable {
    let headers = journal
        .slots_from(journal.base())
        .filter_map(|(_, slot)| slot.map(|slot| slot.header));
    replay_client_table(decode_client_table(encoded), headers, commit)
}

/// The client table of a replica that installed a transfer reaching `op`:
/// the source's (`encoded`), then the installed log's `recent` headers above it.
pub(crate) fn restore_client_table_from(
    encoded: &[u8],
    recent: &[PrepareHeader],
    op: u64,
) -> ClientTable {
    replay_client_table(decode_client_table(encoded), recent.iter().copied(), op)
}

fn decode_client_table(encoded: &[u8]) -> ClientTable {
    if encoded.is_empty() {
        return ClientTable::new();
    }
    // The driver passes only tables that decode (it says so in its log when
    // one does not); should one not, the table is rebuilt from the log, as
    // before tables were persisted.
    ClientTable::decode(encoded).unwrap_or_default()
}

fn replay_client_table(
    mut table: ClientTable,
    headers: impl Iterator<Item = PrepareHeader>,
    commit: u64,
) -> ClientTable {
    for header in headers.filter(|header| header.op.get() <= commit) {
        let (result, body) = reply_from_header(&header);
        table.commit(&header, result, body);
    }
    table.applied_through(commit);
    table
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
        assert_eq!(table.lookup(7, 2, Some(2)), Lookup::New);
        table.commit(
            &committed(1, 7, 1),
            ResultCode::Ok,
            Bytes::from_static(b"r1"),
        );
        assert!(matches!(table.lookup(7, 1, None), Lookup::Committed(reply) if reply.body == "r1"));
        assert_eq!(table.lookup(7, 2, None), Lookup::New);
        assert_eq!(table.lookup(7, 3, None), Lookup::OutOfOrder { expected: 2 });
        assert_eq!(table.lookup(7, 3, Some(3)), Lookup::New);
    }

    /// A produce reply for `records` records at `offset_base`.
    fn produced(offset_base: u64, records: u32) -> Bytes {
        let reply = ProduceReply {
            offset_base,
            record_count: records,
        };
        Bytes::from(reply.to_vec())
    }

    #[test]
    fn a_sequenced_client_numbers_its_produces_by_record() {
        let client = strand_wire::sequenced::sequenced_client(9);
        let mut table = ClientTable::new();
        assert_eq!(table.lookup(client, 1, None), Lookup::New);
        // Records 1..=5 in flight: the next batch starts at 6.
        assert_eq!(table.lookup(client, 6, Some(6)), Lookup::New);
        assert_eq!(
            table.lookup(client, 2, Some(6)),
            Lookup::OutOfOrder { expected: 6 }
        );
        table.commit(&committed(1, client, 1), ResultCode::Ok, produced(0, 5));
        table.commit(&committed(2, client, 6), ResultCode::Ok, produced(5, 3));
        // A retry of either batch is answered with its own offsets.
        assert!(
            matches!(table.lookup(client, 1, None), Lookup::Committed(reply) if reply.body == produced(0, 5))
        );
        assert!(
            matches!(table.lookup(client, 6, None), Lookup::Committed(reply) if reply.body == produced(5, 3))
        );
        // A batch starting inside one committed, or past the next, is out of order.
        assert_eq!(
            table.lookup(client, 7, None),
            Lookup::OutOfOrder { expected: 9 }
        );
        assert_eq!(
            table.lookup(client, 10, None),
            Lookup::OutOfOrder { expected: 9 }
        );
        assert_eq!(table.lookup(client, 9, None), Lookup::New);
        // An ordinary client's produce takes one number, records or not.
        table.commit(&committed(3, 77, 1), ResultCode::Ok, produced(8, 4));
        assert_eq!(table.lookup(77, 2, None), Lookup::New);
        assert_eq!(
            table.lookup(77, 5, None),
            Lookup::OutOfOrder { expected: 2 }
        );
    }

    #[test]
    fn a_sequenced_clients_table_reads_back_the_same() {
        let client = strand_wire::sequenced::sequenced_client(9);
        let mut table = ClientTable::new();
        table.commit(&committed(1, client, 1), ResultCode::Ok, produced(0, 5));
        let decoded = ClientTable::decode(&table.encode()).expect("decodes");
        assert_eq!(decoded.lookup(client, 6, None), Lookup::New);
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

    #[test]
    fn the_table_round_trips_through_its_encoding() {
        let mut table = ClientTable::new();
        let mut op = 0;
        for client in 1..=(CLIENTS_MAX as u128 + 3) {
            op += 1;
            table.commit(
                &committed(op, client, 1),
                ResultCode::Ok,
                Bytes::from(vec![op as u8; 12]),
            );
        }
        for request in 2..=40 {
            op += 1;
            table.commit(&committed(op, 5_000, request), ResultCode::Ok, Bytes::new());
        }
        let decoded = ClientTable::decode(&table.encode()).expect("decodes");
        assert_eq!(decoded, table);
        assert_eq!(decoded.through(), op);
        assert_eq!(
            decoded.lookup(1, 2, None),
            Lookup::Evicted,
            "evictions kept"
        );
    }

    #[test]
    fn ops_at_or_below_the_restored_point_are_not_applied_again() {
        let mut table = ClientTable::new();
        table.commit(&committed(1, 9, 1), ResultCode::Ok, Bytes::new());
        table.commit(&committed(2, 9, 2), ResultCode::Ok, Bytes::new());
        let mut restored = ClientTable::decode(&table.encode()).expect("decodes");
        // A replica whose persisted commit was op 1 replays ops 2 and 3.
        restored.commit(&committed(2, 9, 2), ResultCode::Ok, Bytes::new());
        restored.commit(&committed(3, 9, 3), ResultCode::Ok, Bytes::new());
        table.commit(&committed(3, 9, 3), ResultCode::Ok, Bytes::new());
        assert_eq!(restored, table);
    }

    #[test]
    fn bytes_that_are_no_table_are_refused() {
        let mut table = ClientTable::new();
        table.commit(
            &committed(1, 9, 1),
            ResultCode::Ok,
            Bytes::from_static(b"r"),
        );
        table.commit(
            &committed(2, 9, 2),
            ResultCode::Ok,
            Bytes::from_static(b"s"),
        );
        let bytes = table.encode();
        for len in 0..bytes.len() {
            assert!(ClientTable::decode(&bytes[..len]).is_err(), "cut at {len}");
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(ClientTable::decode(&trailing).is_err());
        // The two replies swapped: out of order.
        let reply = REPLY_BYTES_MIN + 1;
        let first = bytes.len() - 4 - 2 * reply;
        let mut swapped = bytes[..first].to_vec();
        swapped.extend_from_slice(&bytes[first + reply..first + 2 * reply]);
        swapped.extend_from_slice(&bytes[first..first + reply]);
        assert_ne!(swapped, bytes);
        swapped.extend_from_slice(&bytes[bytes.len() - 4..]);
        assert_eq!(swapped.len(), bytes.len());
        assert!(
            ClientTable::decode(&swapped).is_err(),
            "replies out of order"
        );
    }
}
