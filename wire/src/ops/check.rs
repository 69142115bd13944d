//! Every request body decoded before a node acts on it: a body that does
//! not decode as its operation's type is refused `InvalidRequest` at the
//! door, so it is never authorized on a guess, prepared, or kept in a log.

use crate::codec::Body;
use crate::error::BodyError;
use crate::operation::Operation;

use super::*;

/// Checks that `body` decodes as `operation`'s request body (see the table
/// in [`crate::ops`]). A produce's batch is checked whole (its checksum
/// too) by the partition's group, which decodes it anyway, before it is
/// prepared.
pub fn check_request(operation: Operation, body: &[u8]) -> Result<(), BodyError> {
    match operation {
        Operation::Produce => Ok(()),
        Operation::CreateStream => decodes::<CreateStream>(body),
        Operation::CreateTopic => decodes::<CreateTopic>(body),
        Operation::Fetch => decodes::<FetchRequest>(body),
        Operation::StoreCursor => decodes::<StoreCursor>(body),
        Operation::DeleteCursor => decodes::<DeleteCursor>(body),
        Operation::GetCursor => decodes::<GetCursor>(body),
        Operation::ClusterStatus
        | Operation::Attention
        | Operation::ListUsers
        | Operation::ListQuotas => decodes::<Empty>(body),
        Operation::GroupStatus => decodes::<GroupStatusRequest>(body),
        Operation::AcceptLoss => decodes::<AcceptLoss>(body),
        Operation::Metadata => decodes::<MetadataRequest>(body),
        // Prepared by a group's primary itself: never a client's request.
        Operation::Reconfigure => Err(BodyError::Invalid {
            field: "operation",
            reason: "Reconfigure is prepared by a group's primary, never requested",
        }),
        Operation::ReassignPartition => decodes::<ReassignPartition>(body),
        Operation::EpochStarted => decodes::<EpochStarted>(body),
        Operation::DropReplica => decodes::<DropReplica>(body),
        Operation::DeleteTopic => decodes::<DeleteTopic>(body),
        Operation::DeleteStream => decodes::<DeleteStream>(body),
        Operation::AlterTopic => decodes::<AlterTopic>(body),
        Operation::AddPartitions => decodes::<AddPartitions>(body),
        Operation::OffsetForTime => decodes::<OffsetForTime>(body),
        Operation::JoinConsumerGroup => decodes::<JoinConsumerGroup>(body),
        Operation::ConsumerHeartbeat => decodes::<ConsumerHeartbeat>(body),
        Operation::LeaveConsumerGroup => decodes::<LeaveConsumerGroup>(body),
        Operation::DescribeConsumerGroups => decodes::<DescribeConsumerGroups>(body),
        Operation::CreateUser => decodes::<CreateUser>(body),
        Operation::DeleteUser => decodes::<DeleteUser>(body),
        Operation::GrantPermission | Operation::RevokePermission => {
            decodes::<ChangePermission>(body)
        }
        Operation::Authenticate => decodes::<Authenticate>(body),
        Operation::CreateToken => decodes::<CreateToken>(body),
        Operation::RevokeToken => decodes::<RevokeToken>(body),
        Operation::RevokeCertificate => decodes::<RevokeCertificate>(body),
        Operation::SetQuota => decodes::<SetQuota>(body),
    }
}

fn decodes<B: Body>(body: &[u8]) -> Result<(), BodyError> {
    B::from_bytes(body).map(|_| ())
}
