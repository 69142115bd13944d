//! # Scale mode (`strand-scale`)
//!
//! How Strand behaves with many partitions, as an operator would see it:
//! start a local cluster, create `T` topics of `P` partitions, and measure
//! the time until every group is normal, the view changes that took, what
//! the nodes cost at idle once every group is quiet (CPU, memory, threads),
//! and optionally a clean restart of every node, a SIGKILL of the node that
//! is primary of the most partitions (until each of them takes a write
//! again, then until leadership is balanced again once it is back), a
//! SIGKILL of every node (the settle, and each group's view changes), and
//! produce throughput over one partition and over every partition, with
//! the same producers (in rounds of alternating order).
//!
//! Phases run in that order; a phase that does not settle within
//! `--settle-timeout-secs` ends the run there (the report says what was
//! skipped, and the run fails).
//!
//! | module | owns |
//! |---|---|
//! | [`options`] | the flags, their defaults and bounds |
//! | [`create`] | the stream and topics, created with retries; their groups |
//! | [`settle`] | **pure**: the settled and quiet predicates, view-change counts, primaries |
//! | [`procfs`] | **pure** parsers of `/proc/PID/stat` and `status`, and their readers |
//! | [`machine`] | **pure** parsers of `/proc/stat` and `/proc/diskstats`: the machine's busy CPU and disk writes over a produce run |
//! | [`observe`] | polling until settled or quiet; the idle measurement |
//! | [`writes`] | the writes after a kill; the throughput load |
//! | [`report`] | the result: summary table, JSON |

pub mod create;
pub mod machine;
pub mod observe;
pub mod options;
pub mod procfs;
pub mod report;
pub mod settle;
pub mod writes;

use std::fmt::Display;
use std::time::Duration;

use strand_client::Client;
use tokio::time::Instant;

use crate::cluster::{self, LocalCluster};
use crate::error::BenchError;
use create::Layout;
use machine::{MachineLoad, MachineSample};
use observe::SettleWait;
pub use options::ScaleOptions;
pub use report::ScaleReport;
use report::{
    IdlePhase, KillAllPhase, KillPhase, RebalancePhase, RestartPhase, ScaleConfig, SettlePhase,
    ThroughputPhase, ThroughputRound,
};
use settle::{Expectation, GroupViewChanges, ViewHighs};

/// How long a node may take to exit after SIGTERM before it is SIGKILLed.
pub const TERMINATE_TIMEOUT: Duration = Duration::from_secs(60);

/// Progress lines on stderr, stamped with the seconds since the spawn.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    quiet: bool,
    t0: Instant,
}

impl Progress {
    /// Lines stamped from `t0`; none at all when `quiet`.
    pub fn new(quiet: bool, t0: Instant) -> Progress {
        Progress { quiet, t0 }
    }

    /// Prints `line` (unless quiet).
    pub fn say(&self, line: impl Display) {
        if !self.quiet {
            eprintln!("[{:8.1} s] {line}", self.t0.elapsed().as_secs_f64());
        }
    }
}

/// Runs the scale mode `options` describe. `Ok` even when a phase did not
/// settle (see [`ScaleReport::passed`]). Needs tokio's multi-thread
/// runtime: a clean restart waits for the processes on a worker thread.
pub async fn run(options: &ScaleOptions) -> Result<ScaleReport, BenchError> {
    options.validate()?;
    let server_bin = cluster::locate_server_binary(options.server_bin.as_deref())?;
    let t0 = Instant::now();
    let cluster = LocalCluster::start(
        options.nodes,
        server_bin,
        options.data_dir.clone(),
        false,
        options.node_io,
    )?;
    let progress = Progress::new(options.quiet, t0);
    progress.say(format!(
        "started {} nodes in {}",
        options.nodes,
        cluster.dir().display()
    ));
    let client = crate::run::connect(&cluster.bootstrap(), cluster.ca(), None).await?;
    let create_started = Instant::now();
    let deadline = create_started + options.settle_timeout();
    let replicas = options.replica_count();
    let layout = create::create_all(
        &client,
        options.topics,
        options.partitions,
        replicas,
        deadline,
    )
    .await?;
    let create_secs = create_started.elapsed().as_secs_f64();
    progress.say(format!(
        "created {} topics x {} partitions in {create_secs:.2} s",
        options.topics, options.partitions
    ));
    let mut scale = Scale::new(options, cluster, client, layout, progress);
    let (settle, _) = scale.settle(t0, &ViewHighs::default()).await;
    scale.say_settled("from spawn", &settle);
    let mut report = ScaleReport {
        config: config(options),
        create_secs,
        settle,
        idle: None,
        restart: None,
        kill: None,
        kill_all: None,
        throughput: None,
        skipped: Vec::new(),
        node_exits: Vec::new(),
        errors: Vec::new(),
    };
    scale.phases(&mut report).await?;
    report.node_exits = scale
        .cluster
        .exited()
        .into_iter()
        .map(|(node, status)| format!("node {node}: {status}"))
        .collect();
    report.errors = scale.errors;
    Ok(report)
}

/// What was run, for the report.
fn config(options: &ScaleOptions) -> ScaleConfig {
    ScaleConfig {
        nodes: options.nodes,
        replicas: options.replica_count(),
        topics: options.topics,
        partitions: options.partitions,
        partition_groups: options.partition_groups(),
        idle_secs: options.idle_secs,
        settle_timeout_secs: options.settle_timeout_secs,
        restart: options.restart,
        kill: options.kill,
        kill_all: options.kill_all,
        produce_secs: options.produce_secs,
        producers: options.producers,
        produce_rounds: options.produce_rounds,
        message_size: options.message_size,
        batch: options.batch,
        cores: std::thread::available_parallelism().map_or(0, usize::from),
    }
}

/// One scale run's state between its phases.
struct Scale<'a> {
    options: &'a ScaleOptions,
    cluster: LocalCluster,
    client: Client,
    layout: Layout,
    expected: Expectation,
    /// `(node, metrics address)` of every node.
    metrics: Vec<(u32, String)>,
    /// The highest view seen of every group, over the whole run.
    highs: ViewHighs,
    progress: Progress,
    errors: Vec<String>,
}

impl<'a> Scale<'a> {
    fn new(
        options: &'a ScaleOptions,
        cluster: LocalCluster,
        client: Client,
        layout: Layout,
        progress: Progress,
    ) -> Scale<'a> {
        let expected = Expectation {
            nodes: options.nodes,
            replicas: options.replica_count(),
            groups: layout.groups(),
        };
        assert_eq!(expected.groups.len() as u64, options.partition_groups());
        let metrics = cluster
            .nodes()
            .iter()
            .map(|node| (node.node, node.metrics_address.clone()))
            .collect();
        Scale {
            options,
            cluster,
            client,
            layout,
            expected,
            metrics,
            highs: ViewHighs::default(),
            progress,
            errors: Vec::new(),
        }
    }

    /// The phases after the first settle, each only if the one before settled.
    async fn phases(&mut self, report: &mut ScaleReport) -> Result<(), BenchError> {
        let options = self.options;
        let mut later = Vec::from(["idle"]);
        later.extend(options.restart.then_some("restart"));
        later.extend(options.kill.then_some("kill"));
        later.extend(options.kill_all.then_some("kill all"));
        later.extend(options.produce().map(|_| "throughput"));
        let skip = |report: &mut ScaleReport, done: usize, why: &str| {
            let skipped = later[done..].join(", ");
            if !skipped.is_empty() {
                report.skipped.push(format!("{skipped}: {why}"));
            }
        };
        if !report.settle.settled {
            skip(report, 0, "the cluster did not settle after its start");
            return Ok(());
        }
        report.idle = Some(self.idle().await);
        let mut done = 1;
        if options.restart {
            let restart = self.restart().await?;
            let settled = restart.settle.settled;
            report.restart = Some(restart);
            done += 1;
            if !settled {
                skip(report, done, "the cluster did not settle after the restart");
                return Ok(());
            }
        }
        if options.kill {
            let kill = self.kill().await?;
            let settled = kill.restart.settled;
            report.kill = Some(kill);
            done += 1;
            if !settled {
                skip(report, done, "the cluster did not settle after the kill");
                return Ok(());
            }
        }
        if options.kill_all {
            let kill_all = self.kill_all().await?;
            let settled = kill_all.settle.settled;
            report.kill_all = Some(kill_all);
            done += 1;
            if !settled {
                skip(
                    report,
                    done,
                    "the cluster did not settle after every node was killed",
                );
                return Ok(());
            }
        }
        if let Some(duration) = options.produce() {
            report.throughput = Some(self.throughput(duration).await?);
        }
        Ok(())
    }

    /// Waits for the cluster to settle; time counts from `since`, view
    /// changes from `before`.
    async fn settle(
        &mut self,
        since: Instant,
        before: &ViewHighs,
    ) -> (SettlePhase, settle::Snapshot) {
        let wait = SettleWait {
            expected: &self.expected,
            metrics: &self.metrics,
            since,
            before,
            timeout: self.options.settle_timeout(),
        };
        let (highs, errors) = (&mut self.highs, &mut self.errors);
        observe::wait_settled(&self.client, wait, highs, &self.progress, errors).await
    }

    fn say_settled(&self, what: &str, settle: &SettlePhase) {
        let changes = settle.view_changes;
        match &settle.unsettled {
            None => self.progress.say(format!(
                "every group normal {:.2} s {what}; views moved: {} partition, {} metadata",
                settle.secs, changes.partition_groups, changes.metadata_group
            )),
            Some(why) => self
                .progress
                .say(format!("NOT settled {:.2} s {what}: {why}", settle.secs)),
        }
    }

    /// Waits for quiet, then measures every node at idle.
    async fn idle(&mut self) -> IdlePhase {
        let mut pids = Vec::new();
        for node in 1..=self.options.nodes {
            match self.cluster.pid(node) {
                Some(pid) => pids.push((node, pid)),
                None => self
                    .errors
                    .push(format!("idle: node {node} is not running")),
            }
        }
        let idle = observe::measure_idle(
            &pids,
            &self.metrics,
            self.options.settle_timeout(),
            self.options.idle(),
            &self.progress,
            &mut self.errors,
        )
        .await;
        self.progress.say(format!(
            "idle: cpu {:.2} % of one core over all nodes, rss {:.1} MiB",
            idle.cpu_percent_total,
            idle.rss_bytes_total as f64 / report::MIB_BYTES
        ));
        idle
    }

    /// SIGTERMs every node, starts them all again, waits for the settle
    /// and measures at idle again.
    async fn restart(&mut self) -> Result<RestartPhase, BenchError> {
        let before = self.highs.clone();
        let nodes: Vec<u32> = (1..=self.options.nodes).collect();
        self.progress.say("SIGTERM to every node");
        let stopping = Instant::now();
        let cluster = &mut self.cluster;
        let terminations =
            tokio::task::block_in_place(|| cluster.terminate_nodes(&nodes, TERMINATE_TIMEOUT))?;
        let shutdown_secs = stopping.elapsed().as_secs_f64();
        for exit in terminations.iter().filter(|exit| !exit.success) {
            self.errors.push(format!(
                "node {} did not shut down cleanly on SIGTERM{}: {}",
                exit.node,
                if exit.killed {
                    " and was SIGKILLed"
                } else {
                    ""
                },
                exit.status
            ));
        }
        self.progress.say(format!(
            "every node exited in {shutdown_secs:.2} s; starting them again"
        ));
        let started = Instant::now();
        for node in &nodes {
            self.cluster.start_node(*node)?;
        }
        let (settle, _) = self.settle(started, &before).await;
        self.say_settled("after the restart", &settle);
        let idle = if settle.settled {
            Some(self.idle().await)
        } else {
            None
        };
        Ok(RestartPhase {
            shutdown_secs,
            terminations,
            settle,
            idle,
        })
    }

    /// SIGKILLs the node that is primary of the most partitions, writes to
    /// each of them until it is taken, restarts the node and waits for the
    /// settle.
    async fn kill(&mut self) -> Result<KillPhase, BenchError> {
        let snapshot = observe::poll(&self.client).await;
        self.highs.record(&snapshot);
        let (node, led) = settle::busiest_primary(&snapshot, &self.expected.groups)
            .ok_or_else(|| BenchError::Cluster("no partition has a normal primary".to_owned()))?;
        let before = self.highs.clone();
        self.cluster.kill_node(node)?;
        let killed_at = Instant::now();
        self.progress.say(format!(
            "SIGKILL node {node}, primary of {} partitions",
            led.len()
        ));
        let partitions = self.layout.partitions_of(&led);
        let deadline = killed_at + self.options.settle_timeout();
        let resumed = writes::resume_writes(
            &self.client,
            &self.layout.stream,
            partitions,
            killed_at,
            deadline,
        )
        .await?;
        let ms = |ms: Option<u64>| ms.map_or("-".to_owned(), |ms| ms.to_string());
        self.progress.say(format!(
            "{}/{} partitions took a write again, half after {} ms, the last {} ms after the kill",
            resumed.accepted,
            led.len(),
            ms(resumed.median_write_ms),
            ms(resumed.last_write_ms)
        ));
        self.cluster.start_node(node)?;
        let restarted_at = Instant::now();
        let (restart, _) = self.settle(restarted_at, &before).await;
        self.say_settled(&format!("after node {node}'s restart"), &restart);
        let rebalance = if restart.settled {
            Some(self.rebalance(restarted_at).await)
        } else {
            None
        };
        Ok(KillPhase {
            killed_node: node,
            partitions_led: led.len() as u64,
            writes_accepted: resumed.accepted,
            last_write_ms: resumed.last_write_ms,
            median_write_ms: resumed.median_write_ms,
            first_error: resumed.first_error,
            restart,
            rebalance,
        })
    }

    /// SIGKILLs every node at once, starts them all again, waits for the
    /// settle and for balanced leadership and quiet, and counts each
    /// group's view changes since.
    async fn kill_all(&mut self) -> Result<KillAllPhase, BenchError> {
        let snapshot = observe::poll(&self.client).await;
        self.highs.record(&snapshot);
        let before = self.highs.clone();
        let nodes: Vec<u32> = (1..=self.options.nodes).collect();
        for node in &nodes {
            self.cluster.kill_node(*node)?;
        }
        self.progress.say("SIGKILL every node; starting them again");
        let started = Instant::now();
        for node in &nodes {
            self.cluster.start_node(*node)?;
        }
        let (settle, _) = self.settle(started, &before).await;
        self.say_settled("after every node was killed", &settle);
        if !settle.settled {
            return Ok(KillAllPhase {
                settle,
                rebalance: None,
                group_view_changes: None,
            });
        }
        let rebalance = self.rebalance(started).await;
        // Handovers and late view changes show in the counters only once
        // every group has come to rest.
        let timeout = self.options.settle_timeout();
        observe::wait_quiet(&self.metrics, timeout, &self.progress).await;
        let (scrapes, errors) = observe::scrape_samples(&self.metrics).await;
        self.errors.extend(errors);
        let changes = GroupViewChanges::from_scrapes(&scrapes, &self.expected.groups);
        self.progress.say(format!(
            "view changes since the kill: partition groups by count {:?}, metadata {}",
            changes.groups_by_count, changes.metadata
        ));
        Ok(KillAllPhase {
            settle,
            rebalance: Some(rebalance),
            group_view_changes: Some(changes),
        })
    }

    /// Waits, from a killed node's restart, for leadership to move back
    /// towards balance.
    async fn rebalance(&mut self, restarted_at: Instant) -> RebalancePhase {
        let wait = observe::wait_balanced(
            &self.client,
            &self.expected,
            restarted_at,
            self.options.rebalance(),
            &mut self.highs,
            &self.progress,
        )
        .await;
        self.progress.say(format!(
            "leadership {} {:.2} s after the restart: largest share {:.1} %",
            if wait.balanced {
                "balanced"
            } else {
                "NOT balanced"
            },
            wait.secs,
            wait.leadership.share_max_percent
        ));
        wait
    }

    /// Produces to one partition and to every partition, for `duration`
    /// each, with the same producers, `--produce-rounds` times. The order
    /// alternates (one first in odd rounds, every first in even ones), so a
    /// machine that slows down as a run goes on does not always slow the
    /// same run of a round.
    async fn throughput(&mut self, duration: Duration) -> Result<ThroughputPhase, BenchError> {
        let mut rounds = Vec::new();
        for round in 0..self.options.produce_rounds {
            let every_first = round % 2 == 1;
            rounds.push(self.throughput_round(duration, every_first).await?);
        }
        Ok(ThroughputPhase::of_rounds(
            self.options.producers,
            self.options.spread,
            self.options.client,
            rounds,
        ))
    }

    /// Lets the cluster come to rest before a produce run: every group
    /// quiet, and the page cache's dirty data written out (`sync`), so that
    /// no run pays for what the previous one left to write back. (It does
    /// not make runs alike: the machine's own speed drifts by a third
    /// between runs, hence the rounds and their median.)
    async fn come_to_rest(&mut self) {
        let timeout = self.options.settle_timeout();
        let (quiet, secs, _) = observe::wait_quiet(&self.metrics, timeout, &self.progress).await;
        if !quiet {
            self.errors.push(format!(
                "throughput: the groups were not all quiet {secs:.1} s after a run"
            ));
        }
        let synced =
            tokio::task::spawn_blocking(|| std::process::Command::new("sync").status()).await;
        if !matches!(synced, Ok(Ok(status)) if status.success()) {
            self.errors.push(format!(
                "throughput: `sync` before a run failed: {synced:?}"
            ));
        }
    }

    /// One round of the throughput phase: one partition and every one, in
    /// the order `every_first` says.
    async fn throughput_round(
        &mut self,
        duration: Duration,
        every_first: bool,
    ) -> Result<ThroughputRound, BenchError> {
        let options = self.options;
        let load = writes::Load {
            producers: options.producers,
            duration,
            message_size: options.message_size,
            batch: options.batch,
            spread: options.spread,
            client: options.client,
        };
        let every = writes::round_robin(&self.layout);
        let mut runs = [
            ("one partition", &every[..1]),
            ("every partition", &every[..]),
        ];
        if every_first {
            runs.reverse();
        }
        let mut done = Vec::with_capacity(runs.len());
        for (what, slots) in runs {
            self.come_to_rest().await;
            self.progress.say(format!(
                "producing to {what} ({}) with {} producers for {:.1} s",
                slots.len(),
                load.producers,
                duration.as_secs_f64()
            ));
            let before = MachineSample::now(self.cluster.dir());
            let started = Instant::now();
            let mut run = writes::produce_for(&self.client, &self.layout, slots, load).await?;
            let after = MachineSample::now(self.cluster.dir());
            run.machine = before
                .zip(after)
                .and_then(|(before, after)| MachineLoad::between(before, after, started.elapsed()));
            let produced = &run.produced;
            self.progress.say(format!(
                "{} records acknowledged: {:.0} msgs/s, {:.2} MB/s",
                produced.records, produced.records_per_sec, produced.megabytes_per_sec
            ));
            done.push(run);
        }
        let second = done.pop().expect("two runs");
        let first = done.pop().expect("two runs");
        let (single, all) = if every_first {
            (second, first)
        } else {
            (first, second)
        };
        Ok(ThroughputRound::new(single, all, every_first))
    }
}
