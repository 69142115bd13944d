//! A topic's lifecycle on real processes: deleted while a node is down (the
//! node removes the data when it returns), created again under the same
//! name as a new, empty topic; produces still aimed at the deleted topic get
//! the typed `Deleted` and never land in the new one. Altered retention
//! holds at once; added partitions serve.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use strand_client::{Client, ClientError, NewRecord, TopicChange, TopicSpec};

/// The group ids whose partition directories (or their siblings) sit
/// under a node's data directory.
fn groups_on_disk(data: &Path) -> Vec<u64> {
    let mut groups = Vec::new();
    let root = data.join("partitions");
    for stream in read_dir(&root) {
        for topic in read_dir(&stream) {
            for entry in read_dir(&topic) {
                let name = entry
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if let Some(group) = strand_partition::layout::parse_group_of_entry(&name) {
                    groups.push(group);
                }
            }
        }
    }
    groups.sort_unstable();
    groups.dedup();
    groups
}

fn read_dir(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
        .unwrap_or_default()
}

fn data_of(dir: &Path, node: &common::Node) -> std::path::PathBuf {
    dir.join(format!("node-{}", node.node))
}

fn records(prefix: &str, count: u64) -> Vec<NewRecord> {
    (0..count)
        .map(|index| NewRecord::new(format!("{prefix}-{index}"), format!("{prefix}-{index}")))
        .collect()
}

/// Produces until acknowledged (a group settling after a restart refuses
/// for a while).
async fn produce(client: &Client, partition: u32, prefix: &str, count: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match client
            .produce("s", "t", partition, records(prefix, count))
            .await
        {
            Ok(_) => return,
            Err(error) => {
                assert!(Instant::now() < deadline, "produce {prefix}: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// The keys of every record of partition `partition`, from offset 0.
async fn keys(client: &Client, partition: u32, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    common::read_partition(client, "s", "t", partition, count, deadline)
        .await
        .into_iter()
        .map(|(_, key, _)| String::from_utf8_lossy(&key).into_owned())
        .collect()
}

fn topic_spec(partitions: u32) -> TopicSpec {
    let mut spec = TopicSpec::new("s", "t");
    spec.partition_count = partitions;
    spec.replica_count = 3;
    spec
}

#[test]
fn a_topic_deleted_while_a_node_is_down_is_gone_everywhere_and_its_name_starts_fresh() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut nodes, runtime, client) = common::cluster_with_stream_s(dir.path());
    let deadline = Instant::now() + Duration::from_secs(60);
    // A second client that keeps the old topic's routing.
    let stale = runtime.block_on(common::connect(common::bootstrap(&nodes), deadline));
    let old_groups = runtime.block_on(async {
        let groups = client
            .create_topic(topic_spec(2))
            .await
            .expect("create topic");
        produce(&client, 0, "old", 20).await;
        produce(&client, 1, "old", 20).await;
        produce(&stale, 0, "stale", 1).await;
        groups
    });
    for node in &nodes {
        let on_disk = groups_on_disk(&data_of(dir.path(), node));
        assert_eq!(
            on_disk, old_groups,
            "node {} holds both partitions",
            node.node
        );
    }

    // Node 3 stops; the topic is deleted while it is down.
    nodes[2].kill();
    let deleted = runtime.block_on(common::strand(
        &common::bootstrap(&nodes[..2]).join(","),
        &["topic", "delete", "s/t"],
        b"",
    ));
    assert_eq!(
        deleted.outcome,
        strand_client::cli::Outcome::Usage,
        "needs --yes"
    );
    let deleted = runtime.block_on(common::strand(
        &common::bootstrap(&nodes[..2]).join(","),
        &["--json", "topic", "delete", "s/t", "--yes"],
        b"",
    ));
    assert_eq!(
        deleted.outcome,
        strand_client::cli::Outcome::Success,
        "{}{}",
        deleted.stdout,
        deleted.stderr
    );
    for node in &nodes[..2] {
        let data = data_of(dir.path(), node);
        common::wait_until("the running nodes remove the data", 30, || {
            groups_on_disk(&data).is_empty()
        });
    }
    // A produce still aimed at the deleted partition is told so.
    match runtime.block_on(stale.produce("s", "t", 0, records("late", 1))) {
        Err(ClientError::Deleted { .. }) => {}
        other => panic!("a produce to the deleted topic: {other:?}"),
    }
    assert!(matches!(
        runtime.block_on(client.topic("s", "t")),
        Err(ClientError::UnknownTopic { .. })
    ));

    // The name again: a new, empty topic.
    let new_groups = runtime.block_on(async {
        let groups = client
            .create_topic(topic_spec(1))
            .await
            .expect("create again");
        produce(&client, 0, "new", 5).await;
        groups
    });
    assert!(
        new_groups.iter().all(|group| !old_groups.contains(group)),
        "new groups {new_groups:?}, old {old_groups:?}"
    );
    // The node that was down returns, removes the old data, hosts the new.
    nodes[2].start();
    let data = data_of(dir.path(), &nodes[2]);
    common::wait_until(
        "the returning node removes the deleted partitions",
        60,
        || groups_on_disk(&data) == new_groups,
    );
    // The stale client, told its partition was deleted, finds the new topic.
    runtime.block_on(produce(&stale, 0, "after", 1));
    let read = runtime.block_on(keys(&client, 0, 6));
    let mut expected: Vec<String> = (0..5).map(|index| format!("new-{index}")).collect();
    expected.push("after-0".to_owned());
    assert_eq!(read, expected, "only the new topic's records");
    let end = runtime
        .block_on(client.fetch("s", "t", 0, 6, 1024, 0))
        .expect("fetch at the end");
    assert!(end.records.is_empty(), "nothing past them");
}

#[test]
fn a_stream_deleted_takes_its_topics() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (nodes, runtime, client) = common::cluster_with_stream_s(dir.path());
    runtime.block_on(async {
        client.create_topic(topic_spec(1)).await.expect("create t");
        let mut other = TopicSpec::new("s", "u");
        other.replica_count = 3;
        client.create_topic(other).await.expect("create u");
        produce(&client, 0, "r", 3).await;
        let deleted = client.delete_stream("s").await.expect("delete stream");
        assert_eq!(deleted.len(), 2);
        assert!(matches!(
            client.topic("s", "u").await,
            Err(ClientError::UnknownStream { .. } | ClientError::UnknownTopic { .. })
        ));
        client
            .create_stream("s")
            .await
            .expect("the name is free again");
    });
    for node in &nodes {
        let data = data_of(dir.path(), node);
        common::wait_until("every node removes the stream's data", 30, || {
            groups_on_disk(&data).is_empty()
        });
    }
}

#[test]
fn altered_retention_holds_at_once_and_added_partitions_serve() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (nodes, runtime, client) = common::cluster_with_stream_s(dir.path());
    runtime.block_on(async {
        let mut spec = topic_spec(1);
        spec.segment_bytes = Some(64 * 1024);
        client.create_topic(spec).await.expect("create topic");
        // 1,000 batches of about 1 KiB: well past 256 ops and a few segments.
        let value = vec![b'v'; 1000];
        for batch in 0..1000u64 {
            let record = NewRecord::new(format!("k{batch}"), value.clone());
            client
                .produce("s", "t", 0, vec![record])
                .await
                .expect("produce");
        }
    });
    // The node's periodic check is 30 s away: the alter applies at once.
    let started = Instant::now();
    let altered = runtime.block_on(common::strand(
        &common::bootstrap(&nodes).join(","),
        &["topic", "alter", "s/t", "--retention-bytes", "131072"],
        b"",
    ));
    assert_eq!(
        altered.outcome,
        strand_client::cli::Outcome::Success,
        "{}{}",
        altered.stdout,
        altered.stderr
    );
    // Another client made the change, so this one's metadata question may
    // reach a backup that applies the commit a moment later.
    common::wait_until("the cluster reports the new limit", 10, || {
        runtime
            .block_on(client.topic("s", "t"))
            .is_ok_and(|info| info.retention_bytes == 131_072)
    });
    common::wait_until("the earliest offset moves up", 20, || {
        matches!(
            runtime.block_on(client.fetch("s", "t", 0, 0, 1024, 0)),
            Err(ClientError::OffsetOutOfRange { log_start_offset, .. }) if log_start_offset > 0
        )
    });
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "before the periodic check"
    );

    // Two more partitions, with the topic's policies.
    let added = runtime
        .block_on(client.add_partitions("s", "t", 3))
        .expect("add");
    assert_eq!(added.len(), 2);
    let info = runtime.block_on(client.topic("s", "t")).expect("topic");
    assert_eq!(info.partitions.len(), 3);
    assert_eq!(info.retention_bytes, 131_072);
    runtime.block_on(produce(&client, 2, "p2", 4));
    assert_eq!(
        runtime.block_on(keys(&client, 2, 4)),
        vec!["p2-0", "p2-1", "p2-2", "p2-3"]
    );
    // An age limit too, through the SDK.
    let change = TopicChange {
        retention_ms: Some(3_600_000),
        ..TopicChange::default()
    };
    runtime
        .block_on(client.alter_topic("s", "t", change))
        .expect("alter");
    let info = runtime.block_on(client.topic("s", "t")).expect("topic");
    assert_eq!(
        (info.retention_bytes, info.retention_ms),
        (131_072, 3_600_000)
    );
}
