//! The node's own proposals to the metadata plane: a partition's epoch that
//! started here (`EpochStarted`), a consumer-group member whose session
//! expired (`LeaveConsumerGroup { expired }`). Each is a node call
//! ([`crate::net::node_calls`]) to the node whose metadata replica this
//! node's replica names as the plane's primary: its own inbox when that is
//! this node, the replica bus otherwise. Each task that proposes keeps its
//! own [`CallSession`]. The callers retry until the
//! catalog shows the change, so a proposal lost to a view change or a full
//! queue costs a retry, never a wrong answer (both operations are
//! idempotent).

use std::time::Duration;

use bytes::Bytes;
use strand_wire::ops::ErrorBody;
use strand_wire::{Operation, ResultCode};

use strand_consensus::replica::Status;

use crate::net::node_calls::{self, CallSession};
use crate::shared::Shared;

/// How long a proposal waits for the plane's answer.
const PROPOSAL_TIMEOUT: Duration = Duration::from_secs(2);

/// The metadata group.
const METADATA_GROUP: u64 = 0;

/// Proposes `operation` with `body` to the metadata plane under the
/// caller's `session` (each task that proposes keeps its own); `Err` says
/// why it did not commit (the caller retries).
pub async fn propose(
    shared: &Shared,
    session: &mut CallSession,
    operation: Operation,
    body: Bytes,
) -> Result<(), String> {
    let primary = metadata_primary(shared).ok_or("the metadata plane has no primary now")?;
    let reply = node_calls::propose(
        shared,
        session,
        primary,
        METADATA_GROUP,
        operation,
        body,
        PROPOSAL_TIMEOUT,
    )
    .await
    .map_err(|error| format!("node {primary}: {error}"))?;
    let code = reply.header().result.get();
    if code == ResultCode::Ok as u16 {
        return Ok(());
    }
    let Some(result) = ResultCode::from_u16(code) else {
        return Err(format!("node {primary} answered result {code}"));
    };
    Err(match ErrorBody::from_bytes(result, reply.body()) {
        Ok(error) => format!("node {primary}: {error:?}"),
        Err(_) => format!("node {primary}: {result:?}"),
    })
}

/// The node whose metadata replica leads the plane, as this node's replica
/// of it sees it; `None` while that replica is not in normal status (it
/// does not know a primary that serves).
pub fn metadata_primary(shared: &Shared) -> Option<u32> {
    let status = shared.status_of(METADATA_GROUP)?;
    if status.status != Status::Normal.name() {
        return None;
    }
    shared.with_group(METADATA_GROUP, |handle| handle.node_at(status.primary))?
}
