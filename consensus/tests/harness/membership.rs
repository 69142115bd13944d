//! The metadata plane's part: new memberships assigned, replicas joining
//! at a new slot, and the state transfer that installs a committed prefix.

use std::collections::BTreeMap;

use strand_consensus::*;
use strand_wire::*;

use super::{Cluster, Storage, SyncMode};

impl Cluster {
    /// The metadata plane assigns `membership` (the next epoch): every live
    /// replica hears of it, and later (re)starts know it.
    pub fn assign(&mut self, membership: epoch::Membership) {
        self.config.memberships.push(membership);
        for slot in membership.slots.iter() {
            self.ensure_slot(slot);
        }
        for index in 0..self.count() {
            if let Some(replica) = self.replicas[usize::from(index)].as_mut() {
                let mut effects = Effects::new();
                replica.on_assignment(membership, &mut effects);
                self.execute(index, effects);
            }
        }
    }

    /// Room for a replica at `slot` (empty disk, not started).
    fn ensure_slot(&mut self, slot: u8) {
        while self.replicas.len() <= usize::from(slot) {
            self.replicas.push(None);
            self.storage.push(Storage::default());
            self.sync.push(SyncMode::Immediate);
            self.committed.push(BTreeMap::new());
        }
    }

    /// Starts a new replica at `slot`: empty, awaiting a state transfer.
    pub fn join(&mut self, slot: u8) {
        self.ensure_slot(slot);
        let newest = self.config.memberships.last().map_or(0, |m| m.epoch);
        self.storage[usize::from(slot)].joined_epoch = newest;
        self.awaiting.insert(slot);
        self.restart(slot);
    }

    /// Installs `from`'s committed prefix on `to` (awaiting a transfer), as
    /// the driver's state transfer does, and reports it done.
    pub fn transfer(&mut self, to: u8, from: u8) {
        let commit = self.replica(from).commit();
        let cursor_tail = self.replica(from).cursor_tail();
        let log: Vec<Msg<PrepareHeader>> =
            self.storage[usize::from(from)].log[..commit as usize].to_vec();
        let head = log.last().map(|prepare| *prepare.header());
        let recent: Vec<PrepareHeader> = log.iter().map(|prepare| *prepare.header()).collect();
        let client_table = self.replica(from).client_table().encode();
        let history_starts = self.replica(from).durable_state().history_starts.clone();
        let cursor_events =
            self.storage[usize::from(from)].cursor_events[..cursor_tail as usize].to_vec();
        let storage = &mut self.storage[usize::from(to)];
        storage.log = log;
        storage.durable_op = commit;
        storage.cursor_tail = cursor_tail;
        storage.cursor_durable = cursor_tail;
        storage.cursor_events = cursor_events;
        // The install writes the superblock with the log (as the partition's
        // does): committed through the prefix, unsettled until a view is adopted.
        let mut state = storage.state.clone().unwrap_or_default();
        state.commit = commit;
        state.log_unsettled = true;
        state.client_table = client_table.clone().into();
        storage.state = Some(state);
        self.awaiting.remove(&to);
        let mut effects = Effects::new();
        self.replicas[usize::from(to)]
            .as_mut()
            .expect("up")
            .on_state_transfer_done(
                head,
                cursor_tail,
                &recent,
                &client_table,
                &history_starts,
                &mut effects,
            );
        self.execute(to, effects);
    }
}
