//! Metadata: the brokers, and each topic's partitions with their leaders.
//! A leader is the partition's primary and its epoch is the view, so a
//! client that reads a newer epoch knows its old leader is gone.

use bytes::BytesMut;

use crate::api::RequestHeader;
use crate::codec::{Reader, Writer};
use crate::error::DecodeError;

/// A Metadata request, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataRequest {
    /// The topics asked for (`None`: every topic).
    pub topics: Option<Vec<String>>,
    /// Whether the client would have a missing topic created (never done:
    /// topics are created on purpose, by CreateTopics or `strand`).
    pub allow_auto_topic_creation: bool,
}

/// Reads a Metadata body.
pub fn decode(header: &RequestHeader, body: &mut Reader) -> Result<MetadataRequest, DecodeError> {
    let version = header.version;
    let topics = body.nullable_array("topics", |topic| {
        if version >= 10 {
            topic.uuid("topic id")?;
        }
        let name = match version >= 10 {
            true => topic.nullable_string("topic name")?,
            false => Some(topic.string("topic name")?),
        };
        topic.tagged_fields()?;
        name.ok_or(DecodeError::invalid(
            "topic name",
            "topics by id are not served",
        ))
    })?;
    // Version 0 asks for every topic with an empty list.
    let topics = match (version, topics) {
        (0, Some(topics)) if topics.is_empty() => None,
        (_, topics) => topics,
    };
    let allow_auto_topic_creation = version >= 4 && body.bool("allow auto topic creation")?;
    if (8..=10).contains(&version) {
        body.bool("include cluster authorized operations")?;
    }
    if version >= 8 {
        body.bool("include topic authorized operations")?;
    }
    body.tagged_fields()?;
    Ok(MetadataRequest {
        topics,
        allow_auto_topic_creation,
    })
}

/// A broker as Kafka clients reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    /// The node id.
    pub node_id: i32,
    /// The host its Kafka listener is advertised at.
    pub host: String,
    /// The port.
    pub port: i32,
    /// Its rack, if it has one.
    pub rack: Option<String>,
}

/// One partition's leader and replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// Kafka error code (0: none).
    pub error_code: i16,
    /// The partition index.
    pub partition: i32,
    /// The leader's node id (-1: none known).
    pub leader: i32,
    /// The leader's epoch: the partition's view.
    pub leader_epoch: i32,
    /// Every replica's node.
    pub replicas: Vec<i32>,
    /// The replicas in sync (those that count toward confirms).
    pub in_sync: Vec<i32>,
}

/// One topic's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Kafka error code (0: none).
    pub error_code: i16,
    /// The Kafka name (as asked for, when asked by name).
    pub name: String,
    /// A stable id for the topic.
    pub topic_id: [u8; 16],
    /// Its partitions, in order.
    pub partitions: Vec<PartitionMetadata>,
}

/// A Metadata response, before encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataResponse {
    /// Every broker.
    pub brokers: Vec<Broker>,
    /// The cluster's id.
    pub cluster_id: String,
    /// The node said to be the controller (the metadata plane's primary).
    pub controller_id: i32,
    /// The topics.
    pub topics: Vec<TopicMetadata>,
}

/// Encodes a Metadata response body for `header`'s version.
pub fn encode(header: &RequestHeader, response: &MetadataResponse) -> BytesMut {
    let version = header.version;
    let mut writer = Writer::new(header.flexible());
    if version >= 3 {
        writer.i32(0);
    }
    writer.array(&response.brokers, |writer, broker| {
        writer.i32(broker.node_id);
        writer.string(&broker.host);
        writer.i32(broker.port);
        if version >= 1 {
            writer.nullable_string(broker.rack.as_deref());
        }
        writer.tagged_fields();
    });
    if version >= 2 {
        writer.nullable_string(Some(&response.cluster_id));
    }
    if version >= 1 {
        writer.i32(response.controller_id);
    }
    writer.array(&response.topics, |writer, topic| {
        write_topic(writer, version, topic)
    });
    if (8..=10).contains(&version) {
        writer.i32(i32::MIN);
    }
    writer.tagged_fields();
    writer.finish()
}

fn write_topic(writer: &mut Writer, version: i16, topic: &TopicMetadata) {
    writer.i16(topic.error_code);
    writer.string(&topic.name);
    if version >= 10 {
        writer.uuid(topic.topic_id);
    }
    if version >= 1 {
        writer.bool(false);
    }
    writer.array(&topic.partitions, |writer, partition| {
        writer.i16(partition.error_code);
        writer.i32(partition.partition);
        writer.i32(partition.leader);
        if version >= 7 {
            writer.i32(partition.leader_epoch);
        }
        writer.array(&partition.replicas, |writer, node| writer.i32(*node));
        writer.array(&partition.in_sync, |writer, node| writer.i32(*node));
        if version >= 5 {
            writer.array::<i32>(&[], |_, _| {});
        }
        writer.tagged_fields();
    });
    if version >= 8 {
        // Authorized operations are not reported.
        writer.i32(i32::MIN);
    }
    writer.tagged_fields();
}
