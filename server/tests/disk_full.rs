//! A full data disk on real processes: three nodes keep their data on a
//! small tmpfs, filled by producing. The nodes stay up, produces fail with
//! the typed `DiskFull` (nothing acknowledged is lost: every acknowledged
//! record reads back), `attention` and the metrics say so, and once space is
//! freed producing works again without a restart.
//!
//! Mounting a tmpfs needs root; where the mount is refused the test says so
//! and does nothing.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use strand_client::{Client, ClientError, NewRecord, ProduceAck, TopicSpec};

/// The tmpfs every node's data lives on.
const FILESYSTEM_BYTES: u64 = 96 << 20;
/// Free space each node keeps.
const RESERVE_BYTES: u64 = 24 << 20;
/// A file taking room on the tmpfs until the test frees it.
const BALLAST_BYTES: u64 = 32 << 20;
/// Records per batch and bytes per record value.
const RECORDS_PER_BATCH: u64 = 16;
const VALUE_BYTES: usize = 4096;

/// A tmpfs mounted for the test's life.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    fn mount(path: &Path, bytes: u64) -> Option<Tmpfs> {
        std::fs::create_dir_all(path).expect("mount point");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(path)
            .status()
            .is_ok_and(|status| status.success());
        mounted.then(|| Tmpfs {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

fn records(batch: u64) -> Vec<NewRecord> {
    (0..RECORDS_PER_BATCH)
        .map(|index| {
            let key = format!("b{batch}-{index}");
            let mut value = key.clone().into_bytes();
            value.resize(VALUE_BYTES, b'.');
            NewRecord::new(key, value)
        })
        .collect()
}

/// Produces batches from `next` on until one is refused with `DiskFull`;
/// returns the acknowledged ones. Other errors (a group settling) are
/// retried with the same batch.
async fn produce_until_full(
    client: &Client,
    acked: &mut BTreeMap<u64, ProduceAck>,
    next: &mut u64,
) -> ClientError {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(
            Instant::now() < deadline,
            "the disk never filled ({} batches acknowledged)",
            acked.len()
        );
        match client.produce("s", "t", 0, records(*next)).await {
            Ok(ack) => {
                acked.insert(*next, ack);
                *next += 1;
            }
            Err(error @ ClientError::DiskFull { .. }) => return error,
            Err(error) => {
                eprintln!("produce of batch {next}: {error}; retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Every acknowledged batch reads back at its offsets, once.
async fn check_acknowledged(client: &Client, acked: &BTreeMap<u64, ProduceAck>) {
    let total = acked.len() * RECORDS_PER_BATCH as usize;
    let deadline = Instant::now() + Duration::from_secs(60);
    let read = common::read_partition(client, "s", "t", 0, total, deadline).await;
    let by_offset: BTreeMap<u64, &[u8]> = read
        .iter()
        .map(|(offset, key, _)| (*offset, key.as_slice()))
        .collect();
    assert_eq!(by_offset.len(), read.len(), "an offset read twice");
    for (batch, ack) in acked {
        for index in 0..RECORDS_PER_BATCH {
            let key = format!("b{batch}-{index}");
            assert_eq!(
                by_offset.get(&(ack.offset_base + index)).copied(),
                Some(key.as_bytes()),
                "acknowledged record {key} at offset {}",
                ack.offset_base + index
            );
        }
    }
}

/// A tmpfs of [`FILESYSTEM_BYTES`] at `dir/name` with a [`BALLAST_BYTES`]
/// file on it (freed later to make room); `None`, said on stderr, where
/// mounting is refused.
fn small_disk_with_ballast(dir: &Path, name: &str) -> Option<(Tmpfs, PathBuf)> {
    let Some(tmpfs) = Tmpfs::mount(&dir.join(name), FILESYSTEM_BYTES) else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (the full-disk test needs root)");
        return None;
    };
    let ballast = tmpfs.path.join("ballast");
    std::fs::write(&ballast, vec![1u8; BALLAST_BYTES as usize]).expect("ballast");
    Some((tmpfs, ballast))
}

/// `strand attention` against the cluster.
fn run_attention(runtime: &tokio::runtime::Runtime, nodes: &[common::Node]) -> common::Run {
    runtime.block_on(common::strand(
        &common::bootstrap(nodes).join(","),
        &["attention"],
        b"",
    ))
}

/// Writes `path` until the file system has no block left.
fn fill_up(path: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).expect("filler");
    let chunk = vec![2u8; 64 * 1024];
    while file.write_all(&chunk).is_ok() {}
    let _ = file.sync_all();
}

/// Three nodes, node `n` keeping its data under `disks[n - 1]` and
/// `reserve_bytes` free, with topic `s/t` (one partition on three replicas,
/// 1 MiB segments) created; returns the partition's group too.
fn cluster_on(
    dir: &Path,
    disks: [&Path; 3],
    reserve_bytes: u64,
) -> (Vec<common::Node>, tokio::runtime::Runtime, Client, u64) {
    let mut nodes = common::configure_cluster(dir, 3);
    for (node, disk) in nodes.iter_mut().zip(disks) {
        let config = std::fs::read_to_string(&node.config).expect("read config");
        let data = disk.join(format!("node-{}", node.node));
        let config = config
            .lines()
            .map(|line| match line {
                _ if line.starts_with("data_dir") => {
                    format!("data_dir = {:?}", data.display().to_string())
                }
                _ if line.starts_with("disk_reserve_bytes") => {
                    format!("disk_reserve_bytes = {reserve_bytes}")
                }
                _ => line.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(&node.config, config).expect("write config");
        node.start();
    }
    let runtime = common::runtime();
    let (client, group) = runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut config = strand_client::ClientConfig::new(common::bootstrap(&nodes));
        config.deadline_ms = 3_000;
        let client = loop {
            match Client::connect(config.clone()).await {
                Ok(client) => break client,
                Err(error) => {
                    assert!(Instant::now() < deadline, "cannot connect: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        client.create_stream("s").await.expect("create stream");
        let mut spec = TopicSpec::new("s", "t");
        spec.replica_count = 3;
        spec.segment_bytes = Some(1 << 20);
        let groups = client.create_topic(spec).await.expect("create topic");
        (client, groups[0])
    });
    (nodes, runtime, client, group)
}

/// Produces batch `batch` until it is acknowledged (a group reopening or
/// in a view change refuses for a while).
fn produce_until_acknowledged(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    batch: u64,
    seconds: u64,
) -> ProduceAck {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        match runtime.block_on(client.produce("s", "t", 0, records(batch))) {
            Ok(ack) => return ack,
            Err(error) => {
                assert!(
                    Instant::now() < deadline,
                    "batch {batch} still refused after {seconds} s: {error}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

#[test]
fn a_full_disk_refuses_produces_loses_nothing_and_recovers_by_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some((tmpfs, ballast)) = small_disk_with_ballast(dir.path(), "small") else {
        return;
    };
    let disk = tmpfs.path.as_path();
    let (mut nodes, runtime, client, _) = cluster_on(dir.path(), [disk; 3], RESERVE_BYTES);
    let mut acked = BTreeMap::new();
    let mut next = 0;
    let refused = runtime.block_on(produce_until_full(&client, &mut acked, &mut next));
    assert!(!acked.is_empty(), "some batches fit before the disk filled");
    eprintln!("{} batches acknowledged, then: {refused}", acked.len());
    for node in &mut nodes {
        node.assert_alive();
    }
    // Refused again while full, and the node says why.
    let again = runtime.block_on(client.produce("s", "t", 0, records(next)));
    assert!(
        matches!(again, Err(ClientError::DiskFull { .. })),
        "{again:?}"
    );
    let attention = run_attention(&runtime, &nodes);
    assert_eq!(
        attention.outcome,
        strand_client::cli::Outcome::NeedsAttention,
        "{}",
        attention.stdout
    );
    assert!(
        attention.stdout.contains("disk_full"),
        "{}",
        attention.stdout
    );
    common::wait_until("a node's metric shows the full disk", 5, || {
        nodes
            .iter()
            .any(|node| common::metric(node, "node_disk_full") == 1.0)
    });
    assert!(
        nodes
            .iter()
            .map(|node| common::metric(node, "produce_refused_disk_full_total"))
            .sum::<f64>()
            >= 2.0
    );
    runtime.block_on(check_acknowledged(&client, &acked));

    // Space is freed: producing works again, without a restart.
    std::fs::remove_file(&ballast).expect("free space");
    acked.insert(
        next,
        produce_until_acknowledged(&runtime, &client, next, 30),
    );
    next += 1;
    for batch in next..next + 10 {
        let ack = runtime
            .block_on(client.produce("s", "t", 0, records(batch)))
            .expect("produce after space was freed");
        acked.insert(batch, ack);
    }
    for node in &mut nodes {
        node.assert_alive();
    }
    runtime.block_on(check_acknowledged(&client, &acked));
    // Each node reads its own disk every 100 ms: the primary seeing room
    // says nothing of when a backup's next reading comes (a loaded machine
    // delays it), so attention is asked until every node has had one.
    let mut attention = run_attention(&runtime, &nodes);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while attention.outcome != strand_client::cli::Outcome::Success
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
        attention = run_attention(&runtime, &nodes);
    }
    assert_eq!(
        attention.outcome,
        strand_client::cli::Outcome::Success,
        "{}",
        attention.stdout
    );
    assert!(
        nodes
            .iter()
            .all(|node| common::metric(node, "node_disk_full") == 0.0)
    );
    drop(nodes);
    drop(tmpfs);
}

/// With no reserve, writes find the disk full: the replicas whose writes
/// failed stop (nothing they did not write is acknowledged), `attention`
/// lists them, and once space is freed the node opens them again from disk
/// by itself; every acknowledged record reads back.
///
/// Each node has its own small disk, and the primary's has more room: a
/// backup appends what its primary accepted without asking its own disk,
/// so its write is the one that finds the disk full (a primary whose own
/// disk filled would refuse the produce with `DiskFull` before writing).
#[test]
fn a_replica_whose_write_found_the_disk_full_reopens_once_space_is_freed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut disks = Vec::new();
    for name in ["disk-1", "disk-2", "disk-3"] {
        let Some(disk) = small_disk_with_ballast(dir.path(), name) else {
            return;
        };
        disks.push(disk);
    }
    let paths = [0, 1, 2].map(|at| disks[at].0.path.as_path());
    let (mut nodes, runtime, client, group) = cluster_on(dir.path(), paths, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    let primary = runtime.block_on(common::serving_primary(&client, group, None, deadline));
    let primary_at = nodes
        .iter()
        .position(|node| node.node == primary)
        .expect("the primary is one of the nodes");
    let primary_disk = &disks[primary_at];
    std::fs::remove_file(&primary_disk.1).expect("room for the primary");
    let mut acked = BTreeMap::new();
    let mut batch = 0;
    fill_backups(&runtime, &client, &nodes, &mut acked, &mut batch);

    // The metadata plane's own writes find the disk full too (every last
    // block taken on every node): refused or failed, never a node down.
    for (tmpfs, _) in &disks {
        fill_up(&tmpfs.path.join("filler"));
    }
    let created = runtime.block_on(client.create_stream("while-full"));
    eprintln!("create stream while full: {created:?}");
    std::thread::sleep(Duration::from_secs(1));
    for node in &mut nodes {
        node.assert_alive();
    }

    for (tmpfs, ballast) in &disks {
        std::fs::remove_file(tmpfs.path.join("filler")).expect("free space");
        let _ = std::fs::remove_file(ballast);
    }
    for _ in 0..10 {
        acked.insert(
            batch,
            produce_until_acknowledged(&runtime, &client, batch, 60),
        );
        batch += 1;
    }
    for node in &mut nodes {
        node.assert_alive();
    }
    runtime.block_on(check_acknowledged(&client, &acked));
    // The metadata plane works again.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match runtime.block_on(client.create_stream("after")) {
            Ok(()) | Err(ClientError::AlreadyExists { .. }) => break,
            Err(error) => {
                assert!(Instant::now() < deadline, "create stream after: {error}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    // A clean stop: every node exits 0 and none panicked on the way.
    for node in &mut nodes {
        node.terminate();
    }
    for node in &nodes {
        let log = std::fs::read_to_string(&node.log).expect("node log");
        assert!(
            !log.contains("panicked"),
            "node {} panicked: {log}",
            node.node
        );
    }
    drop(nodes);
    drop(disks);
}

/// Produces until the backups' writes find their disks full and
/// `attention` lists a replica whose storage failed; records the
/// acknowledged batches in `acked`.
fn fill_backups(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    nodes: &[common::Node],
    acked: &mut BTreeMap<u64, ProduceAck>,
    batch: &mut u64,
) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut failures = 0;
    loop {
        assert!(Instant::now() < deadline, "no write found the disk full");
        match runtime.block_on(client.produce("s", "t", 0, records(*batch))) {
            Ok(ack) => {
                acked.insert(*batch, ack);
            }
            Err(error) => {
                eprintln!("batch {batch}: {error}");
                failures += 1;
            }
        }
        *batch += 1;
        if failures > 0 {
            let attention = run_attention(runtime, nodes);
            if attention.stdout.contains("storage_failed") {
                eprintln!("{}", attention.stdout);
                break;
            }
        }
    }
    assert!(!acked.is_empty(), "some batches fit before the disk filled");
}
