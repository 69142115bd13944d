//! `strand-sim`: run one seed or a batch of seeds of the cluster simulator.
//!
//! Exit status 0 means every checker held on every seed.

use std::ops::Range;
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::{Parser, ValueEnum};
use strand_sim::world::Stats;
use strand_sim::{Outcome, Overrides, run_seed};
use strand_wire::Durability;

/// Deterministic cluster simulator for Strand's replication.
#[derive(Debug, Parser)]
#[command(name = "strand-sim", version)]
struct Args {
    /// Run this one seed.
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// Run a batch of seeds, `A..B` (B excluded).
    #[arg(long, value_parser = parse_range)]
    seeds: Option<Range<u64>>,
    /// Fix the replica count instead of drawing it from the seed.
    #[arg(long)]
    replicas: Option<u8>,
    /// Fix the ticks of the faulty phase.
    #[arg(long)]
    ticks: Option<u64>,
    /// Fix the durability policy.
    #[arg(long, value_enum)]
    durability: Option<DurabilityArg>,
    /// Reassign the group at random during faults: replicas join, leave and
    /// are replaced, the confirm policy changes.
    #[arg(long)]
    reassign: bool,
    /// Leave lost writes out of the storage faults at restart (an entry
    /// written over another's place, zeros where it belonged; the newest
    /// entries gone without a trace): the fault model seeds were found with
    /// before they joined it.
    #[arg(long)]
    no_lost_writes: bool,
    /// Run with a protection switched off (needs the `mutations` feature).
    #[arg(long, value_enum)]
    mutation: Option<Mutation>,
    /// Print the last events of a failing (or single) run.
    #[arg(long)]
    trace: bool,
    /// Threads for a batch (default: available cores).
    #[arg(long)]
    jobs: Option<usize>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DurabilityArg {
    Persisted,
    Replicated,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Mutation {
    /// The view change merges without R trusted DoViewChanges.
    UntrustedGate,
    /// A view change into a new epoch hears only R' of the new membership,
    /// not R of the old one (meaningful with `--reassign`).
    NewQuorumOnly,
    /// A partition reopened after an unclean stop under `replicated`
    /// reports its log trusted.
    TrustUnclean,
    /// A cut reports done without touching the partition: a replica that
    /// adopts a shorter log keeps its longer tail and the cursor events past
    /// the view's start.
    SkipCut,
    /// A state transfer is installed without its marker: a power loss
    /// between the swap's renames leaves no partition, and the replica
    /// reopens as a fresh one (meaningful with `--reassign`).
    InstallUnmarked,
    /// Every clean stop resumes in its view, even that of a replica back
    /// from a crash that had not yet learned its view again: a primary
    /// then prepares a second op at a number it had sent before.
    ResumeAnyStop,
    /// An open cuts a log ending in damaged bytes as a plain torn write,
    /// without first marking its ops maybe acked: a damaged acked last entry
    /// is then counted as never had in a view change.
    TrustDamagedTail,
    /// An open after a crash rewrites the other superblock copy without
    /// syncing the chosen one, which a crashed process may have left in the
    /// page cache only.
    SuperblockUnsynced,
    /// A group reopened after a failed fsync (or write) trusts what the page
    /// cache shows instead of dropping its log's tail past the durable
    /// checkpoint: bytes no fsync made durable are counted durable and acked.
    PageCacheTrusted,
    /// A read returns what the log holds past the high watermark: records
    /// not yet committed, which a view change may yet drop.
    ReadsUncommitted,
}

impl Mutation {
    /// The flag's value, as typed.
    fn name(self) -> &'static str {
        match self {
            Mutation::UntrustedGate => "untrusted-gate",
            Mutation::NewQuorumOnly => "new-quorum-only",
            Mutation::TrustUnclean => "trust-unclean",
            Mutation::SkipCut => "skip-cut",
            Mutation::InstallUnmarked => "install-unmarked",
            Mutation::ResumeAnyStop => "resume-any-stop",
            Mutation::TrustDamagedTail => "trust-damaged-tail",
            Mutation::SuperblockUnsynced => "superblock-unsynced",
            Mutation::PageCacheTrusted => "page-cache-trusted",
            Mutation::ReadsUncommitted => "reads-uncommitted",
        }
    }
}

fn parse_range(text: &str) -> Result<Range<u64>, String> {
    let (start, end) = text.split_once("..").ok_or("expected A..B")?;
    let start: u64 = start.parse().map_err(|_| format!("bad start {start:?}"))?;
    let end: u64 = end.parse().map_err(|_| format!("bad end {end:?}"))?;
    if start >= end {
        return Err("the range is empty".into());
    }
    Ok(start..end)
}

fn replay_command(args: &Args, seed: u64) -> String {
    let mut command = format!("strand-sim --seed {seed}");
    if let Some(replicas) = args.replicas {
        command.push_str(&format!(" --replicas {replicas}"));
    }
    if let Some(ticks) = args.ticks {
        command.push_str(&format!(" --ticks {ticks}"));
    }
    if let Some(durability) = args.durability {
        command.push_str(&format!(
            " --durability {}",
            format!("{durability:?}").to_lowercase()
        ));
    }
    if args.reassign {
        command.push_str(" --reassign");
    }
    if args.no_lost_writes {
        command.push_str(" --no-lost-writes");
    }
    if let Some(mutation) = args.mutation {
        command.push_str(&format!(" --mutation {}", mutation.name()));
    }
    command.push_str(" --trace");
    command
}

fn summary(outcome: &Outcome) -> String {
    let stats = &outcome.stats;
    let options = &outcome.options;
    let reassignments = if options.reassigns() {
        format!(
            " epochs={} in_place={} view_change={} joins={} transfers={} retirements={} drops={}",
            stats.epochs_started,
            stats.reassignments_in_place,
            stats.reassignments_view_change,
            stats.joins,
            stats.transfers,
            stats.retirements,
            stats.drops,
        )
    } else {
        String::new()
    };
    let retention = if options.retention_bytes > 0 {
        format!(
            " retention_bytes={} retained_segments={} behind_log_start={} transfers={}",
            options.retention_bytes,
            stats.retained_segments,
            stats.behind_log_start,
            stats.transfers
        )
    } else {
        String::new()
    };
    format!(
        "seed={} hash={:016x} E={} {:?} {} ticks={} committed={} acked={} view_changes={} stops={} storage_faults={} io_faults={} reopens={} quarantines={} accepted_losses={} handovers={} quiet_ticks={}{reassignments}{retention} result={}",
        outcome.seed,
        outcome.trace_hash,
        options.replica_count,
        options.confirm,
        options.durability.name(),
        outcome.ticks,
        stats.committed,
        stats.acked,
        stats.view_changes,
        stats.stops,
        stats.storage_faults,
        stats.io_faults,
        stats.reopens,
        stats.quarantines,
        stats.accepted_losses,
        stats.handovers,
        stats.quiet_ticks,
        match &outcome.violation {
            None => "ok".to_string(),
            Some(violation) => format!("VIOLATION {violation}"),
        }
    )
}

fn main() -> ExitCode {
    let args = Args::parse();
    // The replicas' own logs (host, partition, WAL), for replaying a seed.
    if let Ok(filter) = std::env::var("STRAND_SIM_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    if let Some(mutation) = args.mutation.filter(|_| !cfg!(feature = "mutations")) {
        eprintln!(
            "--mutation {} needs a build with `--features mutations`",
            mutation.name()
        );
        return ExitCode::from(2);
    }
    let overrides = Overrides {
        replica_count: args.replicas,
        durability: args.durability.map(|durability| match durability {
            DurabilityArg::Persisted => Durability::Persisted,
            DurabilityArg::Replicated => Durability::Replicated,
        }),
        ticks: args.ticks,
        mutation_untrusted_gate: args.mutation == Some(Mutation::UntrustedGate),
        reassign: args.reassign,
        mutation_new_quorum_only: args.mutation == Some(Mutation::NewQuorumOnly),
        mutation_trust_unclean: args.mutation == Some(Mutation::TrustUnclean),
        mutation_skip_cut: args.mutation == Some(Mutation::SkipCut),
        mutation_install_unmarked: args.mutation == Some(Mutation::InstallUnmarked),
        mutation_resume_any_stop: args.mutation == Some(Mutation::ResumeAnyStop),
        mutation_trust_damaged_tail: args.mutation == Some(Mutation::TrustDamagedTail),
        mutation_superblock_unsynced: args.mutation == Some(Mutation::SuperblockUnsynced),
        mutation_page_cache_trusted: args.mutation == Some(Mutation::PageCacheTrusted),
        mutation_reads_uncommitted: args.mutation == Some(Mutation::ReadsUncommitted),
        without_lost_writes: args.no_lost_writes,
    };
    if let Some(seed) = args.seed {
        let (outcome, trace) =
            run_seed(seed, &overrides, if args.trace { trace_lines() } else { 0 });
        if args.trace {
            for line in trace.lines() {
                println!("{line}");
            }
        }
        println!("{}", summary(&outcome));
        if outcome.violation.is_some() {
            println!("replay: {}", replay_command(&args, seed));
            return ExitCode::FAILURE;
        }
        return ExitCode::SUCCESS;
    }
    let seeds = args.seeds.clone().unwrap_or(0..100);
    run_batch(&args, &overrides, seeds)
}

fn run_batch(args: &Args, overrides: &Overrides, seeds: Range<u64>) -> ExitCode {
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let started = Instant::now();
    let batch = Batch::default();
    batch.next.store(seeds.start, Ordering::Relaxed);
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            let (batch, seeds) = (&batch, seeds.clone());
            scope.spawn(move || batch.run(overrides, seeds.end));
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    let mut failures = batch.failures.lock().expect("threads joined").clone();
    failures.sort_unstable();
    let total = seeds.end - seeds.start;
    let ticks = batch.ticks.load(Ordering::Relaxed);
    println!(
        "seeds {}..{}: {} run, {} failed, {:.1} s, {:.0} seeds/s, {:.0} simulated ticks/s",
        seeds.start,
        seeds.end,
        total,
        failures.len(),
        elapsed,
        total as f64 / elapsed,
        ticks as f64 / elapsed
    );
    if args.reassign {
        batch.print_reassignments(total);
    }
    if failures.is_empty() {
        return ExitCode::SUCCESS;
    }
    println!("failing seeds: {failures:?}");
    for seed in failures.iter().take(5) {
        println!("replay: {}", replay_command(args, *seed));
    }
    ExitCode::FAILURE
}

/// What the threads of a batch share: the next seed, the failing seeds and
/// the totals.
#[derive(Default)]
struct Batch {
    next: AtomicU64,
    failures: Mutex<Vec<u64>>,
    totals: Mutex<Stats>,
    ticks: AtomicU64,
    quiet_ticks_max: AtomicU64,
}

impl Batch {
    /// Runs seeds until none below `end` is left, adding up what they did.
    fn run(&self, overrides: &Overrides, end: u64) {
        loop {
            let seed = self.next.fetch_add(1, Ordering::Relaxed);
            if seed >= end {
                break;
            }
            let (outcome, _) = run_seed(seed, overrides, 0);
            self.ticks.fetch_add(outcome.ticks, Ordering::Relaxed);
            self.quiet_ticks_max
                .fetch_max(outcome.stats.quiet_ticks, Ordering::Relaxed);
            self.totals
                .lock()
                .expect("no thread panics holding it")
                .add(&outcome.stats);
            if outcome.violation.is_some() {
                println!("{}", summary(&outcome));
                self.failures
                    .lock()
                    .expect("no thread panics holding it")
                    .push(seed);
            }
        }
    }

    /// The reassignment runs' totals: groups left not quiet, and the changes.
    fn print_reassignments(&self, total: u64) {
        let totals = self.totals.lock().expect("threads joined");
        println!(
            "quiescence: {} of {total} runs ended with the idle, healed group not quiet (counted; STRAND_SIM_QUIET_STRICT=1 fails them)",
            totals.not_quiet
        );
        println!(
            "reassignments: {} in place, {} by view change; {} epochs started; {} joins, {} state transfers, {} retirements, {} drops; longest quiet phase {} ticks",
            totals.reassignments_in_place,
            totals.reassignments_view_change,
            totals.epochs_started,
            totals.joins,
            totals.transfers,
            totals.retirements,
            totals.drops,
            self.quiet_ticks_max.load(Ordering::Relaxed),
        );
    }
}

/// Trace lines a single run keeps (`STRAND_SIM_TRACE_LINES`, default 400).
fn trace_lines() -> usize {
    std::env::var("STRAND_SIM_TRACE_LINES")
        .ok()
        .and_then(|lines| lines.parse().ok())
        .unwrap_or(400)
}
