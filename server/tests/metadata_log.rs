//! The metadata log stays bounded: the catalog is snapshotted every
//! `metadata_snapshot_ops` ops and the log below the older snapshot goes.
//! A node killed while that happens reopens from its snapshot with the same
//! catalog, and a node that was down throughout (its log now ends below
//! where its peers' logs start) catches up by a state transfer that carries
//! the snapshot, and then answers with the same catalog.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use strand_client::{Client, TopicSpec};

/// Ops between snapshots in this test (the default is 10,000).
const SNAPSHOT_OPS: u64 = 200;

/// Create-and-delete cycles of a stream: two metadata ops each.
const CYCLES: usize = 1_600;

/// Concurrent clients churning the catalog.
const CHURNERS: usize = 8;

/// Streams that stay.
const KEPT: usize = 12;

/// Puts the compaction settings at the top of each node's file (keys after
/// a `[[peers]]` table would belong to it).
fn compact_often(nodes: &[common::Node]) {
    for node in nodes {
        let text = std::fs::read_to_string(&node.config).expect("read config");
        let text =
            format!("metadata_snapshot_ops = {SNAPSHOT_OPS}\nretention_check_ms = 100\n{text}");
        std::fs::write(&node.config, text).expect("write config");
    }
}

/// A long stream name: more bytes per op, so the log rolls sooner.
fn churn_name(churner: usize, cycle: usize) -> String {
    format!("churn-{churner}-{cycle}-{}", "x".repeat(200))
}

/// Creates and deletes streams from `CHURNERS` tasks at once.
async fn churn(client: &Client) {
    let tasks: Vec<_> = (0..CHURNERS)
        .map(|churner| {
            let client = client.clone();
            tokio::spawn(async move {
                for cycle in 0..CYCLES / CHURNERS {
                    let name = churn_name(churner, cycle);
                    client.create_stream(&name).await.expect("create stream");
                    client.delete_stream(&name).await.expect("delete stream");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("churner");
    }
}

/// Bytes of the metadata plane's log segments on `node`.
fn metadata_log_bytes(dir: &Path, node: u32) -> u64 {
    let records = dir.join(format!("node-{node}/metadata/records"));
    std::fs::read_dir(&records)
        .expect("the metadata log's directory")
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".log"))
        .map(|entry| entry.metadata().map_or(0, |meta| meta.len()))
        .sum()
}

/// The streams node `node` alone answers with (a client that knows only it).
async fn streams_on(node: &common::Node) -> BTreeSet<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = common::connect(vec![node.client_address.clone()], deadline).await;
    let reply = client.metadata().await.expect("metadata");
    reply.streams.into_iter().collect()
}

#[test]
fn the_metadata_log_is_compacted_and_a_node_behind_it_catches_up_by_transfer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut nodes = common::configure_cluster(dir.path(), 3);
    compact_often(&nodes);
    for node in &mut nodes {
        node.start();
    }
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = runtime.block_on(common::connect(common::bootstrap(&nodes), deadline));
    nodes[2].kill();
    let expected: BTreeSet<String> = (0..KEPT).map(|kept| format!("kept-{kept}")).collect();
    runtime.block_on(async {
        for name in &expected {
            client.create_stream(name).await.expect("create stream");
        }
        let mut spec = TopicSpec::new("kept-0", "t");
        spec.partition_count = 2;
        spec.replica_count = 3;
        client.create_topic(spec).await.expect("create topic");
        churn(&client).await;
    });
    let written_ops = (KEPT + 1 + 2 * CYCLES) as u64;
    common::wait_until("the metadata log dropped segments", 60, || {
        common::metric(&nodes[0], "metadata_log_segments_removed_total") >= 1.0
    });
    let kept_bytes = metadata_log_bytes(dir.path(), 1);
    println!(
        "metadata ops written: {written_ops}; node 1 keeps {kept_bytes} bytes of metadata log; \
         snapshots taken: {}",
        common::metric(&nodes[0], "metadata_snapshots_total")
    );
    assert!(
        kept_bytes < 1_200_000,
        "the log below the older snapshot went: {kept_bytes} bytes kept of about {} written",
        written_ops * 480
    );

    // A node killed now reopens from its snapshot with the same catalog.
    nodes[0].kill();
    nodes[0].start();
    runtime.block_on(async {
        client
            .create_stream("after-restart")
            .await
            .expect("create stream");
    });
    let mut expected = expected;
    expected.insert("after-restart".to_owned());
    let on_restarted = runtime.block_on(streams_on(&nodes[0]));
    assert_eq!(on_restarted, expected, "node 1 reopened from its snapshot");

    // The node that was down throughout is behind every peer's log start:
    // it catches up by a state transfer carrying the snapshot.
    nodes[2].start();
    common::wait_until("node 3 installed a metadata transfer", 60, || {
        std::fs::read_to_string(&nodes[2].log).is_ok_and(|log| {
            log.lines().any(|line| {
                line.contains("partition: state transfer installed")
                    && line.contains("node-3/metadata ")
            })
        })
    });
    runtime.block_on(async {
        client
            .create_stream("after-transfer")
            .await
            .expect("create stream");
    });
    expected.insert("after-transfer".to_owned());
    common::wait_until("node 3 applied every metadata op", 60, || {
        runtime.block_on(async {
            client
                .catalog_applied_everywhere()
                .await
                .is_ok_and(|answers| answers.iter().all(|answer| answer.result.is_ok()))
        })
    });
    // Node 3 alone, its peers stopped, answers with the whole catalog.
    nodes[0].kill();
    nodes[1].kill();
    let on_transferred = runtime.block_on(streams_on(&nodes[2]));
    assert_eq!(
        on_transferred, expected,
        "node 3's catalog after its transfer"
    );
    let log = std::fs::read_to_string(&nodes[2].log).expect("node 3's log");
    assert!(!log.contains("panicked"), "node 3 never panicked");
}
