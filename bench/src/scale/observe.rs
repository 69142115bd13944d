//! Watching the cluster: polling every node's status until it settles,
//! scraping every node's metrics until its groups are quiet, and measuring
//! the node processes at idle. The decisions are [`super::settle`]'s; this
//! module only fetches, waits and times.

use std::time::Duration;

use strand_client::Client;
use tokio::time::Instant;

use super::Progress;
use super::procfs;
use super::report::{IdlePhase, MIB_BYTES, NodeIdle, RebalancePhase, SettlePhase};
use super::settle::{self, Expectation, NodeMetrics, Snapshot, Verdict, ViewHighs};
use crate::prometheus::Sample;
use crate::scrape;

/// How often status and metrics are polled while waiting.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// How often a wait says what it still waits for.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(5);

/// One poll of every node's status and attention list.
pub async fn poll(client: &Client) -> Snapshot {
    let status = match client.cluster_status().await {
        Ok(status) => status,
        Err(error) => return Snapshot::unreachable(format!("cluster status: {error}")),
    };
    let attention = client.attention().await;
    let attention = attention
        .as_ref()
        .map_err(|error| format!("attention: {error}"));
    Snapshot::from_status(&status, attention)
}

/// What a settle wait needs besides the client.
pub struct SettleWait<'a> {
    /// What settled looks like.
    pub expected: &'a Expectation,
    /// `(node, metrics address)` of every node, scraped once settled.
    pub metrics: &'a [(u32, String)],
    /// The instant the phase's time counts from.
    pub since: Instant,
    /// The views before the phase: its view changes count from them.
    pub before: &'a ViewHighs,
    /// The longest wait.
    pub timeout: Duration,
}

/// Polls until the cluster settles or `wait.timeout` passes; every view
/// seen goes into `highs`, failed scrapes into `errors`. Also returns the
/// last snapshot.
pub async fn wait_settled(
    client: &Client,
    wait: SettleWait<'_>,
    highs: &mut ViewHighs,
    progress: &Progress,
    errors: &mut Vec<String>,
) -> (SettlePhase, Snapshot) {
    let deadline = Instant::now() + wait.timeout;
    let mut said_at = Instant::now();
    loop {
        let snapshot = poll(client).await;
        highs.record(&snapshot);
        let unsettled = match settle::verdict(&snapshot, wait.expected) {
            Verdict::Settled => None,
            Verdict::Waiting(unsettled) => Some(unsettled.to_string()),
        };
        let settled = unsettled.is_none();
        if settled || Instant::now() >= deadline {
            let secs = wait.since.elapsed().as_secs_f64();
            let (nodes, scrape_errors) = scrape_all(wait.metrics).await;
            errors.extend(scrape_errors);
            let phase = SettlePhase {
                settled,
                secs,
                view_changes: highs.changes_since(wait.before, &wait.expected.groups),
                nodes,
                leadership: settle::leadership(&snapshot, wait.expected),
                unsettled,
            };
            return (phase, snapshot);
        }
        if said_at.elapsed() >= PROGRESS_INTERVAL {
            progress.say(format!(
                "settling, {:.0} s: {}",
                wait.since.elapsed().as_secs_f64(),
                unsettled.as_deref().unwrap_or("")
            ));
            said_at = Instant::now();
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Polls until no node leads more than its share of `expected`'s groups or
/// `timeout` has passed since `since`; every view seen goes into `highs`.
pub async fn wait_balanced(
    client: &Client,
    expected: &Expectation,
    since: Instant,
    timeout: Duration,
    highs: &mut ViewHighs,
    progress: &Progress,
) -> RebalancePhase {
    let deadline = since + timeout;
    let mut said_at = Instant::now();
    loop {
        let snapshot = poll(client).await;
        highs.record(&snapshot);
        let leadership = settle::leadership(&snapshot, expected);
        let balanced = leadership.balanced();
        if balanced || Instant::now() >= deadline {
            return RebalancePhase {
                balanced,
                secs: since.elapsed().as_secs_f64(),
                timeout_secs: timeout.as_secs_f64(),
                leadership,
            };
        }
        if said_at.elapsed() >= PROGRESS_INTERVAL {
            progress.say(format!(
                "rebalancing, largest share {:.1} %: {:?}",
                leadership.share_max_percent, leadership.led
            ));
            said_at = Instant::now();
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Every node's metrics figures, and the scrapes that failed.
pub async fn scrape_all(metrics: &[(u32, String)]) -> (Vec<NodeMetrics>, Vec<String>) {
    let mut figures = Vec::with_capacity(metrics.len());
    let mut errors = Vec::new();
    for (node, address) in metrics {
        match scrape::scrape(address).await {
            Ok(samples) => figures.push(NodeMetrics::from_samples(*node, &samples)),
            Err(error) => errors.push(format!("node {node}: {error}")),
        }
    }
    (figures, errors)
}

/// Every node's whole scrape (those that answered), and the scrapes that
/// failed.
pub async fn scrape_samples(metrics: &[(u32, String)]) -> (Vec<Vec<Sample>>, Vec<String>) {
    let mut scrapes = Vec::with_capacity(metrics.len());
    let mut errors = Vec::new();
    for (node, address) in metrics {
        match scrape::scrape(address).await {
            Ok(samples) => scrapes.push(samples),
            Err(error) => errors.push(format!("node {node}: {error}")),
        }
    }
    (scrapes, errors)
}

/// Scrapes until every node's groups are all quiet or `timeout` passes:
/// whether they got there, the seconds waited, the last figures.
pub async fn wait_quiet(
    metrics: &[(u32, String)],
    timeout: Duration,
    progress: &Progress,
) -> (bool, f64, Vec<NodeMetrics>) {
    let started = Instant::now();
    let mut said_at = started;
    loop {
        let (figures, _) = scrape_all(metrics).await;
        let quiet = settle::all_quiet(&figures, metrics.len() as u32);
        if quiet || started.elapsed() >= timeout {
            return (quiet, started.elapsed().as_secs_f64(), figures);
        }
        if said_at.elapsed() >= PROGRESS_INTERVAL {
            let counts = super::report::quiet_counts(&figures);
            progress.say(format!("waiting for quiet (quiet/hosted): {}", counts));
            said_at = Instant::now();
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Waits (up to `quiet_timeout`) for every group to be quiet, then
/// measures each `(node, pid)` for `duration`: CPU over it, memory, threads
/// and group counts at its end. Readings that fail go to `errors`.
pub async fn measure_idle(
    pids: &[(u32, u32)],
    metrics: &[(u32, String)],
    quiet_timeout: Duration,
    duration: Duration,
    progress: &Progress,
    errors: &mut Vec<String>,
) -> IdlePhase {
    let (quiet, quiet_secs, quiet_nodes) = wait_quiet(metrics, quiet_timeout, progress).await;
    progress.say(format!(
        "{}; measuring {:.1} s at idle",
        if quiet {
            "every group quiet"
        } else {
            "NOT every group quiet"
        },
        duration.as_secs_f64()
    ));
    let started = Instant::now();
    let before: Vec<_> = pids
        .iter()
        .map(|(_, pid)| procfs::read_stat(*pid))
        .collect();
    tokio::time::sleep(duration).await;
    let wall = started.elapsed();
    // Read before scraping: rendering the metrics of thousands of groups
    // is work the scrape asks for, not idle cost.
    let after: Vec<_> = pids
        .iter()
        .map(|(_, pid)| procfs::read_stat(*pid))
        .collect();
    let (after_metrics, scrape_errors) = scrape_all(metrics).await;
    errors.extend(scrape_errors);
    let mut nodes = Vec::with_capacity(pids.len());
    for ((&(node, pid), before), after) in pids.iter().zip(before).zip(after) {
        let counts = after_metrics.iter().find(|figures| figures.node == node);
        match node_idle(node, pid, (before, after), wall, counts) {
            Ok(idle) => nodes.push(idle),
            Err(error) => errors.push(format!("node {node} (pid {pid}): {error}")),
        }
    }
    IdlePhase {
        quiet,
        quiet_secs,
        quiet_nodes,
        measured_secs: wall.as_secs_f64(),
        cpu_percent_total: nodes.iter().map(|node| node.cpu_percent).sum(),
        rss_bytes_total: nodes.iter().map(|node| node.rss_bytes).sum(),
        nodes,
    }
}

/// A CPU reading, or why it failed.
type CpuReading = Result<procfs::CpuTicks, procfs::ProcError>;

/// One node's idle figures, from its CPU readings at the start and the end.
fn node_idle(
    node: u32,
    pid: u32,
    (before, after): (CpuReading, CpuReading),
    wall: Duration,
    counts: Option<&NodeMetrics>,
) -> Result<NodeIdle, procfs::ProcError> {
    let (before, after) = (before?, after?);
    let status = procfs::read_status(pid)?;
    Ok(NodeIdle {
        node,
        pid,
        cpu_percent: procfs::cpu_percent(before, after, wall)?,
        rss_bytes: status.rss_bytes,
        rss_mib: status.rss_bytes as f64 / MIB_BYTES,
        threads: status.threads,
        groups_hosted: counts.map_or(0, |counts| counts.groups_hosted),
        groups_quiet: counts.map_or(0, |counts| counts.groups_quiet),
    })
}
