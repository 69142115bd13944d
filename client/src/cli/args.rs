//! The command line as values: the clap definitions of every command and the
//! parsers of the arguments clap cannot check alone (`STREAM/TOPIC`, confirm
//! policies, partition targets). Nothing here touches the network.

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use strand_wire::ops::{SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN};
use strand_wire::{ConfirmPolicy, Durability, REPLICAS_MAX};

use crate::PartitionTarget;
use crate::client::PARTITIONS_PER_TOPIC_MAX;

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

/// `strand stream ...`
#[derive(Debug, Subcommand)]
pub(crate) enum StreamCommand {
    /// Create a stream.
    Create {
        /// The stream's name (ASCII letters, digits, '.', '_', '-').
        name: String,
    },
    /// List the streams.
    List,
    /// Delete a stream and every topic in it. DELETES DATA; needs --yes.
    Delete(StreamDeleteArgs),
}

/// `strand stream delete`.
#[derive(Debug, Args)]
pub(crate) struct StreamDeleteArgs {
    /// The stream.
    #[arg(value_parser = parse_stream_name)]
    pub(crate) name: String,
    /// Confirm that every topic of the stream, with its records and
    /// cursors, is deleted.
    #[arg(long)]
    pub(crate) yes: bool,
}

/// `strand topic ...`
#[derive(Debug, Subcommand)]
pub(crate) enum TopicCommand {
    /// Create a topic (and its stream, if missing). Policies not given take
    /// the cluster's topic defaults.
    Create(TopicCreateArgs),
    /// List every topic with its policies.
    List,
    /// One topic's policies and partitions (replicas, view, primary, and
    /// the earliest offset and end its primary reports).
    Describe {
        /// The topic, as STREAM/TOPIC.
        #[arg(value_parser = parse_topic_path)]
        topic: TopicPath,
    },
    /// Change a topic's retention limits or confirm policy; its records
    /// stay. A confirm policy changes partition by partition (each through
    /// a reassignment onto its current replicas).
    Alter(TopicAlterArgs),
    /// Give a topic more partitions (its existing ones stay as they are).
    AddPartitions(AddPartitionsArgs),
    /// Delete a topic: its partitions, records and cursors, on every node.
    /// DELETES DATA; needs --yes.
    Delete(TopicDeleteArgs),
}

/// `strand topic alter`: at least one change.
#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("change")
        .required(true)
        .multiple(true)
        .args(["retention_bytes", "retention_ms", "confirm"])
))]
pub(crate) struct TopicAlterArgs {
    /// The topic, as STREAM/TOPIC.
    #[arg(value_parser = parse_topic_path)]
    pub(crate) topic: TopicPath,
    /// New per-partition size limit in bytes, oldest dropped first (0:
    /// none), as `topic create` takes it.
    #[arg(long)]
    pub(crate) retention_bytes: Option<u64>,
    /// New age limit in milliseconds (0: none).
    #[arg(long)]
    pub(crate) retention_ms: Option<u64>,
    /// How many copies confirm a record from now on: `majority`, `local`
    /// (every copy) or a count.
    #[arg(long, value_parser = parse_confirm)]
    pub(crate) confirm: Option<ConfirmPolicy>,
}

/// `strand topic add-partitions`.
#[derive(Debug, Args)]
pub(crate) struct AddPartitionsArgs {
    /// The topic, as STREAM/TOPIC.
    #[arg(value_parser = parse_topic_path)]
    pub(crate) topic: TopicPath,
    /// The topic's partition count afterwards (more than it has now).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=i64::from(PARTITIONS_PER_TOPIC_MAX)))]
    pub(crate) count: u32,
}

/// `strand topic delete`.
#[derive(Debug, Args)]
pub(crate) struct TopicDeleteArgs {
    /// The topic, as STREAM/TOPIC.
    #[arg(value_parser = parse_topic_path)]
    pub(crate) topic: TopicPath,
    /// Confirm that the topic's records and cursors are deleted.
    #[arg(long)]
    pub(crate) yes: bool,
}

/// `strand topic create`.
#[derive(Debug, Args)]
pub(crate) struct TopicCreateArgs {
    /// The topic, as STREAM/TOPIC.
    #[arg(value_parser = parse_topic_path)]
    pub(crate) topic: TopicPath,
    /// Number of partitions (each its own replicated group).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(PARTITIONS_PER_TOPIC_MAX)))]
    pub(crate) partitions: u32,
    /// Replicas per partition.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..i64::from(REPLICAS_MAX)))]
    pub(crate) replicas: u8,
    /// When a copy counts: `persisted` (fsynced) or `replicated` (queued).
    /// Default: the cluster's topic defaults.
    #[arg(long, value_enum)]
    pub(crate) durability: Option<DurabilityArg>,
    /// How many copies confirm a record: `majority`, `local` (every copy) or
    /// a count. Default: the cluster's topic defaults.
    #[arg(long, value_parser = parse_confirm)]
    pub(crate) confirm: Option<ConfirmPolicy>,
    /// Per-partition size limit in bytes, oldest dropped first (0: none).
    #[arg(long, default_value_t = 0)]
    pub(crate) retention_bytes: u64,
    /// Age limit in milliseconds (0: none).
    #[arg(long, default_value_t = 0)]
    pub(crate) retention_ms: u64,
    /// Bytes per record-log segment file, 65536 (64 KiB) to 1073741824
    /// (1 GiB). Retention drops whole segments, so a small retention wants
    /// small segments. Default: the node's (256 MiB).
    #[arg(long, value_parser = clap::value_parser!(u64).range(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX))]
    pub(crate) segment_bytes: Option<u64>,
}

/// A durability policy as a flag value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DurabilityArg {
    /// A copy counts once fsynced.
    Persisted,
    /// A copy counts once queued to the WAL writer.
    Replicated,
}

impl From<DurabilityArg> for Durability {
    fn from(value: DurabilityArg) -> Durability {
        match value {
            DurabilityArg::Persisted => Durability::Persisted,
            DurabilityArg::Replicated => Durability::Replicated,
        }
    }
}

/// `strand produce`.
#[derive(Debug, Args)]
pub(crate) struct ProduceArgs {
    /// The topic, as STREAM/TOPIC.
    #[arg(value_parser = parse_topic_path)]
    pub(crate) topic: TopicPath,
    /// The partition written to (default: each record by its key, as
    /// Kafka's default partitioner maps it; records without a key fill one
    /// partition a batch at a time, then the next).
    #[arg(long)]
    pub(crate) partition: Option<u32>,
    /// Split each stdin line at the first SEP into key and value (a line
    /// without SEP is a value with an empty key).
    #[arg(long, value_name = "SEP", conflicts_with = "count")]
    pub(crate) key_sep: Option<String>,
    /// Generate this many records instead of reading stdin.
    #[arg(long)]
    pub(crate) count: Option<u64>,
    /// Bytes per generated record value.
    #[arg(long, default_value_t = 100, requires = "count", value_parser = parse_record_size)]
    pub(crate) size: usize,
}

/// `strand consume`.
#[derive(Debug, Args)]
pub(crate) struct ConsumeArgs {
    /// The topic, as STREAM/TOPIC.
    #[arg(value_parser = parse_topic_path)]
    pub(crate) topic: TopicPath,
    /// The partition read.
    #[arg(long, default_value_t = 0)]
    pub(crate) partition: u32,
    /// Where to start: an offset, `earliest` or `latest`.
    #[arg(long, value_parser = parse_start, conflicts_with = "cursor")]
    pub(crate) from: Option<Start>,
    /// Start at the first record appended at or after a time: RFC 3339
    /// (`2026-12-05T10:00:00Z`) or an age (`-5m`, `-90s`, `-2h`), by the
    /// append time the partition's primary stamped on each batch.
    #[arg(long, value_name = "TIME", value_parser = parse_time_ns, conflicts_with_all = ["from", "cursor"], allow_hyphen_values = true)]
    pub(crate) from_time: Option<u64>,
    /// Start at the cursor stored under NAME (earliest if none) and store
    /// the cursor after each batch printed.
    #[arg(long, value_name = "NAME")]
    pub(crate) cursor: Option<String>,
    /// Join consumer group NAME and read every partition it gives this
    /// member, from the group's offsets (--from for partitions without
    /// one), storing them as it goes; follows until --count or a signal,
    /// then leaves the group. Lines start with the partition.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["cursor", "from_time"])]
    pub(crate) group: Option<String>,
    /// With --group: the session timeout in milliseconds (a member not
    /// heard for this long is removed and its partitions move).
    #[arg(long, default_value_t = 10_000, requires = "group")]
    pub(crate) session_timeout_ms: u32,
    /// Keep waiting for new records (until --count, or Ctrl-C).
    #[arg(long)]
    pub(crate) follow: bool,
    /// Stop after this many records.
    #[arg(long)]
    pub(crate) count: Option<u64>,
    /// Print each record's key too, as `OFFSET<TAB>KEY<SEP>VALUE`.
    #[arg(long, value_name = "SEP")]
    pub(crate) key_sep: Option<String>,
}

/// `strand user ...`
#[derive(Debug, Subcommand)]
pub(crate) enum UserCommand {
    /// Create a user. The password is read from the first line of stdin
    /// (hashed with Argon2id before it leaves this process).
    Create {
        /// The user's name.
        name: String,
    },
    /// Every user and its permissions.
    List,
    /// Delete a user and its permissions; needs --yes.
    Delete {
        /// The user's name.
        name: String,
        /// Confirm.
        #[arg(long)]
        yes: bool,
    },
    /// Grant a permission: `admin`, or `produce|consume|manage:STREAM[/TOPIC]`.
    Grant {
        /// The user's name.
        name: String,
        /// The permission.
        #[arg(value_parser = parse_permission_arg)]
        permission: strand_wire::ops::Permission,
    },
    /// Take a permission back (same form as grant).
    Revoke {
        /// The user's name.
        name: String,
        /// The permission.
        #[arg(value_parser = parse_permission_arg)]
        permission: strand_wire::ops::Permission,
    },
}

/// `strand token ...`
#[derive(Debug, Subcommand)]
pub(crate) enum TokenCommand {
    /// Create a token that signs in as USER with its permissions; printed
    /// once on stdout. Needs admin, or USER signed in with its password.
    Create {
        /// The user it signs in as.
        #[arg(value_name = "USER")]
        owner: String,
        /// What it is for (shown by `token list`).
        #[arg(long, default_value = "")]
        label: String,
        /// How long it works (`30d`, `12h`); without it, until revoked.
        #[arg(long, value_parser = parse_lifetime)]
        expires_in: Option<std::time::Duration>,
    },
    /// Every token: its user, label and expiry (never its secret).
    List,
    /// Revoke a token, by id or the token itself: it signs in no more.
    Revoke {
        /// The token's id (16 hex digits) or the whole token.
        token: String,
    },
}

fn parse_lifetime(text: &str) -> Result<std::time::Duration, String> {
    let lifetime = humantime::parse_duration(text).map_err(|error| format!("{text:?}: {error}"))?;
    if lifetime.is_zero() {
        return Err("a token's lifetime is longer than zero".to_owned());
    }
    Ok(lifetime)
}

fn parse_permission_arg(text: &str) -> Result<strand_wire::ops::Permission, String> {
    crate::users::parse_permission(text)
}

/// `strand consumer-group ...` (or `strand group ...`)
#[derive(Debug, Subcommand)]
pub(crate) enum ConsumerGroupCommand {
    /// Every consumer group: its topic, generation and members.
    List,
    /// One consumer group: members and their partitions, and per partition
    /// the group's stored offset, the partition's end and the lag.
    Describe {
        /// The group's name.
        name: String,
    },
    /// Set a group's stored offsets on every partition of its topic. The
    /// group must have no members (stop its consumers first).
    Reset {
        /// The group's name.
        name: String,
        /// `earliest`, `latest`, an offset, or a time (RFC 3339 or `-5m`).
        #[arg(long, value_parser = parse_reset_target, allow_hyphen_values = true)]
        to: ResetTarget,
    },
}

/// Where `strand consumer-group reset` moves a group's offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResetTarget {
    /// Each partition's oldest retained record.
    Earliest,
    /// Each partition's end.
    Latest,
    /// This offset on every partition (clamped to what each retains).
    Offset(u64),
    /// The first record appended at or after this time (ns since the epoch).
    Time(u64),
}

/// Parses `--to` of `strand consumer-group reset`.
pub(crate) fn parse_reset_target(text: &str) -> Result<ResetTarget, String> {
    match parse_start(text) {
        Ok(Start::Earliest) => Ok(ResetTarget::Earliest),
        Ok(Start::Latest) => Ok(ResetTarget::Latest),
        Ok(Start::Offset(offset)) => Ok(ResetTarget::Offset(offset)),
        Err(_) => parse_time_ns(text).map(ResetTarget::Time).map_err(|_| {
            format!("expected `earliest`, `latest`, an offset or a time, got {text:?}")
        }),
    }
}

/// `strand partition ...`
#[derive(Debug, Subcommand)]
pub(crate) enum PartitionCommand {
    /// Give a partition a new replica set and, optionally, a new confirm
    /// policy. Replicas that stay keep their slots; removed replicas keep
    /// their data until `drop-replica`.
    Reassign(ReassignArgs),
    /// Delete the copy of a partition a node kept after a reassignment
    /// removed it. DELETES DATA; needs --yes.
    DropReplica(DropReplicaArgs),
}

/// `strand partition reassign`.
#[derive(Debug, Args)]
pub(crate) struct ReassignArgs {
    /// The partition: a group id, or STREAM/TOPIC/PARTITION.
    #[arg(value_parser = parse_partition_target)]
    pub(crate) target: PartitionTarget,
    /// The node ids that should hold the partition (comma-separated).
    #[arg(long, required = true, value_delimiter = ',', value_name = "NODES")]
    pub(crate) replicas: Vec<u32>,
    /// How many copies confirm a record: `majority`, `local` (every copy) or
    /// a count. Default: keep the current policy.
    #[arg(long, value_parser = parse_confirm)]
    pub(crate) confirm: Option<ConfirmPolicy>,
    /// Reassign even when `min(W, W')` or more of the new replicas lack
    /// acknowledged records (joining, or still catching up): one more lost
    /// copy could then lose confirmed records.
    #[arg(long)]
    pub(crate) force: bool,
}

/// `strand partition drop-replica`.
#[derive(Debug, Args)]
pub(crate) struct DropReplicaArgs {
    /// The partition: a group id, or STREAM/TOPIC/PARTITION.
    #[arg(value_parser = parse_partition_target)]
    pub(crate) target: PartitionTarget,
    /// The node whose retired copy is deleted.
    #[arg(long)]
    pub(crate) node: u32,
    /// Confirm that the node's copy of the partition is deleted.
    #[arg(long)]
    pub(crate) yes: bool,
    /// Drop it even while a replica of the partition is still catching up
    /// (or no primary serves): the removed copy may then hold records no
    /// member holds yet.
    #[arg(long)]
    pub(crate) force: bool,
}

/// `strand accept-loss`.
#[derive(Debug, Args)]
pub(crate) struct AcceptLossArgs {
    /// The partition: a group id, or STREAM/TOPIC/PARTITION.
    #[arg(value_parser = parse_partition_target)]
    pub(crate) target: PartitionTarget,
    /// Confirm that confirmed records may be lost.
    #[arg(long)]
    pub(crate) yes: bool,
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

/// Where `consume --from` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// The oldest retained record.
    Earliest,
    /// Only records produced from now on.
    Latest,
    /// This offset.
    Offset(u64),
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

/// Parses an offset, `earliest` or `latest`.
pub(crate) fn parse_start(text: &str) -> Result<Start, String> {
    match text {
        "earliest" => Ok(Start::Earliest),
        "latest" => Ok(Start::Latest),
        offset => offset
            .parse::<u64>()
            .map(Start::Offset)
            .map_err(|_| format!("expected an offset, `earliest` or `latest`, got {text:?}")),
    }
}

/// Parses `--from-time`: RFC 3339, or `-DURATION` before now; ns since the
/// Unix epoch.
pub(crate) fn parse_time_ns(text: &str) -> Result<u64, String> {
    let time = match text.strip_prefix('-') {
        Some(age) => {
            let age = humantime::parse_duration(age)
                .map_err(|error| format!("{text:?} is not an age like -5m: {error}"))?;
            std::time::SystemTime::now()
                .checked_sub(age)
                .ok_or_else(|| format!("{text:?} reaches before 1970"))?
        }
        None => humantime::parse_rfc3339_weak(text).map_err(|error| {
            format!("{text:?} is not an RFC 3339 time (2026-12-05T10:00:00Z) or -AGE: {error}")
        })?,
    };
    let since = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| format!("{text:?} is before 1970"))?;
    u64::try_from(since.as_nanos()).map_err(|_| format!("{text:?} is too far ahead"))
}

/// Parses a group id or `STREAM/TOPIC/PARTITION`.
pub(crate) fn parse_partition_target(text: &str) -> Result<PartitionTarget, String> {
    if let Ok(group) = text.parse::<u64>() {
        return Ok(PartitionTarget::Group(group));
    }
    let Some((topic, partition)) = text.rsplit_once('/') else {
        return Err(format!(
            "expected a group id or STREAM/TOPIC/PARTITION, got {text:?}"
        ));
    };
    let topic = parse_topic_path(topic)?;
    let partition = partition
        .parse::<u32>()
        .map_err(|_| format!("expected a partition index after the topic, got {partition:?}"))?;
    Ok(PartitionTarget::Partition {
        stream: topic.stream,
        topic: topic.topic,
        partition,
    })
}

/// Parses a generated record's size, bounded by [`GENERATED_RECORD_BYTES_MAX`].
fn parse_record_size(text: &str) -> Result<usize, String> {
    let size = text
        .parse::<usize>()
        .map_err(|_| format!("expected a byte count, got {text:?}"))?;
    if size > GENERATED_RECORD_BYTES_MAX {
        return Err(format!(
            "at most {GENERATED_RECORD_BYTES_MAX} bytes per record"
        ));
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("strand").chain(args.iter().copied()))
    }

    #[test]
    fn times_are_rfc3339_or_an_age_before_now() {
        assert_eq!(
            parse_time_ns("2026-12-05T10:00:00Z"),
            Ok(1_796_464_800_000_000_000)
        );
        assert_eq!(
            parse_time_ns("2026-12-05T10:00:00.5Z"),
            Ok(1_796_464_800_500_000_000)
        );
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_nanos() as u64;
        let five_minutes_ago = parse_time_ns("-5m").expect("an age");
        let age_ns = now_ns - five_minutes_ago;
        assert!(
            (299_000_000_000..301_000_000_000).contains(&age_ns),
            "{age_ns}"
        );
        for bad in ["yesterday", "-5 parsecs", "2026-13-01T00:00:00Z", ""] {
            assert!(parse_time_ns(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn consumer_group_answers_to_its_alias_group() {
        for name in ["consumer-group", "group"] {
            let cli = parse(&[name, "describe", "g"]).expect("valid");
            let Command::ConsumerGroup(ConsumerGroupCommand::Describe { name }) = cli.command
            else {
                panic!("parsed as {:?}", cli.command);
            };
            assert_eq!(name, "g");
        }
        let help = Cli::command().render_help().to_string();
        assert!(help.contains("consumer-group"), "{help}");
        assert!(help.contains("[alias: group]"), "{help}");
    }

    #[test]
    fn topic_create_takes_every_policy() {
        let cli = parse(&[
            "--cluster",
            "a:1,b:2",
            "topic",
            "create",
            "shop/orders",
            "--partitions",
            "4",
            "--replicas",
            "5",
            "--durability",
            "replicated",
            "--confirm",
            "2",
            "--retention-bytes",
            "1000",
            "--retention-ms",
            "60000",
            "--segment-bytes",
            "1048576",
        ])
        .expect("valid");
        assert_eq!(cli.cluster, vec!["a:1", "b:2"]);
        let Command::Topic(TopicCommand::Create(create)) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!(create.topic.to_string(), "shop/orders");
        assert_eq!(create.partitions, 4);
        assert_eq!(create.replicas, 5);
        assert_eq!(create.durability, Some(DurabilityArg::Replicated));
        assert_eq!(create.confirm, Some(ConfirmPolicy::Count(2)));
        assert_eq!((create.retention_bytes, create.retention_ms), (1000, 60000));
        assert_eq!(create.segment_bytes, Some(1 << 20));
    }

    #[test]
    fn policies_left_out_mean_the_cluster_defaults() {
        let cli = parse(&["topic", "create", "s/t"]).expect("valid");
        let Command::Topic(TopicCommand::Create(create)) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!((create.durability, create.confirm), (None, None));
        assert_eq!((create.partitions, create.replicas), (1, 3));
        assert_eq!(create.segment_bytes, None, "the node's default");
    }

    #[test]
    fn bad_values_are_refused_before_anything_is_sent() {
        for args in [
            &["topic", "create", "no-slash"][..],
            &["topic", "create", "s/bad name"],
            &["topic", "create", "s/t", "--replicas", "16"],
            &["topic", "create", "s/t", "--partitions", "0"],
            &["topic", "create", "s/t", "--confirm", "0"],
            &["topic", "create", "s/t", "--durability", "fsync"],
            &["topic", "create", "s/t", "--segment-bytes", "65535"],
            &["topic", "create", "s/t", "--segment-bytes", "1073741825"],
            &["topic", "create", "s/t", "--segment-bytes", "1MiB"],
            &["consume", "s/t", "--from", "3", "--cursor", "c"],
            &["produce", "s/t", "--size", "10"],
            &["produce", "s/t", "--count", "1", "--size", "999999999"],
            &["--timeout-ms", "0", "status"],
            &["accept-loss", "s/t/x"],
            &["partition", "reassign", "s/t/0"],
            &["partition", "reassign", "s/t/0", "--replicas", "1,x"],
            &["partition", "reassign", "s/t", "--replicas", "1,2"],
            &[
                "partition",
                "reassign",
                "7",
                "--replicas",
                "1",
                "--confirm",
                "0",
            ],
            &["partition", "drop-replica", "7"],
            &["partition", "drop-replica", "7", "--node", "-1"],
            &["topic", "alter", "s/t"],
            &["topic", "alter", "s/t", "--retention-bytes", "1MiB"],
            &["topic", "alter", "s/t", "--retention-ms", "-1"],
            &["topic", "alter", "s/t", "--confirm", "0"],
            &["topic", "add-partitions", "s/t"],
            &["topic", "add-partitions", "s/t", "--count", "1"],
            &["topic", "add-partitions", "s/t", "--count", "4097"],
            &["topic", "delete", "no-slash", "--yes"],
            &["stream", "delete", "bad name", "--yes"],
            &["stream", "delete"],
        ] {
            assert!(parse(args).is_err(), "{args:?} parsed");
        }
    }

    #[test]
    fn the_default_cluster_is_the_dev_clusters_first_node() {
        // Read from the definition, so a STRAND_CLUSTER set around the
        // test run cannot change the answer.
        let command = Cli::command();
        let cluster = command
            .get_arguments()
            .find(|arg| arg.get_id() == "cluster")
            .expect("a --cluster flag");
        assert_eq!(cluster.get_default_values(), [DEV_CLUSTER_ADDRESS]);
        assert_eq!(
            cluster.get_env().and_then(|env| env.to_str()),
            Some("STRAND_CLUSTER")
        );
    }

    #[test]
    fn small_parsers() {
        assert_eq!(
            parse_confirm("majority"),
            Ok(ConfirmPolicy::MajorityDurable)
        );
        assert_eq!(parse_confirm("local"), Ok(ConfirmPolicy::LocalDurable));
        assert_eq!(parse_confirm("3"), Ok(ConfirmPolicy::Count(3)));
        assert!(parse_confirm("most").is_err());
        assert_eq!(parse_start("earliest"), Ok(Start::Earliest));
        assert_eq!(parse_start("latest"), Ok(Start::Latest));
        assert_eq!(parse_start("42"), Ok(Start::Offset(42)));
        assert!(parse_start("-1").is_err());
        assert_eq!(parse_partition_target("7"), Ok(PartitionTarget::Group(7)));
        let partition = parse_partition_target("s/t/2").expect("a partition");
        assert_eq!(
            partition,
            PartitionTarget::Partition {
                stream: "s".into(),
                topic: "t".into(),
                partition: 2
            }
        );
        assert_eq!(partition.to_string(), "s/t/2");
        assert_eq!(PartitionTarget::Group(7).to_string(), "group 7");
        assert!(parse_partition_target("s/2").is_err());
    }

    #[test]
    fn partition_reassign_takes_a_target_replicas_and_a_policy() {
        let cli = parse(&[
            "partition",
            "reassign",
            "shop/orders/1",
            "--replicas",
            "1,2,4",
            "--confirm",
            "local",
        ])
        .expect("valid");
        let Command::Partition(PartitionCommand::Reassign(reassign)) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!(reassign.target.to_string(), "shop/orders/1");
        assert_eq!(reassign.replicas, [1, 2, 4]);
        assert_eq!(reassign.confirm, Some(ConfirmPolicy::LocalDurable));
        let cli = parse(&["partition", "reassign", "9", "--replicas", "3"]).expect("valid");
        let Command::Partition(PartitionCommand::Reassign(reassign)) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!(reassign.target, PartitionTarget::Group(9));
        assert_eq!((reassign.replicas, reassign.confirm), (vec![3], None));
    }

    #[test]
    fn drop_replica_takes_a_target_a_node_and_the_confirmation() {
        let cli =
            parse(&["partition", "drop-replica", "s/t/0", "--node", "2", "--yes"]).expect("valid");
        let Command::Partition(PartitionCommand::DropReplica(dropping)) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!(dropping.target.to_string(), "s/t/0");
        assert_eq!((dropping.node, dropping.yes), (2, true));
        let cli = parse(&["partition", "drop-replica", "4", "--node", "2"]).expect("valid");
        let Command::Partition(PartitionCommand::DropReplica(dropping)) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert!(!dropping.yes, "refused later, before anything is sent");
    }

    #[test]
    fn topic_alter_takes_any_of_the_changes() {
        let cli = parse(&[
            "topic",
            "alter",
            "shop/orders",
            "--retention-bytes",
            "0",
            "--confirm",
            "majority",
        ])
        .expect("valid");
        let Command::Topic(TopicCommand::Alter(alter)) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!(alter.topic.to_string(), "shop/orders");
        assert_eq!(alter.retention_bytes, Some(0), "0: no limit");
        assert_eq!(alter.retention_ms, None, "unchanged");
        assert_eq!(alter.confirm, Some(ConfirmPolicy::MajorityDurable));
        let cli = parse(&["topic", "alter", "s/t", "--retention-ms", "60000"]).expect("valid");
        let Command::Topic(TopicCommand::Alter(alter)) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!(
            (alter.retention_bytes, alter.retention_ms, alter.confirm),
            (None, Some(60_000), None)
        );
    }

    #[test]
    fn add_partitions_takes_the_new_total() {
        let cli = parse(&["topic", "add-partitions", "s/t", "--count", "8"]).expect("valid");
        let Command::Topic(TopicCommand::AddPartitions(adding)) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!((adding.topic.to_string(), adding.count), ("s/t".into(), 8));
    }

    #[test]
    fn deletes_take_their_target_and_the_confirmation() {
        let cli = parse(&["topic", "delete", "shop/orders", "--yes"]).expect("valid");
        let Command::Topic(TopicCommand::Delete(deleting)) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!(deleting.topic.to_string(), "shop/orders");
        assert!(deleting.yes);
        let cli = parse(&["stream", "delete", "shop"]).expect("valid");
        let Command::Stream(StreamCommand::Delete(deleting)) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!(deleting.name, "shop");
        assert!(!deleting.yes, "refused later, before anything is deleted");
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = parse(&["status", "--json", "--cluster", "x:1"]).expect("valid");
        assert!(cli.json);
        assert_eq!(cli.cluster, vec!["x:1"]);
        assert!(matches!(cli.command, Command::Status));
    }
}
