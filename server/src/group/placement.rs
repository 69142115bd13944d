//! A partition's side of the metadata plane's placements: the new
//! assignment the plane left in the group's mailbox is taken (slots,
//! memberships, retirement, retention), and, as primary, a newly started
//! epoch is reported so that the plane hears it.

use crate::group::spec::GroupSpec;

use super::Actor;

impl Actor {
    /// Takes the metadata plane's latest assignment, if a new one waits:
    /// the slot map, the memberships consensus knows, retirement.
    pub(super) fn take_placement(&mut self) {
        let Some(handle) = self.shared.group(self.spec.group) else {
            return;
        };
        let Some(assignment) = handle.placement.lock().expect("placement lock").take() else {
            return;
        };
        let me = self.shared.config.node;
        let mut spec = GroupSpec::partition(&assignment, &self.shared.config.data_dir, me);
        spec.dir = self.spec.dir.clone();
        // This replica keeps its own slot in the map, member or not.
        let own = self.host.progress().slot;
        if spec.node_at(own).is_none() {
            if spec.slots.len() <= usize::from(own) {
                spec.slots.resize(usize::from(own) + 1, None);
            }
            spec.slots[usize::from(own)] = Some(me);
        }
        self.shared
            .set_slots(self.spec.group, spec.slots.clone().into());
        for membership in &spec.memberships {
            self.host.on_assignment(*membership);
        }
        if spec.retired {
            self.host.retire(spec.epoch);
        }
        tracing::info!(epoch = spec.epoch, active = spec.active, retired = spec.retired,
            slots = ?spec.slots, "group: assignment changed");
        let retention_changed = spec.retention != self.spec.retention;
        self.host.set_retention(spec.retention);
        self.spec = spec;
        self.report_epoch_started();
        if retention_changed {
            // An altered topic's limits hold at once, not at the next check.
            tracing::info!(retention = ?self.spec.retention, "group: retention changed");
            self.apply_retention();
        }
    }

    /// As primary, tells the node (once per epoch and actor: the node
    /// retries until the metadata plane has it) to report the newest epoch
    /// started while the metadata plane has not heard it, as after a restart.
    pub(super) fn report_epoch_started(&mut self) {
        let epoch = self.spec.epoch;
        let pending = !self.spec.active
            && self.host.progress().started_epoch >= epoch
            && self.epoch_reported < epoch;
        if pending && self.host.is_serving_primary() {
            self.epoch_reported = epoch;
            self.shared.report_epoch_started(self.spec.group, epoch);
        }
    }
}
