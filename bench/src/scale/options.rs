//! The `strand-scale` command line: every flag, its default and its bounds.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::cluster::{NODES_MAX, NodeIo};
use crate::error::BenchError;
use crate::keys::Spread;
use crate::options::MESSAGE_SIZE_MAX;

/// Most topics a scale run creates.
pub const TOPICS_MAX: u32 = 4096;

/// Most partition groups (topics × partitions) a scale run creates: every
/// node answers a status poll with each group it hosts, in one frame.
pub const PARTITION_GROUPS_MAX: u64 = 100_000;

/// Longest `--idle-secs`, `--produce-secs` and `--settle-timeout-secs`.
pub const PHASE_SECS_MAX: f64 = 24.0 * 3600.0;

/// The most producers of the throughput phase.
pub const PRODUCERS_MAX: usize = 256;

/// Most rounds of the throughput phase.
pub const PRODUCE_ROUNDS_MAX: u32 = 20;

/// Largest `--batch`.
pub const BATCH_RECORDS_MAX: u32 = 100_000;

/// `strand-scale`: start a local cluster, create many partitions, and
/// report how long it takes to settle, what it costs at idle, and how it
/// restarts, fails over and carries load.
#[derive(Debug, Clone, Parser)]
#[command(name = "strand-scale", version, about)]
pub struct ScaleOptions {
    /// Nodes of the local cluster.
    #[arg(long, default_value_t = 3)]
    pub nodes: u32,
    /// Replicas per partition (default: 3, or --nodes when fewer).
    #[arg(long)]
    pub replicas: Option<u8>,
    /// Topics to create (`t0`, `t1`, … in stream `scale`).
    #[arg(long)]
    pub topics: u32,
    /// Partitions per topic.
    #[arg(long)]
    pub partitions: u32,
    /// The strand-server binary (default: beside this executable).
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
    /// Keep the cluster's data, configs and logs here (default: a temporary
    /// directory, removed at the end).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// How long to measure CPU at idle, once every group is quiet.
    #[arg(long, default_value_t = 10.0)]
    pub idle_secs: f64,
    /// The bound on each wait: creating the topics, settling, going quiet,
    /// writes resuming after the kill.
    #[arg(long, default_value_t = 600.0)]
    pub settle_timeout_secs: f64,
    /// SIGTERM every node, start them again, and time the settling.
    #[arg(long)]
    pub restart: bool,
    /// SIGKILL the node that is primary of the most partitions, time until
    /// each of those partitions takes a write again, then restart it.
    #[arg(long)]
    pub kill: bool,
    /// SIGKILL every node at once, start them all again, time the settling,
    /// and once leadership is balanced and every group quiet, count each
    /// group's view changes (the most any of its replicas started since,
    /// from the nodes' metrics): a crash of the whole cluster should cost a
    /// group at most one. Runs after --kill.
    #[arg(long)]
    pub kill_all: bool,
    /// After --kill, how long the returned node's groups may take to lead
    /// again so that no node leads more than its share plus a fifth (40 %
    /// of the groups on 3 nodes), counted from its restart.
    #[arg(long, default_value_t = 30.0)]
    pub rebalance_secs: f64,
    /// Produce for this long at the end, to one partition and then to every
    /// partition (0: skip).
    #[arg(long, default_value_t = 10.0)]
    pub produce_secs: f64,
    /// Producers in the throughput phase.
    #[arg(long, default_value_t = 4)]
    pub producers: usize,
    /// Rounds of the throughput phase: one partition and every partition,
    /// this many times in turn, in alternating order (one first in odd
    /// rounds). The report gives every round and takes the median round's
    /// ratio: a machine's speed drifts within a run, and one round may catch
    /// a slow stretch.
    #[arg(long, default_value_t = 1)]
    pub produce_rounds: u32,
    /// Value bytes per produced record.
    #[arg(long, default_value_t = 100)]
    pub message_size: usize,
    /// Records per batch.
    #[arg(long, default_value_t = 100)]
    pub batch: u32,
    /// How the every-partition run spreads consecutive records: `batch`
    /// (whole batches per partition in turn, as a sticky partitioner sends
    /// records without a key) or `record` (each record to the next partition,
    /// as evenly spread keys do).
    #[arg(long, value_enum, default_value_t = Spread::Batch)]
    pub spread: Spread,
    /// How the throughput phase's producers send: `producer` (the SDK's
    /// batching producer, one `send` per record, as an application writes)
    /// or `batches` (whole batches built by the bench and sent with
    /// `Client::produce`, as Iggy's bench sends them: the load generator's
    /// own cost per record is small, so the cluster gets the machine).
    /// `batches` spreads whole batches only.
    #[arg(long, value_enum, default_value_t = ClientApi::Producer)]
    pub client: ClientApi,
    /// How the nodes' WALs write: `default` (the server binary's own
    /// default), `direct` (`direct_io = true`: past the page cache) or
    /// `page-cache` (`direct_io = false`).
    #[arg(long, value_enum, default_value_t = NodeIo::Default)]
    pub node_io: NodeIo,
    /// Write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// Which client path the throughput phase drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ClientApi {
    /// The SDK's batching producer, one `send` per record.
    Producer,
    /// Batches built by the bench, one `Client::produce` each.
    Batches,
}

impl ScaleOptions {
    /// Checks the flags against each other and their bounds.
    pub fn validate(&self) -> Result<(), BenchError> {
        let invalid = |reason: String| Err(BenchError::Options(reason));
        if !(1..=NODES_MAX).contains(&self.nodes) {
            return invalid(format!("--nodes must be in 1..={NODES_MAX}"));
        }
        if !(1..=self.nodes).contains(&u32::from(self.replica_count())) {
            return invalid("--replicas must be in 1..=--nodes".to_owned());
        }
        if !(1..=TOPICS_MAX).contains(&self.topics) {
            return invalid(format!("--topics must be in 1..={TOPICS_MAX}"));
        }
        let partitions_max = strand_client::PARTITIONS_PER_TOPIC_MAX;
        if !(1..=partitions_max).contains(&self.partitions) {
            return invalid(format!("--partitions must be in 1..={partitions_max}"));
        }
        if self.partition_groups() > PARTITION_GROUPS_MAX {
            return invalid(format!(
                "--topics × --partitions must be at most {PARTITION_GROUPS_MAX}"
            ));
        }
        let positive = |secs: f64| secs.is_finite() && secs > 0.0 && secs <= PHASE_SECS_MAX;
        if !positive(self.idle_secs)
            || !positive(self.settle_timeout_secs)
            || !positive(self.rebalance_secs)
        {
            return invalid(format!(
                "--idle-secs, --settle-timeout-secs and --rebalance-secs must be in (0, {PHASE_SECS_MAX}]"
            ));
        }
        if !(self.produce_secs.is_finite() && (0.0..=PHASE_SECS_MAX).contains(&self.produce_secs)) {
            return invalid(format!("--produce-secs must be in [0, {PHASE_SECS_MAX}]"));
        }
        if self.message_size > MESSAGE_SIZE_MAX || !(1..=BATCH_RECORDS_MAX).contains(&self.batch) {
            return invalid(format!(
                "--message-size must be at most {MESSAGE_SIZE_MAX}, --batch in 1..={BATCH_RECORDS_MAX}"
            ));
        }
        if self.client == ClientApi::Batches && self.spread == Spread::Record {
            return invalid("--client batches sends whole batches: use --spread batch".to_owned());
        }
        if !(1..=PRODUCERS_MAX).contains(&self.producers) {
            return invalid(format!("--producers must be in 1..={PRODUCERS_MAX}"));
        }
        if !(1..=PRODUCE_ROUNDS_MAX).contains(&self.produce_rounds) {
            return invalid(format!(
                "--produce-rounds must be in 1..={PRODUCE_ROUNDS_MAX}"
            ));
        }
        if self.kill && self.replica_count() < 3 {
            return invalid(
                "--kill needs at least 3 replicas (a majority must survive the kill)".to_owned(),
            );
        }
        Ok(())
    }

    /// Replicas per partition: `--replicas`, else 3 (fewer on a smaller cluster).
    pub fn replica_count(&self) -> u8 {
        self.replicas
            .unwrap_or_else(|| self.nodes.clamp(1, 3) as u8)
    }

    /// Partition groups the run creates: topics × partitions.
    pub fn partition_groups(&self) -> u64 {
        u64::from(self.topics) * u64::from(self.partitions)
    }

    /// The bound on each wait.
    pub fn settle_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.settle_timeout_secs)
    }

    /// How long CPU is measured at idle.
    pub fn idle(&self) -> Duration {
        Duration::from_secs_f64(self.idle_secs)
    }

    /// The longest wait for leadership to rebalance after a kill.
    pub fn rebalance(&self) -> Duration {
        Duration::from_secs_f64(self.rebalance_secs)
    }

    /// How long the throughput phase produces (`None`: skipped).
    pub fn produce(&self) -> Option<Duration> {
        (self.produce_secs > 0.0).then(|| Duration::from_secs_f64(self.produce_secs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> ScaleOptions {
        let mut argv = vec!["strand-scale"];
        argv.extend_from_slice(args);
        ScaleOptions::try_parse_from(argv).expect("valid flags")
    }

    #[test]
    fn the_defaults_need_only_the_shape() {
        let options = parse(&["--topics", "2", "--partitions", "3"]);
        options.validate().expect("valid");
        assert_eq!((options.nodes, options.replica_count()), (3, 3));
        assert_eq!(options.partition_groups(), 6);
        assert_eq!(options.produce(), Some(Duration::from_secs(10)));
        assert_eq!(options.settle_timeout(), Duration::from_secs(600));
        assert!(!options.restart && !options.kill);
        let missing = ScaleOptions::try_parse_from(["strand-scale", "--topics", "2"]);
        assert!(missing.is_err(), "--partitions is required");
    }

    #[test]
    fn a_small_cluster_defaults_to_fewer_replicas() {
        let options = parse(&["--nodes", "1", "--topics", "1", "--partitions", "1"]);
        options.validate().expect("valid");
        assert_eq!(options.replica_count(), 1);
    }

    #[test]
    fn out_of_bounds_flags_are_refused() {
        let shape = ["--topics", "2", "--partitions", "3"];
        let refused = |extra: &[&str]| {
            let mut args = shape.to_vec();
            args.extend_from_slice(extra);
            parse(&args).validate().is_err()
        };
        assert!(refused(&["--replicas", "4"]));
        assert!(refused(&["--nodes", "8"]));
        assert!(refused(&["--idle-secs", "0"]));
        assert!(refused(&["--settle-timeout-secs", "0"]));
        assert!(refused(&["--rebalance-secs", "0"]));
        assert!(refused(&["--produce-secs", "NaN"]));
        assert!(refused(&["--batch", "0"]));
        assert!(refused(&["--producers", "0"]));
        assert!(refused(&["--produce-rounds", "0"]));
        assert!(refused(&["--produce-rounds", "21"]));
        assert!(refused(&["--nodes", "2", "--kill"]));
        assert!(!refused(&["--produce-secs", "0", "--kill", "--restart"]));
        assert!(refused(&["--client", "batches", "--spread", "record"]));
        assert!(!refused(&["--client", "batches"]));
        assert!(
            parse(&["--topics", "0", "--partitions", "3"])
                .validate()
                .is_err()
        );
        assert!(
            parse(&["--topics", "100", "--partitions", "4096"])
                .validate()
                .is_err()
        );
    }
}
