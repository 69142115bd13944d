//! The coordinator's sweep: while this node's metadata replica serves as
//! primary, members whose session expired (by the
//! [`Coordinator`](crate::metadata::coordinator::Coordinator)'s deadlines)
//! are removed by a replicated `LeaveConsumerGroup { expired }`, the node's
//! own proposal ([`crate::metadata::proposals`]).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use strand_wire::ops::LeaveConsumerGroup;
use strand_wire::{Body, Operation};

use crate::metadata::coordinator::SWEEP_INTERVAL;
use crate::metadata::proposals::propose;
use crate::net::node_calls::CallSession;
use crate::shared::Shared;

/// The node's coordinator task: every [`SWEEP_INTERVAL`], while this node's
/// metadata replica serves as primary, proposes the removal of members
/// whose session expired (retried on the next sweeps until the catalog no
/// longer holds them).
pub async fn run(shared: Arc<Shared>) {
    let mut session = CallSession::new();
    let mut ticker = tokio::time::interval(SWEEP_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if shared.stopping() {
            return;
        }
        let leading = shared.leads_metadata_plane();
        let catalog = shared.catalog();
        let expired = shared.coordinator.lock().expect("coordinator lock").sweep(
            &catalog,
            leading,
            Instant::now(),
        );
        for (group, member) in expired {
            tracing::info!(%group, member = %format!("{member:032x}"),
                "coordinator: a member's session expired; removing it");
            crate::metrics::group_member_expired();
            let leave = LeaveConsumerGroup {
                group: group.clone(),
                member,
                expired: true,
            };
            let body = Bytes::from(leave.to_vec());
            if let Err(error) =
                propose(&shared, &mut session, Operation::LeaveConsumerGroup, body).await
            {
                tracing::warn!(%group, %error, "coordinator: removing an expired member failed; retrying");
            }
        }
    }
}
