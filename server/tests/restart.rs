//! Under `persisted` durability, SIGKILL of every node at once loses no
//! acknowledged record: after the three nodes restart on their data
//! directories, every record reads back with its bytes at the offset it was
//! acknowledged with, and the partitions take more records after them. A
//! clean restart (SIGTERM everywhere) resumes every group in its view, with
//! no view change, and loses nothing even under `replicated`.

mod common;

use std::time::{Duration, Instant};

use strand_client::{Client, Durability, ProducerConfig, TopicSpec};

const PARTITIONS: u32 = 3;

/// Records produced before the crash, and again after the restart.
const RECORDS: u64 = 6_000;

/// What each partition acknowledged, by partition.
type Expected = Vec<common::Records>;

/// Produces `count` records round-robin over the partitions (`round` in
/// their values) and waits for every acknowledgement; appends what was
/// acknowledged to `expected`, checking that each partition's offsets
/// continue where its acknowledged records ended.
async fn produce(client: &Client, round: u32, count: u64, expected: &mut Expected) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let producer = common::producer(client, "s", "t", ProducerConfig::default(), deadline).await;
    let mut deliveries = Vec::new();
    for index in 0..count {
        let partition = (index % u64::from(PARTITIONS)) as u32;
        let key = format!("r{round}k{index}").into_bytes();
        let value = format!(
            "round {round}, record {index}: {}",
            "x".repeat((index % 64) as usize)
        )
        .into_bytes();
        let delivery = producer
            .send(partition, key.clone(), value.clone())
            .await
            .expect("send");
        deliveries.push((partition, key, value, delivery));
    }
    producer.flush().await.expect("flush");
    for (partition, key, value, delivery) in deliveries {
        let offset = delivery.await.expect("acknowledged");
        let records = &mut expected[partition as usize];
        assert_eq!(
            offset,
            records.len() as u64,
            "partition {partition}: round {round} offsets continue the acknowledged ones"
        );
        records.push((offset, key, value));
    }
}

/// Connects and creates topic `s/t` of [`PARTITIONS`] partitions on three
/// replicas under `durability` (its cursors too).
async fn topic_s_t(bootstrap: Vec<String>, durability: Durability) -> Client {
    let client = common::connect(bootstrap, Instant::now() + Duration::from_secs(60)).await;
    client.create_stream("s").await.expect("create stream");
    let mut spec = TopicSpec::new("s", "t");
    spec.partition_count = PARTITIONS;
    spec.replica_count = 3;
    spec.durability = Some(durability);
    spec.consumer_offset_durability = Some(durability);
    client.create_topic(spec).await.expect("create topic");
    client
}

/// Reads every partition back and compares with `expected`.
async fn read_back(client: &Client, expected: &Expected, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for (partition, records) in expected.iter().enumerate() {
        let read =
            common::read_partition(client, "s", "t", partition as u32, records.len(), deadline)
                .await;
        assert_eq!(
            read.len(),
            records.len(),
            "{what}: partition {partition} count"
        );
        for (got, want) in read.iter().zip(records) {
            assert_eq!(got, want, "{what}: partition {partition}");
        }
    }
}

#[test]
fn a_full_cluster_sigkill_under_persisted_loses_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = common::start_cluster(dir.path());
    let bootstrap = common::bootstrap(&nodes);
    let runtime = common::runtime();
    let mut expected: Expected = vec![Vec::new(); PARTITIONS as usize];

    runtime.block_on(async {
        let client = topic_s_t(bootstrap.clone(), Durability::Persisted).await;
        produce(&client, 0, RECORDS, &mut expected).await;
        read_back(&client, &expected, "before the crash").await;
    });

    // Every node at once, no clean shutdown; then the same data directories.
    for node in &mut nodes {
        node.kill();
    }
    for node in &mut nodes {
        node.start();
    }

    runtime.block_on(async {
        let client =
            common::connect(bootstrap.clone(), Instant::now() + Duration::from_secs(60)).await;
        read_back(&client, &expected, "after the restart").await;
        produce(&client, 1, RECORDS, &mut expected).await;
        read_back(&client, &expected, "after producing more").await;
    });
    for node in &mut nodes {
        node.assert_alive();
    }
    drop(nodes);
}

/// Every group's (epoch, view) on every node, once each answers and all
/// are normal.
fn views_once_normal(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    groups_per_node: usize,
) -> std::collections::BTreeMap<(u32, u64), (u32, u32)> {
    let mut views = std::collections::BTreeMap::new();
    common::wait_until("every group normal on every node", 60, || {
        let Ok(status) = runtime.block_on(client.cluster_status()) else {
            return false;
        };
        views.clear();
        for (node, group) in status.groups() {
            if group.status != "normal" {
                return false;
            }
            views.insert((node, group.group), (group.epoch, group.view));
        }
        views.len() == 3 * groups_per_node
    });
    views
}

#[test]
fn a_clean_restart_of_every_node_changes_no_view_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = common::start_cluster(dir.path());
    let bootstrap = common::bootstrap(&nodes);
    let runtime = common::runtime();
    let mut expected: Expected = vec![Vec::new(); PARTITIONS as usize];
    let client = runtime.block_on(async {
        // Acknowledged before the fsync: the clean shutdown must sync them.
        let client = topic_s_t(bootstrap.clone(), Durability::Replicated).await;
        produce(&client, 0, RECORDS / 3, &mut expected).await;
        client
    });
    // The partitions and the metadata plane, on each of the three nodes.
    let groups_per_node = PARTITIONS as usize + 1;
    let before = views_once_normal(&runtime, &client, groups_per_node);

    // SIGTERM everywhere at once, as an operator's restart does; then the
    // same data directories.
    let mut children: Vec<_> = nodes
        .iter_mut()
        .map(|node| node.child.take().expect("running"))
        .collect();
    for child in &children {
        let sent = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .expect("run kill");
        assert!(sent.success());
    }
    for child in &mut children {
        let status = child.wait().expect("wait for a node");
        assert!(status.success(), "a node exited with {status}");
    }
    for node in &mut nodes {
        node.start();
    }

    let after = views_once_normal(&runtime, &client, groups_per_node);
    assert_eq!(after, before, "every group resumed in its view");
    for node in &nodes {
        for (_, group) in before.keys().filter(|(on, _)| *on == node.node) {
            assert_eq!(
                common::view_changes(node, *group),
                0.0,
                "node {}: group {group} started a view change",
                node.node
            );
        }
    }
    runtime.block_on(async {
        read_back(&client, &expected, "after the clean restart").await;
        produce(&client, 1, RECORDS / 3, &mut expected).await;
        read_back(&client, &expected, "after producing more").await;
    });
    for node in &mut nodes {
        node.assert_alive();
    }
}
