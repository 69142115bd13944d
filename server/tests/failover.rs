//! Failures of whole nodes, with real processes: SIGKILL of a partition's
//! primary under load (one view change, nothing lost or doubled, the node
//! rejoins as a backup); `replicated` replicas that restart untrusted and wait
//! for a view (the `partitions_untrusted_log` gauge, and `untrusted_log` in
//! the span of the lines logged during the view change), and a clean restart
//! that comes back trusted; a partition stuck after a full-cluster crash that
//! `attention` names and `accept-loss` unsticks.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use strand_bench::scrape::http_get;
use strand_client::{AttentionReason, Client, Durability, GroupStatus, TopicSpec};

use common::BATCH;

/// Creates stream `s`, topic `t` with one partition on 3 replicas; returns
/// its group id.
async fn create_topic(client: &Client, durability: Durability) -> u64 {
    client.create_stream("s").await.expect("create stream");
    let mut spec = TopicSpec::new("s", "t");
    spec.partition_count = 1;
    spec.replica_count = 3;
    spec.durability = Some(durability);
    let groups = client.create_topic(spec).await.expect("create topic");
    groups[0]
}

/// A running 3-node cluster with a one-partition topic `s`/`t`: what every
/// test here starts from.
struct Cluster {
    nodes: Vec<common::Node>,
    runtime: tokio::runtime::Runtime,
    /// When the test gives up on any wait.
    deadline: Instant,
    client: Client,
    /// The topic's partition's group.
    group: u64,
}

impl Cluster {
    fn start(dir: &std::path::Path, durability: Durability) -> Cluster {
        let nodes = common::start_cluster(dir);
        let runtime = common::runtime();
        let deadline = Instant::now() + Duration::from_secs(240);
        let (client, group) = runtime.block_on(async {
            let client = common::connect_patient(&nodes, deadline).await;
            let group = create_topic(&client, durability).await;
            (client, group)
        });
        Cluster {
            nodes,
            runtime,
            deadline,
            client,
            group,
        }
    }
}

/// `partitions_untrusted_log` on `node`, or `None` while it does not answer.
fn untrusted_gauge(node: &common::Node) -> Option<f64> {
    let (status, body) = http_get(&node.metrics_address, "/metrics").ok()?;
    (status == 200).then_some(())?;
    body.lines()
        .filter_map(|line| line.strip_prefix("partitions_untrusted_log "))
        .filter_map(|value| value.trim().parse::<f64>().ok())
        .next()
}

#[test]
fn killing_the_primary_under_load_fails_over_once_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Cluster {
        mut nodes,
        runtime,
        deadline,
        client,
        group,
    } = Cluster::start(dir.path(), Durability::Persisted);
    let mut acked = BTreeMap::new();
    let mut next_batch = 0;
    runtime.block_on(async {
        while next_batch < 100 {
            acked.insert(
                next_batch,
                common::produce_batch(&client, next_batch, deadline).await,
            );
            next_batch += 1;
        }
    });
    let before = runtime
        .block_on(common::group_status(&client, 1, group))
        .expect("node 1 reports the group");
    assert_eq!(before.status, "normal");
    let primary_node = before.replicas[usize::from(before.primary)].node;
    let primary = usize::try_from(primary_node - 1).expect("node ids from 1");
    let survivors: Vec<usize> = (0..3).filter(|index| *index != primary).collect();
    let changes_before: Vec<f64> = survivors
        .iter()
        .map(|index| common::view_changes(&nodes[*index], group))
        .collect();

    // Keep producing while the primary dies: batches in flight at the kill
    // are retried by the SDK with their request numbers. The kill comes once
    // a few of them were acknowledged (a fixed pause raced a fast producer:
    // all 300 were in before it ended, and nothing was in flight).
    let acked_during = Arc::new(AtomicUsize::new(0));
    let producing = {
        let client = client.clone();
        let first = next_batch;
        let acked_during = Arc::clone(&acked_during);
        runtime.spawn(async move {
            let mut acked = BTreeMap::new();
            for batch in first..first + 300 {
                acked.insert(batch, common::produce_batch(&client, batch, deadline).await);
                acked_during.fetch_add(1, Ordering::Relaxed);
            }
            acked
        })
    };
    while acked_during.load(Ordering::Relaxed) < 10 {
        assert!(Instant::now() < deadline, "producing did not start");
        std::thread::sleep(Duration::from_millis(1));
    }
    nodes[primary].kill();
    let during = runtime.block_on(producing).expect("the producer task");
    assert_eq!(during.len(), 300, "producing went on without an operator");
    acked.extend(during);

    // The survivors moved to the next view without it; then the killed node
    // restarts and rejoins as a backup.
    wait_for_status(
        &runtime,
        &client,
        survivors[0] as u32 + 1,
        group,
        |status| status.status == "normal" && status.view == before.view + 1,
    );
    nodes[primary].start();
    let rejoined = wait_for_status(&runtime, &client, primary_node, group, |status| {
        status.status == "normal" && status.view == before.view + 1
    });
    assert_ne!(
        rejoined.replicas[usize::from(rejoined.primary)].node,
        primary_node,
        "it rejoins as a backup"
    );
    // It catches up: its commit reaches what the new primary had committed
    // when it came back (repair relays the old view's prepares verbatim).
    let new_primary = rejoined.replicas[usize::from(rejoined.primary)].node;
    let target = runtime
        .block_on(common::group_status(&client, new_primary, group))
        .expect("the new primary reports the group")
        .commit_op;
    wait_for_status(&runtime, &client, primary_node, group, |status| {
        status.commit_op >= target
    });
    runtime.block_on(async {
        for batch in 400..420 {
            acked.insert(batch, common::produce_batch(&client, batch, deadline).await);
        }
        common::check_acknowledged(&client, &acked, acked.len() * BATCH as usize).await;
    });
    let after = runtime
        .block_on(common::group_status(
            &client,
            survivors[0] as u32 + 1,
            group,
        ))
        .expect("a survivor reports the group");
    assert_eq!(after.view, before.view + 1, "exactly one view change");
    for (index, before) in survivors.iter().zip(changes_before) {
        let after = common::view_changes(&nodes[*index], group);
        assert_eq!(
            after,
            before + 1.0,
            "node {} started one view change",
            index + 1
        );
    }
    assert_eq!(
        common::view_changes(&nodes[primary], group),
        0.0,
        "the restarted node joined without a view change"
    );
}

/// Polls the group's status on `node` until `done` holds (60 s at most).
fn wait_for_status(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    node: u32,
    group: u64,
    done: impl Fn(&GroupStatus) -> bool,
) -> GroupStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = runtime.block_on(common::group_status(client, node, group));
        if let Some(status) = status.filter(|status| done(status)) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "node {node}, group {group}: status not reached"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The length of `node`'s log so far.
fn log_len(node: &common::Node) -> usize {
    std::fs::read_to_string(&node.log).map_or(0, |log| log.len())
}

/// The lines `node` logged for `group` since byte `from` of its log: each
/// runs in the group's span, which names the replica, its view and whether
/// its log is trusted (`docs/reference-points.md`, point 3).
fn assert_view_change_lines_carry_trust(node: &common::Node, from: usize, group: u64) {
    let log = std::fs::read_to_string(&node.log).expect("the node's log");
    let span = format!("group{{group={group} replica=");
    let lines: Vec<&str> = log[from..]
        .lines()
        .filter(|line| line.contains(&span))
        .collect();
    let nested = format!("group{{group={group}}}:group{{");
    assert!(
        lines.iter().all(|line| !line.contains(&nested)),
        "one group span per line: {lines:#?}"
    );
    let untrusted_view_change = lines
        .iter()
        .any(|line| line.contains("untrusted_log=true") && line.contains("group: view change"));
    assert!(
        untrusted_view_change,
        "a view-change line under untrusted_log=true: {lines:#?}"
    );
    let trusted_after = lines
        .iter()
        .skip_while(|line| !line.contains("untrusted_log=true"))
        .any(|line| line.contains("untrusted_log=false") && line.contains("view="));
    assert!(
        trusted_after,
        "a line under untrusted_log=false once it adopted a view: {lines:#?}"
    );
}

#[test]
fn replicated_replicas_restart_untrusted_until_they_adopt_a_view() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Cluster {
        mut nodes,
        runtime,
        deadline,
        client,
        group,
    } = Cluster::start(dir.path(), Durability::Replicated);
    let mut acked = BTreeMap::new();
    runtime.block_on(async {
        for batch in 0..50 {
            acked.insert(batch, common::produce_batch(&client, batch, deadline).await);
        }
    });
    // The primary and a backup die in quick succession; the backup comes
    // back first and must wait, untrusted (its log may miss what it acked),
    // until the old primary reports too: one trusted log is below R = 2.
    let status = runtime
        .block_on(common::group_status(&client, 1, group))
        .expect("node 1 reports the group");
    let primary = (status.replicas[usize::from(status.primary)].node - 1) as usize;
    let backup = (primary + 1) % 3;
    // The backup must hold every write (acked, perhaps not synced) before it
    // dies: a node that started late may not have joined the group while the
    // other two committed all of it, and would come back with a fresh log.
    let head = runtime
        .block_on(common::group_status(&client, primary as u32 + 1, group))
        .expect("the primary reports the group")
        .op;
    common::wait_until("the backup holding every write", 30, || {
        runtime
            .block_on(common::group_status(&client, backup as u32 + 1, group))
            .is_some_and(|status| status.op >= head)
    });
    nodes[primary].kill();
    nodes[backup].kill();
    let log_before_restart = log_len(&nodes[backup]);
    nodes[backup].start();
    common::wait_until(
        "the restarted backup reporting its untrusted log",
        30,
        || untrusted_gauge(&nodes[backup]) == Some(1.0),
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        untrusted_gauge(&nodes[backup]),
        Some(1.0),
        "it stays untrusted while the view waits"
    );
    let waiting = runtime
        .block_on(common::group_status(&client, backup as u32 + 1, group))
        .expect("the restarted backup reports the group");
    assert!(
        waiting.untrusted_log && waiting.status != "normal",
        "{waiting:?}"
    );
    nodes[primary].start();
    common::wait_until("both restarted replicas adopting a view", 30, || {
        untrusted_gauge(&nodes[primary]) == Some(0.0)
            && untrusted_gauge(&nodes[backup]) == Some(0.0)
    });
    assert_view_change_lines_carry_trust(&nodes[backup], log_before_restart, group);
    runtime.block_on(async {
        for batch in 50..60 {
            acked.insert(batch, common::produce_batch(&client, batch, deadline).await);
        }
        common::check_acknowledged(&client, &acked, acked.len() * BATCH as usize).await;
    });

    // A clean restart (SIGTERM) comes back trusted: never untrusted.
    nodes[2].terminate();
    nodes[2].start();
    let mut reports = 0;
    common::wait_until("node 3 back in the view", 30, || {
        let Some(status) = runtime.block_on(common::group_status(&client, 3, group)) else {
            return false;
        };
        assert!(!status.untrusted_log, "a clean restart is trusted");
        reports += 1;
        status.status == "normal"
    });
    assert!(reports > 0);
    assert_eq!(untrusted_gauge(&nodes[2]), Some(0.0));
}

#[test]
fn attention_names_a_stuck_partition_and_accept_loss_unsticks_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Cluster {
        mut nodes,
        runtime,
        deadline,
        client,
        group,
    } = Cluster::start(dir.path(), Durability::Replicated);
    runtime.block_on(async {
        for batch in 0..20 {
            common::produce_batch(&client, batch, deadline).await;
        }
    });
    let status = runtime
        .block_on(common::group_status(&client, 1, group))
        .expect("node 1 reports the group");
    let lost_index = status
        .replicas
        .iter()
        .position(|replica| replica.node == 3)
        .expect("node 3 hosts a replica") as u8;

    // The whole cluster crashes; node 3 never comes back. The two others
    // restart untrusted and cannot know whether node 3 held acknowledged ops.
    for node in &mut nodes {
        node.kill();
    }
    nodes[0].start();
    nodes[1].start();
    let mut stuck = Vec::new();
    common::wait_until("attention naming the partition on both nodes", 60, || {
        let Ok(report) = runtime.block_on(client.attention()) else {
            return false;
        };
        stuck = report
            .entries()
            .filter(|(_, entry)| entry.group == group)
            .map(|(node, entry)| (node, entry.clone()))
            .collect();
        stuck.len() == 2
    });
    for (node, entry) in &stuck {
        assert!(*node == 1 || *node == 2);
        assert_eq!((entry.stream.as_str(), entry.topic.as_str()), ("s", "t"));
        assert_eq!(entry.reason, AttentionReason::FewerTrustedThanQuorum);
        assert_eq!(
            entry.awaited,
            vec![lost_index],
            "it waits for node 3's replica"
        );
    }

    let answers = runtime
        .block_on(client.accept_loss(group))
        .expect("accept-loss");
    assert!(
        answers.iter().any(|answer| answer.result.is_ok()),
        "some node accepted: {answers:?}"
    );
    runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(60);
        let ack = common::produce_batch(&client, 1_000, deadline).await;
        assert_eq!(ack.record_count as u64, BATCH);
    });
    common::wait_until("attention clearing for the partition", 30, || {
        runtime
            .block_on(client.attention())
            .is_ok_and(|report| report.entries().all(|(_, entry)| entry.group != group))
    });
}
