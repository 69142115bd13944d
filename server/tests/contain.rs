//! A panic in one group's code on one node, with real processes: that group
//! alone stops there and shows in `attention`; its partition keeps taking
//! writes through its other replicas; the node's other partitions never
//! stop; the node stays up and opens the group again by itself. The same
//! for the metadata plane's replica on that node.
//!
//! Panics are injected through the `fault-injection` feature's file (see
//! `strand_server::runtime::contain`), which the test suite builds with.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use strand_client::{Client, NewRecord, TopicSpec};
use strand_wire::ops::AttentionReason;

/// Partitions of the test topic.
const PARTITIONS: u32 = 3;

/// Asks node `node` (under `dir`) to panic in `group`.
fn inject_panic(dir: &Path, node: u32, group: u64) {
    let file = dir.join(format!("node-{node}")).join("inject-panic");
    std::fs::write(file, group.to_string()).expect("write the injection file");
}

/// Produces one record to `partition`, retrying until acknowledged;
/// returns how long it took.
async fn produce_until_acked(client: &Client, partition: u32, value: &'static str) -> Duration {
    let started = Instant::now();
    loop {
        match client
            .produce("s", "t", partition, vec![NewRecord::new("k", value)])
            .await
        {
            Ok(_) => return started.elapsed(),
            Err(error) => {
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "partition {partition}: {error}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Whether `attention` shows `group` failed on `node`.
async fn shows_failed(client: &Client, node: u32, group: u64) -> bool {
    let Ok(report) = client.attention().await else {
        return false;
    };
    report.entries().any(|(answering, entry)| {
        answering == node && entry.group == group && entry.reason == AttentionReason::GroupFailed
    })
}

/// Waits until `node`'s replica of `group` is normal again and caught up
/// with the group's primary.
async fn reopened_and_caught_up(client: &Client, node: u32, group: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let primary = common::serving_primary(client, group, None, deadline).await;
        let mine = common::group_status(client, node, group).await;
        let theirs = common::group_status(client, primary, group).await;
        if let (Some(mine), Some(theirs)) = (mine, theirs)
            && mine.status == "normal"
            && mine.commit_op >= theirs.commit_op
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "node {node}'s group {group} never came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn a_panic_stops_its_group_alone_on_that_node_and_the_partition_fails_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut nodes, runtime, client) = common::cluster_with_stream_s(dir.path());
    let mut spec = TopicSpec::new("s", "t");
    spec.partition_count = PARTITIONS;
    spec.replica_count = 3;
    let groups = runtime
        .block_on(client.create_topic(spec))
        .expect("create topic");
    runtime.block_on(async {
        for partition in 0..PARTITIONS {
            produce_until_acked(&client, partition, "before").await;
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);

    // A partition's primary panics in that partition's code.
    let victim = groups[0];
    let node = runtime.block_on(common::serving_primary(&client, victim, None, deadline));
    inject_panic(dir.path(), node, victim);
    common::wait_until("attention shows the failed group", 30, || {
        runtime.block_on(shows_failed(&client, node, victim))
    });
    let gap = runtime.block_on(produce_until_acked(&client, 0, "after"));
    eprintln!(
        "partition 0 took a write {} ms after its primary's panic",
        gap.as_millis()
    );
    let serving = runtime.block_on(common::serving_primary(&client, victim, None, deadline));
    assert_ne!(serving, node, "another replica took the partition over");
    for partition in 1..PARTITIONS {
        let took = runtime.block_on(produce_until_acked(&client, partition, "meanwhile"));
        eprintln!(
            "partition {partition} took a write in {} ms",
            took.as_millis()
        );
    }
    for node in &mut nodes {
        node.assert_alive();
    }
    let panicked = nodes.iter().find(|n| n.node == node).expect("the node");
    assert_eq!(common::metric(panicked, "groups_failed_total"), 1.0);
    runtime.block_on(reopened_and_caught_up(&client, node, victim));
    let read = runtime.block_on(common::read_partition(
        &client,
        "s",
        "t",
        0,
        2,
        Instant::now() + Duration::from_secs(30),
    ));
    let values: Vec<&[u8]> = read.iter().map(|(_, _, value)| value.as_slice()).collect();
    assert_eq!(values, [b"before".as_slice(), b"after".as_slice()]);

    // The metadata plane's primary panics in the metadata plane's code.
    let node = runtime.block_on(common::serving_primary(&client, 0, None, deadline));
    let panicked = nodes.iter().find(|n| n.node == node).expect("the node");
    let failed_before = common::metric(panicked, "groups_failed_total");
    inject_panic(dir.path(), node, 0);
    common::wait_until("the metadata plane's replica failed", 30, || {
        common::metric(panicked, "groups_failed_total") > failed_before
    });
    let started = Instant::now();
    runtime.block_on(async {
        loop {
            match client.create_stream("after-panic").await {
                Ok(()) => break,
                Err(error) => {
                    assert!(started.elapsed() < Duration::from_secs(60), "{error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    });
    eprintln!(
        "the metadata plane took a request {} ms after its primary's panic",
        started.elapsed().as_millis()
    );
    let serving = runtime.block_on(common::serving_primary(&client, 0, None, deadline));
    assert_ne!(
        serving, node,
        "another replica took the metadata plane over"
    );
    runtime.block_on(async {
        for partition in 0..PARTITIONS {
            produce_until_acked(&client, partition, "still").await;
        }
    });
    for node in &mut nodes {
        node.assert_alive();
    }
    runtime.block_on(reopened_and_caught_up(&client, node, 0));
    for node in &mut nodes {
        node.terminate();
    }
}
