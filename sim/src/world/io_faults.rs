//! I/O faults at running replicas, and what a node does when one strikes.
//!
//! Armed on one of the files a running replica's partition uses (most often
//! the segment holding its newest op), each strikes once, at the next such
//! call on that file: a failed fdatasync (`EIO`; the disk model keeps or
//! drops each page it covered, and no later sync makes them durable), a
//! write that finds the disk full (`ENOSPC`), or a failed read (`EIO`, armed
//! for the replica's next input only, so that the checkers' own reads never
//! meet it). Like storage faults at restart they strike a minority of the
//! replicas at most, within the durability promise: the replica counts as
//! damaged from the moment one is armed.
//!
//! A failed write or sync is fail-stop for the bytes it covered. The WAL
//! poisons the file, the host marks the group's storage failed and stops
//! appending, and, after a wait, the node opens the group again in the same
//! process (the page cache kept) with `PartitionConfig::drop_unsynced`: the
//! log's tail past the durable checkpoint is cut, its ops marked maybe acked
//! first, and peers supply them again. The server does this in its own
//! layer (`Shard::reopen_failed_storage`, `Actor::close_for_reopen`, which
//! sets `GroupSpec::after_failed_write`); this module mirrors it: the group
//! is given up without a clean mark and opened through the same
//! `GroupHost::open` with `drop_unsynced` set. The server's close may fail on
//! the poisoned files and writes nothing the reopen relies on, so the
//! simulator gives the partition up as a process crash would (queued
//! requests dropped, every written byte still visible, unsynced ones still
//! pending, which the reopen's own syncs cover). A failed read fails the
//! operation that made it: a read for a peer is not served, a cut, a
//! rewrite, a quarantine or an install fails the group's storage like a
//! failed write (the host reopens the partition from the disk the failed
//! swap hands back, and the group is opened again after the wait).

use std::path::PathBuf;

use strand_host::group_host::GroupHost;
use strand_wal::CrashMode;

use super::storage::DIR;
use super::{Device, World};
use crate::checkers::Violation;

/// `EIO`: what a failed fdatasync or read reports.
const EIO: i32 = 5;
/// `ENOSPC`: what a write to a full disk reports.
const ENOSPC: i32 = 28;
/// Bounds of the ticks a node waits before it opens a failed group again
/// (the server's `STORAGE_REOPEN_AFTER`, with its backoff).
const REOPEN_AFTER_MIN_TICKS: u64 = 20;
/// Upper bound of the wait.
const REOPEN_AFTER_MAX_TICKS: u64 = 200;

/// The kinds of I/O fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IoFault {
    /// The next fdatasync of the file fails with `EIO`.
    Sync,
    /// The next write to the file fails with `ENOSPC`.
    Write,
    /// The next read of the file fails with `EIO`.
    Read,
}

impl World {
    /// Maybe arms an I/O fault at the running replica `replica`.
    pub(super) fn maybe_fault_io(&mut self, replica: u8) {
        let index = usize::from(replica);
        if self.options.io_fault_ppm == 0
            || !self.prng.chance(self.options.io_fault_ppm, 1_000_000)
            || !self.may_fault_storage(replica)
        {
            return;
        }
        let armable = self.hosts[index].as_ref().is_some_and(|host| {
            !host.storage_failed()
                && !host.receiving_transfer()
                && host.progress().status != strand_consensus::Status::AwaitingStateTransfer
        });
        if !armable {
            return;
        }
        let Some(path) = self.io_fault_target(replica) else {
            return;
        };
        let fault = match self.prng.below(10) {
            0..=3 => IoFault::Sync,
            4..=6 => IoFault::Write,
            _ => IoFault::Read,
        };
        let disk = self.device(index).expect("checked above");
        let armed = match fault {
            IoFault::Sync => disk
                .get_mut()
                .storage_mut()
                .fail_next_sync(&path, EIO)
                .is_ok(),
            IoFault::Write => disk
                .get_mut()
                .storage_mut()
                .fail_next_write(&path, ENOSPC)
                .is_ok(),
            IoFault::Read => {
                self.disks[index].read_fault = Some(path);
                true
            }
        };
        if armed {
            self.storage_fault_struck(replica);
            self.stats.io_faults += 1;
            self.trace
                .record(self.now, u16::from(replica), "io_fault", &[fault as u64]);
        }
    }

    /// The file an I/O fault strikes: the segment holding the newest op
    /// half the time, else any file of the partition.
    fn io_fault_target(&mut self, replica: u8) -> Option<PathBuf> {
        let partition = self.hosts[usize::from(replica)]
            .as_ref()?
            .inspect_partition()
            .expect("open");
        let newest = partition
            .entry_location(partition.op())
            .map(|location| location.path);
        let paths: Vec<PathBuf> = self
            .device(usize::from(replica))?
            .get()
            .storage()
            .paths()
            .into_iter()
            .filter(|path| path.starts_with(DIR))
            .collect();
        if let Some(newest) = newest.filter(|_| self.prng.chance(1, 2)) {
            return Some(newest);
        }
        if paths.is_empty() {
            return None;
        }
        Some(paths[self.prng.below(paths.len() as u64) as usize].clone())
    }

    /// Arms the read fault waiting for `replica`'s next input; returns the
    /// file it is armed on.
    pub(super) fn arm_read_fault(&mut self, replica: u8) -> Option<PathBuf> {
        let index = usize::from(replica);
        let path = self.disks[index].read_fault.clone()?;
        let disk = self.device(index)?;
        if disk
            .get_mut()
            .storage_mut()
            .fail_next_read(&path, EIO)
            .is_err()
        {
            // The file is gone (a cut, retention, a quarantine).
            self.disks[index].read_fault = None;
            return None;
        }
        Some(path)
    }

    /// After `replica`'s input: a read fault that did not strike waits for
    /// the next input, and no read outside an input meets it.
    pub(super) fn disarm_read_fault(&mut self, replica: u8, armed: Option<PathBuf>) {
        let Some(path) = armed else {
            return;
        };
        let index = usize::from(replica);
        let Some(disk) = self.device(index) else {
            return;
        };
        if !disk.get_mut().storage_mut().disarm_read_fault(&path) {
            self.disks[index].read_fault = None;
            self.trace
                .record(self.now, u16::from(replica), "read_failed", &[]);
        }
    }

    /// Checker 9 after `replica`'s host settled: its storage refused no
    /// effect, unless an injected fault struck since the group opened, or a
    /// repair found a layout that damage injected at a restart left. Then
    /// the failure is expected, and the group is opened again after the
    /// node's wait.
    pub(super) fn storage_settled(&mut self, replica: u8) -> Result<(), Violation> {
        let index = usize::from(replica);
        let at_open = self.disks[index].faults_struck_at_open;
        let struck = self
            .device(index)
            .is_some_and(|disk| disk.get().storage().faults_struck() > at_open);
        let Some(host) = self.hosts[index].as_ref() else {
            return Ok(());
        };
        let Some(failure) = host.storage_failure() else {
            return Ok(());
        };
        // A repair that found the log laid out otherwise than its open
        // inferred (only damage injected at a restart can do that) fences
        // the copy at its next open.
        let misplaced = failure.contains(strand_partition::REWRITE_DOES_NOT_FIT)
            && self.storage_faulted.contains(&replica);
        if !misplaced && (!struck || !injected_errno(failure)) {
            return self.storage.settled(replica, Some(failure));
        }
        if self.disks[index].reopen_at.is_none() {
            // It loses what it held now (the tail past its checkpoint).
            self.storage_fault_struck(replica);
            let spread = REOPEN_AFTER_MAX_TICKS - REOPEN_AFTER_MIN_TICKS;
            let wait = REOPEN_AFTER_MIN_TICKS + self.prng.below(spread + 1);
            self.disks[index].reopen_at = Some(self.now + wait);
            self.trace
                .record(self.now, u16::from(replica), "storage_failed", &[wait]);
        }
        Ok(())
    }

    /// Whether an I/O fault at `replica` is armed and has not struck, or
    /// struck and its group is not open again yet: the replica stays
    /// damaged until then (what it loses is known only once it strikes).
    pub(super) fn io_fault_outstanding(&self, replica: u8) -> bool {
        let index = usize::from(replica);
        let disk = &self.disks[index];
        disk.read_fault.is_some()
            || disk.reopen_at.is_some()
            || self.hosts[index]
                .as_ref()
                .is_some_and(GroupHost::storage_failed)
            || self
                .device(index)
                .is_some_and(|disk| disk.get().storage().has_armed_faults())
    }

    /// Opens again each group whose storage failed and whose wait is over.
    pub(super) fn reopen_due(&mut self) {
        for replica in self.slots() {
            let index = usize::from(replica);
            if self.disks[index].reopen_at.is_none_or(|at| at > self.now) {
                continue;
            }
            self.disks[index].reopen_at = None;
            self.reopen_after_failure(replica);
        }
    }

    /// The node's reopen of the group at `replica` after its storage failed
    /// (see the module docs): given up without a mark, opened again in the
    /// same process with `drop_unsynced`.
    fn reopen_after_failure(&mut self, replica: u8) {
        let index = usize::from(replica);
        let Some(mut host) = self.hosts[index].take() else {
            return;
        };
        self.forget_turns(replica);
        self.disks[index].read_fault = None;
        self.disks[index].device = None;
        let Some(mut disk) = host.abandon().map(Device::into_disk) else {
            // Given up for good (`Output::Stop` was reported).
            return;
        };
        disk.restore_power();
        disk.crash(CrashMode::ProcessCrash);
        self.disks[index].stored = Some(disk);
        self.stats.reopens += 1;
        self.open_host(replica, true);
    }
}

/// Whether a storage failure reports one of the errors the simulator
/// injects (a failure for any other reason is a disagreement).
fn injected_errno(failure: &str) -> bool {
    failure.contains("no space left on device")
        || [EIO, ENOSPC]
            .iter()
            .any(|errno| failure.contains(&format!("(os error {errno})")))
}
