//! One non-replicated request (Fetch, GetCursor, StoreCursor, Metadata,
//! ClusterStatus, Attention, AcceptLoss) and its retries. Pure, like
//! [`crate::session`].
//!
//! These requests are not checked against a group's client table, so every
//! attempt may carry a new request number (under the client's separate query
//! id); a late answer to an earlier attempt is still a valid answer. So a
//! question any node can answer (Metadata) is hedged: when one node is slow
//! to answer, the next is asked too, without giving up on the first.

use bytes::Bytes;
use strand_wire::ops::ErrorBody;
use strand_wire::{Operation, ResultCode};

use crate::backoff::{Backoff, Prng};
use crate::error::ClientError;
use crate::frames::{ConnectionId, Reply, ReplyBody};
use crate::session::BUSY_RETRY_AFTER_MS_MAX;

/// Where a query goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum QueryTarget {
    /// Any node (Metadata): moves on to another node when one fails.
    AnyNode,
    /// The primary of this group (Fetch, cursors); follows redirects.
    Group(u64),
    /// Exactly this node's client address (ClusterStatus, Attention,
    /// AcceptLoss): never redirected, fails fast when the node is unreachable.
    Node(String),
}

/// What the driver must do for a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryAction {
    /// The query is over: hand this to its caller.
    Finish(Result<Bytes, ClientError>),
    /// A replica named the group's primary: update routing.
    Redirect {
        /// The group.
        group: u64,
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
    /// The node answering "any node" queries cannot help now: use another.
    NextNode,
    /// An attempt went unanswered: close this connection.
    SuspectConnection(ConnectionId),
    /// A hedged attempt went unanswered for a while: the node is slow or
    /// hung; try it last, but keep the connection for its late answer.
    Silent(ConnectionId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Queued,
    Delayed {
        until_ms: u64,
    },
    Sent {
        connection: ConnectionId,
        request: u64,
        sent_at_ms: u64,
        timeout_ms: u64,
    },
}

/// One query and its retry state.
#[derive(Debug, Clone)]
pub struct Query {
    operation: Operation,
    body: Bytes,
    target: QueryTarget,
    submitted_ms: u64,
    deadline_ms: u64,
    /// Added to every attempt's timeout (a fetch's long-poll wait).
    extra_wait_ms: u64,
    state: State,
    retries: u32,
    redirects: u32,
    /// An answer reflecting an earlier op of its group is stale (another
    /// node has not applied what this client already saw committed).
    commit_min: u64,
}

/// Whether `body` is a move's dry run: a replicated operation in name, but
/// answered by the node that receives it, so it is a query.
fn is_dry_run(operation: Operation, body: &[u8]) -> bool {
    use strand_wire::Body;
    use strand_wire::ops::{DropReplica, ReassignPartition};
    match operation {
        Operation::ReassignPartition => {
            ReassignPartition::from_bytes(body).is_ok_and(|request| request.dry_run)
        }
        Operation::DropReplica => {
            DropReplica::from_bytes(body).is_ok_and(|request| request.dry_run)
        }
        _ => false,
    }
}

impl Query {
    /// A query, ready to send; it gives up `deadline_ms` from now, and each
    /// attempt waits `extra_wait_ms` on top of its timeout (a long poll).
    pub fn new(
        operation: Operation,
        body: Bytes,
        target: QueryTarget,
        now_ms: u64,
        deadline_ms: u64,
        extra_wait_ms: u64,
    ) -> Query {
        assert!(
            !operation.info().replicated || is_dry_run(operation, &body),
            "{operation:?} goes through a session"
        );
        Query {
            operation,
            body,
            target,
            submitted_ms: now_ms,
            deadline_ms: now_ms.saturating_add(deadline_ms),
            extra_wait_ms,
            state: State::Queued,
            retries: 0,
            redirects: 0,
            commit_min: 0,
        }
    }

    /// Answers must reflect at least op `commit` of the group (read your
    /// writes: a metadata answer from a node that has not applied the topic
    /// this client just created is asked again, elsewhere).
    pub fn with_commit_min(mut self, commit: u64) -> Query {
        self.commit_min = commit;
        self
    }

    /// The operation.
    pub fn operation(&self) -> Operation {
        self.operation
    }

    /// The request body.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Where it goes.
    pub fn target(&self) -> &QueryTarget {
        &self.target
    }

    /// True when it waits to be (re)sent.
    pub fn wants_transmit(&self) -> bool {
        self.state == State::Queued
    }

    /// True when an unanswered attempt moves on to the next node without
    /// closing the connection (any node can answer it).
    pub fn is_hedged(&self) -> bool {
        self.target == QueryTarget::AnyNode
    }

    /// Records that attempt `request` went out on `connection`; it is
    /// suspected after `attempt_timeout_ms` (plus the long-poll wait).
    pub fn transmitted(
        &mut self,
        connection: ConnectionId,
        request: u64,
        now_ms: u64,
        attempt_timeout_ms: u64,
    ) {
        assert_eq!(
            self.state,
            State::Queued,
            "sent a query that was not queued"
        );
        assert!(attempt_timeout_ms >= 1, "attempt timeout of 0 ms");
        self.state = State::Sent {
            connection,
            request,
            sent_at_ms: now_ms,
            timeout_ms: attempt_timeout_ms.saturating_add(self.extra_wait_ms),
        };
    }

    /// Applies a reply to any attempt of this query. Returns the round trip
    /// (ms) of the attempt in flight when it answers that one and no long
    /// poll stretched it.
    pub fn on_reply(
        &mut self,
        reply: Reply,
        now_ms: u64,
        backoff: &Backoff,
        prng: &mut Prng,
        actions: &mut Vec<QueryAction>,
    ) -> Option<u64> {
        let round_trip_ms = match self.state {
            State::Sent {
                connection,
                request,
                sent_at_ms,
                ..
            } if connection == reply.connection && request == reply.request => {
                Some(now_ms.saturating_sub(sent_at_ms))
            }
            _ => None,
        };
        let current_attempt = round_trip_ms.is_some();
        let round_trip_ms = round_trip_ms.filter(|_| self.extra_wait_ms == 0);
        self.apply_reply(reply, current_attempt, now_ms, backoff, prng, actions);
        round_trip_ms
    }

    fn apply_reply(
        &mut self,
        reply: Reply,
        current_attempt: bool,
        now_ms: u64,
        backoff: &Backoff,
        prng: &mut Prng,
        actions: &mut Vec<QueryAction>,
    ) {
        if reply.commit < self.commit_min {
            if current_attempt {
                self.back_off(now_ms, backoff, prng, actions);
            }
            return; // stale: it predates what this client saw committed
        }
        let error = match reply.body {
            ReplyBody::Ok(body) => return actions.push(QueryAction::Finish(Ok(body))),
            ReplyBody::Malformed(reason) => {
                return actions.push(QueryAction::Finish(Err(ClientError::Protocol { reason })));
            }
            ReplyBody::Error(error) => error,
        };
        if !is_retriable(&self.target, &error) {
            let error = ClientError::from_error_body(self.operation, error);
            return actions.push(QueryAction::Finish(Err(error)));
        }
        if !current_attempt {
            return; // a retriable answer to an attempt already superseded
        }
        match error {
            ErrorBody::Busy { retry_after_ms } => {
                let wait_ms = u64::from(retry_after_ms).clamp(1, BUSY_RETRY_AFTER_MS_MAX);
                self.state = State::Delayed {
                    until_ms: now_ms + wait_ms,
                };
            }
            ErrorBody::NotPrimary {
                view,
                primary_replica,
                primary_node,
                address,
            } => {
                if let QueryTarget::Group(group) = self.target {
                    actions.push(QueryAction::Redirect {
                        group,
                        view,
                        primary_replica,
                        primary_node,
                        address,
                    });
                }
                self.redirects += 1;
                if self.redirects == 1 {
                    self.state = State::Queued;
                } else {
                    self.back_off(now_ms, backoff, prng, actions);
                }
            }
            _ => self.back_off(now_ms, backoff, prng, actions),
        }
    }

    fn back_off(
        &mut self,
        now_ms: u64,
        backoff: &Backoff,
        prng: &mut Prng,
        actions: &mut Vec<QueryAction>,
    ) {
        let delay_ms = backoff.delay_ms(self.retries, prng);
        self.retries += 1;
        self.state = State::Delayed {
            until_ms: now_ms + delay_ms,
        };
        actions.push(match self.target {
            QueryTarget::AnyNode => QueryAction::NextNode,
            _ => QueryAction::RefreshRouting,
        });
    }

    /// The connection `connection` (to `address`) is gone.
    pub fn on_connection_lost(
        &mut self,
        connection: ConnectionId,
        address: &str,
        reason: &str,
        actions: &mut Vec<QueryAction>,
    ) {
        if !matches!(self.state, State::Sent { connection: sent_on, .. } if sent_on == connection) {
            return;
        }
        if matches!(self.target, QueryTarget::Node(_)) {
            let error = ClientError::Unreachable {
                address: address.to_owned(),
                reason: reason.to_owned(),
            };
            return actions.push(QueryAction::Finish(Err(error)));
        }
        self.state = State::Queued;
    }

    /// Time passes: attempt timeouts, delays, the deadline.
    ///
    /// An unanswered attempt: a question for one node fails as that node's
    /// answer ("no answer"); one any node can answer goes to the next node
    /// too (the slow one is tried last, its connection kept for a late
    /// answer); one for a group's primary is resent once the connection is
    /// closed and the route moved on.
    pub fn on_tick(&mut self, now_ms: u64, actions: &mut Vec<QueryAction>) {
        if self.deadline_ms <= now_ms {
            let error = ClientError::Timeout {
                operation: self.operation,
                deadline_ms: self.deadline_ms - self.submitted_ms,
            };
            return actions.push(QueryAction::Finish(Err(error)));
        }
        match self.state {
            State::Sent {
                connection,
                sent_at_ms,
                timeout_ms,
                ..
            } if sent_at_ms + timeout_ms <= now_ms => {
                self.state = State::Queued;
                match &self.target {
                    QueryTarget::Node(address) => {
                        let error = ClientError::Unreachable {
                            address: address.clone(),
                            reason: format!("no answer within {timeout_ms} ms"),
                        };
                        actions.push(QueryAction::SuspectConnection(connection));
                        actions.push(QueryAction::Finish(Err(error)));
                    }
                    QueryTarget::AnyNode => {
                        actions.push(QueryAction::Silent(connection));
                        actions.push(QueryAction::NextNode);
                    }
                    QueryTarget::Group(_) => {
                        actions.push(QueryAction::SuspectConnection(connection))
                    }
                }
            }
            State::Delayed { until_ms } if until_ms <= now_ms => self.state = State::Queued,
            _ => {}
        }
    }

    /// When the query next needs `on_tick`.
    pub fn next_wakeup_ms(&self) -> u64 {
        let state = match self.state {
            State::Queued => u64::MAX,
            State::Delayed { until_ms } => until_ms,
            State::Sent {
                sent_at_ms,
                timeout_ms,
                ..
            } => sent_at_ms + timeout_ms,
        };
        state.min(self.deadline_ms)
    }
}

/// Which error answers are worth another attempt for a target.
fn is_retriable(target: &QueryTarget, error: &ErrorBody) -> bool {
    let code = error.code();
    match target {
        QueryTarget::Node(_) => code == ResultCode::Busy,
        QueryTarget::AnyNode => matches!(
            code,
            ResultCode::Busy
                | ResultCode::Unavailable
                | ResultCode::NotPrimary
                | ResultCode::NotReady
        ),
        QueryTarget::Group(_) => matches!(
            code,
            ResultCode::Busy
                | ResultCode::Unavailable
                | ResultCode::NotPrimary
                | ResultCode::UnknownGroup
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(target: QueryTarget) -> Query {
        Query::new(Operation::Fetch, Bytes::new(), target, 0, 1_000, 0)
    }

    /// A metadata question for any node, with a 1 s deadline.
    fn metadata_query() -> Query {
        Query::new(
            Operation::Metadata,
            Bytes::new(),
            QueryTarget::AnyNode,
            0,
            1_000,
            0,
        )
    }

    fn reply(connection: ConnectionId, request: u64, body: ReplyBody) -> Reply {
        Reply {
            connection,
            group: 5,
            client: 1,
            request,
            op: 0,
            commit: 0,
            operation: Operation::Fetch,
            body,
        }
    }

    #[test]
    fn an_answer_older_than_what_the_client_saw_is_asked_again_elsewhere() {
        let mut query = metadata_query().with_commit_min(7);
        query.transmitted(1, 1, 0, 100);
        let backoff = Backoff::new(10, 500);
        let mut prng = Prng::new(1);
        let mut actions = Vec::new();
        let mut stale = reply(1, 1, ReplyBody::Ok(Bytes::from_static(b"old")));
        stale.commit = 6;
        query.on_reply(stale, 0, &backoff, &mut prng, &mut actions);
        assert_eq!(actions, vec![QueryAction::NextNode], "stale: another node");
        assert!(!query.wants_transmit(), "after a delay");
        query.on_tick(1_000 - 1, &mut actions);
        assert!(query.wants_transmit());
        query.transmitted(2, 2, 999, 100);
        let mut fresh = reply(2, 2, ReplyBody::Ok(Bytes::from_static(b"new")));
        fresh.commit = 7;
        let mut actions = Vec::new();
        query.on_reply(fresh, 999, &backoff, &mut prng, &mut actions);
        assert_eq!(
            actions,
            vec![QueryAction::Finish(Ok(Bytes::from_static(b"new")))]
        );
    }

    fn run(query: &mut Query, reply_body: ReplyBody) -> Vec<QueryAction> {
        let mut actions = Vec::new();
        let backoff = Backoff::new(10, 500);
        let mut prng = Prng::new(1);
        query.on_reply(
            reply(1, 1, reply_body),
            0,
            &backoff,
            &mut prng,
            &mut actions,
        );
        actions
    }

    #[test]
    fn group_queries_follow_redirects() {
        let mut fetch = query(QueryTarget::Group(5));
        fetch.transmitted(1, 1, 0, 100);
        let not_primary = ErrorBody::NotPrimary {
            view: 3,
            primary_replica: 1,
            primary_node: 2,
            address: String::new(),
        };
        let actions = run(&mut fetch, ReplyBody::Error(not_primary));
        assert!(matches!(
            actions[..],
            [QueryAction::Redirect {
                group: 5,
                view: 3,
                ..
            }]
        ));
        assert!(fetch.wants_transmit());
    }

    #[test]
    fn node_queries_fail_fast_except_busy() {
        let mut status = query(QueryTarget::Node("a:1".into()));
        status.transmitted(1, 1, 0, 100);
        let unavailable = ErrorBody::message(ResultCode::Unavailable, "not stuck");
        let actions = run(&mut status, ReplyBody::Error(unavailable));
        assert!(matches!(
            &actions[..],
            [QueryAction::Finish(Err(ClientError::Unavailable { .. }))]
        ));

        let mut status = query(QueryTarget::Node("a:1".into()));
        status.transmitted(1, 1, 0, 100);
        let mut actions = Vec::new();
        status.on_connection_lost(1, "a:1", "refused", &mut actions);
        assert!(matches!(
            &actions[..],
            [QueryAction::Finish(Err(ClientError::Unreachable { .. }))]
        ));
    }

    #[test]
    fn offset_out_of_range_is_final_and_typed() {
        let mut fetch = query(QueryTarget::Group(5));
        fetch.transmitted(1, 1, 0, 100);
        let out_of_range = ErrorBody::OffsetOutOfRange {
            requested: 9,
            log_start_offset: 0,
            high_watermark: 4,
        };
        let actions = run(&mut fetch, ReplyBody::Error(out_of_range));
        assert_eq!(
            actions,
            vec![QueryAction::Finish(Err(ClientError::OffsetOutOfRange {
                requested: 9,
                log_start_offset: 0,
                high_watermark: 4
            }))]
        );
    }

    #[test]
    fn a_deleted_topic_and_a_full_disk_end_a_group_query_at_once() {
        for (code, typed) in [
            (
                ResultCode::Deleted,
                ClientError::Deleted {
                    message: "why".into(),
                },
            ),
            (
                ResultCode::DiskFull,
                ClientError::DiskFull {
                    message: "why".into(),
                },
            ),
        ] {
            let mut fetch = query(QueryTarget::Group(5));
            fetch.transmitted(1, 1, 0, 100);
            let actions = run(
                &mut fetch,
                ReplyBody::Error(ErrorBody::message(code, "why")),
            );
            assert_eq!(actions, vec![QueryAction::Finish(Err(typed))], "{code:?}");
            assert!(!fetch.wants_transmit(), "{code:?} is not retried");
        }
    }

    #[test]
    fn timeouts_resend_and_the_deadline_ends_the_query() {
        let mut fetch = query(QueryTarget::Group(5));
        fetch.transmitted(1, 1, 0, 100);
        let mut actions = Vec::new();
        fetch.on_tick(100, &mut actions);
        assert_eq!(actions, vec![QueryAction::SuspectConnection(1)]);
        assert!(fetch.wants_transmit());
        actions.clear();
        fetch.on_tick(1_000, &mut actions);
        assert!(matches!(
            &actions[..],
            [QueryAction::Finish(Err(ClientError::Timeout {
                deadline_ms: 1_000,
                ..
            }))]
        ));
    }

    #[test]
    fn a_slow_node_is_hedged_and_its_late_answer_still_counts() {
        let mut metadata = metadata_query();
        metadata.transmitted(1, 1, 0, 50);
        let mut actions = Vec::new();
        metadata.on_tick(50, &mut actions);
        assert_eq!(
            actions,
            vec![QueryAction::Silent(1), QueryAction::NextNode],
            "the connection is kept"
        );
        metadata.transmitted(2, 2, 50, 50);
        let backoff = Backoff::new(10, 500);
        let mut prng = Prng::new(1);
        let mut actions = Vec::new();
        let late = reply(1, 1, ReplyBody::Ok(Bytes::from_static(b"late")));
        let round_trip = metadata.on_reply(late, 70, &backoff, &mut prng, &mut actions);
        assert_eq!(round_trip, None, "not the attempt in flight");
        assert_eq!(
            actions,
            vec![QueryAction::Finish(Ok(Bytes::from_static(b"late")))]
        );
    }

    #[test]
    fn a_node_that_does_not_answer_is_that_nodes_answer() {
        let mut status = query(QueryTarget::Node("a:1".into()));
        status.transmitted(3, 1, 10, 700);
        let mut actions = Vec::new();
        status.on_tick(709, &mut actions);
        assert!(actions.is_empty());
        status.on_tick(710, &mut actions);
        assert_eq!(actions[0], QueryAction::SuspectConnection(3));
        assert!(matches!(
            &actions[1],
            QueryAction::Finish(Err(ClientError::Unreachable { reason, .. }))
                if reason == "no answer within 700 ms"
        ));
    }

    #[test]
    fn a_long_poll_stretches_the_attempt_and_is_no_latency_sample() {
        let mut fetch = Query::new(
            Operation::Fetch,
            Bytes::new(),
            QueryTarget::Group(5),
            0,
            10_000,
            2_000,
        );
        fetch.transmitted(1, 1, 0, 100);
        let mut actions = Vec::new();
        fetch.on_tick(2_099, &mut actions);
        assert!(actions.is_empty(), "the wait is part of the attempt");
        let backoff = Backoff::new(10, 500);
        let mut prng = Prng::new(1);
        let answer = reply(1, 1, ReplyBody::Ok(Bytes::new()));
        assert_eq!(
            fetch.on_reply(answer, 2_050, &backoff, &mut prng, &mut actions),
            None
        );

        let mut plain = query(QueryTarget::Group(5));
        plain.transmitted(1, 1, 0, 100);
        let answer = reply(1, 1, ReplyBody::Ok(Bytes::new()));
        assert_eq!(
            plain.on_reply(answer, 7, &backoff, &mut prng, &mut actions),
            Some(7)
        );
    }

    #[test]
    fn not_ready_sends_a_metadata_question_to_another_node() {
        let mut metadata = metadata_query();
        metadata.transmitted(1, 1, 0, 100);
        let not_ready = ErrorBody::message(ResultCode::NotReady, "loading");
        let actions = run(&mut metadata, ReplyBody::Error(not_ready));
        assert_eq!(actions, vec![QueryAction::NextNode]);
    }
}
