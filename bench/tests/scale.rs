//! End to end: the `strand-scale` binary against a real 3-node cluster of
//! `strand-server` processes, small enough to take seconds: 2 topics of 3
//! partitions, a clean restart, a primary kill (and leadership moving back
//! once the killed node returns), two rounds of a 1-second load. It must exit 0 and its
//! JSON report must hold every phase's figures.
//!
//! The server binary must already be built in this profile
//! (`cargo build -p strand-server`); this test never builds it.

mod common;

use std::process::Command;
use std::time::Instant;

use serde_json::Value;

/// The value at `path` (`a.b.0.c`: a number indexes an array, names an
/// object's key otherwise) of `json`, which must be there.
fn field<'a>(json: &'a Value, path: &str) -> &'a Value {
    let mut value = json;
    for key in path.split('.') {
        value = match (value, key.parse::<usize>()) {
            (Value::Array(_), Ok(index)) => &value[index],
            _ => &value[key],
        };
        assert!(!value.is_null(), "{path}: no {key} in\n{json:#}");
    }
    value
}

/// Runs `strand-scale` over 2 topics of 3 partitions with `extra` flags;
/// it must exit 0. Its summary, and its JSON report as text and parsed.
fn run_scale(extra: &[&str]) -> (String, String, Value) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let json_path = dir.path().join("scale.json");
    let output = Command::new(env!("CARGO_BIN_EXE_strand-scale"))
        .arg("--server-bin")
        .arg(common::server_binary())
        .arg("--data-dir")
        .arg(dir.path().join("cluster"))
        .args(["--topics", "2", "--partitions", "3", "--idle-secs", "1"])
        .args(["--settle-timeout-secs", "20"])
        .args(extra)
        .arg("--json")
        .arg(&json_path)
        .arg("--quiet")
        .output()
        .expect("strand-scale runs");
    let summary = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{}\n{summary}\n{stderr}",
        output.status
    );
    let text = std::fs::read_to_string(&json_path).expect("the JSON report");
    let json: Value = serde_json::from_str(&text).expect("valid JSON");
    (summary, text, json)
}

#[test]
fn a_small_scale_run_settles_restarts_fails_over_and_reports_every_phase() {
    let started = Instant::now();
    let (summary, text, json) = run_scale(&[
        "--produce-secs",
        "1",
        "--produce-rounds",
        "2",
        "--restart",
        "--kill",
    ]);
    assert!(summary.contains("PASS"), "{summary}");
    assert_eq!(field(&json, "config.partition_groups"), 6);
    assert!(field(&json, "create_secs").as_f64() > Some(0.0));
    assert_eq!(field(&json, "settle.settled"), true);
    assert!(field(&json, "settle.secs").as_f64() > Some(0.0));
    field(&json, "settle.view_changes.partition_groups");
    for node in 0..3 {
        // 6 partition groups and the metadata plane on every node.
        assert_eq!(
            field(&json, &format!("settle.nodes.{node}.groups_hosted")),
            7
        );
        let idle = format!("idle.nodes.{node}");
        assert!(field(&json, &format!("{idle}.rss_bytes")).as_u64() > Some(0));
        assert!(field(&json, &format!("{idle}.threads")).as_u64() > Some(0));
        field(&json, &format!("{idle}.cpu_percent"));
    }
    field(&json, "idle.cpu_percent_total");
    assert_eq!(field(&json, "restart.settle.settled"), true);
    assert_eq!(field(&json, "restart.terminations.0.success"), true);
    field(&json, "restart.idle.nodes.0.rss_mib");
    let led = field(&json, "kill.partitions_led")
        .as_u64()
        .expect("a count");
    assert!(led >= 1, "{text}");
    assert_eq!(field(&json, "kill.writes_accepted").as_u64(), Some(led));
    field(&json, "kill.last_write_ms");
    assert_eq!(field(&json, "kill.restart.settled"), true);
    // Six groups on three nodes: two led by each, after the start and again
    // once the killed node is back.
    for phase in ["settle.leadership", "kill.rebalance.leadership"] {
        for node in 1..=3 {
            assert_eq!(field(&json, &format!("{phase}.led.{node}")), 2, "{text}");
        }
    }
    assert_eq!(field(&json, "kill.rebalance.balanced"), true);
    for run in ["single", "all"] {
        assert!(field(&json, &format!("throughput.{run}.produced.records")).as_u64() > Some(0));
        field(
            &json,
            &format!("throughput.{run}.produced.megabytes_per_sec"),
        );
        // The whole machine's load during the run, from /proc/stat.
        let busy = field(&json, &format!("throughput.{run}.machine.busy_percent")).as_f64();
        assert!(
            busy.is_some_and(|busy| 0.0 < busy && busy <= 100.0),
            "{busy:?}"
        );
    }
    assert!(summary.contains("% busy"), "{summary}");
    assert_eq!(field(&json, "throughput.all.partitions"), 6);
    let median = field(&json, "throughput.all_of_single_percent").as_f64();
    assert!(median > Some(0.0));
    let mut ratios: Vec<f64> = (0..2)
        .map(|round| {
            assert_eq!(
                field(&json, &format!("throughput.rounds.{round}.all.partitions")),
                6
            );
            let ratio = format!("throughput.rounds.{round}.all_of_single_percent");
            field(&json, &ratio).as_f64().expect("a ratio")
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    assert_eq!(median, Some(ratios[1]), "the upper median of two rounds");
    assert!(summary.contains("throughput: round 2"), "{summary}");
    eprintln!("scale run took {:?}", started.elapsed());
}

#[test]
fn the_batches_client_writes_every_partition_and_says_so() {
    let (summary, text, json) = run_scale(&[
        "--produce-secs",
        "1",
        "--client",
        "batches",
        "--batch",
        "50",
    ]);
    assert!(summary.contains("batches built by the bench"), "{summary}");
    assert_eq!(field(&json, "throughput.client"), "batches");
    for run in ["single", "all"] {
        let records = field(&json, &format!("throughput.{run}.produced.records"))
            .as_u64()
            .expect("a count");
        assert!(
            records > 0 && records.is_multiple_of(50),
            "whole batches: {text}"
        );
        assert_eq!(
            field(&json, &format!("throughput.{run}.failed")),
            0,
            "{text}"
        );
    }
    assert_eq!(field(&json, "throughput.all.partitions"), 6);
}

/// Processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let state = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let zombie = state.rsplit(')').next()?.trim_start().starts_with('Z');
            (!zombie && String::from_utf8_lossy(&cmdline).contains(needle)).then_some(pid)
        })
        .collect()
}

#[test]
fn a_terminated_run_stops_its_nodes() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let cluster = dir.path().join("cluster");
    let mut bench = Command::new(env!("CARGO_BIN_EXE_strand-scale"))
        .arg("--server-bin")
        .arg(common::server_binary())
        .arg("--data-dir")
        .arg(&cluster)
        .args(["--topics", "1", "--partitions", "1", "--idle-secs", "600"])
        .arg("--quiet")
        .spawn()
        .expect("strand-scale runs");
    let needle = cluster.join("node-").display().to_string();
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    while processes_mentioning(&needle).len() < 3 {
        assert!(Instant::now() < deadline, "the nodes never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let status = Command::new("kill")
        .args(["-TERM", &bench.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let exit = bench.wait().expect("strand-scale exits");
    assert_eq!(exit.code(), Some(2), "an interrupted run exits 2");
    assert_eq!(
        processes_mentioning(&needle),
        Vec::<u32>::new(),
        "no node left running"
    );
}
