//! Idle partitions go quiet on real nodes: every group of every node
//! reports quiet (`groups_quiet` equals `groups_hosted`), a write wakes its
//! partition only while it is busy, and a SIGKILL of a node whose
//! partitions were all quiet still fails them over, through node-level
//! liveness alone, with nothing acknowledged lost.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{BATCH, Node, check_acknowledged, metric, produce_batch, serving_primary};
use strand_client::TopicSpec;

const PARTITIONS: u32 = 8;

/// Waits until every running node's groups are all quiet.
fn wait_all_quiet(nodes: &[Node], groups: f64, deadline: Instant) {
    for node in nodes.iter().filter(|node| node.child.is_some()) {
        loop {
            let hosted = metric(node, "groups_hosted");
            let quiet = metric(node, "groups_quiet");
            if hosted == groups && quiet == groups {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {}: {quiet} of {hosted} groups quiet, {groups} expected",
                node.node
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn idle_partitions_go_quiet_wake_for_a_write_and_fail_over_from_quiet() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = common::configure_cluster(dir.path(), 3);
    for node in &mut nodes {
        node.start();
    }
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(180);
    let groups = f64::from(PARTITIONS + 1);
    let (client, groups_of_topic) = runtime.block_on(async {
        let client = common::connect_patient(&nodes, deadline).await;
        client.create_stream("s").await.expect("create stream");
        let mut spec = TopicSpec::new("s", "t");
        spec.partition_count = PARTITIONS;
        let groups = client.create_topic(spec).await.expect("create topic");
        (client, groups)
    });
    let partition_0 = groups_of_topic[0];
    let mut acked = BTreeMap::new();
    acked.insert(0, runtime.block_on(produce_batch(&client, 0, deadline)));
    wait_all_quiet(&nodes, groups, deadline);

    // A write wakes its partition; once done, it is quiet again.
    acked.insert(1, runtime.block_on(produce_batch(&client, 1, deadline)));
    wait_all_quiet(&nodes, groups, deadline);

    // Every partition quiet, the node leading partition 0 dies: its quiet
    // backups hear no heartbeat, only the node-level liveness, and fail over.
    let primary = runtime.block_on(serving_primary(&client, partition_0, None, deadline));
    nodes[primary as usize - 1].kill();
    // No request goes to the partition until a survivor leads it: nothing
    // but the liveness signal can wake its quiet backups.
    let successor = runtime.block_on(serving_primary(
        &client,
        partition_0,
        Some(primary),
        deadline,
    ));
    assert_ne!(successor, primary);
    acked.insert(2, runtime.block_on(produce_batch(&client, 2, deadline)));
    runtime.block_on(check_acknowledged(
        &client,
        &acked,
        (acked.len() as u64 * BATCH) as usize,
    ));
    // The survivors settle quiet again around the missing node.
    wait_all_quiet(&nodes, groups, deadline);
}
