//! What the SDK's tests against the scripted cluster share: a connected
//! client, a record to produce, the numbers each attempt went out under,
//! and a bound on how long a test may run.

use std::time::Duration;

use strand_client::{Client, ClientConfig, NewRecord};

use super::{CLUSTER, Cluster, Seen};

/// Fails a test that hangs instead of hanging the suite.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(20);

/// A client of the scripted cluster that bootstraps from `bootstrap_node`,
/// with short attempt timeouts and deadlines so faults show quickly.
pub async fn connect(cluster: &Cluster, bootstrap_node: u32) -> Client {
    let mut config = ClientConfig::new([cluster.address(bootstrap_node)]);
    config.cluster = CLUSTER;
    config.request_timeout_ms = 300;
    config.deadline_ms = 5_000;
    Client::connect(config).await.expect("connects")
}

/// One keyed record with `value`: the batch most tests produce.
pub fn record(value: &str) -> Vec<NewRecord> {
    vec![NewRecord::new("key", value.to_owned())]
}

/// (client, request) of each attempt.
pub fn numbers(seen: &[Seen]) -> Vec<(u128, u64)> {
    seen.iter()
        .map(|seen| (seen.client, seen.request))
        .collect()
}

/// Runs `future` under [`TEST_TIMEOUT`].
pub async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("test finished in time")
}
