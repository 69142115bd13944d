//! Quotas with real processes: an admin holds one user to a produce rate;
//! that user's produces are delayed to the rate (never refused), the node
//! counts it, and another user's produces go on beside it. The figures are
//! printed; the only bound checked is the one a slow machine cannot break:
//! the held user never gets more than its rate (plus the one second of
//! burst the bucket starts with).
//!
//! The bench figures in `bench/README.md` come from the same test at 10 MB/s
//! over 30 s, in release: `QUOTA_RATE_BYTES_PER_SEC=10000000
//! QUOTA_WINDOW_SECS=30 cargo test --release -p strand-server --test quotas
//! -- --nocapture`.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strand_client::{Client, ClientConfig, Credentials, NewRecord, TopicSpec};
use strand_wire::ops::Quota;

/// The held user's produce rate (`QUOTA_RATE_BYTES_PER_SEC`, default 1 MB/s).
fn rate_bytes_per_sec() -> u64 {
    std::env::var("QUOTA_RATE_BYTES_PER_SEC")
        .ok()
        .and_then(|rate| rate.parse().ok())
        .unwrap_or(1_000_000)
}

/// How long each user produces (`QUOTA_WINDOW_SECS`, default 5).
fn window() -> Duration {
    let secs = std::env::var("QUOTA_WINDOW_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .unwrap_or(5);
    Duration::from_secs(secs)
}

/// Bytes of each produced record's value.
const VALUE_BYTES: usize = 64 * 1024;

/// A client of the TLS cluster under `certs`, signed in as `user`.
async fn signed_in(nodes: &[common::Node], certs: &Path, user: &str, password: &str) -> Client {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut config = ClientConfig::new(common::bootstrap(nodes));
        config.tls = Some(strand_client::tls::ClientTls::new(certs.join("ca.pem")));
        config.credentials = Some(Credentials::password(user, password));
        match Client::connect(config).await {
            Ok(client) => return client,
            Err(error) => {
                assert!(Instant::now() < deadline, "{user} cannot connect: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Produces 64 KiB records to `s/t` for [`window`]; the bytes acknowledged.
async fn produce_for_the_window(client: Arc<Client>) -> u64 {
    let started = Instant::now();
    let mut bytes = 0;
    while started.elapsed() < window() {
        let record = NewRecord::new("k", vec![7u8; VALUE_BYTES]);
        client
            .produce("s", "t", 0, vec![record])
            .await
            .expect("a produce is delayed, never refused");
        bytes += VALUE_BYTES as u64;
    }
    bytes
}

#[test]
fn a_user_held_to_a_rate_is_delayed_to_it_and_another_user_goes_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (nodes, certs) = common::start_signed_in_cluster(dir.path(), "admin password");
    let runtime = common::runtime();
    let (slow, fast) = runtime.block_on(async {
        let admin = signed_in(&nodes, &certs, "admin", "admin password").await;
        admin.create_stream("s").await.expect("stream");
        let mut spec = TopicSpec::new("s", "t");
        spec.replica_count = 3;
        admin.create_topic(spec).await.expect("topic");
        let produce = strand_client::users::parse_permission("produce:s").expect("permission");
        for user in ["slow", "fast"] {
            admin
                .create_user(user, "a long password")
                .await
                .expect("user");
            admin
                .grant_permission(user, produce.clone())
                .await
                .expect("grant");
        }
        let quota = Quota {
            produce_bytes_per_sec: rate_bytes_per_sec(),
            ..Quota::default()
        };
        admin.set_quota("slow", quota).await.expect("set the quota");
        // Any node answers from its catalog: every node applies it soon.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let listed = admin.quotas().await.expect("list quotas");
            if listed.quotas == vec![("slow".to_owned(), quota)] {
                break;
            }
            assert!(Instant::now() < deadline, "listed: {listed:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let slow = signed_in(&nodes, &certs, "slow", "a long password").await;
        let fast = signed_in(&nodes, &certs, "fast", "a long password").await;
        (Arc::new(slow), Arc::new(fast))
    });
    let alone = runtime.block_on(produce_for_the_window(Arc::clone(&fast)));
    let (held, beside) = runtime.block_on(async {
        let held = tokio::spawn(produce_for_the_window(Arc::clone(&slow)));
        let beside = tokio::spawn(produce_for_the_window(Arc::clone(&fast)));
        (held.await.expect("slow"), beside.await.expect("fast"))
    });
    let per_sec = |bytes: u64| bytes as f64 / window().as_secs_f64() / 1e6;
    eprintln!(
        "held user: {:.2} MB/s (quota {:.2} MB/s); other user: {:.2} MB/s alone, {:.2} MB/s beside it",
        per_sec(held),
        rate_bytes_per_sec() as f64 / 1e6,
        per_sec(alone),
        per_sec(beside)
    );
    let allowed = rate_bytes_per_sec() * (window().as_secs() + 1) + VALUE_BYTES as u64;
    assert!(
        held <= allowed,
        "{held} bytes in the window, allowed {allowed}"
    );
    let throttled: f64 = nodes
        .iter()
        .map(|node| common::metric_sum(node, "quota_throttled_total"))
        .sum();
    assert!(throttled > 0.0, "the node counted the delays");
}
