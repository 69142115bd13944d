//! Keyed records and reading by time on real processes: every record with
//! one key lands on one partition, in send order, and that partition is the
//! one Kafka's default partitioner picks (murmur2) for the topic's partition
//! count, from the SDK and from `strand produce --key-sep`; `consume
//! --from-time` starts at the first record appended at or after the time.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use strand_client::partitioner::partition_for_key;
use strand_client::{Client, ProducerConfig, TopicSpec};

const PARTITIONS: u32 = 4;

/// Every record of every partition, as (partition, key, value) in offset
/// order, up to `expected` records in all.
async fn read_all(client: &Client, expected: usize) -> Vec<(u32, String, String)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut all = Vec::new();
    for partition in 0..PARTITIONS {
        let mut offset = 0;
        loop {
            let fetched = client
                .fetch("s", "t", partition, offset, 1 << 20, 0)
                .await
                .expect("fetch");
            if fetched.records.is_empty() {
                break;
            }
            for record in fetched.records {
                all.push((
                    partition,
                    String::from_utf8_lossy(&record.key).into_owned(),
                    String::from_utf8_lossy(&record.value).into_owned(),
                ));
            }
            offset = fetched.next_offset;
            assert!(Instant::now() < deadline, "reading partition {partition}");
        }
    }
    assert_eq!(all.len(), expected, "every record read back");
    all
}

/// Checks that each key's records sit on its murmur2 partition, with their
/// sequence numbers (the value's `#N` suffix) ascending.
fn check_by_key(records: &[(u32, String, String)]) -> BTreeMap<String, u32> {
    let mut seen: BTreeMap<String, (u32, u64)> = BTreeMap::new();
    for (partition, key, value) in records {
        let sequence: u64 = value
            .rsplit_once('#')
            .and_then(|(_, number)| number.parse().ok())
            .expect("a sequence number");
        assert_eq!(
            *partition,
            partition_for_key(key.as_bytes(), PARTITIONS),
            "key {key}"
        );
        if let Some((on, last)) = seen.get(key) {
            assert_eq!(on, partition, "key {key} on one partition");
            assert!(sequence > *last, "key {key}: #{sequence} after #{last}");
        }
        seen.insert(key.clone(), (*partition, sequence));
    }
    seen.into_iter()
        .map(|(key, (partition, _))| (key, partition))
        .collect()
}

#[test]
fn keyed_records_stay_on_their_kafka_partition_in_send_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (nodes, runtime, client) = common::cluster_with_stream_s(dir.path());
    let deadline = Instant::now() + Duration::from_secs(60);
    runtime.block_on(async {
        let mut spec = TopicSpec::new("s", "t");
        spec.partition_count = PARTITIONS;
        spec.replica_count = 3;
        client.create_topic(spec).await.expect("create topic");
    });

    // The SDK: 40 keys, 10 records each, interleaved.
    runtime.block_on(async {
        let config = ProducerConfig {
            batch_records_max: 16,
            ..ProducerConfig::default()
        };
        let producer = common::producer(&client, "s", "t", config, deadline).await;
        let mut deliveries = Vec::new();
        for round in 0..10u64 {
            for key in 0..40u64 {
                let delivery = producer
                    .send_keyed(format!("user-{key}"), format!("sdk #{round}"))
                    .await
                    .expect("send");
                deliveries.push(delivery);
            }
        }
        producer.close().await.expect("close");
        for delivery in deliveries {
            delivery.await.expect("acknowledged");
        }
    });
    let placed = check_by_key(&runtime.block_on(read_all(&client, 400)));
    let used: std::collections::BTreeSet<u32> = placed.values().copied().collect();
    assert!(
        used.len() > 1,
        "40 keys spread over the partitions: {used:?}"
    );

    // The command line, by key: the same keys land where the SDK put them.
    let lines: String = (10..13u64)
        .flat_map(|round| (0..40u64).map(move |key| format!("user-{key}=cli #{round}\n")))
        .collect();
    let cluster = common::bootstrap(&nodes).join(",");
    let produced = runtime.block_on(common::strand(
        &cluster,
        &["produce", "s/t", "--key-sep", "="],
        lines.as_bytes(),
    ));
    assert_eq!(
        produced.outcome,
        strand_client::cli::Outcome::Success,
        "{}{}",
        produced.stdout,
        produced.stderr
    );
    assert!(
        produced.stdout.contains("by key: partition"),
        "{}",
        produced.stdout
    );
    let placed_again = check_by_key(&runtime.block_on(read_all(&client, 520)));
    assert_eq!(placed, placed_again, "the CLI maps keys as the SDK does");
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos() as u64
}

#[test]
fn reading_from_a_time_starts_at_the_first_record_appended_at_or_after_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (nodes, runtime, client) = common::cluster_with_stream_s(dir.path());
    let cluster = common::bootstrap(&nodes).join(",");
    let before = now_ns();
    let boundary = runtime.block_on(async {
        let mut spec = TopicSpec::new("s", "t");
        spec.replica_count = 3;
        client.create_topic(spec).await.expect("create topic");
        let early: Vec<_> = (0..5)
            .map(|index| strand_client::NewRecord::new("", format!("early {index}")))
            .collect();
        client
            .produce("s", "t", 0, early)
            .await
            .expect("produce early");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let boundary = now_ns();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let late: Vec<_> = (0..3)
            .map(|index| strand_client::NewRecord::new("", format!("late {index}")))
            .collect();
        client
            .produce("s", "t", 0, late)
            .await
            .expect("produce late");
        boundary
    });
    let at = |timestamp_ns| {
        runtime
            .block_on(client.offset_for_time("s", "t", 0, timestamp_ns))
            .expect("offset for time")
    };
    assert_eq!(at(before), 0, "before everything: the first record");
    assert_eq!(at(boundary), 5, "the first record after the boundary");
    assert_eq!(
        at(now_ns() + 60_000_000_000),
        8,
        "after everything: the end"
    );

    let time =
        humantime::format_rfc3339_nanos(std::time::UNIX_EPOCH + Duration::from_nanos(boundary))
            .to_string();
    let consumed = runtime.block_on(common::strand(
        &cluster,
        &["consume", "s/t", "--from-time", &time],
        b"",
    ));
    assert_eq!(
        consumed.stdout, "5\tlate 0\n6\tlate 1\n7\tlate 2\n",
        "{}",
        consumed.stderr
    );
    let recent = runtime.block_on(common::strand(
        &cluster,
        &["consume", "s/t", "--from-time", "-1h"],
        b"",
    ));
    assert_eq!(recent.stdout.lines().count(), 8, "{}", recent.stderr);
    let bad = runtime.block_on(common::strand(
        &cluster,
        &["consume", "s/t", "--from-time", "yesterday"],
        b"",
    ));
    assert_eq!(
        bad.outcome,
        strand_client::cli::Outcome::Usage,
        "{}",
        bad.stderr
    );
}
