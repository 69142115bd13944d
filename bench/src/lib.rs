//! # strand-bench: the cluster bench
//!
//! Measures Strand as its users will judge it: it starts a local cluster of
//! real `strand-server` processes (or connects to a running one), creates a
//! topic through the SDK, produces keyed records through the SDK's batching
//! producer while consumers tail the partitions (or share them as one
//! consumer group's members, `--group`), and reports throughput,
//! produce-ack latency percentiles and, when asked, a failover: the
//! benched partition's primary is SIGKILLed mid-load and restarted later,
//! and the report gives the write gap, the view changes and the restarted
//! replica's catch-up time. At the end every partition is read back and
//! every acknowledged record must be there exactly once, at its offset.
//!
//! A soak (`--soak`) holds a set rate for a long time on a topic with a size
//! limit (`--retention-bytes`), samples throughput and each node's disk
//! every `--sample-secs`, and judges both flat; its read-back checks every
//! record from each partition's earliest retained offset on.
//!
//! A second binary, `strand-scale` ([`scale`]), measures the cluster with
//! many partitions instead: time until every group is normal, cost at
//! idle, a clean restart, a primary kill, throughput over every partition.
//!
//! Modules, in reading order:
//!
//! | module | owns |
//! |---|---|
//! | [`options`] | the flags, their defaults and bounds |
//! | [`run`] | one run start to end: cluster, topic, load, failover or soak sampler, read-back, report |
//! | [`cluster`] | a local cluster of real server processes: configs, start, SIGKILL, restart |
//! | [`load`] | producers (send → ack timing per record) and tailing consumers |
//! | [`consumer_group`] | consumers as members of one consumer group (`--group`) |
//! | [`failover`] | kill the primary, restart it, time the catch-up; view-change scrapes |
//! | [`soak_sampler`] | the soak's samples: acks per window, each node's disk bytes, earliest offsets |
//! | [`read_back`] | fetch every partition from its earliest retained offset into the verifier |
//! | [`keys`] | **pure**: record keys = producer id + sequence; partition of a key |
//! | [`verify`] | **pure**: exactly-once, from the acks and the read-back; what retention may drop |
//! | [`retention`] | **pure**: what a size limit promises: default segment, disk bound, earliest offset bound |
//! | [`soak`] | **pure**: the soak's samples and verdict: throughput flat, disk within bound |
//! | [`write_gap`] | **pure**: the pause in acks a failover causes |
//! | [`latency`] | **pure**: hdrhistogram percentiles |
//! | [`timeline`] | **pure**: per-second throughput and p99 |
//! | [`prometheus`] | **pure**: the Prometheus text format; [`scrape`] fetches it |
//! | [`report`] | the result: summary table, JSON |
//! | [`plot`] | **pure**: the result as a hand-written SVG (per second, or per soak sample) |
//! | [`scale`] | the scale mode (`strand-scale`): many partitions, settle, idle, restart, kill |
//!
//! Invariants that matter most:
//! - Every record's key names its producer and sequence ([`keys`]); an
//!   acknowledged record read back zero times, twice, or at another offset
//!   than its acknowledgement fails the run ([`verify`]).
//! - Under a size limit, an acknowledged record may be missing only below its
//!   partition's earliest offset, and that offset may not pass what the
//!   limit allows to drop ([`retention`]).
//! - Latency runs from the producer's `send` call to the record's
//!   acknowledgement: at full speed that includes waiting for room in the
//!   producer's buffer (bounded to one batch beyond the in-flight window);
//!   use `--rate` to measure latency at a set load.

pub mod cluster;
pub mod consumer_group;
pub mod error;
pub mod failover;
pub mod keys;
pub mod latency;
pub mod load;
pub mod options;
pub mod plot;
pub mod prometheus;
pub mod read_back;
pub mod report;
pub mod retention;
pub mod run;
pub mod scale;
pub mod scrape;
pub mod soak;
pub mod soak_sampler;
pub mod timeline;
pub mod verify;
pub mod write_gap;

pub use error::BenchError;
pub use options::Options;
pub use report::Report;
pub use run::run;

/// Writes `report` as pretty JSON (and a newline) to `path`: every mode's
/// `--json`.
pub fn write_json(
    path: &std::path::Path,
    report: &impl serde::Serialize,
) -> Result<(), BenchError> {
    let json = serde_json::to_string_pretty(report)
        .map_err(|error| BenchError::Output(format!("report as JSON: {error}")))?;
    std::fs::write(path, json + "\n")
        .map_err(|error| BenchError::Output(format!("cannot write {}: {error}", path.display())))
}

/// The SVG plot of a report: for a soak, throughput and each node's disk
/// bytes per sample; otherwise throughput and p99 per second, kill and
/// restart marked.
pub fn plot_report(report: &Report) -> String {
    let config = &report.config;
    if let Some(soak) = &report.soak {
        let title = format!(
            "strand-bench soak: {} nodes, {} partitions, {} msgs/s of {} B, retention {}",
            config.nodes,
            config.partitions,
            config.rate.unwrap_or(0.0),
            config.message_size,
            config
                .retention_bytes
                .map_or("none".to_owned(), |bytes| format!("{bytes} B"))
        );
        let seconds = config.duration_secs.unwrap_or(0.0);
        return plot::render_soak(&title, seconds, soak);
    }
    let mut marks = Vec::new();
    if let Some(failover) = &report.failover {
        marks.push(plot::Mark {
            at_secs: failover.killed_at_ms as f64 / 1e3,
            label: format!("SIGKILL node {}", failover.killed_node),
            colour: "#d62728",
        });
        if let Some(restarted_at_ms) = failover.restarted_at_ms {
            marks.push(plot::Mark {
                at_secs: restarted_at_ms as f64 / 1e3,
                label: format!("restart node {}", failover.killed_node),
                colour: "#2ca02c",
            });
        }
    }
    let title = format!(
        "strand-bench: {} nodes, {} durability, {} B x batch {}, {} producers",
        config.nodes, config.durability, config.message_size, config.batch, config.producers
    );
    plot::render(&title, &report.timeline, &marks)
}
