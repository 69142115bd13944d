//! Metadata-plane operations: streams and topics (create, delete, alter,
//! add partitions), accepting loss.

use crate::codec::{Body, BodyReader, BodyWriter};
use crate::error::BodyError;
use crate::header::REPLICAS_MAX;
use crate::policy::{ConfirmPolicy, Durability};

/// Most partitions one topic may have.
pub const PARTITIONS_PER_TOPIC_MAX: u32 = 4096;

/// Most streams a cluster keeps.
pub const STREAMS_MAX: usize = 4096;

/// Most topics a cluster keeps, over all its streams.
pub const TOPICS_MAX: usize = 16_384;

/// Most partitions a cluster keeps, over all its topics: each is a group
/// every node hosting it ticks, and one line of each hosting node's
/// status.
pub const PARTITIONS_MAX: usize = 32_768;

/// Smallest record-log segment a topic may ask for (64 KiB): smaller ones
/// would make a file of every few batches.
pub const SEGMENT_BYTES_MIN: u64 = 64 * 1024;

/// Largest record-log segment a topic may ask for (1 GiB).
pub const SEGMENT_BYTES_MAX: u64 = 1 << 30;

/// Create a stream: a namespace of topics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateStream {
    /// The stream's name.
    pub name: String,
}

impl Body for CreateStream {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.name);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<CreateStream, BodyError> {
        Ok(CreateStream {
            name: reader.name("stream")?,
        })
    }
}

/// Create a topic in a stream, with its partitions and policies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTopic {
    /// The stream the topic belongs to.
    pub stream: String,
    /// The topic's name.
    pub topic: String,
    /// Number of partitions (each its own VSR group), 1 to 4096.
    pub partition_count: u32,
    /// Replicas per partition (`E`), 1 to `REPLICAS_MAX - 1`.
    pub replica_count: u8,
    /// How many copies confirm a record (`None`: the cluster's default).
    pub confirm: Option<ConfirmPolicy>,
    /// When a copy of a record counts (`None`: the cluster's default).
    pub durability: Option<Durability>,
    /// Whether the primary fsyncs a cursor commit before acking it (`None`:
    /// the topic's durability).
    pub consumer_offset_durability: Option<Durability>,
    /// Records beyond this many bytes per partition are dropped oldest first (0: no limit).
    pub retention_bytes: u64,
    /// Records older than this are dropped (0: no limit).
    pub retention_ms: u64,
    /// Bytes per record-log segment file (`None`: the node's default, 256 MiB).
    /// Retention drops whole segments, so a topic with a small retention wants
    /// small segments.
    pub segment_bytes: Option<u64>,
}

impl Body for CreateTopic {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.stream);
        writer.str(&self.topic);
        writer.u32(self.partition_count);
        writer.u8(self.replica_count);
        let present = [
            (self.confirm.is_some(), POLICY_CONFIRM),
            (self.durability.is_some(), POLICY_DURABILITY),
            (
                self.consumer_offset_durability.is_some(),
                POLICY_CURSOR_DURABILITY,
            ),
            (self.segment_bytes.is_some(), POLICY_SEGMENT_BYTES),
        ]
        .into_iter()
        .filter(|(set, _)| *set)
        .fold(0, |bits, (_, bit)| bits | bit);
        writer.u8(present);
        if let Some(confirm) = self.confirm {
            let [kind, count] = confirm.to_bytes();
            writer.u8(kind);
            writer.u8(count);
        }
        if let Some(durability) = self.durability {
            writer.u8(durability as u8);
        }
        if let Some(durability) = self.consumer_offset_durability {
            writer.u8(durability as u8);
        }
        writer.u64(self.retention_bytes);
        writer.u64(self.retention_ms);
        // Last, so bodies from before the segment size existed (never bit
        // 8, nothing after `retention_ms`) still decode.
        if let Some(segment_bytes) = self.segment_bytes {
            writer.u64(segment_bytes);
        }
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<CreateTopic, BodyError> {
        let stream = reader.name("stream")?;
        let topic = reader.name("topic")?;
        let partition_count = reader.u32("partition count")?;
        if partition_count == 0 || partition_count > PARTITIONS_PER_TOPIC_MAX {
            return Err(BodyError::Invalid {
                field: "partition count",
                reason: "not in 1..=4096",
            });
        }
        let replica_count = reader.u8("replica count")?;
        if replica_count == 0 || replica_count >= REPLICAS_MAX {
            return Err(BodyError::Invalid {
                field: "replica count",
                reason: "not in 1..=15",
            });
        }
        let present = reader.u8("policies present")?;
        if present & !POLICIES_ALL != 0 {
            return Err(BodyError::Invalid {
                field: "policies present",
                reason: "unknown bits",
            });
        }
        let confirm = match present & POLICY_CONFIRM != 0 {
            true => Some(ConfirmPolicy::from_bytes([
                reader.u8("confirm")?,
                reader.u8("confirm")?,
            ])?),
            false => None,
        };
        let durability = match present & POLICY_DURABILITY != 0 {
            true => Some(Durability::from_u8(reader.u8("durability")?)?),
            false => None,
        };
        let consumer_offset_durability = match present & POLICY_CURSOR_DURABILITY != 0 {
            true => Some(Durability::from_u8(reader.u8("durability")?)?),
            false => None,
        };
        let retention_bytes = reader.u64("retention bytes")?;
        let retention_ms = reader.u64("retention ms")?;
        let segment_bytes = match present & POLICY_SEGMENT_BYTES != 0 {
            true => Some(reader.u64("segment bytes")?),
            false => None,
        };
        if segment_bytes
            .is_some_and(|bytes| !(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX).contains(&bytes))
        {
            return Err(BodyError::Invalid {
                field: "segment bytes",
                reason: "not in 64 KiB..=1 GiB",
            });
        }
        Ok(CreateTopic {
            stream,
            topic,
            partition_count,
            replica_count,
            confirm,
            durability,
            consumer_offset_durability,
            retention_bytes,
            retention_ms,
            segment_bytes,
        })
    }
}

/// CreateTopic's presence bits: which policies the request sets (the rest
/// take the cluster's defaults, filled in by the node that receives it). The
/// segment size, when set, is the body's last field, after `retention_ms`.
const POLICY_CONFIRM: u8 = 1;
const POLICY_DURABILITY: u8 = 2;
const POLICY_CURSOR_DURABILITY: u8 = 4;
const POLICY_SEGMENT_BYTES: u8 = 8;
const POLICIES_ALL: u8 =
    POLICY_CONFIRM | POLICY_DURABILITY | POLICY_CURSOR_DURABILITY | POLICY_SEGMENT_BYTES;

/// The reply to CreateTopic: the group id of each partition, in partition order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicCreated {
    /// Group id of partition `i` at index `i`.
    pub groups: Vec<u64>,
}

impl Body for TopicCreated {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.list(&self.groups, |writer, group| writer.u64(*group));
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<TopicCreated, BodyError> {
        Ok(TopicCreated {
            groups: reader.list("groups", 8, |reader| reader.u64("group"))?,
        })
    }
}

/// Delete a topic: every node removes its partitions' data; produces still
/// on their way are answered `Deleted`. The name may be created again, as a
/// new topic with new groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteTopic {
    /// The topic's stream.
    pub stream: String,
    /// The topic's name.
    pub topic: String,
}

impl Body for DeleteTopic {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.stream);
        writer.str(&self.topic);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<DeleteTopic, BodyError> {
        Ok(DeleteTopic {
            stream: reader.name("stream")?,
            topic: reader.name("topic")?,
        })
    }
}

/// Delete a stream and every topic in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteStream {
    /// The stream's name.
    pub name: String,
}

impl Body for DeleteStream {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.name);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<DeleteStream, BodyError> {
        Ok(DeleteStream {
            name: reader.name("stream")?,
        })
    }
}

/// The reply to DeleteTopic and DeleteStream: the groups of every partition
/// deleted, ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicsDeleted {
    /// Group ids of the deleted partitions.
    pub groups: Vec<u64>,
}

impl Body for TopicsDeleted {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.list(&self.groups, |writer, group| writer.u64(*group));
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<TopicsDeleted, BodyError> {
        Ok(TopicsDeleted {
            groups: reader.list("groups", 8, |reader| reader.u64("group"))?,
        })
    }
}

/// Change a topic's retention limits; each replica applies them at once.
/// A limit left `None` stays as it is; `Some(0)` removes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterTopic {
    /// The topic's stream.
    pub stream: String,
    /// The topic's name.
    pub topic: String,
    /// The new size limit per partition, in bytes.
    pub retention_bytes: Option<u64>,
    /// The new age limit, in milliseconds.
    pub retention_ms: Option<u64>,
}

/// AlterTopic's presence bits.
const ALTER_RETENTION_BYTES: u8 = 1;
const ALTER_RETENTION_MS: u8 = 2;
const ALTER_ALL: u8 = ALTER_RETENTION_BYTES | ALTER_RETENTION_MS;

impl Body for AlterTopic {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.stream);
        writer.str(&self.topic);
        let mut present = 0;
        if self.retention_bytes.is_some() {
            present |= ALTER_RETENTION_BYTES;
        }
        if self.retention_ms.is_some() {
            present |= ALTER_RETENTION_MS;
        }
        writer.u8(present);
        if let Some(bytes) = self.retention_bytes {
            writer.u64(bytes);
        }
        if let Some(ms) = self.retention_ms {
            writer.u64(ms);
        }
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<AlterTopic, BodyError> {
        let stream = reader.name("stream")?;
        let topic = reader.name("topic")?;
        let present = reader.u8("changes present")?;
        if present & !ALTER_ALL != 0 {
            return Err(BodyError::Invalid {
                field: "changes present",
                reason: "unknown bits",
            });
        }
        if present == 0 {
            return Err(BodyError::Invalid {
                field: "changes present",
                reason: "nothing to change",
            });
        }
        let retention_bytes = match present & ALTER_RETENTION_BYTES != 0 {
            true => Some(reader.u64("retention bytes")?),
            false => None,
        };
        let retention_ms = match present & ALTER_RETENTION_MS != 0 {
            true => Some(reader.u64("retention ms")?),
            false => None,
        };
        Ok(AlterTopic {
            stream,
            topic,
            retention_bytes,
            retention_ms,
        })
    }
}

/// Give a topic more partitions, with the topic's policies; existing
/// partitions and their records stay where they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddPartitions {
    /// The topic's stream.
    pub stream: String,
    /// The topic's name.
    pub topic: String,
    /// The topic's partition count afterwards (more than it has, at most
    /// 4096).
    pub partition_count: u32,
}

impl Body for AddPartitions {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.stream);
        writer.str(&self.topic);
        writer.u32(self.partition_count);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<AddPartitions, BodyError> {
        let stream = reader.name("stream")?;
        let topic = reader.name("topic")?;
        let partition_count = reader.u32("partition count")?;
        if partition_count == 0 || partition_count > PARTITIONS_PER_TOPIC_MAX {
            return Err(BodyError::Invalid {
                field: "partition count",
                reason: "not in 1..=4096",
            });
        }
        Ok(AddPartitions {
            stream,
            topic,
            partition_count,
        })
    }
}

/// Let group `group`'s stuck view change proceed with the logs at hand. May lose
/// confirmed records; the history start recorded for the view says what was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptLoss {
    /// The stuck group.
    pub group: u64,
}

impl Body for AcceptLoss {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u64(self.group);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<AcceptLoss, BodyError> {
        let group = reader.u64("group")?;
        if group == 0 {
            return Err(BodyError::Invalid {
                field: "group",
                reason: "the metadata plane never accepts loss",
            });
        }
        Ok(AcceptLoss { group })
    }
}

/// The reply to AcceptLoss: the view the group moved on in, and the op it
/// started at (records above `op` on other replicas were given up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptLossReply {
    /// The view started with the accepted loss.
    pub view: u32,
    /// The op the view started at.
    pub op: u64,
}

impl Body for AcceptLossReply {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u32(self.view);
        writer.u64(self.op);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<AcceptLossReply, BodyError> {
        Ok(AcceptLossReply {
            view: reader.u32("view")?,
            op: reader.u64("op")?,
        })
    }
}
