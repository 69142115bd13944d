//! Kafka's error codes, and the one each Strand result becomes, chosen so
//! that a Kafka client does what it would do against Kafka: refresh its
//! metadata after a failover, retry what is retriable, give up on the rest.

use strand_wire::ResultCode;

/// Kafka's error codes this node answers with.
pub mod code {
    /// No error.
    pub const NONE: i16 = 0;
    /// An unexpected server error (not retriable).
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    /// The offset is outside the partition's retained records.
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    /// A record batch failed its checks.
    pub const CORRUPT_MESSAGE: i16 = 2;
    /// No such topic or partition.
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    /// The partition has no leader now (retriable).
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    /// This node does not lead the partition: refresh metadata.
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    /// The request timed out on the node (retriable).
    pub const REQUEST_TIMED_OUT: i16 = 7;
    /// A batch larger than the node takes.
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    /// A consumer group generation that is not the current one.
    pub const ILLEGAL_GENERATION: i16 = 22;
    /// A consumer group member the coordinator does not know.
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    /// The coordinator is loading (retriable).
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    /// No coordinator is available now (retriable).
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    /// This node does not coordinate the group: find it again.
    pub const NOT_COORDINATOR: i16 = 16;
    /// A group id that is not a valid Strand consumer name.
    pub const INVALID_GROUP_ID: i16 = 24;
    /// Members of one group must speak the same protocols.
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    /// A session timeout outside the bounds the node takes.
    pub const INVALID_SESSION_TIMEOUT: i16 = 26;
    /// The group is rebalancing: rejoin.
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    /// The caller may not use the group.
    pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
    /// The caller may not use the topic.
    pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    /// The caller may not do this to the cluster.
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
    /// An API version this node does not serve.
    pub const UNSUPPORTED_VERSION: i16 = 35;
    /// The topic exists already.
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    /// A partition count that is not allowed.
    pub const INVALID_PARTITIONS: i16 = 37;
    /// A replication factor that is not allowed.
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    /// Replica assignments are the cluster's to make.
    pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
    /// A config this node does not take.
    pub const INVALID_CONFIG: i16 = 40;
    /// This node is not the controller: refresh metadata.
    pub const NOT_CONTROLLER: i16 = 41;
    /// The request does not decode or makes no sense.
    pub const INVALID_REQUEST: i16 = 42;
    /// A policy of the cluster refused it.
    pub const POLICY_VIOLATION: i16 = 44;
    /// Transactions are not served.
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
    /// A replica's storage failed (retriable).
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    /// The SASL credentials do not hold.
    pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
    /// The SASL mechanism is not served.
    pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
    /// A SASL message out of its turn.
    pub const ILLEGAL_SASL_STATE: i16 = 34;
    /// A produce whose sequence skips or repeats part of its producer's.
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    /// A producer id (or epoch) the partition does not know: the producer
    /// asks for a new epoch.
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
    /// A fetch session this node never opened.
    pub const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
    /// A group with members cannot be deleted.
    pub const NON_EMPTY_GROUP: i16 = 68;
    /// A new member must rejoin with the id it was given.
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    /// The group has as many members as it may.
    pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
    /// The caller's quota is spent (retriable after the throttle time).
    pub const THROTTLING_QUOTA_EXCEEDED: i16 = 89;
}

/// The Kafka error code a Strand result becomes.
pub fn from_result(result: ResultCode) -> i16 {
    match result {
        ResultCode::Ok => code::NONE,
        ResultCode::NotPrimary | ResultCode::Unavailable => code::NOT_LEADER_OR_FOLLOWER,
        ResultCode::NotReady => code::LEADER_NOT_AVAILABLE,
        // The node could not take it now, or the request's number was not
        // the one its group expected: the client's retry goes through.
        ResultCode::Busy | ResultCode::OutOfOrder | ResultCode::SessionEvicted => {
            code::REQUEST_TIMED_OUT
        }
        ResultCode::UnknownStream
        | ResultCode::UnknownTopic
        | ResultCode::UnknownGroup
        | ResultCode::Deleted => code::UNKNOWN_TOPIC_OR_PARTITION,
        ResultCode::AlreadyExists => code::TOPIC_ALREADY_EXISTS,
        ResultCode::TooLarge => code::MESSAGE_TOO_LARGE,
        ResultCode::InvalidRequest => code::INVALID_REQUEST,
        ResultCode::OffsetOutOfRange => code::OFFSET_OUT_OF_RANGE,
        ResultCode::StorageError | ResultCode::DiskFull => code::KAFKA_STORAGE_ERROR,
        ResultCode::UnknownMember => code::UNKNOWN_MEMBER_ID,
        ResultCode::StaleGeneration => code::ILLEGAL_GENERATION,
        ResultCode::PermissionDenied => code::TOPIC_AUTHORIZATION_FAILED,
        ResultCode::AuthenticationFailed => code::SASL_AUTHENTICATION_FAILED,
        ResultCode::Refused | ResultCode::LimitExceeded => code::POLICY_VIOLATION,
        ResultCode::Throttled => code::THROTTLING_QUOTA_EXCEEDED,
        ResultCode::Internal => code::UNKNOWN_SERVER_ERROR,
    }
}

/// The Kafka error code a Strand result becomes for an idempotent
/// producer's batch: a sequence the partition does not expect, or a
/// producer it has forgotten, are told as Kafka tells them.
pub fn from_sequenced_result(result: ResultCode) -> i16 {
    match result {
        ResultCode::OutOfOrder => code::OUT_OF_ORDER_SEQUENCE_NUMBER,
        ResultCode::SessionEvicted => code::UNKNOWN_PRODUCER_ID,
        other => from_result(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failover_makes_clients_refresh_their_metadata() {
        assert_eq!(
            from_result(ResultCode::NotPrimary),
            code::NOT_LEADER_OR_FOLLOWER
        );
        assert_eq!(
            from_result(ResultCode::Deleted),
            code::UNKNOWN_TOPIC_OR_PARTITION
        );
        assert_eq!(
            from_result(ResultCode::Throttled),
            code::THROTTLING_QUOTA_EXCEEDED
        );
    }
}
