//! Kafka's Metadata, answered from this node's catalog: every node with a
//! Kafka listener is a broker; a partition's leader is the primary of the
//! view this node knows, and its leader epoch is that view, so a client
//! that has seen a newer view keeps it.

use std::sync::Arc;

use bytes::BytesMut;
use strand_kafka::api::RequestHeader;
use strand_kafka::errors::code;
use strand_kafka::metadata::{
    Broker, MetadataRequest, MetadataResponse, PartitionMetadata, TopicMetadata, encode,
};
use strand_kafka::names;

use crate::kafka::link::Link;
use crate::shared::{CatalogFreshness, Shared};

/// The Metadata response body for `request`.
pub fn answer(link: &Arc<Link>, header: &RequestHeader, request: &MetadataRequest) -> BytesMut {
    let shared = link.shared();
    let topics = match &request.topics {
        None => every_topic(shared),
        Some(names) => names.iter().map(|name| topic(shared, name)).collect(),
    };
    let response = MetadataResponse {
        brokers: brokers(shared),
        cluster_id: format!("strand-{}", shared.config.cluster),
        controller_id: controller_id(shared),
        topics,
    };
    encode(header, &response)
}

/// The node Kafka clients send admin requests to: the one leading the
/// metadata plane (this one while none is known).
pub fn controller_id(shared: &Shared) -> i32 {
    crate::metadata::proposals::metadata_primary(shared).unwrap_or(shared.config.node) as i32
}

/// Every node with a Kafka listener.
pub fn brokers(shared: &Shared) -> Vec<Broker> {
    shared
        .config
        .peers
        .iter()
        .filter_map(|peer| {
            let address: std::net::SocketAddr = peer.kafka_address.as_ref()?.parse().ok()?;
            Some(Broker {
                node_id: peer.id as i32,
                host: address.ip().to_string(),
                port: i32::from(address.port()),
                rack: None,
            })
        })
        .collect()
}

/// Every topic a Kafka client can name (see [`strand_kafka::names`]).
fn every_topic(shared: &Shared) -> Vec<TopicMetadata> {
    if shared.catalog_freshness() == CatalogFreshness::Loading {
        return Vec::new();
    }
    let catalog = shared.catalog();
    let default_stream = &shared.config.kafka.stream;
    let mut topics = Vec::new();
    for (stream, stream_topics) in &catalog.streams {
        for topic in stream_topics.keys() {
            if let Some(name) = names::to_kafka(stream, topic, default_stream) {
                topics.push(described(shared, &name, stream, topic));
            }
        }
    }
    topics
}

/// One topic by its Kafka name: unknown only when the catalog is current
/// enough to say so (otherwise "no leader yet", which clients retry).
fn topic(shared: &Shared, name: &str) -> TopicMetadata {
    let unknown = |error_code| TopicMetadata {
        error_code,
        name: name.to_owned(),
        topic_id: [0; 16],
        partitions: Vec::new(),
    };
    let Some((stream, topic)) = names::to_strand(name, &shared.config.kafka.stream) else {
        return unknown(code::UNKNOWN_TOPIC_OR_PARTITION);
    };
    let exists = shared
        .catalog()
        .streams
        .get(&stream)
        .is_some_and(|topics| topics.contains_key(&topic));
    match (exists, shared.catalog_freshness()) {
        (true, _) => described(shared, name, &stream, &topic),
        (false, CatalogFreshness::Current) => unknown(code::UNKNOWN_TOPIC_OR_PARTITION),
        (false, _) => unknown(code::LEADER_NOT_AVAILABLE),
    }
}

/// A topic of the catalog, described under Kafka name `name`.
fn described(shared: &Shared, name: &str, stream: &str, topic: &str) -> TopicMetadata {
    let catalog = shared.catalog();
    let views = |group: u64| shared.view_of(group).unwrap_or(0);
    let Some(info) = catalog.topic_info(stream, topic, &views) else {
        return TopicMetadata {
            error_code: code::UNKNOWN_TOPIC_OR_PARTITION,
            name: name.to_owned(),
            topic_id: [0; 16],
            partitions: Vec::new(),
        };
    };
    let first_group = info
        .partitions
        .first()
        .map_or(0, |partition| partition.group);
    let mut topic_id = [0u8; 16];
    topic_id[..8].copy_from_slice(&first_group.to_be_bytes());
    topic_id[8..].copy_from_slice(&shared.config.cluster.to_be_bytes());
    let partitions = info
        .partitions
        .iter()
        .map(|partition| {
            let replicas: Vec<i32> = partition.replicas.iter().map(|node| *node as i32).collect();
            let leader = match replicas.len() {
                0 => -1,
                count => replicas[partition.view as usize % count],
            };
            PartitionMetadata {
                error_code: code::NONE,
                partition: partition.partition as i32,
                leader,
                leader_epoch: partition.view as i32,
                in_sync: replicas.clone(),
                replicas,
            }
        })
        .collect();
    TopicMetadata {
        error_code: code::NONE,
        name: name.to_owned(),
        topic_id,
        partitions,
    }
}

/// The group of partition `partition` of the topic Kafka calls `name`, or
/// the Kafka error code that says why there is none.
pub fn group_of(shared: &Shared, name: &str, partition: i32) -> Result<u64, i16> {
    let (stream, topic) = names::to_strand(name, &shared.config.kafka.stream)
        .ok_or(code::UNKNOWN_TOPIC_OR_PARTITION)?;
    let catalog = shared.catalog();
    let entry = catalog
        .streams
        .get(&stream)
        .and_then(|topics| topics.get(&topic));
    let group = usize::try_from(partition)
        .ok()
        .and_then(|index| entry?.groups.get(index).copied());
    match (group, shared.catalog_freshness()) {
        (Some(group), _) => Ok(group),
        (None, CatalogFreshness::Current) => Err(code::UNKNOWN_TOPIC_OR_PARTITION),
        (None, _) => Err(code::LEADER_NOT_AVAILABLE),
    }
}

/// The view this node knows for `group`: the leader epoch it reports.
pub fn leader_epoch(shared: &Shared, group: u64) -> i32 {
    shared.view_of(group).unwrap_or(0) as i32
}
