//! The coordinator's sweep: while this node's metadata replica serves as
//! primary, members whose session expired (by the
//! [`Coordinator`](crate::metadata::coordinator::Coordinator)'s deadlines)
//! are removed by a replicated `LeaveConsumerGroup { expired }`, proposed
//! through the node's own client.

use std::sync::Arc;
use std::time::Instant;

use crate::metadata::coordinator::SWEEP_INTERVAL;
use crate::shared::Shared;

/// The node's coordinator task: every [`SWEEP_INTERVAL`], while this node's
/// metadata replica serves as primary, proposes the removal of members
/// whose session expired (through the node's own client, retried on the
/// next sweeps until the catalog no longer holds them).
pub async fn run(shared: Arc<Shared>) {
    let mut client: Option<strand_client::Client> = None;
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
            if client.is_none() {
                client = crate::metadata::own_client::metadata_client(&shared)
                    .await
                    .ok();
            }
            let Some(connected) = &client else {
                continue;
            };
            if let Err(error) = connected.leave_consumer_group(&group, member, true).await {
                tracing::warn!(%group, %error, "coordinator: removing an expired member failed; retrying");
            }
        }
    }
}
