//! The `strand` command line against a real three-node cluster, run
//! in-process through `strand_client::cli::run` with a stdin buffer: topics
//! are created, listed and described; lines produced from stdin come back
//! from `consume` (as text, as JSON, and through a stored cursor); `status`
//! shows every node and partition; `attention` is clear; errors say what to do.

mod common;

use std::time::{Duration, Instant};

use strand_client::cli::{self, Outcome};

use common::strand;

/// Like [`strand`], asserting success.
async fn strand_ok(cluster: &str, args: &[&str], stdin: &[u8]) -> String {
    let run = strand(cluster, args, stdin).await;
    assert_eq!(
        run.outcome,
        Outcome::Success,
        "strand {args:?} failed\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    run.stdout
}

/// Starts a cluster, waits until it answers; returns its nodes and the
/// `--cluster` value naming all of them.
async fn cluster_ready(dir: &std::path::Path) -> (Vec<common::Node>, String) {
    let nodes = common::start_cluster(dir);
    let bootstrap = common::bootstrap(&nodes);
    let deadline = Instant::now() + Duration::from_secs(60);
    drop(common::connect(bootstrap.clone(), deadline).await);
    (nodes, bootstrap.join(","))
}

/// Waits until every node's metadata has `topic` (backups apply the create
/// a heartbeat after the primary), so any node a later run asks knows it.
async fn wait_for_topic(nodes: &[common::Node], topic: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for node in nodes {
        loop {
            let run = strand(&node.client_address, &["topic", "describe", topic], b"").await;
            if run.outcome == Outcome::Success {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {} never learned {topic}: {}",
                node.node,
                run.stderr
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[test]
fn a_session_creates_a_topic_produces_lines_and_reads_them_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    common::runtime().block_on(async {
        let (nodes, cluster) = cluster_ready(dir.path()).await;

        // The stream is created on the way.
        let created = strand_ok(
            &cluster,
            &[
                "topic",
                "create",
                "shop/orders",
                "--partitions",
                "2",
                "--durability",
                "persisted",
            ],
            b"",
        )
        .await;
        assert!(
            created.starts_with("created topic shop/orders: 2 partition(s)"),
            "{created}"
        );
        assert!(created.contains("durability  persisted"), "{created}");
        let again = strand(&cluster, &["topic", "create", "shop/orders"], b"").await;
        assert_eq!(again.outcome, Outcome::Failed, "a second create is refused");
        assert!(again.stderr.contains("already exists"), "{}", again.stderr);
        wait_for_topic(&nodes, "shop/orders").await;

        let list = strand_ok(&cluster, &["topic", "list"], b"").await;
        let mut lines = list.lines();
        assert!(
            lines
                .next()
                .is_some_and(|header| header.starts_with("TOPIC")),
            "{list}"
        );
        let row: Vec<&str> = lines.next().expect("a row").split_whitespace().collect();
        assert_eq!(row[..4], ["shop/orders", "2", "3", "persisted"], "{list}");
        let describe = strand_ok(&cluster, &["topic", "describe", "shop/orders"], b"").await;
        assert!(describe.contains("confirm     majority"), "{describe}");
        let partition_rows = describe
            .lines()
            .filter(|line| line.contains("nodes "))
            .count();
        assert_eq!(partition_rows, 2, "{describe}");
        let json = strand_ok(
            &cluster,
            &["topic", "describe", "shop/orders", "--json"],
            b"",
        )
        .await;
        assert!(json.contains("\"durability\": \"persisted\""), "{json}");
        assert!(json.contains("\"primary_node\""), "{json}");

        let lines = "apples\npears\twith a tab\nplums\n";
        let produced = strand_ok(&cluster, &["produce", "shop/orders"], lines.as_bytes()).await;
        assert!(produced.starts_with("produced 3 record(s)"), "{produced}");
        assert!(produced.contains("offsets 0..=2"), "{produced}");
        let keyed = strand_ok(
            &cluster,
            &[
                "produce",
                "shop/orders",
                "--partition",
                "1",
                "--key-sep",
                "=",
                "--json",
            ],
            b"k1=v1\nk2=v2\n",
        )
        .await;
        assert!(keyed.contains("\"records\": 2"), "{keyed}");

        let consumed = strand_ok(&cluster, &["consume", "shop/orders"], b"").await;
        assert_eq!(consumed, "0\tapples\n1\tpears\\twith a tab\n2\tplums\n");
        let keyed = strand_ok(
            &cluster,
            &[
                "consume",
                "shop/orders",
                "--partition",
                "1",
                "--key-sep",
                "=",
            ],
            b"",
        )
        .await;
        assert_eq!(keyed, "0\tk1=v1\n1\tk2=v2\n");
        let json = strand_ok(&cluster, &["consume", "shop/orders", "--json"], b"").await;
        let values: Vec<&str> = json.lines().collect();
        assert_eq!(values.len(), 3, "{json}");
        assert!(values[1].contains(r#""offset":1"#), "{json}");
        assert!(
            values[1].contains(r#""value":"pears\twith a tab""#),
            "{json}"
        );

        // A cursor is stored as the records are printed: the next run resumes.
        let first = strand_ok(
            &cluster,
            &[
                "consume",
                "shop/orders",
                "--cursor",
                "billing",
                "--count",
                "2",
            ],
            b"",
        )
        .await;
        assert_eq!(first.lines().count(), 2, "{first}");
        let rest = strand_ok(
            &cluster,
            &["consume", "shop/orders", "--cursor", "billing"],
            b"",
        )
        .await;
        assert_eq!(rest, "2\tplums\n");
        // One consumer's cursor: read, deleted, gone.
        let get = ["cursor", "get", "shop/orders", "billing"];
        assert_eq!(strand_ok(&cluster, &get, b"").await, "3\n");
        let deleted = strand_ok(
            &cluster,
            &["cursor", "delete", "shop/orders", "billing"],
            b"",
        )
        .await;
        assert_eq!(deleted, "deleted cursor billing on partition 0\n");
        assert_eq!(strand_ok(&cluster, &get, b"").await, "none\n");
        let from = strand_ok(&cluster, &["consume", "shop/orders", "--from", "2"], b"").await;
        assert_eq!(from, "2\tplums\n");

        let generated = strand_ok(
            &cluster,
            &["produce", "shop/orders", "--count", "500", "--size", "64"],
            b"",
        )
        .await;
        assert!(
            generated.starts_with("produced 500 record(s)"),
            "{generated}"
        );
        assert!(generated.contains("offsets 3..=502"), "{generated}");
        let tail = strand_ok(
            &cluster,
            &[
                "consume",
                "shop/orders",
                "--from",
                "502",
                "--follow",
                "--count",
                "1",
            ],
            b"",
        )
        .await;
        assert!(tail.starts_with("502\trecord-499 "), "{tail}");
    });
}

#[test]
fn status_and_attention_report_a_healthy_cluster() {
    let dir = tempfile::tempdir().expect("temp dir");
    common::runtime().block_on(async {
        let (nodes, cluster) = cluster_ready(dir.path()).await;
        strand_ok(
            &cluster,
            &["topic", "create", "s/t", "--partitions", "2"],
            b"",
        )
        .await;
        wait_for_topic(&nodes, "s/t").await;
        strand_ok(&cluster, &["produce", "s/t"], b"one\ntwo\n").await;

        let status = strand_ok(&cluster, &["status"], b"").await;
        for node in &nodes {
            let row = status
                .lines()
                .find(|line| line.split_whitespace().nth(1) == Some(node.client_address.as_str()))
                .unwrap_or_else(|| panic!("no row for node {}:\n{status}", node.node));
            assert_eq!(row.split_whitespace().nth(2), Some("ok"), "{status}");
        }
        for partition in ["s/t/0", "s/t/1"] {
            let replicas = status
                .lines()
                .filter(|line| line.starts_with(&format!("{partition} ")))
                .count();
            assert_eq!(replicas, 3, "{partition} has a row per replica:\n{status}");
        }
        assert!(status.contains("(metadata)"), "{status}");
        assert!(status.contains("untrusted logs: none"), "{status}");
        let json = strand_ok(&cluster, &["status", "--json"], b"").await;
        assert!(json.matches("\"answered\": true").count() >= 3, "{json}");
        assert!(json.contains("\"name\": \"s/t/1\""), "{json}");
        assert!(status.contains("  EARLIEST  END  "), "{status}");

        // Each partition's earliest offset and end, as its primary reports
        // them (status is published each tick: the end may lag a moment).
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let described = strand_ok(&cluster, &["topic", "describe", "s/t", "--json"], b"").await;
            let value: serde_json::Value = serde_json::from_str(&described).expect("json");
            let offsets: Vec<(Option<u64>, Option<u64>)> = value["partitions"]
                .as_array()
                .expect("partitions")
                .iter()
                .map(|partition| {
                    (
                        partition["log_start_offset"].as_u64(),
                        partition["high_watermark"].as_u64(),
                    )
                })
                .collect();
            if offsets == [(Some(0), Some(2)), (Some(0), Some(0))] {
                break;
            }
            assert!(Instant::now() < deadline, "{described}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let described = strand_ok(&cluster, &["topic", "describe", "s/t"], b"").await;
        assert!(described.contains("  EARLIEST  END\n"), "{described}");

        // A fresh group may still be settling its first view: wait for clear.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let attention = strand(&cluster, &["attention"], b"").await;
            if attention.outcome == Outcome::Success {
                assert!(attention.stdout.starts_with("nothing needs attention"));
                break;
            }
            assert_eq!(
                attention.outcome,
                Outcome::NeedsAttention,
                "{}",
                attention.stderr
            );
            assert!(
                Instant::now() < deadline,
                "never clear:\n{}",
                attention.stdout
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let json = strand_ok(&cluster, &["attention", "--json"], b"").await;
        assert!(json.contains("\"clear\": true"), "{json}");
    });
}

#[test]
fn errors_say_what_to_do() {
    let dir = tempfile::tempdir().expect("temp dir");
    common::runtime().block_on(async {
        let (_nodes, cluster) = cluster_ready(dir.path()).await;

        let unknown = strand(&cluster, &["produce", "shop/missing"], b"x\n").await;
        assert_eq!(unknown.outcome, Outcome::Failed);
        assert!(
            unknown.stderr.contains("shop/missing"),
            "{}",
            unknown.stderr
        );
        assert!(
            unknown.stderr.contains("strand topic create"),
            "{}",
            unknown.stderr
        );
        assert!(
            unknown.stdout.is_empty(),
            "nothing produced: {}",
            unknown.stdout
        );
        let unknown = strand(&cluster, &["consume", "shop/missing"], b"").await;
        assert_eq!(unknown.outcome, Outcome::Failed);
        assert!(
            unknown.stderr.contains("shop/missing"),
            "{}",
            unknown.stderr
        );

        // Refused before anything is sent: no cluster needed.
        let nowhere = format!("127.0.0.1:{}", common::free_port());
        let refused = strand(&nowhere, &["accept-loss", "shop/orders/0"], b"").await;
        assert_eq!(refused.outcome, Outcome::Usage);
        assert!(
            refused.stderr.contains("MAY LOSE CONFIRMED RECORDS"),
            "{}",
            refused.stderr
        );
        assert!(refused.stderr.contains("--yes"), "{}", refused.stderr);

        let started = Instant::now();
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let args = [
            "strand",
            "--cluster",
            &nowhere,
            "--timeout-ms",
            "1000",
            "status",
        ];
        let outcome = cli::run(args, &b""[..], &mut stdout, &mut stderr).await;
        let stderr = String::from_utf8_lossy(&stderr);
        assert_eq!(outcome, Outcome::Failed);
        assert!(stderr.contains(&nowhere), "{stderr}");
        assert!(stderr.contains("--cluster"), "{stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "--timeout-ms bounds the wait"
        );

        let usage = strand(&cluster, &["topic", "create", "no-slash"], b"").await;
        assert_eq!(usage.outcome, Outcome::Usage);
        assert!(usage.stderr.contains("STREAM/TOPIC"), "{}", usage.stderr);
    });
}

#[test]
fn partition_reassign_changes_a_confirm_policy_that_status_then_shows() {
    let dir = tempfile::tempdir().expect("temp dir");
    common::runtime().block_on(async {
        let (nodes, cluster) = cluster_ready(dir.path()).await;
        strand_ok(
            &cluster,
            &[
                "topic",
                "create",
                "s/t",
                "--partitions",
                "1",
                "--confirm",
                "local",
            ],
            b"",
        )
        .await;
        wait_for_topic(&nodes, "s/t").await;
        strand_ok(&cluster, &["produce", "s/t"], b"one\ntwo\n").await;
        let status = strand_ok(&cluster, &["status"], b"").await;
        assert!(status.contains("W3/R1"), "{status}");

        // A dry run shows the plan, after the node's safety check, and
        // changes nothing.
        let previewed = strand_ok(
            &cluster,
            &[
                "partition",
                "reassign",
                "s/t/0",
                "--replicas",
                "1,2,3",
                "--confirm",
                "majority",
                "--dry-run",
            ],
            b"",
        )
        .await;
        assert!(
            previewed.contains("W/R       3/1          ->  2/2"),
            "{previewed}"
        );
        assert!(previewed.contains("dry run"), "{previewed}");
        let status = strand_ok(&cluster, &["status"], b"").await;
        assert!(
            status.contains("W3/R1"),
            "the dry run changed nothing:\n{status}"
        );

        let moved = strand_ok(
            &cluster,
            &[
                "partition",
                "reassign",
                "s/t/0",
                "--replicas",
                "1,2,3",
                "--confirm",
                "majority",
            ],
            b"",
        )
        .await;
        assert!(moved.contains("in place"), "{moved}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let status = strand_ok(&cluster, &["status"], b"").await;
            let row = status.lines().find(|line| line.starts_with("s/t/0 "));
            if row.is_some_and(|row| {
                row.contains("W2/R2") && row.split_whitespace().nth(2) == Some("1")
            }) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "status never showed epoch 1, W2/R2:\n{status}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        strand_ok(&cluster, &["produce", "s/t"], b"three\n").await;

        // Dropping a copy is refused without --yes, and for a node that
        // holds no retired copy.
        let unconfirmed = strand(
            &cluster,
            &["partition", "drop-replica", "s/t/0", "--node", "3"],
            b"",
        )
        .await;
        assert_ne!(unconfirmed.outcome, Outcome::Success);
        assert!(
            unconfirmed.stderr.contains("--yes"),
            "{}",
            unconfirmed.stderr
        );
        let member = strand(
            &cluster,
            &["partition", "drop-replica", "s/t/0", "--node", "3", "--yes"],
            b"",
        )
        .await;
        assert_ne!(member.outcome, Outcome::Success);
        assert!(member.stderr.contains("retired"), "{}", member.stderr);
        // Its dry run needs no --yes and says the same.
        let previewed = strand(
            &cluster,
            &[
                "partition",
                "drop-replica",
                "s/t/0",
                "--node",
                "3",
                "--dry-run",
            ],
            b"",
        )
        .await;
        assert_ne!(previewed.outcome, Outcome::Success);
        assert!(previewed.stderr.contains("retired"), "{}", previewed.stderr);
    });
}
