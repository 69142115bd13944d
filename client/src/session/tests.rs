//! Session scenarios (one rule each); the property test against a model of
//! the group's client table under random faults is in `model`.

use super::*;

mod model;

const GROUP: u64 = 7;

/// How long every attempt in these scenarios may go unanswered.
const ATTEMPT_TIMEOUT_MS: u64 = 100;

fn config() -> SessionConfig {
    SessionConfig {
        window_max: 8,
        backoff: Backoff::new(10, 500),
    }
}

fn submission(token: Token, now_ms: u64) -> Submission {
    Submission {
        token,
        operation: Operation::Produce,
        body: Bytes::from(token.to_le_bytes().to_vec()),
        submitted_ms: now_ms,
        deadline_ms: now_ms + 10_000,
    }
}

/// `(token, client, request)` of every transmit in `actions`.
fn transmits(actions: &[Action]) -> Vec<(Token, u128, u64)> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::Transmit {
                token,
                client,
                request,
                ..
            } => Some((*token, *client, *request)),
            _ => None,
        })
        .collect()
}

fn completions(actions: &[Action]) -> Vec<(Token, Result<Bytes, ClientError>)> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::Complete { token, outcome } => Some((*token, outcome.clone())),
            _ => None,
        })
        .collect()
}

fn reply(connection: ConnectionId, client: u128, request: u64, op: u64, body: ReplyBody) -> Reply {
    Reply {
        connection,
        group: GROUP,
        client,
        request,
        op,
        commit: op,
        operation: Operation::Produce,
        body,
    }
}

fn ok(connection: ConnectionId, client: u128, request: u64) -> Reply {
    reply(
        connection,
        client,
        request,
        request,
        ReplyBody::Ok(Bytes::from_static(b"ack")),
    )
}

fn error(connection: ConnectionId, client: u128, request: u64, body: ErrorBody) -> Reply {
    reply(connection, client, request, 0, ReplyBody::Error(body))
}

/// A session with `count` requests submitted and transmitted on connection 1.
fn sent(count: u64) -> (Session, Vec<(Token, u128, u64)>) {
    let mut session = Session::new(GROUP, config(), Prng::new(1));
    for token in 1..=count {
        session.submit(submission(token, 0));
    }
    let mut actions = Vec::new();
    session.poll_transmit(0, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    (session, transmits(&actions))
}

#[test]
fn numbers_count_from_one_and_requests_leave_in_order() {
    let (session, sent) = sent(3);
    let client = session.client();
    assert_eq!(sent, vec![(1, client, 1), (2, client, 2), (3, client, 3)]);
}

#[test]
fn window_bounds_requests_in_flight() {
    let (mut session, sent) = sent(20);
    assert_eq!(sent.len(), 8);
    let client = session.client();
    let mut actions = Vec::new();
    session.on_reply(ok(1, client, 1), 5, &mut actions);
    session.poll_transmit(5, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert_eq!(transmits(&actions), vec![(9, client, 9)]);
}

#[test]
fn busy_retries_the_same_number_after_the_hint() {
    let (mut session, _) = sent(1);
    let client = session.client();
    let mut actions = Vec::new();
    session.on_reply(
        error(1, client, 1, ErrorBody::Busy { retry_after_ms: 20 }),
        5,
        &mut actions,
    );
    session.poll_transmit(10, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert!(transmits(&actions).is_empty(), "resent before the hint");
    session.on_tick(25, |_| None, &mut actions);
    session.poll_transmit(25, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert_eq!(transmits(&actions), vec![(1, client, 1)]);
}

#[test]
fn not_primary_redirects_and_resends_the_same_number() {
    let (mut session, _) = sent(1);
    let client = session.client();
    let not_primary = ErrorBody::NotPrimary {
        view: 4,
        primary_replica: 1,
        primary_node: 2,
        address: "10.0.0.2:7000".into(),
    };
    let mut actions = Vec::new();
    session.on_reply(error(1, client, 1, not_primary.clone()), 5, &mut actions);
    assert!(
        actions
            .iter()
            .any(|action| matches!(action, Action::Redirect { view: 4, .. }))
    );
    session.poll_transmit(5, 2, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert_eq!(transmits(&actions), vec![(1, client, 1)]);
    // A second redirect in a row waits (replicas disagree mid view change).
    actions.clear();
    session.on_reply(error(2, client, 1, not_primary), 6, &mut actions);
    assert!(actions.contains(&Action::RefreshRouting));
    session.poll_transmit(6, 3, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert!(transmits(&actions).is_empty());
}

#[test]
fn out_of_order_resends_after_the_expected_request() {
    let (mut session, _) = sent(3);
    let client = session.client();
    let mut actions = Vec::new();
    session.on_reply(
        error(1, client, 1, ErrorBody::Busy { retry_after_ms: 10 }),
        1,
        &mut actions,
    );
    for request in [2, 3] {
        let out_of_order = ErrorBody::OutOfOrder { expected: 1 };
        session.on_reply(error(1, client, request, out_of_order), 1, &mut actions);
    }
    session.poll_transmit(2, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert!(transmits(&actions).is_empty(), "2 and 3 must wait for 1");
    session.on_tick(11, |_| None, &mut actions);
    session.poll_transmit(11, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert_eq!(
        transmits(&actions),
        vec![(1, client, 1), (2, client, 2), (3, client, 3)]
    );
}

#[test]
fn new_client_evicted_while_request_one_is_unanswered_resends_in_order() {
    let (mut session, _) = sent(2);
    let client = session.client();
    let mut actions = Vec::new();
    session.on_reply(
        error(1, client, 1, ErrorBody::Busy { retry_after_ms: 10 }),
        1,
        &mut actions,
    );
    let evicted = ErrorBody::message(ResultCode::SessionEvicted, "unknown client");
    session.on_reply(error(1, client, 2, evicted), 1, &mut actions);
    assert!(completions(&actions).is_empty());
    session.on_tick(11, |_| None, &mut actions);
    session.poll_transmit(11, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert_eq!(transmits(&actions), vec![(1, client, 1), (2, client, 2)]);
}

#[test]
fn eviction_after_commits_fails_sent_requests_as_outcome_unknown() {
    let (mut session, _) = sent(3);
    let old_client = session.client();
    let mut actions = Vec::new();
    session.on_reply(ok(1, old_client, 1), 1, &mut actions);
    let evicted = ErrorBody::message(ResultCode::SessionEvicted, "evicted");
    // Requests 2 and 3 left before the group was seen to take request 1: an
    // "unknown client" to them may predate its table, so they go again.
    session.on_reply(error(1, old_client, 2, evicted.clone()), 2, &mut actions);
    session.on_reply(error(1, old_client, 3, evicted.clone()), 2, &mut actions);
    assert_eq!(completions(&actions).len(), 1, "only request 1 is done");
    actions.clear();
    session.on_tick(1_000, |_| None, &mut actions);
    session.poll_transmit(1_000, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert_eq!(
        transmits(&actions),
        vec![(2, old_client, 2), (3, old_client, 3)]
    );
    // Sent after the table was known: this "unknown client" is an eviction.
    session.submit(submission(4, 1_000));
    actions.clear();
    session.on_reply(error(1, old_client, 2, evicted), 1_001, &mut actions);
    let done = completions(&actions);
    assert_eq!(done.len(), 2);
    assert!(
        done.iter()
            .all(|(_, outcome)| { outcome.as_ref().is_err_and(ClientError::is_outcome_unknown) })
    );
    // The request that was never sent starts the new session at 1.
    actions.clear();
    session.poll_transmit(1_002, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    let new_client = session.client();
    assert_ne!(new_client, old_client);
    assert_eq!(transmits(&actions), vec![(4, new_client, 1)]);
}

#[test]
fn an_unknown_client_answer_that_may_predate_the_table_is_retried_not_fatal() {
    // Found by the benign-faults property: requests 1-3 left together, a
    // failover bounced request 1 while request 2 reached the new primary
    // first ("unknown client"), then request 1 committed.
    let (mut session, _) = sent(3);
    let client = session.client();
    let mut actions = Vec::new();
    let evicted = ErrorBody::message(ResultCode::SessionEvicted, "unknown client");
    session.on_reply(ok(1, client, 1), 1, &mut actions);
    session.on_reply(error(1, client, 2, evicted), 1, &mut actions);
    assert_eq!(completions(&actions).len(), 1, "request 2 is not given up");
    actions.clear();
    session.on_tick(1_000, |_| None, &mut actions);
    session.poll_transmit(1_000, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    // Same id, same numbers (request 3's attempt timed out meanwhile).
    assert_eq!(transmits(&actions), vec![(2, client, 2), (3, client, 3)]);
    session.on_reply(ok(1, client, 2), 1_001, &mut actions);
    session.on_reply(ok(1, client, 3), 1_001, &mut actions);
    let done = completions(&actions);
    assert!(done.iter().all(|(_, outcome)| outcome.is_ok()), "{done:?}");
}

#[test]
fn a_group_that_keeps_expecting_an_answered_number_forgot_the_client() {
    // Requests 1 and 2 were acknowledged; then an operator accepted loss and
    // the group's table went back to expecting request 2.
    let (mut session, _) = sent(3);
    let old_client = session.client();
    let mut actions = Vec::new();
    session.on_reply(ok(1, old_client, 1), 1, &mut actions);
    session.on_reply(ok(1, old_client, 2), 1, &mut actions);
    session.submit(submission(4, 1));
    let mut now_ms = 2;
    for attempt in 0..=FORGOTTEN_AFTER_RETRIES {
        actions.clear();
        session.poll_transmit(now_ms, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
        let out_of_order = ErrorBody::OutOfOrder { expected: 2 };
        session.on_reply(error(1, old_client, 3, out_of_order), now_ms, &mut actions);
        if attempt < FORGOTTEN_AFTER_RETRIES {
            assert!(completions(&actions).is_empty(), "a stale node, for now");
            now_ms += 1_000;
            session.on_tick(now_ms, |_| None, &mut actions);
        }
    }
    // Requests 3 and 4 were sent: either may have been applied.
    let done = completions(&actions);
    assert_eq!(done.len(), 2, "{done:?}");
    assert!(
        done.iter()
            .all(|(_, outcome)| outcome.as_ref().is_err_and(ClientError::is_outcome_unknown))
    );
    session.submit(submission(5, now_ms));
    actions.clear();
    session.poll_transmit(now_ms, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    let new_client = session.client();
    assert_ne!(new_client, old_client);
    assert_eq!(transmits(&actions), vec![(5, new_client, 1)]);
}

#[test]
fn refusal_before_prepare_moves_later_requests_to_a_fresh_client() {
    let (mut session, _) = sent(4);
    let old_client = session.client();
    let mut actions = Vec::new();
    let too_large = ErrorBody::TooLarge { size: 10, max: 5 };
    session.on_reply(error(1, old_client, 2, too_large), 1, &mut actions);
    assert_eq!(
        completions(&actions),
        vec![(2, Err(ClientError::TooLarge { size: 10, max: 5 }))]
    );
    // 3 and 4 can never be taken under the old id (2 is a gap): they move,
    // and wait until request 1 of the old id is answered (order).
    let new_client = session.client();
    assert_ne!(new_client, old_client);
    actions.clear();
    session.poll_transmit(2, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert!(transmits(&actions).is_empty());
    session.on_reply(ok(1, old_client, 1), 3, &mut actions);
    session.poll_transmit(3, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert_eq!(
        transmits(&actions),
        vec![(3, new_client, 1), (4, new_client, 2)]
    );
}

#[test]
fn committed_error_uses_up_the_number() {
    let (mut session, _) = sent(1);
    let client = session.client();
    let mut actions = Vec::new();
    let exists = ErrorBody::message(ResultCode::AlreadyExists, "topic exists");
    session.on_reply(
        reply(1, client, 1, 9, ReplyBody::Error(exists)),
        1,
        &mut actions,
    );
    session.submit(submission(2, 1));
    session.poll_transmit(1, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert_eq!(session.client(), client);
    assert_eq!(transmits(&actions), vec![(2, client, 2)]);
}

#[test]
fn a_committed_refusal_to_retry_later_is_final() {
    // The catalog commits "retry later" and "unknown group" answers: every
    // resend of the number would get the same stored reply.
    for code in [ResultCode::Unavailable, ResultCode::UnknownGroup] {
        let (mut session, _) = sent(1);
        let client = session.client();
        let mut actions = Vec::new();
        let refused = ErrorBody::message(code, "a reassignment is in progress");
        session.on_reply(
            reply(1, client, 1, 9, ReplyBody::Error(refused.clone())),
            1,
            &mut actions,
        );
        let expected = ClientError::from_error_body(Operation::Produce, refused);
        assert_eq!(completions(&actions), vec![(1, Err(expected))], "{code:?}");
        session.submit(submission(2, 1));
        session.poll_transmit(1, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
        assert_eq!(session.client(), client, "the number was used, no gap");
        assert_eq!(transmits(&actions), vec![(2, client, 2)]);
    }
}

/// Submits nothing more and lets a long time pass: whatever the session
/// still wants to send or retry shows up as actions.
fn later_actions(session: &mut Session) -> Vec<Action> {
    let mut actions = Vec::new();
    session.on_tick(60_000, |_| None, &mut actions);
    session.poll_transmit(60_000, 2, ATTEMPT_TIMEOUT_MS, &mut actions);
    actions
}

#[test]
fn a_deleted_topic_fails_the_request_and_it_is_never_sent_again() {
    // A produce pinned to a group whose topic was deleted: a topic created
    // again under the name has new groups, so no retry, redirect or
    // routing refresh may carry this batch anywhere.
    let (mut session, _) = sent(1);
    let client = session.client();
    let mut actions = Vec::new();
    let deleted = ErrorBody::message(ResultCode::Deleted, "group 7's topic was deleted");
    session.on_reply(error(1, client, 1, deleted), 1, &mut actions);
    assert_eq!(
        completions(&actions),
        vec![(
            1,
            Err(ClientError::Deleted {
                message: "group 7's topic was deleted".into()
            })
        )]
    );
    assert_eq!(actions.len(), 1, "no refresh, no redirect: {actions:?}");
    assert!(session.is_idle());
    assert_eq!(later_actions(&mut session), Vec::new());
}

#[test]
fn every_request_of_a_pipeline_to_a_deleted_topic_fails_deleted_once() {
    // The group answers Deleted to every attempt. A refusal before prepare
    // moves the requests behind it to a fresh id (rule 3: their numbers can
    // never be taken), so they go out again, to the same group, and get
    // their own Deleted; none is sent after its own answer.
    let (mut session, mut in_flight) = sent(3);
    let mut failed: Vec<Token> = Vec::new();
    for now_ms in 1..=10 {
        let mut actions = Vec::new();
        for (token, client, request) in std::mem::take(&mut in_flight) {
            assert!(!failed.contains(&token), "{token} sent after its answer");
            let deleted = ErrorBody::message(ResultCode::Deleted, "deleted");
            session.on_reply(error(1, client, request, deleted), now_ms, &mut actions);
        }
        for (token, outcome) in completions(&actions) {
            assert!(
                matches!(outcome, Err(ClientError::Deleted { .. })),
                "{outcome:?}"
            );
            failed.push(token);
        }
        let mut actions = Vec::new();
        session.poll_transmit(now_ms, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
        in_flight = transmits(&actions);
    }
    assert_eq!(failed, vec![1, 2, 3], "each once, in order");
    assert!(session.is_idle());
    assert_eq!(later_actions(&mut session), Vec::new());
}

#[test]
fn a_full_disk_fails_the_request_and_it_is_not_retried() {
    let (mut session, _) = sent(1);
    let client = session.client();
    let mut actions = Vec::new();
    let full = ErrorBody::message(ResultCode::DiskFull, "node 2's data disk is full");
    session.on_reply(error(1, client, 1, full), 1, &mut actions);
    assert_eq!(
        completions(&actions),
        vec![(
            1,
            Err(ClientError::DiskFull {
                message: "node 2's data disk is full".into()
            })
        )]
    );
    assert_eq!(actions.len(), 1, "{actions:?}");
    assert!(session.is_idle());
    assert_eq!(later_actions(&mut session), Vec::new());
    // Nothing was written: the number is free, and the next request takes
    // it under a fresh id (rule 3).
    session.submit(submission(2, 2));
    let mut actions = Vec::new();
    session.poll_transmit(2, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    let fresh = session.client();
    assert_ne!(fresh, client);
    assert_eq!(transmits(&actions), vec![(2, fresh, 1)]);
}

#[test]
fn connection_loss_resends_in_order_with_the_same_numbers() {
    let (mut session, first) = sent(3);
    session.on_connection_lost(1);
    let mut actions = Vec::new();
    session.poll_transmit(1, 2, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert_eq!(transmits(&actions), first);
}

#[test]
fn attempt_timeout_suspects_the_connection_and_resends() {
    let (mut session, first) = sent(2);
    let mut actions = Vec::new();
    session.on_tick(99, |_| None, &mut actions);
    assert!(actions.is_empty());
    session.on_tick(100, |_| None, &mut actions);
    assert_eq!(actions, vec![Action::SuspectConnection { connection: 1 }]);
    actions.clear();
    session.poll_transmit(100, 2, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert_eq!(transmits(&actions), first);
}

/// A node hosting many groups answers a quiet group's request after a busy
/// group's: an attempt that times out while its connection keeps committing
/// others is resent there, with twice the timeout, and the connection (with
/// every other group's requests on it) stays open.
#[test]
fn an_attempt_on_a_connection_that_answers_others_is_resent_there() {
    let (mut session, first) = sent(1);
    let mut actions = Vec::new();
    let committing = |connection: ConnectionId| (connection == 1).then_some(60);
    session.on_tick(100, committing, &mut actions);
    assert!(actions.is_empty(), "nothing suspected: {actions:?}");
    session.poll_transmit(100, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert_eq!(transmits(&actions), first, "the same request, resent");
    assert_eq!(session.next_wakeup_ms(), Some(100 + 2 * ATTEMPT_TIMEOUT_MS));
    actions.clear();
    // The connection then falls silent for a whole (doubled) timeout.
    session.on_tick(300, committing, &mut actions);
    assert_eq!(actions, vec![Action::SuspectConnection { connection: 1 }]);
}

/// A reply to a request sent twice on one connection may answer either
/// attempt: it is no latency sample (Karn's rule).
#[test]
fn a_reply_to_a_resent_request_is_no_latency_sample() {
    let (mut session, _) = sent(2);
    let client = session.client();
    let mut actions = Vec::new();
    let reply_to_first = session.on_reply(ok(1, client, 1), 40, &mut actions);
    assert_eq!(reply_to_first, Some(40));
    session.on_tick(140, |_| Some(130), &mut actions);
    session.poll_transmit(140, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert_eq!(session.on_reply(ok(1, client, 2), 150, &mut actions), None);
}

/// A node answering a deep pipeline is busy, not gone: each answer restarts
/// the clock of the attempts queued behind it on that connection, so a
/// request that waits its turn longer than one attempt timeout does not close
/// the connection (and with it every request in flight) while answers flow.
#[test]
fn an_answer_restarts_the_clock_of_the_attempts_behind_it() {
    let (mut session, _) = sent(3);
    let client = session.client();
    let mut actions = Vec::new();
    session.on_reply(ok(1, client, 1), 90, &mut actions);
    session.on_tick(150, |_| None, &mut actions);
    session.on_reply(ok(1, client, 2), 180, &mut actions);
    session.on_tick(279, |_| None, &mut actions);
    assert!(
        !actions
            .iter()
            .any(|action| matches!(action, Action::SuspectConnection { .. })),
        "an attempt behind answered ones was suspected: {actions:?}"
    );
    assert_eq!(session.next_wakeup_ms(), Some(280));
    session.on_tick(280, |_| None, &mut actions);
    assert_eq!(
        actions.last(),
        Some(&Action::SuspectConnection { connection: 1 }),
        "silence for a whole attempt timeout after the last answer"
    );
}

#[test]
fn deadline_of_an_unsent_request_frees_its_number() {
    let mut session = Session::new(GROUP, config(), Prng::new(1));
    let client = session.client();
    let mut early = submission(1, 0);
    early.deadline_ms = 50;
    session.submit(early);
    session.submit(submission(2, 0));
    let mut actions = Vec::new();
    session.on_tick(60, |_| None, &mut actions);
    let done = completions(&actions);
    assert_eq!(
        done,
        vec![(
            1,
            Err(ClientError::Timeout {
                operation: Operation::Produce,
                deadline_ms: 50
            })
        )]
    );
    actions.clear();
    session.poll_transmit(60, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert_eq!(transmits(&actions), vec![(2, client, 1)]);
}

#[test]
fn deadline_of_a_sent_request_is_outcome_unknown_and_later_ones_move() {
    let mut session = Session::new(GROUP, config(), Prng::new(1));
    let old_client = session.client();
    let mut short = submission(1, 0);
    short.deadline_ms = 50;
    session.submit(short);
    session.submit(submission(2, 0));
    let mut actions = Vec::new();
    session.poll_transmit(0, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    session.submit(submission(3, 0));
    actions.clear();
    session.on_tick(60, |_| None, &mut actions);
    let done = completions(&actions);
    assert_eq!(
        done.iter().map(|(token, _)| *token).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert!(
        done.iter()
            .all(|(_, outcome)| outcome.as_ref().is_err_and(ClientError::is_outcome_unknown))
    );
    actions.clear();
    session.poll_transmit(60, 2, ATTEMPT_TIMEOUT_MS, &mut actions);
    let new_client = session.client();
    assert_ne!(new_client, old_client);
    assert_eq!(transmits(&actions), vec![(3, new_client, 1)]);
}

#[test]
fn stale_replies_are_ignored() {
    let (mut session, _) = sent(2);
    let client = session.client();
    let mut actions = Vec::new();
    session.on_reply(ok(1, client, 9), 1, &mut actions);
    session.on_reply(ok(1, client + 1, 1), 1, &mut actions);
    // A retriable answer from a connection the request is no longer on.
    session.on_reply(
        error(
            5,
            client,
            1,
            ErrorBody::Busy {
                retry_after_ms: 900,
            },
        ),
        1,
        &mut actions,
    );
    assert!(actions.is_empty());
    session.poll_transmit(1, 1, ATTEMPT_TIMEOUT_MS, &mut actions);
    assert!(
        actions.is_empty(),
        "both requests are still in flight on connection 1"
    );
}
