//! Fetch: record batches from partitions at offsets, with long polling.
//! Fetch sessions are not opened: every fetch is a full one, which clients
//! fall back to when a broker answers session id 0.

use bytes::{Bytes, BytesMut};

use crate::api::RequestHeader;
use crate::codec::{Reader, Writer};
use crate::error::DecodeError;

/// A Fetch request, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    /// How long to wait for `min_bytes`.
    pub max_wait_ms: i32,
    /// Bytes to wait for before answering.
    pub min_bytes: i32,
    /// Most bytes of records in the answer (after the first batch).
    pub max_bytes: i32,
    /// The fetch session the client names (0: none).
    pub session_id: i32,
    /// The topics and partitions to read.
    pub topics: Vec<FetchTopic>,
}

/// One topic's part of a Fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTopic {
    /// The Kafka topic name.
    pub name: String,
    /// The partitions to read.
    pub partitions: Vec<FetchPartition>,
}

/// One partition to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchPartition {
    /// The partition index.
    pub partition: i32,
    /// The offset to read from.
    pub fetch_offset: i64,
    /// Most bytes of records from this partition.
    pub partition_max_bytes: i32,
}

/// Reads a Fetch body.
pub fn decode(header: &RequestHeader, body: &mut Reader) -> Result<FetchRequest, DecodeError> {
    let version = header.version;
    body.i32("replica id")?;
    let max_wait_ms = body.i32("max wait ms")?;
    let min_bytes = body.i32("min bytes")?;
    let max_bytes = body.i32("max bytes")?;
    body.i8("isolation level")?;
    let (session_id, _epoch) = match version >= 7 {
        true => (body.i32("session id")?, body.i32("session epoch")?),
        false => (0, -1),
    };
    let topics = body.array("topics", |topic| {
        let name = topic.string("topic")?;
        let partitions =
            topic.array("partitions", |partition| read_partition(version, partition))?;
        topic.tagged_fields()?;
        Ok(FetchTopic { name, partitions })
    })?;
    if version >= 7 {
        body.array("forgotten topics", |topic| {
            topic.string("topic")?;
            topic.array("partitions", |partition| partition.i32("partition"))?;
            topic.tagged_fields()
        })?;
    }
    if version >= 11 {
        body.string("rack id")?;
    }
    body.tagged_fields()?;
    Ok(FetchRequest {
        max_wait_ms,
        min_bytes,
        max_bytes,
        session_id,
        topics,
    })
}

fn read_partition(version: i16, partition: &mut Reader) -> Result<FetchPartition, DecodeError> {
    let index = partition.i32("partition")?;
    if version >= 9 {
        partition.i32("current leader epoch")?;
    }
    let fetch_offset = partition.i64("fetch offset")?;
    if version >= 12 {
        partition.i32("last fetched epoch")?;
    }
    if version >= 5 {
        partition.i64("log start offset")?;
    }
    let partition_max_bytes = partition.i32("partition max bytes")?;
    partition.tagged_fields()?;
    Ok(FetchPartition {
        partition: index,
        fetch_offset,
        partition_max_bytes,
    })
}

/// What one partition's read gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    /// The partition index.
    pub partition: i32,
    /// Kafka error code (0: none).
    pub error_code: i16,
    /// One past the last committed offset (-1 on error).
    pub high_watermark: i64,
    /// The first retained offset (-1 on error).
    pub log_start_offset: i64,
    /// Kafka record batches (v2), back to back.
    pub records: Bytes,
}

/// Encodes a Fetch response body for `header`'s version.
pub fn encode(
    header: &RequestHeader,
    error_code: i16,
    topics: &[(String, Vec<FetchedPartition>)],
    throttle_time_ms: i32,
) -> BytesMut {
    let version = header.version;
    let mut writer = Writer::new(header.flexible());
    writer.i32(throttle_time_ms);
    if version >= 7 {
        writer.i16(error_code);
        writer.i32(0);
    }
    writer.array(topics, |writer, (name, partitions)| {
        writer.string(name);
        writer.array(partitions, |writer, fetched| {
            writer.i32(fetched.partition);
            writer.i16(fetched.error_code);
            writer.i64(fetched.high_watermark);
            writer.i64(fetched.high_watermark);
            if version >= 5 {
                writer.i64(fetched.log_start_offset);
            }
            writer.null_array();
            if version >= 11 {
                writer.i32(-1);
            }
            writer.bytes(&fetched.records);
            writer.tagged_fields();
        });
        writer.tagged_fields();
    });
    writer.tagged_fields();
    writer.finish()
}
