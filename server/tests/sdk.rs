//! The Rust SDK against a real three-node cluster: create a topic, produce
//! through the batching producer to every partition, read every record back
//! (a small run, and 100,000 records through pipelined batches).

mod common;

use std::time::{Duration, Instant};

use strand_client::{Client, ProducerConfig, TopicSpec};

const PARTITIONS: u32 = 3;

/// Creates stream `s` and topic `t` (3 partitions, 3 replicas).
async fn create_topic(client: &Client) {
    client.create_stream("s").await.expect("create stream");
    let mut spec = TopicSpec::new("s", "t");
    spec.partition_count = PARTITIONS;
    spec.replica_count = 3;
    client.create_topic(spec).await.expect("create topic");
}

/// Record `index`'s key and value: distinct, of varying length (0 to 95
/// filler bytes), with every byte value appearing.
fn record(index: u64) -> (Vec<u8>, Vec<u8>) {
    let key = format!("k{index}").into_bytes();
    let mut value = format!("v{index}:").into_bytes();
    let filler = (index.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize + (index % 32) as usize;
    value.extend((0..filler).map(|at| (index as usize + at * 31) as u8));
    (key, value)
}

/// Produces `records` records round-robin over the partitions through one
/// producer, checks the acknowledged offsets (contiguous from 0 per
/// partition, in send order) and reads every partition back: same keys, same
/// values, same offsets.
async fn produce_and_read_back(client: &Client, records: u64, config: ProducerConfig) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let producer = common::producer(client, "s", "t", config, deadline).await;
    let mut deliveries = Vec::with_capacity(records as usize);
    for index in 0..records {
        let partition = (index % u64::from(PARTITIONS)) as u32;
        let (key, value) = record(index);
        let delivery = producer.send(partition, key, value).await.expect("send");
        deliveries.push((partition, index, delivery));
    }
    producer.flush().await.expect("flush");
    let mut expected: Vec<common::Records> = vec![Vec::new(); PARTITIONS as usize];
    for (partition, index, delivery) in deliveries {
        let offset = delivery.await.expect("acknowledged");
        let (key, value) = record(index);
        expected[partition as usize].push((offset, key, value));
    }
    for (partition, records) in expected.iter().enumerate() {
        let offsets: Vec<u64> = records.iter().map(|(offset, _, _)| *offset).collect();
        assert!(
            offsets.iter().copied().eq(0..records.len() as u64),
            "partition {partition}: offsets are not contiguous from 0 in send order"
        );
        let read =
            common::read_partition(client, "s", "t", partition as u32, records.len(), deadline)
                .await;
        assert_eq!(
            read.len(),
            records.len(),
            "partition {partition}: record count"
        );
        for (got, want) in read.iter().zip(records) {
            assert_eq!(
                got, want,
                "partition {partition} reads back what was acknowledged"
            );
        }
    }
}

#[test]
fn the_sdk_produces_and_reads_back_through_a_real_cluster() {
    let dir = tempfile::tempdir().expect("temp dir");
    let nodes = common::start_cluster(dir.path());
    let bootstrap = common::bootstrap(&nodes);
    common::runtime().block_on(async move {
        let client = common::connect(bootstrap, Instant::now() + Duration::from_secs(60)).await;
        create_topic(&client).await;
        produce_and_read_back(&client, 3_000, ProducerConfig::default()).await;
    });
    drop(nodes);
}

#[test]
fn the_sdk_produces_and_reads_back_100_000_records_in_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let nodes = common::start_cluster(dir.path());
    let bootstrap = common::bootstrap(&nodes);
    let started = Instant::now();
    common::runtime().block_on(async move {
        let client = common::connect(bootstrap, Instant::now() + Duration::from_secs(60)).await;
        create_topic(&client).await;
        let config = ProducerConfig {
            batch_records_max: 2_000,
            batch_bytes_max: 1024 * 1024,
            ..ProducerConfig::default()
        };
        produce_and_read_back(&client, 100_000, config).await;
    });
    eprintln!(
        "100,000 records produced and read back in {:?}",
        started.elapsed()
    );
    drop(nodes);
}
