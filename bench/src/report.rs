//! The bench's result: one value, printed as a summary table, written as
//! JSON, drawn as a plot.

use std::fmt::Write;

use serde::Serialize;

use crate::failover::{FailoverReport, Fault};
use crate::latency::{LatencySummary, format_us};
use crate::retention::SEGMENTS_OVER_LIMIT_MAX;
use crate::soak::SoakReport;
use crate::timeline::SecondRow;
use crate::verify::Verification;

/// What was run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunConfig {
    /// `local` (processes the bench started) or `external`.
    pub cluster: String,
    /// Nodes in the cluster.
    pub nodes: u32,
    /// Whether the clients spoke TLS to the nodes (and the nodes mutual
    /// TLS to each other, on a local cluster).
    pub tls: bool,
    /// Replicas per partition.
    pub replicas: u8,
    /// The topic's durability (`default`: the cluster's).
    pub durability: String,
    /// Producers.
    pub producers: u32,
    /// Consumers.
    pub consumers: u32,
    /// The consumer group the consumers were members of (`--group`);
    /// `None`: each tailed fixed partitions.
    pub group: Option<String>,
    /// Partitions.
    pub partitions: u32,
    /// Value bytes per record.
    pub message_size: usize,
    /// Records per batch.
    pub batch: u32,
    /// Batches in flight per partition and producer.
    pub in_flight: usize,
    /// Batch linger.
    pub linger_ms: u64,
    /// How a producer's consecutive records went over the partitions.
    pub spread: crate::keys::Spread,
    /// Planned duration, if the run was timed.
    pub duration_secs: Option<f64>,
    /// Planned record count, if the run was counted.
    pub messages: Option<u64>,
    /// Target rate, if any.
    pub rate: Option<f64>,
    /// The topic's size limit per partition, if it has one.
    pub retention_bytes: Option<u64>,
    /// The topic's segment size, if the bench set one (else the node's).
    pub segment_bytes: Option<u64>,
    /// Cores of the machine the bench ran on.
    pub cores: usize,
}

/// Throughput of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Throughput {
    /// Records.
    pub records: u64,
    /// Payload megabytes (10^6 bytes of values).
    pub megabytes: f64,
    /// Seconds they took.
    pub seconds: f64,
    /// Records per second.
    pub records_per_sec: f64,
    /// Payload megabytes per second.
    pub megabytes_per_sec: f64,
}

impl Throughput {
    /// `records` of `bytes` payload bytes in `seconds`.
    pub fn new(records: u64, bytes: u64, seconds: f64) -> Throughput {
        let seconds = seconds.max(1e-9);
        Throughput {
            records,
            megabytes: bytes as f64 / 1e6,
            seconds,
            records_per_sec: records as f64 / seconds,
            megabytes_per_sec: bytes as f64 / 1e6 / seconds,
        }
    }
}

/// What consumers read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConsumeReport {
    /// Records and bytes read while the load ran (and drained).
    pub throughput: Throughput,
    /// Record timestamp (set at `send`) to the poll that returned it.
    pub end_to_end_latency: LatencySummary,
}

/// The whole result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// What was run.
    pub config: RunConfig,
    /// Acknowledged records, from the start of the load to the last ack.
    pub produced: Throughput,
    /// Records whose produce failed (outcome unknown or refused).
    pub produce_failed: u64,
    /// `send` to acknowledgement, per record.
    pub produce_ack_latency: LatencySummary,
    /// Consumers, if any ran.
    pub consumed: Option<ConsumeReport>,
    /// The failover, if one was run.
    pub failover: Option<FailoverReport>,
    /// The read-back, unless skipped.
    pub verification: Option<Verification>,
    /// The soak's samples and verdict, if this was a soak.
    pub soak: Option<SoakReport>,
    /// Per second of the load.
    pub timeline: Vec<SecondRow>,
    /// Local nodes that exited on their own, and how.
    pub node_exits: Vec<String>,
    /// The first errors seen (produce, consume), readable.
    pub errors: Vec<String>,
}

impl Report {
    /// True when the verification (if run) passed, the failover (if run)
    /// took exactly one view change, the soak (if run) stayed flat, and no
    /// node exited on its own.
    pub fn passed(&self) -> bool {
        self.verification.as_ref().is_none_or(Verification::passed)
            && self
                .failover
                .as_ref()
                .is_none_or(FailoverReport::view_changes_ok)
            && self.soak.as_ref().is_none_or(SoakReport::passed)
            && self.node_exits.is_empty()
    }

    /// The summary table printed at the end of a run.
    pub fn summary(&self) -> String {
        let mut rows: Vec<(String, String)> = Vec::new();
        let mut row = |name: &str, value: String| rows.push((name.to_owned(), value));
        config_rows(&self.config, &mut row);
        let produced = &self.produced;
        row(
            "produced",
            format!(
                "{} records in {:.1} s ({} failed)",
                produced.records, produced.seconds, self.produce_failed
            ),
        );
        row(
            "throughput",
            format!(
                "{:.0} msgs/s, {:.1} MB/s",
                produced.records_per_sec, produced.megabytes_per_sec
            ),
        );
        row(
            "produce-ack latency",
            latency_line(&self.produce_ack_latency),
        );
        if let Some(consumed) = &self.consumed {
            row(
                "consumed",
                consumed_line(&self.config, &consumed.throughput),
            );
            row(
                "end-to-end latency",
                latency_line(&consumed.end_to_end_latency),
            );
        }
        if let Some(failover) = &self.failover {
            failover_rows(failover, &mut row);
        }
        if let Some(soak) = &self.soak {
            soak_rows(soak, &mut row);
        }
        match &self.verification {
            Some(verification) => row("verification", verification_line(verification)),
            None => row("verification", "skipped (--no-verify)".to_owned()),
        }
        for exit in &self.node_exits {
            row("node exited", exit.clone());
        }
        for error in &self.errors {
            row("error", error.clone());
        }
        row(
            "result",
            if self.passed() { "PASS" } else { "FAIL" }.to_owned(),
        );
        table(&rows)
    }
}

fn config_rows(config: &RunConfig, row: &mut impl FnMut(&str, String)) {
    if config.retention_bytes.is_some() || config.segment_bytes.is_some() {
        let bytes = |bytes: Option<u64>| bytes.map_or("default".to_owned(), |b| b.to_string());
        row(
            "topic",
            format!(
                "retention {} B per partition, segments {} B",
                bytes(config.retention_bytes),
                bytes(config.segment_bytes)
            ),
        );
    }
    row(
        "cluster",
        format!(
            "{} nodes ({}{}), {} replicas, durability {}, {} cores",
            config.nodes,
            config.cluster,
            if config.tls { ", TLS" } else { "" },
            config.replicas,
            config.durability,
            config.cores
        ),
    );
    row(
        "load",
        format!(
            "{} producers, {}, {} partitions ({}), {} B values, batch {}, in flight {}{}",
            config.producers,
            consumers_phrase(config),
            config.partitions,
            match config.spread {
                crate::keys::Spread::Record => "record by record",
                crate::keys::Spread::Batch => "batch by batch",
            },
            config.message_size,
            config.batch,
            config.in_flight,
            config
                .rate
                .map(|rate| format!(", rate {rate} msgs/s"))
                .unwrap_or_default()
        ),
    );
}

/// "3 consumers", and whose group they were, if any: the report says how
/// the consumers read.
fn consumers_phrase(config: &RunConfig) -> String {
    match &config.group {
        Some(group) => format!("{} consumers (group {group})", config.consumers),
        None => format!("{} consumers", config.consumers),
    }
}

/// The consumed row. A group's members may read a record twice (after a
/// rebalance a partition's new reader starts at the group's stored offset),
/// so their figure is what they read in total, not distinct records.
fn consumed_line(config: &RunConfig, read: &Throughput) -> String {
    let rates = format!(
        "{:.0} msgs/s, {:.1} MB/s",
        read.records_per_sec, read.megabytes_per_sec
    );
    match &config.group {
        Some(group) => format!(
            "{} records read in total by group {group} ({} members; re-reads after a \
             rebalance count again), {rates}",
            read.records, config.consumers
        ),
        None => format!("{} records, {rates}", read.records),
    }
}

fn soak_rows(soak: &SoakReport, row: &mut impl FnMut(&str, String)) {
    let throughput = &soak.throughput;
    let (low, high) = throughput.allowed_records_per_sec;
    let relative = |rate: f64| {
        if throughput.median_records_per_sec > 0.0 {
            format!(
                "{:+.1}%",
                (rate / throughput.median_records_per_sec - 1.0) * 1e2
            )
        } else {
            "n/a".to_owned()
        }
    };
    row(
        "soak throughput",
        format!(
            "{}: {} samples of {} s after {} warm-up; median {:.0} msgs/s, lowest {:.0} ({}), \
             highest {:.0} ({}); allowed {low:.0}..{high:.0}{}",
            if throughput.flat { "flat" } else { "NOT FLAT" },
            throughput.judged_samples,
            soak.sample_secs,
            soak.warm_up_samples,
            throughput.median_records_per_sec,
            throughput.lowest_records_per_sec,
            relative(throughput.lowest_records_per_sec),
            throughput.highest_records_per_sec,
            relative(throughput.highest_records_per_sec),
            if throughput.outside.is_empty() {
                String::new()
            } else {
                format!("; outside: samples {:?}", throughput.outside)
            }
        ),
    );
    row("soak disk", disk_line(soak));
}

fn disk_line(soak: &SoakReport) -> String {
    let disk = &soak.disk;
    let mib = |bytes: u64| format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20));
    let highest = disk.highest.map_or("no reading".to_owned(), |reading| {
        format!(
            "highest {} (node {}, sample {})",
            mib(reading.partition_bytes),
            reading.node,
            reading.sample
        )
    });
    let (Some(limit), Some(bound)) = (disk.limit, disk.node_partition_bytes_max) else {
        return format!("not judged (no --retention-bytes); partition bytes {highest}");
    };
    let mut line = format!(
        "{}: partition bytes per node {highest}, bound {} (= (limit {} + {SEGMENTS_OVER_LIMIT_MAX} \
         x segment {} + 2 MiB) x partitions)",
        if disk.within {
            "within bound"
        } else {
            "OVER BOUND"
        },
        mib(bound),
        mib(limit.retention_bytes),
        mib(limit.segment_bytes)
    );
    if disk.over_count > 0 {
        let _ = write!(line, "; {} readings over", disk.over_count);
    }
    if disk.unreadable > 0 {
        let _ = write!(line, "; {} readings could not be taken", disk.unreadable);
    }
    for over in &disk.over {
        let _ = write!(
            line,
            "\n  sample {} node {}: {}",
            over.sample,
            over.node,
            mib(over.partition_bytes)
        );
    }
    line
}

fn failover_rows(failover: &FailoverReport, row: &mut impl FnMut(&str, String)) {
    let back = match failover.fault {
        Fault::Kill => "restarted",
        Fault::Stop => "SIGCONT",
    };
    let killed = format!(
        "node {} {} at {:.1} s{}",
        failover.killed_node,
        failover.fault.signal(),
        failover.killed_at_ms as f64 / 1e3,
        failover
            .restarted_at_ms
            .map(|ms| format!(", {back} at {:.1} s", ms as f64 / 1e3))
            .unwrap_or_default()
    );
    row("killed primary", killed);
    let gap = match failover.write_gap {
        Some(gap) => match gap.first_ack_after_ms {
            Some(end) => format!(
                "{} ms (last ack {:.3} s, next {:.3} s)",
                gap.gap_ms,
                gap.last_ack_before_ms as f64 / 1e3,
                end as f64 / 1e3
            ),
            None => format!("{} ms and writes never resumed", gap.gap_ms),
        },
        None => "no ack before the kill".to_owned(),
    };
    row("write gap", gap);
    let per_node: Vec<String> = failover
        .view_changes_total_delta
        .iter()
        .map(|(node, delta)| format!("node {node} +{delta}"))
        .collect();
    row(
        "view changes",
        format!(
            "{} (view {} -> {}; view_changes_total {}: {})",
            failover.views_advanced,
            failover.view_before,
            failover.view_after,
            failover.view_changes_total_sum,
            per_node.join(", ")
        ),
    );
    if let Some(primary) = failover.primary_after {
        row("primary after", format!("node {primary}"));
    }
    if failover.restarted_at_ms.is_some() {
        let after = |ms: Option<u64>| {
            ms.map_or_else(
                || "not in time".to_owned(),
                |ms| format!("{ms} ms after restart"),
            )
        };
        let mut catch_up = format!(
            "commit {}; log {}",
            after(failover.catch_up_ms),
            after(failover.log_catch_up_ms)
        );
        if let Some(last_seen) = &failover.catch_up_last_seen {
            let _ = write!(catch_up, " (last seen: {last_seen})");
        }
        row("catch-up", catch_up);
    }
}

fn latency_line(summary: &LatencySummary) -> String {
    format!(
        "p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        format_us(summary.p50_us),
        format_us(summary.p90_us),
        format_us(summary.p99_us),
        format_us(summary.p999_us),
        format_us(summary.max_us)
    )
}

fn verification_line(verification: &Verification) -> String {
    let mut line = format!(
        "{}: {} acknowledged, {} read back; missing {}, duplicated {}, misplaced {}, foreign {}; \
         {} unacknowledged ({} of them written)",
        if verification.passed() {
            "exactly once"
        } else {
            "FAILED"
        },
        verification.acknowledged,
        verification.read,
        verification.missing,
        verification.duplicated,
        verification.misplaced,
        verification.foreign,
        verification.unacknowledged,
        verification.unacknowledged_present
    );
    if !verification.retained.is_empty() {
        let _ = write!(
            line,
            "; {} acknowledged below the earliest retained offset (dropped by retention), \
             {} partitions dropped too early",
            verification.dropped_by_retention, verification.dropped_too_early
        );
        let shown = crate::verify::EXAMPLES_MAX;
        for range in verification.retained.iter().take(shown) {
            let offset = |offset: Option<u64>| offset.map_or("?".to_owned(), |o| o.to_string());
            let _ = write!(
                line,
                "\n  partition {}: retained {}..{} (earliest allowed up to {})",
                range.partition,
                range.earliest_offset,
                offset(range.high_watermark),
                offset(range.earliest_offset_max)
            );
        }
        if verification.retained.len() > shown {
            let more = verification.retained.len() - shown;
            let _ = write!(line, "\n  ({more} more partitions in the JSON report)");
        }
    }
    for example in &verification.examples {
        let _ = write!(line, "\n  {example}");
    }
    line
}

/// Two aligned columns.
pub(crate) fn table(rows: &[(String, String)]) -> String {
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, value) in rows {
        let _ = writeln!(out, "{name:<width$}  {value}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_divides_by_the_seconds() {
        let throughput = Throughput::new(50_000, 50_000 * 1024, 2.0);
        assert_eq!(throughput.records_per_sec, 25_000.0);
        assert!((throughput.megabytes_per_sec - 25.6).abs() < 1e-9);
    }

    fn config(consumers: u32, group: Option<&str>) -> RunConfig {
        RunConfig {
            cluster: "local".to_owned(),
            nodes: 3,
            tls: false,
            replicas: 3,
            durability: "persisted".to_owned(),
            producers: 1,
            consumers,
            group: group.map(str::to_owned),
            partitions: 12,
            message_size: 1024,
            batch: 100,
            in_flight: 8,
            linger_ms: 2,
            spread: crate::keys::Spread::Record,
            duration_secs: Some(20.0),
            messages: None,
            rate: None,
            retention_bytes: None,
            segment_bytes: None,
            cores: 2,
        }
    }

    #[test]
    fn a_group_run_says_the_consumers_are_a_group_and_reads_in_total() {
        let read = Throughput::new(1_000, 1_024_000, 2.0);
        let group = config(3, Some("bench"));
        assert_eq!(consumers_phrase(&group), "3 consumers (group bench)");
        let line = consumed_line(&group, &read);
        assert!(
            line.starts_with("1000 records read in total by group bench (3 members;"),
            "{line}"
        );
        assert!(line.ends_with("500 msgs/s, 0.5 MB/s"), "{line}");
        let tailing = config(3, None);
        assert_eq!(consumers_phrase(&tailing), "3 consumers");
        assert_eq!(
            consumed_line(&tailing, &read),
            "1000 records, 500 msgs/s, 0.5 MB/s"
        );
        let json = serde_json::to_value(&tailing).expect("as JSON");
        assert_eq!(json["group"], serde_json::Value::Null, "null when unused");
        let json = serde_json::to_value(&group).expect("as JSON");
        assert_eq!(json["group"], "bench");
    }

    #[test]
    fn table_columns_align() {
        let rows = [
            ("a".to_owned(), "1".to_owned()),
            ("long name".to_owned(), "2".to_owned()),
        ];
        assert_eq!(table(&rows), "a          1\nlong name  2\n");
    }
}
