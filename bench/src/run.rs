//! One bench run, start to end: the cluster, the topic, the load (and the
//! failover or the soak's sampler beside it), the read-back, the report.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use strand_client::{Client, ClientConfig, ClientError, TopicSpec};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::cluster::{self, LocalCluster};
use crate::consumer_group;
use crate::error::BenchError;
use crate::failover::{self, FailoverEvents};
use crate::latency;
use crate::load::{self, ConsumerOutcome, Live, Load, ProducerOutcome, Stop};
use crate::options::Options;
use crate::read_back;
use crate::report::{ConsumeReport, Report, RunConfig, Throughput};
use crate::soak::{SoakPlan, SoakReport, SoakSample};
use crate::soak_sampler::{self, SoakProbe};
use crate::timeline::Timeline;
use crate::verify::Verification;
use crate::write_gap;

/// How long the cluster may take to answer and to elect primaries.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The stream the bench creates its topics in.
pub const STREAM: &str = "bench";

/// The cluster under test.
struct Target {
    local: Option<Arc<Mutex<LocalCluster>>>,
    bootstrap: Vec<String>,
    /// `(node id, metrics address)`.
    metrics: Vec<(u32, String)>,
    nodes: u32,
    /// The cluster's CA certificate, when it serves TLS.
    ca: Option<PathBuf>,
    /// The built-in admin's credentials, when the cluster requires signing in.
    admin: Option<strand_client::Credentials>,
}

/// Runs the bench `options` describe; `Ok` even when the verification
/// fails (the report says so: see [`Report::passed`]).
pub async fn run(options: &Options) -> Result<Report, BenchError> {
    options.validate()?;
    let target = open_target(options)?;
    let progress = progress_bar(options);
    let announce = announcer(&progress);
    announce(format!("cluster: {}", target.bootstrap.join(",")));
    let client = match &target.admin {
        Some(admin) => bench_user(&target, admin).await?,
        None => connect(&target.bootstrap, target.ca.as_deref(), None).await?,
    };
    let (load, groups) = create_topic(&client, options).await?;
    for group in &groups {
        failover::find_primary(&client, *group, READY_TIMEOUT).await?;
    }
    let load = Arc::new(load);
    let benched_group = groups[0];
    let measured = drive(options, &target, &client, &load, &groups, &progress).await?;

    let verification = if options.no_verify {
        None
    } else {
        announce("reading every partition back".to_owned());
        let retention = options.retention();
        Some(read_back::verify(&client, &load, retention, &measured.producers).await)
    };
    let failover = match &measured.failover {
        Some(events) => Some(
            failover_report(&client, &target, benched_group, events, &measured.producers).await,
        ),
        None => None,
    };
    let node_exits = match &target.local {
        Some(cluster) => lock(cluster)?
            .exited()
            .into_iter()
            .map(|(node, status)| format!("node {node}: {status}"))
            .collect(),
        None => Vec::new(),
    };
    let outcome = RunOutcome {
        measured,
        failover,
        verification,
        node_exits,
    };
    Ok(build_report(options, &target, outcome))
}

/// What the load produced, before the read-back.
struct Measured {
    producers: Vec<ProducerOutcome>,
    consumers: Vec<ConsumerOutcome>,
    failover: Option<FailoverEvents>,
    soak_samples: Option<Vec<SoakSample>>,
}

/// Everything a report is built from.
struct RunOutcome {
    measured: Measured,
    failover: Option<failover::FailoverReport>,
    verification: Option<Verification>,
    node_exits: Vec<String>,
}

/// Runs the producers, the consumers, and the failover controller or the
/// soak's sampler (if any) until the producers stop and the others finish.
async fn drive(
    options: &Options,
    target: &Target,
    client: &Client,
    load: &Arc<Load>,
    groups: &[u64],
    progress: &ProgressBar,
) -> Result<Measured, BenchError> {
    let live = Arc::new(Live::default());
    let start = Instant::now();
    let controller = match (options.failover(), &target.local) {
        (Some(plan), Some(cluster)) => Some(tokio::spawn(failover::control(
            plan,
            Arc::clone(cluster),
            client.clone(),
            groups[0],
            target.metrics.clone(),
            start,
            announcer(progress),
        ))),
        _ => None,
    };
    let sampler = soak_probe(options, target, client, load, groups)?.map(|(plan, probe)| {
        let announce: Option<Box<dyn Fn(String) + Send>> =
            (!options.quiet).then(|| Box::new(announcer(progress)) as _);
        let live = Arc::clone(&live);
        tokio::spawn(soak_sampler::sample(probe, plan, live, start, announce))
    });
    let producers: Vec<_> = (0..options.producers)
        .map(|producer| {
            let live = Arc::clone(&live);
            let task = load::produce(client.clone(), Arc::clone(load), producer, 0, start, live);
            tokio::spawn(task)
        })
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    let consumers = spawn_consumers(options, client, load, start, &live, &done);
    let ticker = tokio::spawn(tick(progress.clone(), Arc::clone(&live), start, load.stop));
    let mut measured = Measured {
        producers: Vec::new(),
        consumers: Vec::new(),
        failover: None,
        soak_samples: None,
    };
    for producer in producers {
        measured.producers.push(joined(producer.await)??);
    }
    done.store(true, Ordering::Relaxed);
    for consumer in consumers {
        measured.consumers.push(joined(consumer.await)?);
    }
    if let Some(controller) = controller {
        measured.failover = Some(joined(controller.await)??);
    }
    if let Some(sampler) = sampler {
        measured.soak_samples = Some(joined(sampler.await)??);
    }
    ticker.abort();
    progress.finish_and_clear();
    Ok(measured)
}

/// Starts the consumer tasks: with `--group`, `--consumers` members of that
/// consumer group; else a tailing consumer per partition (see
/// [`consumer_partitions`]). Each reads until `done` is set and it has
/// caught up.
fn spawn_consumers(
    options: &Options,
    client: &Client,
    load: &Arc<Load>,
    start: Instant,
    live: &Arc<Live>,
    done: &Arc<AtomicBool>,
) -> Vec<JoinHandle<ConsumerOutcome>> {
    if let Some(group) = &options.group {
        let group: Arc<str> = Arc::from(group.as_str());
        return (0..options.consumers)
            .map(|member| {
                tokio::spawn(consumer_group::consume_as_member(
                    client.clone(),
                    Arc::clone(load),
                    Arc::clone(&group),
                    member,
                    start,
                    Arc::clone(live),
                    Arc::clone(done),
                ))
            })
            .collect();
    }
    consumer_partitions(options.consumers, options.partitions)
        .into_iter()
        .map(|partition| {
            tokio::spawn(load::consume(
                client.clone(),
                Arc::clone(load),
                partition,
                start,
                Arc::clone(live),
                Arc::clone(done),
            ))
        })
        .collect()
}

/// The soak's plan and what its sampler reads, if this is a soak (on a
/// local cluster: its nodes' data directories are what it measures).
fn soak_probe(
    options: &Options,
    target: &Target,
    client: &Client,
    load: &Arc<Load>,
    groups: &[u64],
) -> Result<Option<(SoakPlan, SoakProbe)>, BenchError> {
    let (Some(plan), Some(cluster)) = (options.soak_plan(), &target.local) else {
        return Ok(None);
    };
    let nodes = lock(cluster)?
        .nodes()
        .iter()
        .map(|node| (node.node, node.data_dir.clone()))
        .collect();
    let probe = SoakProbe {
        client: client.clone(),
        load: Arc::clone(load),
        groups: groups.to_vec(),
        nodes,
    };
    Ok(Some((plan, probe)))
}

fn open_target(options: &Options) -> Result<Target, BenchError> {
    if !options.cluster.is_empty() {
        let metrics = (1..).zip(options.metrics.iter().cloned()).collect();
        return Ok(Target {
            local: None,
            bootstrap: options.cluster.clone(),
            metrics,
            nodes: options.cluster.len() as u32,
            ca: options.ca.clone(),
            admin: None,
        });
    }
    let server_bin = cluster::locate_server_binary(options.server_bin.as_deref())?;
    let local = LocalCluster::start(
        options.nodes,
        server_bin,
        options.data_dir.clone(),
        options.tls,
        options.node_io,
    )?;
    let metrics = local
        .nodes()
        .iter()
        .map(|node| (node.node, node.metrics_address.clone()))
        .collect();
    Ok(Target {
        ca: local.ca().map(Path::to_path_buf),
        admin: local.admin(),
        bootstrap: local.bootstrap(),
        metrics,
        nodes: options.nodes,
        local: Some(Arc::new(Mutex::new(local))),
    })
}

/// An SDK client, once some node answers (nodes take a moment to bind).
pub async fn connect(
    bootstrap: &[String],
    ca: Option<&Path>,
    credentials: Option<&strand_client::Credentials>,
) -> Result<Client, BenchError> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let mut config = ClientConfig::new(bootstrap.to_vec());
        config.tls = ca.map(strand_client::tls::ClientTls::new);
        config.credentials = credentials.cloned();
        config.cluster = cluster::CLUSTER_ID;
        config.in_flight_per_group_max = strand_client_window_max();
        match Client::connect(config).await {
            Ok(client) => return Ok(client),
            Err(error) if Instant::now() >= deadline => {
                return Err(BenchError::client("connect", error));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// On a cluster that requires signing in: signs in as admin, makes a user
/// `bench` that may manage, produce to and consume the bench's stream (and
/// nothing else), and returns a client signed in as it, so that every
/// request the bench sends pays the node's rights check.
async fn bench_user(
    target: &Target,
    admin: &strand_client::Credentials,
) -> Result<Client, BenchError> {
    let ca = target.ca.as_deref();
    let admin = connect(&target.bootstrap, ca, Some(admin)).await?;
    let password = format!("bench-user-{}", std::process::id());
    admin
        .create_user("bench", &password)
        .await
        .map_err(|error| BenchError::client("create the bench user", error))?;
    for right in ["manage", "produce", "consume"] {
        let permission = strand_client::users::parse_permission(&format!("{right}:{STREAM}"))
            .map_err(|reason| {
                BenchError::client(
                    "grant the bench user",
                    ClientError::InvalidArgument { reason },
                )
            })?;
        admin
            .grant_permission("bench", permission)
            .await
            .map_err(|error| BenchError::client("grant the bench user", error))?;
    }
    let bench = strand_client::Credentials::password("bench", password);
    connect(&target.bootstrap, ca, Some(&bench)).await
}

/// The SDK's largest window: several producers share a group's window.
fn strand_client_window_max() -> usize {
    strand_client::session::WINDOW_MAX
}

/// Creates the stream (if new) and a fresh topic; its load and group ids.
async fn create_topic(client: &Client, options: &Options) -> Result<(Load, Vec<u64>), BenchError> {
    match client.create_stream(STREAM).await {
        Ok(()) | Err(ClientError::AlreadyExists { .. }) => {}
        Err(error) => return Err(BenchError::client("create stream", error)),
    }
    let unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis());
    let topic = format!("load-{unix_ms}");
    let mut spec = TopicSpec::new(STREAM, topic.clone());
    spec.partition_count = options.partitions;
    spec.replica_count = options.replica_count();
    spec.durability = options.durability.map(|flag| flag.durability());
    spec.retention_bytes = options.retention_bytes.unwrap_or(0);
    spec.segment_bytes = options.topic_segment_bytes();
    let groups = client
        .create_topic(spec)
        .await
        .map_err(|error| BenchError::client(format!("create topic {STREAM}/{topic}"), error))?;
    let load = Load {
        stream: STREAM.to_owned(),
        topic,
        producers: options.producers,
        partitions: options.partitions,
        message_size: options.message_size,
        batch: options.batch,
        in_flight: options.in_flight,
        linger_ms: options.linger_ms,
        stop: options.stop(),
        rate: options.rate,
        spread: options.spread,
    };
    Ok((load, groups))
}

/// Which partition each consumer task tails: consumer `c` takes partitions
/// `c, c + C, …`; with more consumers than partitions, several share one.
pub fn consumer_partitions(consumers: u32, partitions: u32) -> Vec<u32> {
    if consumers == 0 {
        Vec::new()
    } else if consumers <= partitions {
        (0..partitions).collect()
    } else {
        (0..consumers)
            .map(|consumer| consumer % partitions)
            .collect()
    }
}

fn progress_bar(options: &Options) -> ProgressBar {
    if options.quiet {
        return ProgressBar::hidden();
    }
    let (length, template) = match options.stop() {
        Stop::After(duration) => (
            duration.as_millis() as u64,
            "{spinner} [{elapsed_precise}] [{bar:40}] {msg}",
        ),
        Stop::Messages(messages) => (
            messages,
            "{spinner} [{elapsed_precise}] [{bar:40}] {pos}/{len} {msg}",
        ),
    };
    let bar = ProgressBar::new(length);
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Prints a line above the progress bar (or to stderr without one).
fn announcer(progress: &ProgressBar) -> impl Fn(String) + Send + 'static {
    let progress = progress.clone();
    move |line| {
        if progress.is_hidden() {
            eprintln!("{line}");
        } else {
            progress.println(line);
        }
    }
}

/// Updates the progress bar four times a second with the live rate.
async fn tick(progress: ProgressBar, live: Arc<Live>, start: Instant, stop: Stop) {
    let mut interval = tokio::time::interval(Duration::from_millis(250));
    let mut window: std::collections::VecDeque<(Instant, u64)> = Default::default();
    loop {
        interval.tick().await;
        let now = Instant::now();
        let acked = live.acknowledged.load(Ordering::Relaxed);
        let failed = live.failed.load(Ordering::Relaxed);
        window.push_back((now, acked));
        while window.len() > 5 {
            window.pop_front();
        }
        let rate = match (window.front(), window.back()) {
            (Some((first, first_acked)), Some((last, last_acked))) if last > first => {
                (last_acked - first_acked) as f64 / last.duration_since(*first).as_secs_f64()
            }
            _ => 0.0,
        };
        match stop {
            Stop::After(_) => progress.set_position(now.duration_since(start).as_millis() as u64),
            Stop::Messages(_) => progress.set_position(acked + failed),
        }
        progress.set_message(format!(
            "{acked} acked, {rate:.0} msgs/s, {failed} failed, {} consumed",
            live.consumed.load(Ordering::Relaxed)
        ));
    }
}

async fn failover_report(
    client: &Client,
    target: &Target,
    group: u64,
    events: &FailoverEvents,
    outcomes: &[ProducerOutcome],
) -> failover::FailoverReport {
    let mut ack_ms: Vec<u64> = outcomes
        .iter()
        .flat_map(|outcome| outcome.benched_ack_ms.iter().copied())
        .collect();
    ack_ms.sort_unstable();
    ack_ms.dedup();
    let last_ack_ms = ack_ms.last().copied().unwrap_or(events.killed_at_ms);
    let window_end = events
        .restarted_at_ms
        .unwrap_or(last_ack_ms)
        .max(events.killed_at_ms);
    let gap = write_gap::write_gap(&ack_ms, events.killed_at_ms, window_end);
    let view_changes = failover::view_changes(&target.metrics, group).await;
    let (view_after, primary_after) = failover::final_view(client, group).await;
    failover::report(events, gap, &view_changes, view_after, primary_after)
}

fn build_report(options: &Options, target: &Target, outcome: RunOutcome) -> Report {
    let RunOutcome {
        measured,
        failover,
        verification,
        node_exits,
    } = outcome;
    let (outcomes, consumed) = (measured.producers, measured.consumers);
    let mut produce_latency = latency::histogram();
    let mut timeline = Timeline::default();
    let mut acknowledged = 0;
    let mut failed = 0;
    let mut last_ack_ms = 0;
    let mut errors = Vec::new();
    for outcome in &outcomes {
        produce_latency
            .add(&outcome.latency)
            .expect("latency histograms share their bounds");
        timeline.merge(&outcome.timeline);
        acknowledged += outcome.acknowledged.len() as u64;
        failed += outcome.failed.len() as u64;
        last_ack_ms = last_ack_ms.max(outcome.last_ack_ms);
        errors.extend(outcome.first_error.clone());
    }
    let bytes = acknowledged * options.message_size as u64;
    let produced = Throughput::new(acknowledged, bytes, last_ack_ms as f64 / 1e3);
    let consumed = (!consumed.is_empty()).then(|| consume_report(&consumed, &mut errors));
    let soak = match (options.soak_plan(), measured.soak_samples) {
        (Some(plan), Some(samples)) => Some(SoakReport::judge(
            plan,
            options.retention(),
            options.partitions,
            samples,
        )),
        _ => None,
    };
    Report {
        config: run_config(options, target),
        produced,
        produce_failed: failed,
        produce_ack_latency: latency::summarize(&produce_latency),
        consumed,
        failover,
        verification,
        soak,
        timeline: timeline.rows(),
        node_exits,
        errors,
    }
}

/// What was run, for the report.
fn run_config(options: &Options, target: &Target) -> RunConfig {
    RunConfig {
        cluster: if target.local.is_some() {
            "local"
        } else {
            "external"
        }
        .to_owned(),
        nodes: target.nodes,
        tls: target.ca.is_some(),
        replicas: options.replica_count(),
        durability: options
            .durability
            .map_or("default", |flag| flag.name())
            .to_owned(),
        producers: options.producers,
        consumers: options.consumers,
        group: options.group.clone(),
        partitions: options.partitions,
        message_size: options.message_size,
        batch: options.batch,
        in_flight: options.in_flight,
        linger_ms: options.linger_ms,
        spread: options.spread,
        duration_secs: match options.stop() {
            Stop::After(duration) => Some(duration.as_secs_f64()),
            Stop::Messages(_) => None,
        },
        messages: options.messages,
        rate: options.rate,
        retention_bytes: options.retention_bytes,
        segment_bytes: options.topic_segment_bytes(),
        cores: std::thread::available_parallelism().map_or(0, usize::from),
    }
}

fn consume_report(consumed: &[ConsumerOutcome], errors: &mut Vec<String>) -> ConsumeReport {
    let mut end_to_end = latency::histogram();
    let (mut records, mut bytes) = (0, 0);
    for outcome in consumed {
        end_to_end
            .add(&outcome.end_to_end)
            .expect("latency histograms share their bounds");
        records += outcome.records;
        bytes += outcome.bytes;
        errors.extend(outcome.first_error.clone());
    }
    let last_read_ms = consumed
        .iter()
        .map(|outcome| outcome.last_read_ms)
        .max()
        .unwrap_or(0);
    ConsumeReport {
        throughput: Throughput::new(records, bytes, last_read_ms as f64 / 1e3),
        end_to_end_latency: latency::summarize(&end_to_end),
    }
}

fn joined<T>(result: Result<T, tokio::task::JoinError>) -> Result<T, BenchError> {
    result.map_err(|error| BenchError::Cluster(format!("a bench task failed: {error}")))
}

fn lock(
    cluster: &Mutex<LocalCluster>,
) -> Result<std::sync::MutexGuard<'_, LocalCluster>, BenchError> {
    cluster
        .lock()
        .map_err(|_| BenchError::Cluster("the cluster handle was poisoned".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_partition_has_a_consumer_and_extra_consumers_share() {
        assert_eq!(consumer_partitions(0, 3), Vec::<u32>::new());
        assert_eq!(consumer_partitions(1, 3), vec![0, 1, 2]);
        assert_eq!(consumer_partitions(4, 2), vec![0, 1, 0, 1]);
    }
}
