//! One client's session with one group: request numbering, the in-flight
//! window, and what every reply, timeout and lost connection does to them.
//!
//! Pure: no I/O, no clock (`now_ms` is passed in), randomness only from the
//! seeded generator it owns. The driver feeds it events and carries out the
//! [`Action`]s it pushes.
//!
//! # The rules (checked by [`Session::check_invariants`] after every step)
//!
//! The group's client table takes a client's request numbers in order, from
//! 1, without gaps, and answers a repeated number from its table. So:
//!
//! 1. A `(client, request)` pair, once transmitted, always carries the same
//!    batch. Only requests that were never transmitted are ever renumbered.
//! 2. Requests leave in submission order: a request is transmitted only when
//!    every earlier pending request has been transmitted on the same
//!    connection under the same client id. Transmitted requests are therefore
//!    a prefix of the pending queue.
//! 3. A number the group will never take (a request refused before it was
//!    prepared, `op == 0`) would leave a gap: every pending request after it
//!    moves to a fresh client id, numbered from 1. Likewise when the session
//!    is evicted, when the group keeps expecting a number it already
//!    answered (it forgot committed requests: accepted loss), or when a sent
//!    request's deadline passes.
//! 4. At most two client ids are pending at once: an old one, whose requests
//!    were all transmitted, ahead of the current one, whose requests wait
//!    until the old ones are answered (so order holds across the switch).
//! 5. The window spans at most `window_max` numbers (the group remembers the
//!    last 32 replies per client, so a retry of the oldest is still answered).

use std::collections::VecDeque;

use bytes::Bytes;
use strand_wire::Operation;
use strand_wire::ResultCode;
use strand_wire::ops::ErrorBody;

use crate::backoff::{Backoff, Prng};
use crate::error::ClientError;
use crate::frames::{ConnectionId, Reply, ReplyBody};

/// Most requests in flight per group: the number of replies the group's
/// client table remembers per client.
pub const WINDOW_MAX: usize = 32;

/// The longest an attempt resent on a connection that keeps committing waits,
/// as a multiple of the attempt timeout.
pub const RESEND_BACKOFF_MAX: u64 = 8;

/// Longest wait a `Busy` reply can impose; longer hints are clamped.
pub const BUSY_RETRY_AFTER_MS_MAX: u64 = 1_000;

/// Backed-off retries after which a group that keeps expecting a request
/// number this client already had answered is taken to have forgotten the
/// client (an operator accepted the loss of committed ops), not to be a
/// stale node that will catch up.
pub const FORGOTTEN_AFTER_RETRIES: u32 = 3;

/// Identifies the caller waiting for a request (the driver's completion slot).
pub type Token = u64;

/// How a session retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionConfig {
    /// Most requests in flight (and the widest span of numbers), 1 to [`WINDOW_MAX`].
    pub window_max: usize,
    /// Backoff for `Unavailable`, `UnknownGroup` and repeated redirects.
    pub backoff: Backoff,
}

/// A replicated request handed to the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    /// Who waits for the answer.
    pub token: Token,
    /// `Produce`, `CreateStream` or `CreateTopic`.
    pub operation: Operation,
    /// The request body (sent unchanged on every attempt).
    pub body: Bytes,
    /// When it was submitted (session clock, ms).
    pub submitted_ms: u64,
    /// When the caller stops waiting (session clock, ms).
    pub deadline_ms: u64,
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send this request on the connection `poll_transmit` was given.
    Transmit {
        /// Who waits for it.
        token: Token,
        /// Client id for the header.
        client: u128,
        /// Request number for the header.
        request: u64,
        /// Operation for the header.
        operation: Operation,
        /// The body.
        body: Bytes,
    },
    /// The request is finished: hand the outcome to its caller.
    Complete {
        /// Who waits for it.
        token: Token,
        /// The reply body on success, or why it failed.
        outcome: Result<Bytes, ClientError>,
    },
    /// A replica named the group's primary: update routing.
    Redirect {
        /// The view the replica knows.
        view: u32,
        /// The primary's replica index.
        primary_replica: u8,
        /// The primary's node id.
        primary_node: u32,
        /// The primary's client address, or empty.
        address: String,
    },
    /// Routing looks stale: fetch metadata again.
    RefreshRouting,
    /// An attempt went unanswered: close this connection (its requests are
    /// resent after reconnecting).
    SuspectConnection {
        /// The connection.
        connection: ConnectionId,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Ready to be (re)transmitted, in order.
    Queued,
    /// Waiting out a backoff or a `Busy` hint.
    Delayed { until_ms: u64 },
    /// On the wire, on `connection`, since `sent_at_ms`; suspected once
    /// `timeout_ms` passes after `progress_ms` with no answer.
    Sent {
        connection: ConnectionId,
        sent_at_ms: u64,
        /// The later of the send and the last answer this session had on
        /// `connection`: the attempt clock runs from here, so a request
        /// queued behind others that the node is answering is not taken for
        /// one a silent node lost (RFC 6298 5.3: an ack restarts the timer).
        progress_ms: u64,
        timeout_ms: u64,
    },
}

#[derive(Debug, Clone)]
struct Pending {
    token: Token,
    operation: Operation,
    body: Bytes,
    submitted_ms: u64,
    deadline_ms: u64,
    client: u128,
    request: u64,
    /// Whether `(client, request)` has ever been sent.
    transmitted: bool,
    state: State,
    /// Backoff retries so far (Unavailable, UnknownGroup, disagreements).
    retries: u32,
    /// Attempts that went unanswered while their connection kept committing
    /// others: each one doubles the next attempt's timeout (up to
    /// [`RESEND_BACKOFF_MAX`] times the base), and a reply to a request
    /// sent more than once on one connection is no latency sample (Karn's
    /// rule: it may answer either attempt).
    resends: u32,
    /// NotPrimary answers so far.
    redirects: u32,
    /// The current attempt left before this session saw the group take any
    /// request of `client`: an "unknown client" answer to it may predate the
    /// group's table for the id (see [`Session::on_session_evicted`]).
    sent_before_table: bool,
}

/// One client's session with one group.
#[derive(Debug)]
pub struct Session {
    group: u64,
    config: SessionConfig,
    prng: Prng,
    client: u128,
    next_request: u64,
    /// Numbered requests, in submission order.
    pending: VecDeque<Pending>,
    /// Submitted requests waiting for room in the window (not numbered yet).
    backlog: VecDeque<Submission>,
    /// The newest client id the group is known to have taken a request of
    /// (it answered one `Ok`), so it holds a table for it.
    confirmed_client: Option<u128>,
}

impl Session {
    /// A session with `group`, its client ids (and jitter) drawn from `prng`.
    pub fn new(group: u64, config: SessionConfig, mut prng: Prng) -> Session {
        assert!(
            (1..=WINDOW_MAX).contains(&config.window_max),
            "window_max {} not in 1..={WINDOW_MAX}",
            config.window_max
        );
        let client = prng.client_id();
        Session {
            group,
            config,
            prng,
            client,
            next_request: 1,
            pending: VecDeque::new(),
            backlog: VecDeque::new(),
            confirmed_client: None,
        }
    }

    /// The group this session talks to.
    pub fn group(&self) -> u64 {
        self.group
    }

    /// The client id new requests are numbered under.
    pub fn client(&self) -> u128 {
        self.client
    }

    /// True when nothing is pending or waiting.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.backlog.is_empty()
    }

    /// Queues a request; it is numbered when the window has room.
    pub fn submit(&mut self, submission: Submission) {
        assert!(
            submission.operation.info().replicated,
            "{:?} is not replicated",
            submission.operation
        );
        assert!(submission.deadline_ms >= submission.submitted_ms);
        self.backlog.push_back(submission);
    }

    /// Admits what the window allows and transmits, in order, every request
    /// that may go out now on `connection` (the group's current route); each
    /// attempt may go `attempt_timeout_ms` unanswered before it is resent.
    pub fn poll_transmit(
        &mut self,
        now_ms: u64,
        connection: ConnectionId,
        attempt_timeout_ms: u64,
        actions: &mut Vec<Action>,
    ) {
        assert!(attempt_timeout_ms >= 1, "attempt timeout of 0 ms");
        self.admit_backlog();
        let Some(head_client) = self.pending.front().map(|pending| pending.client) else {
            return;
        };
        let confirmed = self.confirmed_client;
        for pending in self.pending.iter_mut() {
            if pending.client != head_client {
                break; // rule 4: the current id waits for the old one to drain
            }
            match pending.state {
                State::Sent {
                    connection: sent_on,
                    ..
                } if sent_on == connection => continue,
                State::Sent { .. } | State::Delayed { .. } => break,
                State::Queued => {
                    let backoff = (1u64 << pending.resends.min(3)).min(RESEND_BACKOFF_MAX);
                    pending.state = State::Sent {
                        connection,
                        sent_at_ms: now_ms,
                        progress_ms: now_ms,
                        timeout_ms: attempt_timeout_ms * backoff
                            + crate::safety::node_check_wait_ms(pending.operation),
                    };
                    pending.transmitted = true;
                    pending.sent_before_table = confirmed != Some(pending.client);
                    actions.push(Action::Transmit {
                        token: pending.token,
                        client: pending.client,
                        request: pending.request,
                        operation: pending.operation,
                        body: pending.body.clone(),
                    });
                }
            }
        }
        self.check_invariants();
    }

    /// Applies a reply addressed to this session. Returns the round trip of
    /// the attempt it answers (ms), when it answers the one in flight.
    pub fn on_reply(
        &mut self,
        reply: Reply,
        now_ms: u64,
        actions: &mut Vec<Action>,
    ) -> Option<u64> {
        assert_eq!(reply.group, self.group, "reply routed to the wrong session");
        let Some(index) = self.position(reply.client, reply.request) else {
            return None; // answered already, or renumbered since: stale
        };
        let round_trip_ms = match self.pending[index].state {
            State::Sent {
                connection,
                sent_at_ms,
                ..
            } if connection == reply.connection => Some(now_ms.saturating_sub(sent_at_ms)),
            _ => None,
        };
        let current_attempt = round_trip_ms.is_some();
        let resent_before = self.pending[index].resends;
        match reply.body {
            ReplyBody::Ok(body) => {
                self.confirmed_client = Some(reply.client);
                if current_attempt {
                    self.on_progress(reply.connection, now_ms);
                }
                self.complete(index, Ok(body), actions)
            }
            ReplyBody::Malformed(reason) => {
                let error = ClientError::Protocol { reason };
                self.fail(index, reply.op, error, actions);
            }
            ReplyBody::Error(error) => {
                self.on_error(index, reply.op, error, current_attempt, now_ms, actions);
            }
        }
        self.check_invariants();
        round_trip_ms.filter(|_| resent_before == 0)
    }

    fn on_error(
        &mut self,
        index: usize,
        op: u64,
        error: ErrorBody,
        current_attempt: bool,
        now_ms: u64,
        actions: &mut Vec<Action>,
    ) {
        if op != 0 {
            // Committed with this result (a metadata op refused by the
            // catalog: unknown group, or retry later): the group answers
            // every retry of this number from its table, so it is final.
            let operation = self.pending[index].operation;
            let error = ClientError::from_error_body(operation, error);
            return self.fail(index, op, error, actions);
        }
        if is_retriable(&error) && !current_attempt {
            return; // about an attempt already superseded; the newer one will answer
        }
        match error {
            ErrorBody::NotPrimary {
                view,
                primary_replica,
                primary_node,
                address,
            } => {
                actions.push(Action::Redirect {
                    view,
                    primary_replica,
                    primary_node,
                    address,
                });
                self.on_redirect(index, now_ms, actions);
            }
            ErrorBody::Busy { retry_after_ms } => self.on_busy(index, retry_after_ms, now_ms),
            ErrorBody::OutOfOrder { expected } => {
                self.on_out_of_order(index, expected, now_ms, actions)
            }
            ErrorBody::Message {
                code: ResultCode::Unavailable | ResultCode::UnknownGroup,
                ..
            } => {
                self.back_off(index, now_ms);
                actions.push(Action::RefreshRouting);
            }
            ErrorBody::Message {
                code: ResultCode::SessionEvicted,
                message,
            } => self.on_session_evicted(index, message, now_ms, actions),
            error => {
                let operation = self.pending[index].operation;
                self.fail(
                    index,
                    op,
                    ClientError::from_error_body(operation, error),
                    actions,
                );
            }
        }
    }

    /// Busy: the same number goes again once the group's hint has passed
    /// (bounded by [`BUSY_RETRY_AFTER_MS_MAX`]).
    fn on_busy(&mut self, index: usize, retry_after_ms: u32, now_ms: u64) {
        let wait_ms = u64::from(retry_after_ms).clamp(1, BUSY_RETRY_AFTER_MS_MAX);
        self.pending[index].state = State::Delayed {
            until_ms: now_ms + wait_ms,
        };
    }

    /// NotPrimary: resend at once after the first redirect, then back off
    /// (replicas disagree on the view while it changes).
    fn on_redirect(&mut self, index: usize, now_ms: u64, actions: &mut Vec<Action>) {
        let pending = &mut self.pending[index];
        pending.redirects += 1;
        if pending.redirects == 1 {
            pending.state = State::Queued;
        } else {
            self.back_off(index, now_ms);
            actions.push(Action::RefreshRouting);
        }
    }

    /// OutOfOrder: the group waits for `expected`. If that is one of ours,
    /// resend this request after it (rule 2 keeps the order); otherwise our
    /// picture and the group's disagree (a stale node, a lost reply): ask
    /// again after a backoff.
    fn on_out_of_order(
        &mut self,
        index: usize,
        expected: u64,
        now_ms: u64,
        actions: &mut Vec<Action>,
    ) {
        let pending = &self.pending[index];
        let expected_is_ours_and_earlier =
            expected < pending.request && self.position(pending.client, expected).is_some();
        // The group waits for a number this client already had answered: a
        // stale node says that for a moment, a group that accepted the loss
        // of committed ops says it for good.
        let forgotten = expected < pending.request
            && !expected_is_ours_and_earlier
            && pending.retries >= FORGOTTEN_AFTER_RETRIES;
        if expected_is_ours_and_earlier {
            self.pending[index].state = State::Queued;
        } else if forgotten {
            let reason = format!(
                "the group forgot committed requests of this client (it expects request \
                 {expected}, answered before): an operator accepted the loss of records"
            );
            self.forget_client(index, &reason, actions);
        } else {
            self.back_off(index, now_ms);
        }
    }

    /// SessionEvicted: the group does not know this client id. If request 1
    /// of that id is still unanswered the group simply has not taken it yet
    /// (it was refused `Busy`, say): resend in order. Likewise if this
    /// attempt left before the session saw the group take any request of the
    /// id: the answer may predate the table (request 1 reached the group
    /// after it, around a failover); resending is safe, as the group never
    /// takes a number above 1 from an id it does not know, and a second
    /// "unknown client" to an attempt sent after that is a real eviction.
    /// Otherwise the group forgot requests it had committed: every
    /// transmitted request of that id may or may not have been applied, and
    /// the rest move to a fresh id.
    fn on_session_evicted(
        &mut self,
        index: usize,
        message: String,
        now_ms: u64,
        actions: &mut Vec<Action>,
    ) {
        let client = self.pending[index].client;
        if self.position(client, 1).is_some() {
            self.on_out_of_order(index, 1, now_ms, actions);
            return;
        }
        if self.pending[index].sent_before_table {
            self.back_off(index, now_ms);
            return;
        }
        let reason = format!("the group evicted this client's session ({message})");
        self.forget_client(index, &reason, actions);
    }

    /// The group forgot requests of this pending request's client id that it
    /// had committed: every transmitted request of that id may or may not
    /// have been applied (outcome unknown), and the rest move to a fresh id.
    fn forget_client(&mut self, index: usize, reason: &str, actions: &mut Vec<Action>) {
        let client = self.pending[index].client;
        let first = self
            .pending
            .iter()
            .position(|pending| pending.client == client)
            .expect("the evicted request is pending");
        while first < self.pending.len()
            && self.pending[first].client == client
            && self.pending[first].transmitted
        {
            self.fail_unknown(first, reason, actions);
        }
        if client == self.client {
            self.move_to_fresh_client(first);
        }
    }

    /// Ends a request with a terminal error. If it was refused before being
    /// prepared (`op == 0`) its number will never be taken: rule 3.
    fn fail(&mut self, index: usize, op: u64, error: ClientError, actions: &mut Vec<Action>) {
        let client = self.pending[index].client;
        self.complete(index, Err(error), actions);
        if op != 0 {
            return; // committed with this result: the number is used up, no gap
        }
        let later_under_same_client = self
            .pending
            .iter()
            .skip(index)
            .any(|pending| pending.client == client);
        if client == self.client || later_under_same_client {
            self.move_to_fresh_client(index);
        }
    }

    /// Ends pending `index` as outcome unknown.
    fn fail_unknown(&mut self, index: usize, reason: &str, actions: &mut Vec<Action>) {
        let operation = self.pending[index].operation;
        let error = ClientError::OutcomeUnknown {
            operation,
            reason: reason.to_owned(),
        };
        self.complete(index, Err(error), actions);
    }

    fn complete(
        &mut self,
        index: usize,
        outcome: Result<Bytes, ClientError>,
        actions: &mut Vec<Action>,
    ) {
        let pending = self.pending.remove(index).expect("index is pending");
        actions.push(Action::Complete {
            token: pending.token,
            outcome,
        });
    }

    fn back_off(&mut self, index: usize, now_ms: u64) {
        let retries = self.pending[index].retries;
        let delay_ms = self.config.backoff.delay_ms(retries, &mut self.prng);
        let pending = &mut self.pending[index];
        pending.retries += 1;
        pending.state = State::Delayed {
            until_ms: now_ms + delay_ms,
        };
    }

    /// The group took a request this session sent on `connection`: the node
    /// behind it is alive and working through the pipeline, so every attempt
    /// still waiting there starts its clock again. Only a success counts: an
    /// error (out of order, busy, not primary) may come from a live node that
    /// will never take the request waiting, and must not keep it waiting.
    fn on_progress(&mut self, connection: ConnectionId, now_ms: u64) {
        for pending in self.pending.iter_mut() {
            if let State::Sent {
                connection: sent_on,
                progress_ms,
                ..
            } = &mut pending.state
                && *sent_on == connection
            {
                *progress_ms = (*progress_ms).max(now_ms);
            }
        }
    }

    /// Requests sent on a connection that is gone go back to the queue.
    pub fn on_connection_lost(&mut self, connection: ConnectionId) {
        for pending in self.pending.iter_mut() {
            if matches!(pending.state, State::Sent { connection: sent_on, .. } if sent_on == connection)
            {
                pending.state = State::Queued;
            }
        }
        self.check_invariants();
    }

    /// Time passes: unanswered attempts time out, delays end, deadlines pass.
    ///
    /// `committed_ms` tells when a connection last carried a committed
    /// answer (to any session's request). An attempt that times out on a
    /// connection that committed others within the attempt's timeout is
    /// resent on its route, with a longer timeout: the node behind it is
    /// alive, reaches its peers, and works through its queue (a node hosting
    /// thousands of groups answers a quiet group's request behind the busy
    /// ones), while closing the connection would resend every request of
    /// every group on it. An attempt on a connection that committed nothing
    /// for a whole timeout suspects the connection, as before: its requests
    /// go again once it is replaced.
    pub fn on_tick(
        &mut self,
        now_ms: u64,
        committed_ms: impl Fn(ConnectionId) -> Option<u64>,
        actions: &mut Vec<Action>,
    ) {
        let mut suspects: Vec<ConnectionId> = Vec::new();
        for pending in self.pending.iter_mut() {
            match pending.state {
                State::Sent {
                    connection,
                    progress_ms,
                    timeout_ms,
                    ..
                } if progress_ms + timeout_ms <= now_ms => {
                    pending.state = State::Queued;
                    let committing = committed_ms(connection)
                        .is_some_and(|committed| committed + timeout_ms > now_ms);
                    if committing {
                        pending.resends += 1;
                    } else if !suspects.contains(&connection) {
                        suspects.push(connection);
                    }
                }
                State::Delayed { until_ms } if until_ms <= now_ms => pending.state = State::Queued,
                _ => {}
            }
        }
        actions.extend(
            suspects
                .into_iter()
                .map(|connection| Action::SuspectConnection { connection }),
        );
        while let Some(index) = self
            .pending
            .iter()
            .position(|pending| pending.deadline_ms <= now_ms)
        {
            self.expire(index, actions);
        }
        while let Some(index) = self
            .backlog
            .iter()
            .position(|waiting| waiting.deadline_ms <= now_ms)
        {
            let waiting = self.backlog.remove(index).expect("index is in the backlog");
            actions.push(Action::Complete {
                token: waiting.token,
                outcome: Err(deadline_error(
                    waiting.operation,
                    waiting.deadline_ms - waiting.submitted_ms,
                )),
            });
        }
        self.check_invariants();
    }

    /// A pending request's deadline passed.
    ///
    /// Never transmitted: it was not applied; the later requests (also never
    /// transmitted) close the gap by taking its number and the ones after.
    /// Transmitted: it and every later transmitted request of its client may
    /// or may not be applied; the rest move to a fresh client id.
    fn expire(&mut self, index: usize, actions: &mut Vec<Action>) {
        let pending = &self.pending[index];
        let (client, request, operation) = (pending.client, pending.request, pending.operation);
        if !pending.transmitted {
            assert_eq!(
                client, self.client,
                "an old client id has an untransmitted request"
            );
            let waited_ms = pending.deadline_ms - pending.submitted_ms;
            self.complete(index, Err(deadline_error(operation, waited_ms)), actions);
            self.renumber_from(index, client, request);
            return;
        }
        let reason = "no answer before the deadline";
        self.fail_unknown(index, reason, actions);
        while index < self.pending.len()
            && self.pending[index].client == client
            && self.pending[index].transmitted
        {
            self.fail_unknown(index, reason, actions);
        }
        if client == self.client {
            self.move_to_fresh_client(index);
        }
    }

    /// Rule 3: pending `from..` move to a fresh client id, numbered from 1.
    fn move_to_fresh_client(&mut self, from: usize) {
        let fresh = self.prng.client_id();
        self.renumber_from(from, fresh, 1);
    }

    /// Renumbers pending `from..` under `client` from `first_request`, makes
    /// that client current, and forgets the old attempts (rule 1 allows it:
    /// the old numbers can never be taken, or were never sent).
    fn renumber_from(&mut self, from: usize, client: u128, first_request: u64) {
        let mut request = first_request;
        for pending in self.pending.iter_mut().skip(from) {
            pending.client = client;
            pending.request = request;
            pending.transmitted = false;
            if matches!(pending.state, State::Sent { .. }) {
                pending.state = State::Queued;
            }
            request += 1;
        }
        self.client = client;
        self.next_request = request;
    }

    fn admit_backlog(&mut self) {
        while !self.backlog.is_empty() && self.window_has_room() {
            let submission = self.backlog.pop_front().expect("backlog is not empty");
            let request = self.next_request;
            self.next_request += 1;
            self.pending.push_back(Pending {
                token: submission.token,
                operation: submission.operation,
                body: submission.body,
                submitted_ms: submission.submitted_ms,
                deadline_ms: submission.deadline_ms,
                client: self.client,
                request,
                transmitted: false,
                state: State::Queued,
                retries: 0,
                resends: 0,
                redirects: 0,
                sent_before_table: true,
            });
        }
    }

    fn window_has_room(&self) -> bool {
        let oldest = self
            .pending
            .iter()
            .find(|pending| pending.client == self.client)
            .map_or(self.next_request, |pending| pending.request);
        self.pending.len() < self.config.window_max
            && self.next_request - oldest < self.config.window_max as u64
    }

    fn position(&self, client: u128, request: u64) -> Option<usize> {
        self.pending
            .iter()
            .position(|pending| pending.client == client && pending.request == request)
    }

    /// When the session next needs `on_tick`: an attempt timeout, a delay
    /// ending, or a deadline.
    pub fn next_wakeup_ms(&self) -> Option<u64> {
        let pending = self.pending.iter().flat_map(|pending| {
            let state = match pending.state {
                State::Queued => None,
                State::Delayed { until_ms } => Some(until_ms),
                State::Sent {
                    progress_ms,
                    timeout_ms,
                    ..
                } => Some(progress_ms + timeout_ms),
            };
            state.into_iter().chain(Some(pending.deadline_ms))
        });
        let waiting = self.backlog.iter().map(|waiting| waiting.deadline_ms);
        pending.chain(waiting).min()
    }

    /// True when a request waits to be transmitted (the driver then needs a
    /// route for the group).
    pub fn wants_transmit(&self) -> bool {
        !self.backlog.is_empty()
            || self
                .pending
                .iter()
                .any(|pending| pending.state == State::Queued)
    }

    /// Checks the rules in the module header; a failure is a bug in this file.
    pub fn check_invariants(&self) {
        let mut seen_untransmitted = false;
        let mut clients: Vec<u128> = Vec::new();
        let mut last: Option<(u128, u64)> = None;
        for pending in &self.pending {
            // Rule 2: transmitted requests are a prefix.
            assert!(
                !(seen_untransmitted && pending.transmitted),
                "a transmitted request follows an untransmitted one: {self:?}"
            );
            seen_untransmitted |= !pending.transmitted;
            assert!(
                pending.transmitted || !matches!(pending.state, State::Sent { .. }),
                "a request is sent but not marked transmitted"
            );
            // Rule 4: at most two ids, the old one first and fully transmitted.
            if clients.last() != Some(&pending.client) {
                clients.push(pending.client);
            }
            // Numbers rise within a client id.
            if let Some((client, request)) = last {
                if client == pending.client {
                    assert!(pending.request > request, "numbers out of order: {self:?}");
                }
            }
            last = Some((pending.client, pending.request));
            assert!(pending.request >= 1);
        }
        assert!(
            clients.len() <= 2,
            "more than two client ids pending: {self:?}"
        );
        if clients.len() == 2 {
            assert_eq!(
                clients[1], self.client,
                "the second id is not the current one"
            );
            assert!(
                self.pending
                    .iter()
                    .filter(|pending| pending.client == clients[0])
                    .all(|pending| pending.transmitted),
                "an old client id has untransmitted requests"
            );
        }
        for pending in self
            .pending
            .iter()
            .filter(|pending| pending.client == self.client)
        {
            assert!(pending.request < self.next_request);
            // Rule 5.
            assert!(self.next_request - pending.request <= self.config.window_max as u64);
        }
        assert!(self.pending.len() <= self.config.window_max);
    }
}

fn deadline_error(operation: Operation, deadline_ms: u64) -> ClientError {
    ClientError::Timeout {
        operation,
        deadline_ms,
    }
}

/// Whether `error` asks for the same number again (elsewhere, later or
/// after others): such an answer about an attempt already superseded is
/// ignored, since the newer attempt will be answered.
fn is_retriable(error: &ErrorBody) -> bool {
    matches!(
        error,
        ErrorBody::NotPrimary { .. } | ErrorBody::Busy { .. } | ErrorBody::OutOfOrder { .. }
    ) || matches!(
        error,
        ErrorBody::Message {
            code: ResultCode::Unavailable | ResultCode::UnknownGroup | ResultCode::SessionEvicted,
            ..
        }
    )
}

#[cfg(test)]
mod tests;
