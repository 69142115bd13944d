//! The summary table a scale run prints at its end: one block of rows per
//! phase that ran, then the notes and the verdict.

use std::fmt::Write;

use crate::report::table;
use crate::scale::machine::MachineLoad;
use crate::scale::options::ClientApi;
use crate::scale::settle::{Leadership, NodeMetrics};

use super::{
    IdlePhase, KillAllPhase, KillPhase, MIB_BYTES, ProduceRun, RebalancePhase, RestartPhase,
    ScaleReport, SettlePhase, ThroughputPhase, ThroughputRound,
};

impl ScaleReport {
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

pub(super) fn throughput_rows(throughput: &ThroughputPhase, row: &mut impl FnMut(&str, String)) {
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
        ClientApi::Producer => "the SDK's batching producer, a send per record",
        ClientApi::Batches => "batches built by the bench, a produce call each",
    };
    row("throughput: client", client.to_owned());
    if throughput.rounds.len() > 1 {
        round_rows(&throughput.rounds, row);
    }
    for (name, run) in runs {
        row(name, produce_run_line(throughput.producers, run));
    }
    row(
        "throughput: every / one",
        format!(
            "{:.1} %{}",
            median.all_of_single_percent,
            median_of_rounds(throughput)
        ),
    );
}

/// One row per round: its two rates in the order run, their ratio, the
/// machine load, and whether the median left it out.
fn round_rows(rounds: &[ThroughputRound], row: &mut impl FnMut(&str, String)) {
    for (index, round) in rounds.iter().enumerate() {
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

/// One produce run of the median round: records, rate, bytes, failures,
/// the machine's load meanwhile and the first error.
fn produce_run_line(producers: usize, run: &ProduceRun) -> String {
    let produced = &run.produced;
    let mut line = format!(
        "{} producers, {} records to {} partitions in {:.1} s: {:.0} msgs/s, {:.2} MB/s ({} failed)",
        producers,
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
    line
}

/// Which rounds the median ratio is of (` (the median of 3 rounds)`), and
/// which failed; empty for one clean round.
fn median_of_rounds(throughput: &ThroughputPhase) -> String {
    let failed = throughput.failed_rounds();
    match (throughput.rounds.len(), failed) {
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
    }
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
pub(super) fn machine_pair(single: Option<MachineLoad>, all: Option<MachineLoad>) -> String {
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
