//! The `strand-bench` binary: parse the flags, run, print the summary,
//! write the JSON and the plot. Exit 0 when the run passed, 1 when the
//! verification (or the failover's view-change count) failed, 2 when the
//! bench could not run.

use std::process::ExitCode;

use clap::Parser;
use strand_bench::{BenchError, Options, Report};

/// The load generator allocates per record (each delivery's completion):
/// with a thousand partitions' batches filling at once, glibc's allocator
/// spent a fifth of the bench's time in its slow paths and the bench, not
/// the cluster, set the pace. mimalloc keeps that cost flat.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let options = Options::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("strand-bench: cannot start a runtime: {error}");
            return ExitCode::from(2);
        }
    };
    let report = match runtime.block_on(strand_bench::run(&options)) {
        Ok(report) => report,
        Err(error) => {
            eprintln!("strand-bench: {error}");
            return ExitCode::from(2);
        }
    };
    print!("{}", report.summary());
    if let Err(error) = write_outputs(&options, &report) {
        eprintln!("strand-bench: {error}");
        return ExitCode::from(2);
    }
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn write_outputs(options: &Options, report: &Report) -> Result<(), BenchError> {
    if let Some(path) = &options.json {
        strand_bench::write_json(path, report)?;
    }
    if let Some(path) = &options.plot {
        std::fs::write(path, strand_bench::plot_report(report)).map_err(|error| {
            BenchError::Output(format!("cannot write {}: {error}", path.display()))
        })?;
    }
    Ok(())
}
