//! ListOffsets: a partition's earliest or latest offset, or the first at
//! or after a time.

use bytes::BytesMut;

use crate::api::RequestHeader;
use crate::codec::{Reader, Writer};
use crate::error::DecodeError;

/// The timestamp that asks for the next offset to be written.
pub const LATEST: i64 = -1;
/// The timestamp that asks for the first retained offset.
pub const EARLIEST: i64 = -2;
/// The timestamp that asks for the record with the largest timestamp.
pub const MAX_TIMESTAMP: i64 = -3;

/// One partition to look up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetQuery {
    /// The partition index.
    pub partition: i32,
    /// A time in ms, or [`LATEST`], [`EARLIEST`], [`MAX_TIMESTAMP`].
    pub timestamp: i64,
}

/// Reads a ListOffsets body: each topic's partitions to look up.
pub fn decode(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<Vec<(String, Vec<OffsetQuery>)>, DecodeError> {
    let version = header.version;
    body.i32("replica id")?;
    if version >= 2 {
        body.i8("isolation level")?;
    }
    let topics = body.array("topics", |topic| {
        let name = topic.string("topic")?;
        let partitions = topic.array("partitions", |partition| {
            let index = partition.i32("partition")?;
            if version >= 4 {
                partition.i32("current leader epoch")?;
            }
            let timestamp = partition.i64("timestamp")?;
            partition.tagged_fields()?;
            Ok(OffsetQuery {
                partition: index,
                timestamp,
            })
        })?;
        topic.tagged_fields()?;
        Ok((name, partitions))
    })?;
    body.tagged_fields()?;
    Ok(topics)
}

/// One partition's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetFound {
    /// The partition index.
    pub partition: i32,
    /// Kafka error code (0: none).
    pub error_code: i16,
    /// The timestamp of the record found (-1: not reported).
    pub timestamp: i64,
    /// The offset found (-1 on error).
    pub offset: i64,
    /// The leader's epoch (the partition's view).
    pub leader_epoch: i32,
}

/// Encodes a ListOffsets response body for `header`'s version.
pub fn encode(header: &RequestHeader, topics: &[(String, Vec<OffsetFound>)]) -> BytesMut {
    let version = header.version;
    let mut writer = Writer::new(header.flexible());
    if version >= 2 {
        writer.i32(0);
    }
    writer.array(topics, |writer, (name, partitions)| {
        writer.string(name);
        writer.array(partitions, |writer, found| {
            writer.i32(found.partition);
            writer.i16(found.error_code);
            writer.i64(found.timestamp);
            writer.i64(found.offset);
            if version >= 4 {
                writer.i32(found.leader_epoch);
            }
            writer.tagged_fields();
        });
        writer.tagged_fields();
    });
    writer.tagged_fields();
    writer.finish()
}

/// A topic and its partitions, each with the leader epoch asked about.
pub type EpochQuery = (String, Vec<(i32, i32)>);

/// Reads an OffsetForLeaderEpoch body (v2 to v4): each topic's partitions
/// and the leader epoch asked about.
pub fn decode_leader_epochs(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<Vec<EpochQuery>, DecodeError> {
    if header.version >= 3 {
        body.i32("replica id")?;
    }
    let topics = body.array("topics", |topic| {
        let name = topic.string("topic")?;
        let partitions = topic.array("partitions", |partition| {
            let index = partition.i32("partition")?;
            partition.i32("current leader epoch")?;
            let epoch = partition.i32("leader epoch")?;
            partition.tagged_fields()?;
            Ok((index, epoch))
        })?;
        topic.tagged_fields()?;
        Ok((name, partitions))
    })?;
    body.tagged_fields()?;
    Ok(topics)
}

/// Encodes an OffsetForLeaderEpoch response body: for each partition, its
/// error, the epoch answered and the end offset of it.
pub fn encode_leader_epochs(
    header: &RequestHeader,
    topics: &[(String, Vec<OffsetFound>)],
) -> BytesMut {
    let mut writer = Writer::new(header.flexible());
    writer.i32(0);
    writer.array(topics, |writer, (name, partitions)| {
        writer.string(name);
        writer.array(partitions, |writer, found| {
            writer.i16(found.error_code);
            writer.i32(found.partition);
            writer.i32(found.leader_epoch);
            writer.i64(found.offset);
            writer.tagged_fields();
        });
        writer.tagged_fields();
    });
    writer.tagged_fields();
    writer.finish()
}
