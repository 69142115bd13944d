//! The Kafka clients the real-process Kafka tests drive: kcat, and the
//! client libraries `scripts/kafka-clients.sh` installs under
//! `target/kafka-clients/` (the Java client, kafka-python,
//! confluent-kafka, kafkajs, franz-go), each run unchanged; and the topic
//! they share.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use strand_client::{Client, ProducerConfig, TopicSpec};

/// Runs `kcat` with `args` (at most a minute), `stdin` as its input; its
/// stdout, or a panic with its stderr when it fails.
pub fn kcat(args: &[&str], stdin: &str) -> String {
    let mut child = Command::new("timeout")
        .arg("60")
        .arg("kcat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is installed (scripts/test.sh installs it)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write kcat's input");
    let output = child.wait_with_output().expect("kcat runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "kcat {args:?} failed: {stderr}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The Kafka bootstrap list of a cluster.
pub fn brokers(nodes: &[super::Node]) -> String {
    let addresses: Vec<&str> = nodes
        .iter()
        .map(|node| node.kafka_address.as_str())
        .collect();
    addresses.join(",")
}

/// Creates `default/orders` with 3 partitions and waits until a Kafka
/// client sees every partition with a leader.
pub fn orders_topic(nodes: &[super::Node], runtime: &tokio::runtime::Runtime) -> Client {
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = runtime.block_on(async {
        let client = super::connect(super::bootstrap(nodes), deadline).await;
        client
            .create_stream("default")
            .await
            .expect("create stream");
        let mut spec = TopicSpec::new("default", "orders");
        spec.partition_count = 3;
        spec.replica_count = 3;
        client.create_topic(spec).await.expect("create topic");
        // Every partition takes a produce before Kafka clients try.
        let producer = super::producer(
            &client,
            "default",
            "orders",
            ProducerConfig::default(),
            deadline,
        )
        .await;
        drop(producer);
        client
    });
    super::wait_until("Kafka metadata shows the topic", 60, || {
        let listing = kcat(&["-b", &brokers(nodes), "-L", "-t", "orders"], "");
        listing.matches("leader ").count() == 3 && !listing.contains("leader -1")
    });
    client
}

/// The Java Kafka client (`KafkaClient.java`, on the class path
/// `scripts/kafka-clients.sh` resolved) with `args`.
pub fn java(args: &[&str]) -> Command {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let classpath_file = root.join("target/kafka-clients/java.classpath");
    let classpath = std::fs::read_to_string(&classpath_file).expect(
        "the Java client's class path: run scripts/kafka-clients.sh (scripts/test.sh does)",
    );
    let source = root.join("server/tests/kafka_clients/java/KafkaClient.java");
    let mut command = Command::new("java");
    command
        .arg("-cp")
        .arg(classpath.trim())
        .arg(source)
        .args(args);
    command.stdin(Stdio::null());
    command
}

/// A Kafka client library's command (`produce` or `consume`, then their
/// arguments), as `scripts/kafka-clients.sh` installed it.
pub fn library(name: &str, args: &[&str]) -> Command {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let installed = root.join("target/kafka-clients");
    let mut command = match name {
        "java" => return java(args),
        "kafka-python" | "confluent-kafka" => {
            let mut command = Command::new(installed.join("python/bin/python"));
            command
                .arg(root.join("server/tests/kafka_clients/python/client.py"))
                .arg(name);
            command
        }
        "kafkajs" => {
            let mut command = Command::new("node");
            command.arg(installed.join("node/client.js"));
            command
        }
        "franz-go" => Command::new(installed.join("franz")),
        other => panic!("no client library {other}"),
    };
    command.args(args).stdin(Stdio::null());
    command
}

/// Runs a client library's command to its end (at most two minutes); its
/// stdout.
pub fn library_output(name: &str, args: &[&str]) -> String {
    let mut command = library(name, args);
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| {
            panic!("{name} runs (scripts/kafka-clients.sh installs it): {error}")
        });
    let output = child.wait_with_output().expect("the client ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{name} {args:?} failed: {stderr}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The running node that leads partition 0 of `topic` now, as Kafka
/// metadata says.
pub fn leader_of(nodes: &[super::Node], topic: &str) -> usize {
    let mut found = None;
    super::wait_until("a leader for the partition", 60, || {
        let listing = kcat(&["-b", &brokers(nodes), "-L", "-t", topic], "");
        found = listing
            .split("partition 0, leader ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .and_then(|id| id.trim().parse::<u32>().ok())
            .and_then(|id| {
                nodes
                    .iter()
                    .position(|node| node.node == id && node.child.is_some())
            });
        found.is_some()
    });
    found.expect("found")
}
