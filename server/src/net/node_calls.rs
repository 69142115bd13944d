//! Node calls: the requests a node makes on its own behalf, to its own
//! groups or to a peer's, and their answers.
//!
//! A node asks the cluster a few things itself: the metadata plane, to
//! record that a partition's epoch started or that a consumer-group
//! member's session expired; each node, for its replica's status of a
//! partition before a move. It asks as a node, never as a client: no SDK,
//! no client port. A call to a group hosted here goes straight to its
//! inbox, and the group's reply comes back through the reply router
//! ([`ReplyRoute::OwnCalls`](crate::shared::ReplyRoute)). A call to a peer
//! goes over the replica bus as a `Request` frame; the peer hands it to its
//! group (or answers it itself) and sends the reply back over the bus as a
//! `Reply` frame. Either way the answer is matched to its call by request
//! number.
//!
//! The bus carries only what nodes ask each other ([`carried_on_bus`]):
//! node-only reports, `GroupStatus`, and the cursors a Kafka group's
//! coordinator reads and stores at partitions led elsewhere. The bus proved the peer is a node
//! of this cluster (its ping; with TLS, its certificate), so these need no
//! sign-in; anything else a peer sends as a request closes the connection.
//! A client can send none of the node-only reports: the client port refuses
//! them to everyone.
//!
//! A proposal (a replicated request) goes under a [`CallSession`] its task
//! keeps: a fresh random client id at each start, so that no client table
//! answers it with a reply kept for an earlier run's request of the same
//! number, and a new one whenever a proposal ends in doubt. Questions a
//! node answers itself share one session, which no client table sees.

use std::time::Duration;

use bytes::Bytes;
use strand_wire::ops::ErrorBody;
use strand_wire::{
    CommandHeader, Msg, Operation, ReplyHeader, RequestHeader, ResultCode, Route, ViewId,
};
use tokio::time::Instant;

pub use crate::net::call_table::{CallError, CallSession, NodeCalls, PendingCall};
use crate::net::local_answers::local_answer;
use crate::net::replies::error_frame;
use crate::refused::Refused;
use crate::runtime::input::Input;
use crate::security::request_checks::is_node_only;
use crate::shared::Shared;

/// Asks `node` (this one or a peer) a question the node answers itself (a
/// [`Route::Local`] operation, such as `GroupStatus`), without waiting for
/// the answer: questions to several nodes asked together are answered
/// together.
pub fn ask(
    shared: &Shared,
    node: u32,
    operation: Operation,
    body: Bytes,
) -> Result<PendingCall<'_>, CallError> {
    assert_eq!(operation.info().route, Route::Local, "{operation:?}");
    let (client, request) = shared.node_calls.next_question();
    start(shared, node, (client, request), 0, operation, body)
}

/// Asks `node` (this one or a peer) for a partition's cursor, or to store
/// one, on behalf of a Kafka consumer group whose coordinator is this node
/// (see [`carried_on_bus`]): the caller has checked the user's rights
/// already. Not waited for here, like [`ask`].
pub fn ask_cursor(
    shared: &Shared,
    node: u32,
    group: u64,
    operation: Operation,
    body: Bytes,
) -> Result<PendingCall<'_>, CallError> {
    assert!(
        matches!(operation, Operation::GetCursor | Operation::StoreCursor),
        "{operation:?}"
    );
    let (client, request) = shared.node_calls.next_question();
    start(shared, node, (client, request), group, operation, body)
}

/// Proposes `operation` to `group` through `node` (this one or a peer)
/// under `session`, and waits at most `timeout` for the answer. An `Ok`
/// answer moves the session to its next request; anything else renews it
/// (see [`CallSession`]).
pub async fn propose(
    shared: &Shared,
    session: &mut CallSession,
    node: u32,
    group: u64,
    operation: Operation,
    body: Bytes,
    timeout: Duration,
) -> Result<Msg<ReplyHeader>, CallError> {
    assert!(operation.info().replicated, "{operation:?}");
    let deadline = Instant::now() + timeout;
    let called = (session.client(), session.next_request());
    let answer = match start(shared, node, called, group, operation, body) {
        Ok(pending) => pending.answer(deadline).await,
        Err(error) => Err(error),
    };
    match &answer {
        Ok(reply) if reply.header().result.get() == ResultCode::Ok as u16 => session.committed(),
        _ => shared.forget_own_calls(session.renew()),
    }
    answer
}

/// Sends a call as `called` (client id, request number) to `node`. `group`
/// is the header's, as on the client port: 0 for the metadata plane and
/// for what a node answers itself.
fn start(
    shared: &Shared,
    node: u32,
    called: (u128, u64),
    group: u64,
    operation: Operation,
    body: Bytes,
) -> Result<PendingCall<'_>, CallError> {
    assert_eq!(
        operation.info().route.names_group_zero(),
        group == 0,
        "{operation:?} to group {group}"
    );
    let (client, request) = called;
    let calls = &shared.node_calls;
    let mut header = RequestHeader::new(shared.config.cluster, group, ViewId::ZERO, 0);
    header.client.set(client);
    header.request.set(request);
    header.operation = operation as u8;
    let answered = calls.await_answer(client, request)?;
    let pending = PendingCall {
        calls,
        client,
        request,
        answered,
    };
    // On an error the pending call is dropped, and forgets itself.
    send(shared, node, Msg::new(header, body))?;
    Ok(pending)
}

/// Sends a call on its way: to a group hosted here, answered here, or to a
/// peer over the bus.
fn send(shared: &Shared, node: u32, request: Msg<RequestHeader>) -> Result<(), CallError> {
    if node != shared.config.node {
        return shared
            .send_to_node(node, request.to_bytes())
            .map_err(|_| CallError::Unreachable(node));
    }
    let operation = request.header().operation();
    if operation.info().route == Route::Local {
        shared
            .node_calls
            .answered_frame(local_answer(shared, &request));
        return Ok(());
    }
    let group = request.header().prefix.group.get();
    shared.route_own_calls(request.header().client.get());
    shared
        .send_to_group(group, Input::Request(request))
        .map_err(|refused| CallError::GroupRefused {
            group,
            reason: match refused {
                Refused::Full => "its inbox is full",
                Refused::Gone => "it is not hosted here",
            },
        })
}

/// Whether nodes ask each other `request` over the bus: a node-only
/// report, a replica's status of a group, or a partition's cursor read or
/// stored for a Kafka consumer group by its coordinator (which checked the
/// user's rights: the bus proved the caller is a node of the cluster).
pub fn carried_on_bus(request: &Msg<RequestHeader>) -> bool {
    is_node_only(request)
        || matches!(
            request.header().operation(),
            Operation::GroupStatus | Operation::GetCursor | Operation::StoreCursor
        )
}

/// Serves a call from peer `node`: answers it here, or hands it to its
/// group with the reply routed back over the bus. A request nodes never
/// ask each other is an error (the bus closes the connection).
pub fn serve(shared: &Shared, node: u32, request: Msg<RequestHeader>) -> Result<(), String> {
    let header = *request.header();
    let operation = header.operation();
    if !carried_on_bus(&request) {
        return Err(format!(
            "a {operation:?} request, which nodes never ask each other"
        ));
    }
    let group = header.prefix.group.get();
    if operation.info().route.names_group_zero() != (group == 0) {
        return Err(format!("a {operation:?} request to group {group}"));
    }
    let answer = |frame: Bytes| {
        if shared.send_to_node(node, frame).is_err() {
            tracing::debug!(node, ?operation, "node calls: an answer to a peer dropped");
        }
    };
    if let Err(error) = strand_wire::ops::check_request(operation, request.body()) {
        let error = ErrorBody::message(ResultCode::InvalidRequest, error.to_string());
        answer(error_frame(&header, &error));
        return Ok(());
    }
    if operation.info().route == Route::Local {
        answer(local_answer(shared, &request));
        return Ok(());
    }
    shared.route_peer_calls(header.client.get(), node);
    if let Err(refused) = shared.send_to_group(group, Input::Request(request)) {
        let error = match refused {
            Refused::Full => ErrorBody::Busy { retry_after_ms: 5 },
            Refused::Gone => ErrorBody::message(
                ResultCode::UnknownGroup,
                format!("group {group} is not hosted on node {}", shared.config.node),
            ),
        };
        answer(error_frame(&header, &error));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bytes::BytesMut;
    use strand_host::move_safety::fixtures::majority_of_three;
    use strand_partition::ReadHandles;
    use strand_wire::Body;
    use strand_wire::ops::{
        EpochStarted, GroupStatusReply, GroupStatusRequest, LeaveConsumerGroup,
    };
    use strand_wire::{FrameDecoder, Message};

    use super::*;
    use crate::net::peer_queue::{self, PeerReceiver};
    use crate::node::config::loopback_test_config;
    use crate::shared::GroupView;

    /// Node `node` of a three-node cluster, with its bus queues to the
    /// other two.
    fn node(node: u32) -> (Shared, BTreeMap<u32, PeerReceiver>) {
        let mut config = loopback_test_config(3);
        config.node = node;
        let (senders, receivers) = peer_queue::queues(node, [1, 2, 3].into_iter());
        let shared = Shared::new(config, senders, ReadHandles::new(16), 1);
        (shared, receivers)
    }

    /// The one frame queued to a peer, decoded.
    fn queued(receiver: &mut PeerReceiver) -> Message {
        let chunks = receiver.try_recv().expect("a frame queued");
        let mut buffer = BytesMut::new();
        for chunk in chunks {
            buffer.extend_from_slice(&chunk);
        }
        let message = FrameDecoder::new(u32::MAX)
            .decode(&mut buffer)
            .expect("a valid frame")
            .expect("a whole frame");
        assert!(buffer.is_empty(), "one frame");
        message
    }

    fn request(operation: Operation, group: u64, body: Vec<u8>) -> Msg<RequestHeader> {
        let mut header = RequestHeader::new(0, group, ViewId::ZERO, 0);
        header.client.set(0xca11);
        header.request.set(1);
        header.operation = operation as u8;
        Msg::new(header, Bytes::from(body))
    }

    #[tokio::test]
    async fn a_call_to_a_peer_goes_over_the_bus_and_its_answer_comes_back() {
        let (one, mut one_queues) = node(1);
        let (two, mut two_queues) = node(2);
        let status = majority_of_three([true, true, false]);
        two.publish(GroupView {
            status: status.clone(),
            attention: None,
        });
        let body = Bytes::from(GroupStatusRequest { group: 1 }.to_vec());
        let call = ask(&one, 2, Operation::GroupStatus, body).expect("sent");
        // The bus carries the request to node 2, which answers it itself.
        let Message::Request(asked) = queued(one_queues.get_mut(&2).expect("queue")) else {
            panic!("not a request");
        };
        serve(&two, 1, asked).expect("nodes ask each other this");
        let Message::Reply(answer) = queued(two_queues.get_mut(&1).expect("queue")) else {
            panic!("not a reply");
        };
        one.node_calls.answered(answer);
        let deadline = Instant::now() + Duration::from_secs(5);
        let reply = call.answer(deadline).await.expect("answered");
        let reply = GroupStatusReply::from_bytes(reply.body()).expect("decodes");
        assert_eq!(reply.status, Some(status));
        assert!(one.node_calls.pending.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn a_call_to_this_node_is_answered_here_and_a_late_answer_is_dropped() {
        let (one, _queues) = node(1);
        let body = Bytes::from(GroupStatusRequest { group: 9 }.to_vec());
        let deadline = Instant::now() + Duration::from_secs(5);
        let asked = ask(&one, 1, Operation::GroupStatus, body).expect("asked");
        let reply = asked.answer(deadline).await.expect("answered here");
        let reply = GroupStatusReply::from_bytes(reply.body()).expect("decodes");
        assert_eq!(reply.status, None, "group 9 is not hosted here");

        // No peer answers in time: the call is forgotten, and its answer,
        // arriving later, finds nothing to wake.
        let body = Bytes::from(GroupStatusRequest { group: 9 }.to_vec());
        let asked = ask(&one, 3, Operation::GroupStatus, body).expect("asked");
        let unanswered = asked.answer(Instant::now()).await;
        assert!(
            matches!(unanswered, Err(CallError::TimedOut(_))),
            "{unanswered:?}"
        );
        assert!(one.node_calls.pending.lock().expect("lock").is_empty());
        let mut late = ReplyHeader::new(0, 0, ViewId::ZERO, 0);
        late.client
            .set(one.node_calls.questions.lock().expect("lock").client());
        late.request.set(2);
        late.operation = Operation::GroupStatus as u8;
        one.node_calls.answered(Msg::new(late, Bytes::new()));
        assert!(one.node_calls.pending.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn a_proposal_that_commits_moves_its_session_on_and_one_in_doubt_renews_it() {
        let (one, mut one_queues) = node(1);
        let mut session = CallSession::new();
        let first = session.client();
        let body = || Bytes::from(EpochStarted { group: 1, epoch: 2 }.to_vec());
        let timeout = Duration::from_secs(5);
        let proposal = propose(
            &one,
            &mut session,
            2,
            0,
            Operation::EpochStarted,
            body(),
            timeout,
        );
        let answering = async {
            let queue = one_queues.get_mut(&2).expect("queue");
            let chunks = queue.recv().await.expect("the proposal sent");
            let mut buffer = BytesMut::new();
            chunks
                .iter()
                .for_each(|chunk| buffer.extend_from_slice(chunk));
            let Ok(Some(Message::Request(request))) =
                FrameDecoder::new(u32::MAX).decode(&mut buffer)
            else {
                panic!("not a request");
            };
            assert_eq!(
                (
                    request.header().client.get(),
                    request.header().request.get()
                ),
                (first, 1)
            );
            let reply =
                crate::net::replies::reply_frame(request.header(), ResultCode::Ok, Bytes::new());
            one.node_calls.answered_frame(reply);
        };
        let (committed, ()) = tokio::join!(proposal, answering);
        assert!(committed.is_ok());
        assert_eq!((session.client(), session.next_request()), (first, 2));

        // The metadata group is not hosted here: the call fails at once, its
        // request in doubt, and the session starts again under a new id.
        let refused = propose(
            &one,
            &mut session,
            1,
            0,
            Operation::EpochStarted,
            body(),
            timeout,
        )
        .await;
        assert!(
            matches!(refused, Err(CallError::GroupRefused { group: 0, .. })),
            "{refused:?}"
        );
        assert_ne!(session.client(), first);
        assert_eq!(session.next_request(), 1);
        assert!(
            one.reply(first, Bytes::new()).is_err(),
            "the old session's route is forgotten"
        );
    }

    #[test]
    fn the_bus_carries_only_what_nodes_ask_each_other() {
        let leave = |expired| {
            LeaveConsumerGroup {
                group: "readers".to_owned(),
                member: 7,
                expired,
            }
            .to_vec()
        };
        let epoch = EpochStarted { group: 1, epoch: 2 }.to_vec();
        let status = GroupStatusRequest { group: 1 }.to_vec();
        assert!(carried_on_bus(&request(Operation::EpochStarted, 0, epoch)));
        assert!(carried_on_bus(&request(
            Operation::LeaveConsumerGroup,
            0,
            leave(true)
        )));
        assert!(carried_on_bus(&request(
            Operation::GroupStatus,
            0,
            status.clone()
        )));
        assert!(!carried_on_bus(&request(
            Operation::LeaveConsumerGroup,
            0,
            leave(false)
        )));
        assert!(!carried_on_bus(&request(
            Operation::CreateStream,
            0,
            Vec::new()
        )));

        let (two, _queues) = node(2);
        let produce = request(Operation::Produce, 1, Vec::new());
        assert!(serve(&two, 1, produce).is_err(), "a produce from a peer");
        let misaddressed = request(Operation::GroupStatus, 1, status);
        assert!(
            serve(&two, 1, misaddressed).is_err(),
            "a local answer asked of group 1"
        );
    }

    #[test]
    fn a_peer_keeps_a_bounded_number_of_reply_routes_however_often_its_sessions_renew() {
        use crate::shared::PEER_CALL_SESSIONS_MAX;
        let (two, _queues) = node(2);
        let sessions = PEER_CALL_SESSIONS_MAX as u128 + 5;
        for client in 1..=sessions {
            two.route_peer_calls(client, 1);
            two.route_peer_calls(client, 1);
        }
        two.route_peer_calls(1000, 3);
        let routed = (1..=sessions)
            .filter(|client| two.reply(*client, Bytes::new()).is_ok())
            .count();
        assert_eq!(
            routed, PEER_CALL_SESSIONS_MAX,
            "node 1's latest sessions only"
        );
        assert!(
            two.reply(sessions, Bytes::new()).is_ok(),
            "node 1's latest session"
        );
        assert!(two.reply(1, Bytes::new()).is_err(), "its oldest is gone");
        assert!(two.reply(1000, Bytes::new()).is_ok(), "node 3's");
    }
}
