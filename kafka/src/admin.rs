//! The admin APIs: CreateTopics, DeleteTopics, CreatePartitions,
//! DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and
//! DescribeCluster, decoded and encoded.

use bytes::BytesMut;

use crate::api::RequestHeader;
use crate::codec::{Reader, Writer};
use crate::error::DecodeError;
use crate::metadata::Broker;

/// The resource type of a topic in the config APIs.
pub const RESOURCE_TOPIC: i8 = 2;

/// One topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// The Kafka name.
    pub name: String,
    /// Partitions (-1: the default).
    pub partitions: i32,
    /// Replicas per partition (-1: the default).
    pub replication_factor: i16,
    /// Whether it names its replicas itself (refused: placement is the
    /// cluster's).
    pub assigned: bool,
    /// Its configs.
    pub configs: Vec<(String, Option<String>)>,
}

/// Reads a CreateTopics body: the topics, and whether only to validate.
pub fn decode_create_topics(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<(Vec<NewTopic>, bool), DecodeError> {
    let topics = body.array("topics", |topic| {
        let name = topic.string("topic")?;
        let partitions = topic.i32("partitions")?;
        let replication_factor = topic.i16("replication factor")?;
        let assignments = topic.array("assignments", |assignment| {
            assignment.i32("partition")?;
            assignment.array("brokers", |broker| broker.i32("broker"))?;
            assignment.tagged_fields()
        })?;
        let configs = read_configs(topic)?;
        topic.tagged_fields()?;
        Ok(NewTopic {
            name,
            partitions,
            replication_factor,
            assigned: !assignments.is_empty(),
            configs,
        })
    })?;
    body.i32("timeout ms")?;
    let validate_only = header.version >= 1 && body.bool("validate only")?;
    body.tagged_fields()?;
    Ok((topics, validate_only))
}

fn read_configs(reader: &mut Reader) -> Result<Vec<(String, Option<String>)>, DecodeError> {
    reader.array("configs", |config| {
        let name = config.string("config name")?;
        let value = config.nullable_string("config value")?;
        config.tagged_fields()?;
        Ok((name, value))
    })
}

/// One topic's outcome in CreateTopics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicOutcome {
    /// The Kafka name.
    pub name: String,
    /// A stable id (zero when it was not created).
    pub topic_id: [u8; 16],
    /// Kafka error code (0: none).
    pub error_code: i16,
    /// Why, on error.
    pub message: Option<String>,
    /// Its partitions (-1 on error).
    pub partitions: i32,
    /// Its replicas per partition (-1 on error).
    pub replication_factor: i16,
}

/// Encodes a CreateTopics response body.
pub fn encode_create_topics(header: &RequestHeader, topics: &[TopicOutcome]) -> BytesMut {
    let version = header.version;
    let mut writer = Writer::new(header.flexible());
    if version >= 2 {
        writer.i32(0);
    }
    writer.array(topics, |writer, topic| {
        writer.string(&topic.name);
        if version >= 7 {
            writer.uuid(topic.topic_id);
        }
        writer.i16(topic.error_code);
        if version >= 1 {
            writer.nullable_string(topic.message.as_deref());
        }
        if version >= 5 {
            writer.i32(topic.partitions);
            writer.i16(topic.replication_factor);
            // No configs listed (Java reads an empty list, not a null one).
            writer.array::<i32>(&[], |_, _| {});
        }
        writer.tagged_fields();
    });
    writer.tagged_fields();
    writer.finish()
}

/// Reads a DeleteTopics body (v1 to v5): the topic names.
pub fn decode_delete_topics(body: &mut Reader) -> Result<Vec<String>, DecodeError> {
    let names = body.array("topic names", |name| name.string("topic"))?;
    body.i32("timeout ms")?;
    body.tagged_fields()?;
    Ok(names)
}

/// Encodes a DeleteTopics response body: each name's error.
pub fn encode_delete_topics(
    header: &RequestHeader,
    topics: &[(String, i16, Option<String>)],
) -> BytesMut {
    let mut writer = Writer::new(header.flexible());
    writer.i32(0);
    writer.array(topics, |writer, (name, error_code, message)| {
        writer.string(name);
        writer.i16(*error_code);
        if header.version >= 5 {
            writer.nullable_string(message.as_deref());
        }
        writer.tagged_fields();
    });
    writer.tagged_fields();
    writer.finish()
}

/// A topic to grow: its name, its partition count afterwards, and whether
/// the request names the new partitions' replicas.
pub type Growth = (String, i32, bool);

/// Reads a CreatePartitions body: each topic's new partition count (and
/// whether it names the new replicas, refused), and whether only to
/// validate.
pub fn decode_create_partitions(body: &mut Reader) -> Result<(Vec<Growth>, bool), DecodeError> {
    let topics = body.array("topics", |topic| {
        let name = topic.string("topic")?;
        let count = topic.i32("count")?;
        let assignments = topic.nullable_array("assignments", |assignment| {
            assignment.array("brokers", |broker| broker.i32("broker"))?;
            assignment.tagged_fields()
        })?;
        topic.tagged_fields()?;
        Ok((name, count, assignments.is_some()))
    })?;
    body.i32("timeout ms")?;
    let validate_only = body.bool("validate only")?;
    body.tagged_fields()?;
    Ok((topics, validate_only))
}

/// Encodes a CreatePartitions (or AlterConfigs-shaped) response body:
/// each topic's error.
pub fn encode_create_partitions(
    header: &RequestHeader,
    topics: &[(String, i16, Option<String>)],
) -> BytesMut {
    let mut writer = Writer::new(header.flexible());
    writer.i32(0);
    writer.array(topics, |writer, (name, error_code, message)| {
        writer.string(name);
        writer.i16(*error_code);
        writer.nullable_string(message.as_deref());
        writer.tagged_fields();
    });
    writer.tagged_fields();
    writer.finish()
}

/// A resource whose configs are asked for: its type, its name, and the
/// keys asked for (`None`: every one).
pub type ConfigQuery = (i8, String, Option<Vec<String>>);

/// Reads a DescribeConfigs body: each resource (type, name, the keys
/// asked for or all).
pub fn decode_describe_configs(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<Vec<ConfigQuery>, DecodeError> {
    let resources = body.array("resources", |resource| {
        let kind = resource.i8("resource type")?;
        let name = resource.string("resource name")?;
        let keys = resource.nullable_array("configuration keys", |key| key.string("key"))?;
        resource.tagged_fields()?;
        Ok((kind, name, keys))
    })?;
    body.bool("include synonyms")?;
    if header.version >= 3 {
        body.bool("include documentation")?;
    }
    body.tagged_fields()?;
    Ok(resources)
}

/// One resource's configs as DescribeConfigs answers them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// Kafka error code (0: none).
    pub error_code: i16,
    /// Why, on error.
    pub message: Option<String>,
    /// The resource type.
    pub kind: i8,
    /// The resource name.
    pub name: String,
    /// Its configs: name, value, read-only.
    pub configs: Vec<(String, String, bool)>,
}

/// Encodes a DescribeConfigs response body.
pub fn encode_describe_configs(header: &RequestHeader, described: &[Described]) -> BytesMut {
    let version = header.version;
    let mut writer = Writer::new(header.flexible());
    writer.i32(0);
    writer.array(described, |writer, resource| {
        writer.i16(resource.error_code);
        writer.nullable_string(resource.message.as_deref());
        writer.i8(resource.kind);
        writer.string(&resource.name);
        writer.array(&resource.configs, |writer, (name, value, read_only)| {
            writer.string(name);
            writer.nullable_string(Some(value));
            writer.bool(*read_only);
            // Source: a topic's own setting (1), or the default (5).
            writer.i8(1);
            writer.bool(false);
            writer.array::<i32>(&[], |_, _| {});
            if version >= 3 {
                writer.i8(0);
                writer.nullable_string(None);
            }
            writer.tagged_fields();
        });
        writer.tagged_fields();
    });
    writer.tagged_fields();
    writer.finish()
}

/// One resource to alter: type, name, and each config's operation (0 set,
/// 1 delete; AlterConfigs sets every config it names) and value.
pub type Alteration = (i8, String, Vec<(String, i8, Option<String>)>);

/// Reads an AlterConfigs (`incremental` false) or IncrementalAlterConfigs
/// body, and whether only to validate.
pub fn decode_alter_configs(
    body: &mut Reader,
    incremental: bool,
) -> Result<(Vec<Alteration>, bool), DecodeError> {
    let resources = body.array("resources", |resource| {
        let kind = resource.i8("resource type")?;
        let name = resource.string("resource name")?;
        let configs = resource.array("configs", |config| {
            let key = config.string("config name")?;
            let operation = match incremental {
                true => config.i8("config operation")?,
                false => 0,
            };
            let value = config.nullable_string("config value")?;
            config.tagged_fields()?;
            Ok((key, operation, value))
        })?;
        resource.tagged_fields()?;
        Ok((kind, name, configs))
    })?;
    let validate_only = body.bool("validate only")?;
    body.tagged_fields()?;
    Ok((resources, validate_only))
}

/// Encodes an (Incremental)AlterConfigs response body: each resource's
/// error.
pub fn encode_alter_configs(
    header: &RequestHeader,
    resources: &[(i8, String, i16, Option<String>)],
) -> BytesMut {
    let mut writer = Writer::new(header.flexible());
    writer.i32(0);
    writer.array(resources, |writer, (kind, name, error_code, message)| {
        writer.i16(*error_code);
        writer.nullable_string(message.as_deref());
        writer.i8(*kind);
        writer.string(name);
        writer.tagged_fields();
    });
    writer.tagged_fields();
    writer.finish()
}

/// Reads a DescribeCluster body (nothing this node uses).
pub fn decode_describe_cluster(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<(), DecodeError> {
    body.bool("include cluster authorized operations")?;
    if header.version >= 1 {
        body.i8("endpoint type")?;
    }
    body.tagged_fields()
}

/// Encodes a DescribeCluster response body.
pub fn encode_describe_cluster(
    header: &RequestHeader,
    cluster_id: &str,
    controller_id: i32,
    brokers: &[Broker],
) -> BytesMut {
    let mut writer = Writer::new(header.flexible());
    writer.i32(0);
    writer.i16(0);
    writer.nullable_string(None);
    if header.version >= 1 {
        writer.i8(1);
    }
    writer.string(cluster_id);
    writer.i32(controller_id);
    writer.array(brokers, |writer, broker| {
        writer.i32(broker.node_id);
        writer.string(&broker.host);
        writer.i32(broker.port);
        writer.nullable_string(broker.rack.as_deref());
        writer.tagged_fields();
    });
    writer.i32(i32::MIN);
    writer.tagged_fields();
    writer.finish()
}
