//! The command line: every flag, its default and its bounds.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use strand_client::Durability;

use crate::cluster::NODES_MAX;
use crate::error::BenchError;
use crate::failover::{FailoverPlan, Fault};
use crate::keys::Spread;
use crate::load::Stop;

/// Largest `--message-size` (the batch must fit a frame).
pub const MESSAGE_SIZE_MAX: usize = 1024 * 1024;

/// Most bench producers or consumers.
pub const CLIENTS_MAX: u32 = 256;

/// Largest `--in-flight` (the SDK's window).
pub const IN_FLIGHT_MAX: usize = 32;

/// A topic's durability, as a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DurabilityFlag {
    /// A copy counts once fsynced.
    Persisted,
    /// A copy counts once queued to the WAL writer.
    Replicated,
}

impl DurabilityFlag {
    /// The SDK's value.
    pub fn durability(self) -> Durability {
        match self {
            DurabilityFlag::Persisted => Durability::Persisted,
            DurabilityFlag::Replicated => Durability::Replicated,
        }
    }

    /// The flag's spelling.
    pub fn name(self) -> &'static str {
        match self {
            DurabilityFlag::Persisted => "persisted",
            DurabilityFlag::Replicated => "replicated",
        }
    }
}

/// `strand-bench`: load a Strand cluster through the SDK and report
/// throughput, produce-ack latency and (optionally) a failover.
#[derive(Debug, Clone, Parser)]
#[command(name = "strand-bench", version, about)]
pub struct Options {
    /// Nodes of the local cluster to start (ignored with --cluster).
    #[arg(long, default_value_t = 3)]
    pub nodes: u32,
    /// Bench a running cluster instead: client addresses, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub cluster: Vec<String>,
    /// With --cluster: the nodes' metrics addresses (host:port), comma-separated,
    /// in node id order (for the view-change count).
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// The strand-server binary (default: beside this executable).
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
    /// Keep the local cluster's data, configs and logs here (default: a
    /// temporary directory, removed at the end).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Replicas per partition (default: 3, or --nodes when fewer).
    #[arg(long)]
    pub replicas: Option<u8>,
    /// Concurrent producers.
    #[arg(long, default_value_t = 1)]
    pub producers: u32,
    /// Concurrent consumers tailing the partitions (0: none).
    #[arg(long, default_value_t = 0)]
    pub consumers: u32,
    /// Partitions of the benched topic.
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    /// Value bytes per record (each key adds 16).
    #[arg(long, default_value_t = 1024)]
    pub message_size: usize,
    /// Records per batch.
    #[arg(long, default_value_t = 100)]
    pub batch: u32,
    /// Batches in flight per partition and producer (1 to 32).
    #[arg(long, default_value_t = 8)]
    pub in_flight: usize,
    /// How long a partly filled batch waits for more records, in ms.
    #[arg(long, default_value_t = 2)]
    pub linger_ms: u64,
    /// Produce for this long (default 10 s unless --messages).
    #[arg(long, conflicts_with = "messages")]
    pub duration_secs: Option<f64>,
    /// Produce this many records in all, then stop.
    #[arg(long)]
    pub messages: Option<u64>,
    /// Records per second in all (default: as fast as acks allow).
    #[arg(long)]
    pub rate: Option<f64>,
    /// How a producer's consecutive records go over the partitions: `record`
    /// (each record to the next partition, as evenly spread keys do) or
    /// `batch` (a batch's worth to one partition, then the next, as a sticky
    /// partitioner sends records without a key).
    #[arg(long, value_enum, default_value_t = Spread::Record)]
    pub spread: Spread,
    /// The topic's durability (default: the cluster's topic default).
    #[arg(long, value_enum)]
    pub durability: Option<DurabilityFlag>,
    /// SIGKILL the benched partition's primary this many seconds into the load.
    #[arg(long)]
    pub kill_owner_at_secs: Option<f64>,
    /// How that node is taken down: `kill` (SIGKILL, restarted later) or
    /// `stop` (SIGSTOP: hung with its connections open; SIGCONT later).
    #[arg(long, value_enum, default_value_t = Fault::Kill, requires = "kill_owner_at_secs")]
    pub fault: Fault,
    /// Restart the killed node (SIGCONT a stopped one) this many seconds after the kill.
    #[arg(long, requires = "kill_owner_at_secs")]
    pub restart_after_secs: Option<f64>,
    /// How long to wait for the restarted node to catch up.
    #[arg(long, default_value_t = 60.0)]
    pub catch_up_timeout_secs: f64,
    /// Skip the read-back (no exactly-once verification).
    #[arg(long)]
    pub no_verify: bool,
    /// Write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write throughput and p99 per second as an SVG plot to this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

impl Options {
    /// Checks the flags against each other and their bounds.
    pub fn validate(&self) -> Result<(), BenchError> {
        let invalid = |reason: String| Err(BenchError::Options(reason));
        if self.cluster.is_empty() && !(1..=NODES_MAX).contains(&self.nodes) {
            return invalid(format!("--nodes must be in 1..={NODES_MAX}"));
        }
        if !(1..=CLIENTS_MAX).contains(&self.producers) || self.consumers > CLIENTS_MAX {
            return invalid(format!(
                "--producers must be in 1..={CLIENTS_MAX}, --consumers at most {CLIENTS_MAX}"
            ));
        }
        if !(1..=strand_client::PARTITIONS_PER_TOPIC_MAX).contains(&self.partitions) {
            return invalid("--partitions must be in 1..=4096".to_owned());
        }
        if self.message_size > MESSAGE_SIZE_MAX || self.batch == 0 {
            return invalid(format!(
                "--message-size must be at most {MESSAGE_SIZE_MAX}, --batch at least 1"
            ));
        }
        if !(1..=IN_FLIGHT_MAX).contains(&self.in_flight) {
            return invalid(format!("--in-flight must be in 1..={IN_FLIGHT_MAX}"));
        }
        if self
            .rate
            .is_some_and(|rate| !(rate.is_finite() && rate > 0.0))
        {
            return invalid("--rate must be above 0".to_owned());
        }
        if self.messages == Some(0) {
            return invalid("--messages must be at least 1".to_owned());
        }
        let seconds = [
            Some(self.catch_up_timeout_secs),
            self.duration_secs,
            self.kill_owner_at_secs,
            self.restart_after_secs,
        ];
        if seconds
            .iter()
            .flatten()
            .any(|secs| !(secs.is_finite() && *secs >= 0.0))
        {
            return invalid("durations must be non-negative numbers of seconds".to_owned());
        }
        if self.kill_owner_at_secs.is_some() && !self.cluster.is_empty() {
            return invalid(
                "--kill-owner-at-secs needs a local cluster (not --cluster)".to_owned(),
            );
        }
        let local_nodes = if self.cluster.is_empty() {
            self.nodes
        } else {
            15
        };
        if !(1..=local_nodes.min(15)).contains(&u32::from(self.replica_count())) {
            return invalid("--replicas must be in 1..=15 and at most --nodes".to_owned());
        }
        if self.kill_owner_at_secs.is_some() && self.replica_count() < 3 {
            return invalid("--kill-owner-at-secs needs at least 3 replicas".to_owned());
        }
        if let (Some(kill), Stop::After(duration)) = (self.kill_owner_at_secs, self.stop())
            && kill >= duration.as_secs_f64()
        {
            return invalid("--kill-owner-at-secs must fall within --duration-secs".to_owned());
        }
        Ok(())
    }

    /// When the producers stop.
    pub fn stop(&self) -> Stop {
        match (self.messages, self.duration_secs) {
            (Some(messages), _) => Stop::Messages(messages),
            (None, Some(secs)) => Stop::After(Duration::from_secs_f64(secs)),
            (None, None) => Stop::After(Duration::from_secs(10)),
        }
    }

    /// Replicas per partition: `--replicas`, else 3 (fewer on a smaller
    /// local cluster; a running cluster's size is not known up front).
    pub fn replica_count(&self) -> u8 {
        let nodes = if self.cluster.is_empty() {
            self.nodes
        } else {
            3
        };
        self.replicas.unwrap_or_else(|| nodes.clamp(1, 3) as u8)
    }

    /// The failover plan, if one was asked for.
    pub fn failover(&self) -> Option<FailoverPlan> {
        self.kill_owner_at_secs.map(|kill| FailoverPlan {
            fault: self.fault,
            kill_at: Duration::from_secs_f64(kill),
            restart_after: self.restart_after_secs.map(Duration::from_secs_f64),
            catch_up_timeout: Duration::from_secs_f64(self.catch_up_timeout_secs),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Options {
        let mut argv = vec!["strand-bench"];
        argv.extend_from_slice(args);
        Options::try_parse_from(argv).expect("valid flags")
    }

    #[test]
    fn the_defaults_are_a_ten_second_three_node_run() {
        let options = parse(&[]);
        options.validate().expect("the defaults are valid");
        assert_eq!(options.nodes, 3);
        assert_eq!(options.replica_count(), 3);
        assert_eq!(options.stop(), Stop::After(Duration::from_secs(10)));
        assert_eq!(options.failover(), None);
    }

    #[test]
    fn a_failover_run_reads_its_plan() {
        let options = parse(&[
            "--duration-secs",
            "30",
            "--kill-owner-at-secs",
            "5",
            "--restart-after-secs",
            "10",
            "--durability",
            "replicated",
        ]);
        options.validate().expect("valid");
        let plan = options.failover().expect("a plan");
        assert_eq!(plan.kill_at, Duration::from_secs(5));
        assert_eq!(plan.restart_after, Some(Duration::from_secs(10)));
        assert_eq!(options.durability, Some(DurabilityFlag::Replicated));
    }

    #[test]
    fn contradictions_are_refused() {
        assert!(
            parse(&["--kill-owner-at-secs", "20", "--duration-secs", "10"])
                .validate()
                .is_err()
        );
        assert!(
            parse(&["--nodes", "1", "--kill-owner-at-secs", "1"])
                .validate()
                .is_err()
        );
        assert!(parse(&["--in-flight", "33"]).validate().is_err());
        assert!(
            parse(&["--nodes", "3", "--replicas", "5"])
                .validate()
                .is_err()
        );
        let restart_without_kill = ["strand-bench", "--restart-after-secs", "3"];
        assert!(Options::try_parse_from(restart_without_kill).is_err());
        let both_stops = ["strand-bench", "--messages", "5", "--duration-secs", "3"];
        assert!(Options::try_parse_from(both_stops).is_err());
    }
}
