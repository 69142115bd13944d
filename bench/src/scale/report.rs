//! The scale run's result: one value, printed as a summary table and
//! written as JSON.

use std::fmt::Write;

use serde::Serialize;

use super::machine::MachineLoad;
use super::settle::{GroupViewChanges, Leadership, NodeMetrics, ViewChanges};
use crate::cluster::Termination;
use crate::report::{Throughput, table};

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

    /// The summary table printed at the end of a run.
    pub fn summary(&self) -> String {
        let mut rows: Vec<(String, String)> = Vec::new();
        let mut row = |name: &str, value: String| rows.push((name.to_owned(), value));
        let config = &self.config;
        row(
            "cluster",
            format!(
                "{} nodes, {} replicas, {} topics x {} partitions = {} partition groups, {} cores",
                config.nodes,
                config.replicas,
                config.topics,
                config.partitions,
                config.partition_groups,
                config.cores
            ),
        );
        row(
            "create",
            format!("every topic in {:.2} s", self.create_secs),
        );
        settle_rows("settle (from spawn)", &self.settle, &mut row);
        if let Some(idle) = &self.idle {
            idle_rows("idle", idle, &mut row);
        }
        if let Some(restart) = &self.restart {
            restart_rows(restart, &mut row);
        }
        if let Some(kill) = &self.kill {
            kill_rows(kill, &mut row);
        }
        if let Some(kill_all) = &self.kill_all {
            kill_all_rows(kill_all, &mut row);
        }
        if let Some(throughput) = &self.throughput {
            throughput_rows(throughput, &mut row);
        }
        let notes = [
            ("skipped", &self.skipped),
            ("node exited", &self.node_exits),
            ("error", &self.errors),
        ];
        for (name, lines) in notes {
            for line in lines {
                row(name, line.clone());
            }
        }
        row(
            "result",
            if self.passed() { "PASS" } else { "FAIL" }.to_owned(),
        );
        table(&rows)
    }
}

fn settle_rows(name: &str, settle: &SettlePhase, row: &mut impl FnMut(&str, String)) {
    let changes = settle.view_changes;
    let outcome = if settle.settled {
        format!("every group normal after {:.2} s", settle.secs)
    } else {
        format!(
            "NOT settled after {:.2} s: {}",
            settle.secs,
            settle.unsettled.as_deref().unwrap_or("?")
        )
    };
    row(
        name,
        format!(
            "{outcome}; views moved: {} partition, {} metadata",
            changes.partition_groups, changes.metadata_group
        ),
    );
    for node in &settle.nodes {
        let led = settle.leadership.led.get(&node.node).copied().unwrap_or(0);
        row(
            &format!("  node {}", node.node),
            format!(
                "groups_hosted {}, groups_quiet {}, view_changes_total {}, primary of {led}",
                node.groups_hosted, node.groups_quiet, node.view_changes_total
            ),
        );
    }
    row(
        &format!("{name}: leaders"),
        leadership_line(&settle.leadership),
    );
}

/// `largest share 34.0 % (balanced); node 1 leads 100, ...`.
fn leadership_line(leadership: &Leadership) -> String {
    let mut line = format!(
        "largest share {:.1} % ({})",
        leadership.share_max_percent,
        if leadership.balanced() {
            "balanced"
        } else {
            "NOT balanced"
        }
    );
    for (node, led) in &leadership.led {
        let _ = write!(line, "; node {node} leads {led}");
    }
    if leadership.unled > 0 {
        let _ = write!(line, "; {} without a primary", leadership.unled);
    }
    line
}

fn idle_rows(name: &str, idle: &IdlePhase, row: &mut impl FnMut(&str, String)) {
    let quiet = if idle.quiet {
        format!("every group quiet after {:.2} s", idle.quiet_secs)
    } else {
        let counts = quiet_counts(&idle.quiet_nodes);
        format!(
            "NOT all quiet after {:.2} s (quiet/hosted: {})",
            idle.quiet_secs, counts
        )
    };
    row(&format!("{name}: quiet"), quiet);
    for node in &idle.nodes {
        row(
            &format!("  node {}", node.node),
            format!(
                "cpu {:.2} %, rss {:.1} MiB, {} threads, {}/{} groups quiet",
                node.cpu_percent, node.rss_mib, node.threads, node.groups_quiet, node.groups_hosted
            ),
        );
    }
    row(
        &format!("{name}: all nodes"),
        format!(
            "cpu {:.2} % of one core over {:.1} s, rss {:.1} MiB",
            idle.cpu_percent_total,
            idle.measured_secs,
            idle.rss_bytes_total as f64 / MIB_BYTES
        ),
    );
}

fn restart_rows(restart: &RestartPhase, row: &mut impl FnMut(&str, String)) {
    let mut shutdown = format!(
        "every node exited {:.2} s after SIGTERM",
        restart.shutdown_secs
    );
    for exit in restart.terminations.iter().filter(|exit| !exit.success) {
        let how = if exit.killed {
            "SIGKILLed"
        } else {
            "unclean exit"
        };
        let _ = write!(shutdown, "; node {} {how} ({})", exit.node, exit.status);
    }
    row("restart: shutdown", shutdown);
    settle_rows("restart: settle", &restart.settle, row);
    if let Some(idle) = &restart.idle {
        idle_rows("restart: idle", idle, row);
    }
}

fn kill_rows(kill: &KillPhase, row: &mut impl FnMut(&str, String)) {
    let ms = |ms: Option<u64>| ms.map_or("none".to_owned(), |ms| format!("{ms} ms"));
    let mut writes = format!(
        "node {} (primary of {} partitions) SIGKILLed; {}/{} took a write again, half after {}, \
         the last {} after the kill",
        kill.killed_node,
        kill.partitions_led,
        kill.writes_accepted,
        kill.partitions_led,
        ms(kill.median_write_ms),
        ms(kill.last_write_ms)
    );
    if let Some(error) = &kill.first_error {
        let _ = write!(writes, " (first error: {error})");
    }
    row("kill: writes", writes);
    settle_rows("kill: settle after restart", &kill.restart, row);
    if let Some(wait) = &kill.rebalance {
        row("kill: rebalance", rebalance_line(wait));
    }
}

fn kill_all_rows(kill_all: &KillAllPhase, row: &mut impl FnMut(&str, String)) {
    settle_rows("kill all: settle", &kill_all.settle, row);
    if let Some(wait) = &kill_all.rebalance {
        row("kill all: leadership", rebalance_line(wait));
    }
    if let Some(changes) = &kill_all.group_view_changes {
        let counts: Vec<String> = changes
            .groups_by_count
            .iter()
            .map(|(count, groups)| format!("{groups} with {count}"))
            .collect();
        row(
            "kill all: view changes",
            format!(
                "partition groups: {}; metadata group: {}",
                counts.join(", "),
                changes.metadata
            ),
        );
    }
}

fn rebalance_line(wait: &RebalancePhase) -> String {
    let outcome = if wait.balanced {
        format!("balanced {:.2} s after the restart", wait.secs)
    } else {
        format!("NOT balanced {:.2} s after the restart", wait.timeout_secs)
    };
    format!("{outcome}: {}", leadership_line(&wait.leadership))
}

fn throughput_rows(throughput: &ThroughputPhase, row: &mut impl FnMut(&str, String)) {
    let median = &throughput.median;
    let runs = [
        ("throughput: one partition", &median.single),
        ("throughput: every partition", &median.all),
    ];
    let spread = match throughput.spread {
        crate::keys::Spread::Batch => "whole batches to each partition in turn",
        crate::keys::Spread::Record => "each record to the next partition",
    };
    row("throughput: spread", spread.to_owned());
    let client = match throughput.client {
        super::options::ClientApi::Producer => "the SDK's batching producer, a send per record",
        super::options::ClientApi::Batches => "batches built by the bench, a produce call each",
    };
    row("throughput: client", client.to_owned());
    if throughput.rounds.len() > 1 {
        for (index, round) in throughput.rounds.iter().enumerate() {
            row(
                &format!("throughput: round {}", index + 1),
                format!(
                    "{}: {:.1} %{}{}",
                    round_runs(round),
                    round.all_of_single_percent,
                    machine_pair(round.single.machine, round.all.machine),
                    if round.is_clean() {
                        ""
                    } else {
                        "; records failed: left out of the median"
                    }
                ),
            );
        }
    }
    for (name, run) in runs {
        let produced = &run.produced;
        let mut line = format!(
            "{} producers, {} records to {} partitions in {:.1} s: {:.0} msgs/s, {:.2} MB/s ({} failed)",
            throughput.producers,
            produced.records,
            run.partitions,
            produced.seconds,
            produced.records_per_sec,
            produced.megabytes_per_sec,
            run.failed
        );
        if let Some(machine) = run.machine {
            let _ = write!(line, "; machine {:.0} % busy", machine.busy_percent);
            if let Some(disk) = machine.disk_written_mb_per_sec {
                let _ = write!(line, ", disk {disk:.0} MB/s written");
            }
            if let Some(free) = machine.free_gib_at_start {
                let _ = write!(line, ", {free:.1} GiB free at start");
            }
        }
        if let Some(error) = &run.first_error {
            let _ = write!(line, "; first error: {error}");
        }
        row(name, line);
    }
    let failed = throughput.failed_rounds();
    let of_rounds = match (throughput.rounds.len(), failed) {
        (1, 0) => String::new(),
        (1, _) => " (records failed)".to_owned(),
        (rounds, 0) => format!(" (the median of {rounds} rounds)"),
        (rounds, failed) if failed == rounds => {
            format!(" (the median of {rounds} rounds, records failed in every one)")
        }
        (rounds, failed) => format!(
            " (the median of {} clean rounds; {failed} with failed records left out)",
            rounds - failed
        ),
    };
    row(
        "throughput: every / one",
        format!("{:.1} %{of_rounds}", median.all_of_single_percent),
    );
}

/// `node N quiet/hosted, ...`: how far each node is from all quiet.
pub fn quiet_counts(nodes: &[NodeMetrics]) -> String {
    let counts: Vec<String> = nodes
        .iter()
        .map(|node| {
            format!(
                "node {} {}/{}",
                node.node, node.groups_quiet, node.groups_hosted
            )
        })
        .collect();
    counts.join(", ")
}

/// A round's two rates in the order run: `one partition A msgs/s, every
/// partition B msgs/s`, or `every ... then one ...`.
fn round_runs(round: &ThroughputRound) -> String {
    let one = format!(
        "one partition {:.0} msgs/s",
        round.single.produced.records_per_sec
    );
    let every = format!(
        "every partition {:.0} msgs/s",
        round.all.produced.records_per_sec
    );
    if round.every_first {
        format!("{every}, then {one}")
    } else {
        format!("{one}, {every}")
    }
}

/// A round's two runs' machine load side by side, as ` (machine busy A / B
/// %, disk A / B MB/s written)`; empty where either is unknown.
fn machine_pair(single: Option<MachineLoad>, all: Option<MachineLoad>) -> String {
    let Some((single, all)) = single.zip(all) else {
        return String::new();
    };
    let mut note = format!(
        " (machine busy {:.0} / {:.0} %",
        single.busy_percent, all.busy_percent
    );
    if let Some((single, all)) = single
        .disk_written_mb_per_sec
        .zip(all.disk_written_mb_per_sec)
    {
        let _ = write!(note, ", disk {single:.0} / {all:.0} MB/s written");
    }
    if let Some((single, all)) = single.free_gib_at_start.zip(all.free_gib_at_start) {
        let _ = write!(note, ", {single:.1} / {all:.1} GiB free at start");
    }
    note.push(')');
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round run in the order the bench runs round `index` (every
    /// partition first in even rounds).
    fn round(index: usize, single: u64, all: u64) -> ThroughputRound {
        let run = |partitions: u64, records: u64| ProduceRun {
            partitions,
            produced: crate::report::Throughput::new(records, records * 100, 1.0),
            failed: 0,
            first_error: None,
            machine: None,
        };
        ThroughputRound::new(run(1, single), run(1000, all), index % 2 == 1)
    }

    #[test]
    fn the_throughput_phase_reports_its_median_round() {
        let rounds = vec![round(0, 800, 400), round(1, 700, 560), round(2, 1000, 600)];
        let phase = ThroughputPhase::of_rounds(
            4,
            crate::keys::Spread::Batch,
            super::super::options::ClientApi::Producer,
            rounds,
        );
        assert_eq!(
            phase.median.single.produced.records, 1000,
            "60 % is the median"
        );
        assert_eq!(phase.rounds.len(), 3);
        let mut lines = Vec::new();
        throughput_rows(&phase, &mut |name: &str, line: String| {
            lines.push(format!("{name} {line}"))
        });
        let text = lines.join("\n");
        assert!(
            text.contains(
                "throughput: round 1 one partition 800 msgs/s, every partition 400 msgs/s: 50.0 %"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "throughput: round 2 every partition 560 msgs/s, then one partition 700 msgs/s: 80.0 %"
            ),
            "{text}"
        );
        assert!(text.contains("60.0 % (the median of 3 rounds)"), "{text}");
    }

    #[test]
    fn a_round_with_failed_records_is_left_out_of_the_median() {
        let mut cut_short = round(3, 900, 0);
        cut_short.all.failed = 5000;
        cut_short.all.first_error = Some("disk full on the server".to_owned());
        let rounds = vec![round(0, 800, 400), round(1, 700, 560), cut_short];
        let phase = ThroughputPhase::of_rounds(
            4,
            crate::keys::Spread::Batch,
            super::super::options::ClientApi::Batches,
            rounds,
        );
        assert_eq!(phase.failed_rounds(), 1);
        assert_eq!(
            phase.median.single.produced.records, 700,
            "80 % is the upper median of the two clean rounds"
        );
        let mut lines = Vec::new();
        throughput_rows(&phase, &mut |name: &str, line: String| {
            lines.push(format!("{name} {line}"))
        });
        let text = lines.join("\n");
        assert!(
            text.contains("records failed: left out of the median"),
            "{text}"
        );
        assert!(
            text.contains("80.0 % (the median of 2 clean rounds; 1 with failed records left out)"),
            "{text}"
        );
    }

    #[test]
    fn a_round_row_shows_the_machine_load_of_both_runs() {
        let load = |busy_percent, disk| MachineLoad {
            busy_percent,
            disk_written_mb_per_sec: disk,
            free_gib_at_start: None,
        };
        assert_eq!(
            machine_pair(Some(load(80.4, Some(408.0))), Some(load(99.6, Some(265.2)))),
            " (machine busy 80 / 100 %, disk 408 / 265 MB/s written)"
        );
        let with_free = |free| MachineLoad {
            free_gib_at_start: free,
            ..load(80.0, None)
        };
        assert_eq!(
            machine_pair(Some(with_free(Some(16.94))), Some(with_free(Some(4.6)))),
            " (machine busy 80 / 80 %, 16.9 / 4.6 GiB free at start)"
        );
        assert_eq!(
            machine_pair(Some(with_free(Some(1.0))), Some(with_free(None))),
            " (machine busy 80 / 80 %)"
        );
        assert_eq!(
            machine_pair(Some(load(80.0, None)), Some(load(99.0, Some(1.0)))),
            " (machine busy 80 / 99 %)"
        );
        assert_eq!(machine_pair(None, Some(load(99.0, None))), "");
    }

    /// Six groups, two led by each of three nodes.
    fn even_leadership() -> Leadership {
        Leadership {
            led: [(1, 2), (2, 2), (3, 2)].into_iter().collect(),
            unled: 0,
            share_max_percent: 100.0 / 3.0,
        }
    }

    fn settle(settled: bool) -> SettlePhase {
        SettlePhase {
            settled,
            secs: 1.5,
            view_changes: ViewChanges::default(),
            nodes: Vec::new(),
            leadership: even_leadership(),
            unsettled: (!settled).then(|| "group 3 short".to_owned()),
        }
    }

    fn report() -> ScaleReport {
        ScaleReport {
            config: ScaleConfig {
                nodes: 3,
                replicas: 3,
                topics: 2,
                partitions: 3,
                partition_groups: 6,
                idle_secs: 1.0,
                settle_timeout_secs: 60.0,
                restart: false,
                kill: true,
                kill_all: true,
                produce_secs: 0.0,
                producers: 4,
                produce_rounds: 1,
                message_size: 100,
                batch: 100,
                cores: 2,
            },
            create_secs: 0.5,
            settle: settle(true),
            idle: None,
            restart: None,
            kill: Some(KillPhase {
                killed_node: 1,
                partitions_led: 4,
                writes_accepted: 4,
                last_write_ms: Some(700),
                median_write_ms: Some(400),
                first_error: None,
                restart: settle(true),
                rebalance: Some(RebalancePhase {
                    balanced: true,
                    secs: 4.0,
                    timeout_secs: 30.0,
                    leadership: even_leadership(),
                }),
            }),
            kill_all: Some(KillAllPhase {
                settle: settle(true),
                rebalance: Some(RebalancePhase {
                    balanced: true,
                    secs: 5.0,
                    timeout_secs: 30.0,
                    leadership: even_leadership(),
                }),
                group_view_changes: Some(GroupViewChanges {
                    groups_by_count: [(1, 6)].into(),
                    partition_most: 1,
                    metadata: 1,
                }),
            }),
            throughput: None,
            skipped: Vec::new(),
            node_exits: Vec::new(),
            errors: Vec::new(),
        }
    }

    #[test]
    fn a_run_passes_when_every_phase_settles() {
        let report = report();
        assert!(report.passed(), "{}", report.summary());
        assert!(report.summary().contains("4/4 took a write again"));
    }

    #[test]
    fn an_unsettled_phase_or_a_stuck_write_fails_the_run() {
        let mut unsettled = report();
        unsettled.settle = settle(false);
        assert!(!unsettled.passed());
        assert!(
            unsettled
                .summary()
                .contains("NOT settled after 1.50 s: group 3 short")
        );
        let mut stuck = report();
        if let Some(kill) = stuck.kill.as_mut() {
            kill.writes_accepted = 3;
        }
        assert!(!stuck.passed());
        let mut exited = report();
        exited.node_exits.push("node 2: signal 6".to_owned());
        assert!(!exited.passed());
        let mut lopsided = report();
        if let Some(wait) = lopsided
            .kill
            .as_mut()
            .and_then(|kill| kill.rebalance.as_mut())
        {
            wait.balanced = false;
        }
        assert!(!lopsided.passed());
        assert!(lopsided.summary().contains("NOT balanced 30.00 s"));
        let mut churned = report();
        if let Some(changes) = churned
            .kill_all
            .as_mut()
            .and_then(|phase| phase.group_view_changes.as_mut())
        {
            changes.groups_by_count = [(1, 5), (2, 1)].into();
            changes.partition_most = 2;
        }
        assert!(!churned.passed(), "a group changed views twice");
        assert!(churned.summary().contains("5 with 1, 1 with 2"));
        let mut uneven_start = report();
        uneven_start.settle.leadership.led.insert(1, 4);
        uneven_start.settle.leadership.led.insert(2, 1);
        uneven_start.settle.leadership.led.insert(3, 1);
        uneven_start.settle.leadership.share_max_percent = 400.0 / 6.0;
        assert!(!uneven_start.passed());
        let mut cut_short = report();
        let mut failing = round(0, 800, 400);
        failing.single.failed = 1;
        cut_short.throughput = Some(ThroughputPhase::of_rounds(
            4,
            crate::keys::Spread::Batch,
            super::super::options::ClientApi::Batches,
            vec![failing],
        ));
        assert!(!cut_short.passed(), "a produce run with failed records");
    }
}
