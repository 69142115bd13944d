//! The `strand` command line as a library: [`run`] parses the arguments,
//! connects, runs one command and returns its [`Outcome`]; the `strand`
//! binary is a thin wrapper, and tests drive [`run`] in-process with a stdin
//! buffer and output vectors.
//!
//! Modules, in reading order:
//!
//! | module | owns |
//! |---|---|
//! | `args` | the clap definitions, a file per command family; parsers of `STREAM/TOPIC`, confirm policies, targets |
//! | `errors` | `CliError`: messages that say what to do, and exit codes |
//! | `table` | **pure**: aligned tables, one-line escaping of record bytes |
//! | `topic` | `stream create/list`, `topic create/list/describe` |
//! | `topic_change` | `topic alter/add-partitions/delete`, `stream delete` (deletes need `--yes`) |
//! | `produce` | `produce`: stdin lines or generated records, bounded in flight |
//! | `consume` | `consume`: from an offset or a stored cursor, once or following |
//! | `status` | `status`: nodes, and every partition's replicas side by side |
//! | `operator` | `attention` and `accept-loss` |
//! | `partition` | `partition reassign` and `partition drop-replica` |
//! | `user` | `user create/list/delete/grant/revoke` (the password from stdin) |
//!
//! Output: human tables on stdout by default; `--json` prints one JSON
//! document (`consume`: one JSON object per record, per line). Errors go to
//! stderr as `error: ...` with a `hint: ...` line where there is something
//! to do. Exit codes are [`Outcome`]'s.

mod args;
mod cert;
mod config_file;
mod consume;
mod consumer_group;
mod cursor;
mod errors;
mod operator;
mod partition;
mod produce;
mod quota;
mod status;
mod table;
mod token;
mod topic;
mod topic_change;
mod user;

use std::ffi::OsString;
use std::io::Write;

use clap::{CommandFactory, FromArgMatches};
use serde::Serialize;
use tokio::io::AsyncBufRead;

pub use args::{DEV_CLUSTER_ADDRESS, GENERATED_RECORD_BYTES_MAX, TIMEOUT_MS_DEFAULT};

use crate::{Client, ClientConfig};
use args::{
    Cli, Command, ConsumerGroupCommand, PartitionCommand, StreamCommand, TokenCommand,
    TopicCommand, UserCommand,
};
use errors::CliError;

/// Longest one attempt of a request may go unanswered before it is resent
/// elsewhere (attempts usually wait less: the cluster's failover time).
const REQUEST_TIMEOUT_MS_MAX: u64 = 5_000;

/// How a `strand` command ended; its process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done (for `attention`: nothing waits, every node answered). Exit code 0.
    Success = 0,
    /// The command failed; stderr says why and what to do. Exit code 1.
    Failed = 1,
    /// Bad arguments, or a required confirmation (`--yes`) is missing. Exit code 2.
    Usage = 2,
    /// `attention`: some partition waits, or some node did not answer. Exit code 3.
    NeedsAttention = 3,
}

impl Outcome {
    /// The process exit code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<Outcome> for std::process::ExitCode {
    fn from(outcome: Outcome) -> std::process::ExitCode {
        std::process::ExitCode::from(outcome.code())
    }
}

/// Runs one `strand` command line (`args[0]` is the program name): reads
/// records from `stdin` (only `produce` does), prints results on `stdout`,
/// and errors, with what to do about them, on `stderr`.
///
/// Must be called inside a tokio runtime (the SDK spawns its driver task).
pub async fn run<I, T>(
    args: I,
    stdin: impl AsyncBufRead + Unpin,
    stdout: &mut impl Write,
    stderr: &mut impl Write,
) -> Outcome
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let parsed = Cli::command()
        .try_get_matches_from(args)
        .and_then(|matches| Ok((Cli::from_arg_matches(&matches)?, matches)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return clap_exit(&error, stdout, stderr),
    };
    let result = match with_config_file(cli, &matches) {
        Ok(cli) => dispatch(cli, stdin, stdout).await,
        Err(error) => Err(error),
    };
    let _ = stdout.flush(); // a closed stdout has nothing left to lose
    match result {
        Ok(()) => Outcome::Success,
        Err(CliError::Io { error, .. }) if error.kind() == std::io::ErrorKind::BrokenPipe => {
            Outcome::Success // `strand consume ... | head`: the reader has what it wanted
        }
        Err(error) => {
            let _ = stderr.write_all(error.message().as_bytes());
            error.outcome()
        }
    }
}

/// The command line completed from the configuration file (see
/// [`config_file`]), its option pairs checked.
fn with_config_file(mut cli: Cli, matches: &clap::ArgMatches) -> Result<Cli, CliError> {
    let config = config_file::for_run(&cli)?;
    config_file::apply(&mut cli, matches, config);
    config_file::check_pairs(&cli)?;
    Ok(cli)
}

/// Prints clap's help, version or usage error where it belongs.
fn clap_exit(error: &clap::Error, stdout: &mut impl Write, stderr: &mut impl Write) -> Outcome {
    let text = error.render().to_string();
    let written = if error.use_stderr() {
        stderr.write_all(text.as_bytes())
    } else {
        stdout.write_all(text.as_bytes())
    };
    let _ = written; // nowhere left to report a failed write
    if error.exit_code() == 0 {
        Outcome::Success
    } else {
        Outcome::Usage
    }
}

async fn dispatch(
    cli: Cli,
    stdin: impl AsyncBufRead + Unpin,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if let Command::Completions { shell } = cli.command {
        return print_completions(shell, out);
    }
    refuse_unconfirmed(&cli.command)?; // before anything is sent
    if let Some(refusal) = delete_refusal(&cli).await {
        return Err(refusal); // nothing deleted; the refusal says what would be
    }
    let client = connect(&cli).await?;
    run_command(&client, cli.command, stdin, cli.json, out).await
}

/// `strand completions SHELL`: the shell's completion script, no cluster
/// needed.
fn print_completions(shell: clap_complete::Shell, out: &mut dyn Write) -> Result<(), CliError> {
    let mut command = Cli::command();
    let mut script = Vec::new(); // generate() panics on a failed write; a Vec never fails
    clap_complete::generate(shell, &mut command, "strand", &mut script);
    out.write_all(&script)?;
    Ok(())
}

/// Refuses a command that needs `--yes` and was run without it (deletes of
/// topics and streams are refused by `delete_refusal`, which asks the
/// cluster what they would delete).
fn refuse_unconfirmed(command: &Command) -> Result<(), CliError> {
    if let Command::AcceptLoss(accept) = command {
        if !accept.yes {
            return Err(operator::refusal(&accept.target));
        }
    }
    if let Command::Partition(PartitionCommand::DropReplica(dropping)) = command {
        if !dropping.yes && !dropping.dry_run {
            return Err(partition::drop_refusal(dropping));
        }
    }
    if let Command::User(UserCommand::Delete { name, yes: false }) = command {
        return Err(CliError::Usage(format!(
            "user delete removes user {name} and its permissions; nothing was done. Re-run with --yes"
        )));
    }
    Ok(())
}

/// Runs one command against the cluster: each command family's runner.
async fn run_command(
    client: &Client,
    command: Command,
    stdin: impl AsyncBufRead + Unpin,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        Command::Stream(command) => run_stream(client, command, json, out).await,
        Command::Topic(command) => run_topic(client, command, json, out).await,
        Command::Produce(produce) => produce::run(client, produce, stdin, json, out).await,
        Command::User(command) => user::run(client, command, stdin, json, out).await,
        Command::Token(command) => run_token(client, command, json, out).await,
        Command::Cert(command) => cert::run(client, command, json, out).await,
        Command::Quota(command) => quota::run(client, command, json, out).await,
        Command::Consume(consume) => consume::run(client, consume, json, out).await,
        Command::Cursor(command) => cursor::run(client, command, json, out).await,
        Command::ConsumerGroup(command) => run_consumer_group(client, command, json, out).await,
        Command::Status => status::run(client, json, out).await,
        Command::Attention => operator::attention(client, json, out).await,
        Command::AcceptLoss(accept) => operator::accept_loss(client, accept, json, out).await,
        Command::Partition(command) => run_partition(client, command, json, out).await,
        Command::Completions { .. } => unreachable!("answered before connecting"),
    }
}

/// `strand stream ...`
async fn run_stream(
    client: &Client,
    command: StreamCommand,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        StreamCommand::Create { name } => topic::stream_create(client, &name, json, out).await,
        StreamCommand::List => topic::stream_list(client, json, out).await,
        StreamCommand::Delete(deleting) => {
            topic_change::stream_delete(client, deleting, json, out).await
        }
    }
}

/// `strand topic ...`
async fn run_topic(
    client: &Client,
    command: TopicCommand,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        TopicCommand::Create(create) => topic::topic_create(client, create, json, out).await,
        TopicCommand::List => topic::topic_list(client, json, out).await,
        TopicCommand::Describe { topic } => topic::topic_describe(client, &topic, json, out).await,
        TopicCommand::Alter(alter) => topic_change::topic_alter(client, alter, json, out).await,
        TopicCommand::AddPartitions(adding) => {
            topic_change::add_partitions(client, adding, json, out).await
        }
        TopicCommand::Delete(deleting) => {
            topic_change::topic_delete(client, deleting, json, out).await
        }
    }
}

/// `strand token ...`
async fn run_token(
    client: &Client,
    command: TokenCommand,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        TokenCommand::Create {
            owner,
            label,
            expires_in,
        } => token::create(client, &owner, &label, expires_in, json, out).await,
        TokenCommand::List => token::list(client, json, out).await,
        TokenCommand::Revoke { token } => token::revoke(client, &token, json, out).await,
    }
}

/// `strand consumer-group ...`
async fn run_consumer_group(
    client: &Client,
    command: ConsumerGroupCommand,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        ConsumerGroupCommand::List => consumer_group::list(client, json, out).await,
        ConsumerGroupCommand::Describe { name } => {
            consumer_group::describe(client, &name, json, out).await
        }
        ConsumerGroupCommand::Reset { name, to } => {
            consumer_group::reset(client, &name, to, json, out).await
        }
    }
}

/// `strand partition ...`
async fn run_partition(
    client: &Client,
    command: PartitionCommand,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        PartitionCommand::Reassign(reassign) => {
            partition::reassign(client, reassign, json, out).await
        }
        PartitionCommand::DropReplica(dropping) => {
            partition::drop_replica(client, dropping, json, out).await
        }
    }
}

/// The refusal of a `topic delete` or `stream delete` run without `--yes`,
/// naming what it would delete as far as the cluster's metadata tells (a
/// cluster that does not answer leaves the refusal less precise, never
/// turns it into another error).
async fn delete_refusal(cli: &Cli) -> Option<CliError> {
    match &cli.command {
        Command::Topic(TopicCommand::Delete(deleting)) if !deleting.yes => {
            let client = connect(cli).await.ok();
            Some(topic_change::topic_refusal(client.as_ref(), deleting).await)
        }
        Command::Stream(StreamCommand::Delete(deleting)) if !deleting.yes => {
            let client = connect(cli).await.ok();
            Some(topic_change::stream_refusal(client.as_ref(), deleting).await)
        }
        _ => None,
    }
}

async fn connect(cli: &Cli) -> Result<Client, CliError> {
    let mut config = ClientConfig::new(cli.cluster.iter().map(|address| address.trim()));
    config.cluster = cli.cluster_id;
    config.deadline_ms = cli.timeout_ms;
    config.request_timeout_ms = cli.timeout_ms.min(REQUEST_TIMEOUT_MS_MAX);
    config.tls = cli.ca.as_ref().map(|ca| crate::tls::ClientTls {
        server_name: cli.tls_server_name.clone(),
        identity: cli.cert.clone().zip(cli.key.clone()),
        ..crate::tls::ClientTls::new(ca)
    });
    config.credentials = credentials(cli)?;
    Client::connect(config)
        .await
        .map_err(|error| CliError::client("connect", error))
}

/// What to sign in with: an access token from `--token-file` or
/// `STRAND_TOKEN`, or a user with its password from `--password-file` or
/// `STRAND_PASSWORD` (never an argument: every process on the machine
/// could read it).
fn credentials(cli: &Cli) -> Result<Option<crate::Credentials>, CliError> {
    if let Some(token) = token(cli)? {
        return Ok(Some(crate::Credentials::Token(token)));
    }
    let Some(user) = &cli.user else {
        return Ok(None);
    };
    let password = match &cli.password_file {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|error| {
                CliError::Usage(format!("--password-file {}: {error}", path.display()))
            })?
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned(),
        None => std::env::var("STRAND_PASSWORD").map_err(|_| {
            CliError::Usage(format!(
                "--user {user} needs a password: --password-file, or STRAND_PASSWORD"
            ))
        })?,
    };
    Ok(Some(crate::Credentials::password(user.clone(), password)))
}

/// The access token from `--token-file`, or else `STRAND_TOKEN`: a token
/// given wins over `--user` (which a shell may export for other work).
fn token(cli: &Cli) -> Result<Option<String>, CliError> {
    let token = match &cli.token_file {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|error| CliError::Usage(format!("--token-file {}: {error}", path.display())))?
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
        None => match std::env::var("STRAND_TOKEN") {
            Ok(token) => token.trim().to_owned(),
            Err(_) => return Ok(None),
        },
    };
    if strand_wire::ops::parse_token(&token).is_none() {
        return Err(CliError::Usage(
            "the token (--token-file or STRAND_TOKEN) is not strand_<id>_<secret>".to_owned(),
        ));
    }
    Ok(Some(token))
}

/// Prints `value` as one pretty JSON document.
fn print_json(out: &mut dyn Write, value: &impl Serialize) -> Result<(), CliError> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `strand args...` with empty stdin; no cluster is needed.
    async fn offline(args: &[&str]) -> (Outcome, String, String) {
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let argv = std::iter::once("strand").chain(args.iter().copied());
        let outcome = run(argv, &b""[..], &mut stdout, &mut stderr).await;
        let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
        (outcome, text(stdout), text(stderr))
    }

    #[tokio::test]
    async fn help_goes_to_stdout_and_succeeds() {
        let (outcome, stdout, stderr) = offline(&["--help"]).await;
        assert_eq!(outcome, Outcome::Success);
        assert!(stdout.contains("Exit codes:"), "{stdout}");
        assert!(stderr.is_empty());
    }

    #[tokio::test]
    async fn bad_arguments_exit_2_on_stderr() {
        let (outcome, stdout, stderr) = offline(&["topic", "create", "nope"]).await;
        assert_eq!(outcome, Outcome::Usage);
        assert!(stdout.is_empty());
        assert!(stderr.contains("STREAM/TOPIC"), "{stderr}");
    }

    #[tokio::test]
    async fn completions_need_no_cluster() {
        for shell in ["bash", "zsh", "fish"] {
            let (outcome, stdout, _) = offline(&["completions", shell]).await;
            assert_eq!(outcome, Outcome::Success, "{shell}");
            assert!(stdout.contains("accept-loss"), "{shell}: {stdout}");
        }
    }

    #[tokio::test]
    async fn accept_loss_without_yes_is_refused_before_connecting() {
        // Port 9 (discard) on loopback: nothing is sent, so nothing answers.
        let (outcome, _, stderr) =
            offline(&["--cluster", "127.0.0.1:9", "accept-loss", "s/t/0"]).await;
        assert_eq!(outcome, Outcome::Usage);
        assert!(stderr.contains("--yes"), "{stderr}");
    }

    #[tokio::test]
    async fn drop_replica_without_yes_is_refused_before_connecting() {
        let (outcome, _, stderr) = offline(&[
            "--cluster",
            "127.0.0.1:9",
            "partition",
            "drop-replica",
            "s/t/0",
            "--node",
            "2",
        ])
        .await;
        assert_eq!(outcome, Outcome::Usage);
        assert!(stderr.contains("--yes"), "{stderr}");
        assert!(stderr.contains("deletes"), "{stderr}");
    }

    #[tokio::test]
    async fn deletes_without_yes_are_refused_even_when_no_node_answers() {
        // Nothing listens on port 9: the refusal cannot name the
        // partitions, and is still a refusal (exit 2), not a failure.
        let cluster = ["--cluster", "127.0.0.1:9", "--timeout-ms", "100"];
        let topic = [&cluster[..], &["topic", "delete", "shop/orders"]].concat();
        let (outcome, stdout, stderr) = offline(&topic).await;
        assert_eq!(outcome, Outcome::Usage);
        assert!(stdout.is_empty());
        assert!(stderr.contains("deletes topic shop/orders"), "{stderr}");
        assert!(stderr.contains("--yes"), "{stderr}");
        let stream = [&cluster[..], &["stream", "delete", "shop"]].concat();
        let (outcome, _, stderr) = offline(&stream).await;
        assert_eq!(outcome, Outcome::Usage);
        assert!(
            stderr.contains("deletes stream shop: every topic"),
            "{stderr}"
        );
    }

    #[test]
    fn outcomes_are_the_documented_exit_codes() {
        let codes = [
            Outcome::Success,
            Outcome::Failed,
            Outcome::Usage,
            Outcome::NeedsAttention,
        ]
        .map(Outcome::code);
        assert_eq!(codes, [0, 1, 2, 3]);
    }
}
