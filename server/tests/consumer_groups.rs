//! Consumer groups on real processes. Each member is its own process
//! (`strand consume s/t --group g --json`, run by this test binary
//! re-executed as [`member_process`]), so members can be SIGKILLed and
//! SIGSTOPped like a service's instances:
//! - three members of a 12-partition topic read 4 partitions each; a fourth
//!   joins and each reads 3; one is SIGKILLed and its partitions move to the
//!   others; with a producer running throughout, every acknowledged record
//!   is consumed (none skipped);
//! - a member paused past its session timeout is removed; resumed, it learns
//!   so and joins again; a removed member's offsets are refused;
//! - `strand consumer-group describe` shows each partition's stored offset,
//!   end and lag; `strand group reset` (the alias) moves the offsets of an
//!   empty group;
//! - the node coordinating the group (the metadata plane's primary) is
//!   SIGKILLed: the group keeps its members and assignment, and its stored
//!   offsets survive.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Node, bootstrap, cluster_with_stream_s, wait_until};
use strand_client::cli::Outcome;
use strand_client::{Client, ClientError, DescribeConsumerGroupsReply, ProducerConfig, TopicSpec};
use strand_wire::ops::ConsumerGroupFence;

/// Set in a member process's environment: the cluster's client addresses.
const MEMBER_ENV: &str = "STRAND_TEST_GROUP_MEMBER";

/// The members' session timeout.
const SESSION_TIMEOUT_MS: u32 = 3_000;

const PARTITIONS: u32 = 12;

/// Not a test of its own: the body of a member process (returns at once
/// unless [`MEMBER_ENV`] is set). Runs the `strand` CLI in this process.
#[test]
fn member_process() {
    let Ok(cluster) = std::env::var(MEMBER_ENV) else {
        return;
    };
    let runtime = common::runtime();
    let timeout = SESSION_TIMEOUT_MS.to_string();
    let argv = [
        "strand",
        "--cluster",
        &cluster,
        "--timeout-ms",
        "30000",
        "--json",
        "consume",
        "s/t",
        "--group",
        "g",
        "--session-timeout-ms",
        &timeout,
    ];
    let outcome = runtime.block_on(strand_client::cli::run(
        argv,
        &b""[..],
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    ));
    std::process::exit(outcome as i32);
}

/// A member process and what it printed.
struct Member {
    child: Child,
    /// (partition, offset) of every record it printed.
    consumed: Arc<Mutex<Vec<(u32, u64)>>>,
    /// Its stderr so far.
    stderr: Arc<Mutex<String>>,
}

impl Member {
    fn start(cluster: &str) -> Member {
        let mut child = Command::new(std::env::current_exe().expect("the test binary"))
            .args([
                "--exact",
                "member_process",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(MEMBER_ENV, cluster)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a member");
        let consumed = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().expect("piped");
        let sink = Arc::clone(&consumed);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                // The harness's `test member_process ... ` has no line end:
                // the first record follows it on its line.
                let Some(start) = line.find('{') else {
                    continue;
                };
                let Ok(record) = serde_json::from_str::<serde_json::Value>(&line[start..]) else {
                    continue;
                };
                if let (Some(partition), Some(offset)) =
                    (record["partition"].as_u64(), record["offset"].as_u64())
                {
                    sink.lock().expect("lock").push((partition as u32, offset));
                }
            }
        });
        let errors = child.stderr.take().expect("piped");
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(errors).lines() {
                let Ok(line) = line else { return };
                let mut text = sink.lock().expect("lock");
                text.push_str(&line);
                text.push('\n');
            }
        });
        Member {
            child,
            consumed,
            stderr,
        }
    }

    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "{signal} to a member");
    }

    fn stderr(&self) -> String {
        self.stderr.lock().expect("lock").clone()
    }

    /// SIGTERM: the member stores its offsets, leaves and exits 0.
    fn stop(mut self) {
        self.signal("TERM");
        let status = self.child.wait().expect("wait for a member");
        assert!(
            status.success(),
            "member exited {status}: {}",
            self.stderr()
        );
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The group as the cluster describes it (None while no node answers).
fn describe(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
) -> Option<DescribeConsumerGroupsReply> {
    runtime
        .block_on(client.describe_consumer_groups(Some("g")))
        .ok()
}

/// The members' partition counts, ascending (empty without the group).
fn shares(runtime: &tokio::runtime::Runtime, client: &Client) -> Vec<usize> {
    let Some(described) = describe(runtime, client) else {
        return vec![usize::MAX];
    };
    let mut shares: Vec<usize> = described
        .groups
        .iter()
        .flat_map(|group| group.members.iter().map(|member| member.partitions.len()))
        .collect();
    shares.sort_unstable();
    shares
}

fn create_topic(runtime: &tokio::runtime::Runtime, client: &Client) {
    let mut spec = TopicSpec::new("s", "t");
    spec.partition_count = PARTITIONS;
    runtime
        .block_on(client.create_topic(spec))
        .expect("create the topic");
}

/// Produces records round robin over the partitions until `stop`; returns
/// every acknowledged (partition, offset).
async fn produce_until(client: Client, stop: Arc<Mutex<bool>>) -> BTreeSet<(u32, u64)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let producer = common::producer(&client, "s", "t", ProducerConfig::default(), deadline).await;
    let mut deliveries = Vec::new();
    let mut sent = 0u64;
    while !*stop.lock().expect("lock") {
        for partition in 0..PARTITIONS {
            let delivery = producer
                .send(partition, "k", format!("record {sent}"))
                .await
                .expect("buffer a record");
            deliveries.push((partition, delivery));
            sent += 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut acked = BTreeSet::new();
    for (partition, delivery) in deliveries {
        if let Ok(offset) = delivery.await {
            acked.insert((partition, offset));
        }
    }
    acked
}

/// Every acknowledged record was printed by some member.
fn assert_none_skipped(acked: &BTreeSet<(u32, u64)>, members: &[&Member]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let consumed: BTreeSet<(u32, u64)> = members
            .iter()
            .flat_map(|member| member.consumed.lock().expect("lock").clone())
            .collect();
        let missing: Vec<&(u32, u64)> = acked.difference(&consumed).collect();
        if missing.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            let stderr: Vec<String> = members.iter().map(|member| member.stderr()).collect();
            panic!(
                "{} of {} acknowledged records never consumed, first {:?}; members said {stderr:#?}",
                missing.len(),
                acked.len(),
                &missing[..missing.len().min(10)]
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn members_share_the_partitions_and_a_killed_members_move_with_nothing_skipped() {
    if std::env::var(MEMBER_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (_nodes, runtime, client) = cluster_with_stream_s(dir.path());
    let cluster = bootstrap(&_nodes).join(",");
    create_topic(&runtime, &client);
    let stop = Arc::new(Mutex::new(false));
    let producing = runtime.spawn(produce_until(client.clone(), Arc::clone(&stop)));

    let members: Vec<Member> = (0..3).map(|_| Member::start(&cluster)).collect();
    wait_until("three members with 4 partitions each", 60, || {
        shares(&runtime, &client) == [4, 4, 4]
    });
    let fourth = Member::start(&cluster);
    wait_until("four members with 3 partitions each", 60, || {
        shares(&runtime, &client) == [3, 3, 3, 3]
    });
    std::thread::sleep(Duration::from_secs(1));
    let mut members = members;
    let killed = members.remove(1);
    killed.signal("KILL");
    let killed_at = Instant::now();
    wait_until("the killed member's partitions moved", 30, || {
        shares(&runtime, &client) == [4, 4, 4]
    });
    eprintln!(
        "the killed member's partitions moved after {} ms (session timeout {SESSION_TIMEOUT_MS} ms)",
        killed_at.elapsed().as_millis()
    );
    std::thread::sleep(Duration::from_secs(1));
    *stop.lock().expect("lock") = true;
    let acked = runtime.block_on(producing).expect("the producer");
    assert!(acked.len() > 1000, "{} records acknowledged", acked.len());
    let everyone: Vec<&Member> = members.iter().chain([&fourth, &killed]).collect();
    assert_none_skipped(&acked, &everyone);

    // Stopped members leave: the group is empty, its offsets stay, and
    // describe shows no lag once everything was consumed.
    for member in members {
        member.stop();
    }
    fourth.stop();
    wait_until("the group is empty", 30, || {
        shares(&runtime, &client).is_empty()
    });
    let run = runtime.block_on(common::strand(
        &cluster,
        &["--json", "consumer-group", "describe", "g"],
        b"",
    ));
    assert_eq!(run.outcome, Outcome::Success, "{}", run.stderr);
    let described: serde_json::Value = serde_json::from_str(&run.stdout).expect("json");
    let partitions = described["partitions"].as_array().expect("partitions");
    assert_eq!(partitions.len(), PARTITIONS as usize);
    for partition in partitions {
        let end = partition["end"].as_u64().expect("end");
        let index = partition["partition"].as_u64().expect("partition") as u32;
        let acked_end = acked
            .iter()
            .filter(|(acked_partition, _)| *acked_partition == index)
            .map(|(_, offset)| offset + 1)
            .max()
            .unwrap_or(0);
        assert_eq!(end, acked_end, "partition {index}'s end");
        assert_eq!(partition["committed"].as_u64(), Some(end), "{partition}");
        assert_eq!(partition["lag"].as_u64(), Some(0), "{partition}");
    }

    // Reset an empty group: every partition reads from the start again, and
    // describe shows the whole partition as lag.
    // (A partition's node may still count the last member for a metadata
    // commit after the node that described the group: it refuses until then.)
    wait_until("the empty group's offsets reset", 10, || {
        let run = runtime.block_on(common::strand(
            &cluster,
            &["group", "reset", "g", "--to", "earliest"],
            b"",
        ));
        run.outcome == Outcome::Success
    });
    let run = runtime.block_on(common::strand(
        &cluster,
        &["--json", "consumer-group", "describe", "g"],
        b"",
    ));
    let described: serde_json::Value = serde_json::from_str(&run.stdout).expect("json");
    for partition in described["partitions"].as_array().expect("partitions") {
        assert_eq!(partition["committed"].as_u64(), Some(0));
        assert_eq!(partition["lag"], partition["end"]);
    }
}

#[test]
fn a_paused_member_is_removed_cannot_store_offsets_and_joins_again() {
    if std::env::var(MEMBER_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (nodes, runtime, client) = cluster_with_stream_s(dir.path());
    let cluster = bootstrap(&nodes).join(",");
    create_topic(&runtime, &client);

    // A member that stops heartbeating (the SDK, by hand) is removed, and
    // then cannot store the group's offsets.
    let zombie = 0x5a5a;
    let assignment = runtime
        .block_on(client.join_consumer_group("g", "s", "t", zombie, 1_000))
        .expect("join");
    assert_eq!(assignment.partitions.len(), PARTITIONS as usize);
    let partition_group = runtime
        .block_on(client.topic("s", "t"))
        .expect("topic")
        .partitions[0]
        .group;
    let fence = ConsumerGroupFence {
        member: zombie,
        generation: assignment.generation,
    };
    // The partition's node may apply the join a metadata commit after the
    // coordinator answered it (`Unavailable` until then: retry).
    wait_until("a member stores its group's offset", 10, || {
        match runtime.block_on(client.store_consumer_group_offset(partition_group, "g", 0, fence)) {
            Ok(_) => true,
            Err(ClientError::Unavailable { .. }) => false,
            Err(error) => panic!("a member stores its group's offset: {error}"),
        }
    });
    wait_until("the silent member removed", 30, || {
        shares(&runtime, &client).is_empty()
    });
    // (The partition's node may learn the removal a metadata commit after
    // the node that described it.)
    wait_until("the removed member's store refused", 10, || {
        let refused =
            runtime.block_on(client.store_consumer_group_offset(partition_group, "g", 0, fence));
        matches!(refused, Err(ClientError::StaleGeneration { .. }))
    });
    let heartbeat = runtime.block_on(client.consumer_heartbeat("g", zombie, assignment.generation));
    assert!(
        matches!(heartbeat, Err(ClientError::UnknownMember { .. })),
        "{heartbeat:?}"
    );
    // Nobody else stores a group's cursor while it has members.
    let first = Member::start(&cluster);
    wait_until("one member", 60, || {
        shares(&runtime, &client) == [PARTITIONS as usize]
    });
    wait_until("a store without the member's fence refused", 10, || {
        let unfenced = runtime.block_on(client.store_cursor("s", "t", 0, "g", 0));
        matches!(unfenced, Err(ClientError::InvalidRequest { .. }))
    });

    // A member process paused past its session timeout.
    let paused = Member::start(&cluster);
    wait_until("two members", 60, || shares(&runtime, &client) == [6, 6]);
    paused.signal("STOP");
    wait_until("the paused member removed", 30, || {
        shares(&runtime, &client) == [PARTITIONS as usize]
    });
    paused.signal("CONT");
    wait_until("the resumed member joined again", 30, || {
        paused.stderr().contains("joined again")
    });
    wait_until("two members again", 30, || {
        shares(&runtime, &client) == [6, 6]
    });
    paused.stop();
    first.stop();
}

#[test]
fn the_group_survives_its_coordinators_failure() {
    if std::env::var(MEMBER_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut nodes, runtime, client) = cluster_with_stream_s(dir.path());
    let cluster = bootstrap(&nodes).join(",");
    create_topic(&runtime, &client);
    let stop = Arc::new(Mutex::new(false));
    let producing = runtime.spawn(produce_until(client.clone(), Arc::clone(&stop)));
    let members: Vec<Member> = (0..3).map(|_| Member::start(&cluster)).collect();
    wait_until("three members", 60, || {
        shares(&runtime, &client) == [4, 4, 4]
    });
    std::thread::sleep(Duration::from_secs(2));
    let before = describe(&runtime, &client).expect("described").groups[0].clone();
    let stored_before = stored_offsets(&runtime, &client);

    let coordinator = coordinator_index(&runtime, &client, &nodes);
    nodes[coordinator].kill();
    // A new metadata primary takes over; the members keep heartbeating.
    std::thread::sleep(Duration::from_millis(u64::from(SESSION_TIMEOUT_MS) * 2));
    wait_until("the group described after the failover", 30, || {
        describe(&runtime, &client).is_some_and(|described| !described.groups.is_empty())
    });
    let after = describe(&runtime, &client).expect("described").groups[0].clone();
    assert!(
        after.generation <= before.generation + 1,
        "at most one rebalance: generation {} then {}",
        before.generation,
        after.generation
    );
    if after.generation == before.generation {
        assert_eq!(after.members, before.members, "the assignment is kept");
    }
    *stop.lock().expect("lock") = true;
    let acked = runtime.block_on(producing).expect("the producer");
    let everyone: Vec<&Member> = members.iter().collect();
    assert_none_skipped(&acked, &everyone);
    let stored_after = stored_offsets(&runtime, &client);
    for (partition, offset) in &stored_before {
        assert!(
            stored_after.get(partition) >= Some(offset),
            "partition {partition}: stored {offset} before, {:?} after",
            stored_after.get(partition)
        );
    }
    for member in members {
        member.stop();
    }
}

/// The group's stored offset per partition (partitions without one left out).
fn stored_offsets(runtime: &tokio::runtime::Runtime, client: &Client) -> BTreeMap<u32, u64> {
    let mut stored = BTreeMap::new();
    for partition in 0..PARTITIONS {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match runtime.block_on(client.get_cursor("s", "t", partition, "g")) {
                Ok(Some(offset)) => {
                    stored.insert(partition, offset);
                    break;
                }
                Ok(None) => break,
                Err(error) => {
                    assert!(
                        Instant::now() < deadline,
                        "read the group's offset: {error}"
                    );
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }
    stored
}

/// The index in `nodes` of the node whose metadata replica is primary.
fn coordinator_index(runtime: &tokio::runtime::Runtime, client: &Client, nodes: &[Node]) -> usize {
    let status = runtime
        .block_on(client.cluster_status())
        .expect("cluster status");
    let (node, _) = status
        .groups()
        .find(|(answering, group)| {
            let _ = answering;
            group.group == 0 && group.primary == group.replica && group.status == "normal"
        })
        .expect("the metadata plane's primary");
    nodes
        .iter()
        .position(|candidate| candidate.node == node)
        .expect("a node of the cluster")
}
