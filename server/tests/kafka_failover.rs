//! Kafka producers through a failover, on real processes: the Java
//! producer (its defaults: idempotent, `acks=all`) and librdkafka's
//! idempotent producer (through confluent-kafka) write one record a
//! millisecond to a partition while its primary is SIGKILLed. Every
//! acknowledged record is read back exactly once, at the offset its
//! acknowledgement named; the longest pause between acknowledgements (the
//! write gap the client saw) is printed.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::kafka::{brokers, kcat, leader_of, library};
use strand_client::TopicSpec;

/// Records each client writes.
const RECORDS: usize = 3000;

/// The acknowledgements a client's log shows: (offset, value, ms), and
/// how many records it was told failed.
fn acknowledgements(log: &Path) -> (Vec<(u64, String, u64)>, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let failed = text
        .lines()
        .filter(|line| line.starts_with("failed "))
        .count();
    let acked = text
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.strip_prefix("acked ")?.split(' ').collect();
            Some((
                fields.get(1)?.parse().ok()?,
                (*fields.get(2)?).to_owned(),
                fields.get(3)?.parse().ok()?,
            ))
        })
        .collect();
    (acked, failed)
}

fn writes_through_a_primary_kill(name: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut nodes = common::start_cluster(dir.path());
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(240);
    let client = runtime.block_on(async {
        let client = common::connect(common::bootstrap(&nodes), deadline).await;
        client
            .create_stream("default")
            .await
            .expect("create stream");
        let mut spec = TopicSpec::new("default", "failover");
        spec.partition_count = 1;
        client.create_topic(spec).await.expect("create topic");
        client
    });
    for node in &nodes {
        common::wait_until("every node lists the topic", 60, || {
            kcat(&["-b", &node.kafka_address, "-L", "-t", "failover"], "").contains("leader ")
        });
    }
    let log = dir.path().join("acks.log");
    let errors = dir.path().join("client.err");
    let mut producer = library(
        name,
        &[
            "through",
            &brokers(&nodes),
            "failover",
            &RECORDS.to_string(),
        ],
    )
    .stdout(std::fs::File::create(&log).expect("log"))
    .stderr(std::fs::File::create(&errors).expect("stderr"))
    .spawn()
    .expect("the client runs");
    common::wait_until("the client writes", 60, || {
        acknowledgements(&log).0.len() >= 500
    });
    let leader = leader_of(&nodes, "failover");
    nodes[leader].kill();
    common::wait_until("the client is done", 180, || {
        producer.try_wait().ok().flatten().is_some()
    });
    let (acked, failed) = acknowledgements(&log);
    let stderr = std::fs::read_to_string(&errors).unwrap_or_default();
    assert_eq!((acked.len(), failed), (RECORDS, 0), "{name}: {stderr}");
    // Read back at the survivors: each record once, at its offset.
    let read = runtime.block_on(common::read_partition(
        &client, "default", "failover", 0, RECORDS, deadline,
    ));
    let stored: Vec<&[u8]> = read.iter().map(|(_, _, value)| value.as_slice()).collect();
    for (offset, value, _) in &acked {
        assert_eq!(
            stored.get(*offset as usize).copied(),
            Some(value.as_bytes()),
            "{name}: offset {offset}"
        );
    }
    let distinct: BTreeSet<&[u8]> = stored.iter().copied().collect();
    assert_eq!(distinct.len(), RECORDS, "{name}: a record stored twice");
    let after = runtime
        .block_on(client.fetch("default", "failover", 0, RECORDS as u64, 1 << 20, 0))
        .expect("fetch");
    assert!(
        after.records.is_empty(),
        "{name}: records past the acknowledged ones"
    );
    let mut times: Vec<u64> = acked.iter().map(|(_, _, ms)| *ms).collect();
    times.sort_unstable();
    let gap = times
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .max()
        .unwrap_or(0);
    eprintln!("{name}: {RECORDS} records through a primary kill; longest write gap {gap} ms");
}

#[test]
fn the_java_producer_writes_through_a_primary_kill() {
    writes_through_a_primary_kill("java");
}

#[test]
fn librdkafkas_idempotent_producer_writes_through_a_primary_kill() {
    writes_through_a_primary_kill("confluent-kafka");
}
