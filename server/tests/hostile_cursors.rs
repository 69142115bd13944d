//! A hostile or careless client hurts no one else, for cursors, with real
//! processes: a user with only `consume` rights floods a partition with
//! distinct 252-byte consumer names. The partition keeps cursors for at
//! most the nodes' `cursor_consumers_per_partition_max` names (small here,
//! so the test is quick): past it the user gets the typed `LimitExceeded`
//! error and the refusals are counted; a store for a name it has still
//! passes; deleting a cursor frees a slot. Stores of the names it has fold
//! the cursor log into its snapshot. A well-behaved producer and consumer
//! on another topic keeps working throughout; every node restarts cleanly
//! afterwards, the cursors read back, and no node's log holds a panic.
//! Idle cursors expire after the nodes' `cursor_retention_ms`, freeing
//! their names; cursors stored since stay.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::Node;
use strand_client::tls::ClientTls;
use strand_client::{Client, ClientError, NewRecord, TopicSpec};

/// The bound the nodes are configured with.
const CONSUMERS_MAX: usize = 150;
/// Distinct names the flood tries (past the bound).
const FLOOD_NAMES: usize = CONSUMERS_MAX + 60;
/// Stores of names the partition has: past the host's compaction threshold
/// (4,096 events), so the cursor log is folded into a snapshot.
const RESTORES: usize = 4_400;
/// Concurrent tasks storing.
const TASKS: usize = 8;

/// A consumer name of 252 bytes, as in the flood that took a cluster down.
fn long_name(index: usize) -> String {
    format!("hostile-{index:0>244}")
}

/// A client of the cluster signing in as `user`.
async fn signed_in(
    nodes: &[Node],
    certs: &Path,
    user: &str,
    password: &str,
) -> Result<Client, ClientError> {
    let mut config = strand_client::ClientConfig::new(common::bootstrap(nodes));
    config.tls = Some(ClientTls::new(certs.join("ca.pem")));
    config.credentials = Some(strand_client::Credentials::password(user, password));
    config.deadline_ms = 10_000;
    Client::connect(config).await
}

/// `user`'s client, once the cluster answers it.
async fn patient_client(
    nodes: &[Node],
    certs: &Path,
    user: &str,
    password: &str,
    deadline: Instant,
) -> Client {
    loop {
        match signed_in(nodes, certs, user, password).await {
            Ok(client) => return client,
            Err(error) => {
                assert!(Instant::now() < deadline, "{user} cannot connect: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Three TLS nodes requiring sign-in (admin password `admin password`),
/// with a small bound on consumer names and a quick storage check.
fn start_cluster(dir: &Path) -> (Vec<Node>, PathBuf) {
    let mut nodes = common::configure_cluster(dir, 3);
    let certs = common::enable_tls(dir, &nodes);
    let admin_hash = strand_client::users::hash_password("admin password").expect("hash");
    for node in &nodes {
        let config = std::fs::read_to_string(&node.config).expect("config");
        let config = format!(
            "cursor_consumers_per_partition_max = {CONSUMERS_MAX}\nretention_check_ms = 300\n\
             {config}\n[auth]\nrequired = true\nadmin_password_hash = {admin_hash:?}\n"
        );
        std::fs::write(&node.config, config).expect("write config");
    }
    for node in &mut nodes {
        node.start();
    }
    (nodes, certs)
}

/// Creates `s/t` (the flooded topic) and `s/good`, and the users `mallory`
/// (consume on `s/t` only) and `good` (produce and consume on `s/good`).
async fn set_up(admin: &Client, deadline: Instant) {
    admin.create_stream("s").await.expect("stream");
    for topic in ["t", "good"] {
        let mut spec = TopicSpec::new("s", topic);
        spec.partition_count = 1;
        spec.replica_count = 3;
        admin.create_topic(spec).await.expect("topic");
    }
    let grants = [
        ("mallory", "consume:s/t"),
        ("good", "produce:s/good"),
        ("good", "consume:s/good"),
    ];
    for user in ["mallory", "good"] {
        admin
            .create_user(user, &format!("{user} password"))
            .await
            .expect("user");
    }
    for (user, permission) in grants {
        let permission = strand_client::users::parse_permission(permission).expect("permission");
        admin
            .grant_permission(user, permission)
            .await
            .expect("grant");
    }
    // Both partitions take requests before the flood starts.
    common::produce_batch(admin, 0, deadline).await;
    loop {
        let record = vec![NewRecord::new("warm", "up")];
        match admin.produce("s", "good", 0, record).await {
            Ok(_) => break,
            Err(error) => {
                assert!(Instant::now() < deadline, "s/good: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The well-behaved user: produces to `s/good`, reads it back and stores
/// its cursor, until `stop`; counts rounds and errors.
async fn behave(client: Client, stop: Arc<AtomicBool>, rounds: Arc<AtomicU64>) -> Vec<String> {
    let mut errors = Vec::new();
    let mut next = 0;
    while !stop.load(Ordering::Relaxed) {
        let record = vec![NewRecord::new(format!("k{next}"), format!("v{next}"))];
        let round = async {
            client.produce("s", "good", 0, record).await?;
            let fetched = client.fetch("s", "good", 0, next, 1 << 20, 0).await?;
            let end = fetched.high_watermark;
            client
                .store_cursor("s", "good", 0, "good-reader", end)
                .await?;
            Ok::<u64, ClientError>(end)
        };
        match round.await {
            Ok(end) => {
                next = end;
                rounds.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => errors.push(error.to_string()),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    errors
}

/// Stores `names` (by index) with `TASKS` tasks at once; returns the
/// names refused `LimitExceeded`. Any other error fails the test.
async fn store_all(client: &Client, names: Vec<usize>, offset: u64) -> Vec<usize> {
    let mut tasks = Vec::new();
    for share in 0..TASKS {
        let client = client.clone();
        let mine: Vec<usize> = names.iter().copied().skip(share).step_by(TASKS).collect();
        tasks.push(tokio::spawn(async move {
            let mut refused = Vec::new();
            for index in mine {
                match client
                    .store_cursor("s", "t", 0, &long_name(index), offset)
                    .await
                {
                    Ok(()) => {}
                    Err(ClientError::LimitExceeded { message }) => {
                        assert!(
                            message.contains(&CONSUMERS_MAX.to_string())
                                && message.contains("delete"),
                            "the message names the bound and the way out: {message}"
                        );
                        refused.push(index);
                    }
                    Err(error) => panic!("store {index}: {error}"),
                }
            }
            refused
        }));
    }
    let mut refused = Vec::new();
    for task in tasks {
        refused.extend(task.await.expect("store task"));
    }
    refused.sort_unstable();
    refused
}

fn assert_no_panics(nodes: &[Node]) {
    for node in nodes {
        let log = std::fs::read_to_string(&node.log).unwrap_or_default();
        assert!(
            !log.contains("panicked"),
            "node {} panicked; its log is {}",
            node.node,
            node.log.display()
        );
    }
}

/// The flood, then stores of the names kept (enough to fold the cursor
/// log into a snapshot); returns the names refused, ascending.
async fn flood(mallory: &Client) -> Vec<usize> {
    // The first CONSUMERS_MAX names are kept, the rest refused.
    let refused = store_all(mallory, (0..FLOOD_NAMES).collect(), 1).await;
    assert_eq!(refused.len(), FLOOD_NAMES - CONSUMERS_MAX, "{refused:?}");
    let kept: Vec<usize> = (0..FLOOD_NAMES)
        .filter(|index| refused.binary_search(index).is_err())
        .collect();
    // Names it has always store; enough of them to fold the log into a
    // snapshot (the step that panicked every node before).
    let restores = kept.iter().copied().cycle().take(RESTORES).collect();
    assert!(store_all(mallory, restores, 5).await.is_empty());
    // A delete frees one slot: one new name fits, the next does not.
    let deleted = long_name(kept[0]);
    mallory
        .delete_cursor("s", "t", 0, &deleted)
        .await
        .expect("delete a cursor");
    let gone = mallory.get_cursor("s", "t", 0, &deleted).await;
    assert_eq!(gone.expect("get"), None);
    mallory
        .store_cursor("s", "t", 0, &long_name(refused[0]), 3)
        .await
        .expect("the freed slot takes a new name");
    assert_full(mallory, refused[1]).await;
    refused
}

/// A store of a new name (by index) is refused `LimitExceeded`.
async fn assert_full(mallory: &Client, new: usize) {
    let past = mallory.store_cursor("s", "t", 0, &long_name(new), 3).await;
    assert!(
        matches!(past, Err(ClientError::LimitExceeded { .. })),
        "{past:?}"
    );
}

/// What the nodes counted and logged: every refusal, a compaction, the
/// delete in the audit log.
fn assert_observed(dir: &Path, nodes: &[Node], refusals: usize) {
    let counted: f64 = nodes
        .iter()
        .map(|node| common::metric_sum(node, "cursor_stores_refused_limit_total"))
        .sum();
    assert!(counted >= refusals as f64, "refusals counted: {counted}");
    let compacted = nodes.iter().any(|node| {
        let log = std::fs::read_to_string(&node.log).unwrap_or_default();
        log.contains("cursor log compacted")
    });
    assert!(compacted, "the cursor log was folded into a snapshot");
    let deletes: Vec<serde_json::Value> = common::audit_entries(dir, nodes)
        .into_iter()
        .filter(|entry| entry["action"] == "DeleteCursor")
        .collect();
    assert!(
        deletes
            .iter()
            .any(|entry| entry["identity"] == "user mallory" && entry["outcome"] == "Ok"),
        "the delete is audited: {deletes:?}"
    );
}

/// Every node stops cleanly and starts again; the cursor stored in the
/// freed slot reads back and the bound still holds.
fn restart_and_check(nodes: &mut [Node], certs: &Path, refused: &[usize]) {
    for node in nodes.iter_mut() {
        node.terminate();
    }
    for node in nodes.iter_mut() {
        node.start();
    }
    common::runtime().block_on(async {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mallory = patient_client(nodes, certs, "mallory", "mallory password", deadline).await;
        loop {
            let read = mallory
                .get_cursor("s", "t", 0, &long_name(refused[0]))
                .await;
            match read {
                Ok(offset) => {
                    assert_eq!(offset, Some(3), "the cursor stored in the freed slot");
                    break;
                }
                Err(error) => {
                    assert!(Instant::now() < deadline, "after restart: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        assert_full(&mallory, refused[1]).await;
    });
    for node in nodes.iter_mut() {
        node.assert_alive();
    }
}

#[test]
fn a_flood_of_consumer_names_is_bounded_and_hurts_no_one_else() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut nodes, certs) = start_cluster(dir.path());
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(240);
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let (errors, refused) = runtime.block_on(async {
        let admin = patient_client(&nodes, &certs, "admin", "admin password", deadline).await;
        set_up(&admin, deadline).await;
        let good = patient_client(&nodes, &certs, "good", "good password", deadline).await;
        let behaving = tokio::spawn(behave(good, Arc::clone(&stop), Arc::clone(&rounds)));
        let mallory = patient_client(&nodes, &certs, "mallory", "mallory password", deadline).await;
        let refused = flood(&mallory).await;
        // Let a compaction run; the good user still progresses after it all.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = rounds.load(Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            rounds.load(Ordering::Relaxed) > before,
            "the good user progresses"
        );
        stop.store(true, Ordering::Relaxed);
        (behaving.await.expect("good user"), refused)
    });
    assert!(errors.is_empty(), "the good user saw errors: {errors:?}");
    assert_observed(dir.path(), &nodes, refused.len());
    restart_and_check(&mut nodes, &certs, &refused);
    assert_no_panics(&nodes);
}

/// Three plaintext nodes with `settings` at the top of each configuration.
fn start_plain_cluster(dir: &Path, settings: &str) -> Vec<Node> {
    let mut nodes = common::configure_cluster(dir, 3);
    for node in &mut nodes {
        let config = std::fs::read_to_string(&node.config).expect("config");
        std::fs::write(&node.config, format!("{settings}{config}")).expect("write config");
        node.start();
    }
    nodes
}

#[test]
fn idle_cursors_expire_and_free_their_names() {
    let dir = tempfile::tempdir().expect("temp dir");
    let nodes = start_plain_cluster(
        dir.path(),
        "cursor_consumers_per_partition_max = 2\ncursor_retention_ms = 3000\n\
         retention_check_ms = 200\n",
    );
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(120);
    runtime.block_on(async {
        let client = common::connect(common::bootstrap(&nodes), deadline).await;
        client.create_stream("s").await.expect("stream");
        let mut spec = TopicSpec::new("s", "t");
        spec.partition_count = 1;
        spec.replica_count = 3;
        client.create_topic(spec).await.expect("topic");
        common::produce_batch(&client, 0, deadline).await;
        client
            .store_cursor("s", "t", 0, "idle", 1)
            .await
            .expect("store");
        client
            .store_cursor("s", "t", 0, "busy", 2)
            .await
            .expect("store");
        let full = client.store_cursor("s", "t", 0, "third", 3).await;
        assert!(
            matches!(full, Err(ClientError::LimitExceeded { .. })),
            "{full:?}"
        );
        // "busy" keeps storing; "idle" does not.
        let started = Instant::now();
        while client
            .get_cursor("s", "t", 0, "idle")
            .await
            .expect("get")
            .is_some()
        {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "idle never expired"
            );
            client
                .store_cursor("s", "t", 0, "busy", 3)
                .await
                .expect("store");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(
            started.elapsed() >= Duration::from_millis(2_500),
            "not before its retention"
        );
        assert_eq!(
            client.get_cursor("s", "t", 0, "busy").await.expect("get"),
            Some(3)
        );
        client
            .store_cursor("s", "t", 0, "third", 3)
            .await
            .expect("the expired name's slot is free");
    });
    let expired: f64 = nodes
        .iter()
        .map(|node| common::metric_sum(node, "cursors_expired_total"))
        .sum();
    assert!(expired >= 1.0, "expiries counted: {expired}");
    assert_no_panics(&nodes);
}
