//! The answers a node gives from what it knows itself, without a group:
//! every operation whose route is [`Route::Local`] (routing, status,
//! attention, consumer groups, users, quotas), the full-disk entry of
//! `attention`, and how long a failover takes.

use bytes::Bytes;
use strand_wire::ops::{
    AttentionEntry, AttentionReason, AttentionReply, ClusterStatusReply, DescribeConsumerGroups,
    ErrorBody, GroupStatusReply, GroupStatusRequest, MetadataReply, MetadataRequest, NodeInfo,
};
use strand_wire::{Body, Msg, Operation, RequestHeader, ResultCode, Route};

use crate::net::replies::{error_frame, reply_frame, reply_frame_as_of};
use crate::shared::{CatalogFreshness, Shared};

/// The answer to a request whose route is [`Route::Local`]: what this node
/// knows itself, from its catalog and its groups' views.
pub(crate) fn local_answer(shared: &Shared, request: &Msg<RequestHeader>) -> Bytes {
    let header = request.header();
    let operation = header.operation();
    assert_eq!(operation.info().route, Route::Local, "{operation:?}");
    let ok = |body: Vec<u8>| reply_frame(header, ResultCode::Ok, Bytes::from(body));
    match operation {
        Operation::Metadata => metadata_reply(shared, request),
        Operation::DescribeConsumerGroups => describe_consumer_groups_reply(shared, request),
        Operation::ListUsers => ok(shared.catalog().user_list().to_vec()),
        Operation::ListQuotas => ok(shared.catalog().quota_list().to_vec()),
        Operation::ClusterStatus => ok(cluster_status(shared).to_vec()),
        Operation::GroupStatus => group_status(shared, request),
        Operation::Attention => ok(attention(shared).to_vec()),
        // The table routes it here and no answer is written for it: a bug
        // in this node, answered as one (the unit test below finds it).
        operation => {
            tracing::error!(?operation, "a local operation without a local answer");
            let message = format!("{operation:?} has no answer on this node");
            error_frame(header, &ErrorBody::message(ResultCode::Internal, message))
        }
    }
}

/// The nodes and every group this node hosts, as they are now.
fn cluster_status(shared: &Shared) -> ClusterStatusReply {
    ClusterStatusReply {
        node: shared.config.node,
        nodes: nodes(shared),
        groups: shared.views().into_iter().map(|view| view.status).collect(),
    }
}

/// The answer to a request whose body does not decode.
fn invalid_body(header: &RequestHeader, error: &strand_wire::error::BodyError) -> Bytes {
    let error = ErrorBody::message(ResultCode::InvalidRequest, error.to_string());
    error_frame(header, &error)
}

/// This node's replica of the group a `GroupStatus` names, if it hosts one.
fn group_status(shared: &Shared, request: &Msg<RequestHeader>) -> Bytes {
    let header = request.header();
    match GroupStatusRequest::from_bytes(request.body()) {
        Ok(asked) => {
            let reply = GroupStatusReply {
                status: shared.status_of(asked.group),
            };
            reply_frame(header, ResultCode::Ok, Bytes::from(reply.to_vec()))
        }
        Err(error) => invalid_body(header, &error),
    }
}

/// Every group of this node whose view change waits, and the node itself
/// while its data disk is full.
fn attention(shared: &Shared) -> AttentionReply {
    let mut entries: Vec<AttentionEntry> = shared
        .views()
        .into_iter()
        .filter_map(|view| view.attention)
        .collect();
    entries.extend(disk_full_attention(shared));
    AttentionReply { entries }
}

/// The node's own attention entry while its data disk is full (group 0
/// stands for the node).
fn disk_full_attention(shared: &Shared) -> Option<AttentionEntry> {
    if !shared.disk.is_full() {
        return None;
    }
    let (free, reserve) = shared.disk.reading();
    Some(AttentionEntry {
        group: 0,
        stream: String::new(),
        topic: String::new(),
        partition: 0,
        view: 0,
        reason: AttentionReason::DiskFull,
        awaited: Vec::new(),
        detail: format!(
            "node {}: the data disk at {} has {free} bytes free, below the reserve of {reserve}; \
             produces are refused until space is freed",
            shared.config.node,
            shared.config.data_dir.display()
        ),
        history_start: None,
    })
}

/// The cluster's nodes, their addresses, and whether this node reaches
/// them now.
fn nodes(shared: &Shared) -> Vec<NodeInfo> {
    shared
        .config
        .peers
        .iter()
        .map(|peer| NodeInfo {
            id: peer.id,
            replica_address: peer.replica_address.clone(),
            client_address: peer.client_address.clone(),
            reachable: shared.reachable(peer.id),
        })
        .collect()
}

/// Consumer groups as this node's catalog holds them (refused while it loads).
fn describe_consumer_groups_reply(shared: &Shared, request: &Msg<RequestHeader>) -> Bytes {
    let header = request.header();
    let query = match DescribeConsumerGroups::from_bytes(request.body()) {
        Ok(query) => query,
        Err(error) => return invalid_body(header, &error),
    };
    if shared.catalog_freshness() == CatalogFreshness::Loading {
        return error_frame(header, &not_ready(shared, "is still loading its catalog"));
    }
    let catalog = shared.catalog();
    let reply = catalog.describe_groups(&query.group);
    reply_frame_as_of(
        header,
        ResultCode::Ok,
        Bytes::from(reply.to_vec()),
        catalog.applied_op,
    )
}

/// Answers Metadata from the catalog this node has applied, but only as far
/// as it is true: nothing while the metadata replica has not caught up since
/// the node started (`NotReady`: the client asks another node), and no
/// "unknown stream/topic" unless the catalog is current.
fn metadata_reply(shared: &Shared, request: &Msg<RequestHeader>) -> Bytes {
    let header = request.header();
    let query = match MetadataRequest::from_bytes(request.body()) {
        Ok(query) => query,
        Err(error) => return invalid_body(header, &error),
    };
    let freshness = shared.catalog_freshness();
    let catalog = shared.catalog();
    // Every answer says which metadata op it reflects, errors included.
    let as_of = catalog.applied_op;
    let error_frame = |header: &RequestHeader, error: &ErrorBody| {
        reply_frame_as_of(header, error.code(), Bytes::from(error.to_vec()), as_of)
    };
    if freshness == CatalogFreshness::Loading {
        return error_frame(header, &not_ready(shared, "is still loading its catalog"));
    }
    let views = |group: u64| shared.view_of(group).unwrap_or(0);
    let mut topics = Vec::new();
    for (stream, stream_topics) in &catalog.streams {
        if query.stream.as_ref().is_some_and(|wanted| wanted != stream) {
            continue;
        }
        for topic in stream_topics.keys() {
            if query.topic.as_ref().is_some_and(|wanted| wanted != topic) {
                continue;
            }
            if let Some(info) = catalog.topic_info(stream, topic, &views) {
                topics.push(info);
            }
        }
    }
    if let Some(stream) = &query.stream {
        let unknown = if !catalog.streams.contains_key(stream) {
            Some(ErrorBody::message(
                ResultCode::UnknownStream,
                format!("no stream named {stream}"),
            ))
        } else if let Some(topic) = &query.topic
            && topics.is_empty()
        {
            Some(ErrorBody::message(
                ResultCode::UnknownTopic,
                format!("no topic named {topic} in stream {stream}"),
            ))
        } else {
            None
        };
        if let Some(unknown) = unknown {
            if freshness != CatalogFreshness::Current {
                let why = "is not caught up with the metadata plane, so it cannot say a name \
                           does not exist";
                return error_frame(header, &not_ready(shared, why));
            }
            return error_frame(header, &unknown);
        }
    }
    let reply = MetadataReply {
        nodes: nodes(shared),
        streams: catalog.streams.keys().cloned().collect(),
        topics,
        failover_ms: failover_ms(shared),
    };
    reply_frame_as_of(header, ResultCode::Ok, Bytes::from(reply.to_vec()), as_of)
}

/// The `NotReady` answer: this node `why`; another node may know.
fn not_ready(shared: &Shared, why: &str) -> ErrorBody {
    let node = shared.config.node;
    ErrorBody::message(
        ResultCode::NotReady,
        format!("node {node} {why}: ask another node"),
    )
}

/// How long a silent primary takes to be replaced: its backups wait the
/// primary timeout, then the view change may take its own timeout.
fn failover_ms(shared: &Shared) -> u32 {
    let timeouts = strand_consensus::Timeouts::default();
    let ticks = timeouts.primary_ticks + timeouts.view_change_ticks;
    u32::try_from(ticks.saturating_mul(shared.config.tick_ms)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bytes::BytesMut;
    use strand_partition::ReadHandles;
    use strand_wire::{CommandHeader, FrameDecoder, Message, Operation, ViewId};

    use super::*;
    use crate::node::config::loopback_test_config;

    fn shared() -> Shared {
        let config = loopback_test_config(1);
        Shared::new(config, BTreeMap::new(), ReadHandles::new(16), 1)
    }

    /// Asks `shared` for metadata (of `stream`, if given); the answer's
    /// result code and body.
    fn ask(shared: &Shared, stream: Option<&str>) -> (ResultCode, Bytes) {
        let query = MetadataRequest {
            stream: stream.map(str::to_owned),
            topic: None,
        };
        let mut header = RequestHeader::new(0, 0, ViewId::ZERO, 0);
        header.client.set(5);
        header.request.set(1);
        header.operation = Operation::Metadata as u8;
        let request = Msg::new(header, Bytes::from(query.to_vec()));
        let mut frame = BytesMut::from(&metadata_reply(shared, &request)[..]);
        let decoded = FrameDecoder::new(strand_wire::FRAME_SIZE_MAX_DEFAULT)
            .decode(&mut frame)
            .expect("a valid frame")
            .expect("a whole frame");
        let Message::Reply(reply) = decoded else {
            panic!("not a reply");
        };
        (reply.header().result(), reply.body().clone())
    }

    #[test]
    fn every_local_operation_is_answered_here() {
        let shared = shared();
        shared.set_catalog_current(true);
        let local = Operation::ALL
            .into_iter()
            .filter(|operation| operation.info().route == Route::Local);
        for operation in local {
            let mut header = RequestHeader::new(0, 0, ViewId::ZERO, 0);
            header.client.set(5);
            header.request.set(1);
            header.operation = operation as u8;
            let request = Msg::new(header, Bytes::new());
            let mut frame = BytesMut::from(&local_answer(&shared, &request)[..]);
            let decoded = FrameDecoder::new(strand_wire::FRAME_SIZE_MAX_DEFAULT)
                .decode(&mut frame)
                .expect("a valid frame")
                .expect("a whole frame");
            let Message::Reply(reply) = decoded else {
                panic!("not a reply");
            };
            assert_ne!(
                reply.header().result(),
                ResultCode::Internal,
                "{operation:?}"
            );
        }
    }

    #[test]
    fn a_node_whose_catalog_never_caught_up_answers_not_ready() {
        let shared = shared();
        assert_eq!(ask(&shared, None).0, ResultCode::NotReady);
        assert_eq!(ask(&shared, Some("s")).0, ResultCode::NotReady);
        shared.set_catalog_current(false);
        assert_eq!(ask(&shared, None).0, ResultCode::NotReady, "still loading");
    }

    #[test]
    fn only_a_current_catalog_says_a_name_is_unknown() {
        let shared = shared();
        shared.set_catalog_current(true);
        assert_eq!(ask(&shared, Some("s")).0, ResultCode::UnknownStream);
        let (code, body) = ask(&shared, None);
        assert_eq!(code, ResultCode::Ok);
        let metadata = MetadataReply::from_bytes(&body).expect("a metadata reply");
        assert_eq!(metadata.failover_ms, 700, "(30 + 40 ticks) of 10 ms");

        shared.set_catalog_current(false);
        assert_eq!(shared.catalog_freshness(), CatalogFreshness::Behind);
        assert_eq!(ask(&shared, Some("s")).0, ResultCode::NotReady);
        assert_eq!(ask(&shared, None).0, ResultCode::Ok, "what it has is true");
    }
}
