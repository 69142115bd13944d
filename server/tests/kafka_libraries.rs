//! Kafka client libraries against real nodes, each unchanged and with
//! its defaults (bootstrap servers aside), as `scripts/kafka-clients.sh`
//! installs them: the Java client, kafka-python, confluent-kafka, kafkajs
//! and franz-go produce and consume; a consumer group of kcat members and
//! one of Java members rebalance through joins, a leave and a SIGKILL.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::kafka::{brokers, java, kcat, library_output, orders_topic};
use strand_client::{NewRecord, TopicSpec};

/// A kcat member of consumer group `group` on `topic`, printing
/// `partition offset value` lines to `log` as it consumes (from the
/// earliest offset where the group has none).
fn group_member(brokers: &str, group: &str, topic: &str, log: &Path) -> std::process::Child {
    let out = std::fs::File::create(log).expect("member log");
    Command::new("kcat")
        .args(["-b", brokers, "-G", group, "-u", "-f", "%p %o %s\\n"])
        .args([
            "-X",
            "auto.offset.reset=earliest",
            "-X",
            "session.timeout.ms=6000",
        ])
        .args([
            "-X",
            "heartbeat.interval.ms=500",
            "-X",
            "auto.commit.interval.ms=200",
        ])
        .arg(topic)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(std::fs::File::create(log.with_extension("err")).expect("member stderr"))
        .spawn()
        .expect("kcat is installed (scripts/test.sh installs it)")
}

/// Every `(partition, offset)` a member's log shows, in its order.
fn consumed(log: &Path) -> Vec<(u32, u64)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
        })
        .collect()
}

/// Three members of one group, made by `member(brokers, log)`, join one
/// after another, one leaves cleanly (SIGTERM) and one is SIGKILLed while
/// records are produced: every acknowledged record is consumed, and each
/// member reads each partition in order.
fn group_rebalances(member: impl Fn(&str, &Path) -> std::process::Child) {
    const PARTITIONS: u32 = 6;
    let dir = tempfile::tempdir().expect("tempdir");
    let nodes = common::start_cluster(dir.path());
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(120);
    let client = runtime.block_on(async {
        let client = common::connect(common::bootstrap(&nodes), deadline).await;
        client
            .create_stream("default")
            .await
            .expect("create stream");
        let mut spec = TopicSpec::new("default", "events");
        spec.partition_count = PARTITIONS;
        client.create_topic(spec).await.expect("create topic");
        client
    });
    let brokers = brokers(&nodes);
    // Every node knows the topic before the members subscribe (a Kafka
    // client told "unknown topic" right after its creation, as a Kafka
    // broker may tell it too, is kcat's end).
    for node in &nodes {
        common::wait_until("every node lists the topic with its leaders", 60, || {
            let listing = kcat(&["-b", &node.kafka_address, "-L", "-t", "events"], "");
            listing.matches("leader ").count() == PARTITIONS as usize
                && !listing.contains("leader -1")
        });
    }
    let mut acknowledged = 0u64;
    // `count` records, round robin over the partitions, each acknowledged.
    let mut produce = |count: u64| {
        for _ in 0..count {
            let partition = (acknowledged % u64::from(PARTITIONS)) as u32;
            let value = Bytes::from(format!("r{acknowledged}"));
            runtime.block_on(async {
                loop {
                    let record = NewRecord::new(Bytes::new(), value.clone());
                    match client
                        .produce("default", "events", partition, vec![record])
                        .await
                    {
                        Ok(_) => break,
                        Err(error) => {
                            assert!(Instant::now() < deadline, "produce: {error}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
            });
            acknowledged += 1;
        }
    };
    let logs: Vec<_> = (0..3)
        .map(|index| dir.path().join(format!("member-{index}.log")))
        .collect();
    let mut members = vec![member(&brokers, &logs[0])];
    produce(60);
    members.push(member(&brokers, &logs[1]));
    std::thread::sleep(Duration::from_secs(3));
    produce(60);
    members.push(member(&brokers, &logs[2]));
    std::thread::sleep(Duration::from_secs(3));
    produce(60);
    // One leaves cleanly (SIGTERM: kcat closes its consumer), one dies.
    let sent = Command::new("kill")
        .args(["-TERM", &members[1].id().to_string()])
        .status();
    assert!(sent.expect("kill").success());
    let _ = members[1].wait();
    produce(60);
    members[2].kill().expect("SIGKILL");
    let _ = members[2].wait();
    produce(60);
    // The survivor ends up with every partition: every acknowledged record
    // is consumed at least once, and each member read each partition in order.
    let waited = Instant::now();
    loop {
        let seen: std::collections::BTreeSet<(u32, u64)> =
            logs.iter().flat_map(|log| consumed(log)).collect();
        if seen.len() as u64 >= acknowledged {
            break;
        }
        if waited.elapsed() > Duration::from_secs(90) {
            let per_partition = acknowledged / u64::from(PARTITIONS);
            let missing: Vec<(u32, u64)> = (0..PARTITIONS)
                .flat_map(|partition| (0..per_partition).map(move |offset| (partition, offset)))
                .filter(|key| !seen.contains(key))
                .collect();
            for log in &logs {
                let lines = consumed(log);
                eprintln!(
                    "{}: {} lines, last {:?}",
                    log.display(),
                    lines.len(),
                    lines.last()
                );
                let errors = std::fs::read_to_string(log.with_extension("err")).unwrap_or_default();
                eprintln!("{errors}");
            }
            panic!(
                "{} of {acknowledged} consumed; missing {missing:?}",
                seen.len()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    members[0].kill().expect("stop");
    let _ = members[0].wait();
    let mut seen = std::collections::BTreeSet::new();
    for log in &logs {
        // A member reads each partition in order: one offset after the
        // other, starting over only where a rebalance handed it the
        // partition (again) at the group's committed offset.
        let mut last: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
        let mut restarts = 0;
        for (partition, offset) in consumed(log) {
            if let Some(previous) = last.insert(partition, offset)
                && offset != previous + 1
            {
                restarts += 1;
            }
            seen.insert((partition, offset));
        }
        assert!(
            restarts <= 4 * PARTITIONS,
            "{restarts} restarts in {}",
            log.display()
        );
    }
    let per_partition = acknowledged / u64::from(PARTITIONS);
    for partition in 0..PARTITIONS {
        for offset in 0..per_partition {
            assert!(
                seen.contains(&(partition, offset)),
                "partition {partition} offset {offset} consumed"
            );
        }
    }
}

#[test]
fn a_kcat_consumer_group_rebalances_through_joins_a_leave_and_a_kill() {
    group_rebalances(|brokers, log| group_member(brokers, "workers", "events", log));
}

#[test]
fn a_java_consumer_group_rebalances_through_joins_a_leave_and_a_kill() {
    group_rebalances(|brokers, log| {
        let out = std::fs::File::create(log).expect("member log");
        let errors = std::fs::File::create(log.with_extension("err")).expect("member stderr");
        java(&["member", brokers, "events", "workers"])
            .env("KAFKA_SESSION_TIMEOUT_MS", "6000")
            .stdout(out)
            .stderr(errors)
            .spawn()
            .expect("java runs")
    });
}

/// Client library `name`, with its defaults, produces 100 records to a
/// 3-partition topic and consumes them in a group: every acknowledged
/// record is read back once at its offset, consumed in order per
/// partition, and the group's offsets are the partitions' cursors.
fn produces_and_consumes_with_its_defaults(name: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let nodes = common::start_cluster(dir.path());
    let runtime = common::runtime();
    let client = orders_topic(&nodes, &runtime);
    let brokers = brokers(&nodes);
    let produced = library_output(name, &["produce", &brokers, "orders", "100"]);
    let acked: Vec<(u32, u64, String)> = produced
        .lines()
        .filter_map(|line| {
            let mut fields = line.strip_prefix("acked ")?.split(' ');
            Some((
                fields.next()?.parse().ok()?,
                fields.next()?.parse().ok()?,
                fields.next()?.to_owned(),
            ))
        })
        .collect();
    assert_eq!(acked.len(), 100, "{produced}");
    let deadline = Instant::now() + Duration::from_secs(60);
    for partition in 0..3 {
        let expected: Vec<&(u32, u64, String)> =
            acked.iter().filter(|(p, _, _)| *p == partition).collect();
        let read = runtime.block_on(common::read_partition(
            &client,
            "default",
            "orders",
            partition,
            expected.len(),
            deadline,
        ));
        for ((_, offset, value), (read_offset, _, read_value)) in expected.iter().zip(&read) {
            assert_eq!(
                (offset, value.as_bytes()),
                (read_offset, read_value.as_slice())
            );
        }
        let after = runtime
            .block_on(client.fetch(
                "default",
                "orders",
                partition,
                expected.len() as u64,
                1 << 20,
                0,
            ))
            .expect("fetch");
        assert!(
            after.records.is_empty(),
            "partition {partition}: nothing written twice"
        );
    }
    let group = format!("{name}-readers");
    let consumed = library_output(name, &["consume", &brokers, "orders", &group, "100"]);
    let mut last: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    let mut values = std::collections::BTreeSet::new();
    for line in consumed.lines().filter(|line| !line.is_empty()) {
        let fields: Vec<&str> = line.split(' ').collect();
        let (partition, offset): (u32, u64) = (
            fields[0].parse().expect("partition"),
            fields[1].parse().expect("offset"),
        );
        if let Some(previous) = last.insert(partition, offset) {
            assert_eq!(
                offset,
                previous + 1,
                "{name}: partition {partition} in order"
            );
        }
        values.insert(fields[2].to_owned());
    }
    assert_eq!(values.len(), 100, "{name}: {consumed}");
    for partition in 0..3 {
        let end = acked.iter().filter(|(p, _, _)| *p == partition).count() as u64;
        common::wait_until("the group's offsets are stored", 30, || {
            let cursor =
                runtime.block_on(client.get_cursor("default", "orders", partition, &group));
            matches!(cursor, Ok(Some(offset)) if offset == end)
        });
    }
}

#[test]
fn the_java_client_produces_and_consumes_with_its_defaults() {
    produces_and_consumes_with_its_defaults("java");
}

#[test]
fn kafka_python_produces_and_consumes_with_its_defaults() {
    produces_and_consumes_with_its_defaults("kafka-python");
}

#[test]
fn confluent_kafka_produces_and_consumes_with_its_defaults() {
    produces_and_consumes_with_its_defaults("confluent-kafka");
}

#[test]
fn kafkajs_produces_and_consumes_with_its_defaults() {
    produces_and_consumes_with_its_defaults("kafkajs");
}

#[test]
fn franz_go_produces_and_consumes_with_its_defaults() {
    produces_and_consumes_with_its_defaults("franz-go");
}

#[test]
fn the_java_admin_client_creates_describes_alters_grows_and_deletes_a_topic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nodes = common::start_cluster(dir.path());
    let runtime = common::runtime();
    runtime.block_on(common::connect(
        common::bootstrap(&nodes),
        Instant::now() + Duration::from_secs(60),
    ));
    // `payments.audit` is stream `payments`, topic `audit`: the stream is
    // created with it.
    let output = library_output("java", &["admin", &brokers(&nodes), "payments.audit"]);
    let expected = [
        "created payments.audit",
        "partitions 4",
        "retention.ms 3600000",
        "min.insync.replicas 2",
        "altered retention.ms 7200000",
        "grown partitions 6",
        "nodes 3",
        "again TopicExistsException",
        "deleted true",
    ];
    assert_eq!(output.lines().collect::<Vec<_>>(), expected, "{output}");
}

#[test]
fn the_java_admin_client_lists_describes_and_deletes_a_consumer_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nodes = common::start_cluster(dir.path());
    let runtime = common::runtime();
    let _client = orders_topic(&nodes, &runtime);
    let output = library_output("java", &["groups", &brokers(&nodes), "orders", "watched"]);
    let expected = [
        "listed true",
        "state Stable",
        "members 1",
        "assigned 3",
        "deleted true",
    ];
    assert_eq!(output.lines().collect::<Vec<_>>(), expected, "{output}");
}
