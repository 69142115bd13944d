//! Bodies of the client operations and their replies.
//!
//! | operation | request body | reply body |
//! |---|---|---|
//! | CreateStream | [`CreateStream`] | [`Empty`] |
//! | CreateTopic | [`CreateTopic`] | [`TopicCreated`] |
//! | Produce | a record batch (`batch`) | [`ProduceReply`] |
//! | Fetch | [`FetchRequest`] | [`FetchReply`] |
//! | StoreCursor | [`StoreCursor`] | [`Empty`] |
//! | GetCursor | [`GetCursor`] | [`GetCursorReply`] |
//! | DeleteCursor | [`DeleteCursor`] | [`Empty`] |
//! | ClusterStatus | [`Empty`] | [`ClusterStatusReply`] |
//! | GroupStatus | [`GroupStatusRequest`] | [`GroupStatusReply`] |
//! | Attention | [`Empty`] | [`AttentionReply`] |
//! | AcceptLoss | [`AcceptLoss`] | [`AcceptLossReply`] |
//! | Metadata | [`MetadataRequest`] | [`MetadataReply`] |
//! | ReassignPartition | [`ReassignPartition`] | [`Reassigned`] |
//! | EpochStarted | [`EpochStarted`] | [`Empty`] |
//! | DropReplica | [`DropReplica`] | [`Empty`] |
//! | DeleteTopic | [`DeleteTopic`] | [`TopicsDeleted`] |
//! | DeleteStream | [`DeleteStream`] | [`TopicsDeleted`] |
//! | AlterTopic | [`AlterTopic`] | [`Empty`] |
//! | AddPartitions | [`AddPartitions`] | [`TopicCreated`] (the new partitions' groups) |
//! | OffsetForTime | [`OffsetForTime`] | [`OffsetForTimeReply`] |
//! | JoinConsumerGroup | [`JoinConsumerGroup`] | [`ConsumerGroupAssignment`] |
//! | ConsumerHeartbeat | [`ConsumerHeartbeat`] | [`ConsumerGroupAssignment`] |
//! | LeaveConsumerGroup | [`LeaveConsumerGroup`] | [`Empty`] |
//! | DescribeConsumerGroups | [`DescribeConsumerGroups`] | [`DescribeConsumerGroupsReply`] |
//! | CreateUser | [`CreateUser`] | [`Empty`] |
//! | DeleteUser | [`DeleteUser`] | [`Empty`] |
//! | GrantPermission, RevokePermission | [`ChangePermission`] | [`Empty`] |
//! | ListUsers | [`Empty`] | [`UserList`] |
//! | Authenticate | [`Authenticate`] | [`Empty`] |
//! | CreateToken | [`CreateToken`] | [`Empty`] |
//! | RevokeToken | [`RevokeToken`] | [`Empty`] |
//! | SetQuota | [`SetQuota`] | [`Empty`] |
//! | ListQuotas | [`Empty`] | [`QuotaList`] |
//! | RevokeCertificate | [`RevokeCertificate`] | [`Empty`] |
//!
//! Any reply whose result code is not `Ok` carries an [`ErrorBody`] instead.

mod admin;
pub mod certificates;
mod check;
mod consumer_group;
mod cursor;
mod error_body;
mod fetch;
mod quota;
mod reassign;
mod status;
pub mod tokens;
mod users;

pub use admin::{
    AcceptLoss, AcceptLossReply, AddPartitions, AlterTopic, CreateStream, CreateTopic,
    DeleteStream, DeleteTopic, PARTITIONS_MAX, PARTITIONS_PER_TOPIC_MAX, SEGMENT_BYTES_MAX,
    SEGMENT_BYTES_MIN, STREAMS_MAX, TOPICS_MAX, TopicCreated, TopicsDeleted,
};
pub use certificates::{REVOKED_CERTIFICATES_MAX, RevokeCertificate, certificate_fingerprint};
pub use check::check_request;
pub use consumer_group::{
    CONSUMER_GROUP_MEMBERS_MAX, CONSUMER_GROUPS_MAX, ConsumerGroupAssignment, ConsumerGroupFence,
    ConsumerGroupInfo, ConsumerHeartbeat, DescribeConsumerGroups, DescribeConsumerGroupsReply,
    JoinConsumerGroup, LeaveConsumerGroup, MemberInfo, SESSION_TIMEOUT_MS_MAX,
    SESSION_TIMEOUT_MS_MIN,
};
pub use cursor::{
    CURSOR_TOMBSTONE_OFFSET, CursorEvent, CursorEvents, DeleteCursor, GetCursor, GetCursorReply,
    StoreCursor,
};
pub use error_body::ErrorBody;
pub use fetch::{
    FETCH_REPLY_HEAD_SIZE, FETCH_WAIT_MS_MAX, FetchReply, FetchRequest, OffsetForTime,
    OffsetForTimeReply, PRODUCE_BATCH_BYTES_MAX, ProduceReply, fetch_reply_batch_bytes_max,
};
pub use quota::{Quota, QuotaList, SetQuota};
pub use reassign::{DropReplica, EpochStarted, NODE_CHECK_MS_MAX, ReassignPartition, Reassigned};
pub use status::{
    AttentionEntry, AttentionReason, AttentionReply, AttentionStart, ClusterStatusReply,
    GroupStatus, GroupStatusReply, GroupStatusRequest, MetadataReply, MetadataRequest, NodeInfo,
    PartitionInfo, ReplicaStatus, TopicInfo,
};
pub use tokens::{
    CreateToken, RevokeToken, TOKENS_MAX, TOKENS_PER_USER_MAX, TokenInfo, parse_token, token_text,
};
pub use users::{
    Authenticate, ChangePermission, CreateUser, DeleteUser, PASSWORD_HASH_LENGTH_MAX,
    PASSWORD_LENGTH_MAX, PERMISSIONS_PER_USER_MAX, Permission, Right, Scope, USERS_MAX, UserInfo,
    UserList,
};

use crate::codec::{Body, BodyReader, BodyWriter};
use crate::error::BodyError;

/// The body of requests and replies that carry nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Empty;

impl Body for Empty {
    fn encode(&self, _writer: &mut BodyWriter) {}

    fn decode(_reader: &mut BodyReader<'_>) -> Result<Empty, BodyError> {
        Ok(Empty)
    }
}
