//! The storage-fault campaign: one damaged replica at a time, each fault
//! kind at the newest and at a middle frame of each file it can hit, with
//! SIGKILLs of the other replicas one at a time and all at once (the record
//! log, the cursor log, a superblock copy and the index of one partition,
//! and the node's metadata log). Every run
//! must lose no acknowledged record, duplicate none, repair the damaged
//! replica (trusted and caught up in `status`), and keep every node serving
//! its other partition. Slow (two dozen clusters): run it with
//! `cargo test -p strand-server --test storage_campaign -- --ignored --nocapture`;
//! it prints a table of the runs (`docs/storage-faults.md` keeps one).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use strand_client::{Client, NewRecord, ProduceAck, TopicSpec};
use strand_partition::faults::{Fault, damage_frame, flip_byte, frames};
use strand_partition::layout::{cursors_log_path, index_path, partition_dir, segment_path};

/// Batches of ten records written to the damaged partition before the fault.
const BATCHES: u64 = 20;
/// Consumers whose cursors are stored on the damaged partition.
const CONSUMERS: u64 = 8;

/// What is damaged on the victim's copy of partition 0.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// The record log's segment, `nth` frame from the newest.
    Records(Fault, Position),
    /// The superblock copy written last.
    Superblock,
    /// The segment's index.
    Index,
    /// The cursor event log.
    Cursors(Fault, Position),
    /// The node's metadata log (the metadata plane's group).
    Metadata(Fault, Position),
}

#[derive(Debug, Clone, Copy)]
enum Position {
    Newest,
    Middle,
}

#[derive(Debug, Clone, Copy)]
enum Crashes {
    OneAtATime,
    AllAtOnce,
}

fn targets() -> Vec<Target> {
    let mut targets = Vec::new();
    for position in [Position::Newest, Position::Middle] {
        for fault in Fault::ALL {
            targets.push(Target::Records(fault, position));
        }
        targets.push(Target::Cursors(Fault::FlipPayload, position));
        targets.push(Target::Metadata(Fault::FlipPayload, position));
    }
    targets.push(Target::Superblock);
    targets.push(Target::Index);
    targets
}

/// The frame `position` names in the framed file at `path`.
fn nth(path: &Path, position: Position) -> usize {
    let count = frames(&std::fs::read(path).expect("read")).len();
    assert!(count > 0, "{} holds no frame", path.display());
    match position {
        Position::Newest => 0,
        Position::Middle => count / 2,
    }
}

/// Applies `target` to the stopped victim's copy at `dir` (or its node's
/// metadata log, under `data`).
fn damage(data: &Path, dir: &Path, target: Target) -> String {
    let newest_superblock = |dir: &Path| -> PathBuf {
        (0..2)
            .map(|copy| dir.join(format!("superblock.{copy}")))
            .max_by_key(|path| {
                std::fs::metadata(path)
                    .and_then(|meta| meta.modified())
                    .ok()
            })
            .expect("two copies")
    };
    let (path, done) = match target {
        Target::Records(fault, position) => {
            let path = segment_path(dir, 0);
            let nth = nth(&path, position);
            let damage = damage_frame(&path, nth, fault).expect("damage");
            (path, format!("{damage:?}"))
        }
        Target::Cursors(fault, position) => {
            let path = cursors_log_path(dir);
            let nth = nth(&path, position);
            let damage = damage_frame(&path, nth, fault).expect("damage");
            (path, format!("{damage:?}"))
        }
        Target::Metadata(fault, position) => {
            let path = segment_path(&data.join("metadata"), 0);
            let nth = nth(&path, position);
            let damage = damage_frame(&path, nth, fault).expect("damage");
            (path, format!("{damage:?}"))
        }
        Target::Superblock => {
            let path = newest_superblock(dir);
            let damage = damage_frame(&path, 0, Fault::FlipPayload).expect("damage");
            (path, format!("{damage:?}"))
        }
        Target::Index => {
            let path = index_path(dir, 0);
            flip_byte(&path, 20).expect("damage");
            (path, "byte 20".to_owned())
        }
    };
    format!("{}: {done}", path.display())
}

/// Produces batch `batch` to `partition`, retrying until acknowledged.
async fn produce(client: &Client, partition: u32, batch: u64) -> ProduceAck {
    let records: Vec<NewRecord> = (batch * 10..batch * 10 + 10)
        .map(|index| NewRecord::new(format!("k{index}"), format!("v{index}")))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        match client.produce("s", "t", partition, records.clone()).await {
            Ok(ack) => return ack,
            Err(error) => {
                assert!(Instant::now() < deadline, "batch {batch}: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Every acknowledged batch of `partition` once, at its offsets; nothing else.
async fn check(client: &Client, partition: u32, acked: &BTreeMap<u64, ProduceAck>) {
    let total = acked.len() * 10;
    let deadline = Instant::now() + Duration::from_secs(90);
    let read = common::read_partition(client, "s", "t", partition, total, deadline).await;
    assert_eq!(
        read.len(),
        total,
        "partition {partition}: every record once"
    );
    let mut at = BTreeMap::new();
    for (offset, key, _) in &read {
        let key = String::from_utf8(key.clone()).expect("key");
        assert!(at.insert(key.clone(), *offset).is_none(), "{key} twice");
    }
    for (batch, ack) in acked {
        for (index, offset) in (batch * 10..batch * 10 + 10).zip(ack.offset_base..) {
            assert_eq!(at.get(&format!("k{index}")), Some(&offset), "k{index}");
        }
    }
}

struct Run {
    root: tempfile::TempDir,
    nodes: Vec<common::Node>,
    runtime: tokio::runtime::Runtime,
    group: u64,
    acked: [BTreeMap<u64, ProduceAck>; 2],
    next_batch: u64,
}

impl Run {
    fn client(&self) -> Client {
        let deadline = Instant::now() + Duration::from_secs(60);
        self.runtime
            .block_on(common::connect(common::bootstrap(&self.nodes), deadline))
    }

    fn produce_both(&mut self, client: &Client) {
        let batch = self.next_batch;
        self.next_batch += 1;
        for partition in [0, 1] {
            let ack = self.runtime.block_on(produce(client, partition, batch));
            self.acked[partition as usize].insert(batch, ack);
        }
    }

    fn node_index(&self, id: u32) -> usize {
        self.nodes
            .iter()
            .position(|node| node.node == id)
            .expect("node")
    }

    /// Waits until `victim`'s replicas of partition 0 and of the metadata
    /// plane are trusted and hold what their primaries hold.
    fn wait_repaired(&self, client: &Client, victim: usize) {
        self.wait_group_repaired(client, victim, self.group);
        self.wait_group_repaired(client, victim, 0);
    }

    fn wait_group_repaired(&self, client: &Client, victim: usize, group: u64) {
        let victim = self.nodes[victim].node;
        common::wait_until("the damaged replica trusted and caught up", 90, || {
            common::caught_up(&self.runtime, client, victim, group)
        });
    }
}

fn start() -> (Run, usize) {
    let root = tempfile::tempdir().expect("temp dir");
    let nodes = common::start_cluster(root.path());
    let runtime = common::runtime();
    let mut run = Run {
        root,
        nodes,
        runtime,
        group: 0,
        acked: [BTreeMap::new(), BTreeMap::new()],
        next_batch: 0,
    };
    let client = run.client();
    run.group = run.runtime.block_on(async {
        client.create_stream("s").await.expect("stream");
        let mut spec = TopicSpec::new("s", "t");
        spec.partition_count = 2;
        spec.replica_count = 3;
        spec.durability = Some(strand_client::Durability::Persisted);
        spec.consumer_offset_durability = Some(strand_client::Durability::Persisted);
        client.create_topic(spec).await.expect("topic")[0]
    });
    for _ in 0..BATCHES {
        run.produce_both(&client);
    }
    run.runtime.block_on(async {
        for consumer in 0..CONSUMERS {
            let name = format!("c{consumer}");
            client
                .store_cursor("s", "t", 0, &name, consumer * 10)
                .await
                .expect("cursor");
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let primary = run
        .runtime
        .block_on(common::serving_primary(&client, run.group, None, deadline));
    let primary = run.node_index(primary);
    // A backup: the damaged copy is never the one the group runs on.
    let victim = (0..3).find(|&at| at != primary).expect("a backup");
    (run, victim)
}

fn campaign_run(target: Target, crashes: Crashes) -> String {
    let (mut run, victim) = start();
    run.nodes[victim].kill();
    let victim_data = run
        .root
        .path()
        .join(format!("node-{}", run.nodes[victim].node));
    let dir = partition_dir(&victim_data, "s", "t", 0, run.group);
    let done = damage(&victim_data, &dir, target);
    let others: Vec<usize> = (0..3).filter(|&at| at != victim).collect();
    match crashes {
        Crashes::AllAtOnce => {
            for &other in &others {
                run.nodes[other].kill();
            }
            for node in &mut run.nodes {
                node.start();
            }
        }
        Crashes::OneAtATime => {
            run.nodes[victim].start();
            for &other in &others {
                let client = run.client();
                run.wait_repaired(&client, victim);
                run.nodes[other].kill();
                run.produce_both(&client);
                run.nodes[other].start();
            }
        }
    }
    let client = run.client();
    run.produce_both(&client);
    run.wait_repaired(&client, victim);
    run.runtime.block_on(async {
        check(&client, 0, &run.acked[0]).await;
        check(&client, 1, &run.acked[1]).await;
        for consumer in 0..CONSUMERS {
            let stored = client
                .get_cursor("s", "t", 0, &format!("c{consumer}"))
                .await;
            assert_eq!(
                stored.expect("cursor"),
                Some(consumer * 10),
                "cursor c{consumer}"
            );
        }
    });
    for node in &mut run.nodes {
        node.assert_alive();
    }
    done
}

fn campaign(crashes: Crashes) {
    let mut rows = Vec::new();
    for target in targets() {
        let started = Instant::now();
        let done = campaign_run(target, crashes);
        rows.push(format!(
            "| {target:?} | {crashes:?} | pass | {:.1} s | {done} |",
            started.elapsed().as_secs_f64()
        ));
        eprintln!("{}", rows.last().expect("row"));
    }
    eprintln!("{}", rows.join("\n"));
}

#[test]
#[ignore = "slow: two dozen real clusters; run with --ignored"]
fn every_fault_with_the_other_replicas_killed_one_at_a_time() {
    campaign(Crashes::OneAtATime);
}

#[test]
#[ignore = "slow: two dozen real clusters; run with --ignored"]
fn every_fault_with_the_other_replicas_killed_at_once() {
    campaign(Crashes::AllAtOnce);
}
