//! What a client sees while nodes fail, with real processes: a node that
//! restarts never tells a client that an existing topic is unknown; a
//! primary paused (SIGSTOP) or cut off from its peers (a proxy on every
//! bus link) costs a write gap near the failover time, not a five-second
//! stall, and nothing acknowledged is lost or doubled; with the first
//! bootstrap node paused, command-line runs for other partitions still
//! answer; `produce --json` after a failure in the middle of a run names
//! exactly the batches that were acknowledged.
//!
//! The write gaps and command times are printed; the timed bounds are
//! checked by the ignored `measured_*` tests (five rounds each, medians):
//! `cargo test -p strand-server --test client_faults -- --ignored`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{BATCH, Node, Run, proxy::BusProxies, signal, strand};
use strand_client::cli::{self, Outcome};
use strand_client::{Client, ClientError, ProduceAck, TopicSpec};

/// The batch number the setup writes to each partition (above any batch a
/// test produces).
const SETUP_BATCH: u64 = 1_000_000_000;

/// Asserts that a run succeeded.
fn assert_ok(run: &Run, what: &str) {
    assert_eq!(
        run.outcome,
        Outcome::Success,
        "{what} failed after {:?}\nstdout:\n{}\nstderr:\n{}",
        run.elapsed,
        run.stdout,
        run.stderr
    );
}

/// A running cluster whose bus links run through proxies, with topic `s/t`.
struct Cluster {
    nodes: Vec<Node>,
    proxies: BusProxies,
    runtime: tokio::runtime::Runtime,
    deadline: Instant,
    client: Client,
    /// The group of each partition of `s/t`.
    groups: Vec<u64>,
}

impl Cluster {
    fn start(dir: &std::path::Path, partitions: u32) -> Cluster {
        let runtime = common::runtime();
        let (mut nodes, proxies) = common::configure_proxied_cluster(dir, 3, &runtime);
        for node in &mut nodes {
            node.start();
        }
        let deadline = Instant::now() + Duration::from_secs(300);
        let (client, groups) = runtime.block_on(async {
            let client = common::connect_patient(&nodes, deadline).await;
            client.create_stream("s").await.expect("create stream");
            let mut spec = TopicSpec::new("s", "t");
            spec.partition_count = partitions;
            let groups = client.create_topic(spec).await.expect("create topic");
            for batch in 0..partitions {
                produce_to(&client, batch, SETUP_BATCH + u64::from(batch), deadline).await;
            }
            (client, groups)
        });
        let cluster = Cluster {
            nodes,
            proxies,
            runtime,
            deadline,
            client,
            groups,
        };
        cluster.wait_for_topic_everywhere();
        cluster
    }

    /// Waits until every node's catalog has `s/t`, so any node asked knows it.
    fn wait_for_topic_everywhere(&self) {
        for node in &self.nodes {
            let address = node.client_address.clone();
            self.runtime.block_on(async {
                loop {
                    let run = strand(&address, &["topic", "describe", "s/t"], b"").await;
                    if run.outcome == Outcome::Success {
                        return;
                    }
                    assert!(Instant::now() < self.deadline, "{}", run.stderr);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            });
        }
    }

    /// The node serving `group` as its primary in normal status.
    fn primary_of(&self, group: u64) -> u32 {
        self.runtime.block_on(common::serving_primary(
            &self.client,
            group,
            None,
            self.deadline,
        ))
    }

    /// Reads partition 0 back: every batch of `acked` is there once, at its
    /// offsets, beside the setup's batch and `lines` keyless records.
    fn check_acknowledged(&self, acked: &Acked, lines: u64) {
        let by_batch: BTreeMap<u64, ProduceAck> =
            acked.iter().map(|(batch, ack, _)| (*batch, *ack)).collect();
        let total = (by_batch.len() as u64 + 1) * BATCH + lines;
        self.runtime.block_on(check_acknowledged_among(
            &self.client,
            &by_batch,
            total as usize,
        ));
    }

    fn cluster_flag(&self) -> String {
        common::bootstrap(&self.nodes).join(",")
    }
}

/// Produces batch `batch` (keys `k<index>`) to partition `partition`,
/// retrying errors until `deadline`; an "unknown stream/topic" fails.
async fn produce_to(client: &Client, partition: u32, batch: u64, deadline: Instant) -> ProduceAck {
    loop {
        match client
            .produce("s", "t", partition, common::batch_records(batch))
            .await
        {
            Ok(ack) => return ack,
            Err(error @ (ClientError::UnknownStream { .. } | ClientError::UnknownTopic { .. })) => {
                panic!("batch {batch}: the topic exists, but: {error}")
            }
            Err(error) => {
                assert!(Instant::now() < deadline, "batch {batch}: {error}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Each acknowledged batch of a background producer: its number, where it
/// landed, and when the acknowledgement came.
type Acked = Vec<(u64, ProduceAck, Instant)>;

/// A task producing batches `0..` to partition 0, one at a time, until
/// stopped.
struct Producing {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Acked>,
}

impl Producing {
    fn start(runtime: &tokio::runtime::Runtime, client: Client, deadline: Instant) -> Producing {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let task = runtime.spawn(async move {
            let mut acked = Vec::new();
            let mut batch = 0;
            while !stopped.load(Ordering::SeqCst) {
                let ack = produce_to(&client, 0, batch, deadline).await;
                acked.push((batch, ack, Instant::now()));
                batch += 1;
            }
            acked
        });
        Producing { stop, task }
    }

    /// Stops it; every batch it had acknowledged.
    fn finish(self, runtime: &tokio::runtime::Runtime) -> Acked {
        self.stop.store(true, Ordering::SeqCst);
        runtime.block_on(self.task).expect("the producer task")
    }
}

/// The longest time between two acknowledgements (or the run's start and
/// the first one).
fn longest_gap(started: Instant, acked: &Acked) -> Duration {
    let mut previous = started;
    let mut longest = Duration::ZERO;
    for (_, _, at) in acked {
        longest = longest.max(at.saturating_duration_since(previous));
        previous = *at;
    }
    longest
}

/// How a primary is taken away from its peers and clients.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// SIGSTOP, SIGCONT after the hold.
    Pause,
    /// Every bus link cut (clients still reach it), healed after the hold.
    CutOff,
}

/// Produces through the fault of partition 0's primary (held for `hold`),
/// then checks every acknowledged batch reads back once at its offsets.
/// Returns the longest write gap the producer saw.
fn write_gap_through(fault: Fault, hold: Duration) -> Duration {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cluster = Cluster::start(dir.path(), 1);
    let group = cluster.groups[0];
    let primary = cluster.primary_of(group);
    let started = Instant::now();
    let producing = Producing::start(&cluster.runtime, cluster.client.clone(), cluster.deadline);
    std::thread::sleep(Duration::from_secs(2));
    let node = &mut cluster.nodes[primary as usize - 1];
    match fault {
        Fault::Pause => signal(node, "STOP"),
        Fault::CutOff => cluster.proxies.isolate(primary),
    }
    let faulted = Instant::now();
    std::thread::sleep(hold);
    match fault {
        Fault::Pause => signal(node, "CONT"),
        Fault::CutOff => cluster.proxies.heal(primary),
    }
    std::thread::sleep(Duration::from_secs(3));
    let acked = producing.finish(&cluster.runtime);
    let during = acked
        .iter()
        .filter(|(_, _, at)| *at > faulted && *at < faulted + hold)
        .count();
    assert!(
        during > 0,
        "{fault:?}: nothing was acknowledged during the fault"
    );
    let gap = longest_gap(started, &acked);
    eprintln!(
        "{fault:?} of node {primary} (primary) for {hold:?}: {} batches acknowledged, \
         {during} during the fault; longest write gap {} ms",
        acked.len(),
        gap.as_millis()
    );
    cluster.check_acknowledged(&acked, 0);
    gap
}

/// Like `common::check_acknowledged`, for a partition that also holds
/// records other than `acked`'s (the setup's batch, command-line lines
/// without keys): acknowledged records are there once, at their offsets,
/// and no key is there twice.
async fn check_acknowledged_among(
    client: &Client,
    acked: &BTreeMap<u64, ProduceAck>,
    total: usize,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let read = common::read_partition(client, "s", "t", 0, total, deadline).await;
    let mut seen = BTreeMap::new();
    for (offset, key, _) in &read {
        if key.is_empty() {
            continue; // a command-line line
        }
        let key = String::from_utf8(key.clone()).expect("utf-8 key");
        assert!(
            seen.insert(key.clone(), *offset).is_none(),
            "{key} appears twice"
        );
    }
    for (batch, ack) in acked {
        for (index, offset) in (batch * BATCH..(batch + 1) * BATCH).zip(ack.offset_base..) {
            assert_eq!(
                seen.get(&format!("k{index}")),
                Some(&offset),
                "acknowledged record k{index} at offset {offset}"
            );
        }
    }
}

#[test]
fn a_paused_primary_fails_over_and_loses_nothing() {
    write_gap_through(Fault::Pause, Duration::from_secs(10));
}

#[test]
fn a_primary_cut_off_from_its_peers_fails_over_and_loses_nothing() {
    write_gap_through(Fault::CutOff, Duration::from_secs(10));
}

/// The median of five write gaps through `fault`.
fn median_gap(fault: Fault) -> Duration {
    let mut gaps: Vec<Duration> = (0..5)
        .map(|_| write_gap_through(fault, Duration::from_secs(10)))
        .collect();
    gaps.sort();
    eprintln!("{fault:?}: write gaps {gaps:?}, median {:?}", gaps[2]);
    gaps[2]
}

#[test]
#[ignore = "a measurement: five rounds of ~20 s each"]
fn measured_write_gap_of_a_paused_primary_is_under_1500_ms() {
    let median = median_gap(Fault::Pause);
    assert!(median < Duration::from_millis(1_500), "median {median:?}");
}

#[test]
#[ignore = "a measurement: five rounds of ~20 s each"]
fn measured_write_gap_of_a_cut_off_primary_is_under_1500_ms() {
    let median = median_gap(Fault::CutOff);
    assert!(median < Duration::from_millis(1_500), "median {median:?}");
}

#[test]
fn a_restarted_first_bootstrap_node_never_says_the_topic_is_unknown() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cluster = Cluster::start(dir.path(), 1);
    let first = cluster.nodes[0].client_address.clone();
    // A long-lived client that knows only node 1, producing throughout.
    let client = cluster.runtime.block_on(async {
        let mut config = strand_client::ClientConfig::new([first.clone()]);
        config.deadline_ms = 120_000;
        Client::connect(config)
            .await
            .expect("connect through node 1")
    });
    let producing = Producing::start(&cluster.runtime, client, cluster.deadline);
    for round in 0..4 {
        cluster.nodes[0].kill();
        // A raw client asks for the topic the moment the port accepts, and
        // until the node answers it: never "unknown", only "not ready".
        let probe = {
            let address = first.clone();
            std::thread::spawn(move || ask_until_known(&address))
        };
        cluster.nodes[0].start();
        let not_ready = probe.join().expect("the probe");
        eprintln!("round {round}: {not_ready} answer(s) NotReady before the topic");
        // Fresh command-line clients through node 1 alone, right away: each
        // waits for the node rather than believe a catalog it has not loaded.
        let line = format!("round-{round}\n");
        let produce =
            cluster
                .runtime
                .block_on(strand(&first, &["produce", "s/t"], line.as_bytes()));
        assert_ok(&produce, "produce through a restarted node 1");
        let consume = cluster.runtime.block_on(strand(
            &first,
            &["consume", "s/t", "--from", "earliest", "--count", "1"],
            b"",
        ));
        assert_ok(&consume, "consume through a restarted node 1");
        for run in [&produce, &consume] {
            assert!(
                !run.stderr.contains("unknown"),
                "round {round}: {}",
                run.stderr
            );
        }
        eprintln!(
            "round {round}: produce {:?}, consume {:?} after the restart",
            produce.elapsed, consume.elapsed
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let acked = producing.finish(&cluster.runtime);
    assert!(!acked.is_empty());
    cluster.check_acknowledged(&acked, 4); // and the four produced lines
}

/// Connects to `address` as soon as it accepts, then asks for `s/t` until
/// the answer has it; panics on an "unknown stream/topic". Returns how
/// many answers were NotReady first.
fn ask_until_known(address: &str) -> u32 {
    use std::io::{Read, Write};
    use strand_wire::{Body, CommandHeader};
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut stream = loop {
        if let Ok(stream) = std::net::TcpStream::connect(address) {
            break stream;
        }
        assert!(Instant::now() < deadline, "{address} never accepted");
        std::thread::sleep(Duration::from_millis(1));
    };
    let decoder = strand_wire::FrameDecoder::new(16 * 1024 * 1024);
    let mut buffer = bytes::BytesMut::new();
    let mut chunk = [0u8; 64 * 1024];
    let mut not_ready = 0;
    for request in 1.. {
        assert!(Instant::now() < deadline, "{address} never knew s/t");
        let query = strand_wire::ops::MetadataRequest {
            stream: Some("s".to_owned()),
            topic: Some("t".to_owned()),
        };
        let mut header =
            strand_wire::RequestHeader::new(common::CLUSTER, 0, strand_wire::ViewId::ZERO, 0);
        header.client.set(0xfeed);
        header.request.set(request);
        header.operation = strand_wire::Operation::Metadata as u8;
        let body = bytes::Bytes::from(query.to_vec());
        let frame = strand_wire::Msg::new(header, body).to_bytes();
        if stream.write_all(&frame).is_err() {
            return not_ready; // the node went away again (not this test's doing)
        }
        let reply = loop {
            if let Some(message) = decoder.decode(&mut buffer).expect("a valid reply") {
                break message;
            }
            let read = stream.read(&mut chunk).unwrap_or(0);
            assert!(read > 0, "{address} closed the connection");
            buffer.extend_from_slice(&chunk[..read]);
        };
        let strand_wire::Message::Reply(reply) = reply else {
            panic!("not a reply");
        };
        match reply.header().result() {
            strand_wire::ResultCode::Ok => return not_ready,
            strand_wire::ResultCode::NotReady => {
                not_ready += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            code => panic!("request {request} to the restarted node: {code:?}"),
        }
    }
    unreachable!("the loop returns")
}

/// With the first bootstrap node paused, command-line runs that need only
/// other nodes (produce and consume on partitions it does not lead, and
/// status) answer; returns how long each took.
fn commands_with_the_first_node_paused() -> Vec<(String, Duration)> {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cluster = Cluster::start(dir.path(), 3);
    let cluster_flag = cluster.cluster_flag();
    let partitions: Vec<u32> = (0..cluster.groups.len() as u32)
        .filter(|partition| cluster.primary_of(cluster.groups[*partition as usize]) != 1)
        .collect();
    assert!(!partitions.is_empty(), "node 1 leads every partition");
    signal(&mut cluster.nodes[0], "STOP");
    let mut times = Vec::new();
    for partition in &partitions {
        let partition = partition.to_string();
        let produce = cluster.runtime.block_on(strand(
            &cluster_flag,
            &["produce", "s/t", "--partition", &partition],
            b"while node 1 sleeps\n",
        ));
        assert_ok(&produce, "produce with node 1 paused");
        times.push((format!("produce --partition {partition}"), produce.elapsed));
        let consume = cluster.runtime.block_on(strand(
            &cluster_flag,
            &["consume", "s/t", "--partition", &partition, "--count", "1"],
            b"",
        ));
        assert_ok(&consume, "consume with node 1 paused");
        times.push((format!("consume --partition {partition}"), consume.elapsed));
    }
    let status = cluster
        .runtime
        .block_on(strand(&cluster_flag, &["--json", "status"], b""));
    assert_ok(&status, "status with node 1 paused");
    let view: serde_json::Value = serde_json::from_str(&status.stdout).expect("status JSON");
    let answered: Vec<(u64, bool)> = view["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|node| (node["node"].as_u64().unwrap_or(0), node["answered"] == true))
        .collect();
    assert_eq!(answered, vec![(1, false), (2, true), (3, true)]);
    times.push(("status".to_owned(), status.elapsed));
    signal(&mut cluster.nodes[0], "CONT");
    for (command, elapsed) in &times {
        eprintln!(
            "with node 1 paused: strand {command}: {} ms",
            elapsed.as_millis()
        );
    }
    times
}

#[test]
fn with_the_first_bootstrap_node_paused_commands_for_other_partitions_answer() {
    commands_with_the_first_node_paused();
}

#[test]
#[ignore = "a measurement"]
fn measured_commands_with_the_first_node_paused_take_under_a_second() {
    for (command, elapsed) in commands_with_the_first_node_paused() {
        assert!(elapsed < Duration::from_secs(1), "{command}: {elapsed:?}");
    }
}

#[test]
fn produce_json_after_a_failure_names_exactly_the_acknowledged_batches() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cluster = Cluster::start(dir.path(), 1);
    let group = cluster.groups[0];
    let primary = cluster.primary_of(group);
    let flag = cluster.cluster_flag();
    // The command line runs on a thread of its own (its output is not Send).
    let produce = std::thread::spawn(move || {
        let argv = [
            "strand",
            "--cluster",
            &flag,
            "--timeout-ms",
            "3000",
            "--json",
            "produce",
            "s/t",
            "--count",
            "300000",
            "--size",
            "24",
        ];
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let outcome =
            common::runtime().block_on(cli::run(argv, &b""[..], &mut stdout, &mut stderr));
        (outcome, stdout, stderr)
    });
    // Once part of the run is in, both backups die: nothing more confirms.
    let client = cluster.client.clone();
    cluster.runtime.block_on(async {
        loop {
            let status = common::group_status(&client, primary, group).await;
            if status.is_some_and(|status| status.commit_op >= 20) {
                return;
            }
            assert!(Instant::now() < cluster.deadline, "the run never got going");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let backups: Vec<usize> = (0..3)
        .filter(|index| *index + 1 != primary as usize)
        .collect();
    for backup in &backups {
        cluster.nodes[*backup].kill();
    }
    let killed = Instant::now();
    let (outcome, stdout, stderr) = produce.join().expect("the run");
    eprintln!("the run ended {:?} after the kill", killed.elapsed());
    let stderr = String::from_utf8_lossy(&stderr);
    assert_eq!(outcome, Outcome::Failed, "{stderr}");
    let summary: serde_json::Value = serde_json::from_slice(&stdout).expect("produce JSON");
    for backup in &backups {
        cluster.nodes[*backup].start();
    }

    // Every record index, with what the run said of its batch.
    let mut said: BTreeMap<u64, (&str, Option<u64>)> = BTreeMap::new();
    let batches = summary["batches"].as_array().expect("batches");
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for batch in batches {
        let outcome = batch["outcome"].as_str().expect("outcome");
        let first = batch["first_record"].as_u64().expect("first record");
        let last = batch["last_record"].as_u64().expect("last record");
        *counts.entry(outcome).or_default() += last - first + 1;
        let first_offset = batch["first_offset"].as_u64();
        for (step, index) in (first..=last).enumerate() {
            let offset = first_offset.map(|offset| offset + step as u64);
            assert!(
                said.insert(index, (outcome, offset)).is_none(),
                "{index} twice"
            );
        }
    }
    // The run stops at the first failed batch: what it did not send is in
    // no batch, and must not be in the partition either.
    let sent = summary["stopped_before_record"].as_u64().unwrap_or(300_000);
    assert!(sent < 300_000, "the run went on after a failure");
    assert_eq!(said.len() as u64, sent, "every record sent is in one batch");
    assert_eq!(
        summary["records"].as_u64(),
        counts.get("acknowledged").copied().or(Some(0))
    );
    assert!(
        counts.get("acknowledged").copied().unwrap_or(0) > 0,
        "{counts:?}"
    );
    assert!(
        counts.get("unknown").copied().unwrap_or(0) + counts.get("refused").copied().unwrap_or(0)
            > 0,
        "the failure hit the run: {counts:?}"
    );
    eprintln!("records by outcome: {counts:?}");

    // Read the whole partition back once the backups are up again.
    let client = cluster.client.clone();
    let restarted = Instant::now();
    let read = cluster
        .runtime
        .block_on(read_everything(&client, cluster.deadline));
    eprintln!(
        "read back {} records in {:?}",
        read.len(),
        restarted.elapsed()
    );
    let mut found: BTreeMap<u64, u64> = BTreeMap::new();
    for (offset, value) in read {
        let Some(index) = generated_index(&value) else {
            continue; // the setup's batch
        };
        assert!(
            found.insert(index, offset).is_none(),
            "record {index} appears twice"
        );
    }
    for (index, (outcome, offset)) in &said {
        match *outcome {
            "acknowledged" => assert_eq!(
                found.get(index),
                offset.as_ref(),
                "acknowledged record {index}"
            ),
            "refused" => assert!(
                !found.contains_key(index),
                "refused record {index} was written"
            ),
            "unknown" => {}
            other => panic!("unexpected outcome {other}"),
        }
    }
    let unexplained: BTreeSet<u64> = found
        .keys()
        .filter(|index| !said.contains_key(index))
        .copied()
        .collect();
    assert!(
        unexplained.is_empty(),
        "records the run never sent: {unexplained:?}"
    );
}

/// `record-<index> ...` (the CLI's generated values) to `index`.
fn generated_index(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?;
    text.strip_prefix("record-")?
        .split(' ')
        .next()?
        .parse()
        .ok()
}

/// Every record of partition 0 as (offset, value), once the partition
/// serves again.
async fn read_everything(client: &Client, deadline: Instant) -> Vec<(u64, Vec<u8>)> {
    let mut read = Vec::new();
    let mut offset = 0;
    loop {
        assert!(Instant::now() < deadline, "read back did not finish");
        match client.fetch("s", "t", 0, offset, 4 * 1024 * 1024, 0).await {
            Ok(fetched) if fetched.records.is_empty() => return read,
            Ok(fetched) => {
                for record in fetched.records {
                    read.push((record.offset, record.value.to_vec()));
                }
                offset = fetched.next_offset;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
