//! `CliError`: why a command failed, as a message for the terminal that says
//! what to do next in `strand` terms, and the exit code it ends with.

use crate::error::ClientError;

use super::Outcome;

/// Why a command failed.
#[derive(Debug)]
pub(crate) enum CliError {
    /// The arguments cannot work (found after parsing), or a required
    /// confirmation is missing. Exit code 2.
    Usage(String),
    /// An SDK call failed while doing `doing` (for example "produce to s/t").
    Client {
        /// What the command was doing, naming its target.
        doing: String,
        /// The SDK's error.
        error: ClientError,
    },
    /// The command failed for a reason already worded for the terminal. Exit code 1.
    Failed(String),
    /// Reading stdin or writing stdout failed.
    Io {
        /// What was read or written.
        doing: &'static str,
        /// The error.
        error: std::io::Error,
    },
    /// The command ran and found its answer negative (the message is the
    /// report already printed; nothing more to say).
    Reported(Outcome),
}

impl CliError {
    /// The error for a failed SDK call.
    pub(crate) fn client(doing: impl Into<String>, error: ClientError) -> CliError {
        CliError::Client {
            doing: doing.into(),
            error,
        }
    }

    /// The exit code this error ends the command with.
    pub(crate) fn outcome(&self) -> Outcome {
        match self {
            CliError::Usage(_) => Outcome::Usage,
            CliError::Client { .. } | CliError::Failed(_) | CliError::Io { .. } => Outcome::Failed,
            CliError::Reported(outcome) => *outcome,
        }
    }

    /// The lines printed on stderr (empty for `Reported`).
    pub(crate) fn message(&self) -> String {
        match self {
            CliError::Usage(message) | CliError::Failed(message) => format!("error: {message}\n"),
            CliError::Client { doing, error } => {
                let mut text = format!("error: {doing}: {}\n", client_summary(error));
                if let Some(hint) = hint(error) {
                    text.push_str(&format!("hint: {hint}\n"));
                }
                text
            }
            CliError::Io { doing, error } => format!("error: {doing}: {error}\n"),
            CliError::Reported(_) => String::new(),
        }
    }
}

impl From<std::io::Error> for CliError {
    fn from(error: std::io::Error) -> CliError {
        CliError::Io {
            doing: "writing the output",
            error,
        }
    }
}

/// What went wrong, without the SDK's advice (which names SDK calls); short
/// enough for a table cell.
pub(crate) fn client_summary(error: &ClientError) -> String {
    match error {
        ClientError::Connect {
            bootstrap,
            cluster,
            reason,
        } => format!(
            "could not reach cluster {cluster} through {}: {reason}",
            bootstrap.join(",")
        ),
        ClientError::Unreachable { reason, .. } => format!("unreachable ({reason})"),
        ClientError::Timeout {
            operation,
            deadline_ms,
        } => format!("no answer to {operation:?} within {deadline_ms} ms"),
        ClientError::OutcomeUnknown { reason, .. } => {
            format!("outcome unknown ({reason}): it may or may not have been applied")
        }
        ClientError::UnknownStream { message } => format!("unknown stream ({message})"),
        ClientError::UnknownTopic { message } => format!("unknown topic ({message})"),
        ClientError::AlreadyExists { message } => format!("already exists ({message})"),
        ClientError::UnknownGroup { message } => format!("unknown group ({message})"),
        ClientError::Deleted { message } => format!("deleted ({message})"),
        ClientError::DiskFull { message } => format!("disk full ({message}); nothing was written"),
        ClientError::Unavailable { message } => format!("unavailable ({message})"),
        ClientError::OffsetOutOfRange {
            requested,
            log_start_offset,
            high_watermark,
        } => format!(
            "offset {requested} is outside the retained range {log_start_offset}..{high_watermark}"
        ),
        ClientError::TooLarge { size, max } => format!(
            "a request of {size} bytes is over the server's limit of {max} bytes; nothing was \
             written"
        ),
        ClientError::PartitionsRefused {
            stream,
            topic,
            refused,
        } => {
            let refusals: Vec<String> = refused
                .iter()
                .map(|(partition, error)| {
                    format!("partition {partition}: {}", client_summary(error))
                })
                .collect();
            format!(
                "refused for {stream}/{topic} {}; the other partitions were changed",
                refusals.join("; ")
            )
        }
        other => other.to_string(),
    }
}

/// What to do about `error`, in `strand` commands: every error the
/// client reports is named here once, by what the hint is about.
fn hint(error: &ClientError) -> Option<String> {
    let hint = match error {
        ClientError::UnknownStream { .. }
        | ClientError::UnknownTopic { .. }
        | ClientError::UnknownPartition { .. }
        | ClientError::UnknownGroup { .. }
        | ClientError::AlreadyExists { .. }
        | ClientError::OffsetOutOfRange { .. }
        | ClientError::TooLarge { .. }
        | ClientError::Deleted { .. }
        | ClientError::UnknownMember { .. }
        | ClientError::StaleGeneration { .. } => naming_hint(error),
        ClientError::Connect { .. }
        | ClientError::AuthenticationFailed { .. }
        | ClientError::PermissionDenied { .. }
        | ClientError::Tls(_) => access_hint(error),
        ClientError::Timeout { .. }
        | ClientError::Unavailable { .. }
        | ClientError::OutcomeUnknown { .. }
        | ClientError::DiskFull { .. }
        | ClientError::NotSent { .. }
        | ClientError::Refused { .. }
        | ClientError::LimitExceeded { .. }
        | ClientError::PartitionsRefused { .. } => cluster_hint(error),
        ClientError::InvalidArgument { .. }
        | ClientError::Unreachable { .. }
        | ClientError::InvalidRequest { .. }
        | ClientError::Storage { .. }
        | ClientError::Internal { .. }
        | ClientError::Protocol { .. }
        | ClientError::Closed => return None,
    };
    Some(hint.to_owned())
}

/// Hints for what the command named: a stream, topic, partition, group or
/// offset that is not there (or is already), a record too large.
fn naming_hint(error: &ClientError) -> &'static str {
    match error {
        ClientError::UnknownStream { .. } => {
            "create it with `strand stream create NAME` (or `strand topic create STREAM/TOPIC`, \
             which creates the stream too); `strand stream list` shows the streams"
        }
        ClientError::UnknownTopic { .. } => {
            "create it with `strand topic create STREAM/TOPIC`; `strand topic list` shows the topics"
        }
        ClientError::UnknownPartition { .. } => {
            "pick a partition below the count; `strand topic describe STREAM/TOPIC` lists them"
        }
        ClientError::UnknownGroup { .. } => {
            "`strand status` lists every group and the nodes hosting it"
        }
        ClientError::AlreadyExists { .. } => {
            "use the existing one (`strand topic describe STREAM/TOPIC`) or pick another name"
        }
        ClientError::OffsetOutOfRange { .. } => {
            "use --from earliest or --from latest, or an offset inside the range"
        }
        ClientError::TooLarge { .. } => "produce smaller records",
        ClientError::Deleted { .. } => {
            "the topic was deleted while the request was on its way; `strand topic list` shows \
             what exists now"
        }
        ClientError::UnknownMember { .. } | ClientError::StaleGeneration { .. } => {
            "`strand consumer-group describe NAME` shows the group's members and who reads what"
        }
        other => unreachable!("hint() names the naming errors: {other:?}"),
    }
}

/// Hints for reaching and signing in to the cluster: addresses, TLS,
/// credentials, rights.
fn access_hint(error: &ClientError) -> &'static str {
    match error {
        ClientError::Connect { .. } => {
            "check --cluster (or STRAND_CLUSTER) and --cluster-id, that the nodes run \
             (`strand-server dev-cluster` starts a local cluster on 127.0.0.1:7201..), and \
             for a cluster with TLS, --ca (or STRAND_CA)"
        }
        ClientError::AuthenticationFailed { .. } => {
            "give the user and password (--user and --password-file, or STRAND_USER and \
             STRAND_PASSWORD), or a token that is not revoked or expired (--token-file or \
             STRAND_TOKEN)"
        }
        ClientError::PermissionDenied { .. } => {
            "the node allows this only to the cluster's own nodes or to a user granted it"
        }
        ClientError::Tls(_) => {
            "--ca (or STRAND_CA) names the cluster's CA certificate; `strand-server dev-cluster` \
             prints where its CA is"
        }
        other => unreachable!("hint() names the access errors: {other:?}"),
    }
}

/// Hints for the cluster's state: unavailable, full, refusing, or an
/// outcome it could not report.
fn cluster_hint(error: &ClientError) -> &'static str {
    match error {
        ClientError::Timeout { .. } | ClientError::Unavailable { .. } => {
            "retry once the cluster is reachable; `strand attention` shows partitions that wait, \
             `strand status` which nodes answer (--timeout-ms waits longer)"
        }
        ClientError::OutcomeUnknown { .. } => {
            "read back with `strand consume` before producing again, or records may be duplicated"
        }
        ClientError::DiskFull { .. } => {
            "free space on the node's data disk (`strand topic delete`, `strand topic alter \
             --retention-bytes`, or a bigger disk); writes resume by themselves, \
             `strand attention` lists the nodes that are full"
        }
        ClientError::NotSent { .. } => "send those records again once the cluster is reachable",
        ClientError::Refused { .. } => {
            "`strand status` shows which replicas are caught up; --force overrides the check"
        }
        ClientError::LimitExceeded { .. } => {
            "delete cursors no longer used (`strand cursor delete STREAM/TOPIC NAME \
             --partition N`), or raise cursor_consumers_per_partition_max in every node's \
             configuration"
        }
        ClientError::PartitionsRefused { .. } => {
            "run the same command again once the refused partitions' reassignments have \
             started (`strand status` shows each partition's epoch); the partitions already \
             changed are left as they are"
        }
        other => unreachable!("hint() names the cluster errors: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_topic_says_how_to_create_it() {
        let error = CliError::client(
            "produce to shop/orders",
            ClientError::UnknownTopic {
                message: "shop/orders is not in the cluster's metadata".into(),
            },
        );
        let message = error.message();
        assert!(message.starts_with("error: produce to shop/orders: unknown topic"));
        assert!(message.contains("hint: create it with `strand topic create"));
        assert!(
            !message.contains("create_topic"),
            "no SDK call names: {message}"
        );
        assert_eq!(error.outcome(), Outcome::Failed);
    }

    #[test]
    fn a_refused_cluster_names_the_addresses_and_the_flag() {
        let error = CliError::client(
            "connect",
            ClientError::Connect {
                bootstrap: vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()],
                cluster: 0,
                reason: "connection refused".into(),
            },
        );
        let message = error.message();
        assert!(message.contains("127.0.0.1:1,127.0.0.1:2"), "{message}");
        assert!(message.contains("--cluster"), "{message}");
    }

    #[test]
    fn usage_errors_exit_2_and_reports_print_nothing_more() {
        assert_eq!(CliError::Usage("x".into()).outcome(), Outcome::Usage);
        let reported = CliError::Reported(Outcome::NeedsAttention);
        assert_eq!(reported.outcome(), Outcome::NeedsAttention);
        assert_eq!(reported.message(), "");
    }
}
