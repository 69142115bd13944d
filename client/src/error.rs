//! `ClientError`: every way an SDK call can fail, each message saying what to
//! do next.
//!
//! The most important split for a caller is whether a write may have happened:
//! - [`ClientError::OutcomeUnknown`]: the request reached the cluster and may or
//!   may not have been applied. Read back before retrying by hand.
//! - every other error from a produce or a create: the request was not applied
//!   (never sent, refused before it was prepared), or was applied with that
//!   result (for example `AlreadyExists`).

use strand_wire::ResultCode;
use strand_wire::ops::ErrorBody;
use strand_wire::{BodyError, Operation};

/// Why an SDK call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// An argument is unusable before anything is sent (a bad name, a zero count).
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// What is wrong with it.
        reason: String,
    },
    /// No bootstrap node answered a metadata request.
    #[error(
        "could not reach cluster {cluster} through {bootstrap:?}: {reason}; check the \
         addresses, the cluster id and that the nodes are running"
    )]
    Connect {
        /// The addresses tried.
        bootstrap: Vec<String>,
        /// The cluster id the client was configured with.
        cluster: u64,
        /// The last failure.
        reason: String,
    },
    /// The TLS settings could not be loaded (a missing or unreadable
    /// certificate or key file).
    #[error("{0}")]
    Tls(#[from] crate::tls::TlsError),
    /// One node could not be reached (in a per-node answer such as `cluster_status`).
    #[error("node {address} is unreachable: {reason}; it may be down")]
    Unreachable {
        /// The node's client address.
        address: String,
        /// What failed.
        reason: String,
    },
    /// No answer within the deadline. Safe to retry: a produce or create that
    /// ends this way was never sent (nothing was written); the other
    /// operations read, or store a cursor (idempotent).
    #[error(
        "{operation:?} got no answer within {deadline_ms} ms; safe to retry once the cluster \
         is reachable (a produce or create ending this way was never sent); see `attention` \
         if a group is stuck"
    )]
    Timeout {
        /// The operation.
        operation: Operation,
        /// The deadline that passed.
        deadline_ms: u64,
    },
    /// A replicated request was sent and its fate is unknown: it may or may not
    /// have been applied.
    #[error(
        "{operation:?} outcome unknown: {reason}; it may or may not have been applied: read \
         back (fetch, metadata) before retrying it by hand, or a retry may duplicate it"
    )]
    OutcomeUnknown {
        /// The operation.
        operation: Operation,
        /// Why the SDK stopped waiting.
        reason: String,
    },
    /// The stream does not exist.
    #[error("unknown stream: {message}; create it first (create_stream) or check the name")]
    UnknownStream {
        /// The server's explanation.
        message: String,
    },
    /// The topic does not exist.
    #[error("unknown topic: {message}; create it first (create_topic) or check the name")]
    UnknownTopic {
        /// The server's explanation.
        message: String,
    },
    /// The partition index is past the topic's partition count.
    #[error(
        "partition {partition} does not exist: {stream}/{topic} has {partition_count} \
         partitions (0..{partition_count})"
    )]
    UnknownPartition {
        /// Stream name.
        stream: String,
        /// Topic name.
        topic: String,
        /// The partition asked for.
        partition: u32,
        /// How many the topic has.
        partition_count: u32,
    },
    /// The node does not host the group (a node-local call such as `accept_loss`).
    #[error("unknown group: {message}; the node hosts no replica of it (check `cluster_status`)")]
    UnknownGroup {
        /// The server's explanation.
        message: String,
    },
    /// A stream or topic by that name exists already.
    #[error("already exists: {message}; use the existing one or pick another name")]
    AlreadyExists {
        /// The server's explanation.
        message: String,
    },
    /// The request is over the server's size limit; nothing was written.
    #[error(
        "request of {size} bytes is over the server's limit of {max} bytes; nothing was \
         written: send smaller batches (lower batch_bytes_max) or smaller records"
    )]
    TooLarge {
        /// The request's size.
        size: u64,
        /// The server's limit.
        max: u64,
    },
    /// The server refused the request as malformed or out of range.
    #[error(
        "the server refused the request: {message}; nothing was written: fix the argument \
         (or report an SDK bug if the arguments were valid)"
    )]
    InvalidRequest {
        /// The server's explanation.
        message: String,
    },
    /// A fetch offset is outside the partition's retained records.
    #[error(
        "offset {requested} is outside the retained range {log_start_offset}..{high_watermark}: \
         seek to log_start_offset to read what is left (older records were dropped by \
         retention) or to high_watermark to read only new records"
    )]
    OffsetOutOfRange {
        /// The offset asked for.
        requested: u64,
        /// Oldest retained offset.
        log_start_offset: u64,
        /// One past the last committed offset.
        high_watermark: u64,
    },
    /// The group or node cannot serve now and the SDK stopped retrying.
    #[error(
        "unavailable: {message}; retry later, or run `attention` to see what a group waits for"
    )]
    Unavailable {
        /// The server's explanation.
        message: String,
    },
    /// Storage failed on the server; nothing was written for this request.
    #[error(
        "storage failed on the server: {message}; nothing was written for this request: check \
         the node's disk, then retry"
    )]
    Storage {
        /// The server's explanation.
        message: String,
    },
    /// The partition's topic (or stream) was deleted; the request was not
    /// done and never will be. A topic created again under the same name is
    /// a new topic: look it up again to write to it.
    #[error(
        "deleted: {message}; the request was not done (a topic created again under the name \
         is a new one)"
    )]
    Deleted {
        /// The server's explanation.
        message: String,
    },
    /// The node's data disk is full; nothing was written for this request.
    #[error(
        "disk full on the server: {message}; nothing was written for this request: free space \
         on the node (delete topics, lower retention, grow the disk), then retry"
    )]
    DiskFull {
        /// The server's explanation.
        message: String,
    },
    /// The consumer group no longer holds this member (it left, or was
    /// removed after missing heartbeats for its session timeout): join again.
    #[error("removed from the consumer group: {message}; join the group again")]
    UnknownMember {
        /// The server's explanation.
        message: String,
    },
    /// A consumer group member stored an offset for a generation that is
    /// over, or for a partition that is no longer its: nothing was stored.
    #[error(
        "the consumer group was rebalanced: {message}; nothing was stored: take the new \
         assignment and go on from the group's stored offsets"
    )]
    StaleGeneration {
        /// The server's explanation.
        message: String,
    },
    /// The node refused an operation that could lose acknowledged records
    /// as things stand (see [`crate::safety`]): nothing was done. Wait for
    /// what the message names, or force it.
    #[error("{message}")]
    Refused {
        /// The node's explanation: why, and what to do.
        message: String,
    },
    /// The credentials were refused (no such user, a wrong password, a
    /// token revoked or expired, a user deleted since signing in), or the
    /// cluster requires signing in and none were given.
    #[error("authentication failed: {message}")]
    AuthenticationFailed {
        /// The node's explanation.
        message: String,
    },
    /// The node refused the operation to this caller: nothing was done.
    #[error("permission denied: {message}")]
    PermissionDenied {
        /// The server's explanation (what was refused, and why).
        message: String,
    },
    /// A change made partition by partition (a topic's confirm policy) was
    /// refused for some partitions; every other partition was changed.
    /// Retry it once what each refusal names is resolved (a reassignment
    /// still in progress: once its epoch started).
    #[error(
        "{stream}/{topic}: the change was refused for {}; the other partitions were changed",
        refusals_text(refused)
    )]
    PartitionsRefused {
        /// The stream.
        stream: String,
        /// The topic.
        topic: String,
        /// Each refused partition's index and why it was refused, ascending.
        refused: Vec<(u32, ClientError)>,
    },
    /// A bound on what a client may grow was reached (a partition keeps
    /// cursors for at most so many distinct consumer names): nothing was
    /// done. The message names the bound and how to make room (delete
    /// cursors no longer used, or raise the nodes' setting).
    #[error("limit reached: {message}")]
    LimitExceeded {
        /// The server's explanation: which bound, and what to do.
        message: String,
    },
    /// A bug or unexpected state on the server.
    #[error("internal server error: {message}; report it with the server's logs")]
    Internal {
        /// The server's explanation.
        message: String,
    },
    /// The server sent bytes this SDK cannot read.
    #[error(
        "the server sent a reply this SDK cannot read: {reason}; check that client and server \
         versions match"
    )]
    Protocol {
        /// What could not be read.
        reason: String,
    },
    /// The client (or the producer) was shut down before the call finished.
    #[error("the client was shut down before the call finished")]
    Closed,
    /// A record was never sent: its producer was stopped first. Nothing was
    /// written for it.
    #[error("not sent: {reason}; nothing was written for it")]
    NotSent {
        /// Why it was not sent.
        reason: String,
    },
}

impl ClientError {
    /// The typed error for an error reply body.
    ///
    /// Codes the SDK normally retries (`NotPrimary`, `Busy`, `OutOfOrder`,
    /// `SessionEvicted`) only reach here when retrying is not possible for
    /// the call; they map to the nearest meaning for a caller.
    pub fn from_error_body(operation: Operation, body: ErrorBody) -> ClientError {
        match body {
            ErrorBody::NotPrimary { view, .. } => ClientError::Unavailable {
                message: format!("the node is not the group's primary (view {view})"),
            },
            ErrorBody::Busy { retry_after_ms } => ClientError::Unavailable {
                message: format!("the node is busy (asked to retry after {retry_after_ms} ms)"),
            },
            ErrorBody::TooLarge { size, max } => ClientError::TooLarge { size, max },
            ErrorBody::OffsetOutOfRange {
                requested,
                log_start_offset,
                high_watermark,
            } => ClientError::OffsetOutOfRange {
                requested,
                log_start_offset,
                high_watermark,
            },
            ErrorBody::OutOfOrder { expected } => ClientError::Internal {
                message: format!("request numbering out of order (group expects {expected})"),
            },
            ErrorBody::Message { code, message } => from_code(operation, code, message),
        }
    }

    /// The typed error for a reply whose body could not be decoded.
    pub fn from_body_error(what: &str, error: BodyError) -> ClientError {
        ClientError::Protocol {
            reason: format!("{what}: {error}"),
        }
    }

    /// True when the request may have been applied although the call failed.
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, ClientError::OutcomeUnknown { .. })
    }
}

/// `partition 3 (why); partition 5 (why)`.
fn refusals_text(refused: &[(u32, ClientError)]) -> String {
    let refusals: Vec<String> = refused
        .iter()
        .map(|(partition, error)| format!("partition {partition} ({error})"))
        .collect();
    refusals.join("; ")
}

fn from_code(operation: Operation, code: ResultCode, message: String) -> ClientError {
    match code {
        ResultCode::UnknownStream => ClientError::UnknownStream { message },
        ResultCode::UnknownTopic => ClientError::UnknownTopic { message },
        ResultCode::UnknownGroup => ClientError::UnknownGroup { message },
        ResultCode::AlreadyExists => ClientError::AlreadyExists { message },
        ResultCode::InvalidRequest => ClientError::InvalidRequest { message },
        ResultCode::Unavailable
        | ResultCode::NotPrimary
        | ResultCode::Busy
        | ResultCode::NotReady => ClientError::Unavailable { message },
        ResultCode::SessionEvicted => ClientError::OutcomeUnknown {
            operation,
            reason: format!("the group forgot this client's session ({message})"),
        },
        ResultCode::StorageError => ClientError::Storage { message },
        ResultCode::Deleted => ClientError::Deleted { message },
        ResultCode::DiskFull => ClientError::DiskFull { message },
        ResultCode::UnknownMember => ClientError::UnknownMember { message },
        ResultCode::StaleGeneration => ClientError::StaleGeneration { message },
        ResultCode::PermissionDenied => ClientError::PermissionDenied { message },
        ResultCode::Refused => ClientError::Refused { message },
        // Only a sign-in is throttled, and a refused sign-in is an
        // authentication failure to the caller; the message says to wait.
        ResultCode::AuthenticationFailed | ResultCode::Throttled => {
            ClientError::AuthenticationFailed { message }
        }
        ResultCode::LimitExceeded => ClientError::LimitExceeded { message },
        // TooLarge, OffsetOutOfRange and OutOfOrder have structured bodies;
        // a server sending them as messages is confused: report it as is.
        ResultCode::Internal
        | ResultCode::Ok
        | ResultCode::TooLarge
        | ResultCode::OffsetOutOfRange
        | ResultCode::OutOfOrder => ClientError::Internal {
            message: format!("{code:?}: {message}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_body_maps_to_a_typed_error() {
        let operation = Operation::Produce;
        for code in ResultCode::ALL {
            if matches!(
                code,
                ResultCode::Ok
                    | ResultCode::NotPrimary
                    | ResultCode::Busy
                    | ResultCode::TooLarge
                    | ResultCode::OffsetOutOfRange
                    | ResultCode::OutOfOrder
            ) {
                continue;
            }
            let error = ClientError::from_error_body(operation, ErrorBody::message(code, "why"));
            assert!(error.to_string().contains("why"), "{code:?}: {error}");
        }
        let evicted = ClientError::from_error_body(
            operation,
            ErrorBody::message(ResultCode::SessionEvicted, "gone"),
        );
        assert!(evicted.is_outcome_unknown());
        let too_large =
            ClientError::from_error_body(operation, ErrorBody::TooLarge { size: 9, max: 4 });
        assert_eq!(too_large, ClientError::TooLarge { size: 9, max: 4 });
        let limit = ClientError::from_error_body(
            Operation::StoreCursor,
            ErrorBody::message(ResultCode::LimitExceeded, "at most 10 names"),
        );
        assert_eq!(
            limit,
            ClientError::LimitExceeded {
                message: "at most 10 names".to_owned()
            }
        );
    }
}
