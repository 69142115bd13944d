//! The metadata plane's side of reassignment, as the world plays it.
//!
//! During the faulty phase the catalog commits a random reassignment now
//! and then, one at a time (the next waits until some replica reported the
//! previous epoch started). Then, each after its own random lag:
//! - every running replica hears of the new membership (`on_assignment`),
//!   and one that restarts before its epoch started hears of it again;
//!   every (re)start is given the newest few memberships in its `Config`;
//! - a newcomer starts empty at its slot, awaiting a state transfer, which
//!   its host receives over the network from a member that can export a
//!   committed prefix;
//! - once the epoch that removed a replica started, the catalog tells it to
//!   retire (unless it found out itself) and, later, drops it for good. A
//!   slot is given to a newcomer only once its previous replica is dropped:
//!   the network routes frames by slot, and two replicas cannot share one.

use strand_consensus::epoch::{Membership, Transition};

use super::storage::SlotDisk;
use super::{CatalogEvent, World};
use crate::catalog::{Wish, plan};
use crate::checkers::Violation;

impl World {
    /// The memberships a replica (re)starting is given: the newest few the
    /// consensus bound allows (see [`crate::catalog::Catalog::window`]).
    pub(super) fn memberships_for(&self) -> Vec<Membership> {
        self.catalog.window()
    }

    /// One tick of the catalog: maybe a new reassignment (faulty phase
    /// only), then every action that is due.
    pub(super) fn catalog_step(&mut self) -> Result<(), Violation> {
        if !self.options.reassigns() {
            return Ok(());
        }
        if self.faults_on && self.prng.chance(self.options.reassign_ppm, 1_000_000) {
            self.maybe_reassign();
        }
        let later = self.catalog_events.split_off(&(self.now + 1, 0));
        let due = std::mem::replace(&mut self.catalog_events, later);
        for event in due.into_values() {
            match event {
                CatalogEvent::Assign { slot, epoch } => self.assign(slot, epoch)?,
                CatalogEvent::Retire { slot, epoch } => self.tell_retired(slot, epoch)?,
                CatalogEvent::Join { slot, epoch } => self.join(slot, epoch),
                CatalogEvent::Drop { slot } => self.drop_when_healthy(slot),
            }
        }
        Ok(())
    }

    /// Draws a wish and commits it if the catalog accepts it. Waits while
    /// the previous epoch has not started.
    fn maybe_reassign(&mut self) {
        if self.catalog.in_flight() {
            return;
        }
        let current = *self.catalog.newest();
        let wish = Wish::draw(&mut self.prng, &current);
        if let Ok(next) = plan(&current, &wish)
            && self.keeps_promise(&current, &next)
        {
            self.commit_assignment(&current, next);
        }
    }

    /// Whether `next` keeps the durability promise the faults keep: at most
    /// W' - 1 of its members missing acknowledged writes, newcomers counted
    /// (an operator does not remove the last good copies while the rest are
    /// damaged or still catching up: the group would hold too few to lose
    /// nothing, like a fault beyond the budget).
    fn keeps_promise(&self, current: &Membership, next: &Membership) -> bool {
        let to_come: Vec<u8> = self.newcomers_to_come().collect();
        let missing = next
            .slots
            .iter()
            .filter(|slot| {
                !current.slots.contains(*slot)
                    || self.damaged.contains_key(slot)
                    || to_come.contains(slot)
            })
            .count();
        missing < usize::from(next.rule().write)
    }

    /// The catalog commits `next`: clients route to it, newcomers are
    /// placed, running replicas hear of it.
    fn commit_assignment(&mut self, current: &Membership, next: Membership) {
        let kind = self.catalog.commit(next);
        match kind {
            Transition::InPlace => self.stats.reassignments_in_place += 1,
            Transition::ViewChange => self.stats.reassignments_view_change += 1,
        }
        let values = [
            u64::from(next.epoch),
            u64::from(next.slots.bits()),
            u64::from(next.rule().write),
            u64::from(kind == Transition::ViewChange),
        ];
        self.trace.record(self.now, 0, "reassign", &values);
        let slots: Vec<u8> = next.slots.iter().collect();
        for client in &mut self.clients {
            client.set_slots(slots.clone());
        }
        for slot in next.slots.iter() {
            if current.slots.contains(slot) {
                continue;
            }
            self.drop_replica(slot);
            let lag = self.catalog_lag();
            let epoch = next.epoch;
            self.schedule_catalog(lag, CatalogEvent::Join { slot, epoch });
        }
        for slot in self.slots() {
            if self.hosts[usize::from(slot)].is_some() {
                let lag = self.catalog_lag();
                let epoch = next.epoch;
                self.schedule_catalog(lag, CatalogEvent::Assign { slot, epoch });
            }
        }
    }

    /// The replica at `slot`, if running, hears of the membership of `epoch`.
    fn assign(&mut self, slot: u8, epoch: u32) -> Result<(), Violation> {
        let membership = *self.catalog.get(epoch).expect("assigned epochs are known");
        if self.hosts[usize::from(slot)].is_none() {
            return Ok(());
        }
        self.trace
            .record(self.now, u16::from(slot), "assign", &[u64::from(epoch)]);
        self.run_host(slot, |host, _| host.on_assignment(membership))
    }

    /// A replica reported `epoch` started: the catalog may plan the next
    /// reassignment, and the replicas `epoch` removed are retired and, later,
    /// dropped.
    pub(super) fn epoch_started(&mut self, replica: u8, epoch: u32) {
        if !self.catalog.note_started(epoch) {
            return;
        }
        self.stats.epochs_started += 1;
        self.trace.record(
            self.now,
            u16::from(replica),
            "epoch_started",
            &[u64::from(epoch)],
        );
        for slot in self.catalog.removed_by(epoch).iter() {
            if !self.disks[usize::from(slot)].created {
                continue; // a newcomer removed before it joined
            }
            let lag = self.retire_lag();
            self.schedule_catalog(lag, CatalogEvent::Retire { slot, epoch });
            let spread = self.options.drop_max_ticks - self.options.drop_min_ticks;
            let delay = self.options.drop_min_ticks + self.prng.below(spread + 1);
            self.schedule_catalog(delay, CatalogEvent::Drop { slot });
        }
    }

    /// The catalog tells the replica at `slot` it retired, if it runs and
    /// has not found out itself.
    fn tell_retired(&mut self, slot: u8, epoch: u32) -> Result<(), Violation> {
        let index = usize::from(slot);
        if self.disks[index].retired_epoch.is_some() {
            return Ok(());
        }
        if self.hosts[index].is_none() {
            return Ok(()); // told again when it restarts
        }
        self.run_host(slot, |host, _| host.retire(epoch))
    }

    /// The replica at `replica` retired (`Event::Retired`; its host recorded
    /// it in the superblock).
    pub(super) fn retired(&mut self, replica: u8, epoch: u32) {
        let disk = &mut self.disks[usize::from(replica)];
        if disk.retired_epoch.is_some() {
            return;
        }
        disk.retired_epoch = Some(epoch);
        self.stats.retirements += 1;
        self.trace
            .record(self.now, u16::from(replica), "retired", &[u64::from(epoch)]);
    }

    /// A newcomer starts at `slot`, empty, awaiting a state transfer
    /// (unless a later assignment removed it before it started).
    fn join(&mut self, slot: u8, epoch: u32) {
        let index = usize::from(slot);
        if self.disks[index].created || !self.catalog.newest().slots.contains(slot) {
            return;
        }
        self.disks[index] = SlotDisk::joining(epoch);
        self.views.forget(slot);
        // It lacks every acknowledged write until it has caught up: for the
        // durability promise it is damaged, like a replica that lost them.
        self.damaged.insert(slot, self.history.head());
        self.stats.joins += 1;
        self.trace
            .record(self.now, u16::from(slot), "join", &[u64::from(epoch)]);
        self.start(slot);
    }

    /// An operator drops the removed replica at `slot` once the group is
    /// healthy: while a member is still missing acknowledged writes (a
    /// newcomer catching up, a damaged replica), the removed copy may be
    /// the only good one, so the drop waits.
    fn drop_when_healthy(&mut self, slot: u8) {
        let members = self.catalog.newest().slots;
        if self
            .damaged
            .keys()
            .any(|damaged| members.contains(*damaged))
        {
            let retry = self.options.drop_min_ticks;
            self.schedule_catalog(retry, CatalogEvent::Drop { slot });
            return;
        }
        self.drop_replica(slot);
    }

    /// The replica at `slot` is gone for good: its process, its disk, its
    /// traffic, and whatever the catalog still had planned for it.
    fn drop_replica(&mut self, slot: u8) {
        let index = usize::from(slot);
        self.catalog_events
            .retain(|_, event| event_slot(event) != slot);
        if !self.disks[index].created {
            return;
        }
        let joined = self.disks[index].joined_epoch;
        assert!(
            self.catalog.removal_of(slot, joined).is_some(),
            "dropping the replica at slot {slot} (joined in epoch {joined}), which no epoch removed"
        );
        self.hosts[index] = None;
        self.forget_turns(slot);
        self.down_until[index] = None;
        self.disks[index] = SlotDisk::default();
        self.damaged.remove(&slot);
        self.storage_faulted.remove(&slot);
        self.network.forget(u16::from(slot));
        self.stats.drops += 1;
        self.trace.record(self.now, u16::from(slot), "drop", &[]);
    }

    /// After a replica (re)started: with reassignment on, it hears of a
    /// membership whose epoch has not started yet, and is told it retired if
    /// an epoch that started removed it. (A transfer it awaits resumes by
    /// itself: its host starts one on its next tick.)
    pub(super) fn after_start(&mut self, slot: u8) {
        let index = usize::from(slot);
        if !self.options.reassigns() {
            return;
        }
        if self.catalog.in_flight() {
            let lag = self.catalog_lag();
            let epoch = self.catalog.newest().epoch;
            self.schedule_catalog(lag, CatalogEvent::Assign { slot, epoch });
        }
        let disk = &self.disks[index];
        let removal = self.catalog.removal_of(slot, disk.joined_epoch);
        if let Some(epoch) = removal.filter(|epoch| *epoch <= self.catalog.started()) {
            if disk.retired_epoch.is_none() {
                let lag = self.retire_lag();
                self.schedule_catalog(lag, CatalogEvent::Retire { slot, epoch });
            }
        }
    }

    fn schedule_catalog(&mut self, after: u64, event: CatalogEvent) {
        self.catalog_sequence += 1;
        self.catalog_events
            .insert((self.now + after, self.catalog_sequence), event);
    }

    fn catalog_lag(&mut self) -> u64 {
        self.prng.below(self.options.catalog_lag_max_ticks + 1)
    }

    fn retire_lag(&mut self) -> u64 {
        self.prng.below(self.options.retire_lag_max_ticks + 1)
    }
}

/// The slot a catalog action is for.
fn event_slot(event: &CatalogEvent) -> u8 {
    match *event {
        CatalogEvent::Assign { slot, .. }
        | CatalogEvent::Retire { slot, .. }
        | CatalogEvent::Join { slot, .. }
        | CatalogEvent::Drop { slot } => slot,
    }
}
