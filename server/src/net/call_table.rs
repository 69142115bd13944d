//! The table of a node's own calls in flight (see [`crate::net::node_calls`]):
//! the answers awaited, matched by client id and request number, and the
//! client sessions the calls go under. It holds no handle to the node, so
//! the node's shared state can hold it and route answers into it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use bytes::{Bytes, BytesMut};
use strand_wire::{FrameDecoder, Message, Msg, ReplyHeader};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::metrics;

/// Calls awaiting their answers at most: a node makes a handful at a time
/// (one per epoch report, expired member, or node asked before a move).
pub const CALLS_PENDING_MAX: usize = 1024;

/// Why a call has no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The group is not hosted on the node called, or its inbox is full.
    #[error("group {group} cannot take the call here: {reason}")]
    GroupRefused {
        /// The group called.
        group: u64,
        /// Why.
        reason: &'static str,
    },
    /// The bus queue to the node is full, or the node is not a peer.
    #[error("node {0} cannot be reached on the replica bus")]
    Unreachable(u32),
    /// No answer within the call's timeout.
    #[error("no answer within {0} ms")]
    TimedOut(u64),
    /// Too many calls await answers already ([`CALLS_PENDING_MAX`]).
    #[error("too many calls await answers")]
    TooMany,
}

/// A client session for calls a group's client table keeps (the
/// replicated proposals): its own client id, and request numbers that
/// follow one another. One task uses it, one call at a time.
///
/// A call that ends without its committed answer (no answer, a refusal
/// from a node that is not the primary) leaves the session's next request
/// in doubt: the session is [`renewed`](CallSession::renew), a fresh id
/// starting again at request 1, so that no later call is ever taken for
/// the doubtful one. That is safe because every proposal a node makes is
/// idempotent: one that committed after all, and is made again under the
/// new id, changes nothing the second time.
#[derive(Debug)]
pub struct CallSession {
    client: u128,
    next_request: u64,
}

impl CallSession {
    /// A session under a fresh random client id: a node's previous run
    /// used other ids, so no client table answers its calls with a reply
    /// kept for an earlier run's request of the same number.
    pub fn new() -> CallSession {
        CallSession {
            client: rand::random::<u128>().max(1),
            next_request: 1,
        }
    }

    /// The session's client id.
    pub fn client(&self) -> u128 {
        self.client
    }

    /// The call in doubt is given up: a fresh session takes this one's
    /// place. The old one's client id, whose reply route the node forgets.
    pub fn renew(&mut self) -> u128 {
        let old = self.client;
        *self = CallSession::new();
        old
    }

    /// The request number the next call takes.
    pub fn next_request(&self) -> u64 {
        self.next_request
    }

    /// The last call committed: the next one takes the next number.
    pub fn committed(&mut self) {
        self.next_request += 1;
    }
}

impl Default for CallSession {
    fn default() -> CallSession {
        CallSession::new()
    }
}

/// A call's client id and request number: what its answer carries back.
type CallId = (u128, u64);

/// The node's calls in flight, and the session its questions use (those a
/// node answers itself, which no client table keeps). See the module docs.
pub struct NodeCalls {
    pub(crate) questions: Mutex<CallSession>,
    pub(crate) pending: Mutex<BTreeMap<CallId, oneshot::Sender<Msg<ReplyHeader>>>>,
}

impl Default for NodeCalls {
    fn default() -> NodeCalls {
        NodeCalls {
            questions: Mutex::new(CallSession::new()),
            pending: Mutex::new(BTreeMap::new()),
        }
    }
}

impl NodeCalls {
    /// The client id and request number of the next question (one the
    /// node called answers itself).
    pub fn next_question(&self) -> (u128, u64) {
        let mut session = self.questions.lock().expect("questions lock");
        let request = session.next_request;
        session.committed();
        (session.client, request)
    }

    /// Delivers an answer to the call it answers; an answer to no call in
    /// flight (one that timed out) is counted and dropped.
    pub fn answered(&self, reply: Msg<ReplyHeader>) {
        let header = reply.header();
        let call = self
            .pending
            .lock()
            .expect("pending lock")
            .remove(&(header.client.get(), header.request.get()));
        match call {
            Some(call) => {
                let _ = call.send(reply);
            }
            None => metrics::node_call_answer_unmatched(),
        }
    }

    /// Delivers an encoded answer (a group hosted here replied to a call).
    pub fn answered_frame(&self, frame: Bytes) {
        let mut buffer = BytesMut::from(frame.as_ref());
        match FrameDecoder::new(u32::MAX).decode(&mut buffer) {
            Ok(Some(Message::Reply(reply))) => self.answered(reply),
            other => {
                tracing::error!(?other, "node calls: a local answer that is not a reply");
                metrics::node_call_answer_unmatched();
            }
        }
    }

    /// Registers call `(client, request)`: its answer will come out of the
    /// receiver. `TooMany` past [`CALLS_PENDING_MAX`].
    pub fn await_answer(
        &self,
        client: u128,
        request: u64,
    ) -> Result<oneshot::Receiver<Msg<ReplyHeader>>, CallError> {
        let mut pending = self.pending.lock().expect("pending lock");
        if pending.len() >= CALLS_PENDING_MAX {
            return Err(CallError::TooMany);
        }
        let (answer, answered) = oneshot::channel();
        let previous = pending.insert((client, request), answer);
        assert!(
            previous.is_none(),
            "request {request} of {client:032x} called twice"
        );
        Ok(answered)
    }

    /// Forgets call `(client, request)`: answered, given up or dropped.
    pub fn forget(&self, client: u128, request: u64) {
        self.pending
            .lock()
            .expect("pending lock")
            .remove(&(client, request));
    }
}

/// A call sent, its answer still to come. Dropped unanswered, it is
/// forgotten (a late answer is counted and dropped).
pub struct PendingCall<'calls> {
    pub(crate) calls: &'calls NodeCalls,
    pub(crate) client: u128,
    pub(crate) request: u64,
    pub(crate) answered: oneshot::Receiver<Msg<ReplyHeader>>,
}

impl PendingCall<'_> {
    /// The answer, if it comes before `deadline`.
    pub async fn answer(mut self, deadline: Instant) -> Result<Msg<ReplyHeader>, CallError> {
        let started = Instant::now();
        match tokio::time::timeout_at(deadline, &mut self.answered).await {
            Ok(Ok(answer)) => Ok(answer),
            // Timed out, or the answer's sender was dropped (never, but the
            // same to the caller).
            Ok(Err(_)) | Err(_) => Err(CallError::TimedOut(started.elapsed().as_millis() as u64)),
        }
    }
}

impl Drop for PendingCall<'_> {
    fn drop(&mut self) {
        self.calls.forget(self.client, self.request);
    }
}
