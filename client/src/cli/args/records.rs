//! Records in and out: `strand produce`, `strand consume` (where it starts:
//! an offset, `earliest`, `latest` or a time) and `strand consumer-group ...`
//! (where a reset moves a group's offsets).

use clap::{Args, Subcommand};

use super::{GENERATED_RECORD_BYTES_MAX, TopicPath, parse_topic_path};

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
    /// A header every record carries, as NAME=VALUE (repeatable; Kafka
    /// consumers read them as the record's headers).
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = parse_header)]
    pub(crate) headers: Vec<(String, String)>,
    /// Generate this many records instead of reading stdin.
    #[arg(long)]
    pub(crate) count: Option<u64>,
    /// Bytes per generated record value.
    #[arg(long, default_value_t = 100, requires = "count", value_parser = parse_record_size)]
    pub(crate) size: usize,
}

/// Parses a record header, `NAME=VALUE` (split at the first `=`; the name
/// is not empty).
fn parse_header(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {text:?}")),
    }
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
