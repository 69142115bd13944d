//! Deleting, altering and growing topics against the scripted cluster, and
//! what a deletion does to requests still pinned to the deleted groups: they
//! fail `Deleted` and are never sent to another group; later calls look
//! the topic up again.

mod support;

use std::time::Duration;

use strand_client::cli::{self, Outcome};
use strand_client::{
    Client, ClientConfig, ClientError, ConfirmPolicy, NewRecord, Producer, ProducerConfig,
    TopicChange, TopicSpec,
};
use strand_wire::Operation;
use support::Cluster;

/// Fails a test that hangs instead of hanging the suite.
const TEST_TIMEOUT: Duration = Duration::from_secs(20);

async fn connect(cluster: &Cluster) -> Client {
    let mut config = ClientConfig::new([cluster.address(1)]);
    config.cluster = support::CLUSTER;
    config.request_timeout_ms = 300;
    config.deadline_ms = 5_000;
    Client::connect(config).await.expect("connects")
}

async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("test finished in time")
}

fn record(value: &str) -> Vec<NewRecord> {
    vec![NewRecord::new("key", value.to_owned())]
}

/// The groups produce requests were sent to, in order, without repeats.
fn produced_to(cluster: &Cluster) -> Vec<u64> {
    let mut groups: Vec<u64> = Vec::new();
    for seen in cluster.seen(Operation::Produce) {
        if groups.last() != Some(&seen.group) {
            groups.push(seen.group);
        }
    }
    groups
}

/// A producer of shop/orders that sends each record as its own batch, at
/// once, with at most `in_flight_max` batches in flight.
async fn record_by_record_producer(client: &Client, in_flight_max: usize) -> Producer {
    let config = ProducerConfig {
        batch_records_max: 1,
        linger_ms: 0,
        in_flight_max,
        ..ProducerConfig::default()
    };
    client
        .producer("shop", "orders", config)
        .await
        .expect("producer")
}

#[tokio::test]
async fn a_producer_of_a_deleted_topic_fails_deleted_then_looks_the_topic_up_again() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let old = cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        let client = connect(&cluster).await;
        let in_flight_max = ProducerConfig::default().in_flight_max;
        let producer = record_by_record_producer(&client, in_flight_max).await;
        let sent = producer.send(0, "k", "before").await.expect("buffered");
        assert_eq!(sent.await, Ok(0));

        let deleted = client.delete_topic("shop", "orders").await;
        assert_eq!(deleted, Ok(old.clone()));

        // Still pinned to the deleted group: refused, and never re-routed.
        let pinned = producer.send(0, "k", "pinned").await.expect("buffered");
        assert!(
            matches!(pinned.await, Err(ClientError::Deleted { .. })),
            "the batch sent to the deleted group"
        );
        // The producer forgot the topic: the next batch looks it up.
        let gone = producer.send(0, "k", "gone").await.expect("buffered");
        assert!(matches!(gone.await, Err(ClientError::UnknownTopic { .. })));
        assert_eq!(produced_to(&cluster), old, "only the old group was asked");

        // Created again under the name: a new topic, with a new group.
        let new = client
            .create_topic(TopicSpec::new("shop", "orders"))
            .await
            .expect("created again");
        assert_ne!(new, old);
        let fresh = producer.send(0, "k", "fresh").await.expect("buffered");
        assert_eq!(fresh.await, Ok(0), "the new topic's first record");
        assert_eq!(cluster.high_watermark(new[0]), 1);
        assert_eq!(produced_to(&cluster), [old, new].concat());
        producer.close().await.expect("closed");
    })
    .await;
}

#[tokio::test]
async fn batches_waiting_behind_one_answered_deleted_are_never_sent() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let old = cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        let client = connect(&cluster).await;
        let producer = record_by_record_producer(&client, 1).await;
        client
            .delete_topic("shop", "orders")
            .await
            .expect("deleted");
        let mut deliveries = Vec::new();
        for value in ["x", "y", "z"] {
            deliveries.push(producer.send(0, "k", value).await.expect("buffered"));
        }
        let first = deliveries.remove(0).await;
        assert!(
            matches!(first, Err(ClientError::Deleted { .. })),
            "{first:?}"
        );
        // The others waited behind it: they fail Deleted (meant for the
        // deleted topic) or, if sealed after the answer, UnknownTopic.
        for delivery in deliveries {
            let outcome = delivery.await;
            assert!(
                matches!(
                    outcome,
                    Err(ClientError::Deleted { .. } | ClientError::UnknownTopic { .. })
                ),
                "{outcome:?}"
            );
        }
        assert_eq!(cluster.seen(Operation::Produce).len(), 1, "one batch sent");
        assert_eq!(produced_to(&cluster), old);
    })
    .await;
}

#[tokio::test]
async fn a_topic_deleted_by_another_client_fails_deleted_once_then_unknown() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let old = cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        let writer = connect(&cluster).await;
        let operator = connect(&cluster).await;
        writer
            .produce("shop", "orders", 0, record("a"))
            .await
            .expect("produced");
        operator
            .delete_topic("shop", "orders")
            .await
            .expect("deleted");
        // The writer's routing still names the old group: one Deleted...
        let pinned = writer.produce("shop", "orders", 0, record("b")).await;
        assert!(
            matches!(pinned, Err(ClientError::Deleted { .. })),
            "{pinned:?}"
        );
        // ...and then it knows the topic is gone.
        let next = writer.produce("shop", "orders", 0, record("c")).await;
        assert!(
            matches!(next, Err(ClientError::UnknownTopic { .. })),
            "{next:?}"
        );
        let fetched = writer.fetch("shop", "orders", 0, 0, 1024, 0).await;
        assert!(matches!(fetched, Err(ClientError::UnknownTopic { .. })));
        assert_eq!(produced_to(&cluster), old);
        assert_eq!(cluster.seen(Operation::Produce).len(), 2, "no retry");
    })
    .await;
}

#[tokio::test]
async fn deleting_a_stream_deletes_every_topic_in_it() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let orders = cluster.add_topic("shop", "orders", 2, &[1], 0, 1);
        let payments = cluster.add_topic("shop", "payments", 1, &[1], 0, 1);
        let kept = cluster.add_topic("audit", "log", 1, &[1], 0, 1);
        let client = connect(&cluster).await;
        let deleted = client.delete_stream("shop").await.expect("deleted");
        assert_eq!(deleted, [orders, payments].concat(), "ascending");
        let metadata = client.metadata().await.expect("metadata");
        assert_eq!(metadata.streams, ["audit"]);
        let groups: Vec<u64> = metadata
            .topics
            .iter()
            .flat_map(|info| info.partitions.iter().map(|partition| partition.group))
            .collect();
        assert_eq!(groups, kept);
        let again = client.delete_stream("shop").await;
        assert!(matches!(again, Err(ClientError::UnknownStream { .. })));
        let topic = client.delete_topic("audit", "nope").await;
        assert!(matches!(topic, Err(ClientError::UnknownTopic { .. })));
    })
    .await;
}

#[tokio::test]
async fn alter_sends_retention_once_and_confirm_per_partition_naming_the_refused() {
    within(async {
        let cluster = Cluster::start(3, 0).await;
        let groups = cluster.add_topic("shop", "orders", 3, &[1, 2, 3], 0, 1);
        let client = connect(&cluster).await;
        let nothing = client
            .alter_topic("shop", "orders", TopicChange::default())
            .await;
        assert!(matches!(nothing, Err(ClientError::InvalidArgument { .. })));
        assert!(cluster.seen(Operation::AlterTopic).is_empty());

        // Partition 1's reassignment has not started: it refuses another.
        let local = Some(ConfirmPolicy::LocalDurable);
        client
            .reassign_partition(groups[1].into(), &[1, 2, 3], local, false)
            .await
            .expect("reassigned");
        let change = TopicChange {
            retention_bytes: Some(1 << 20),
            retention_ms: None,
            confirm: Some(ConfirmPolicy::Count(2)),
        };
        let altered = client.alter_topic("shop", "orders", change.clone()).await;
        let Err(error) = altered else {
            panic!("partition 1 is refused");
        };
        let ClientError::PartitionsRefused { refused, .. } = &error else {
            panic!("partition 1 is refused: {error:?}");
        };
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].0, 1);
        assert!(matches!(refused[0].1, ClientError::Unavailable { .. }));
        let text = error.to_string();
        assert!(text.contains("partition 1 (unavailable"), "{text}");

        assert_eq!(cluster.retention("shop", "orders"), Some((1 << 20, 0)));
        assert_eq!(cluster.seen(Operation::AlterTopic).len(), 1);
        let confirms: Vec<ConfirmPolicy> =
            groups.iter().map(|group| cluster.confirm(*group)).collect();
        let two = ConfirmPolicy::Count(2);
        assert_eq!(confirms, [two, ConfirmPolicy::LocalDurable, two]);

        // Retention alone: one request, no reassignment.
        let reassignments = cluster.seen(Operation::ReassignPartition).len();
        let retention_only = TopicChange {
            retention_ms: Some(0),
            ..TopicChange::default()
        };
        client
            .alter_topic("shop", "orders", retention_only)
            .await
            .expect("altered");
        assert_eq!(cluster.retention("shop", "orders"), Some((1 << 20, 0)));
        assert_eq!(
            cluster.seen(Operation::ReassignPartition).len(),
            reassignments
        );
        let unknown = client.alter_topic("shop", "nope", change).await;
        assert!(matches!(unknown, Err(ClientError::UnknownTopic { .. })));
    })
    .await;
}

#[tokio::test]
async fn added_partitions_are_returned_and_later_calls_route_to_them() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        cluster.add_topic("shop", "orders", 2, &[1], 0, 1);
        let client = connect(&cluster).await;
        // The client caches the topic's two partitions.
        client
            .produce("shop", "orders", 1, record("a"))
            .await
            .expect("produced");
        let before = client.produce("shop", "orders", 3, record("b")).await;
        assert!(matches!(before, Err(ClientError::UnknownPartition { .. })));

        let added = client
            .add_partitions("shop", "orders", 4)
            .await
            .expect("added");
        assert_eq!(added.len(), 2);
        let ack = client
            .produce("shop", "orders", 3, record("c"))
            .await
            .expect("the new partition is routed");
        assert_eq!(ack.offset_base, 0);
        assert_eq!(cluster.high_watermark(added[1]), 1);

        let same = client.add_partitions("shop", "orders", 4).await;
        assert!(matches!(same, Err(ClientError::InvalidRequest { .. })));
        let seen = cluster.seen(Operation::AddPartitions).len();
        for count in [0, 1, 4097] {
            let refused = client.add_partitions("shop", "orders", count).await;
            assert!(
                matches!(refused, Err(ClientError::InvalidArgument { .. })),
                "{count}: {refused:?}"
            );
        }
        assert_eq!(cluster.seen(Operation::AddPartitions).len(), seen);
    })
    .await;
}

/// Runs `strand args...` against the scripted cluster.
async fn strand(cluster: &Cluster, args: &[&str]) -> (Outcome, String, String) {
    let address = cluster.address(1);
    let cluster_id = support::CLUSTER.to_string();
    let global = ["strand", "--cluster", &address, "--cluster-id", &cluster_id];
    let argv: Vec<&str> = global.iter().chain(args).copied().collect();
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let outcome = cli::run(argv, &b""[..], &mut stdout, &mut stderr).await;
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    (outcome, text(stdout), text(stderr))
}

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).expect("one JSON document")
}

#[tokio::test]
async fn the_cli_deletes_only_with_yes_and_names_what_goes() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let groups = cluster.add_topic("shop", "orders", 2, &[1], 0, 1);
        cluster.add_topic("shop", "payments", 1, &[1], 0, 1);
        let (outcome, stdout, stderr) = strand(&cluster, &["topic", "delete", "shop/orders"]).await;
        assert_eq!(outcome, Outcome::Usage);
        assert!(stdout.is_empty());
        let named = format!("its 2 partition(s) (groups {},{})", groups[0], groups[1]);
        assert!(stderr.contains(&named), "{stderr}");
        let (outcome, _, stderr) = strand(&cluster, &["stream", "delete", "shop"]).await;
        assert_eq!(outcome, Outcome::Usage);
        assert!(
            stderr.contains("its 2 topic(s) shop/orders (2 partition(s)), shop/payments"),
            "{stderr}"
        );
        assert!(cluster.seen(Operation::DeleteTopic).is_empty());
        assert!(cluster.seen(Operation::DeleteStream).is_empty());

        let delete = ["--json", "topic", "delete", "shop/orders", "--yes"];
        let (outcome, stdout, stderr) = strand(&cluster, &delete).await;
        assert_eq!(outcome, Outcome::Success, "{stderr}");
        assert_eq!(
            json(&stdout),
            serde_json::json!({ "stream": "shop", "topic": "orders", "deleted_groups": groups })
        );
        let (outcome, stdout, _) = strand(&cluster, &["stream", "delete", "shop", "--yes"]).await;
        assert_eq!(outcome, Outcome::Success);
        assert!(
            stdout.starts_with("deleted stream shop: 1 partition(s)"),
            "{stdout}"
        );
        let (outcome, _, stderr) = strand(&cluster, &["stream", "delete", "shop", "--yes"]).await;
        assert_eq!(outcome, Outcome::Failed);
        assert!(stderr.contains("unknown stream"), "{stderr}");
    })
    .await;
}

#[tokio::test]
async fn the_cli_alters_and_grows_a_topic() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        let alter = ["topic", "alter", "shop/orders", "--retention-bytes", "4096"];
        let (outcome, stdout, stderr) = strand(&cluster, &alter).await;
        assert_eq!(outcome, Outcome::Success, "{stderr}");
        assert_eq!(
            stdout,
            "altered topic shop/orders: retention bytes 4.0 KiB\n"
        );
        assert_eq!(cluster.retention("shop", "orders"), Some((4096, 0)));

        let grow = [
            "--json",
            "topic",
            "add-partitions",
            "shop/orders",
            "--count",
            "3",
        ];
        let (outcome, stdout, stderr) = strand(&cluster, &grow).await;
        assert_eq!(outcome, Outcome::Success, "{stderr}");
        let grown = json(&stdout);
        assert_eq!(grown["partition_count"], 3);
        assert_eq!(grown["added_groups"].as_array().map(Vec::len), Some(2));
        let (outcome, _, stderr) = strand(&cluster, &grow).await;
        assert_eq!(outcome, Outcome::Failed);
        assert!(stderr.contains("partitions are only added"), "{stderr}");
    })
    .await;
}
