//! The command line as values: the clap definitions of every command and the
//! parsers of the arguments clap cannot check alone (`STREAM/TOPIC`, confirm
//! policies, partition targets). Nothing here touches the network.
//!
//! This file holds the global options, the command list and the parsers
//! several families share; each family's definitions have a file of their
//! own: `topic` (streams and topics), `records` (produce, consume, consumer
//! groups), `access` (users and tokens), `operator` (accept-loss, partition).

use clap::{Parser, Subcommand};
use strand_wire::ConfirmPolicy;

mod access;
mod operator;
mod records;
#[cfg(test)]
mod tests;
mod topic;

pub(crate) use access::{TokenCommand, UserCommand};
pub(crate) use operator::{AcceptLossArgs, DropReplicaArgs, PartitionCommand, ReassignArgs};
pub(crate) use records::{ConsumeArgs, ConsumerGroupCommand, ProduceArgs, ResetTarget, Start};
pub(crate) use topic::{
    AddPartitionsArgs, StreamCommand, StreamDeleteArgs, TopicAlterArgs, TopicCommand,
    TopicCreateArgs, TopicDeleteArgs,
};

/// The client address of the first node of `strand-server dev-cluster`
/// (first port 7100; node `i` serves clients on `7100 + 100 + i`).
pub const DEV_CLUSTER_ADDRESS: &str = "127.0.0.1:7201";

/// Longest a command waits for the cluster by default, retries included.
pub const TIMEOUT_MS_DEFAULT: u64 = 10_000;

/// Largest record `produce --size` generates (the server's default frame
/// limit is 8 MiB; a record must fit in one batch of one frame).
pub const GENERATED_RECORD_BYTES_MAX: usize = 4 * 1024 * 1024;

/// `strand`: the Strand command line.
#[derive(Debug, Parser)]
#[command(
    name = "strand",
    version,
    about = "Operate a Strand cluster: topics, produce, consume, status, attention.",
    after_help = "Exit codes: 0 success (for `attention`: nothing waits); 1 the command failed \
                  (the message says why and what to do); 2 bad arguments or a refused \
                  confirmation; 3 `attention` found partitions waiting or nodes not answering."
)]
pub(crate) struct Cli {
    /// A TOML file of these global options (`cluster`, `cluster_id`, `ca`,
    /// `tls_server_name`, `cert`, `key`, `user`, `password_file`,
    /// `token_file`, `timeout_ms`); the command line and environment win.
    /// Without it, `~/.config/strand/cli.toml` is read if it exists.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "STRAND_CONFIG"
    )]
    pub(crate) config: Option<std::path::PathBuf>,
    /// Client addresses (`host:port`, comma-separated) of some nodes of the
    /// cluster; any one that answers is enough.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "STRAND_CLUSTER",
        value_delimiter = ',',
        default_value = DEV_CLUSTER_ADDRESS
    )]
    pub(crate) cluster: Vec<String>,
    /// The cluster id the nodes were configured with.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "STRAND_CLUSTER_ID",
        default_value_t = 0
    )]
    pub(crate) cluster_id: u64,
    /// The cluster's CA certificate (PEM): connect with TLS and verify the
    /// nodes against it (`strand-server dev-cluster` prints its path).
    /// Without it the connection is plaintext.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "STRAND_CA"
    )]
    pub(crate) ca: Option<std::path::PathBuf>,
    /// A user certificate (PEM) to present: signs in as the user it names
    /// (`strand-server user-cert` makes one). Needs --ca and --key.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "STRAND_CERT"
    )]
    pub(crate) cert: Option<std::path::PathBuf>,
    /// The user certificate's private key (PEM).
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "STRAND_KEY"
    )]
    pub(crate) key: Option<std::path::PathBuf>,
    /// Sign in as this user (a cluster with `[auth] required` needs it);
    /// the password comes from --password-file or STRAND_PASSWORD.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "STRAND_USER"
    )]
    pub(crate) user: Option<String>,
    /// A file whose first line is the user's password.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "STRAND_PASSWORD_FILE"
    )]
    pub(crate) password_file: Option<std::path::PathBuf>,
    /// Sign in with an access token: a file whose first line is the token
    /// (or the token itself in STRAND_TOKEN). A token, when given, is used
    /// rather than --user.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "STRAND_TOKEN_FILE"
    )]
    pub(crate) token_file: Option<std::path::PathBuf>,
    /// The name the nodes' certificates must carry, when it is not the host
    /// of the addresses dialed.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "STRAND_TLS_SERVER_NAME"
    )]
    pub(crate) tls_server_name: Option<String>,
    /// How long one request may wait for the cluster, retries included
    /// (`produce`: each batch; the run stops at the first that fails).
    #[arg(long, global = true, help_heading = "Global options", default_value_t = TIMEOUT_MS_DEFAULT, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) timeout_ms: u64,
    /// Print JSON for scripts instead of tables (`consume`: one object per line).
    #[arg(long, global = true, help_heading = "Global options")]
    pub(crate) json: bool,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Create, list and delete streams (namespaces of topics).
    #[command(subcommand)]
    Stream(StreamCommand),
    /// Create, list, describe, alter, grow and delete topics.
    #[command(subcommand)]
    Topic(TopicCommand),
    /// Produce records: lines from stdin, or generated records with --count.
    Produce(ProduceArgs),
    /// Read records from a partition, optionally storing a cursor as it goes;
    /// or, with --group, every partition a consumer group gives this member.
    Consume(ConsumeArgs),
    /// Consumer groups: list them, describe one (members, assignment,
    /// offsets and lag), reset a group's offsets.
    #[command(subcommand, visible_alias = "group")]
    ConsumerGroup(ConsumerGroupCommand),
    /// One consumer's cursor on a partition: get, store, delete.
    #[command(subcommand)]
    Cursor(super::cursor::CursorCommand),
    /// Every node (reachable or not) and every partition's replicas: view,
    /// primary, commit and lag, earliest offset and end, untrusted logs.
    Status,
    /// Partitions whose view change waits, why, and which replicas they
    /// await. Exit code 0 when nothing waits and every node answered, 3 otherwise.
    Attention,
    /// Let a stuck view change proceed with the logs at hand. MAY LOSE
    /// CONFIRMED RECORDS; needs --yes.
    AcceptLoss(AcceptLossArgs),
    /// Move a partition: give it new replicas or a new confirm policy, drop
    /// the copy a removed replica kept.
    #[command(subcommand)]
    Partition(PartitionCommand),
    /// Users and their permissions: create, list, delete, grant, revoke.
    #[command(subcommand)]
    User(UserCommand),
    /// Access tokens: create one for a user, list, revoke.
    #[command(subcommand)]
    Token(TokenCommand),
    /// User certificates: revoke one (admin's too) by fingerprint or file.
    #[command(subcommand)]
    Cert(super::cert::CertCommand),
    /// Users' produce, fetch and request rates (enforced by delaying).
    #[command(subcommand)]
    Quota(super::quota::QuotaCommand),
    /// Print a shell completion script (e.g. `strand completions bash > /etc/bash_completion.d/strand`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// A topic named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicPath {
    /// The stream.
    pub(crate) stream: String,
    /// The topic.
    pub(crate) topic: String,
}

impl std::fmt::Display for TopicPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.stream, self.topic)
    }
}

fn check_name(field: &'static str, name: &str) -> Result<(), String> {
    strand_wire::codec::validate_name(field, name).map_err(|error| error.to_string())
}

/// Parses a stream's name.
fn parse_stream_name(text: &str) -> Result<String, String> {
    check_name("stream", text)?;
    Ok(text.to_owned())
}

/// Parses `STREAM/TOPIC`.
pub(crate) fn parse_topic_path(text: &str) -> Result<TopicPath, String> {
    let Some((stream, topic)) = text.split_once('/') else {
        return Err(format!("expected STREAM/TOPIC, got {text:?}"));
    };
    check_name("stream", stream)?;
    check_name("topic", topic)?;
    Ok(TopicPath {
        stream: stream.to_owned(),
        topic: topic.to_owned(),
    })
}

/// Parses `majority`, `local` or a count of copies (1 or more).
pub(crate) fn parse_confirm(text: &str) -> Result<ConfirmPolicy, String> {
    match text {
        "majority" | "majority_durable" => Ok(ConfirmPolicy::MajorityDurable),
        "local" | "local_durable" | "all" => Ok(ConfirmPolicy::LocalDurable),
        count => match count.parse::<u8>() {
            Ok(0) => Err("a confirm count must be at least 1".to_owned()),
            Ok(count) => Ok(ConfirmPolicy::Count(count)),
            Err(_) => Err(format!(
                "expected `majority`, `local` or a count of copies (1..=255), got {text:?}"
            )),
        },
    }
}
