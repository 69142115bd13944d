//! The SDK against a scripted cluster on loopback (real TCP, real frames):
//! redirects, Busy, OutOfOrder resends, reconnects, timeouts, and that every
//! retry of a replicated request carries the same number. Each API call's
//! own behaviour (admin calls, consumers and cursors, the producer's
//! batching) is in `scripted_api.rs`.

mod support;

use std::time::Duration;

use strand_client::{Client, ClientConfig, ClientError, ProducerConfig};
use strand_wire::Operation;
use strand_wire::ResultCode;
use strand_wire::ops::ErrorBody;
use support::sdk::{connect, numbers, record, within};
use support::{Cluster, FaultAction, Seen};

#[tokio::test]
async fn produce_follows_a_redirect_to_the_primary_with_the_same_number() {
    within(async {
        let cluster = Cluster::start(3, 0).await;
        // Metadata says view 0 (node 1); node 2 is the primary.
        let groups = cluster.add_topic("shop", "orders", 1, &[1, 2, 3], 0, 2);
        let client = connect(&cluster, 1).await;
        let ack = client
            .produce("shop", "orders", 0, record("a"))
            .await
            .expect("produced");
        assert_eq!((ack.offset_base, ack.record_count), (0, 1));
        let seen = cluster.seen(Operation::Produce);
        assert_eq!(
            seen.iter().map(|seen| seen.node).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(numbers(&seen)[0], numbers(&seen)[1]);
        assert_eq!(numbers(&seen)[0].1, 1);
        assert_eq!(cluster.high_watermark(groups[0]), 1);
        // Routing learnt: the next produce goes straight to node 2.
        client
            .produce("shop", "orders", 0, record("b"))
            .await
            .expect("produced");
        let seen = cluster.seen(Operation::Produce);
        assert_eq!(seen[2].node, 2);
        assert_eq!(seen[2].request, 2);
    })
    .await;
}

#[tokio::test]
async fn busy_is_retried_with_the_same_request_number() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let groups = cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        cluster.add_fault(
            Operation::Produce,
            1,
            FaultAction::Reply(ErrorBody::Busy { retry_after_ms: 20 }),
        );
        let client = connect(&cluster, 1).await;
        client
            .produce("shop", "orders", 0, record("a"))
            .await
            .expect("produced");
        let seen = numbers(&cluster.seen(Operation::Produce));
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0], seen[1]);
        assert_eq!(cluster.high_watermark(groups[0]), 1);
    })
    .await;
}

#[tokio::test]
async fn unavailable_backs_off_and_retries_until_it_serves() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        for nth in 1..=3 {
            let unavailable =
                ErrorBody::message(ResultCode::Unavailable, "view change in progress");
            cluster.add_fault(Operation::Produce, nth, FaultAction::Reply(unavailable));
        }
        let client = connect(&cluster, 1).await;
        client
            .produce("shop", "orders", 0, record("a"))
            .await
            .expect("produced");
        let seen = numbers(&cluster.seen(Operation::Produce));
        assert_eq!(seen.len(), 4);
        assert!(seen.iter().all(|attempt| *attempt == seen[0]));
    })
    .await;
}

#[tokio::test]
async fn out_of_order_resends_pending_requests_in_order() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let groups = cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        // Request 1 is refused Busy; 2.. arrive before its retry and are
        // refused OutOfOrder by the client table.
        cluster.add_fault(
            Operation::Produce,
            1,
            FaultAction::Reply(ErrorBody::Busy { retry_after_ms: 30 }),
        );
        let client = connect(&cluster, 1).await;
        let config = ProducerConfig {
            batch_records_max: 1,
            linger_ms: 0,
            in_flight_max: 8,
            ..ProducerConfig::default()
        };
        let producer = client
            .producer("shop", "orders", config)
            .await
            .expect("producer");
        let mut deliveries = Vec::new();
        for index in 0..10 {
            deliveries.push(
                producer
                    .send(0, "key", format!("value {index}"))
                    .await
                    .expect("buffered"),
            );
        }
        let mut offsets = Vec::new();
        for delivery in deliveries {
            offsets.push(delivery.await.expect("delivered"));
        }
        assert_eq!(
            offsets,
            (0..10).collect::<Vec<u64>>(),
            "records land in send order"
        );
        let applied: Vec<u64> = cluster
            .applied()
            .iter()
            .map(|(_, _, request)| *request)
            .collect();
        assert_eq!(applied, (1..=10).collect::<Vec<u64>>());
        let seen = cluster.seen(Operation::Produce);
        assert!(
            seen.len() > 10,
            "some requests were refused and resent: {seen:?}"
        );
        assert_eq!(cluster.high_watermark(groups[0]), 10);
        producer.close().await.expect("closed");
    })
    .await;
}

#[tokio::test]
async fn reconnects_after_the_server_drops_the_connection() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let groups = cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        cluster.add_fault(Operation::Produce, 1, FaultAction::DropConnection);
        let client = connect(&cluster, 1).await;
        client
            .produce("shop", "orders", 0, record("a"))
            .await
            .expect("produced");
        let seen = cluster.seen(Operation::Produce);
        assert_eq!(seen.len(), 2);
        assert_ne!(seen[0].connection, seen[1].connection, "a new connection");
        assert_eq!(numbers(&seen)[0], numbers(&seen)[1]);
        assert_eq!(cluster.high_watermark(groups[0]), 1);
    })
    .await;
}

#[tokio::test]
async fn a_lost_reply_is_answered_from_the_client_table_not_applied_twice() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let groups = cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        cluster.add_fault(Operation::Produce, 1, FaultAction::ApplyThenDrop);
        let client = connect(&cluster, 1).await;
        let ack = client
            .produce("shop", "orders", 0, record("a"))
            .await
            .expect("produced");
        assert_eq!(ack.offset_base, 0);
        assert_eq!(cluster.high_watermark(groups[0]), 1, "applied once");
        let seen = numbers(&cluster.seen(Operation::Produce));
        assert_eq!(seen[0], seen[1]);
    })
    .await;
}

#[tokio::test]
async fn a_request_timeout_resends_with_the_same_number() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let groups = cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        cluster.add_fault(Operation::Produce, 1, FaultAction::Ignore);
        let client = connect(&cluster, 1).await;
        let started = tokio::time::Instant::now();
        client
            .produce("shop", "orders", 0, record("a"))
            .await
            .expect("produced");
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "waited for the attempt timeout"
        );
        let seen = cluster.seen(Operation::Produce);
        assert_eq!(seen.len(), 2);
        assert_eq!(numbers(&seen)[0], numbers(&seen)[1]);
        assert_ne!(
            seen[0].connection, seen[1].connection,
            "the silent connection was replaced"
        );
        assert_eq!(cluster.high_watermark(groups[0]), 1);
    })
    .await;
}

/// Waits until the cluster has seen a request of `operation`.
async fn wait_until_seen(cluster: &Cluster, operation: Operation) {
    while cluster.seen(operation).is_empty() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Produces `count` records to partition 1 of shop/orders, one every 20 ms
/// or so: a connection that keeps committing.
async fn keep_committing(client: &Client, count: usize) {
    for index in 0..count {
        client
            .produce("shop", "orders", 1, record(&format!("b{index}")))
            .await
            .expect("produced");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A request the node leaves unanswered while it keeps committing other
/// groups' requests on the same connection (a node hosting thousands of
/// groups reaches a quiet one's request late) is resent there, with the same
/// number: the connection stays, so nothing else on it goes twice.
#[tokio::test]
async fn a_request_unanswered_on_a_connection_that_commits_others_is_resent_there() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let groups = cluster.add_topic("shop", "orders", 2, &[1], 0, 1);
        cluster.add_fault(Operation::Produce, 1, FaultAction::Ignore);
        let client = connect(&cluster, 1).await;
        let quiet = tokio::spawn({
            let client = client.clone();
            async move { client.produce("shop", "orders", 0, record("a")).await }
        });
        wait_until_seen(&cluster, Operation::Produce).await;
        keep_committing(&client, 40).await;
        quiet.await.expect("joined").expect("produced");
        let seen = cluster.seen(Operation::Produce);
        let quiet_attempts: Vec<Seen> = seen
            .iter()
            .filter(|seen| seen.group == groups[0])
            .cloned()
            .collect();
        assert_eq!(quiet_attempts.len(), 2, "one resend: {quiet_attempts:?}");
        assert_eq!(numbers(&quiet_attempts)[0], numbers(&quiet_attempts)[1]);
        assert!(
            seen.iter()
                .all(|attempt| attempt.connection == seen[0].connection),
            "the connection that kept committing was replaced: {seen:?}"
        );
        assert_eq!(seen.len(), 42, "no other request went twice");
        assert_eq!(cluster.high_watermark(groups[0]), 1);
        assert_eq!(cluster.high_watermark(groups[1]), 40);
    })
    .await;
}

/// A fetch left unanswered while the node keeps committing produces on the
/// same connection is asked again there: the connection stays, with every
/// produce on it.
#[tokio::test]
async fn a_fetch_unanswered_on_a_connection_that_commits_others_is_asked_again_there() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let groups = cluster.add_topic("shop", "orders", 2, &[1], 0, 1);
        let client = connect(&cluster, 1).await;
        client
            .produce("shop", "orders", 0, record("a"))
            .await
            .expect("produced");
        cluster.add_fault(Operation::Fetch, 1, FaultAction::Ignore);
        let fetch = tokio::spawn({
            let client = client.clone();
            async move { client.fetch("shop", "orders", 0, 0, 1 << 20, 0).await }
        });
        wait_until_seen(&cluster, Operation::Fetch).await;
        keep_committing(&client, 40).await;
        let fetched = fetch.await.expect("joined").expect("fetched");
        assert_eq!(fetched.records.len(), 1);
        let fetches = cluster.seen(Operation::Fetch);
        assert_eq!(fetches.len(), 2, "asked once more: {fetches:?}");
        let produces = cluster.seen(Operation::Produce);
        assert!(
            fetches
                .iter()
                .chain(&produces)
                .all(|seen| seen.connection == produces[0].connection),
            "the connection that kept committing was replaced: {fetches:?}"
        );
        assert_eq!(produces.len(), 41, "no produce went twice");
        assert_eq!(cluster.high_watermark(groups[1]), 40);
    })
    .await;
}

#[tokio::test]
async fn eviction_after_commits_is_outcome_unknown_and_a_new_client_id_follows() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        cluster.add_fault(Operation::Produce, 2, FaultAction::EvictClients);
        let client = connect(&cluster, 1).await;
        client
            .produce("shop", "orders", 0, record("a"))
            .await
            .expect("produced");
        let error = client
            .produce("shop", "orders", 0, record("b"))
            .await
            .expect_err("evicted");
        assert!(error.is_outcome_unknown(), "{error}");
        client
            .produce("shop", "orders", 0, record("c"))
            .await
            .expect("produced");
        let seen = numbers(&cluster.seen(Operation::Produce));
        assert_eq!(seen[1].1, 2);
        assert_ne!(seen[2].0, seen[0].0, "a fresh client id");
        assert_eq!(seen[2].1, 1, "numbered from 1 again");
    })
    .await;
}

#[tokio::test]
async fn a_refused_batch_does_not_block_the_ones_behind_it() {
    within(async {
        let cluster = Cluster::start(1, 0).await;
        let groups = cluster.add_topic("shop", "orders", 1, &[1], 0, 1);
        let too_large = ErrorBody::TooLarge { size: 10, max: 5 };
        cluster.add_fault(Operation::Produce, 2, FaultAction::Reply(too_large));
        let client = connect(&cluster, 1).await;
        let config = ProducerConfig {
            batch_records_max: 1,
            linger_ms: 0,
            ..ProducerConfig::default()
        };
        let producer = client
            .producer("shop", "orders", config)
            .await
            .expect("producer");
        let mut deliveries = Vec::new();
        for index in 0..5 {
            deliveries.push(
                producer
                    .send(0, "key", format!("value {index}"))
                    .await
                    .expect("buffered"),
            );
        }
        let mut outcomes = Vec::new();
        for delivery in deliveries {
            outcomes.push(delivery.await);
        }
        assert_eq!(outcomes[1], Err(ClientError::TooLarge { size: 10, max: 5 }));
        let offsets: Vec<u64> = outcomes
            .iter()
            .filter_map(|outcome| outcome.clone().ok())
            .collect();
        assert_eq!(offsets, vec![0, 1, 2, 3], "the others land, in order");
        assert_eq!(cluster.high_watermark(groups[0]), 4);
    })
    .await;
}

#[tokio::test]
async fn connect_fails_with_a_typed_error_when_no_node_answers() {
    within(async {
        let cluster = Cluster::start(0, 1).await;
        let mut config = ClientConfig::new([cluster.address(1)]);
        config.request_timeout_ms = 100;
        config.deadline_ms = 300;
        let error = Client::connect(config).await.expect_err("nobody listens");
        assert!(matches!(error, ClientError::Connect { .. }), "{error}");
    })
    .await;
}

#[tokio::test]
async fn a_node_not_ready_to_answer_metadata_is_left_for_another() {
    within(async {
        let cluster = Cluster::start(2, 0).await;
        cluster.add_fault(
            Operation::Metadata,
            1,
            FaultAction::Reply(ErrorBody::message(
                ResultCode::NotReady,
                "node 1 is still loading its catalog",
            )),
        );
        let mut config = ClientConfig::new([cluster.address(1), cluster.address(2)]);
        config.cluster = support::CLUSTER;
        Client::connect(config).await.expect("node 2 answers");
        let asked: Vec<u32> = cluster
            .seen(Operation::Metadata)
            .iter()
            .map(|seen| seen.node)
            .collect();
        assert_eq!(
            asked[..2],
            [1, 2],
            "the loading node is not asked again first"
        );
    })
    .await;
}

#[tokio::test]
async fn a_silent_node_is_hedged_metadata_goes_to_the_next_node_too() {
    within(async {
        let cluster = Cluster::start(2, 0).await;
        cluster.add_fault(Operation::Metadata, 1, FaultAction::Ignore);
        // Without hedging, node 1's silence would use up the whole deadline:
        // one attempt may wait a minute, the call only ten seconds.
        let mut config = ClientConfig::new([cluster.address(1), cluster.address(2)]);
        config.cluster = support::CLUSTER;
        config.request_timeout_ms = 60_000;
        config.deadline_ms = 10_000;
        let client = Client::connect(config).await.expect("node 2 answers");
        // Node 1 stays silent: it is tried last, so the next question goes
        // straight to node 2.
        client.metadata().await.expect("metadata");
        let asked: Vec<u32> = cluster
            .seen(Operation::Metadata)
            .iter()
            .map(|seen| seen.node)
            .collect();
        assert_eq!(asked, [1, 2, 2]);
    })
    .await;
}
