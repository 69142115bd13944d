//! End to end, in process: the bench library against a real 3-node cluster
//! of `strand-server` processes, with a small load, a SIGKILL of the
//! partition's primary and its restart. The report must show the load, one
//! view change, the write gap, the restarted replica's log and commit catching
//! up, and every acknowledged record read back exactly once.
//!
//! The server binary must already be built in this profile
//! (`cargo build -p strand-server`; `cargo test --workspace` builds it for
//! strand-server's own tests). This test never builds it.

mod common;

use std::path::Path;
use std::time::Instant;

use clap::Parser;
use strand_bench::Options;

/// A 4-second load at 2,000 records/s with a tailing consumer; the
/// primary is killed at 1 s and restarted at 2 s.
fn smoke_options(server: &Path, data_dir: &Path) -> Options {
    Options::try_parse_from([
        "strand-bench",
        "--server-bin",
        server.to_str().expect("a UTF-8 path"),
        "--data-dir",
        data_dir.to_str().expect("a UTF-8 path"),
        "--duration-secs",
        "4",
        "--rate",
        "2000",
        "--message-size",
        "64",
        "--batch",
        "20",
        "--consumers",
        "1",
        "--kill-owner-at-secs",
        "1",
        "--restart-after-secs",
        "1",
        "--catch-up-timeout-secs",
        "10",
        "--quiet",
    ])
    .expect("valid flags")
}

/// The last lines of each node's log, for a failed run.
fn print_node_logs(dir: &Path) {
    for node in 1..=3 {
        let path = dir.join(format!("node-{node}.log"));
        let log = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(40)..];
        eprintln!(
            "--- {} (last {} lines)\n{}",
            path.display(),
            tail.len(),
            tail.join("\n")
        );
    }
}

#[test]
fn a_small_load_survives_a_primary_kill_and_reads_back_exactly_once() {
    let server = common::server_binary();
    let started = Instant::now();
    let data_dir = tempfile::tempdir().expect("a temp dir");
    let options = smoke_options(&server, data_dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let report = runtime
        .block_on(strand_bench::run(&options))
        .expect("the bench runs");
    let summary = report.summary();
    eprintln!("{summary}");
    let caught_up = report
        .failover
        .as_ref()
        .is_some_and(|failover| failover.catch_up_ms.is_some());
    if !report.passed() || !caught_up {
        print_node_logs(data_dir.path());
    }

    assert!(report.passed(), "{summary}");
    assert!(report.produced.records >= 1_000, "{summary}");
    assert_eq!(report.produce_ack_latency.count, report.produced.records);
    assert!(report.produce_ack_latency.p50_us > 0);
    let verification = report.verification.as_ref().expect("verified");
    assert_eq!(verification.acknowledged, report.produced.records);
    assert_eq!(
        verification.missing + verification.duplicated,
        0,
        "{summary}"
    );
    let consumed = report.consumed.as_ref().expect("a consumer ran");
    assert!(
        consumed.throughput.records >= report.produced.records,
        "{summary}"
    );

    let failover = report.failover.as_ref().expect("a failover ran");
    assert_eq!(failover.views_advanced, 1, "{summary}");
    assert_ne!(
        failover.primary_after,
        Some(failover.killed_node),
        "{summary}"
    );
    let gap = failover.write_gap.expect("acks before the kill");
    assert!(
        gap.first_ack_after_ms.is_some(),
        "writes resumed: {summary}"
    );
    assert!(failover.restarted_at_ms.is_some(), "{summary}");
    // The restarted replica comes back: its log, then its commit (repair
    // relays the old view's prepares to it verbatim).
    assert!(
        failover.log_catch_up_ms.is_some(),
        "the restarted node's log caught up: {summary}"
    );
    assert!(
        caught_up,
        "the restarted node's commit caught up: {summary}"
    );
    assert!(report.timeline.len() >= 4, "{summary}");

    let json = serde_json::to_string(&report).expect("the report as JSON");
    assert!(json.contains("\"write_gap\""));
    let svg = strand_bench::plot_report(&report);
    assert!(svg.contains("SIGKILL node") && svg.contains("restart node"));
    eprintln!("smoke run took {:?}", started.elapsed());
}
