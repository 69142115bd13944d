//! A Kafka connection's link into the node: the Strand operations its
//! requests become, sent through the same door as a client port's
//! requests (body checks, rights under `[auth] required`, client-id
//! ownership, quotas, then [`crate::net::routing`]), and their replies
//! matched back by client id and request number.
//!
//! Numbering. A group's client table takes a client's replicated requests
//! in order, from 1, without gaps. The link keeps one write session per
//! group it produces to (a random client id and its next number), numbers
//! each replicated operation when it is sent, and sends in the order the
//! Kafka requests arrived. A reply other than `Ok` may leave a gap (the
//! group never took that number), so it renews the group's session: the
//! requests already sent behind it are answered `OutOfOrder`, which a
//! Kafka client retries. Reads (fetches, offsets) are not replicated and
//! take numbers from one read session that no client table sees.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use strand_wire::ops::ErrorBody;
use strand_wire::{
    CommandHeader, HEADER_SIZE, Msg, Operation, ReplyHeader, RequestHeader, ResultCode, ViewId,
};
use tokio::sync::oneshot;
use zerocopy::FromBytes;

use crate::kafka::coordinator::Coordinator;
use crate::net::connection::{ConnectionReceiver, ConnectionSender};
use crate::security::auth::Identity;
use crate::security::caller::Caller;
use crate::security::request_checks::{auth_refusal, quota_delay, request_refusal};
use crate::shared::Shared;

/// Strand operations one Kafka connection may have waiting at once: a
/// produce or fetch of many partitions takes one each.
pub const CALLS_PENDING_MAX: usize = 16_384;

/// A Strand answer: its result and body.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The result.
    pub result: ResultCode,
    /// The reply body (an `ErrorBody` unless `Ok`).
    pub body: Bytes,
}

impl Answer {
    /// An answer the link gives itself (a refusal before sending, a lost
    /// reply).
    fn error(error: &ErrorBody) -> Answer {
        Answer {
            result: error.code(),
            body: Bytes::from(error.to_vec()),
        }
    }

    /// A node call's reply.
    pub fn of_reply(reply: &Msg<ReplyHeader>) -> Answer {
        Answer {
            result: ResultCode::from_u16(reply.header().result.get())
                .unwrap_or(ResultCode::Internal),
            body: reply.body().clone(),
        }
    }

    /// The error's message, for a Kafka response that carries one.
    pub fn message(&self) -> Option<String> {
        match self.result {
            ResultCode::Ok => None,
            result => ErrorBody::from_bytes(result, &self.body)
                .ok()
                .map(|error| error.to_string()),
        }
    }
}

/// An operation sent, whose answer is awaited.
pub enum Pending {
    /// Sent: the answer comes from the group (or the node).
    Sent {
        /// The answer.
        answer: oneshot::Receiver<Bytes>,
        /// Where it went: its session is renewed unless it succeeds.
        group: u64,
        /// Its key, to forget it if the wait ends first.
        key: (u128, u64),
    },
    /// Refused before it was sent.
    Refused(Answer),
}

/// The calls awaiting replies, by client id and request number.
type Waiting = Mutex<HashMap<(u128, u64), oneshot::Sender<Bytes>>>;

/// A group's write session: the client id and the number of its next
/// replicated request.
#[derive(Debug, Clone, Copy)]
struct WriteSession {
    client: u128,
    next: u64,
}

/// One Kafka connection's link into the node.
pub struct Link {
    shared: Arc<Shared>,
    sender: ConnectionSender,
    caller: Caller,
    ip: std::net::IpAddr,
    identity: Mutex<Option<Identity>>,
    waiting: Arc<Waiting>,
    writes: Mutex<BTreeMap<u64, WriteSession>>,
    read_client: u128,
    next_read: Mutex<u64>,
    coordinator: Arc<Mutex<Coordinator>>,
}

impl Link {
    /// A link for a connection from `caller`; replies arrive through
    /// `receiver`, drained by a task of its own until the link is dropped.
    pub fn new(
        shared: Arc<Shared>,
        caller: Caller,
        ip: std::net::IpAddr,
        coordinator: Arc<Mutex<Coordinator>>,
    ) -> Arc<Link> {
        let (sender, receiver) =
            crate::net::connection::reply_queue(crate::net::client_port::CONNECTION_QUEUE_CAPACITY);
        let waiting = Arc::new(Mutex::new(HashMap::new()));
        tokio::spawn(match_replies(receiver, Arc::clone(&waiting)));
        Arc::new(Link {
            shared,
            sender,
            caller,
            ip,
            identity: Mutex::new(None),
            waiting,
            writes: Mutex::new(BTreeMap::new()),
            read_client: rand::random(),
            next_read: Mutex::new(0),
            coordinator,
        })
    }

    /// The node's shared state.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The node's Kafka group coordinator.
    pub fn coordinator(&self) -> std::sync::MutexGuard<'_, Coordinator> {
        self.coordinator.lock().expect("coordinator lock")
    }

    /// Where the connection comes from (failed sign-ins are limited per
    /// address).
    pub fn ip(&self) -> std::net::IpAddr {
        self.ip
    }

    /// The connection signed in as `identity`.
    pub fn signed_in(&self, identity: Identity) {
        self.sender.set_user(Some(identity.user.clone()));
        *self.identity.lock().expect("identity lock") = Some(identity);
    }

    /// Whether the connection may send anything but SASL yet.
    pub fn may_proceed(&self) -> bool {
        !self.shared.config.auth.required || self.identity.lock().expect("identity lock").is_some()
    }

    /// Checks and sends `operation` to `group` as this connection's user,
    /// after any quota delay (returned, for the response's
    /// `throttle_time_ms`). Replicated operations are numbered and sent in
    /// the order of the calls.
    pub async fn send(&self, group: u64, operation: Operation, body: Bytes) -> (Pending, Duration) {
        let request = self.request(group, operation, body);
        self.submit(group, request).await
    }

    /// Like [`Link::send`], under the client id and request number given:
    /// an idempotent producer's batch, whose numbers are its producer's
    /// sequence (see `strand_wire::sequenced`).
    pub async fn send_numbered(
        &self,
        group: u64,
        operation: Operation,
        body: Bytes,
        (client, number): (u128, u64),
    ) -> (Pending, Duration) {
        assert!(
            client != 0 && number != 0,
            "a numbered request names its numbers"
        );
        let request = self.header(group, operation, client, number);
        self.submit(group, Msg::new(request, body)).await
    }

    /// Checks `request` as the client port does, then routes it.
    async fn submit(&self, group: u64, request: Msg<RequestHeader>) -> (Pending, Duration) {
        let operation = request.header().operation();
        let identity = self.identity.lock().expect("identity lock").clone();
        if let Err(error) = strand_wire::ops::check_request(operation, request.body()) {
            let message = format!("the {operation:?} body does not decode: {error}");
            let error = ErrorBody::message(ResultCode::InvalidRequest, message);
            return self.refused(group, &error, Duration::ZERO);
        }
        let refusal = auth_refusal(&self.shared, &request, self.caller, identity.as_ref())
            .or_else(|| request_refusal(&self.shared, &request, self.caller, identity.as_ref()));
        if let Some(refusal) = refusal {
            return self.refused(group, &refusal, Duration::ZERO);
        }
        let delay = match &identity {
            Some(identity) => quota_delay(&self.shared, &identity.user, &request),
            None => Duration::ZERO,
        };
        if delay > Duration::ZERO {
            tokio::time::sleep(delay).await;
        }
        let room = crate::net::client_port::wait_for_room(&self.shared, &request).await;
        if room.is_err() {
            let error = ErrorBody::Busy { retry_after_ms: 50 };
            return self.refused(group, &error, delay);
        }
        let header = *request.header();
        let key = (header.client.get(), header.request.get());
        let (answered, answer) = oneshot::channel();
        {
            let mut waiting = self.waiting.lock().expect("waiting lock");
            if waiting.len() >= CALLS_PENDING_MAX {
                drop(waiting);
                let error = ErrorBody::Busy { retry_after_ms: 50 };
                return self.refused(group, &error, delay);
            }
            waiting.insert(key, answered);
        }
        crate::net::routing::handle(&self.shared, request, &self.sender);
        (Pending::Sent { answer, group, key }, delay)
    }

    /// The request frame for `operation`, numbered: replicated operations
    /// in the group's write session, others in the read session.
    fn request(&self, group: u64, operation: Operation, body: Bytes) -> Msg<RequestHeader> {
        let (client, number) = match operation.info().replicated {
            true => {
                let mut writes = self.writes.lock().expect("writes lock");
                let session = writes.entry(group).or_insert_with(|| WriteSession {
                    client: rand::random(),
                    next: 1,
                });
                session.next += 1;
                (session.client, session.next - 1)
            }
            false => {
                let mut next = self.next_read.lock().expect("read lock");
                *next += 1;
                (self.read_client, *next)
            }
        };
        Msg::new(self.header(group, operation, client, number), body)
    }

    /// A request header to `group` from `client`, numbered `number`.
    fn header(&self, group: u64, operation: Operation, client: u128, number: u64) -> RequestHeader {
        let mut header = RequestHeader::new(self.shared.config.cluster, group, ViewId::ZERO, 0);
        header.client.set(client);
        header.request.set(number);
        header.operation = operation as u8;
        header
    }

    /// A refusal before sending; a replicated operation's number is not
    /// taken, so its group's session is renewed.
    fn refused(&self, group: u64, error: &ErrorBody, delay: Duration) -> (Pending, Duration) {
        self.renew(group);
        (Pending::Refused(Answer::error(error)), delay)
    }

    /// Starts `group`'s write session over under a new client id.
    fn renew(&self, group: u64) {
        self.writes.lock().expect("writes lock").remove(&group);
    }

    /// Waits at most `timeout` for `pending`'s answer.
    pub async fn answer(&self, pending: Pending, timeout: Duration) -> Answer {
        let (answer, group, key) = match pending {
            Pending::Refused(answer) => return answer,
            Pending::Sent { answer, group, key } => (answer, group, key),
        };
        let answer = match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(frame)) => parse_answer(&frame),
            Ok(Err(_)) | Err(_) => {
                self.waiting.lock().expect("waiting lock").remove(&key);
                let error = ErrorBody::message(
                    ResultCode::Busy,
                    "no answer in time: the partition may be failing over",
                );
                Answer::error(&error)
            }
        };
        let replicated = self
            .writes
            .lock()
            .expect("writes lock")
            .get(&group)
            .is_some_and(|session| session.client == key.0);
        if answer.result != ResultCode::Ok && replicated {
            self.renew(group);
        }
        answer
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.shared.forget_connection(&self.sender);
    }
}

/// A reply frame's result and body (the node built it: it is whole).
fn parse_answer(frame: &Bytes) -> Answer {
    match ReplyHeader::read_from_prefix(frame) {
        Ok((header, _)) => Answer {
            result: ResultCode::from_u16(header.result.get()).unwrap_or(ResultCode::Internal),
            body: frame.slice(HEADER_SIZE.min(frame.len())..),
        },
        Err(_) => Answer::error(&ErrorBody::message(
            ResultCode::Internal,
            "an answer that is not a reply",
        )),
    }
}

/// Hands each reply frame to the call that waits for it; a reply no call
/// waits for any more is dropped.
async fn match_replies(mut receiver: ConnectionReceiver, waiting: Arc<Waiting>) {
    while let Some(frame) = receiver.frames().recv().await {
        let size = frame.len() as u64;
        if let Ok((header, _)) = ReplyHeader::read_from_prefix(&frame) {
            let key = (header.client.get(), header.request.get());
            let waiter = waiting.lock().expect("waiting lock").remove(&key);
            if let Some(waiter) = waiter {
                let _ = waiter.send(frame);
            }
        }
        receiver.written(size);
    }
}
