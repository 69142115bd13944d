//! The SDK's calls against a scripted cluster on loopback (real TCP, real
//! frames): admin calls at the metadata primary, consumers and their stored
//! cursors, fetch bounds, cluster status, reassignments, and the producer's
//! batching, lingering and buffer. Retries, redirects and request numbers are
//! in `scripted_server.rs`.

mod support;

use std::time::Duration;

use strand_client::{
    ClientError, ConsumerConfig, NewRecord, PartitionTarget, ProducerConfig, SEGMENT_BYTES_MAX,
    SEGMENT_BYTES_MIN, StartFrom, TopicSpec,
};
use strand_wire::Operation;
use strand_wire::ResultCode;
use strand_wire::ops::ErrorBody;
use support::sdk::{connect, numbers, record, within};
use support::{Cluster, FaultAction};

#[tokio::test]
async fn create_calls_follow_the_metadata_primary_and_report_already_exists() {
    within(async {
        let cluster = Cluster::start(3, 0).await;
        cluster.set_metadata_primary(3);
        let client = connect(&cluster, 1).await;
        client.create_stream("shop").await.expect("created");
        let groups = client
            .create_topic(TopicSpec::new("shop", "orders"))
            .await
            .expect("created");
        assert_eq!(groups.len(), 1);
        let again = client.create_topic(TopicSpec::new("shop", "orders")).await;
        assert!(
            matches!(again, Err(ClientError::AlreadyExists { .. })),
            "{again:?}"
        );
        let seen = cluster.seen(Operation::CreateStream);
        assert_eq!(
            seen.iter().map(|seen| seen.node).collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert_eq!(numbers(&seen)[0], numbers(&seen)[1]);
        let topics = cluster.seen(Operation::CreateTopic);
        assert!(
            topics.iter().all(|seen| seen.node == 3),
            "the redirect was remembered"
        );
        // The new topic is usable at once.
        client
            .produce("shop", "orders", 0, record("a"))
            .await
            .expect("produced");
        let missing = client.produce("shop", "orders", 5, record("a")).await;
        assert!(matches!(
            missing,
            Err(ClientError::UnknownPartition {
                partition_count: 1,
                ..
            })
        ));
    })
    .await;
}

#[tokio::test]
async fn consumer_starts_from_a_stored_cursor_polls_and_commits() {
    within(async {
        let cluster = Cluster::start(2, 0).await;
        cluster.add_topic("shop", "orders", 1, &[1, 2], 1, 2);
        let client = connect(&cluster, 1).await;
        for index in 0..5 {
            client
                .produce("shop", "orders", 0, record(&format!("value {index}")))
                .await
                .expect("produced");
        }
        client
            .store_cursor("shop", "orders", 0, "billing", 2)
            .await
            .expect("stored");
        let config = ConsumerConfig {
            name: Some("billing".into()),
            start_from: StartFrom::StoredCursor,
            wait_ms: 50,
            ..ConsumerConfig::default()
        };
        let mut consumer = client
            .consumer("shop", "orders", 0, config)
            .await
            .expect("consumer");
        assert_eq!(consumer.position(), 2);
        let records = consumer.poll().await.expect("polled");
        let offsets: Vec<u64> = records.iter().map(|record| record.offset).collect();
        assert_eq!(offsets, vec![2, 3, 4]);
        assert_eq!(&records[0].value[..], b"value 2");
        assert_eq!(consumer.lag(), Some(0));
        assert!(
            consumer
                .poll()
                .await
                .expect("long poll ends empty")
                .is_empty()
        );
        consumer.commit().await.expect("committed");
        let stored = client
            .get_cursor("shop", "orders", 0, "billing")
            .await
            .expect("read");
        assert_eq!(stored, Some(5));
        let latest = client
            .consumer(
                "shop",
                "orders",
                0,
                ConsumerConfig {
                    start_from: StartFrom::Latest,
                    ..ConsumerConfig::default()
                },
            )
            .await
            .expect("consumer");
        assert_eq!(latest.position(), 5);
    })
    .await;
}

/// After a failover the new primary commits its predecessor's last records
/// only once a backup acks its view: a cursor stored at their end meanwhile
/// is told to retry (`Unavailable`), and the SDK retries it until stored
/// rather than ending the consumer.
#[tokio::test]
async fn a_cursor_past_a_new_primarys_commit_is_retried_until_stored() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        for nth in 1..=2 {
            let catching_up = ErrorBody::message(
                ResultCode::Unavailable,
                "cursor 3 is past the high watermark 1 while the primary commits the records \
                 it holds up to 3: retry soon",
            );
            cluster.add_fault(Operation::StoreCursor, nth, FaultAction::Reply(catching_up));
        }
        let client = connect(&cluster, 1).await;
        client
            .store_cursor("shop", "orders", 0, "billing", 3)
            .await
            .expect("stored once the commit caught up");
        assert_eq!(cluster.seen(Operation::StoreCursor).len(), 3);
        let stored = client
            .get_cursor("shop", "orders", 0, "billing")
            .await
            .expect("read");
        assert_eq!(stored, Some(3));
    })
    .await;
}

/// A store past the partition's bound on consumer names is a typed error
/// the SDK does not retry; a delete frees the name.
#[tokio::test]
async fn a_store_past_the_bound_on_names_is_a_typed_error_and_a_delete_frees_a_name() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        let full = ErrorBody::message(
            ResultCode::LimitExceeded,
            "this partition keeps cursors for at most 10 distinct consumer names",
        );
        cluster.add_fault(Operation::StoreCursor, 2, FaultAction::Reply(full));
        let client = connect(&cluster, 1).await;
        client
            .store_cursor("shop", "orders", 0, "billing", 2)
            .await
            .expect("stored");
        let refused = client.store_cursor("shop", "orders", 0, "audit", 1).await;
        assert!(
            matches!(&refused, Err(ClientError::LimitExceeded { message }) if message.contains("at most 10")),
            "{refused:?}"
        );
        assert_eq!(cluster.seen(Operation::StoreCursor).len(), 2, "not retried");
        client
            .delete_cursor("shop", "orders", 0, "billing")
            .await
            .expect("deleted");
        let stored = client
            .get_cursor("shop", "orders", 0, "billing")
            .await
            .expect("read");
        assert_eq!(stored, None);
    })
    .await;
}

#[tokio::test]
async fn fetch_past_the_end_is_a_typed_error_with_the_bounds() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        let client = connect(&cluster, 1).await;
        let error = client
            .fetch("shop", "orders", 0, 9, 1024, 0)
            .await
            .expect_err("out of range");
        assert_eq!(
            error,
            ClientError::OffsetOutOfRange {
                requested: 9,
                log_start_offset: 0,
                high_watermark: 0
            }
        );
    })
    .await;
}

#[tokio::test]
async fn cluster_status_reports_every_node_and_the_unreachable_one() {
    within(async {
        let cluster = Cluster::start(2, 1).await;
        let client = connect(&cluster, 1).await;
        let status = client.cluster_status().await.expect("status");
        assert_eq!(status.nodes.len(), 3);
        assert!(status.nodes[0].result.is_ok());
        assert!(status.nodes[1].result.is_ok());
        assert!(
            matches!(status.nodes[2].result, Err(ClientError::Unreachable { .. })),
            "{:?}",
            status.nodes[2]
        );
        assert_eq!(status.failures().count(), 1);
        let attention = client.attention().await.expect("attention");
        assert_eq!(attention.entries().count(), 0);
        assert!(!attention.is_clear(), "a node did not answer");
    })
    .await;
}

#[tokio::test]
async fn accept_loss_asks_only_the_nodes_hosting_the_group() {
    within(async {
        let cluster = Cluster::start(3, 0).await;
        let groups = cluster.add_topic("shop", "orders", 1, &[1, 2], 0, 1);
        let client = connect(&cluster, 1).await;
        let answers = client.accept_loss(groups[0]).await.expect("asked");
        let nodes: Vec<u32> = answers.iter().map(|answer| answer.node).collect();
        assert_eq!(nodes, vec![1, 2]);
        assert!(answers.iter().all(|answer| answer.result.is_ok()));
        let unknown = client.accept_loss(999).await.expect("asked every node");
        assert_eq!(unknown.len(), 3);
        assert!(
            unknown
                .iter()
                .all(|answer| matches!(answer.result, Err(ClientError::UnknownGroup { .. })))
        );
    })
    .await;
}

#[tokio::test]
async fn reassign_and_drop_replica_go_to_the_metadata_primary() {
    within(async {
        let cluster = Cluster::start(4, 0).await;
        cluster.set_metadata_primary(2);
        let groups = cluster.add_topic("shop", "orders", 2, &[1, 2, 3], 0, 1);
        let client = connect(&cluster, 1).await;
        let target = PartitionTarget::Partition {
            stream: "shop".into(),
            topic: "orders".into(),
            partition: 1,
        };
        let reply = client
            .reassign_partition(target.clone(), &[1, 3, 4], None, false)
            .await
            .expect("reassigned");
        assert_eq!(reply.group, groups[1], "resolved through the metadata");
        assert_eq!(reply.members, [(0, 1), (2, 3), (3, 4)]);
        assert_eq!((reply.joining, reply.leaving), (vec![4], vec![2]));
        assert!(!reply.in_place);
        let seen = cluster.seen(Operation::ReassignPartition);
        assert!(seen.iter().all(|seen| seen.group == 0), "{seen:?}");
        assert_eq!(
            seen.iter().map(|seen| seen.node).collect::<Vec<_>>(),
            vec![1, 2],
            "redirected to the metadata primary"
        );
        assert_eq!(numbers(&seen)[0], numbers(&seen)[1]);
        let info = client.topic("shop", "orders").await.expect("topic");
        assert_eq!(info.partitions[1].replicas, [1, 3, 4]);
        assert_eq!(info.partitions[1].epoch, 2);
        let refused = client
            .drop_replica(PartitionTarget::Group(groups[1]), 2, false)
            .await;
        assert!(
            matches!(refused, Err(ClientError::InvalidRequest { .. })),
            "not retired until its epoch starts: {refused:?}"
        );
        cluster.start_epoch(groups[1]);
        client
            .drop_replica(groups[1].into(), 2, false)
            .await
            .expect("dropped");
    })
    .await;
}

#[tokio::test]
async fn a_reassignment_still_in_progress_is_refused_at_once_not_retried() {
    within(async {
        let cluster = Cluster::start(3, 0).await;
        let groups = cluster.add_topic("shop", "orders", 1, &[1, 2], 0, 1);
        let client = connect(&cluster, 1).await;
        client
            .reassign_partition(groups[0].into(), &[1, 2, 3], None, false)
            .await
            .expect("reassigned");
        let started = std::time::Instant::now();
        let second = client
            .reassign_partition(groups[0].into(), &[1, 3], None, false)
            .await;
        assert!(
            matches!(&second, Err(ClientError::Unavailable { message }) if message.contains("in progress")),
            "{second:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "a committed refusal is final: not retried until the deadline"
        );
        assert_eq!(cluster.seen(Operation::ReassignPartition).len(), 2);
        cluster.start_epoch(groups[0]);
        let third = client
            .reassign_partition(groups[0].into(), &[1, 3], None, false)
            .await
            .expect("the first has started");
        assert_eq!(third.leaving, [2]);
    })
    .await;
}

#[tokio::test]
async fn a_topics_segment_size_is_sent_and_checked_before_the_network() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let client = connect(&cluster, 1).await;
        client.create_stream("shop").await.expect("created");
        for bad in [0, SEGMENT_BYTES_MIN - 1, SEGMENT_BYTES_MAX + 1] {
            let spec = TopicSpec {
                replica_count: 1,
                segment_bytes: Some(bad),
                ..TopicSpec::new("shop", "orders")
            };
            let refused = client.create_topic(spec).await;
            assert!(
                matches!(refused, Err(ClientError::InvalidArgument { .. })),
                "{bad}: {refused:?}"
            );
        }
        assert!(cluster.seen(Operation::CreateTopic).is_empty());
        let spec = TopicSpec {
            replica_count: 1,
            retention_bytes: 1 << 20,
            segment_bytes: Some(128 * 1024),
            ..TopicSpec::new("shop", "orders")
        };
        client.create_topic(spec).await.expect("created");
        let info = client.topic("shop", "orders").await.expect("described");
        assert_eq!(
            (info.retention_bytes, info.segment_bytes),
            (1 << 20, 128 * 1024)
        );
        let spec = TopicSpec {
            replica_count: 1,
            ..TopicSpec::new("shop", "default")
        };
        client.create_topic(spec).await.expect("created");
        let info = client.topic("shop", "default").await.expect("described");
        assert_eq!(info.segment_bytes, 0, "the node's default");
    })
    .await;
}

#[tokio::test]
async fn reassignments_that_cannot_be_sent_fail_before_the_network() {
    within(async {
        let cluster = Cluster::start(2, 0).await;
        let groups = cluster.add_topic("shop", "orders", 1, &[1, 2], 0, 1);
        let client = connect(&cluster, 1).await;
        let missing = PartitionTarget::Partition {
            stream: "shop".into(),
            topic: "orders".into(),
            partition: 7,
        };
        let cases = [
            client.reassign_partition(missing, &[1], None, false).await,
            client.reassign_partition(0.into(), &[1], None, false).await,
            client
                .reassign_partition(groups[0].into(), &[], None, false)
                .await,
        ];
        assert!(
            matches!(cases[0], Err(ClientError::UnknownPartition { .. })),
            "{cases:?}"
        );
        assert!(
            cases[1..]
                .iter()
                .all(|case| matches!(case, Err(ClientError::InvalidArgument { .. }))),
            "{cases:?}"
        );
        assert!(cluster.seen(Operation::ReassignPartition).is_empty());
        let unknown = client.drop_replica(999.into(), 1, false).await;
        assert!(
            matches!(unknown, Err(ClientError::UnknownGroup { .. })),
            "committed as unknown: final, {unknown:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn producer_batches_by_count_and_linger_per_partition() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let groups = cluster.add_topic("shop", "orders", 2, &[1], 0, 1);
        let client = connect(&cluster, 1).await;
        let config = ProducerConfig {
            batch_records_max: 4,
            linger_ms: 50,
            ..ProducerConfig::default()
        };
        let producer = client
            .producer("shop", "orders", config)
            .await
            .expect("producer");
        let mut deliveries = Vec::new();
        for index in 0..10u32 {
            let partition = index % 2;
            let delivery = producer
                .send(partition, "key", format!("value {index}"))
                .await;
            deliveries.push((partition, delivery.expect("buffered")));
        }
        producer.flush().await.expect("flushed");
        let mut offsets = [Vec::new(), Vec::new()];
        for (partition, delivery) in deliveries {
            offsets[partition as usize].push(delivery.await.expect("delivered"));
        }
        assert_eq!(offsets[0], vec![0, 1, 2, 3, 4]);
        assert_eq!(offsets[1], vec![0, 1, 2, 3, 4]);
        // Five records per partition in batches of at most four: two each.
        let produces = cluster.seen(Operation::Produce);
        for group in &groups {
            let batches = produces.iter().filter(|seen| seen.group == *group).count();
            assert_eq!(batches, 2, "partition group {group}");
            assert_eq!(cluster.high_watermark(*group), 5);
        }
        let rejected = producer.send(2, "key", "value").await;
        assert!(matches!(
            rejected,
            Err(ClientError::UnknownPartition {
                partition_count: 2,
                ..
            })
        ));
        producer.close().await.expect("closed");
    })
    .await;
}

#[tokio::test]
async fn partial_batches_of_many_partitions_each_go_at_their_own_linger_without_a_flush() {
    within(async {
        const PARTITIONS: u32 = 40;
        let cluster = Cluster::start(1, 0).await;
        let groups = cluster.add_topic("shop", "orders", PARTITIONS, &[1], 0, 1);
        let client = connect(&cluster, 1).await;
        let config = ProducerConfig {
            batch_records_max: 100,
            linger_ms: 5,
            ..ProducerConfig::default()
        };
        let producer = client
            .producer("shop", "orders", config)
            .await
            .expect("producer");
        let mut deliveries = Vec::new();
        for round in 0..3u32 {
            for partition in 0..PARTITIONS {
                let value = format!("value {round}");
                deliveries.push(
                    producer
                        .send(partition, "key", value)
                        .await
                        .expect("buffered"),
                );
            }
            // No flush: each partition's partial batch lingers out by itself.
            for delivery in deliveries.drain(..) {
                assert_eq!(delivery.await.expect("delivered"), u64::from(round));
            }
        }
        let produces = cluster.seen(Operation::Produce);
        for group in &groups {
            let batches = produces.iter().filter(|seen| seen.group == *group).count();
            assert_eq!(batches, 3, "one lingered batch per round, group {group}");
        }
        producer.close().await.expect("closed");
    })
    .await;
}

#[tokio::test]
async fn send_waits_while_the_buffer_holds_its_bytes_and_a_record_larger_than_it_goes_alone() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let groups = cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        // The first batch is never answered: the client times it out and
        // sends it again, so its records hold their room until then.
        cluster.add_fault(Operation::Produce, 1, FaultAction::Ignore);
        let client = connect(&cluster, 1).await;
        let record_bytes = NewRecord::new("key", "value 0").encoded_size();
        let config = ProducerConfig {
            batch_records_max: 1,
            linger_ms: 0,
            in_flight_max: 1,
            buffer_bytes_max: 3 * record_bytes,
            ..ProducerConfig::default()
        };
        let producer = client
            .producer("shop", "orders", config)
            .await
            .expect("producer");
        let mut deliveries = Vec::new();
        for index in 0..3 {
            let sent = producer.send(0, "key", format!("value {index}"));
            deliveries.push(sent.await.expect("room for three records"));
        }
        // The buffer holds three records' bytes: a fourth finds no room
        // on its first poll.
        {
            let fourth = producer.send(0, "key", "value 3");
            tokio::pin!(fourth);
            assert!(
                poll_once(&mut fourth).await.is_none(),
                "the fourth record waits for room"
            );
            // Once the first batch is answered (after its resend), it goes.
            deliveries.push(fourth.await.expect("room after the first answer"));
        }
        let larger = "x".repeat(4 * record_bytes);
        deliveries.push(producer.send(0, "key", larger).await.expect("goes alone"));
        let mut offsets = Vec::new();
        for delivery in deliveries {
            offsets.push(delivery.await.expect("delivered"));
        }
        assert_eq!(offsets, (0..5).collect::<Vec<u64>>());
        assert_eq!(cluster.high_watermark(groups[0]), 5);
        producer.close().await.expect("closed");
    })
    .await;
}

/// Polls `future` once: its output if it is ready at once.
async fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> Option<F::Output> {
    std::future::poll_fn(|context| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut *future).poll(context) {
            std::task::Poll::Ready(output) => Some(output),
            std::task::Poll::Pending => None,
        })
    })
    .await
}
