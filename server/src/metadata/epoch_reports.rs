//! Epoch reports: a partition's primary that saw a new assignment epoch
//! start asks its node to tell the metadata plane (`EpochStarted`), which
//! must hear it before another reassignment of the partition may begin.
//! The node's task proposes each report
//! ([`crate::metadata::proposals`]) until the catalog reflects it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strand_wire::ops::EpochStarted;
use strand_wire::{Body, Operation};
use tokio::sync::mpsc;

use crate::metadata::proposals::propose;
use crate::net::node_calls::CallSession;
use crate::shared::{EpochReport, Shared};

/// How long a report waits before it is proposed again.
const RETRY_AFTER: Duration = Duration::from_millis(200);

/// Tells the metadata plane about every epoch a partition led here
/// started; retried until the catalog reflects it (the operation is
/// idempotent, and a report the catalog already reflects is skipped).
pub async fn run(shared: Arc<Shared>, mut reports: mpsc::UnboundedReceiver<EpochReport>) {
    let mut session = CallSession::new();
    while let Some(report) = reports.recv().await {
        loop {
            let done = shared
                .catalog()
                .groups
                .get(&report.group)
                .is_none_or(|assignment| assignment.epoch != report.epoch || assignment.active);
            if done || shared.stopping() {
                break;
            }
            let body = EpochStarted {
                group: report.group,
                epoch: report.epoch,
            };
            match propose(
                &shared,
                &mut session,
                Operation::EpochStarted,
                Bytes::from(body.to_vec()),
            )
            .await
            {
                Ok(()) => {
                    tracing::info!(
                        group = report.group,
                        epoch = report.epoch,
                        "node: reported a started epoch"
                    );
                    break;
                }
                Err(error) => {
                    tracing::debug!(group = report.group, %error, "node: epoch report failed; retrying");
                    tokio::time::sleep(RETRY_AFTER).await;
                }
            }
        }
    }
}
