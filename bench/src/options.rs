//! The command line: every flag, its default and its bounds.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use strand_client::Durability;

use crate::cluster::{NODES_MAX, NodeIo};
use crate::error::BenchError;
use crate::failover::{FailoverPlan, Fault};
use crate::keys::Spread;
use crate::load::Stop;
use crate::retention::{self, RetentionLimit};
use crate::soak::{SOAK_SAMPLES_MIN, SoakPlan};

/// Largest `--message-size` (the batch must fit a frame).
pub const MESSAGE_SIZE_MAX: usize = 1024 * 1024;

/// Most bench producers or consumers.
pub const CLIENTS_MAX: u32 = 256;

/// Largest `--in-flight` (the SDK's window).
pub const IN_FLIGHT_MAX: usize = 32;

/// Shortest `--sample-secs`: a soak's disk walk and offset fetches must fit
/// well within one window.
pub const SAMPLE_SECS_MIN: f64 = 1.0;

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
    /// The local cluster serves TLS (client port) and mutual TLS (replica
    /// bus), with a CA and node certificates `strand-server certs` makes,
    /// and requires signing in: the bench signs in as a user that may use
    /// only the bench's stream, so every request pays the rights check.
    #[arg(long, conflicts_with = "cluster")]
    pub tls: bool,
    /// How the local cluster's WALs write: `default` (the server binary's
    /// own default), `direct` (`direct_io = true`: past the page cache) or
    /// `page-cache` (`direct_io = false`).
    #[arg(long, value_enum, default_value_t = NodeIo::Default, conflicts_with = "cluster")]
    pub node_io: NodeIo,
    /// A running cluster's CA certificate (PEM): connect to it with TLS.
    #[arg(long, requires = "cluster")]
    pub ca: Option<PathBuf>,
    /// Replicas per partition (default: 3, or --nodes when fewer).
    #[arg(long)]
    pub replicas: Option<u8>,
    /// Concurrent producers.
    #[arg(long, default_value_t = 1)]
    pub producers: u32,
    /// Concurrent consumers tailing the partitions (0: none).
    #[arg(long, default_value_t = 0)]
    pub consumers: u32,
    /// Make the --consumers members of consumer group NAME: the cluster
    /// shares the topic's partitions among them, instead of each tailing
    /// fixed partitions. Needs --consumers from 1 to --partitions. On a
    /// running cluster (--cluster) use a new name per run: a group reads one
    /// topic, and every run creates a new topic.
    #[arg(long, value_name = "NAME")]
    pub group: Option<String>,
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
    /// The topic's size limit per partition in bytes: its oldest segments
    /// are dropped while the rest still holds at least the limit (default:
    /// no limit).
    #[arg(long)]
    pub retention_bytes: Option<u64>,
    /// The topic's record-log segment size in bytes, 64 KiB to 1 GiB
    /// (default: a sixteenth of --retention-bytes within that range, else
    /// the node's default, 256 MiB).
    #[arg(long)]
    pub segment_bytes: Option<u64>,
    /// Soak: run --rate for --duration-secs and sample acks and each node's
    /// disk every --sample-secs; fails unless throughput stays flat and,
    /// with --retention-bytes, disk stays within the limit (local cluster).
    #[arg(long)]
    pub soak: bool,
    /// With --soak: seconds per sample.
    #[arg(long, default_value_t = 60.0, requires = "soak")]
    pub sample_secs: f64,
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
    /// Write throughput and p99 per second as an SVG plot to this file (a
    /// soak: throughput and each node's disk bytes per sample).
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
        self.validate_topic_limits()?;
        self.validate_group()?;
        self.validate_soak()
    }

    /// `--group` turns the consumers into one group's members: there must be
    /// some, each with a partition to read, and the name must be one the
    /// cluster takes (checked here, so that a bad name fails before a local
    /// cluster starts rather than at the first join).
    fn validate_group(&self) -> Result<(), BenchError> {
        let Some(group) = &self.group else {
            return Ok(());
        };
        let invalid = |reason: String| Err(BenchError::Options(reason));
        if let Some(problem) = group_name_problem(group) {
            return invalid(format!("--group {group:?}: {problem}"));
        }
        if self.consumers == 0 {
            return invalid(
                "--group needs --consumers 1 or more: the consumers are the group's members"
                    .to_owned(),
            );
        }
        if self.consumers > self.partitions {
            return invalid(format!(
                "--group with --consumers {} over --partitions {}: a group gives each partition \
                 to one member, so {} of the members would have none to read",
                self.consumers,
                self.partitions,
                self.consumers - self.partitions
            ));
        }
        Ok(())
    }

    /// `--retention-bytes` and `--segment-bytes` against their bounds.
    fn validate_topic_limits(&self) -> Result<(), BenchError> {
        if self.retention_bytes == Some(0) {
            return Err(BenchError::Options(
                "--retention-bytes must be at least 1 (leave it out for no limit)".to_owned(),
            ));
        }
        let segment_range = strand_client::SEGMENT_BYTES_MIN..=strand_client::SEGMENT_BYTES_MAX;
        if self
            .segment_bytes
            .is_some_and(|bytes| !segment_range.contains(&bytes))
        {
            return Err(BenchError::Options(
                "--segment-bytes must be in 65536..=1073741824 (64 KiB to 1 GiB)".to_owned(),
            ));
        }
        Ok(())
    }

    /// `--soak` needs a set load for a set time on a local cluster, and at
    /// least [`SOAK_SAMPLES_MIN`] samples in it.
    fn validate_soak(&self) -> Result<(), BenchError> {
        if !self.soak {
            return Ok(());
        }
        let invalid = |reason: &str| Err(BenchError::Options(reason.to_owned()));
        let (Some(duration_secs), Some(_)) = (self.duration_secs, self.rate) else {
            return invalid(
                "--soak needs --duration-secs and --rate: a soak holds a set load (half the \
                 peak rate, say) for a set time",
            );
        };
        if !self.cluster.is_empty() {
            return invalid(
                "--soak needs a local cluster (not --cluster): it reads each node's \
                 data directory",
            );
        }
        if self.kill_owner_at_secs.is_some() {
            return invalid(
                "--soak and --kill-owner-at-secs do not mix: a failover is not \
                 steady load",
            );
        }
        if !(self.sample_secs.is_finite() && self.sample_secs >= SAMPLE_SECS_MIN) {
            return invalid("--sample-secs must be at least 1");
        }
        if duration_secs < f64::from(SOAK_SAMPLES_MIN) * self.sample_secs {
            return Err(BenchError::Options(format!(
                "--soak needs at least {SOAK_SAMPLES_MIN} samples: --duration-secs at least \
                 {SOAK_SAMPLES_MIN} x --sample-secs ({})",
                self.sample_secs
            )));
        }
        Ok(())
    }

    /// The topic's segment size: `--segment-bytes`, else a sixteenth of
    /// `--retention-bytes` (within 64 KiB to 1 GiB), else `None` (the
    /// node's default).
    pub fn topic_segment_bytes(&self) -> Option<u64> {
        self.segment_bytes
            .or_else(|| self.retention_bytes.map(retention::segment_bytes_for))
    }

    /// The topic's size limit, if it has one.
    pub fn retention(&self) -> Option<RetentionLimit> {
        let retention_bytes = self.retention_bytes?;
        let segment_bytes = self.topic_segment_bytes()?;
        Some(RetentionLimit {
            retention_bytes,
            segment_bytes,
        })
    }

    /// The soak's sampling, if this is a soak.
    pub fn soak_plan(&self) -> Option<SoakPlan> {
        if !self.soak {
            return None;
        }
        let duration_secs = self.duration_secs?;
        let samples = (duration_secs / self.sample_secs).floor() as u32;
        Some(SoakPlan {
            sample_period: Duration::from_secs_f64(self.sample_secs),
            samples,
        })
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

/// Longest name the cluster takes (a stream's, a topic's, a group's).
const NAME_BYTES_MAX: usize = 255;

/// What is wrong with `name` as a consumer group's name, if anything: the
/// server's rule for names (`strand_wire::codec::validate_name`, which this
/// crate does not link): 1 to 255 bytes of ASCII letters, digits, `.`, `_`
/// and `-`, not starting with `.`.
fn group_name_problem(name: &str) -> Option<&'static str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() {
        Some("a group name is not empty")
    } else if name.len() > NAME_BYTES_MAX {
        Some("a group name is at most 255 bytes")
    } else if name.starts_with('.') {
        Some("a group name does not start with '.'")
    } else if !name.chars().all(allowed) {
        Some("a group name holds only ASCII letters, digits, '.', '_' and '-'")
    } else {
        None
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

    #[test]
    fn a_group_needs_members_each_with_a_partition_and_a_name_the_cluster_takes() {
        let group = parse(&["--group", "bench", "--consumers", "3", "--partitions", "12"]);
        group.validate().expect("valid");
        assert_eq!(group.group.as_deref(), Some("bench"));
        assert_eq!(
            parse(&["--consumers", "3"]).group,
            None,
            "no group by default"
        );
        let error = |args: &[&str]| parse(args).validate().expect_err("refused").to_string();
        let without_members = error(&["--group", "bench"]);
        assert!(
            without_members.contains("--group needs --consumers 1 or more"),
            "{without_members}"
        );
        let idle = error(&["--group", "g", "--consumers", "4", "--partitions", "3"]);
        assert!(
            idle.contains("1 of the members would have none to read"),
            "{idle}"
        );
        let long = "a".repeat(256);
        for bad in ["", ".hidden", "two words", "a/b", long.as_str()] {
            let message = error(&["--group", bad, "--consumers", "1"]);
            assert!(message.starts_with("invalid options: --group"), "{message}");
        }
        let edge = "a".repeat(255);
        assert!(
            parse(&["--group", &edge, "--consumers", "1"])
                .validate()
                .is_ok()
        );
        assert!(
            parse(&["--group", "a.b_c-9", "--consumers", "1"])
                .validate()
                .is_ok()
        );
    }

    const SOAK: [&str; 5] = ["--soak", "--duration-secs", "1800", "--rate", "60000"];

    #[test]
    fn a_soak_samples_every_minute_by_default() {
        let mut args = SOAK.to_vec();
        args.extend(["--retention-bytes", "1073741824"]);
        let options = parse(&args);
        options.validate().expect("valid");
        let plan = options.soak_plan().expect("a soak");
        assert_eq!(plan.sample_period, Duration::from_secs(60));
        assert_eq!(plan.samples, 30);
        let limit = options.retention().expect("a limit");
        assert_eq!(limit.retention_bytes, 1 << 30);
        assert_eq!(limit.segment_bytes, 64 << 20, "a sixteenth of the limit");
        assert_eq!(parse(&[]).soak_plan(), None);
    }

    #[test]
    fn a_soak_without_a_set_load_for_a_set_time_is_refused() {
        let without_rate = parse(&["--soak", "--duration-secs", "600"]);
        let error = without_rate.validate().expect_err("no rate").to_string();
        assert!(
            error.contains("--soak needs --duration-secs and --rate"),
            "{error}"
        );
        assert!(parse(&["--soak", "--rate", "1000"]).validate().is_err());
        assert!(
            parse(&["--soak", "--messages", "5", "--rate", "9"])
                .validate()
                .is_err()
        );
    }

    #[test]
    fn a_soak_refuses_what_it_cannot_judge() {
        let with = |extra: &[&str]| {
            let mut args = SOAK.to_vec();
            args.extend_from_slice(extra);
            parse(&args).validate()
        };
        assert!(
            with(&[]).is_ok(),
            "a soak without a limit judges throughput only"
        );
        assert!(with(&["--cluster", "127.0.0.1:7201"]).is_err());
        assert!(with(&["--kill-owner-at-secs", "60"]).is_err());
        assert!(with(&["--sample-secs", "0.5"]).is_err());
        assert!(
            with(&["--sample-secs", "601"]).is_err(),
            "fewer than 3 samples"
        );
        assert!(with(&["--sample-secs", "600"]).is_ok());
        let sample_without_soak = ["strand-bench", "--sample-secs", "10"];
        assert!(Options::try_parse_from(sample_without_soak).is_err());
    }

    #[test]
    fn topic_limits_are_checked_and_the_segment_follows_the_limit() {
        assert!(parse(&["--retention-bytes", "0"]).validate().is_err());
        assert!(parse(&["--segment-bytes", "65535"]).validate().is_err());
        assert!(
            parse(&["--segment-bytes", "2147483648"])
                .validate()
                .is_err()
        );
        let small = parse(&["--retention-bytes", "100000"]);
        small.validate().expect("valid");
        assert_eq!(small.topic_segment_bytes(), Some(65_536), "clamped up");
        let explicit = parse(&["--retention-bytes", "16777216", "--segment-bytes", "262144"]);
        assert_eq!(explicit.topic_segment_bytes(), Some(262_144));
        let segment_only = parse(&["--segment-bytes", "1048576"]);
        segment_only.validate().expect("valid");
        assert_eq!(segment_only.topic_segment_bytes(), Some(1 << 20));
        assert_eq!(segment_only.retention(), None);
        assert_eq!(parse(&[]).topic_segment_bytes(), None, "the node's default");
    }
}
