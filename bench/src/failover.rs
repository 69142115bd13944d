//! The failover case: find the benched partition's primary, SIGKILL its node
//! (or SIGSTOP it: a hung node that keeps its connections) at the planned
//! second while the load goes on, restart it (or SIGCONT it) later, and time
//! how long that replica takes to catch up. Also the scrapes that count view
//! changes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use strand_client::{Client, ClusterStatus, GroupStatus};
use tokio::time::Instant;

use crate::cluster::LocalCluster;
use crate::error::BenchError;
use crate::prometheus;
use crate::scrape;
use crate::write_gap::WriteGap;

/// How often group status is polled.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Longest wait for a restarted replica to catch up, by default.
pub const CATCH_UP_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);

/// How the primary's node is taken down, and brought back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fault {
    /// SIGKILL (a crash); brought back by starting the process again.
    Kill,
    /// SIGSTOP (hung: its sockets stay open, nothing answers); brought back
    /// by SIGCONT.
    Stop,
}

impl Fault {
    /// The signal that takes the node down.
    pub fn signal(self) -> &'static str {
        match self {
            Fault::Kill => "SIGKILL",
            Fault::Stop => "SIGSTOP",
        }
    }
}

/// When to kill and restart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailoverPlan {
    /// How the primary's node goes down.
    pub fault: Fault,
    /// When to SIGKILL the primary's node, since the load started.
    pub kill_at: Duration,
    /// How long after the kill to restart it (`None`: it stays down).
    pub restart_after: Option<Duration>,
    /// How long to wait for the restarted replica to catch up.
    pub catch_up_timeout: Duration,
}

/// What the controller did, and when (milliseconds since the load started).
#[derive(Debug, Clone, PartialEq)]
pub struct FailoverEvents {
    /// How the node went down.
    pub fault: Fault,
    /// The node SIGKILLed.
    pub killed_node: u32,
    /// The group's view before the kill.
    pub view_before: u32,
    /// When it was killed.
    pub killed_at_ms: u64,
    /// When it was started again.
    pub restarted_at_ms: Option<u64>,
    /// How long after the restart its commit reached the primary's.
    pub catch_up_ms: Option<u64>,
    /// How long after the restart its log (op) reached the primary's commit.
    pub log_catch_up_ms: Option<u64>,
    /// When it did not catch up: the last status seen.
    pub catch_up_last_seen: Option<String>,
    /// `view_changes_total{group}` per node just before the kill.
    pub view_changes_before: BTreeMap<u32, f64>,
}

/// The failover, as reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailoverReport {
    /// How the primary's node went down (`kill` or `stop`).
    pub fault: Fault,
    /// The node SIGKILLed (the benched partition's primary).
    pub killed_node: u32,
    /// When, in milliseconds since the load started.
    pub killed_at_ms: u64,
    /// When it was restarted.
    pub restarted_at_ms: Option<u64>,
    /// The longest pause in acknowledgements of the benched partition
    /// around the kill.
    pub write_gap: Option<WriteGap>,
    /// The group's view before the kill.
    pub view_before: u32,
    /// The highest view a node is normal in at the end.
    pub view_after: u32,
    /// `view_after - view_before`: the view changes the group went through
    /// (must be one per kill).
    pub views_advanced: u32,
    /// Per node, how much its `view_changes_total{group}` grew (a restarted
    /// node counts from its restart). Each replica counts the view changes
    /// it took part in, so the sum is one per replica that moved.
    pub view_changes_total_delta: BTreeMap<u32, f64>,
    /// The sum of those.
    pub view_changes_total_sum: f64,
    /// The node that is primary at the end.
    pub primary_after: Option<u32>,
    /// Milliseconds from the restart until the restarted replica's commit
    /// reached the primary's.
    pub catch_up_ms: Option<u64>,
    /// Milliseconds from the restart until the restarted replica's log
    /// held every op the primary had committed (it may still be applying).
    pub log_catch_up_ms: Option<u64>,
    /// When it did not catch up in time: the last status seen of it and of
    /// the primary.
    pub catch_up_last_seen: Option<String>,
}

impl FailoverReport {
    /// Exactly one view change for the one kill.
    pub fn view_changes_ok(&self) -> bool {
        self.views_advanced == 1
    }
}

/// The node hosting `group`'s primary and its view, once the primary
/// reports itself normal (waits up to `timeout`).
pub async fn find_primary(
    client: &Client,
    group: u64,
    timeout: Duration,
) -> Result<(u32, u32), BenchError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(status) = client.cluster_status().await
            && let Some((node, primary)) = normal_primary(&status, group)
        {
            return Ok((node, primary.view));
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Cluster(format!(
                "group {group} has no normal primary after {timeout:?}"
            )));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// The node whose replica of `group` is the primary and reports `normal`.
fn normal_primary(status: &ClusterStatus, group: u64) -> Option<(u32, &GroupStatus)> {
    status.groups().find(|(_, reported)| {
        reported.group == group
            && reported.replica == reported.primary
            && reported.status == "normal"
    })
}

/// Kills the primary at `plan.kill_at`, restarts it after `plan.restart_after`,
/// then waits (up to `plan.catch_up_timeout`) for it to catch up.
pub async fn control(
    plan: FailoverPlan,
    cluster: Arc<Mutex<LocalCluster>>,
    client: Client,
    group: u64,
    metrics: Vec<(u32, String)>,
    start: Instant,
    announce: impl Fn(String),
) -> Result<FailoverEvents, BenchError> {
    tokio::time::sleep_until(start + plan.kill_at).await;
    let mut events = strike(&plan, &cluster, &client, group, &metrics, start, &announce).await?;
    let Some(restart_after) = plan.restart_after else {
        return Ok(events);
    };
    tokio::time::sleep_until(start + plan.kill_at + restart_after).await;
    let restarted = bring_back(plan.fault, &cluster, events.killed_node, start, &announce)?;
    events.restarted_at_ms = Some(restarted.duration_since(start).as_millis() as u64);
    let catch_up = wait_for_catch_up(
        &client,
        group,
        events.killed_node,
        restarted,
        plan.catch_up_timeout,
    )
    .await;
    events.log_catch_up_ms = catch_up.log_ms;
    events.catch_up_ms = catch_up.commit_ms;
    if catch_up.commit_ms.is_none() {
        events.catch_up_last_seen = catch_up.last_seen;
    }
    let killed_node = events.killed_node;
    match events.catch_up_ms {
        Some(ms) => announce(format!(
            "node {killed_node} caught up {ms} ms after its restart"
        )),
        None => announce(format!(
            "node {killed_node} did not catch up within {:?}: {}",
            plan.catch_up_timeout,
            events.catch_up_last_seen.as_deref().unwrap_or("no status")
        )),
    }
    Ok(events)
}

/// Finds `group`'s primary and kills (or stops) its node; the events so
/// far: which node, in which view, when, and the view changes before.
async fn strike(
    plan: &FailoverPlan,
    cluster: &Mutex<LocalCluster>,
    client: &Client,
    group: u64,
    metrics: &[(u32, String)],
    start: Instant,
    announce: &impl Fn(String),
) -> Result<FailoverEvents, BenchError> {
    let (killed_node, view_before) = find_primary(client, group, Duration::from_secs(10)).await?;
    let view_changes_before = view_changes(metrics, group).await;
    match plan.fault {
        Fault::Kill => lock(cluster)?.kill_node(killed_node)?,
        Fault::Stop => lock(cluster)?.signal_node(killed_node, "STOP")?,
    }
    let killed_at_ms = start.elapsed().as_millis() as u64;
    announce(format!(
        "{:.1} s: {} node {killed_node} (primary of group {group}, view {view_before})",
        killed_at_ms as f64 / 1e3,
        plan.fault.signal()
    ));
    Ok(FailoverEvents {
        fault: plan.fault,
        killed_node,
        view_before,
        killed_at_ms,
        restarted_at_ms: None,
        catch_up_ms: None,
        log_catch_up_ms: None,
        catch_up_last_seen: None,
        view_changes_before,
    })
}

/// Restarts the killed node (or continues the stopped one); when it did.
fn bring_back(
    fault: Fault,
    cluster: &Mutex<LocalCluster>,
    killed_node: u32,
    start: Instant,
    announce: &impl Fn(String),
) -> Result<Instant, BenchError> {
    match fault {
        Fault::Kill => lock(cluster)?.start_node(killed_node)?,
        Fault::Stop => lock(cluster)?.signal_node(killed_node, "CONT")?,
    }
    let restarted = Instant::now();
    let how = match fault {
        Fault::Kill => "restarted",
        Fault::Stop => "SIGCONT to",
    };
    announce(format!(
        "{:.1} s: {how} node {killed_node}",
        restarted.duration_since(start).as_secs_f64()
    ));
    Ok(restarted)
}

fn lock(
    cluster: &Mutex<LocalCluster>,
) -> Result<std::sync::MutexGuard<'_, LocalCluster>, BenchError> {
    cluster
        .lock()
        .map_err(|_| BenchError::Cluster("the cluster handle was poisoned".to_owned()))
}

/// When a restarted replica caught up, in milliseconds after its restart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct CatchUp {
    /// Its log holds every op the primary had committed.
    log_ms: Option<u64>,
    /// It has committed (applied) them too.
    commit_ms: Option<u64>,
    /// The last status seen of it and of the primary.
    last_seen: Option<String>,
}

/// Polls until `node`'s replica of `group` is normal with a commit at or
/// past the primary's commit of the previous poll (under load the primary
/// moves on; one poll interval of slack makes the race winnable), noting
/// on the way when its log got there.
async fn wait_for_catch_up(
    client: &Client,
    group: u64,
    node: u32,
    restarted: Instant,
    timeout: Duration,
) -> CatchUp {
    let mut target: Option<u64> = None;
    let mut catch_up = CatchUp::default();
    while restarted.elapsed() < timeout {
        if let Ok(status) = client.cluster_status().await {
            let primary_commit =
                normal_primary(&status, group).map(|(_, primary)| primary.commit_op);
            let replica = status
                .groups()
                .find(|(answering, reported)| *answering == node && reported.group == group)
                .map(|(_, reported)| reported);
            catch_up.last_seen = Some(format!(
                "node {node}: {}; primary commit_op {primary_commit:?}",
                replica.map_or("no answer".to_owned(), |replica| format!(
                    "{} in view {}, op {}, commit_op {}",
                    replica.status, replica.view, replica.op, replica.commit_op
                ))
            ));
            if let (Some(replica), Some(goal)) = (replica, target.or(primary_commit)) {
                let elapsed_ms = restarted.elapsed().as_millis() as u64;
                if replica.status == "normal" && replica.op >= goal {
                    catch_up.log_ms.get_or_insert(elapsed_ms);
                }
                if caught_up(replica, goal) {
                    catch_up.commit_ms = Some(elapsed_ms);
                    return catch_up;
                }
            }
            target = primary_commit.or(target);
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    catch_up
}

/// A replica has caught up once it is normal and has committed `goal`.
pub fn caught_up(replica: &GroupStatus, goal: u64) -> bool {
    replica.status == "normal" && replica.commit_op >= goal
}

/// `view_changes_total{group}` on each node that answers.
pub async fn view_changes(metrics: &[(u32, String)], group: u64) -> BTreeMap<u32, f64> {
    let label = group.to_string();
    let mut values = BTreeMap::new();
    for (node, address) in metrics {
        if let Ok(samples) = scrape::scrape(address).await {
            let value = prometheus::sum_labelled(&samples, "view_changes_total", "group", &label);
            values.insert(*node, value);
        }
    }
    values
}

/// The report, from the controller's events and the end-of-run state.
pub fn report(
    events: &FailoverEvents,
    write_gap: Option<WriteGap>,
    view_changes_after: &BTreeMap<u32, f64>,
    view_after: u32,
    primary_after: Option<u32>,
) -> FailoverReport {
    let mut delta = BTreeMap::new();
    for (node, after) in view_changes_after {
        let before = if *node == events.killed_node && events.fault == Fault::Kill {
            0.0 // a restarted process counts from zero
        } else {
            events.view_changes_before.get(node).copied().unwrap_or(0.0)
        };
        delta.insert(*node, after - before);
    }
    FailoverReport {
        fault: events.fault,
        killed_node: events.killed_node,
        killed_at_ms: events.killed_at_ms,
        restarted_at_ms: events.restarted_at_ms,
        write_gap,
        view_before: events.view_before,
        view_after,
        views_advanced: view_after.saturating_sub(events.view_before),
        view_changes_total_sum: delta.values().sum(),
        view_changes_total_delta: delta,
        primary_after,
        catch_up_ms: events.catch_up_ms,
        log_catch_up_ms: events.log_catch_up_ms,
        catch_up_last_seen: events.catch_up_last_seen.clone(),
    }
}

/// The highest view any node reports `group` normal in, and its primary's node.
pub async fn final_view(client: &Client, group: u64) -> (u32, Option<u32>) {
    let Ok(status) = client.cluster_status().await else {
        return (0, None);
    };
    let view = status
        .groups()
        .filter(|(_, reported)| reported.group == group && reported.status == "normal")
        .map(|(_, reported)| reported.view)
        .max()
        .unwrap_or(0);
    (view, normal_primary(&status, group).map(|(node, _)| node))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> FailoverEvents {
        FailoverEvents {
            fault: Fault::Kill,
            killed_node: 2,
            view_before: 4,
            killed_at_ms: 5_000,
            restarted_at_ms: Some(15_000),
            catch_up_ms: Some(800),
            log_catch_up_ms: Some(300),
            catch_up_last_seen: None,
            view_changes_before: BTreeMap::from([(1, 1.0), (2, 3.0), (3, 1.0)]),
        }
    }

    #[test]
    fn one_kill_one_view_change_counts_each_replica_once() {
        let after = BTreeMap::from([(1, 2.0), (2, 0.0), (3, 2.0)]);
        let report = report(&events(), None, &after, 5, Some(1));
        assert_eq!(report.views_advanced, 1);
        assert!(report.view_changes_ok());
        assert_eq!(
            report.view_changes_total_delta,
            BTreeMap::from([(1, 1.0), (2, 0.0), (3, 1.0)])
        );
        assert_eq!(report.view_changes_total_sum, 2.0);
    }

    #[test]
    fn a_stopped_node_keeps_its_count_a_killed_one_starts_again() {
        let after = BTreeMap::from([(1, 2.0), (2, 4.0), (3, 2.0)]);
        let stopped = FailoverEvents {
            fault: Fault::Stop,
            ..events()
        };
        let report = report(&stopped, None, &after, 5, Some(1));
        assert_eq!(report.view_changes_total_delta.get(&2), Some(&1.0));
        let killed = super::report(&events(), None, &after, 5, Some(1));
        assert_eq!(killed.view_changes_total_delta.get(&2), Some(&4.0));
    }

    #[test]
    fn two_view_changes_for_one_kill_are_flagged() {
        let after = BTreeMap::from([(1, 3.0), (3, 3.0)]);
        let report = report(&events(), None, &after, 6, Some(3));
        assert_eq!(report.views_advanced, 2);
        assert!(!report.view_changes_ok());
    }
}
