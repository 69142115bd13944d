//! The Rust SDK against a real three-node cluster: create a topic, produce
//! through the batching producer to every partition, read every record back.

mod common;

use std::time::{Duration, Instant};

use strand_client::{Client, ClientConfig, ProducerConfig, TopicSpec};

const RECORDS: u64 = 3_000;
const PARTITIONS: u32 = 3;

#[test]
fn the_sdk_produces_and_reads_back_through_a_real_cluster() {
    let dir = tempfile::tempdir().expect("temp dir");
    let nodes = common::start_cluster(dir.path());
    let bootstrap: Vec<String> = nodes
        .iter()
        .map(|node| node.client_address.clone())
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = loop {
            match Client::connect(ClientConfig::new(bootstrap.clone())).await {
                Ok(client) => break client,
                Err(error) => {
                    assert!(Instant::now() < deadline, "cannot connect: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        client.create_stream("s").await.expect("create stream");
        let mut spec = TopicSpec::new("s", "t");
        spec.partition_count = PARTITIONS;
        spec.replica_count = 3;
        client.create_topic(spec).await.expect("create topic");
        // Backups apply the metadata commit a heartbeat later: the node the
        // client asks may not know the topic yet.
        let producer = loop {
            match client.producer("s", "t", ProducerConfig::default()).await {
                Ok(producer) => break producer,
                Err(error) => {
                    assert!(Instant::now() < deadline, "no producer: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        let mut deliveries = Vec::new();
        for index in 0..RECORDS {
            let partition = (index % u64::from(PARTITIONS)) as u32;
            let delivery = producer
                .send(partition, format!("k{index}"), format!("v{index}"))
                .await
                .expect("send");
            deliveries.push((partition, index, delivery));
        }
        producer.flush().await.expect("flush");
        let mut expected: Vec<Vec<(u64, String)>> = vec![Vec::new(); PARTITIONS as usize];
        for (partition, index, delivery) in deliveries {
            let offset = delivery.await.expect("acknowledged");
            expected[partition as usize].push((offset, format!("v{index}")));
        }
        for (partition, records) in expected.iter().enumerate() {
            // Offsets are contiguous from 0, in send order.
            let offsets: Vec<u64> = records.iter().map(|(offset, _)| *offset).collect();
            assert_eq!(offsets, (0..records.len() as u64).collect::<Vec<_>>());
            let mut read = Vec::new();
            let mut offset = 0;
            while read.len() < records.len() {
                let fetched = client
                    .fetch("s", "t", partition as u32, offset, 1024 * 1024, 1000)
                    .await
                    .expect("fetch");
                for record in fetched.records {
                    let value = String::from_utf8(record.value.to_vec()).expect("utf-8");
                    read.push((record.offset, value));
                }
                offset = fetched.next_offset;
            }
            assert_eq!(
                &read, records,
                "partition {partition} reads back what was acknowledged"
            );
        }
    });
    drop(nodes);
}
