//! The `strand-scale` binary: parse the flags, run the scale mode, print
//! the summary, write the JSON. Exit 0 when every phase settled, 1 when one
//! did not (or a node exited on its own), 2 when the run could not run.

use std::process::ExitCode;

use clap::Parser;
use strand_bench::scale::ScaleOptions;

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
