//! The `strand-scale` binary: parse the flags, run the scale mode, print
//! the summary, write the JSON. Exit 0 when every phase settled, 1 when one
//! did not (or a node exited on its own), 2 when the run could not run.

use std::process::ExitCode;

use clap::Parser;
use strand_bench::BenchError;
use strand_bench::scale::{ScaleOptions, ScaleReport};

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
    if let Err(error) = write_json(&options, &report) {
        eprintln!("strand-scale: {error}");
        return ExitCode::from(2);
    }
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn write_json(options: &ScaleOptions, report: &ScaleReport) -> Result<(), BenchError> {
    let Some(path) = &options.json else {
        return Ok(());
    };
    let json = serde_json::to_string_pretty(report)
        .map_err(|error| BenchError::Output(format!("report as JSON: {error}")))?;
    std::fs::write(path, json + "\n")
        .map_err(|error| BenchError::Output(format!("cannot write {}: {error}", path.display())))
}
