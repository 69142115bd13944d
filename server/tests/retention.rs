//! Retention on real processes: a topic's size and age limits free disk on
//! every replica, the partition's earliest offset advances, a fetch below it
//! gets the typed `OffsetOutOfRange`, and what is retained reads back. A
//! replica that was down while the others dropped what it lacks catches up
//! by state transfer.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use strand_client::{Client, ClientError, ProducerConfig, TopicSpec};

/// Bytes per segment of the test topics (the smallest a topic may ask for).
const SEGMENT_BYTES: u64 = 64 * 1024;

/// The slack a partition directory may hold beyond its record log: the
/// superblock copies, the segment indexes, the cursor files, and the
/// zero-filled room the WAL writes ahead of the active segment's appends
/// (1 MiB, cut off when the segment is sealed).
const DIRECTORY_SLACK_BYTES: u64 = 64 * 1024 + (1 << 20);

/// How often the test nodes apply age limits.
const RETENTION_CHECK_MS: u64 = 300;

/// Three nodes that check retention every [`RETENTION_CHECK_MS`], started.
fn cluster(dir: &Path) -> Vec<common::Node> {
    let mut nodes = common::configure_cluster(dir, 3);
    for node in &mut nodes {
        let config = std::fs::read_to_string(&node.config).expect("read config");
        let config = config.replacen(
            "\n[[peers]]",
            &format!("\nretention_check_ms = {RETENTION_CHECK_MS}\n\n[[peers]]"),
            1,
        );
        std::fs::write(&node.config, config).expect("write config");
        node.start();
    }
    nodes
}

/// Creates stream `s` and topic `t` (one partition on three replicas) with
/// these limits and [`SEGMENT_BYTES`] segments.
async fn topic_with_limits(client: &Client, retention_bytes: u64, retention_ms: u64) {
    client.create_stream("s").await.expect("create stream");
    let mut spec = TopicSpec::new("s", "t");
    spec.partition_count = 1;
    spec.replica_count = 3;
    spec.retention_bytes = retention_bytes;
    spec.retention_ms = retention_ms;
    spec.segment_bytes = Some(SEGMENT_BYTES);
    client.create_topic(spec).await.expect("create topic");
}

/// Connects, creates the topic with these limits, and produces records
/// `0..records` to it.
async fn connect_and_produce(
    nodes: &[common::Node],
    retention_bytes: u64,
    retention_ms: u64,
    records: u64,
) -> Client {
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = common::connect(common::bootstrap(nodes), deadline).await;
    topic_with_limits(&client, retention_bytes, retention_ms).await;
    produce(&client, 0, records).await;
    client
}

/// The value of record `index`: its index, padded to about 512 bytes.
fn value_of(index: u64) -> Vec<u8> {
    format!("record {index:08} {}", "v".repeat(494)).into_bytes()
}

/// Produces records `from..to` in small batches (many ops: retention keeps
/// the segments of the last few hundred whatever the limits) and checks
/// that each landed at the offset equal to its index.
async fn produce(client: &Client, from: u64, to: u64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let config = ProducerConfig {
        batch_records_max: 4,
        ..ProducerConfig::default()
    };
    let producer = common::producer(client, "s", "t", config, deadline).await;
    let mut deliveries = Vec::new();
    for index in from..to {
        let delivery = producer
            .send(0, index.to_be_bytes().to_vec(), value_of(index))
            .await
            .expect("send");
        deliveries.push((index, delivery));
    }
    producer.flush().await.expect("flush");
    for (index, delivery) in deliveries {
        assert_eq!(delivery.await.expect("acknowledged"), index);
    }
}

/// Bytes under `dir`, recursively (0 if it does not exist).
fn directory_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(metadata) if metadata.is_dir() => directory_bytes(&entry.path()),
            Ok(metadata) => metadata.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Waits until `partition` holds at most `bound` bytes.
fn wait_for_size(partition: &Path, bound: u64, seconds: u64) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        let bytes = directory_bytes(partition);
        if bytes <= bound {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} holds {bytes} bytes after {seconds} s, more than {bound}",
            partition.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Topic `t`'s only partition directory on `node`.
fn partition_dir(dir: &Path, node: &common::Node) -> std::path::PathBuf {
    strand_partition::layout::partition_dir(
        &dir.join(format!("node-{}", node.node)),
        "s",
        "t",
        0,
        1,
    )
}

/// The partition's earliest offset and high watermark, from the typed
/// answer to a fetch at offset 0 (`None` while nothing was dropped).
async fn earliest_after_retention(client: &Client) -> Option<(u64, u64)> {
    match client.fetch("s", "t", 0, 0, 1024, 0).await {
        Err(ClientError::OffsetOutOfRange {
            requested: 0,
            log_start_offset,
            high_watermark,
        }) => Some((log_start_offset, high_watermark)),
        Ok(_) => None,
        Err(error) => panic!("fetch at 0: {error}"),
    }
}

/// Reads `from..to` and checks every record's value.
async fn read_back(client: &Client, from: u64, to: u64) {
    let mut offset = from;
    while offset < to {
        let fetched = client
            .fetch("s", "t", 0, offset, 1024 * 1024, 1000)
            .await
            .expect("fetch inside the retained range");
        assert!(!fetched.records.is_empty(), "records at {offset}");
        for record in fetched.records {
            assert_eq!(record.offset, offset);
            assert_eq!(record.value.to_vec(), value_of(offset));
            offset += 1;
        }
    }
}

#[test]
fn a_size_limit_keeps_every_replica_under_it_and_the_rest_reads_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let nodes = cluster(dir.path());
    let runtime = common::runtime();
    let retention_bytes: u64 = 1024 * 1024;
    let records: u64 = 12_000; // about 6 MiB
    let client = runtime.block_on(connect_and_produce(&nodes, retention_bytes, 0, records));
    let bound = retention_bytes + 2 * SEGMENT_BYTES + DIRECTORY_SLACK_BYTES;
    for node in &nodes {
        let partition = partition_dir(dir.path(), node);
        wait_for_size(&partition, bound, 60);
        assert!(common::metric(node, "partition_retention_segments_removed_total") > 0.0);
    }
    let (earliest, high_watermark) = runtime
        .block_on(earliest_after_retention(&client))
        .expect("retention dropped the oldest records");
    assert_eq!(high_watermark, records);
    assert!(earliest > 0 && earliest < records, "earliest {earliest}");
    // What is retained is at least the limit's worth of the log (a record
    // takes less than 1 KiB of it, its entry's headers included), and reads
    // back whole.
    assert!((records - earliest) * 1024 >= retention_bytes);
    runtime.block_on(read_back(&client, earliest, records));
    // Producing goes on after the head moved.
    runtime.block_on(produce(&client, records, records + 100));
    runtime.block_on(read_back(&client, records, records + 100));
}

#[test]
fn an_age_limit_drops_old_segments_within_a_check_interval() {
    let dir = tempfile::tempdir().expect("temp dir");
    let nodes = cluster(dir.path());
    let runtime = common::runtime();
    let retention_ms: u64 = 2_000;
    let records: u64 = 10_000; // about 5 MiB: dozens of segments
    let client = runtime.block_on(connect_and_produce(&nodes, 0, retention_ms, records));
    let written: u64 = nodes
        .iter()
        .map(|node| directory_bytes(&partition_dir(dir.path(), node)))
        .min()
        .unwrap_or(0);
    assert!(written > 1024 * 1024, "wrote {written} bytes");
    // Every sealed segment past the kept window goes once it is older than
    // the limit: by then the partition holds a few segments at most.
    for node in &nodes {
        let partition = partition_dir(dir.path(), node);
        common::wait_until(
            &format!("node {}'s old segments dropped", node.node),
            30,
            || directory_bytes(&partition) < written / 2,
        );
    }
    let (earliest, _) = runtime
        .block_on(earliest_after_retention(&client))
        .expect("the age limit dropped the oldest records");
    assert!(earliest > 0);
    runtime.block_on(read_back_while_aging(&client, earliest, records));
}

/// Reads `from..to` as [`read_back`] does, while an age limit may drop more
/// of the oldest segments between two fetches: a fetch below the new log
/// start goes on from there (those records were older than the limit).
async fn read_back_while_aging(client: &Client, from: u64, to: u64) {
    let mut offset = from;
    while offset < to {
        let fetched = match client.fetch("s", "t", 0, offset, 1024 * 1024, 1000).await {
            Ok(fetched) => fetched,
            Err(ClientError::OffsetOutOfRange {
                log_start_offset, ..
            }) if log_start_offset > offset && log_start_offset < to => {
                offset = log_start_offset;
                continue;
            }
            Err(error) => panic!("fetch inside the retained range at {offset}: {error}"),
        };
        assert!(!fetched.records.is_empty(), "records at {offset}");
        for record in fetched.records {
            assert_eq!(record.offset, offset);
            assert_eq!(record.value.to_vec(), value_of(offset));
            offset += 1;
        }
    }
}

#[test]
fn a_replica_behind_what_the_others_retain_catches_up_by_state_transfer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = cluster(dir.path());
    let runtime = common::runtime();
    let retention_bytes: u64 = 512 * 1024;
    let client = runtime.block_on(connect_and_produce(&nodes, retention_bytes, 0, 200));
    // Node 3 stops; the others go on far past what they retain.
    nodes[2].terminate();
    let records: u64 = 8_000;
    runtime.block_on(produce(&client, 200, records));
    let (earliest, _) = runtime
        .block_on(earliest_after_retention(&client))
        .expect("the others dropped what node 3 lacks");
    assert!(earliest > 200);
    // The others restart too, so that nothing they queued for node 3 on
    // their replica bus while it was away reaches it: it must repair, and
    // what it lacks is gone.
    for node in &mut nodes[..2] {
        node.terminate();
        node.start();
    }
    nodes[2].start();
    common::wait_until("node 3 caught up by state transfer", 90, || {
        common::metric_sum(&nodes[2], "partition_behind_log_start_total") > 0.0
            && common::metric_sum(&nodes[2], "state_transfers_installed_total") > 0.0
    });
    let group = runtime.block_on(async {
        let metadata = client.topic("s", "t").await.expect("topic");
        metadata.partitions[0].group
    });
    let caught_up = || {
        runtime.block_on(async {
            let mine = common::group_status(&client, 3, group).await?;
            let primary = common::group_status(&client, 1, group).await?;
            Some(mine.commit_op == primary.commit_op && mine.status == "normal")
        })
    };
    common::wait_until("node 3 normal at the others' commit", 60, || {
        caught_up() == Some(true)
    });
    let partition = partition_dir(dir.path(), &nodes[2]);
    assert!(directory_bytes(&partition) >= retention_bytes / 2);
    // Node 1 stops: nodes 2 and 3 serve the retained records, and more.
    nodes[0].terminate();
    let (earliest, _) = runtime
        .block_on(earliest_after_retention(&client))
        .expect("still retained from past node 3's log");
    runtime.block_on(read_back(&client, earliest, records));
    runtime.block_on(produce(&client, records, records + 100));
    runtime.block_on(read_back(&client, records, records + 100));
}
