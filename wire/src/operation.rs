//! Client operations and result codes: the vocabulary of the client port.
//! What each operation is (its route, the right it needs, whether it is
//! audited or replicated) is its row in [`crate::operation_table`].

/// What a client asks for in a `Request` (and what a `Reply` answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Operation {
    /// Create a stream (a namespace of topics). Metadata plane.
    CreateStream = 1,
    /// Create a topic with its partitions and policies. Metadata plane.
    CreateTopic = 2,
    /// Append a record batch to a partition.
    Produce = 3,
    /// Read record batches from a partition by offset, optionally waiting.
    Fetch = 4,
    /// Store a consumer's cursor (its next offset) on a partition.
    StoreCursor = 5,
    /// Read a consumer's stored cursor.
    GetCursor = 6,
    /// Nodes, groups, views, primaries, commit numbers, untrusted logs.
    ClusterStatus = 7,
    /// Every group whose view change waits, why, and for whom.
    Attention = 8,
    /// Let a stuck view change go on with the logs at hand (may lose records).
    /// Node-local: sent to each node hosting a replica of the stuck group.
    AcceptLoss = 9,
    /// Routing: nodes and their addresses, topics and their partitions' groups.
    Metadata = 10,
    /// A group's own change of membership, prepared by its primary when the
    /// metadata plane assigned a new replica set or confirm policy that takes
    /// effect in place. Internal: never sent by clients.
    Reconfigure = 11,
    /// Give a partition a new replica set and, optionally, confirm policy:
    /// the next epoch's slots. Metadata plane.
    ReassignPartition = 12,
    /// A partition's primary reports that the partition's new epoch has
    /// started, so the nodes that left are retired. Metadata plane; sent by
    /// nodes, retried until answered.
    EpochStarted = 13,
    /// Forget a retired copy of a partition (its node deletes the data).
    /// Metadata plane.
    DropReplica = 14,
    /// Delete a topic: every node removes its partitions' data, and the name
    /// is free again. Metadata plane.
    DeleteTopic = 15,
    /// Delete a stream and every topic in it. Metadata plane.
    DeleteStream = 16,
    /// Change a topic's retention limits. Metadata plane.
    AlterTopic = 17,
    /// Give a topic more partitions. Metadata plane.
    AddPartitions = 18,
    /// The first offset appended at or after a time, on one partition.
    OffsetForTime = 19,
    /// Join a consumer group (created by its first join). Metadata plane.
    JoinConsumerGroup = 20,
    /// A consumer group member is alive; answered by the metadata plane's
    /// primary (the group coordinator) with the member's assignment. Not
    /// replicated.
    ConsumerHeartbeat = 21,
    /// Leave a consumer group (or be removed by the coordinator). Metadata
    /// plane.
    LeaveConsumerGroup = 22,
    /// Consumer groups, their members and assignments: answered by any node
    /// from its catalog.
    DescribeConsumerGroups = 23,
    /// Create a user with a password hash. Metadata plane.
    CreateUser = 24,
    /// Delete a user. Metadata plane.
    DeleteUser = 25,
    /// Grant a user a permission. Metadata plane.
    GrantPermission = 26,
    /// Take a permission back from a user. Metadata plane.
    RevokePermission = 27,
    /// Every user and its permissions: answered by any node from its catalog.
    ListUsers = 28,
    /// Sign the connection in as a user: answered by the node itself (not
    /// replicated); a connection's first frame when the cluster requires it.
    Authenticate = 29,
    /// Create an access token for a user. Metadata plane.
    CreateToken = 30,
    /// Revoke an access token. Metadata plane.
    RevokeToken = 31,
    /// Delete a consumer's cursor on a partition (stored as a tombstone in
    /// the partition's cursor log, like a store), freeing its name's slot
    /// under the partition's bound on consumer names. Needs `consume`.
    DeleteCursor = 32,
    /// Revoke a user certificate by its SHA-256 fingerprint. Metadata plane.
    RevokeCertificate = 33,
    /// Set a user's produce, fetch and request rates. Metadata plane, admin.
    SetQuota = 34,
    /// Every user's quota: answered by any node from its catalog. Admin.
    ListQuotas = 35,
    /// One group's status as the answering node's replica sees it (its
    /// view, commit, and, on a primary, which replicas are caught up):
    /// answered by the node itself. A node's partition-move check asks the
    /// partition's replicas this over the replica bus.
    GroupStatus = 36,
}

impl Operation {
    /// Every operation, in wire order.
    pub const ALL: [Operation; 36] = [
        Operation::CreateStream,
        Operation::CreateTopic,
        Operation::Produce,
        Operation::Fetch,
        Operation::StoreCursor,
        Operation::GetCursor,
        Operation::ClusterStatus,
        Operation::Attention,
        Operation::AcceptLoss,
        Operation::Metadata,
        Operation::Reconfigure,
        Operation::ReassignPartition,
        Operation::EpochStarted,
        Operation::DropReplica,
        Operation::DeleteTopic,
        Operation::DeleteStream,
        Operation::AlterTopic,
        Operation::AddPartitions,
        Operation::OffsetForTime,
        Operation::JoinConsumerGroup,
        Operation::ConsumerHeartbeat,
        Operation::LeaveConsumerGroup,
        Operation::DescribeConsumerGroups,
        Operation::CreateUser,
        Operation::DeleteUser,
        Operation::GrantPermission,
        Operation::RevokePermission,
        Operation::ListUsers,
        Operation::Authenticate,
        Operation::CreateToken,
        Operation::RevokeToken,
        Operation::DeleteCursor,
        Operation::RevokeCertificate,
        Operation::SetQuota,
        Operation::ListQuotas,
        Operation::GroupStatus,
    ];

    /// Parses the operation byte; `None` for a byte that names none.
    pub fn from_u8(value: u8) -> Option<Operation> {
        Operation::ALL
            .iter()
            .copied()
            .find(|operation| *operation as u8 == value)
    }
}

/// Outcome of a request, in the `Reply` header. Anything but `Ok` comes with an
/// error body (see `ops::ErrorBody`) saying what to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum ResultCode {
    /// Done; the body is the operation's reply.
    Ok = 0,
    /// This replica is not the group's primary: retry at the primary named in the body.
    NotPrimary = 1,
    /// The primary's pipeline is full: retry after a short wait, same request number.
    Busy = 2,
    /// No stream by that name.
    UnknownStream = 3,
    /// No topic by that name.
    UnknownTopic = 4,
    /// The group id names no partition on this node.
    UnknownGroup = 5,
    /// A stream or topic by that name exists already.
    AlreadyExists = 6,
    /// The request is larger than the server accepts.
    TooLarge = 7,
    /// The request is malformed or a field is out of range.
    InvalidRequest = 8,
    /// The fetch offset is outside the partition's retained records.
    OffsetOutOfRange = 9,
    /// The group cannot serve now (view change in progress, or waiting for
    /// replicas): retry later, or see `attention`.
    Unavailable = 10,
    /// The client's entry was evicted from the client table: start a new client id.
    SessionEvicted = 11,
    /// Storage failed (disk full, I/O error): nothing was written for this request.
    StorageError = 12,
    /// A bug or an unexpected state on the server; the body says more.
    Internal = 13,
    /// The request number is not the one the group expects next from this
    /// client: resend the unanswered requests in order from the one named.
    OutOfOrder = 14,
    /// This node cannot answer truthfully yet (its metadata catalog is still
    /// loading, or it is not caught up with the metadata plane): ask another
    /// node. Nothing was done.
    NotReady = 15,
    /// The partition's topic (or stream) was deleted: the request was not
    /// done and never will be. A topic created again under the same name is
    /// a new topic with new partitions.
    Deleted = 16,
    /// The node's data disk is (nearly) full: nothing was written for this
    /// request. Retry later; the node takes writes again once space is freed.
    DiskFull = 17,
    /// The consumer group does not hold this member (it left, or the
    /// coordinator removed it after its session timeout): join again.
    UnknownMember = 18,
    /// A consumer group member stored an offset for a generation that is
    /// over (the group was rebalanced since) or for a partition it no
    /// longer reads: nothing was stored; heartbeat to learn the new
    /// assignment.
    StaleGeneration = 19,
    /// The caller may not do this (an operation only the cluster's nodes
    /// may send, or one the user has no right to): nothing was done.
    PermissionDenied = 20,
    /// The node refused an operation that could lose acknowledged records
    /// as things stand (a reassignment to replicas that lack them, a drop
    /// while a member catches up): nothing was done; wait, or force it.
    Refused = 21,
    /// The credentials do not match a user (the same answer for an unknown
    /// user and a wrong password), or the connection has not signed in.
    AuthenticationFailed = 22,
    /// Too many failed sign-ins from this address or for this user name:
    /// refused without checking the credentials. The message says how long
    /// to wait.
    Throttled = 23,
    /// A bound on what a client may grow was reached (the distinct consumer
    /// names a partition keeps cursors for): nothing was done. The message
    /// names the bound and how to make room (delete cursors no longer
    /// used, or raise the node's setting).
    LimitExceeded = 24,
}

impl ResultCode {
    /// Every result code, in wire order.
    pub const ALL: [ResultCode; 25] = [
        ResultCode::Ok,
        ResultCode::NotPrimary,
        ResultCode::Busy,
        ResultCode::UnknownStream,
        ResultCode::UnknownTopic,
        ResultCode::UnknownGroup,
        ResultCode::AlreadyExists,
        ResultCode::TooLarge,
        ResultCode::InvalidRequest,
        ResultCode::OffsetOutOfRange,
        ResultCode::Unavailable,
        ResultCode::SessionEvicted,
        ResultCode::StorageError,
        ResultCode::Internal,
        ResultCode::OutOfOrder,
        ResultCode::NotReady,
        ResultCode::Deleted,
        ResultCode::DiskFull,
        ResultCode::UnknownMember,
        ResultCode::StaleGeneration,
        ResultCode::PermissionDenied,
        ResultCode::Refused,
        ResultCode::AuthenticationFailed,
        ResultCode::Throttled,
        ResultCode::LimitExceeded,
    ];

    /// Parses a result code; `None` for a value that names none.
    pub fn from_u16(value: u16) -> Option<ResultCode> {
        ResultCode::ALL
            .iter()
            .copied()
            .find(|code| *code as u16 == value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation_table::Route;

    #[test]
    fn operations_and_results_round_trip() {
        for operation in Operation::ALL {
            assert_eq!(Operation::from_u8(operation as u8), Some(operation));
        }
        assert_eq!(Operation::from_u8(0), None);
        assert_eq!(Operation::from_u8(200), None);
        for code in ResultCode::ALL {
            assert_eq!(ResultCode::from_u16(code as u16), Some(code));
        }
        assert_eq!(ResultCode::from_u16(999), None);
    }

    #[test]
    fn metadata_operations_keep_their_bytes() {
        let moves = [
            (Operation::ReassignPartition, 12),
            (Operation::EpochStarted, 13),
            (Operation::DropReplica, 14),
            (Operation::DeleteTopic, 15),
            (Operation::DeleteStream, 16),
            (Operation::AlterTopic, 17),
            (Operation::AddPartitions, 18),
        ];
        for (operation, byte) in moves {
            assert_eq!(operation as u8, byte);
            assert_eq!(operation.info().route, Route::MetadataReplicated);
        }
        assert_ne!(Operation::Produce.info().route, Route::MetadataReplicated);
        assert_ne!(
            Operation::Reconfigure.info().route,
            Route::MetadataReplicated
        );
    }
}
