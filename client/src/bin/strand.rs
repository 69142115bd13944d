//! `strand`: the Strand command line. A thin wrapper: the commands live in
//! [`strand_client::cli`], so tests run them in-process.

use std::process::ExitCode;

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    let outcome = runtime.block_on(strand_client::cli::run(
        std::env::args_os(),
        stdin,
        &mut stdout,
        &mut stderr,
    ));
    outcome.into()
}
