//! The scale run's result: one value, printed as a summary table and
//! written as JSON. This file holds the value (a block per phase) and its
//! verdict; `summary` prints it as the table.

use serde::Serialize;

use super::machine::MachineLoad;
use super::settle::{GroupViewChanges, Leadership, NodeMetrics, ViewChanges};
use crate::cluster::Termination;
use crate::report::Throughput;

mod summary;
#[cfg(test)]
mod tests;

pub use summary::quiet_counts;

/// Bytes in a MiB.
pub const MIB_BYTES: f64 = 1024.0 * 1024.0;

/// What was run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleConfig {
    /// Nodes in the local cluster.
    pub nodes: u32,
    /// Replicas per partition.
    pub replicas: u8,
    /// Topics created.
    pub topics: u32,
    /// Partitions per topic.
    pub partitions: u32,
    /// Topics × partitions.
    pub partition_groups: u64,
    /// How long CPU was measured at idle.
    pub idle_secs: f64,
    /// The bound on each wait.
    pub settle_timeout_secs: f64,
    /// Whether the clean restart ran.
    pub restart: bool,
    /// Whether the primary kill ran.
    pub kill: bool,
    /// Whether every node was SIGKILLed and restarted.
    pub kill_all: bool,
    /// How long the throughput phase produced, per run (0: skipped).
    pub produce_secs: f64,
    /// Producers in the throughput phase.
    pub producers: usize,
    /// Rounds of the throughput phase.
    pub produce_rounds: u32,
    /// Value bytes per produced record.
    pub message_size: usize,
    /// Records per batch.
    pub batch: u32,
    /// Cores of the machine.
    pub cores: usize,
}

/// One wait for the cluster to settle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettlePhase {
    /// True when it settled within the timeout.
    pub settled: bool,
    /// Seconds from the phase's start (processes spawned, restarted) until
    /// every group was normal, or until the wait gave up.
    pub secs: f64,
    /// View changes from the phase's start until then.
    pub view_changes: ViewChanges,
    /// Each node's metrics once settled.
    pub nodes: Vec<NodeMetrics>,
    /// Which nodes lead the partition groups at the last poll.
    pub leadership: Leadership,
    /// When it did not settle: what was still wrong at the last poll.
    pub unsettled: Option<String>,
}

/// One node's cost at idle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeIdle {
    /// The node.
    pub node: u32,
    /// Its process id.
    pub pid: u32,
    /// CPU (user + system) over the measurement, in percent of one core.
    pub cpu_percent: f64,
    /// Resident memory at the end.
    pub rss_bytes: u64,
    /// The same, in MiB.
    pub rss_mib: f64,
    /// Threads at the end.
    pub threads: u32,
    /// Groups it hosts, scraped at the end.
    pub groups_hosted: u64,
    /// Of those, quiet at the end.
    pub groups_quiet: u64,
}

/// The idle measurement: wait for every group to go quiet, then measure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdlePhase {
    /// True when every node's groups were all quiet before the timeout.
    pub quiet: bool,
    /// Seconds the wait for quiet took (or waited, when not quiet).
    pub quiet_secs: f64,
    /// Each node's counts at the end of that wait.
    pub quiet_nodes: Vec<NodeMetrics>,
    /// Seconds CPU was measured over.
    pub measured_secs: f64,
    /// Per node.
    pub nodes: Vec<NodeIdle>,
    /// The nodes' CPU together, in percent of one core.
    pub cpu_percent_total: f64,
    /// The nodes' resident memory together.
    pub rss_bytes_total: u64,
}

/// The clean restart of every node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RestartPhase {
    /// Seconds from the SIGTERMs until every node had exited.
    pub shutdown_secs: f64,
    /// How each node exited.
    pub terminations: Vec<Termination>,
    /// From the start of the new processes until settled.
    pub settle: SettlePhase,
    /// The idle measurement after it (`None`: it did not settle).
    pub idle: Option<IdlePhase>,
}

/// The SIGKILL of the node that was primary of the most partitions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KillPhase {
    /// The node killed.
    pub killed_node: u32,
    /// Partitions it was primary of: each was written once after the kill.
    pub partitions_led: u64,
    /// Of those, the ones that took the write before the timeout.
    pub writes_accepted: u64,
    /// Milliseconds from the kill until the last of those writes was acknowledged.
    pub last_write_ms: Option<u64>,
    /// Milliseconds from the kill until half of them were.
    pub median_write_ms: Option<u64>,
    /// The first write failure, readable (writes are retried until the timeout).
    pub first_error: Option<String>,
    /// From the restart of the killed node until settled; its view changes
    /// count from just before the kill.
    pub restart: SettlePhase,
    /// Leadership moving back once the killed node returned (`None`: it did
    /// not settle, so not waited for).
    pub rebalance: Option<RebalancePhase>,
}

/// The SIGKILL of every node at once, and their restart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KillAllPhase {
    /// From the start of the new processes until settled; view changes
    /// count (as views moved) from just before the kill.
    pub settle: SettlePhase,
    /// Leadership once settled (`None`: it did not settle).
    pub rebalance: Option<RebalancePhase>,
    /// Each group's view changes since the restart, counted once leadership
    /// was balanced and every group quiet (`None`: it did not settle).
    pub group_view_changes: Option<GroupViewChanges>,
}

impl KillAllPhase {
    /// True when the cluster settled, balanced, and no group went through
    /// more than one view change.
    pub fn passed(&self) -> bool {
        self.settle.settled
            && self.rebalance.as_ref().is_some_and(|wait| wait.balanced)
            && self
                .group_view_changes
                .as_ref()
                .is_some_and(|changes| changes.at_most(1))
    }
}

/// The wait, after a killed node returned, until no node leads more than
/// its share ([`Leadership::balanced`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RebalancePhase {
    /// True when leadership was balanced within the wait.
    pub balanced: bool,
    /// Seconds from the node's restart until balanced (or until the wait
    /// gave up).
    pub secs: f64,
    /// The longest wait, from the node's restart.
    pub timeout_secs: f64,
    /// Leadership at the end of the wait.
    pub leadership: Leadership,
}

impl KillPhase {
    /// True when every partition it led took a write again.
    pub fn writes_resumed(&self) -> bool {
        self.writes_accepted == self.partitions_led
    }
}

/// One produce run over some partitions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProduceRun {
    /// Partitions written, round-robin.
    pub partitions: u64,
    /// Acknowledged records, from the first send to the last ack.
    pub produced: Throughput,
    /// Records whose produce failed.
    pub failed: u64,
    /// The first failure, readable.
    pub first_error: Option<String>,
    /// How busy the whole machine was and how fast its data disk wrote
    /// meanwhile (`None` where `/proc` does not tell): a round run on a
    /// throttled machine shows as the same busy CPU for fewer records.
    pub machine: Option<MachineLoad>,
}

/// Produce throughput: the same producers over one partition (the peak a
/// single partition gives), then over every partition, in one or more
/// rounds. Its `single`, `all` and `all_of_single_percent` are the median
/// round's, among the rounds in which no record failed (a round cut short
/// by a full disk measures nothing); of all rounds when none is clean.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputPhase {
    /// Producers in each run.
    pub producers: usize,
    /// How the every-partition run spread its records.
    pub spread: crate::keys::Spread,
    /// Which client path sent them.
    pub client: super::options::ClientApi,
    /// The round with the median ratio (of an even count, the upper one)
    /// among the clean rounds.
    #[serde(flatten)]
    pub median: ThroughputRound,
    /// Every round, in the order run.
    pub rounds: Vec<ThroughputRound>,
}

/// One round of the throughput phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputRound {
    /// Every producer writing partition 0 of the first topic.
    pub single: ProduceRun,
    /// The producers splitting every partition between them.
    pub all: ProduceRun,
    /// `all`'s records per second in percent of `single`'s.
    pub all_of_single_percent: f64,
    /// `all` ran before `single` (the order alternates between rounds).
    pub every_first: bool,
}

impl ThroughputRound {
    /// A round of `single` and `all`, `all` first if `every_first`.
    pub fn new(single: ProduceRun, all: ProduceRun, every_first: bool) -> ThroughputRound {
        let peak = single.produced.records_per_sec;
        let all_of_single_percent = if peak > 0.0 {
            all.produced.records_per_sec * 100.0 / peak
        } else {
            0.0
        };
        ThroughputRound {
            single,
            all,
            all_of_single_percent,
            every_first,
        }
    }

    /// Whether every record of both runs was acknowledged.
    pub fn is_clean(&self) -> bool {
        self.single.failed == 0 && self.all.failed == 0
    }
}

impl ThroughputPhase {
    /// The phase of `rounds` (at least one): the median by ratio.
    pub fn of_rounds(
        producers: usize,
        spread: crate::keys::Spread,
        client: super::options::ClientApi,
        rounds: Vec<ThroughputRound>,
    ) -> ThroughputPhase {
        assert!(!rounds.is_empty(), "a throughput phase has a round");
        let mut by_ratio: Vec<&ThroughputRound> =
            rounds.iter().filter(|round| round.is_clean()).collect();
        if by_ratio.is_empty() {
            by_ratio = rounds.iter().collect();
        }
        by_ratio.sort_by(|a, b| a.all_of_single_percent.total_cmp(&b.all_of_single_percent));
        let median = by_ratio[by_ratio.len() / 2].clone();
        ThroughputPhase {
            producers,
            spread,
            client,
            median,
            rounds,
        }
    }

    /// Rounds in which a record failed.
    pub fn failed_rounds(&self) -> usize {
        self.rounds.iter().filter(|round| !round.is_clean()).count()
    }
}

/// The whole result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleReport {
    /// What was run.
    pub config: ScaleConfig,
    /// Seconds to create the stream and every topic.
    pub create_secs: f64,
    /// From the processes' spawn until every group was normal.
    pub settle: SettlePhase,
    /// At idle after that.
    pub idle: Option<IdlePhase>,
    /// The clean restart, if run.
    pub restart: Option<RestartPhase>,
    /// The primary kill, if run.
    pub kill: Option<KillPhase>,
    /// The kill of every node, if run.
    pub kill_all: Option<KillAllPhase>,
    /// The throughput phase, if run.
    pub throughput: Option<ThroughputPhase>,
    /// Phases not run, and why.
    pub skipped: Vec<String>,
    /// Nodes that exited on their own, and how.
    pub node_exits: Vec<String>,
    /// Errors on the way that did not stop the run, readable.
    pub errors: Vec<String>,
}

impl ScaleReport {
    /// True when every phase run settled (and every kill's writes resumed),
    /// leadership was balanced after the start and within the wait after a
    /// killed node returned, every node exited cleanly (status 0, in time)
    /// on SIGTERM, and none exited on its own.
    pub fn passed(&self) -> bool {
        let restart_ok = self.restart.as_ref().is_none_or(|restart| {
            restart.settle.settled && restart.terminations.iter().all(|exit| exit.success)
        });
        let kill_ok = self.kill.as_ref().is_none_or(|kill| {
            kill.writes_resumed()
                && kill.restart.settled
                && kill.rebalance.as_ref().is_some_and(|wait| wait.balanced)
        });
        let kill_all_ok = self.kill_all.as_ref().is_none_or(KillAllPhase::passed);
        let start_balanced = self.settle.leadership.balanced();
        let throughput_ok = self
            .throughput
            .as_ref()
            .is_none_or(|phase| phase.failed_rounds() == 0);
        self.settle.settled
            && start_balanced
            && restart_ok
            && kill_ok
            && kill_all_ok
            && throughput_ok
            && self.node_exits.is_empty()
    }
}
