//! Epoch reports: a partition's primary that saw a new assignment epoch
//! start asks its node to tell the metadata plane (`EpochStarted`), which
//! must hear it before another reassignment of the partition may begin.
//! The node's task sends each report as the plane's client until the
//! catalog reflects it.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::metadata::own_client::metadata_client;
use crate::shared::{EpochReport, Shared};

/// Tells the metadata plane, as its client, about every epoch a partition
/// led here started; retried until it answers (the operation is
/// idempotent, and a report the catalog already reflects is skipped).
pub async fn run(shared: Arc<Shared>, mut reports: mpsc::UnboundedReceiver<EpochReport>) {
    let mut client: Option<strand_client::Client> = None;
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
            let attempt = match &client {
                Some(client) => client
                    .report_epoch_started(report.group, report.epoch)
                    .await
                    .map_err(|error| error.to_string()),
                None => match metadata_client(&shared).await {
                    Ok(connected) => {
                        client = Some(connected);
                        continue;
                    }
                    Err(error) => Err(error.to_string()),
                },
            };
            match attempt {
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
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
            }
        }
    }
}
