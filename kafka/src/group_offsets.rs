//! OffsetCommit and OffsetFetch: a consumer group's offsets, which are the
//! partitions' Strand cursors named after the group.

use bytes::BytesMut;

use crate::api::RequestHeader;
use crate::codec::{Reader, Writer};
use crate::error::DecodeError;

/// An OffsetCommit request, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommit {
    /// The group.
    pub group_id: String,
    /// The committing member's generation (-1: a consumer outside any
    /// generation, which commits unchecked).
    pub generation_id: i32,
    /// The committing member ("" outside a generation).
    pub member_id: String,
    /// Each topic's partitions and the offsets to commit.
    pub topics: Vec<(String, Vec<(i32, i64)>)>,
}

/// Reads an OffsetCommit body.
pub fn decode_commit(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<OffsetCommit, DecodeError> {
    let version = header.version;
    let group_id = body.string("group id")?;
    let generation_id = body.i32("generation id")?;
    let member_id = body.string("member id")?;
    if version >= 7 {
        body.nullable_string("group instance id")?;
    }
    if (2..=4).contains(&version) {
        body.i64("retention time ms")?;
    }
    let topics = body.array("topics", |topic| {
        let name = topic.string("topic")?;
        let partitions = topic.array("partitions", |partition| {
            let index = partition.i32("partition")?;
            let offset = partition.i64("committed offset")?;
            if version >= 6 {
                partition.i32("committed leader epoch")?;
            }
            partition.nullable_string("committed metadata")?;
            partition.tagged_fields()?;
            Ok((index, offset))
        })?;
        topic.tagged_fields()?;
        Ok((name, partitions))
    })?;
    body.tagged_fields()?;
    Ok(OffsetCommit {
        group_id,
        generation_id,
        member_id,
        topics,
    })
}

/// Encodes an OffsetCommit response body: each partition's error code.
pub fn encode_commit(header: &RequestHeader, topics: &[(String, Vec<(i32, i16)>)]) -> BytesMut {
    let mut writer = Writer::new(header.flexible());
    if header.version >= 3 {
        writer.i32(0);
    }
    writer.array(topics, |writer, (name, partitions)| {
        writer.string(name);
        writer.array(partitions, |writer, (index, error_code)| {
            writer.i32(*index);
            writer.i16(*error_code);
            writer.tagged_fields();
        });
        writer.tagged_fields();
    });
    writer.tagged_fields();
    writer.finish()
}

/// A topic and some of its partitions.
pub type TopicPartitions = (String, Vec<i32>);

/// Reads an OffsetFetch body: the group, and the partitions asked for
/// (`None`: every partition the group has an offset on).
pub fn decode_fetch(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<(String, Option<Vec<TopicPartitions>>), DecodeError> {
    let group_id = body.string("group id")?;
    let topics = body.nullable_array("topics", |topic| {
        let name = topic.string("topic")?;
        let partitions = topic.array("partitions", |partition| partition.i32("partition"))?;
        topic.tagged_fields()?;
        Ok((name, partitions))
    })?;
    if header.version >= 7 {
        body.bool("require stable")?;
    }
    body.tagged_fields()?;
    Ok((group_id, topics))
}

/// One partition's committed offset (-1: none) and error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// The partition index.
    pub partition: i32,
    /// The offset (-1: none committed).
    pub offset: i64,
    /// Kafka error code (0: none).
    pub error_code: i16,
}

/// Encodes an OffsetFetch response body.
pub fn encode_fetch(
    header: &RequestHeader,
    topics: &[(String, Vec<Committed>)],
    error_code: i16,
) -> BytesMut {
    let version = header.version;
    let mut writer = Writer::new(header.flexible());
    if version >= 3 {
        writer.i32(0);
    }
    writer.array(topics, |writer, (name, partitions)| {
        writer.string(name);
        writer.array(partitions, |writer, committed| {
            writer.i32(committed.partition);
            writer.i64(committed.offset);
            if version >= 5 {
                writer.i32(-1);
            }
            writer.nullable_string(Some(""));
            writer.i16(committed.error_code);
            writer.tagged_fields();
        });
        writer.tagged_fields();
    });
    if version >= 2 {
        writer.i16(error_code);
    }
    writer.tagged_fields();
    writer.finish()
}
