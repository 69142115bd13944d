//! The operator's commands: `strand accept-loss` and `strand partition ...`
//! (reassign, drop a retired replica), and the partition targets they take.

use clap::{Args, Subcommand};
use strand_wire::ConfirmPolicy;

use crate::PartitionTarget;

use super::{parse_confirm, parse_topic_path};

/// `strand accept-loss`.
#[derive(Debug, Args)]
pub(crate) struct AcceptLossArgs {
    /// The partition: a group id, or STREAM/TOPIC/PARTITION.
    #[arg(value_parser = parse_partition_target)]
    pub(crate) target: PartitionTarget,
    /// Confirm that confirmed records may be lost.
    #[arg(long)]
    pub(crate) yes: bool,
}

/// `strand partition ...`
#[derive(Debug, Subcommand)]
pub(crate) enum PartitionCommand {
    /// Give a partition a new replica set and, optionally, a new confirm
    /// policy. Replicas that stay keep their slots; removed replicas keep
    /// their data until `drop-replica`.
    Reassign(ReassignArgs),
    /// Delete the copy of a partition a node kept after a reassignment
    /// removed it. DELETES DATA; needs --yes.
    DropReplica(DropReplicaArgs),
}

/// `strand partition reassign`.
#[derive(Debug, Args)]
pub(crate) struct ReassignArgs {
    /// The partition: a group id, or STREAM/TOPIC/PARTITION.
    #[arg(value_parser = parse_partition_target)]
    pub(crate) target: PartitionTarget,
    /// The node ids that should hold the partition (comma-separated).
    #[arg(long, required = true, value_delimiter = ',', value_name = "NODES")]
    pub(crate) replicas: Vec<u32>,
    /// How many copies confirm a record: `majority`, `local` (every copy) or
    /// a count. Default: keep the current policy.
    #[arg(long, value_parser = parse_confirm)]
    pub(crate) confirm: Option<ConfirmPolicy>,
    /// Reassign even when `min(W, W')` or more of the new replicas lack
    /// acknowledged records (joining, or still catching up): one more lost
    /// copy could then lose confirmed records.
    #[arg(long)]
    pub(crate) force: bool,
    /// Only show what the move would do and whether the node's safety check
    /// passes now; nothing changes.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// `strand partition drop-replica`.
#[derive(Debug, Args)]
pub(crate) struct DropReplicaArgs {
    /// The partition: a group id, or STREAM/TOPIC/PARTITION.
    #[arg(value_parser = parse_partition_target)]
    pub(crate) target: PartitionTarget,
    /// The node whose retired copy is deleted.
    #[arg(long)]
    pub(crate) node: u32,
    /// Confirm that the node's copy of the partition is deleted.
    #[arg(long)]
    pub(crate) yes: bool,
    /// Drop it even while a replica of the partition is still catching up
    /// (or no primary serves): the removed copy may then hold records no
    /// member holds yet.
    #[arg(long)]
    pub(crate) force: bool,
    /// Only check whether the drop would be accepted now (no `--yes`
    /// needed); nothing is deleted.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// Parses a group id or `STREAM/TOPIC/PARTITION`.
pub(crate) fn parse_partition_target(text: &str) -> Result<PartitionTarget, String> {
    if let Ok(group) = text.parse::<u64>() {
        return Ok(PartitionTarget::Group(group));
    }
    let Some((topic, partition)) = text.rsplit_once('/') else {
        return Err(format!(
            "expected a group id or STREAM/TOPIC/PARTITION, got {text:?}"
        ));
    };
    let topic = parse_topic_path(topic)?;
    let partition = partition
        .parse::<u32>()
        .map_err(|_| format!("expected a partition index after the topic, got {partition:?}"))?;
    Ok(PartitionTarget::Partition {
        stream: topic.stream,
        topic: topic.topic,
        partition,
    })
}
