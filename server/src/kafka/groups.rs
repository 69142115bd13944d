//! Kafka consumer groups on the wire: FindCoordinator names the node that
//! leads the metadata plane, which coordinates every group
//! ([`crate::kafka::coordinator`]); JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup are answered there (`NOT_COORDINATOR` anywhere else); the
//! offsets are each partition's cursor named after the group, so a Kafka
//! group and a Strand consumer of the same name share them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use strand_kafka::api::{self, RequestHeader};
use strand_kafka::codec::Reader;
use strand_kafka::errors::{code, from_result};
use strand_kafka::group_offsets::{Committed, OffsetCommit};
use strand_kafka::groups::{self as messages, Coordinator as Found, JoinGroup};
use strand_kafka::{DecodeError, group_offsets};
use strand_wire::ops::{ErrorBody, GetCursor, GetCursorReply, StoreCursor};
use strand_wire::{Body, Operation, ResultCode};

use crate::kafka::coordinator::{Outcome, failed_join};
use crate::kafka::link::{Answer, Link};
use crate::kafka::listener::Response;
use crate::kafka::metadata::{brokers, group_of};
use crate::kafka::serve::Served;

/// How long a join or sync waits past the group's own timeouts at most.
const WAIT_SLACK: Duration = Duration::from_secs(5);

/// A cursor read or store may take at most this long.
const CURSOR_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves one group request (`header.api` is a group API).
pub async fn serve(
    link: &Arc<Link>,
    header: RequestHeader,
    body: &mut Reader,
) -> Result<Served, DecodeError> {
    use strand_kafka::api::ApiKey;
    let ready =
        |body: BytesMut| Served::Respond(Response::Ready(api::response_frame(&header, body)));
    Ok(match header.api {
        ApiKey::FindCoordinator => {
            let (key_type, keys) = messages::decode_find_coordinator(&header, body)?;
            ready(messages::encode_find_coordinator(
                &header,
                &find(link, key_type, keys),
            ))
        }
        ApiKey::JoinGroup => join(
            link,
            header.clone(),
            messages::decode_join_group(&header, body)?,
        ),
        ApiKey::SyncGroup => sync(
            link,
            header.clone(),
            messages::decode_sync_group(&header, body)?,
        ),
        ApiKey::Heartbeat => {
            let (group, generation, member) = messages::decode_heartbeat(&header, body)?;
            let error_code = match coordinates(link, &group) {
                Some(refused) => refused,
                None => link
                    .coordinator()
                    .heartbeat(&group, generation, &member, Instant::now()),
            };
            ready(messages::encode_error_only(&header, error_code))
        }
        ApiKey::LeaveGroup => {
            let (group, leaving) = messages::decode_leave_group(&header, body)?;
            let (error_code, members) = match coordinates(link, &group) {
                Some(refused) => (refused, Vec::new()),
                None => {
                    let codes = link.coordinator().leave(&group, &leaving, Instant::now());
                    let members = leaving
                        .into_iter()
                        .zip(codes)
                        .map(|((id, instance), code)| (id, instance, code));
                    (code::NONE, members.collect())
                }
            };
            ready(messages::encode_leave_group(&header, error_code, &members))
        }
        ApiKey::ListGroups => {
            let states = messages::decode_list_groups(&header, body)?;
            let listed = match link.shared().leads_metadata_plane() {
                true => link.coordinator().list(&states),
                false => Vec::new(),
            };
            ready(messages::encode_list_groups(&header, &listed))
        }
        ApiKey::DescribeGroups => {
            let names = messages::decode_group_names(&header, body, true)?;
            let described: Vec<_> = names.iter().map(|group| describe(link, group)).collect();
            ready(messages::encode_describe_groups(&header, &described))
        }
        ApiKey::DeleteGroups => {
            let names = messages::decode_group_names(&header, body, false)?;
            let deleted: Vec<(String, i16)> = names
                .into_iter()
                .map(|group| {
                    let error_code = coordinates(link, &group)
                        .unwrap_or_else(|| link.coordinator().delete(&group));
                    (group, error_code)
                })
                .collect();
            ready(messages::encode_delete_groups(&header, &deleted))
        }
        ApiKey::OffsetCommit => {
            let commit = group_offsets::decode_commit(&header, body)?;
            let link = Arc::clone(link);
            Served::Respond(Response::Later(tokio::spawn(commit_offsets(
                link, header, commit,
            ))))
        }
        ApiKey::OffsetFetch => {
            let (group, topics) = group_offsets::decode_fetch(&header, body)?;
            let link = Arc::clone(link);
            Served::Respond(Response::Later(tokio::spawn(fetch_offsets(
                link, header, group, topics,
            ))))
        }
        other => unreachable!("{other:?} is not a group API"),
    })
}

/// One group as DescribeGroups shows it (`NOT_COORDINATOR` elsewhere).
fn describe(link: &Link, group: &str) -> messages::DescribedGroup {
    match coordinates(link, group) {
        Some(refused) => messages::DescribedGroup {
            error_code: refused,
            group_id: group.to_owned(),
            ..messages::DescribedGroup::default()
        },
        None => link.coordinator().describe(group),
    }
}

/// The coordinator of each key: the node leading the metadata plane.
fn find(link: &Link, key_type: i8, keys: Vec<String>) -> Vec<Found> {
    let shared = link.shared();
    let primary = crate::metadata::proposals::metadata_primary(shared);
    let broker = primary.and_then(|node| {
        brokers(shared)
            .into_iter()
            .find(|broker| broker.node_id == node as i32)
    });
    keys.into_iter()
        .map(|key| match (key_type, &broker) {
            (0, Some(broker)) => Found {
                key,
                node_id: broker.node_id,
                host: broker.host.clone(),
                port: broker.port,
                error_code: code::NONE,
            },
            (0, None) => not_found(key, code::COORDINATOR_NOT_AVAILABLE),
            _ => not_found(key, code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        })
        .collect()
}

fn not_found(key: String, error_code: i16) -> Found {
    Found {
        key,
        node_id: -1,
        host: String::new(),
        port: -1,
        error_code,
    }
}

/// Why this node does not serve `group` (`None`: it does): the group id is
/// no Strand consumer name, or another node coordinates.
fn coordinates(link: &Link, group: &str) -> Option<i16> {
    if strand_wire::codec::validate_name("group", group).is_err() {
        return Some(code::INVALID_GROUP_ID);
    }
    match link.shared().leads_metadata_plane() {
        true => None,
        false => Some(code::NOT_COORDINATOR),
    }
}

fn join(link: &Arc<Link>, header: RequestHeader, join: JoinGroup) -> Served {
    let client_id = header.client_id.clone().unwrap_or_default();
    let version = header.version;
    let frame = move |joined: strand_kafka::groups::Joined| {
        api::response_frame(&header, messages::encode_join_group(&header, &joined))
    };
    if let Some(refused) = coordinates(link, &join.group_id) {
        return Served::Respond(Response::Ready(frame(failed_join(
            refused,
            &join.member_id,
        ))));
    }
    let wait = Duration::from_millis(join.rebalance_timeout_ms.max(0) as u64) + WAIT_SLACK;
    let member_id = join.member_id.clone();
    let outcome = link
        .coordinator()
        .join(join, &client_id, version, Instant::now());
    match outcome {
        Outcome::Now(joined) => Served::Respond(Response::Ready(frame(joined))),
        Outcome::Later(answer) => Served::Respond(Response::Later(tokio::spawn(async move {
            let joined = match tokio::time::timeout(wait, answer).await {
                Ok(Ok(joined)) => joined,
                _ => failed_join(code::REBALANCE_IN_PROGRESS, &member_id),
            };
            Some(frame(joined))
        }))),
    }
}

fn sync(link: &Arc<Link>, header: RequestHeader, sync: messages::SyncGroup) -> Served {
    let frame = move |(error_code, assignment): (i16, Bytes)| {
        let protocol = (Some("consumer"), None);
        api::response_frame(
            &header,
            messages::encode_sync_group(&header, error_code, protocol, &assignment),
        )
    };
    if let Some(refused) = coordinates(link, &sync.group_id) {
        return Served::Respond(Response::Ready(frame((refused, Bytes::new()))));
    }
    let outcome = link.coordinator().sync(
        &sync.group_id,
        sync.generation_id,
        &sync.member_id,
        sync.assignments,
        Instant::now(),
    );
    match outcome {
        Outcome::Now(answer) => Served::Respond(Response::Ready(frame(answer))),
        Outcome::Later(answer) => Served::Respond(Response::Later(tokio::spawn(async move {
            let answer =
                match tokio::time::timeout(Duration::from_secs(60) + WAIT_SLACK, answer).await {
                    Ok(Ok(answer)) => answer,
                    _ => (code::REBALANCE_IN_PROGRESS, Bytes::new()),
                };
            Some(frame(answer))
        }))),
    }
}

/// Commits a group's offsets: each partition's cursor named after the
/// group, stored once the coordinator says the member may.
async fn commit_offsets(
    link: Arc<Link>,
    header: RequestHeader,
    commit: OffsetCommit,
) -> Option<Bytes> {
    let refused = coordinates(&link, &commit.group_id).unwrap_or_else(|| {
        link.coordinator()
            .may_commit(&commit.group_id, commit.generation_id, &commit.member_id)
    });
    let mut topics = Vec::with_capacity(commit.topics.len());
    for (name, partitions) in &commit.topics {
        let mut codes = Vec::with_capacity(partitions.len());
        for (partition, offset) in partitions {
            let error_code = match refused {
                code::NONE => store(&link, &commit.group_id, name, *partition, *offset).await,
                refused => refused,
            };
            codes.push((*partition, error_code));
        }
        topics.push((name.clone(), codes));
    }
    Some(api::response_frame(
        &header,
        group_offsets::encode_commit(&header, &topics),
    ))
}

/// Stores one partition's cursor for `group`.
async fn store(link: &Link, group: &str, topic: &str, partition: i32, offset: i64) -> i16 {
    let Ok(offset) = u64::try_from(offset) else {
        return code::OFFSET_OUT_OF_RANGE;
    };
    let target = match group_of(link.shared(), topic, partition) {
        Ok(target) => target,
        Err(error_code) => return error_code,
    };
    let body = StoreCursor {
        consumer: group.to_owned(),
        offset,
        fence: None,
    };
    let body = Bytes::from(body.to_vec());
    from_result(
        cursor_call(link, target, Operation::StoreCursor, body)
            .await
            .result,
    )
}

/// A cursor operation on partition group `group`, sent through this
/// node's door (rights, client ids, quotas); where this node's replica is
/// not the primary, sent on to the primary it names, as a node call.
async fn cursor_call(link: &Link, group: u64, operation: Operation, body: Bytes) -> Answer {
    let (sent, _) = link.send(group, operation, body.clone()).await;
    let answer = link.answer(sent, CURSOR_TIMEOUT).await;
    if answer.result != ResultCode::NotPrimary {
        return answer;
    }
    let Ok(ErrorBody::NotPrimary { primary_node, .. }) =
        ErrorBody::from_bytes(answer.result, &answer.body)
    else {
        return answer;
    };
    let shared = link.shared();
    if primary_node == shared.config.node {
        return answer;
    }
    let deadline = tokio::time::Instant::now() + CURSOR_TIMEOUT;
    let called = crate::net::node_calls::ask_cursor(shared, primary_node, group, operation, body);
    let reply = match called {
        Ok(pending) => pending.answer(deadline).await,
        Err(error) => Err(error),
    };
    match reply {
        Ok(reply) => Answer::of_reply(&reply),
        Err(error) => {
            tracing::debug!(%error, group, "kafka: a cursor call to the primary failed");
            answer
        }
    }
}

/// Reads a group's offsets: each partition's cursor named after the group
/// (-1 where it has none). Asking for every partition lists none: the
/// node keeps no index of a group's cursors across topics.
async fn fetch_offsets(
    link: Arc<Link>,
    header: RequestHeader,
    group: String,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Option<Bytes> {
    if let Some(refused) = coordinates(&link, &group) {
        return Some(api::response_frame(
            &header,
            group_offsets::encode_fetch(&header, &[], refused),
        ));
    }
    let mut answered = Vec::new();
    for (name, partitions) in topics.unwrap_or_default() {
        let mut committed = Vec::with_capacity(partitions.len());
        for partition in partitions {
            committed.push(read(&link, &group, &name, partition).await);
        }
        answered.push((name, committed));
    }
    Some(api::response_frame(
        &header,
        group_offsets::encode_fetch(&header, &answered, code::NONE),
    ))
}

/// One partition's cursor for `group`.
async fn read(link: &Link, group: &str, topic: &str, partition: i32) -> Committed {
    let mut committed = Committed {
        partition,
        offset: -1,
        error_code: code::NONE,
    };
    let target = match group_of(link.shared(), topic, partition) {
        Ok(target) => target,
        Err(error_code) => {
            committed.error_code = error_code;
            return committed;
        }
    };
    let body = GetCursor {
        consumer: group.to_owned(),
    };
    let answer = cursor_call(
        link,
        target,
        Operation::GetCursor,
        Bytes::from(body.to_vec()),
    )
    .await;
    match answer.result {
        ResultCode::Ok => {
            let offset = GetCursorReply::from_bytes(&answer.body)
                .ok()
                .and_then(|reply| reply.offset);
            committed.offset = offset.map_or(-1, |offset| offset as i64);
        }
        other => committed.error_code = from_result(other),
    }
    committed
}
