//! The `strand-scale` binary: parse the flags, run the scale mode, print
//! the summary, write the JSON. Exit 0 when every phase settled, 1 when one
//! did not (or a node exited on its own), 2 when the run could not run.

use std::process::ExitCode;

use clap::Parser;
use strand_bench::scale::ScaleOptions;

/// The load generator allocates per record (each delivery's completion):
/// with a thousand partitions' batches filling at once, glibc's allocator
/// spent a fifth of the bench's time in its slow paths and the bench, not
/// the cluster, set the pace. mimalloc keeps that cost flat.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Resolves on SIGINT or SIGTERM: the run is then dropped, and with it the
/// local cluster, whose drop kills its nodes (a killed bench used to leave
/// them running, loading the machine under the next measurement).
async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut terminate), Ok(mut interrupt)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
}

fn main() -> ExitCode {
    let options = ScaleOptions::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("strand-scale: cannot start a runtime: {error}");
            return ExitCode::from(2);
        }
    };
    let run = runtime.block_on(async {
        tokio::select! {
            report = strand_bench::scale::run(&options) => Some(report),
            () = interrupted() => None,
        }
    });
    let report = match run {
        Some(Ok(report)) => report,
        Some(Err(error)) => {
            eprintln!("strand-scale: {error}");
            return ExitCode::from(2);
        }
        None => {
            // The run was dropped with its cluster, whose nodes it killed.
            eprintln!("strand-scale: interrupted; the cluster's nodes are stopped");
            return ExitCode::from(2);
        }
    };
    print!("{}", report.summary());
    if let Some(path) = &options.json
        && let Err(error) = strand_bench::write_json(path, &report)
    {
        eprintln!("strand-scale: {error}");
        return ExitCode::from(2);
    }
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
