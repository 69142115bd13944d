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
    let report = match runtime.block_on(strand_bench::scale::run(&options)) {
        Ok(report) => report,
        Err(error) => {
            eprintln!("strand-scale: {error}");
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
