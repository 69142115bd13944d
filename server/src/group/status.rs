//! A group's published status: what `status` and `attention` show of it
//! on this node (its membership, rule and each member's progress as the
//! primary knows it; why its view change waits or its storage failed), and
//! on the metadata plane's replica whether its catalog is current.

use strand_host::group_host::Progress;
use strand_wire::ops::{AttentionEntry, GroupStatus, ReplicaStatus};

use super::Actor;
use crate::group::attention::{Waiting, storage_failed_attention, waiting_entry};
use crate::group::publishing::StatusShape;
use crate::metadata::plane::publish_freshness;
use crate::shared::GroupView;

impl Actor {
    /// The part of the group's status that is published without delay.
    pub(super) fn status_shape(&self) -> StatusShape {
        let progress = self.host.progress();
        StatusShape {
            view: progress.view.view,
            log_view: progress.log_view.view,
            status: progress.status,
            primary: progress.primary,
            trusted: progress.trusted,
            attention: progress.attention,
            storage_failed: self.host.storage_failure().is_some(),
        }
    }

    /// Publishes the group's status (each tick, and by the shard when the
    /// group goes quiet, since no tick publishes it then).
    pub fn publish(&mut self) {
        self.publishing.published(self.status_shape());
        if self.plane.is_some() {
            publish_freshness(&self.shared, &self.host.progress());
        }
        let progress = self.host.progress();
        let status = self.group_status(&progress);
        if let Some(failure) = self.host.storage_failure() {
            let attention = storage_failed_attention(&self.spec, status.view, failure);
            self.shared.publish(GroupView {
                status,
                attention: Some(attention),
            });
            return;
        }
        let attention = self.waiting_attention();
        self.shared.publish(GroupView { status, attention });
    }

    /// The attention entry of this group's waiting view change, if it
    /// waits: why, the replicas and nodes it waits for, and the latest
    /// history start it knows (for a wait below it, reference A's "start's
    /// record count and the node that took over there").
    pub(super) fn waiting_attention(&self) -> Option<AttentionEntry> {
        let progress = self.host.progress();
        let (reason, awaited) = progress.attention?;
        let waiting = Waiting {
            view: progress.view.view,
            reason,
            awaited,
            start: progress.awaited_start,
        };
        Some(waiting_entry(&self.spec, &waiting))
    }

    /// The group's status as this replica stands (`progress`): its
    /// membership in effect and rule, and each member's progress as the
    /// primary knows it.
    pub(super) fn group_status(&self, progress: &Progress) -> GroupStatus {
        let membership = progress.membership;
        let rule = membership.rule();
        let commit = progress.commit;
        self.commit_gauge.set(commit as f64);
        // The members of the newest membership this replica knows (joining
        // ones included: they show as catching up until they hold the prefix).
        let replicas = progress
            .newest
            .slots
            .iter()
            .map(|slot| {
                let op = if slot == progress.slot {
                    progress.op
                } else {
                    progress.acks.get(usize::from(slot)).copied().unwrap_or(0)
                };
                ReplicaStatus {
                    replica: slot,
                    node: self.spec.node_at(slot).unwrap_or(0),
                    op,
                    caught_up: op >= commit,
                }
            })
            .collect();
        // The metadata plane holds no records: both offsets stay 0 there.
        let (log_start_offset, high_watermark) = if self.spec.group == 0 {
            (0, 0)
        } else {
            (self.host.log_start_offset(), self.host.high_watermark())
        };
        GroupStatus {
            group: self.spec.group,
            stream: self.spec.stream.clone(),
            topic: self.spec.topic.clone(),
            partition: self.spec.partition,
            epoch: membership.epoch,
            confirm: membership.confirm,
            durability: self.spec.durability,
            write_quorum: rule.write,
            view_change_quorum: rule.view_change,
            replica: progress.slot,
            view: progress.view.view,
            log_view: progress.log_view.view,
            status: progress.status.name().to_owned(),
            primary: progress.primary,
            op: progress.op,
            commit_op: commit,
            log_start_offset,
            high_watermark,
            untrusted_log: !progress.trusted,
            replicas,
        }
    }
}
