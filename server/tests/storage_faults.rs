//! A damaged disk on one replica never loses an acknowledged record.
//!
//! Three nodes, one `persisted` partition (W = 2, R = 2). A backup that
//! missed the last write is down; record `X` is acknowledged by the primary
//! and the other backup; that backup is SIGKILLed and its copy of `X` (the
//! newest frame of its record log) is damaged on disk, then the primary is
//! SIGKILLed. The two backups come back: the damaged one cannot tell a torn
//! write from a damaged acknowledged entry, so it must not help drop `X`.
//! The partition waits for the old primary (and `attention` says so); once
//! it returns, `X` is read back at its offset and the damaged replica holds
//! it again.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use strand_client::{Client, NewRecord, TopicSpec};
use strand_partition::faults::{Fault, damage_frame};
use strand_partition::layout::{partition_dir, segment_path};

/// `X`'s value: what the damaged frame must hold.
const X: &str = "the acknowledged record X";

fn data_dir(root: &Path, node: &common::Node) -> std::path::PathBuf {
    root.join(format!("node-{}", node.node))
}

/// Creates `s/t` (one `persisted` partition on three replicas), writes three
/// records, and returns its group.
async fn setup(client: &Client) -> u64 {
    client.create_stream("s").await.expect("create stream");
    let mut spec = TopicSpec::new("s", "t");
    spec.partition_count = 1;
    spec.replica_count = 3;
    spec.durability = Some(strand_client::Durability::Persisted);
    let groups = client.create_topic(spec).await.expect("create topic");
    let records = (0..3)
        .map(|index| NewRecord::new(format!("k{index}"), format!("v{index}")))
        .collect::<Vec<_>>();
    produce(client, records, 0).await;
    groups[0]
}

/// Produces `records`, retrying until acknowledged; checks their first offset.
async fn produce(client: &Client, records: Vec<NewRecord>, offset: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match client.produce("s", "t", 0, records.clone()).await {
            Ok(ack) => {
                assert_eq!(ack.offset_base, offset, "acknowledged at its offset");
                return;
            }
            Err(error) => {
                assert!(Instant::now() < deadline, "produce: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Damages the newest frame of the stopped node's record log, which must
/// be `X`'s prepare.
fn damage_newest_frame(root: &Path, node: &common::Node, group: u64, fault: Fault) {
    let dir = partition_dir(&data_dir(root, node), "s", "t", 0, group);
    let segment = segment_path(&dir, 0);
    let bytes = std::fs::read(&segment).expect("read the segment");
    let newest = *strand_partition::faults::frames(&bytes)
        .last()
        .expect("frames");
    let payload = &bytes[newest.payload_offset() as usize..newest.end() as usize];
    assert!(
        payload
            .windows(X.len())
            .any(|window| window == X.as_bytes()),
        "the newest frame is X's prepare"
    );
    damage_frame(&segment, 0, fault).expect("damage the frame");
}

/// Whether the group waits on every answering node that hosts it, with
/// `attention` naming it.
async fn waits_with_attention(client: &Client, group: u64) -> bool {
    let Ok(report) = client.attention().await else {
        return false;
    };
    report.entries().any(|(_, entry)| entry.group == group)
}

fn the_damaged_newest_entry_of_an_acknowledging_backup(fault: Fault) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = common::start_cluster(dir.path());
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(120);
    let client = runtime.block_on(common::connect(common::bootstrap(&nodes), deadline));
    let group = runtime.block_on(setup(&client));
    let primary = runtime.block_on(common::serving_primary(&client, group, None, deadline));
    let index_of = |id: u32| nodes.iter().position(|node| node.node == id).expect("node");
    let primary = index_of(primary);
    let backups: Vec<usize> = (0..nodes.len()).filter(|&at| at != primary).collect();
    let (behind, damaged) = (backups[0], backups[1]);

    nodes[behind].kill();
    runtime.block_on(produce(&client, vec![NewRecord::new("x", X)], 3));
    nodes[damaged].kill();
    damage_newest_frame(dir.path(), &nodes[damaged], group, fault);
    nodes[primary].kill();
    nodes[behind].start();
    nodes[damaged].start();

    // Without the old primary, no two replicas can say X was never had.
    let client = runtime.block_on(common::connect(
        vec![
            nodes[behind].client_address.clone(),
            nodes[damaged].client_address.clone(),
        ],
        deadline,
    ));
    common::wait_until("attention naming the waiting partition", 60, || {
        runtime.block_on(waits_with_attention(&client, group))
    });
    std::thread::sleep(Duration::from_secs(2));
    let status = runtime.block_on(common::group_status(&client, nodes[behind].node, group));
    assert!(
        status.is_some_and(|status| status.status != "normal" || status.high_watermark <= 3),
        "no view starts without X while its only holders are down or damaged"
    );

    let kind = if fault == Fault::CutAtFrame {
        "lost_tail"
    } else {
        "damaged_tail"
    };
    let damage_seen = common::metric_sum(
        &nodes[damaged],
        &format!("partition_storage_damage_total{{kind=\"{kind}\"}}"),
    );
    assert_eq!(damage_seen, 1.0, "the damaged or lost tail is counted");
    nodes[primary].start();
    let client = runtime.block_on(common::connect(common::bootstrap(&nodes), deadline));
    let read = runtime.block_on(common::read_partition(&client, "s", "t", 0, 4, deadline));
    assert_eq!(read.len(), 4);
    assert_eq!(
        read[3],
        (3, b"x".to_vec(), X.as_bytes().to_vec()),
        "X kept at 3"
    );
    runtime.block_on(produce(&client, vec![NewRecord::new("y", "after")], 4));
    let (damaged_node, primary_node) = (nodes[damaged].node, nodes[primary].node);
    common::wait_until("the damaged replica trusted and caught up", 60, || {
        let status = |node| runtime.block_on(common::group_status(&client, node, group));
        let (Some(damaged), Some(primary)) = (status(damaged_node), status(primary_node)) else {
            return false;
        };
        damaged.status == "normal" && !damaged.untrusted_log && damaged.op == primary.op
    });
    for node in &mut nodes {
        node.assert_alive();
    }
}

#[test]
fn a_flipped_payload_byte_in_the_newest_acknowledged_entry_loses_nothing() {
    the_damaged_newest_entry_of_an_acknowledging_backup(Fault::FlipPayload);
}

#[test]
fn a_flipped_header_byte_in_the_newest_acknowledged_entry_loses_nothing() {
    the_damaged_newest_entry_of_an_acknowledging_backup(Fault::FlipHeader);
}

#[test]
fn a_log_cut_short_inside_the_newest_acknowledged_entry_loses_nothing() {
    the_damaged_newest_entry_of_an_acknowledging_backup(Fault::Truncate);
}

/// The disk lost the newest acknowledged entry without a trace: the log
/// reads as ending one entry earlier. Only the durable mark says the
/// entry was there.
#[test]
fn a_newest_acknowledged_entry_lost_without_a_trace_loses_nothing() {
    the_damaged_newest_entry_of_an_acknowledging_backup(Fault::CutAtFrame);
}

/// A committed entry in the middle of one node's metadata log is damaged
/// while the node is stopped: the node starts, rebuilds its catalog below
/// the entry, repairs it from a peer and serves on (it used to exit at
/// every start).
#[test]
fn a_damaged_committed_metadata_entry_is_repaired_from_a_peer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = common::start_cluster(dir.path());
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(120);
    let client = runtime.block_on(common::connect(common::bootstrap(&nodes), deadline));
    runtime.block_on(async {
        for stream in ["a", "b", "c", "d", "e", "f"] {
            client.create_stream(stream).await.expect("create stream");
        }
    });
    let victim = 2;
    let victim_node = nodes[victim].node;
    // Acknowledged by the other two, the entries may not have reached the
    // victim yet: it must hold them all, committed, before it stops.
    common::wait_until("the victim's metadata replica caught up", 60, || {
        common::caught_up(&runtime, &client, victim_node, 0)
    });
    nodes[victim].terminate();
    let log = segment_path(&data_dir(dir.path(), &nodes[victim]).join("metadata"), 0);
    let count = strand_partition::faults::frames(&std::fs::read(&log).expect("read")).len();
    damage_frame(&log, count / 2, Fault::FlipPayload).expect("damage a metadata entry");
    nodes[victim].start();

    common::wait_until(
        "the victim's metadata replica repaired and caught up",
        60,
        || common::caught_up(&runtime, &client, victim_node, 0),
    );
    // It serves metadata from a whole catalog, and takes part in new ops.
    let only_victim = runtime.block_on(common::connect(
        vec![nodes[victim].client_address.clone()],
        deadline,
    ));
    runtime.block_on(async {
        only_victim
            .create_stream("g")
            .await
            .expect("create through the victim");
        let metadata = only_victim.metadata().await.expect("metadata");
        let names: Vec<&str> = metadata.streams.iter().map(String::as_str).collect();
        for name in ["a", "b", "c", "d", "e", "f", "g"] {
            assert!(names.contains(&name), "{name} in {names:?}");
        }
    });
    for node in &mut nodes {
        node.assert_alive();
    }
}
