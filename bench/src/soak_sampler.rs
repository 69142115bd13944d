//! The soak's sampler: at the end of every window it reads the acks from the
//! load's live counters, walks each node's data directory for its bytes on
//! disk, and asks each partition's primary for its earliest offset and high
//! watermark (a fetch at offset 0 of one byte: its reply, or the
//! `OffsetOutOfRange` that refuses it, names both).
//!
//! Where a node keeps a partition (`strand-partition`'s `layout.rs`):
//! `<data>/partitions/<stream>/<topic>/<partition>-g<group>/`, beside its
//! quarantined copies and state-transfer imports (`<partition>-g<group>.*`),
//! which the topic's total counts too. Bytes are file lengths, summed.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use strand_client::{Client, ClientError};
use tokio::time::Instant;

use crate::error::BenchError;
use crate::load::{Live, Load};
use crate::soak::{NodeDisk, PartitionOffsets, SoakPlan, SoakSample};

/// Most directories a walk descends into (a node's data directory holds a
/// few per partition): a bound against a runaway tree or a link loop.
pub const WALK_DIRECTORIES_MAX: usize = 1_000_000;

/// What the sampler reads: the topic, and each node's data directory.
#[derive(Debug, Clone)]
pub struct SoakProbe {
    /// A client of the cluster, for the partitions' offsets.
    pub client: Client,
    /// The benched topic's load (stream, topic, partitions, message size).
    pub load: Arc<Load>,
    /// Each partition's group id, by partition.
    pub groups: Vec<u64>,
    /// `(node id, data directory)`, by node id.
    pub nodes: Vec<(u32, PathBuf)>,
}

/// Takes `plan.samples` samples, one at the end of each window since
/// `start`, handing each to `announce` (if given) as it is taken.
pub async fn sample(
    probe: SoakProbe,
    plan: SoakPlan,
    live: Arc<Live>,
    start: Instant,
    announce: Option<Box<dyn Fn(String) + Send>>,
) -> Result<Vec<SoakSample>, BenchError> {
    assert!(plan.samples >= 1);
    let mut samples = Vec::with_capacity(plan.samples as usize);
    let mut counted_before = (0, 0);
    let mut window_start = start;
    for number in 1..=plan.samples {
        tokio::time::sleep_until(start + plan.sample_period * number).await;
        let now = Instant::now();
        let counted = (
            live.acknowledged.load(Ordering::Relaxed),
            live.failed.load(Ordering::Relaxed),
        );
        let in_window = (
            counted.0.saturating_sub(counted_before.0),
            counted.1.saturating_sub(counted_before.1),
        );
        let mut sample = SoakSample::counted(
            number,
            now.duration_since(start).as_secs_f64(),
            now.duration_since(window_start).as_secs_f64().max(1e-3),
            in_window,
            probe.load.message_size,
        );
        (counted_before, window_start) = (counted, now);
        sample.nodes = disk_usage(&probe).await?;
        sample.partitions = partition_offsets(&probe).await;
        if let Some(announce) = &announce {
            announce(sample.line());
        }
        samples.push(sample);
    }
    assert_eq!(samples.len(), plan.samples as usize);
    Ok(samples)
}

/// Every node's bytes on disk, walked on a blocking thread.
async fn disk_usage(probe: &SoakProbe) -> Result<Vec<NodeDisk>, BenchError> {
    let nodes = probe.nodes.clone();
    let topic_dir = Path::new("partitions")
        .join(&probe.load.stream)
        .join(&probe.load.topic);
    let groups = probe.groups.clone();
    tokio::task::spawn_blocking(move || {
        nodes
            .iter()
            .map(|(node, data_dir)| node_disk(*node, data_dir, &data_dir.join(&topic_dir), &groups))
            .collect()
    })
    .await
    .map_err(|error| BenchError::Cluster(format!("the disk walk failed: {error}")))
}

/// One node's bytes: its whole data directory, the topic's directory, and
/// each partition's directory (`None` where a walk failed).
fn node_disk(node: u32, data_dir: &Path, topic_dir: &Path, groups: &[u64]) -> NodeDisk {
    let per_partition_bytes = (0..)
        .zip(groups)
        .map(|(partition, group): (u32, &u64)| {
            directory_bytes(&topic_dir.join(format!("{partition}-g{group}"))).ok()
        })
        .collect();
    NodeDisk {
        node,
        data_bytes: directory_bytes(data_dir).ok(),
        partition_bytes: directory_bytes(topic_dir).ok(),
        per_partition_bytes,
    }
}

/// The summed length of every file under `root` (0 when `root` does not
/// exist). Files and directories that vanish during the walk (a segment
/// dropped by retention) count 0; links are not followed.
pub fn directory_bytes(root: &Path) -> io::Result<u64> {
    let mut bytes = 0;
    let mut pending = vec![root.to_owned()];
    let mut walked = 0;
    while let Some(dir) = pending.pop() {
        walked += 1;
        if walked > WALK_DIRECTORIES_MAX {
            return Err(io::Error::other(format!(
                "more than {WALK_DIRECTORIES_MAX} directories under {}",
                root.display()
            )));
        }
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(error) => return Err(error),
        };
        for entry in entries {
            let entry = entry?;
            let metadata = match entry.metadata() {
                Ok(metadata) => metadata,
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            if metadata.is_dir() {
                pending.push(entry.path());
            } else if metadata.is_file() {
                bytes += metadata.len();
            }
        }
    }
    Ok(bytes)
}

/// Each partition's earliest offset and high watermark, from its primary.
async fn partition_offsets(probe: &SoakProbe) -> Vec<PartitionOffsets> {
    let load = &probe.load;
    let mut offsets = Vec::with_capacity(load.partitions as usize);
    for partition in 0..load.partitions {
        let fetched = probe
            .client
            .fetch(&load.stream, &load.topic, partition, 0, 1, 0)
            .await;
        let (earliest_offset, high_watermark) = match fetched {
            Ok(fetched) => (Some(fetched.log_start_offset), Some(fetched.high_watermark)),
            Err(ClientError::OffsetOutOfRange {
                log_start_offset,
                high_watermark,
                ..
            }) => (Some(log_start_offset), Some(high_watermark)),
            Err(_) => (None, None),
        };
        offsets.push(PartitionOffsets {
            partition,
            earliest_offset,
            high_watermark,
        });
    }
    offsets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_weighs_every_file_below_it() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let segment = dir.path().join("partitions/bench/t/0-g7/records");
        std::fs::create_dir_all(&segment).expect("dirs");
        std::fs::write(segment.join("00000000000000000000.log"), vec![0; 5_000]).expect("a file");
        std::fs::write(segment.join("00000000000000000000.index"), vec![0; 300]).expect("a file");
        std::fs::write(dir.path().join("wal"), vec![0; 1_000]).expect("a file");
        let topic_dir = dir.path().join("partitions/bench/t");
        let node = node_disk(2, dir.path(), &topic_dir, &[7, 8]);
        assert_eq!(node.node, 2);
        assert_eq!(node.data_bytes, Some(6_300));
        assert_eq!(node.partition_bytes, Some(5_300));
        assert_eq!(
            node.per_partition_bytes,
            vec![Some(5_300), Some(0)],
            "a partition this node does not host weighs nothing"
        );
        let missing = directory_bytes(&dir.path().join("nowhere")).expect("absent is 0");
        assert_eq!(missing, 0);
    }
}
