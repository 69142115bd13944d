//! `strand stream ...` and `strand topic ...`: create, list, describe, alter,
//! grow and delete, with each topic's policies.

use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use strand_wire::ops::{SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN};
use strand_wire::{ConfirmPolicy, Durability, REPLICAS_MAX};

use crate::client::PARTITIONS_PER_TOPIC_MAX;

use super::{TopicPath, parse_confirm, parse_stream_name, parse_topic_path};

/// `strand stream ...`
#[derive(Debug, Subcommand)]
pub(crate) enum StreamCommand {
    /// Create a stream.
    Create {
        /// The stream's name (ASCII letters, digits, '.', '_', '-').
        name: String,
    },
    /// List the streams.
    List,
    /// Delete a stream and every topic in it. DELETES DATA; needs --yes.
    Delete(StreamDeleteArgs),
}

/// `strand stream delete`.
#[derive(Debug, Args)]
pub(crate) struct StreamDeleteArgs {
    /// The stream.
    #[arg(value_parser = parse_stream_name)]
    pub(crate) name: String,
    /// Confirm that every topic of the stream, with its records and
    /// cursors, is deleted.
    #[arg(long)]
    pub(crate) yes: bool,
}

/// `strand topic ...`
#[derive(Debug, Subcommand)]
pub(crate) enum TopicCommand {
    /// Create a topic (and its stream, if missing). Policies not given take
    /// the cluster's topic defaults.
    Create(TopicCreateArgs),
    /// List every topic with its policies.
    List,
    /// One topic's policies and partitions (replicas, view, primary, and
    /// the earliest offset and end its primary reports).
    Describe {
        /// The topic, as STREAM/TOPIC.
        #[arg(value_parser = parse_topic_path)]
        topic: TopicPath,
    },
    /// Change a topic's retention limits or confirm policy; its records
    /// stay. A confirm policy changes partition by partition (each through
    /// a reassignment onto its current replicas).
    Alter(TopicAlterArgs),
    /// Give a topic more partitions (its existing ones stay as they are).
    AddPartitions(AddPartitionsArgs),
    /// Delete a topic: its partitions, records and cursors, on every node.
    /// DELETES DATA; needs --yes.
    Delete(TopicDeleteArgs),
}

/// `strand topic alter`: at least one change.
#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("change")
        .required(true)
        .multiple(true)
        .args(["retention_bytes", "retention_ms", "confirm"])
))]
pub(crate) struct TopicAlterArgs {
    /// The topic, as STREAM/TOPIC.
    #[arg(value_parser = parse_topic_path)]
    pub(crate) topic: TopicPath,
    /// New per-partition size limit in bytes, oldest dropped first (0:
    /// none), as `topic create` takes it.
    #[arg(long)]
    pub(crate) retention_bytes: Option<u64>,
    /// New age limit in milliseconds (0: none).
    #[arg(long)]
    pub(crate) retention_ms: Option<u64>,
    /// How many copies confirm a record from now on: `majority`, `local`
    /// (every copy) or a count.
    #[arg(long, value_parser = parse_confirm)]
    pub(crate) confirm: Option<ConfirmPolicy>,
}

/// `strand topic add-partitions`.
#[derive(Debug, Args)]
pub(crate) struct AddPartitionsArgs {
    /// The topic, as STREAM/TOPIC.
    #[arg(value_parser = parse_topic_path)]
    pub(crate) topic: TopicPath,
    /// The topic's partition count afterwards (more than it has now).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=i64::from(PARTITIONS_PER_TOPIC_MAX)))]
    pub(crate) count: u32,
}

/// `strand topic delete`.
#[derive(Debug, Args)]
pub(crate) struct TopicDeleteArgs {
    /// The topic, as STREAM/TOPIC.
    #[arg(value_parser = parse_topic_path)]
    pub(crate) topic: TopicPath,
    /// Confirm that the topic's records and cursors are deleted.
    #[arg(long)]
    pub(crate) yes: bool,
}

/// `strand topic create`.
#[derive(Debug, Args)]
pub(crate) struct TopicCreateArgs {
    /// The topic, as STREAM/TOPIC.
    #[arg(value_parser = parse_topic_path)]
    pub(crate) topic: TopicPath,
    /// Number of partitions (each its own replicated group).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(PARTITIONS_PER_TOPIC_MAX)))]
    pub(crate) partitions: u32,
    /// Replicas per partition.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..i64::from(REPLICAS_MAX)))]
    pub(crate) replicas: u8,
    /// When a copy counts: `persisted` (fsynced) or `replicated` (queued).
    /// Default: the cluster's topic defaults.
    #[arg(long, value_enum)]
    pub(crate) durability: Option<DurabilityArg>,
    /// How many copies confirm a record: `majority`, `local` (every copy) or
    /// a count. Default: the cluster's topic defaults.
    #[arg(long, value_parser = parse_confirm)]
    pub(crate) confirm: Option<ConfirmPolicy>,
    /// Per-partition size limit in bytes, oldest dropped first (0: none).
    #[arg(long, default_value_t = 0)]
    pub(crate) retention_bytes: u64,
    /// Age limit in milliseconds (0: none).
    #[arg(long, default_value_t = 0)]
    pub(crate) retention_ms: u64,
    /// Bytes per record-log segment file, 65536 (64 KiB) to 1073741824
    /// (1 GiB). Retention drops whole segments, so a small retention wants
    /// small segments. Default: the node's (256 MiB).
    #[arg(long, value_parser = clap::value_parser!(u64).range(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX))]
    pub(crate) segment_bytes: Option<u64>,
}

/// A durability policy as a flag value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DurabilityArg {
    /// A copy counts once fsynced.
    Persisted,
    /// A copy counts once queued to the WAL writer.
    Replicated,
}

impl From<DurabilityArg> for Durability {
    fn from(value: DurabilityArg) -> Durability {
        match value {
            DurabilityArg::Persisted => Durability::Persisted,
            DurabilityArg::Replicated => Durability::Replicated,
        }
    }
}
