//! Tests of the scale report: the throughput phase's median round, the
//! summary's rows, and which phases fail a run.

use super::summary::{machine_pair, throughput_rows};
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
