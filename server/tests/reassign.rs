//! Partition reassignment with real processes: a node lost for good is
//! replaced under load and a second original replica is lost after it;
//! confirm policies change in place (no view change) or through one (and
//! then wait for every copy); right after a replacement, a failover waits for
//! the replica that holds the log; a removed replica that returns never
//! counts and never serves, and `drop-replica` deletes its copy (the command
//! line refuses a set or a drop that would leave too few complete copies).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Node, signal};
use strand_client::{
    AttentionReason, Client, ClientConfig, ConfirmPolicy, Durability, GroupStatus, PartitionTarget,
    ProduceAck, TopicSpec,
};

/// Creates `s`/`t` (one partition, three replicas, `confirm`, persisted) and
/// returns its group and the nodes it was placed on, by slot.
async fn create_topic(client: &Client, confirm: ConfirmPolicy) -> (u64, Vec<u32>) {
    client.create_stream("s").await.expect("create stream");
    let mut spec = TopicSpec::new("s", "t");
    spec.partition_count = 1;
    spec.replica_count = 3;
    spec.durability = Some(Durability::Persisted);
    spec.confirm = Some(confirm);
    let groups = client.create_topic(spec).await.expect("create topic");
    let info = client.topic("s", "t").await.expect("topic info");
    (groups[0], info.partitions[0].replicas.clone())
}

/// A running cluster with `s`/`t` created: what every test here starts from.
struct Setup {
    nodes: Vec<Node>,
    runtime: tokio::runtime::Runtime,
    /// When the test gives up on any wait.
    deadline: Instant,
    client: Client,
    /// The topic's partition's group.
    group: u64,
    /// The nodes it was placed on, by slot.
    members: Vec<u32>,
}

/// Starts `count` nodes and creates `s`/`t` with `confirm`.
fn setup(dir: &std::path::Path, count: u32, confirm: ConfirmPolicy) -> Setup {
    let mut nodes = common::configure_cluster(dir, count);
    for node in &mut nodes {
        node.start();
    }
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(300);
    let client = runtime.block_on(common::connect_patient(&nodes, deadline));
    let (group, members) = runtime.block_on(create_topic(&client, confirm));
    Setup {
        nodes,
        runtime,
        deadline,
        client,
        group,
        members,
    }
}

/// Every node's status of `group`, by answering node.
async fn statuses(client: &Client, group: u64) -> BTreeMap<u32, GroupStatus> {
    let Ok(status) = client.cluster_status().await else {
        return BTreeMap::new();
    };
    status
        .groups()
        .filter(|(_, status)| status.group == group)
        .map(|(node, status)| (node, status.clone()))
        .collect()
}

/// The node serving as `group`'s primary, if one does, as `statuses` say.
fn serving_primary(statuses: &BTreeMap<u32, GroupStatus>) -> Option<u32> {
    statuses
        .iter()
        .filter(|(_, status)| status.status == "normal" && status.replica == status.primary)
        .max_by_key(|(_, status)| (status.epoch, status.view))
        .map(|(node, _)| *node)
}

/// The serving primary's status of `group` (it knows who is caught up).
fn primary_view(statuses: &BTreeMap<u32, GroupStatus>) -> Option<&GroupStatus> {
    serving_primary(statuses).and_then(|node| statuses.get(&node))
}

/// Whether `group` serves at `epoch` with every replica of it caught up.
fn settled_at(statuses: &BTreeMap<u32, GroupStatus>, epoch: u32) -> bool {
    primary_view(statuses).is_some_and(|status| {
        status.epoch == epoch && status.replicas.iter().all(|replica| replica.caught_up)
    })
}

/// Moves `group` onto `nodes` (without `--force`), asking again while the
/// node refuses because a replica is still catching up: right after a
/// produce, the replica a majority did not need may lag for a moment, and
/// an operator waits for `strand status` the same way.
async fn reassign_once_safe(
    client: &Client,
    group: u64,
    nodes: &[u32],
    deadline: Instant,
) -> strand_wire::ops::Reassigned {
    loop {
        match client
            .reassign_partition(PartitionTarget::Group(group), nodes, None, false)
            .await
        {
            Ok(reassigned) => return reassigned,
            Err(strand_client::ClientError::Refused { message })
                if message.contains("catching up") && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("reassign onto {nodes:?}: {error}"),
        }
    }
}

/// Produces batches `from..to`, recording each acknowledgment.
async fn produce_range(
    client: &Client,
    from: u64,
    to: u64,
    acked: &Mutex<BTreeMap<u64, ProduceAck>>,
    deadline: Instant,
) {
    for batch in from..to {
        let ack = common::produce_batch(client, batch, deadline).await;
        acked.lock().expect("acks").insert(batch, ack);
    }
}

/// `view_changes_total` of `group`, summed over the running nodes.
fn view_changes(nodes: &[Node], group: u64) -> f64 {
    nodes
        .iter()
        .filter(|node| node.child.is_some())
        .map(|node| common::view_changes(node, group))
        .sum()
}

/// Runs the `strand` command line against the running nodes; returns how it
/// ended and what it wrote to stderr.
async fn strand_cli(nodes: &[Node], args: &[&str]) -> (strand_client::cli::Outcome, String) {
    let cluster = common::bootstrap(nodes)
        .into_iter()
        .zip(nodes)
        .filter(|(_, node)| node.child.is_some())
        .map(|(address, _)| address)
        .collect::<Vec<_>>()
        .join(",");
    let mut argv = vec!["strand", "--cluster", &cluster, "--timeout-ms", "30000"];
    argv.extend_from_slice(args);
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let outcome = strand_client::cli::run(argv, &b""[..], &mut stdout, &mut stderr).await;
    (outcome, String::from_utf8_lossy(&stderr).into_owned())
}

/// Whether one produce of batch `batch` is acknowledged within `timeout_ms`.
async fn produce_within(nodes: &[Node], batch: u64, timeout_ms: u64) -> Option<ProduceAck> {
    let mut config = ClientConfig::new(common::bootstrap(nodes));
    config.deadline_ms = timeout_ms;
    let client = Client::connect(config).await.ok()?;
    client
        .produce("s", "t", 0, common::batch_records(batch))
        .await
        .ok()
}

#[test]
fn a_lost_node_is_replaced_under_load_and_a_second_loss_loses_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Setup {
        mut nodes,
        runtime,
        deadline,
        client,
        group,
        members,
    } = setup(dir.path(), 4, ConfirmPolicy::MajorityDurable);
    let spare = (1..=4)
        .find(|node| !members.contains(node))
        .expect("a spare node");
    let acked = Arc::new(Mutex::new(BTreeMap::new()));
    runtime.block_on(produce_range(&client, 0, 30, &acked, deadline));

    // Load runs throughout: a producer task keeps writing.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (client, acked, stop) = (client.clone(), Arc::clone(&acked), Arc::clone(&stop));
        runtime.spawn(async move {
            let mut batch = 1000;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                produce_range(&client, batch, batch + 1, &acked, deadline).await;
                batch += 1;
            }
        })
    };

    // A node is lost for good; its replica moves to the spare node.
    let lost = members[2];
    nodes[lost as usize - 1].kill();
    let replacement: Vec<u32> = vec![members[0], members[1], spare];
    let reassigned = runtime.block_on(reassign_once_safe(&client, group, &replacement, deadline));
    assert!(
        !reassigned.in_place,
        "a removed replica takes a view change"
    );
    assert_eq!(
        (reassigned.epoch, reassigned.joining.clone()),
        (1, vec![spare])
    );
    common::wait_until("the new epoch serves with the spare caught up", 120, || {
        settled_at(&runtime.block_on(statuses(&client, group)), 1)
    });
    // The spare's own node says so too (each node publishes its status on
    // its own schedule).
    common::wait_until("the spare serves as a replica of epoch 1", 60, || {
        runtime
            .block_on(statuses(&client, group))
            .remove(&spare)
            .is_some_and(|status| status.status == "normal" && status.epoch == 1)
    });

    // Another original replica is lost: the spare and the survivor carry on.
    let primary = serving_primary(&runtime.block_on(statuses(&client, group))).expect("primary");
    let second = if primary == spare {
        members[0]
    } else {
        primary
    };
    nodes[second as usize - 1].kill();
    let more = runtime.block_on(async {
        let before = acked.lock().expect("acks").len();
        while acked.lock().expect("acks").len() < before + 20 {
            assert!(
                Instant::now() < deadline,
                "no progress after the second loss"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        acked.lock().expect("acks").len()
    });
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    runtime.block_on(load).expect("load task");

    // The node refuses a set that keeps the second lost node and takes the
    // first one back: of its three replicas one would hold every record
    // (and the first still keeps a retired copy). The command line says so.
    let survivor = if second == members[0] {
        spare
    } else {
        members[0]
    };
    let copies_as_expected = |status: &GroupStatus| {
        let caught_up = |node: u32| {
            status
                .replicas
                .iter()
                .any(|replica| replica.node == node && replica.caught_up)
        };
        !caught_up(second) && caught_up(survivor)
    };
    common::wait_until(
        "the primary sees the second lost copy fall behind",
        60,
        || {
            primary_view(&runtime.block_on(statuses(&client, group)))
                .is_some_and(copies_as_expected)
        },
    );
    let risky = format!("{survivor},{second},{lost}");
    let refused = runtime.block_on(strand_cli(
        &nodes,
        &["partition", "reassign", "s/t/0", "--replicas", &risky],
    ));
    assert_eq!(
        refused.0,
        strand_client::cli::Outcome::Usage,
        "{}",
        refused.1
    );
    assert!(
        refused
            .1
            .contains(&format!("joining: {lost}; catching up: {second}"))
            && refused.1.contains("--force"),
        "{}",
        refused.1
    );
    // The audit log of the node that refused it says so.
    common::wait_until("the refusal is in an audit log", 10, || {
        common::audit_entries(dir.path(), &nodes)
            .iter()
            .any(|entry| {
                entry["action"] == "ReassignPartition"
                    && entry["outcome"] == "Refused"
                    && entry["forced"] == false
            })
    });
    // The node, not the command line, enforces it: the SDK is refused too.
    let sdk = runtime.block_on(client.reassign_partition(
        PartitionTarget::Group(group),
        &[survivor, second, lost],
        None,
        false,
    ));
    assert!(
        matches!(&sdk, Err(strand_client::ClientError::Refused { message }) if message.contains("--force")),
        "{sdk:?}"
    );
    // A dry run of the same move is refused by the same rule, and the
    // preview of the safe one is the plan the metadata plane would make.
    let previewed = runtime.block_on(strand_cli(
        &nodes,
        &[
            "partition",
            "reassign",
            "s/t/0",
            "--replicas",
            &risky,
            "--dry-run",
        ],
    ));
    assert_eq!(
        previewed.0,
        strand_client::cli::Outcome::Usage,
        "{}",
        previewed.1
    );
    assert!(previewed.1.contains("--force"), "{}", previewed.1);
    let acked = acked.lock().expect("acks").clone();
    assert!(acked.len() >= more);
    let total = acked.len() * common::BATCH as usize;
    runtime.block_on(common::check_acknowledged(&client, &acked, total));
}

#[test]
fn a_replica_added_before_anything_committed_joins_and_confirms() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Setup {
        nodes: _nodes,
        runtime,
        deadline,
        client,
        group,
        members,
    } = setup(dir.path(), 4, ConfirmPolicy::LocalDurable);
    let spare = (1..=4)
        .find(|node| !members.contains(node))
        .expect("a spare node");
    // Every copy confirms, so nothing commits until the newcomer holds the
    // log, and its state transfer has no committed op to copy.
    let grown: Vec<u32> = members.iter().copied().chain([spare]).collect();
    let reassigned = runtime.block_on(reassign_once_safe(&client, group, &grown, deadline));
    assert_eq!(reassigned.joining, vec![spare]);
    let acked = Mutex::new(BTreeMap::new());
    runtime.block_on(produce_range(&client, 0, 10, &acked, deadline));
    common::wait_until("epoch 1 serves with the newcomer caught up", 60, || {
        settled_at(&runtime.block_on(statuses(&client, group)), 1)
    });
    let acked = acked.into_inner().expect("acks");
    runtime.block_on(common::check_acknowledged(
        &client,
        &acked,
        acked.len() * common::BATCH as usize,
    ));
}

#[test]
fn confirm_policies_change_in_place_or_through_a_view_change() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Setup {
        mut nodes,
        runtime,
        deadline,
        client,
        group,
        members,
    } = setup(dir.path(), 3, ConfirmPolicy::LocalDurable);
    let acked = Mutex::new(BTreeMap::new());
    runtime.block_on(produce_range(&client, 0, 10, &acked, deadline));

    // LocalDurable -> MajorityDurable: in place, no view change.
    let before = view_changes(&nodes, group);
    let reassigned = runtime
        .block_on(client.reassign_partition(
            PartitionTarget::Group(group),
            &members,
            Some(ConfirmPolicy::MajorityDurable),
            false,
        ))
        .expect("reassign to majority");
    assert!(reassigned.in_place);
    assert_eq!(
        (reassigned.write_quorum, reassigned.previous_write_quorum),
        (2, 3)
    );
    common::wait_until("epoch 1 serves", 60, || {
        settled_at(&runtime.block_on(statuses(&client, group)), 1)
    });
    runtime.block_on(produce_range(&client, 10, 20, &acked, deadline));
    assert_eq!(view_changes(&nodes, group), before, "no view change");

    // MajorityDurable -> LocalDurable: a view change, then every copy confirms.
    let reassigned = runtime.block_on(async {
        loop {
            // The metadata plane hears epoch 1 started a moment after it did.
            match client
                .reassign_partition(
                    PartitionTarget::Group(group),
                    &members,
                    Some(ConfirmPolicy::LocalDurable),
                    false,
                )
                .await
            {
                Ok(reassigned) => return reassigned,
                Err(error) => {
                    assert!(Instant::now() < deadline, "reassign to local: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    assert!(
        !reassigned.in_place,
        "more copies to confirm take a view change"
    );
    common::wait_until("epoch 2 serves", 60, || {
        settled_at(&runtime.block_on(statuses(&client, group)), 2)
    });
    assert!(view_changes(&nodes, group) > before);
    let primary = serving_primary(&runtime.block_on(statuses(&client, group))).expect("primary");
    let backup = members
        .iter()
        .copied()
        .find(|node| *node != primary)
        .expect("a backup");
    signal(&mut nodes[backup as usize - 1], "STOP");
    assert!(
        runtime
            .block_on(produce_within(&nodes, 100, 3_000))
            .is_none(),
        "with a copy stopped, nothing confirms"
    );
    signal(&mut nodes[backup as usize - 1], "CONT");
    runtime.block_on(produce_range(&client, 20, 30, &acked, deadline));
    let acked = acked.into_inner().expect("acks");
    // Batch 100 may or may not have been written after the stop ended.
    let read = runtime.block_on(common::read_partition(
        &client,
        "s",
        "t",
        0,
        acked.len() * common::BATCH as usize,
        deadline,
    ));
    for (batch, ack) in &acked {
        let first = read
            .iter()
            .find(|(offset, _, _)| *offset == ack.offset_base)
            .expect("acknowledged batch present");
        assert_eq!(first.1, format!("k{}", batch * common::BATCH).into_bytes());
    }
}

#[test]
fn right_after_a_replacement_a_failover_waits_for_the_replica_with_the_log() {
    failover_right_after_a_replacement(Resolution::ItReturns);
}

#[test]
fn right_after_a_replacement_an_operator_may_accept_the_loss_instead() {
    failover_right_after_a_replacement(Resolution::AcceptLoss);
}

/// How the stuck failover of [`failover_right_after_a_replacement`] ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resolution {
    /// The replica with the log is restarted.
    ItReturns,
    /// An operator runs `accept-loss`.
    AcceptLoss,
}

/// A replacement starts its epoch; then both replicas holding the log die
/// before the new one caught up, and one of them returns: the failover
/// waits (attention names the partition and the missing node) rather than
/// promote the empty replica, until `resolution`.
fn failover_right_after_a_replacement(resolution: Resolution) {
    let dir = tempfile::tempdir().expect("temp dir");
    let Setup {
        mut nodes,
        runtime,
        deadline,
        client,
        group,
        members,
    } = setup(dir.path(), 5, ConfirmPolicy::MajorityDurable);
    let acked = Mutex::new(BTreeMap::new());
    runtime.block_on(produce_range(&client, 0, 20, &acked, deadline));
    let spare = (1..=5)
        .find(|node| !members.contains(node))
        .expect("a spare");
    // The spare cannot catch up; a replica is lost for good.
    signal(&mut nodes[spare as usize - 1], "STOP");
    nodes[members[2] as usize - 1].kill();
    runtime.block_on(reassign_once_safe(
        &client,
        group,
        &[members[0], members[1], spare],
        deadline,
    ));
    common::wait_until("the new epoch starts", 120, || {
        let statuses = runtime.block_on(statuses(&client, group));
        serving_primary(&statuses)
            .and_then(|node| statuses.get(&node))
            .is_some_and(|status| status.epoch == 1)
    });
    let primary = serving_primary(&runtime.block_on(statuses(&client, group))).expect("primary");
    let other = if primary == members[0] {
        members[1]
    } else {
        members[0]
    };
    // Both replicas that hold the log die; one returns, with the spare.
    nodes[other as usize - 1].kill();
    nodes[primary as usize - 1].kill();
    nodes[other as usize - 1].start();
    signal(&mut nodes[spare as usize - 1], "CONT");
    let status_client = runtime.block_on(common::connect_patient(&nodes, deadline));
    common::wait_until(
        "attention names the partition and the missing node",
        120,
        || {
            let report = runtime.block_on(status_client.attention());
            report.ok().is_some_and(|report| {
                report.entries().any(|(_, entry)| {
                    entry.group == group
                        && entry.reason == AttentionReason::FewerTrustedThanQuorum
                        && entry.detail.contains(&primary.to_string())
                })
            })
        },
    );
    assert!(
        serving_primary(&runtime.block_on(statuses(&status_client, group))).is_none(),
        "an empty replica is never promoted"
    );
    match resolution {
        Resolution::ItReturns => nodes[primary as usize - 1].start(),
        Resolution::AcceptLoss => {
            let answers = runtime
                .block_on(status_client.accept_loss(group))
                .expect("accept-loss");
            let started = answers
                .iter()
                .find_map(|answer| answer.result.as_ref().ok())
                .expect("a node accepted the loss");
            // The start it recorded: the op the view began at, which holds
            // every batch acknowledged so far (the survivor had them all).
            assert!(started.op >= 20, "accepted start {started:?}");
        }
    }
    // The group serves again; nothing acknowledged is lost.
    runtime.block_on(produce_range(&status_client, 20, 25, &acked, deadline));
    let acked = acked.into_inner().expect("acks");
    let total = acked.len() * common::BATCH as usize;
    runtime.block_on(common::check_acknowledged(&status_client, &acked, total));
}

#[test]
fn a_removed_replica_that_returns_never_counts_and_drop_replica_deletes_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Setup {
        mut nodes,
        runtime,
        deadline,
        client,
        group,
        members,
    } = setup(dir.path(), 4, ConfirmPolicy::MajorityDurable);
    let acked = Mutex::new(BTreeMap::new());
    runtime.block_on(produce_range(&client, 0, 10, &acked, deadline));
    let spare = (1..=4)
        .find(|node| !members.contains(node))
        .expect("a spare");
    let removed = members[2];
    // A live replica is moved off its node: it takes part in the change,
    // then retires (its actor stays, serving nothing).
    runtime.block_on(reassign_once_safe(
        &client,
        group,
        &[members[0], members[1], spare],
        deadline,
    ));
    common::wait_until("the new epoch serves, the spare caught up", 120, || {
        settled_at(&runtime.block_on(statuses(&client, group)), 1)
    });
    common::wait_until("the removed replica retires", 60, || {
        runtime
            .block_on(statuses(&client, group))
            .get(&removed)
            .is_some_and(|status| status.status == "retired")
    });
    // Restarted, it comes back with its old copy and still never serves.
    nodes[removed as usize - 1].kill();
    nodes[removed as usize - 1].start();
    common::wait_until("the restarted node answers", 60, || {
        let statuses = runtime.block_on(statuses(&client, group));
        statuses.len() >= 3
            && statuses
                .get(&removed)
                .is_none_or(|status| status.status == "retired")
    });
    // It never counts: with the two other members down, nothing confirms.
    let primary = serving_primary(&runtime.block_on(statuses(&client, group))).expect("primary");
    for node in [members[0], members[1], spare] {
        if node != primary {
            nodes[node as usize - 1].kill();
        }
    }
    assert!(
        runtime
            .block_on(produce_within(&nodes, 500, 3_000))
            .is_none(),
        "a retired replica never confirms"
    );
    assert_ne!(
        serving_primary(&runtime.block_on(statuses(&client, group))),
        Some(removed)
    );
    for node in [members[0], members[1], spare] {
        if node != primary {
            nodes[node as usize - 1].start();
        }
    }
    runtime.block_on(produce_range(&client, 10, 15, &acked, deadline));
    // Dropping its copy deletes the directory on that node.
    let removed_dir = dir
        .path()
        .join(format!("node-{removed}"))
        .join("partitions");
    // The command line drops it once every member holds every record.
    common::wait_until("every member is caught up", 60, || {
        primary_view(&runtime.block_on(statuses(&client, group)))
            .is_some_and(|status| status.replicas.iter().all(|replica| replica.caught_up))
    });
    let group_arg = group.to_string();
    let removed_arg = removed.to_string();
    // The command line judges "caught up" from whichever node answers its
    // status query, which may have heard the last acks a moment after the
    // primary: while it says a member still catches up, it refuses (and
    // drops nothing), and an operator runs it again, as it says.
    let mut dropped = (strand_client::cli::Outcome::Usage, String::new());
    common::wait_until("the command line drops the retired copy", 30, || {
        dropped = runtime.block_on(strand_cli(
            &nodes,
            &[
                "partition",
                "drop-replica",
                &group_arg,
                "--node",
                &removed_arg,
                "--yes",
            ],
        ));
        dropped.0 == strand_client::cli::Outcome::Success || !dropped.1.contains("still catch up")
    });
    assert_eq!(
        dropped.0,
        strand_client::cli::Outcome::Success,
        "{}",
        dropped.1
    );
    common::wait_until("the retired copy is deleted", 60, || {
        !partition_dir_exists(&removed_dir)
    });
    let acked = acked.into_inner().expect("acks");
    let total = acked.len() * common::BATCH as usize;
    runtime.block_on(common::check_acknowledged(&client, &acked, total));
}

/// Whether any partition directory exists under a node's data dir.
fn partition_dir_exists(root: &std::path::Path) -> bool {
    walk(root)
        .into_iter()
        .any(|path| path.ends_with("superblock.0"))
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                walk(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}
