//! Faults the world injects, kept within the durability promise: network
//! partitions, crashes and clean shutdowns, storage faults at restart, and
//! the bookkeeping of which replicas are missing acknowledged writes.

use super::World;
use crate::checkers::Violation;

impl World {
    pub(super) fn maybe_fault_storage(&mut self, replica: u8) {
        if !self.may_fault_storage(replica)
            || !self.prng.chance(self.options.storage_fault_percent, 100)
        {
            return;
        }
        if self.damage_storage(replica) {
            self.storage_fault_struck(replica);
            self.stats.storage_faults += 1;
        }
    }

    /// Whether a storage fault (at restart, or an I/O fault at a running
    /// replica) may strike `replica`: faults strike a minority of the
    /// replicas at most, and only within the durability promise.
    pub(super) fn may_fault_storage(&self, replica: u8) -> bool {
        let minority = usize::from(self.catalog.minority_min());
        (self.storage_faulted.contains(&replica) || self.storage_faulted.len() < minority)
            && self.within_promise(replica)
    }

    /// A storage fault struck `replica` (or is armed to): it counts among
    /// the damaged replicas, missing what it held at the history's head.
    pub(super) fn storage_fault_struck(&mut self, replica: u8) {
        let head = self.history.head();
        let previous = self.damaged.get(&replica).copied().unwrap_or(0);
        self.damaged.insert(replica, head.max(previous));
        self.storage_faulted.insert(replica);
    }

    pub(super) fn inject_faults(&mut self) -> Result<(), Violation> {
        let existing = self.existing_slots();
        if self.prng.chance(self.options.partition_ppm, 1_000_000) {
            let endpoints: Vec<u16> = existing.iter().copied().map(u16::from).collect();
            self.network.repartition(&mut self.prng, &endpoints);
            self.trace
                .record(self.now, 0, "partition", &[self.network.partition as u64]);
        } else if self.network.partition != crate::network::PartitionKind::Whole
            && self.prng.chance(self.options.heal_ppm, 1_000_000)
        {
            self.network.heal();
            self.trace.record(self.now, 0, "heal", &[]);
        }
        self.settle_damaged();
        if self.prng.chance(self.options.full_crash_ppm, 1_000_000) {
            for &replica in &existing {
                let clean = !self.may_crash(replica);
                self.stop(replica, clean);
            }
            return Ok(());
        }
        for &replica in &existing {
            if self.hosts[usize::from(replica)].is_none() {
                continue;
            }
            self.maybe_arm_power_loss(replica);
            self.maybe_fault_io(replica);
            if !self.prng.chance(self.options.crash_ppm, 1_000_000) {
                continue;
            }
            let clean =
                self.prng.chance(self.options.clean_percent, 100) || !self.may_crash(replica);
            self.stop(replica, clean);
            if self.prng.chance(self.options.double_crash_percent, 100) {
                let other = existing[self.prng.below(existing.len() as u64) as usize];
                let clean = !self.may_crash(other);
                self.stop(other, clean);
            }
        }
        Ok(())
    }

    /// The driver's side of handover, as the server's shards play it: now
    /// and then, a primary that leads in place of its group's preferred
    /// primary is asked to hand over (the replica decides whether it may).
    pub(super) fn maybe_hand_over(&mut self) -> Result<(), Violation> {
        if self.options.handover_ppm == 0 {
            return Ok(());
        }
        for replica in self.slots() {
            let leads_in_place = self.hosts[usize::from(replica)]
                .as_ref()
                .is_some_and(|host| host.leads_in_place_of_preferred().is_some());
            if leads_in_place && self.prng.chance(self.options.handover_ppm, 1_000_000) {
                self.run_host(replica, |host, _| {
                    host.hand_over_to_preferred();
                })?;
            }
        }
        Ok(())
    }

    /// Whether an unclean crash of `replica` stays within the durability
    /// promise: always under `persisted`; under `replicated`, only while
    /// fewer than W - 1 other replicas are still missing what they acked.
    pub(super) fn may_crash(&self, replica: u8) -> bool {
        self.options.durability == strand_wire::Durability::Persisted
            || self.within_promise(replica)
    }

    /// Whether damaging `replica` (a lossy crash, a storage fault) keeps at
    /// most W - 1 replicas damaged at once: every acked op then keeps a copy.
    /// While the group changes membership, W is the smallest of the
    /// memberships whose confirmed ops may rest on their own quorum alone,
    /// and the members an unconfirmed epoch removed count as lost.
    fn within_promise(&self, replica: u8) -> bool {
        let write_quorum = self.catalog.write_quorum_min();
        let others_damaged: std::collections::BTreeSet<u8> = self
            .damaged
            .keys()
            .copied()
            .chain(self.newcomers_to_come())
            .chain(self.catalog.removed_unconfirmed().iter())
            .filter(|damaged| *damaged != replica)
            .collect();
        others_damaged.len() < usize::from(write_quorum) - 1
    }

    /// Members of the newest assignment whose replica has not joined yet
    /// (the slot's earlier copy still awaits its drop): they hold nothing,
    /// like a damaged replica, from the moment the catalog names them.
    pub(super) fn newcomers_to_come(&self) -> impl Iterator<Item = u8> + '_ {
        self.catalog.newest().slots.iter().filter(|slot| {
            let disk = &self.disks[usize::from(*slot)];
            !self.damaged.contains_key(slot) && (!disk.created || disk.retired_epoch.is_some())
        })
    }

    /// A damaged replica recovers once it is up, trusted, and holds again the
    /// log head it had when it crashed (or the committed history moved past).
    fn settle_damaged(&mut self) {
        let recovered: Vec<u8> = self
            .damaged
            .iter()
            .filter(|(replica, head)| {
                let index = usize::from(**replica);
                let needed = (**head).min(self.history.head());
                !self.io_fault_outstanding(**replica)
                    && self.hosts[index].as_ref().is_some_and(|host| {
                        let live = host.inspect_replica();
                        let partition = host.inspect_partition().expect("open");
                        live.trusted()
                            && live.status() == strand_consensus::Status::Normal
                            && partition.faulty().is_empty()
                            && partition.durable_op() >= needed
                    })
            })
            .map(|(replica, _)| *replica)
            .collect();
        for replica in recovered {
            self.damaged.remove(&replica);
        }
    }
}
