//! The replica's events: what each changes or counts (metrics, the
//! untrusted-log gauge, an epoch report), then what is logged of it, in
//! the group's span.

use strand_consensus::Event;

use super::Actor;
use crate::metrics;

impl Actor {
    /// One event of the replica: counted, then logged.
    pub(super) fn on_event(&mut self, event: Event) {
        // Events come out of the shard's settle turn, outside any span: every
        // logged one runs in the group's, with its replica, view and trust
        // as they stand (a dropped frame, the one frequent event, is only
        // counted).
        let logged = !matches!(event, Event::Dropped { .. });
        let _span = logged.then(|| self.span().entered());
        self.count_event(&event);
        self.log_event(&event);
    }

    /// What `event` changes of the actor's own state or counts in metrics.
    fn count_event(&mut self, event: &Event) {
        match *event {
            Event::ViewChangeStarted { .. } => metrics::view_change(&self.label),
            Event::Normal { view, .. } => metrics::view(&self.label, view.view),
            Event::UntrustedLog { untrusted } => {
                if untrusted != self.untrusted_reported {
                    self.untrusted_reported = untrusted;
                    metrics::untrusted_log(untrusted);
                }
            }
            Event::BehindLogStart { .. } => metrics::behind_log_start(),
            Event::AppliedDivergence { .. } => metrics::applied_divergence(&self.label),
            Event::Dropped { reason } => metrics::dropped(reason),
            Event::EpochStarted { epoch } => {
                metrics::epoch(&self.label, epoch);
                self.report_epoch_started();
            }
            Event::VotedToLeaveView { .. }
            | Event::HandingOver { .. }
            | Event::HandoverCalledOff { .. }
            | Event::ViewChangeWaiting { .. }
            | Event::Merged { .. }
            | Event::AcceptedLoss { .. }
            | Event::Reconfiguring { .. }
            | Event::Retired { .. } => {}
        }
    }

    /// What the log says of `event` (nothing of a dropped frame).
    fn log_event(&self, event: &Event) {
        match event {
            Event::ViewChangeStarted { view } => {
                tracing::info!(%view, "group: view change started");
            }
            Event::VotedToLeaveView { view, reason } => {
                tracing::info!(%view, ?reason, "group: voted to leave the view");
            }
            Event::HandingOver { to, view } => {
                tracing::info!(%view, to, "group: handing over to the preferred primary");
            }
            Event::HandoverCalledOff { to } => {
                tracing::info!(to, "group: handover called off, its drain did not end");
            }
            Event::Normal { view, primary } => {
                tracing::info!(%view, primary, "group: normal");
            }
            Event::ViewChangeWaiting {
                view,
                reason,
                awaited,
            } => {
                let nodes = self.awaited_nodes(*awaited);
                tracing::warn!(%view, ?reason, awaited_nodes = ?nodes, "group: view change waits");
            }
            Event::UntrustedLog { untrusted } => {
                tracing::info!(untrusted, "group: log trust changed");
            }
            Event::BehindLogStart { from, log_start } => {
                let node = self.spec.node_at(*from);
                tracing::warn!(from_node = ?node, log_start,
                    "group: a peer's retention dropped ops this replica lacks; catching up by state transfer");
            }
            Event::AppliedDivergence { op } => {
                tracing::error!(op, "group: a new view contradicts applied history");
            }
            Event::Merged {
                view,
                source,
                op,
                dropped,
            } => tracing::info!(%view, source, op, dropped, "group: canonical log chosen"),
            Event::AcceptedLoss { view, op } => {
                tracing::warn!(%view, op, "group: started a view accepting loss")
            }
            Event::Dropped { .. } => {}
            Event::Reconfiguring { op, epoch } => {
                tracing::info!(op, epoch, "group: moving to a new assignment in place")
            }
            Event::EpochStarted { epoch } => tracing::info!(epoch, "group: epoch started"),
            Event::Retired { epoch } => {
                // The host recorded it in the superblock.
                tracing::warn!(epoch, "group: this replica was removed from the group");
            }
        }
    }

    /// The nodes in the slots of `awaited` (a bitset of slots).
    fn awaited_nodes(&self, awaited: u32) -> Vec<u32> {
        (0..strand_wire::REPLICAS_MAX)
            .filter(|slot| awaited & (1 << slot) != 0)
            .filter_map(|slot| self.spec.node_at(slot))
            .collect()
    }
}
