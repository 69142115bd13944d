//! Cluster status, attention and routing metadata.

use crate::codec::{Body, BodyReader, BodyWriter};
use crate::error::BodyError;
use crate::policy::{ConfirmPolicy, Durability};

/// A node of the cluster and its addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's id.
    pub id: u32,
    /// Where its replica bus listens (`host:port`).
    pub replica_address: String,
    /// Where its client port listens (`host:port`).
    pub client_address: String,
    /// Whether the answering node has a live connection to it.
    pub reachable: bool,
}

fn write_node(writer: &mut BodyWriter, node: &NodeInfo) {
    writer.u32(node.id);
    writer.str(&node.replica_address);
    writer.str(&node.client_address);
    writer.bool(node.reachable);
}

fn read_node(reader: &mut BodyReader<'_>) -> Result<NodeInfo, BodyError> {
    Ok(NodeInfo {
        id: reader.u32("node id")?,
        replica_address: reader.str("replica address")?.to_owned(),
        client_address: reader.str("client address")?.to_owned(),
        reachable: reader.bool("reachable")?,
    })
}

/// Reads a confirm policy's two bytes.
pub(super) fn read_confirm(reader: &mut BodyReader<'_>) -> Result<ConfirmPolicy, BodyError> {
    ConfirmPolicy::from_bytes([reader.u8("confirm")?, reader.u8("confirm")?])
}

/// Writes a confirm policy's two bytes.
pub(super) fn write_confirm(writer: &mut BodyWriter, confirm: ConfirmPolicy) {
    let [kind, count] = confirm.to_bytes();
    writer.u8(kind);
    writer.u8(count);
}

/// What the answering node knows of one replica of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    /// Replica index in the group.
    pub replica: u8,
    /// Node hosting it.
    pub node: u32,
    /// Highest op the primary knows it holds (0 if unknown).
    pub op: u64,
    /// Whether it holds every committed op (counts toward confirms).
    pub caught_up: bool,
}

/// One group (partition, or the metadata plane) as the answering node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStatus {
    /// Group id (0: the metadata plane).
    pub group: u64,
    /// Stream name (empty for the metadata plane).
    pub stream: String,
    /// Topic name (empty for the metadata plane).
    pub topic: String,
    /// Partition index within the topic.
    pub partition: u32,
    /// Assignment epoch.
    pub epoch: u32,
    /// Confirm policy.
    pub confirm: ConfirmPolicy,
    /// Durability policy.
    pub durability: Durability,
    /// Copies that confirm a record (`W`).
    pub write_quorum: u8,
    /// Trusted DoViewChanges a view change needs (`R = E - W + 1`).
    pub view_change_quorum: u8,
    /// The local replica's index.
    pub replica: u8,
    /// The local replica's view.
    pub view: u32,
    /// The view its log was last settled in.
    pub log_view: u32,
    /// `normal`, `view_change`, `recovering` or `awaiting_state_transfer`.
    pub status: String,
    /// The primary of `view`.
    pub primary: u8,
    /// The local replica's highest op.
    pub op: u64,
    /// The local replica's commit number.
    pub commit_op: u64,
    /// The earliest record offset this replica still holds (retention drops
    /// older ones); 0 for the metadata plane.
    pub log_start_offset: u64,
    /// One past the last record offset this replica has committed.
    pub high_watermark: u64,
    /// Whether the local replica's log is untrusted.
    pub untrusted_log: bool,
    /// Every replica of the group.
    pub replicas: Vec<ReplicaStatus>,
}

impl Body for GroupStatus {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u64(self.group);
        writer.str(&self.stream);
        writer.str(&self.topic);
        writer.u32(self.partition);
        writer.u32(self.epoch);
        write_confirm(writer, self.confirm);
        writer.u8(self.durability as u8);
        writer.u8(self.write_quorum);
        writer.u8(self.view_change_quorum);
        writer.u8(self.replica);
        writer.u32(self.view);
        writer.u32(self.log_view);
        writer.str(&self.status);
        writer.u8(self.primary);
        writer.u64(self.op);
        writer.u64(self.commit_op);
        writer.u64(self.log_start_offset);
        writer.u64(self.high_watermark);
        writer.bool(self.untrusted_log);
        writer.list(&self.replicas, |writer, replica| {
            writer.u8(replica.replica);
            writer.u32(replica.node);
            writer.u64(replica.op);
            writer.bool(replica.caught_up);
        });
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<GroupStatus, BodyError> {
        Ok(GroupStatus {
            group: reader.u64("group")?,
            stream: reader.str("stream")?.to_owned(),
            topic: reader.str("topic")?.to_owned(),
            partition: reader.u32("partition")?,
            epoch: reader.u32("epoch")?,
            confirm: read_confirm(reader)?,
            durability: Durability::from_u8(reader.u8("durability")?)?,
            write_quorum: reader.u8("write quorum")?,
            view_change_quorum: reader.u8("view change quorum")?,
            replica: reader.u8("replica")?,
            view: reader.u32("view")?,
            log_view: reader.u32("log view")?,
            status: reader.str("status")?.to_owned(),
            primary: reader.u8("primary")?,
            op: reader.u64("op")?,
            commit_op: reader.u64("commit op")?,
            log_start_offset: reader.u64("log start offset")?,
            high_watermark: reader.u64("high watermark")?,
            untrusted_log: reader.bool("untrusted log")?,
            replicas: reader.list("replicas", 14, |reader| {
                Ok(ReplicaStatus {
                    replica: reader.u8("replica")?,
                    node: reader.u32("node")?,
                    op: reader.u64("op")?,
                    caught_up: reader.bool("caught up")?,
                })
            })?,
        })
    }
}

/// The request of `GroupStatus`: one group's status as the answering node's
/// replica sees it, without the rest of the node's groups (what a node's
/// partition-move check asks the partition's replicas).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupStatusRequest {
    /// The group asked about.
    pub group: u64,
}

impl Body for GroupStatusRequest {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u64(self.group);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<GroupStatusRequest, BodyError> {
        Ok(GroupStatusRequest {
            group: reader.u64("group")?,
        })
    }
}

/// The reply to `GroupStatus`: the answering node's replica of the group,
/// or `None` when the node hosts none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStatusReply {
    /// The replica's status, if the node hosts one.
    pub status: Option<GroupStatus>,
}

impl Body for GroupStatusReply {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.bool(self.status.is_some());
        if let Some(status) = &self.status {
            status.encode(writer);
        }
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<GroupStatusReply, BodyError> {
        let status = match reader.bool("hosted")? {
            true => Some(GroupStatus::decode(reader)?),
            false => None,
        };
        Ok(GroupStatusReply { status })
    }
}

/// The reply to ClusterStatus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStatusReply {
    /// The answering node.
    pub node: u32,
    /// Every node of the cluster.
    pub nodes: Vec<NodeInfo>,
    /// Every group hosted on the answering node.
    pub groups: Vec<GroupStatus>,
}

impl Body for ClusterStatusReply {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u32(self.node);
        writer.list(&self.nodes, write_node);
        writer.list(&self.groups, |writer, group| group.encode(writer));
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<ClusterStatusReply, BodyError> {
        Ok(ClusterStatusReply {
            node: reader.u32("node")?,
            nodes: reader.list("nodes", 9, read_node)?,
            groups: reader.list("groups", 56, GroupStatus::decode)?,
        })
    }
}

/// Why a group's view change waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AttentionReason {
    /// Fewer than `R` trusted DoViewChanges, and not every replica has reported.
    FewerTrustedThanQuorum = 1,
    /// The best log at hand ends below the latest recorded history start.
    BelowHistoryStart = 2,
    /// The local replica awaits a state transfer.
    AwaitingStateTransfer = 3,
    /// An op that may be confirmed has no copy among the replicas that
    /// reported, and too few trusted replicas say they never had it.
    MissingPrepare = 4,
    /// This node's copy cannot use its storage: it could not be opened, or
    /// a write, sync or superblock write failed (a full or failing disk).
    /// It serves nothing until the node opens it again (by itself once the
    /// disk has room; after a restart on a sound disk otherwise).
    StorageFailed = 5,
    /// The node's data disk has less room than its reserve: it refuses
    /// produces (`DiskFull`) until space is freed, then takes them again by
    /// itself. Reported once per node, as group 0.
    DiskFull = 6,
    /// This node's copy stopped on a bug in the node's own code (a panic
    /// contained to the group): the node no longer vouches for it, so its
    /// other replicas serve without it, and opens it again from disk after
    /// a pause that doubles with each failure.
    GroupFailed = 7,
}

impl AttentionReason {
    fn from_u8(value: u8) -> Result<AttentionReason, BodyError> {
        match value {
            1 => Ok(AttentionReason::FewerTrustedThanQuorum),
            2 => Ok(AttentionReason::BelowHistoryStart),
            3 => Ok(AttentionReason::AwaitingStateTransfer),
            4 => Ok(AttentionReason::MissingPrepare),
            5 => Ok(AttentionReason::StorageFailed),
            6 => Ok(AttentionReason::DiskFull),
            7 => Ok(AttentionReason::GroupFailed),
            _ => Err(BodyError::UnknownValue {
                field: "attention reason",
                value: u64::from(value),
            }),
        }
    }
}

/// One group that needs an operator's attention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionEntry {
    /// The group.
    pub group: u64,
    /// Stream name.
    pub stream: String,
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
    /// The view the group is trying to start.
    pub view: u32,
    /// Why it waits.
    pub reason: AttentionReason,
    /// Replica indexes it waits for.
    pub awaited: Vec<u8>,
    /// More for humans: the nodes it waits for, the start it waits below.
    pub detail: String,
    /// The latest history start the view change knows: for
    /// [`AttentionReason::BelowHistoryStart`], the one no log at hand
    /// reaches. `None` when there is none, or the answering node is older
    /// than this field.
    pub history_start: Option<AttentionStart>,
}

/// A history start as `attention` names it (reference A: "the start's
/// record count and the node that took over there").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionStart {
    /// The view that started there.
    pub view: u32,
    /// The op the view started with.
    pub op: u64,
    /// One past the last record offset at the start: records below it were
    /// written before the view started (`None`: not recorded, a start from
    /// before starts carried it).
    pub offset_end: Option<u64>,
    /// The replica (slot) that took over there, as the view's new primary.
    pub replica: u8,
    /// The node holding that slot (`None`: the answering node does not know).
    pub node: Option<u32>,
}

/// The start for humans, by its record offset and the node that took over
/// there: "view 5 at record offset 1200 (op 40), taken over by node 2".
impl core::fmt::Display for AttentionStart {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(formatter, "view {} at record offset ", self.view)?;
        match self.offset_end {
            Some(offset) => write!(formatter, "{offset}")?,
            None => write!(formatter, "unknown")?,
        }
        write!(formatter, " (op {}), taken over by ", self.op)?;
        match self.node {
            Some(node) => write!(formatter, "node {node}"),
            None => write!(formatter, "replica {}", self.replica),
        }
    }
}

fn write_start(writer: &mut BodyWriter, start: Option<&AttentionStart>) {
    writer.bool(start.is_some());
    let Some(start) = start else {
        return;
    };
    writer.u32(start.view);
    writer.u64(start.op);
    writer.option_u64(start.offset_end);
    writer.u8(start.replica);
    writer.option_u64(start.node.map(u64::from));
}

fn read_start(reader: &mut BodyReader<'_>) -> Result<Option<AttentionStart>, BodyError> {
    if !reader.bool("history start")? {
        return Ok(None);
    }
    let view = reader.u32("history start view")?;
    let op = reader.u64("history start op")?;
    let offset_end = reader.option_u64("history start offset end")?;
    let replica = reader.u8("history start replica")?;
    let node = match reader.option_u64("history start node")? {
        Some(node) => Some(u32::try_from(node).map_err(|_| BodyError::Invalid {
            field: "history start node",
            reason: "not a node id",
        })?),
        None => None,
    };
    Ok(Some(AttentionStart {
        view,
        op,
        offset_end,
        replica,
        node,
    }))
}

/// The reply to Attention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionReply {
    /// Every waiting group hosted on the answering node.
    pub entries: Vec<AttentionEntry>,
}

impl Body for AttentionReply {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.list(&self.entries, |writer, entry| {
            writer.u64(entry.group);
            writer.str(&entry.stream);
            writer.str(&entry.topic);
            writer.u32(entry.partition);
            writer.u32(entry.view);
            writer.u8(entry.reason as u8);
            writer.list(&entry.awaited, |writer, replica| writer.u8(*replica));
            writer.str(&entry.detail);
        });
        // Last, one per entry, so that a reply from before history starts
        // were named (nothing after the entries) still decodes.
        writer.list(&self.entries, |writer, entry| {
            write_start(writer, entry.history_start.as_ref())
        });
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<AttentionReply, BodyError> {
        // The smallest entry: empty names, no awaited replica, no detail.
        let entries: Vec<AttentionEntry> = reader.list("attention entries", 27, |reader| {
            Ok(AttentionEntry {
                group: reader.u64("group")?,
                stream: reader.str("stream")?.to_owned(),
                topic: reader.str("topic")?.to_owned(),
                partition: reader.u32("partition")?,
                view: reader.u32("view")?,
                reason: AttentionReason::from_u8(reader.u8("reason")?)?,
                awaited: reader.list("awaited", 1, |reader| reader.u8("replica"))?,
                detail: reader.str("detail")?.to_owned(),
                history_start: None,
            })
        })?;
        if reader.remaining() == 0 {
            return Ok(AttentionReply { entries });
        }
        let starts = reader.list("attention history starts", 1, read_start)?;
        if starts.len() != entries.len() {
            return Err(BodyError::Invalid {
                field: "attention history starts",
                reason: "not one per entry",
            });
        }
        let entries = entries
            .into_iter()
            .zip(starts)
            .map(|(entry, history_start)| AttentionEntry {
                history_start,
                ..entry
            })
            .collect();
        Ok(AttentionReply { entries })
    }
}

/// Ask for routing metadata: every topic, one stream's, or one topic's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetadataRequest {
    /// Only this stream (`None`: every stream).
    pub stream: Option<String>,
    /// Only this topic of `stream` (`None`: every topic).
    pub topic: Option<String>,
}

impl Body for MetadataRequest {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(self.stream.as_deref().unwrap_or(""));
        writer.str(self.topic.as_deref().unwrap_or(""));
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<MetadataRequest, BodyError> {
        let stream = optional_name(reader, "stream")?;
        let topic = optional_name(reader, "topic")?;
        if topic.is_some() && stream.is_none() {
            return Err(BodyError::Invalid {
                field: "topic",
                reason: "given without a stream",
            });
        }
        Ok(MetadataRequest { stream, topic })
    }
}

fn optional_name(
    reader: &mut BodyReader<'_>,
    field: &'static str,
) -> Result<Option<String>, BodyError> {
    let name = reader.str(field)?;
    if name.is_empty() {
        return Ok(None);
    }
    crate::codec::validate_name(field, name)?;
    Ok(Some(name.to_owned()))
}

/// One partition's routing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Partition index in the topic.
    pub partition: u32,
    /// The partition's group id (the `group` of requests to it).
    pub group: u64,
    /// Assignment epoch.
    pub epoch: u32,
    /// The member nodes in ascending slot order (slots are replica indexes
    /// a node keeps while it is a member; some may be free). The primary of
    /// view `v` is `replicas[v % E]`: the `v mod E`-th occupied slot.
    pub replicas: Vec<u32>,
    /// The latest view the answering node knows (a hint for the primary).
    pub view: u32,
}

/// One topic's policies and partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Stream name.
    pub stream: String,
    /// Topic name.
    pub topic: String,
    /// Confirm policy.
    pub confirm: ConfirmPolicy,
    /// Durability policy.
    pub durability: Durability,
    /// Cursor commit durability.
    pub consumer_offset_durability: Durability,
    /// Retention by size (0: none).
    pub retention_bytes: u64,
    /// Retention by age (0: none).
    pub retention_ms: u64,
    /// Bytes per record-log segment (0: the node's default).
    pub segment_bytes: u64,
    /// Its partitions, in order.
    pub partitions: Vec<PartitionInfo>,
}

/// The reply to Metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataReply {
    /// Every node and its addresses.
    pub nodes: Vec<NodeInfo>,
    /// Every stream name (including streams without topics).
    pub streams: Vec<String>,
    /// The topics asked for.
    pub topics: Vec<TopicInfo>,
    /// How long a partition's primary may go silent before its backups
    /// elect another and that one serves (the primary timeout plus the view
    /// change timeout, in ms). A client waits about this long for one
    /// attempt before it tries the next replica.
    pub failover_ms: u32,
}

impl Body for MetadataReply {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.list(&self.nodes, write_node);
        writer.list(&self.streams, |writer, stream| writer.str(stream));
        writer.list(&self.topics, |writer, topic| {
            writer.str(&topic.stream);
            writer.str(&topic.topic);
            write_confirm(writer, topic.confirm);
            writer.u8(topic.durability as u8);
            writer.u8(topic.consumer_offset_durability as u8);
            writer.u64(topic.retention_bytes);
            writer.u64(topic.retention_ms);
            writer.u64(topic.segment_bytes);
            writer.list(&topic.partitions, |writer, partition| {
                writer.u32(partition.partition);
                writer.u64(partition.group);
                writer.u32(partition.epoch);
                writer.list(&partition.replicas, |writer, node| writer.u32(*node));
                writer.u32(partition.view);
            });
        });
        writer.u32(self.failover_ms);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<MetadataReply, BodyError> {
        let nodes = reader.list("nodes", 9, read_node)?;
        let streams = reader.list("streams", 2, |reader| reader.name("stream"))?;
        let topics = reader.list("topics", 38, |reader| {
            Ok(TopicInfo {
                stream: reader.name("stream")?,
                topic: reader.name("topic")?,
                confirm: read_confirm(reader)?,
                durability: Durability::from_u8(reader.u8("durability")?)?,
                consumer_offset_durability: Durability::from_u8(reader.u8("durability")?)?,
                retention_bytes: reader.u64("retention bytes")?,
                retention_ms: reader.u64("retention ms")?,
                segment_bytes: reader.u64("segment bytes")?,
                partitions: reader.list("partitions", 24, |reader| {
                    Ok(PartitionInfo {
                        partition: reader.u32("partition")?,
                        group: reader.u64("group")?,
                        epoch: reader.u32("epoch")?,
                        replicas: reader.list("replicas", 4, |reader| reader.u32("node"))?,
                        view: reader.u32("view")?,
                    })
                })?,
            })
        })?;
        let failover_ms = reader.u32("failover ms")?;
        Ok(MetadataReply {
            nodes,
            streams,
            topics,
            failover_ms,
        })
    }
}
