//! Produce: record batches for partitions, and where they landed.

use bytes::{Bytes, BytesMut};

use crate::api::RequestHeader;
use crate::codec::{Reader, Writer};
use crate::error::DecodeError;

/// A Produce request, decoded (its record sets still as Kafka bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRequest {
    /// Set only by a transactional producer, which is refused.
    pub transactional_id: Option<String>,
    /// 0: no response; 1 or -1: once the partition's confirm rule holds.
    pub acks: i16,
    /// How long the client waits.
    pub timeout_ms: i32,
    /// The topics and their partitions' record sets.
    pub topics: Vec<ProduceTopic>,
}

/// One topic's part of a Produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceTopic {
    /// The Kafka topic name.
    pub name: String,
    /// Its partitions' record sets.
    pub partitions: Vec<ProducePartition>,
}

/// One partition's record set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducePartition {
    /// The partition index.
    pub index: i32,
    /// The Kafka record batches, as sent.
    pub records: Bytes,
}

/// Reads a Produce body.
pub fn decode(body: &mut Reader) -> Result<ProduceRequest, DecodeError> {
    let transactional_id = body.nullable_string("transactional id")?;
    let acks = body.i16("acks")?;
    if !matches!(acks, -1..=1) {
        return Err(DecodeError::invalid("acks", "not -1, 0 or 1"));
    }
    let timeout_ms = body.i32("timeout ms")?;
    let topics = body.array("topics", |topic| {
        let name = topic.string("topic name")?;
        let partitions = topic.array("partitions", |partition| {
            let index = partition.i32("partition")?;
            let records = partition.bytes("records")?;
            partition.tagged_fields()?;
            Ok(ProducePartition { index, records })
        })?;
        topic.tagged_fields()?;
        Ok(ProduceTopic { name, partitions })
    })?;
    body.tagged_fields()?;
    Ok(ProduceRequest {
        transactional_id,
        acks,
        timeout_ms,
        topics,
    })
}

/// Where one partition's records landed, or why they did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionResult {
    /// The partition index.
    pub index: i32,
    /// Kafka error code (0: none).
    pub error_code: i16,
    /// The offset of the first record (-1 on error).
    pub base_offset: i64,
    /// The partition's first retained offset (-1 if unknown).
    pub log_start_offset: i64,
    /// Why, on error.
    pub message: Option<String>,
}

/// Encodes a Produce response body for `header`'s version.
pub fn encode(
    header: &RequestHeader,
    topics: &[(String, Vec<PartitionResult>)],
    throttle_time_ms: i32,
) -> BytesMut {
    let version = header.version;
    let mut writer = Writer::new(header.flexible());
    writer.array(topics, |writer, (name, partitions)| {
        writer.string(name);
        writer.array(partitions, |writer, result| {
            writer.i32(result.index);
            writer.i16(result.error_code);
            writer.i64(result.base_offset);
            writer.i64(-1);
            if version >= 5 {
                writer.i64(result.log_start_offset);
            }
            if version >= 8 {
                writer.array::<i32>(&[], |_, _| {});
                writer.nullable_string(result.message.as_deref());
            }
            writer.tagged_fields();
        });
        writer.tagged_fields();
    });
    writer.i32(throttle_time_ms);
    writer.tagged_fields();
    writer.finish()
}
