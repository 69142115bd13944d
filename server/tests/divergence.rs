//! A replica whose partition applied history the cluster never chose: when
//! it rejoins, the view it adopts contradicts what it applied, so the node
//! moves that partition aside to `.fenced.0`, rebuilds it by a state
//! transfer over the replica bus, counts it in
//! `partition_applied_divergence_total`, and keeps serving its other
//! partitions throughout.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use strand_client::{Client, NewRecord, TopicSpec};
use strand_partition::fixtures::produce;
use strand_partition::layout::{fenced_path, partition_dir};
use strand_partition::{FileDisk, Partition, PartitionConfig};
use strand_wal::{BackendChoice, Wal, WalConfig};
use strand_wire::{CommandHeader, Durability, Msg};

/// Records produced to each partition before the divergence.
const RECORDS: u64 = 300;

/// Ops of the stopped replica's log rewritten with other bodies.
const DIVERGENT_OPS: u64 = 5;

/// Produces `RECORDS` records to `partition`, ten per batch (one op each),
/// each batch acknowledged before the next; a topic the answering node does
/// not know yet is retried.
async fn produce_records(client: &Client, partition: u32, first: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for batch in (first..first + RECORDS).collect::<Vec<_>>().chunks(10) {
        let records: Vec<NewRecord> = batch
            .iter()
            .map(|index| NewRecord::new(format!("k{index}"), format!("v{index}")))
            .collect();
        loop {
            match client.produce("s", "t", partition, records.clone()).await {
                Ok(_) => break,
                Err(error) => {
                    assert!(Instant::now() < deadline, "produce: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// Rewrites the last `DIVERGENT_OPS` committed ops of the (stopped) replica's
/// partition at `dir` with other record bodies, chained and committed: a
/// history it applied that no other replica holds.
fn diverge(dir: &Path) -> u64 {
    let wal = Wal::start(WalConfig {
        backend: BackendChoice::Std,
        ..WalConfig::default()
    })
    .expect("start a WAL");
    let (mut partition, _) = Partition::open(
        FileDisk::new(wal.clone()),
        dir,
        PartitionConfig {
            durability: Durability::Persisted,
            ..PartitionConfig::default()
        },
    )
    .expect("open the stopped replica's partition");
    // Every op it holds was acknowledged, so committed: it applies them all.
    let commit = partition.op();
    assert!(commit > DIVERGENT_OPS, "the replica holds {commit} ops");
    let first = commit - DIVERGENT_OPS + 1;
    let originals: Vec<_> = (first..=commit)
        .map(|op| {
            partition
                .read_prepare(op)
                .expect("read")
                .expect("a committed op is readable")
        })
        .collect();
    let mut fields = partition.superblock().durable.clone();
    fields.commit = first - 1;
    let mut done = Vec::new();
    partition
        .persist_state(fields.clone(), 1)
        .expect("lower the commit");
    partition.flush(&mut done).expect("flush");
    partition
        .cut(strand_partition::CutPoint {
            op: first - 1,
            cursor_tail: None,
        })
        .expect("cut");
    let mut parent = partition
        .checksum(first - 1)
        .expect("the op below is known");
    for original in originals {
        let mut header = *original.header();
        let other = produce(
            header.op.get(),
            parent,
            header.offset_base.get(),
            header.record_count.get(),
            48,
        );
        header.parent.set(parent);
        let divergent = Msg::new(header, other.body().clone());
        assert_ne!(divergent.header().checksum(), original.header().checksum());
        parent = divergent.header().checksum();
        partition
            .write_prepare(divergent)
            .expect("append a divergent op");
    }
    partition.flush(&mut done).expect("flush");
    fields.commit = commit;
    partition
        .persist_state(fields, 2)
        .expect("commit the divergent ops");
    partition.flush(&mut done).expect("flush");
    assert_eq!(partition.op(), commit);
    partition.close().expect("close");
    wal.shutdown().expect("stop the WAL");
    first
}

#[test]
fn a_divergent_replica_is_fenced_and_rebuilt_by_state_transfer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = common::start_cluster(dir.path());
    let bootstrap = common::bootstrap(&nodes);
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(120);
    let (client, groups) = runtime.block_on(async {
        let client = common::connect(bootstrap, deadline).await;
        client.create_stream("s").await.expect("create stream");
        let mut spec = TopicSpec::new("s", "t");
        spec.partition_count = 2;
        spec.replica_count = 3;
        let groups = client.create_topic(spec).await.expect("create topic");
        produce_records(&client, 0, 0).await;
        produce_records(&client, 1, 0).await;
        (client, groups)
    });

    // Node 3 stops; its copy of partition 0 now holds ops nobody else has.
    let victim = 2;
    nodes[victim].kill();
    let victim_data = dir.path().join(format!("node-{}", nodes[victim].node));
    let partition_0 = partition_dir(&victim_data, "s", "t", 0, groups[0]);
    let diverged_at = diverge(&partition_0);

    nodes[victim].start();
    let wait_for = |what: &str, check: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !check() {
            assert!(
                Instant::now() < deadline,
                "{what} did not happen; node log: {}",
                std::fs::read_to_string(dir.path().join("node-3.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let victim_node = &nodes[victim];
    wait_for("a counted divergence", &|| {
        common::metric_sum(victim_node, "partition_applied_divergence_total") >= 1.0
    });
    wait_for("an installed state transfer", &|| {
        common::metric_sum(victim_node, "state_transfers_installed_total") >= 1.0
    });
    assert!(
        fenced_path(&partition_0, 0).is_dir(),
        "the divergent partition is kept at .fenced.0"
    );
    assert!(
        !fenced_path(&partition_dir(&victim_data, "s", "t", 1, groups[1]), 0).exists(),
        "the other partition is untouched"
    );

    // The cluster and the node keep serving both partitions.
    runtime.block_on(async {
        produce_records(&client, 0, RECORDS).await;
        produce_records(&client, 1, RECORDS).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        for partition in [0, 1] {
            let read = common::read_partition(
                &client,
                "s",
                "t",
                partition,
                (2 * RECORDS) as usize,
                deadline,
            )
            .await;
            for (index, (offset, key, value)) in read.iter().enumerate() {
                assert_eq!(*offset, index as u64);
                assert_eq!(key, &format!("k{index}").into_bytes());
                assert_eq!(value, &format!("v{index}").into_bytes());
            }
        }
    });
    // The rebuilt replica follows the group again: it commits what the
    // others commit.
    let commit_of = |node: &common::Node| {
        common::metric_sum(
            node,
            &format!("partition_commit_op{{group=\"{}\"}}", groups[0]),
        )
    };
    let (victim_node, others) = (&nodes[victim], &nodes[..victim]);
    wait_for("the rebuilt replica catching up", &|| {
        let highest = others.iter().map(commit_of).fold(0.0, f64::max);
        highest > 0.0 && commit_of(victim_node) == highest
    });
    nodes[victim].assert_alive();
    assert!(diverged_at > 1);
}
