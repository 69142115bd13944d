//! **Pure**: the soak's samples and its verdict. A soak runs a set load for a
//! set time and samples it every `--sample-secs`: the records acknowledged
//! in the window, and each node's bytes on disk. It passes when, after a
//! short warm-up, throughput stays within [`THROUGHPUT_TOLERANCE`] of its
//! median and no node's partitions ever hold more than retention allows
//! ([`RetentionLimit::partition_bytes_max`] per partition).
//!
//! The samples are taken by [`crate::soak_sampler`]; "nothing lost" is the
//! read-back's verdict ([`crate::verify`]), as in every run.

use std::fmt::Write;
use std::time::Duration;

use serde::Serialize;

use crate::retention::RetentionLimit;

/// Samples a soak takes at least (a shorter run has no steady state to judge).
pub const SOAK_SAMPLES_MIN: u32 = 3;

/// Most warm-up samples, left out of the throughput check.
pub const WARM_UP_SAMPLES_MAX: u32 = 2;

/// The warm-up is at most this fraction of the samples.
pub const WARM_UP_FRACTION: f64 = 0.2;

/// How far a judged sample's throughput may stray from their median (±25%).
pub const THROUGHPUT_TOLERANCE: f64 = 0.25;

/// When a soak samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoakPlan {
    /// The length of one sample's window.
    pub sample_period: Duration,
    /// Whole windows in the run (a shorter tail at the end is not sampled).
    pub samples: u32,
}

/// One node's bytes on disk at a sample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeDisk {
    /// The node.
    pub node: u32,
    /// Every file under its data directory (`None`: it could not be read).
    pub data_bytes: Option<u64>,
    /// Every file under the benched topic's partition directories
    /// (`<data>/partitions/<stream>/<topic>/`; `None`: unreadable).
    pub partition_bytes: Option<u64>,
    /// Each partition's directory (`<partition>-g<group>`), by partition.
    pub per_partition_bytes: Vec<Option<u64>>,
}

/// One partition's offsets at a sample, as its primary answered a fetch at
/// offset 0 (`None`: the fetch failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PartitionOffsets {
    /// The partition.
    pub partition: u32,
    /// Its earliest retained offset.
    pub earliest_offset: Option<u64>,
    /// One past its last committed offset.
    pub high_watermark: Option<u64>,
}

/// One sample of a soak: the window that ended at `end_secs`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SoakSample {
    /// 1-based.
    pub sample: u32,
    /// When the window ended, in seconds since the load started.
    pub end_secs: f64,
    /// The window's length in seconds.
    pub window_secs: f64,
    /// Records acknowledged in the window.
    pub acknowledged: u64,
    /// Records whose produce failed in the window.
    pub failed: u64,
    /// Payload megabytes (10^6 bytes) acknowledged in the window.
    pub megabytes: f64,
    /// Acknowledged records per second over the window.
    pub records_per_sec: f64,
    /// Payload megabytes per second over the window.
    pub megabytes_per_sec: f64,
    /// Each node's bytes on disk at the window's end.
    pub nodes: Vec<NodeDisk>,
    /// Each partition's earliest offset and high watermark then.
    pub partitions: Vec<PartitionOffsets>,
}

impl SoakSample {
    /// The sample's counts: `acknowledged` and `failed` records of
    /// `message_size` value bytes in a window of `window_secs` ending at
    /// `end_secs`; disk and offsets are added by the caller.
    pub fn counted(
        sample: u32,
        end_secs: f64,
        window_secs: f64,
        (acknowledged, failed): (u64, u64),
        message_size: usize,
    ) -> SoakSample {
        assert!(sample >= 1);
        assert!(window_secs > 0.0, "window of {window_secs} s");
        let megabytes = acknowledged as f64 * message_size as f64 / 1e6;
        SoakSample {
            sample,
            end_secs,
            window_secs,
            acknowledged,
            failed,
            megabytes,
            records_per_sec: acknowledged as f64 / window_secs,
            megabytes_per_sec: megabytes / window_secs,
            nodes: Vec::new(),
            partitions: Vec::new(),
        }
    }

    /// The line printed while the soak runs.
    pub fn line(&self) -> String {
        let mut line = format!(
            "soak sample {} ({:.0}..{:.0} s): {:.0} msgs/s, {:.1} MB/s, {} failed | partition MiB",
            self.sample,
            self.end_secs - self.window_secs,
            self.end_secs,
            self.records_per_sec,
            self.megabytes_per_sec,
            self.failed
        );
        for node in &self.nodes {
            let _ = write!(line, " n{} {}", node.node, mebibytes(node.partition_bytes));
        }
        line.push_str(" | data MiB");
        for node in &self.nodes {
            let _ = write!(line, " n{} {}", node.node, mebibytes(node.data_bytes));
        }
        line.push_str(" | earliest");
        for partition in &self.partitions {
            let offset = |offset: Option<u64>| offset.map_or("?".to_owned(), |o| o.to_string());
            let _ = write!(
                line,
                " p{} {} (hw {})",
                partition.partition,
                offset(partition.earliest_offset),
                offset(partition.high_watermark)
            );
        }
        line
    }
}

fn mebibytes(bytes: Option<u64>) -> String {
    bytes.map_or("?".to_owned(), |bytes| {
        format!("{:.1}", bytes as f64 / f64::from(1 << 20))
    })
}

/// The throughput check: every sample after the warm-up within
/// ±[`THROUGHPUT_TOLERANCE`] of their median.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputVerdict {
    /// Samples judged (those after the warm-up).
    pub judged_samples: u32,
    /// Their median, acknowledged records per second.
    pub median_records_per_sec: f64,
    /// The lowest and highest judged sample.
    pub lowest_records_per_sec: f64,
    /// See `lowest_records_per_sec`.
    pub highest_records_per_sec: f64,
    /// The band allowed: `median × (1 ± tolerance)`.
    pub allowed_records_per_sec: (f64, f64),
    /// Judged samples outside it (1-based sample numbers).
    pub outside: Vec<u32>,
    /// True when there were samples to judge, their median is above 0, and
    /// none is outside the band.
    pub flat: bool,
}

/// A node's partition bytes at one sample, above the bound (or the highest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DiskReading {
    /// 1-based sample number.
    pub sample: u32,
    /// The node.
    pub node: u32,
    /// Its partition bytes then.
    pub partition_bytes: u64,
}

/// The disk check: no node's partition bytes ever above the bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiskVerdict {
    /// The topic's limit, if it has one (without one, disk grows by design
    /// and is not judged).
    pub limit: Option<RetentionLimit>,
    /// The most partition bytes a node may hold: `partition_bytes_max` of
    /// the limit × partitions.
    pub node_partition_bytes_max: Option<u64>,
    /// The highest reading of any node at any sample.
    pub highest: Option<DiskReading>,
    /// Readings above the bound (at most [`crate::verify::EXAMPLES_MAX`]).
    pub over: Vec<DiskReading>,
    /// Readings above the bound, all counted.
    pub over_count: u32,
    /// Readings that could not be taken (a directory that could not be read).
    pub unreadable: u32,
    /// True when judged and every reading was taken and within the bound.
    pub within: bool,
}

/// The soak's result: its samples and both checks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SoakReport {
    /// The length of a sample's window.
    pub sample_secs: f64,
    /// Samples left out of the throughput check.
    pub warm_up_samples: u32,
    /// Every sample, in order.
    pub samples: Vec<SoakSample>,
    /// The throughput check.
    pub throughput: ThroughputVerdict,
    /// The disk check.
    pub disk: DiskVerdict,
}

impl SoakReport {
    /// Judges `samples` of a soak over `partitions` partitions of a topic
    /// limited by `limit` (if it is).
    pub fn judge(
        plan: SoakPlan,
        limit: Option<RetentionLimit>,
        partitions: u32,
        samples: Vec<SoakSample>,
    ) -> SoakReport {
        assert!(partitions >= 1);
        let warm_up_samples = warm_up_samples(plan.samples);
        let throughput = judge_throughput(&samples, warm_up_samples);
        let disk = judge_disk(&samples, limit, partitions);
        SoakReport {
            sample_secs: plan.sample_period.as_secs_f64(),
            warm_up_samples,
            samples,
            throughput,
            disk,
        }
    }

    /// True when throughput was flat and the disk within its bound (or not
    /// judged, without a limit).
    pub fn passed(&self) -> bool {
        self.throughput.flat && (self.disk.limit.is_none() || self.disk.within)
    }
}

/// Samples left out of the throughput check: the first
/// [`WARM_UP_SAMPLES_MAX`], or [`WARM_UP_FRACTION`] of the run, whichever is
/// fewer.
pub fn warm_up_samples(samples: u32) -> u32 {
    let fraction = (f64::from(samples) * WARM_UP_FRACTION).floor() as u32;
    WARM_UP_SAMPLES_MAX.min(fraction)
}

/// Every sample after the first `warm_up` within ±[`THROUGHPUT_TOLERANCE`]
/// of their median.
pub fn judge_throughput(samples: &[SoakSample], warm_up: u32) -> ThroughputVerdict {
    let judged: Vec<&SoakSample> = samples.iter().skip(warm_up as usize).collect();
    let mut rates: Vec<f64> = judged.iter().map(|sample| sample.records_per_sec).collect();
    rates.sort_by(f64::total_cmp);
    let median = median_of_sorted(&rates);
    let allowed = (
        median * (1.0 - THROUGHPUT_TOLERANCE),
        median * (1.0 + THROUGHPUT_TOLERANCE),
    );
    let outside: Vec<u32> = judged
        .iter()
        .filter(|sample| !(allowed.0..=allowed.1).contains(&sample.records_per_sec))
        .map(|sample| sample.sample)
        .collect();
    let flat = !judged.is_empty() && median > 0.0 && outside.is_empty();
    ThroughputVerdict {
        judged_samples: judged.len() as u32,
        median_records_per_sec: median,
        lowest_records_per_sec: rates.first().copied().unwrap_or(0.0),
        highest_records_per_sec: rates.last().copied().unwrap_or(0.0),
        allowed_records_per_sec: allowed,
        outside,
        flat,
    }
}

/// No node's partition bytes above `limit`'s bound × `partitions` at any
/// sample (warm-up included: the bound holds from the start).
pub fn judge_disk(
    samples: &[SoakSample],
    limit: Option<RetentionLimit>,
    partitions: u32,
) -> DiskVerdict {
    let bound = limit.map(|limit| {
        limit
            .partition_bytes_max()
            .saturating_mul(u64::from(partitions))
    });
    let mut verdict = DiskVerdict {
        limit,
        node_partition_bytes_max: bound,
        highest: None,
        over: Vec::new(),
        over_count: 0,
        unreadable: 0,
        within: false,
    };
    let mut readings = 0;
    for sample in samples {
        for node in &sample.nodes {
            let Some(partition_bytes) = node.partition_bytes else {
                verdict.unreadable += 1;
                continue;
            };
            readings += 1;
            let reading = DiskReading {
                sample: sample.sample,
                node: node.node,
                partition_bytes,
            };
            if verdict
                .highest
                .is_none_or(|highest| partition_bytes > highest.partition_bytes)
            {
                verdict.highest = Some(reading);
            }
            if bound.is_some_and(|bound| partition_bytes > bound) {
                verdict.over_count += 1;
                if verdict.over.len() < crate::verify::EXAMPLES_MAX {
                    verdict.over.push(reading);
                }
            }
        }
    }
    verdict.within =
        bound.is_some() && readings > 0 && verdict.unreadable == 0 && verdict.over_count == 0;
    verdict
}

/// The median of ascending `values` (0 when empty).
fn median_of_sorted(values: &[f64]) -> f64 {
    match values.len() {
        0 => 0.0,
        len if len % 2 == 1 => values[len / 2],
        len => (values[len / 2 - 1] + values[len / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn sample(number: u32, records_per_sec: f64, partition_mib: &[u64]) -> SoakSample {
        let acknowledged = (records_per_sec * 60.0) as u64;
        let mut sample = SoakSample::counted(
            number,
            60.0 * f64::from(number),
            60.0,
            (acknowledged, 0),
            1024,
        );
        sample.nodes = (1..)
            .zip(partition_mib)
            .map(|(node, mib)| NodeDisk {
                node,
                data_bytes: Some(mib * MIB + MIB),
                partition_bytes: Some(mib * MIB),
                per_partition_bytes: vec![Some(mib * MIB)],
            })
            .collect();
        sample
    }

    fn plan(samples: u32) -> SoakPlan {
        SoakPlan {
            sample_period: Duration::from_secs(60),
            samples,
        }
    }

    /// 1 GiB with 64 MiB segments: 1,218 MiB per partition.
    fn one_gibibyte() -> Option<RetentionLimit> {
        Some(RetentionLimit {
            retention_bytes: 1 << 30,
            segment_bytes: 64 * MIB,
        })
    }

    #[test]
    fn the_warm_up_is_two_samples_or_a_fifth_of_the_run_whichever_is_fewer() {
        assert_eq!(warm_up_samples(30), 2);
        assert_eq!(warm_up_samples(10), 2);
        assert_eq!(warm_up_samples(9), 1);
        assert_eq!(warm_up_samples(4), 0);
    }

    #[test]
    fn a_steady_soak_under_its_limit_passes() {
        let mut samples = vec![sample(1, 5_000.0, &[300]), sample(2, 30_000.0, &[900])];
        for number in 3..=10 {
            let rate = 30_000.0 + f64::from(number % 3) * 2_000.0;
            samples.push(sample(number, rate, &[1_200, 1_150, 1_210]));
        }
        let report = SoakReport::judge(plan(10), one_gibibyte(), 1, samples);
        assert!(report.passed(), "{report:#?}");
        assert_eq!(report.warm_up_samples, 2, "the slow start is not judged");
        assert_eq!(report.throughput.judged_samples, 8);
        assert_eq!(report.throughput.median_records_per_sec, 32_000.0);
        let highest = report.disk.highest.expect("readings");
        assert_eq!((highest.sample, highest.node), (3, 3));
    }

    #[test]
    fn a_sample_a_quarter_off_the_median_fails_the_throughput_check() {
        let mut samples: Vec<SoakSample> = (1..=10)
            .map(|number| sample(number, 20_000.0, &[100]))
            .collect();
        samples[6] = sample(7, 14_900.0, &[100]);
        samples[8] = sample(9, 25_000.0, &[100]);
        let report = SoakReport::judge(plan(10), one_gibibyte(), 1, samples);
        assert_eq!(report.throughput.outside, vec![7], "25% above is allowed");
        assert!(!report.throughput.flat);
        assert!(report.disk.within);
        assert!(!report.passed());
    }

    #[test]
    fn a_soak_that_acknowledged_nothing_is_not_flat() {
        let samples: Vec<SoakSample> = (1..=5).map(|number| sample(number, 0.0, &[0])).collect();
        let verdict = judge_throughput(&samples, 1);
        assert!(!verdict.flat, "{verdict:?}");
        assert!(!judge_throughput(&[], 0).flat, "no samples, nothing judged");
    }

    #[test]
    fn a_node_over_the_bound_once_fails_the_disk_check() {
        let bound_mib = 1024 + 4 * 64 + 2;
        let samples = vec![
            sample(1, 1_000.0, &[bound_mib, bound_mib]),
            sample(2, 1_000.0, &[bound_mib, bound_mib + 1]),
            sample(3, 1_000.0, &[bound_mib, bound_mib]),
        ];
        let verdict = judge_disk(&samples, one_gibibyte(), 1);
        assert_eq!(verdict.node_partition_bytes_max, Some(bound_mib * MIB));
        assert_eq!(verdict.over_count, 1);
        assert_eq!(
            verdict.over,
            vec![DiskReading {
                sample: 2,
                node: 2,
                partition_bytes: (bound_mib + 1) * MIB
            }]
        );
        assert!(!verdict.within);
        let two_partitions = judge_disk(&samples, one_gibibyte(), 2);
        assert!(two_partitions.within, "the bound is per partition");
    }

    #[test]
    fn an_unreadable_directory_fails_the_disk_check() {
        let mut samples = vec![sample(1, 1_000.0, &[10, 10])];
        samples[0].nodes[1].partition_bytes = None;
        let verdict = judge_disk(&samples, one_gibibyte(), 1);
        assert_eq!(verdict.unreadable, 1);
        assert!(!verdict.within);
    }

    #[test]
    fn without_a_limit_the_disk_is_not_judged() {
        let samples: Vec<SoakSample> = (1..=3)
            .map(|number| sample(number, 1_000.0, &[u64::from(number) * 5_000]))
            .collect();
        let report = SoakReport::judge(plan(3), None, 1, samples);
        assert_eq!(report.disk.node_partition_bytes_max, None);
        assert!(!report.disk.within);
        assert!(report.passed(), "{report:#?}");
    }

    #[test]
    fn a_sample_line_names_every_node_and_partition() {
        let mut sample = sample(3, 20_000.0, &[128, 129]);
        sample.partitions = vec![PartitionOffsets {
            partition: 0,
            earliest_offset: Some(9_000),
            high_watermark: None,
        }];
        let line = sample.line();
        assert!(line.starts_with("soak sample 3 (120..180 s): 20000 msgs/s, 20.5 MB/s"));
        assert!(line.contains("partition MiB n1 128.0 n2 129.0"), "{line}");
        assert!(line.contains("earliest p0 9000 (hw ?)"), "{line}");
    }
}
