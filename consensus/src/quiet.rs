//! Quiescence: an idle group goes silent.
//!
//! A primary whose backups hold everything, with nothing to prepare,
//! commit or ship, sends one last heartbeat flagged
//! [`strand_wire::CommitFlags::QUIESCE`] and stops its timers; a backup that holds the op
//! that heartbeat names applies the commit it carries and stops its own. A quiet replica's ticks do nothing,
//! so its driver need not tick it at all, and it sends nothing of its own.
//! "Holds everything" is what the backup says: its acks carry
//! [`strand_wire::PrepareOkFlags::REPAIRING`] while it lacks headers, bodies
//! or sound copies of damaged ops, so a repairing backup keeps its primary
//! awake, and a repair request from a backup whose latest ack said it lacks
//! nothing is one sent before its repairs ended (answered, and no news).
//!
//! What a quiet backup would have learnt from heartbeats (that its primary
//! lives) comes from the driver instead: one liveness signal per peer node,
//! for all groups ([`Replica::on_peer_liveness`]). A quiet backup whose
//! primary is suspected wakes and votes to leave the view at once (the
//! driver's suspicion took as long as a heartbeat timeout); a quiet primary
//! wakes when a suspected peer comes back, to catch it up, unless that peer
//! already acked, since it went, that it lacks nothing (the signal lags).
//!
//! Anything else wakes a quiet replica: a client request, a cursor commit,
//! a new membership, and every message except the ones with nothing new
//! (an ack, a heartbeat of this view or a prepare about ops the replica
//! holds and applied, such as one the network delivers late). Waking restarts the timers Normal status runs, and a
//! woken primary heartbeats at once so that a backup that voted to leave
//! the view hears it lives.

use strand_wire::{CommandHeader, HeaderPrefix, Message, PrepareOkFlags, REPLICAS_MAX};

use crate::effects::{Effects, LeaveReason};
use crate::replica::{Replica, Status};
use crate::state_machine::StateMachine;

/// A bitset over replica slots.
pub(crate) type SlotBits = u16;

const _: () = assert!(REPLICAS_MAX as u32 <= SlotBits::BITS);

/// Whether the replica is quiet, and which peers the driver's node-level
/// liveness suspects: the signal a quiet replica listens to instead of
/// heartbeats (a handover and a recovering replica's choice of view read
/// it too).
#[derive(Debug, Default)]
pub(crate) struct Quiet {
    /// Idle, its timers stopped.
    on: bool,
    /// Peers (bitset) the driver's node-level liveness suspects.
    suspected: SlotBits,
}

impl Quiet {
    /// Whether the replica went quiet (and nothing woke it since).
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// The replica goes quiet.
    pub fn begin(&mut self) {
        self.on = true;
    }

    /// Anything that may need the replica's timers ends its quiet.
    pub fn end(&mut self) {
        self.on = false;
    }

    /// The node-level liveness of the peer at `slot` changed.
    pub fn peer(&mut self, slot: u8, alive: bool) {
        assert!(slot < REPLICAS_MAX, "slot {slot} out of range");
        let bit: SlotBits = 1 << slot;
        if alive {
            self.suspected &= !bit;
        } else {
            self.suspected |= bit;
        }
    }

    /// Whether the driver suspects the peer at `slot`.
    pub fn suspects(&self, slot: u8) -> bool {
        slot < REPLICAS_MAX && self.suspected & (1 << slot) != 0
    }

    /// Its own rule: a replica never suspects itself (its slot is `own`).
    pub fn assert_invariants(&self, own: u8) {
        assert!(!self.suspects(own), "replica {own} suspects itself");
    }
}

impl<S: StateMachine> Replica<S> {
    /// Whether the replica is quiet: idle, its timers stopped, so that its
    /// ticks do nothing and its driver may stop ticking it.
    pub fn is_quiet(&self) -> bool {
        self.quiet.is_on() && self.status == Status::Normal
    }

    /// The node-level liveness of the replica at `slot` changed: the driver
    /// watches one signal per peer node, for all of its groups.
    pub fn on_peer_liveness(&mut self, slot: u8, alive: bool, effects: &mut Effects) {
        if slot >= REPLICAS_MAX || slot == self.config.replica {
            return;
        }
        self.quiet.peer(slot, alive);
        if !alive {
            // What it reported before it went may be stale; a report since
            // (the down signal lags) is from the replica that came back.
            self.progress.forget_report(slot);
        }
        if !self.is_quiet() || !self.is_peer(slot) {
            return;
        }
        if self.is_primary() {
            // A peer that came back is caught up unless it said it is.
            if alive && !self.caught_up(slot) {
                self.wake(effects);
            }
        } else if !alive && slot == self.primary_index() {
            self.wake(effects);
            self.vote_leave_view(LeaveReason::PrimarySuspected, effects);
        }
    }

    /// Wakes a quiet replica unless `message` only confirms the quiet.
    pub(crate) fn wake_for_message(&mut self, message: &Message, effects: &mut Effects) {
        if self.is_quiet() && !self.keeps_quiet(message) {
            self.wake(effects);
        }
    }

    /// Wakes a quiet replica (any input that may need its timers). A woken
    /// primary heartbeats at once, so that a backup that voted to leave the
    /// view hears that it lives.
    pub(crate) fn wake(&mut self, effects: &mut Effects) {
        self.wake_heartbeating(true, effects);
    }

    /// Wakes a quiet primary for a request it prepares next: the prepare
    /// tells the backups it lives, so no heartbeat goes ahead of it (a
    /// group woken by each of its ops would pay two frames and two acks
    /// per op for it).
    pub(crate) fn wake_to_prepare(&mut self, effects: &mut Effects) {
        self.wake_heartbeating(false, effects);
    }

    fn wake_heartbeating(&mut self, heartbeat_now: bool, effects: &mut Effects) {
        if !self.is_quiet() {
            self.quiet.end();
            return;
        }
        self.quiet.end();
        self.timers.repair.start();
        // Paused while quiet, it resumes where it stopped (see `quiesce`).
        if !self.timers.commit_persist.ticking() {
            self.timers.commit_persist.start();
        }
        if self.is_primary() {
            self.timers.heartbeat.start();
            if heartbeat_now {
                self.send_heartbeat(effects);
            }
        } else {
            self.timers.primary.start_jittered(&mut self.prng);
        }
    }

    /// Whether a quiet replica may stay quiet on `message`.
    fn keeps_quiet(&self, message: &Message) -> bool {
        if self.status != Status::Normal {
            return false;
        }
        // Nothing new: an ack, a heartbeat or cursor events of this view
        // about what this replica holds and applied (the network may deliver one late,
        // behind the quiesce heartbeat). A backup that lost ops restarted,
        // and its probe wakes the primary.
        match message {
            Message::PrepareOk(ok) if self.is_primary() => {
                let ok = ok.header();
                ok.prefix.view_id() == self.view
                    && !ok.flags().contains(PrepareOkFlags::REPAIRING)
                    && ok.op.get() <= self.journal.head()
                    && ok.commit.get() <= self.commit
            }
            // A repair request from a backup whose latest ack said it lacks
            // nothing: one it sent before its repairs ended, delivered late
            // (it is answered all the same). A backup that lost entries
            // since restarted, and its probe wakes the primary.
            Message::RequestPrepare(request) if self.is_primary() => {
                self.asked_by_caught_up_backup(request.header().prefix())
            }
            Message::RequestHeaders(request) if self.is_primary() => {
                self.asked_by_caught_up_backup(request.header().prefix())
            }
            Message::Commit(commit) if !self.is_primary() => {
                let commit = commit.header();
                commit.prefix.view_id() == self.view
                    && commit.prefix.replica == self.primary_index()
                    && commit.op.get() <= self.journal.head()
                    && commit.commit.get() <= self.commit
            }
            // The answer to a RequestStartView this backup sent before it
            // adopted the view (a state transfer's install asks every peer),
            // delivered after the quiesce heartbeat: a Normal replica drops a
            // StartView of its own view, and this one holds nothing new.
            Message::StartView(start) if !self.is_primary() => {
                let start = start.header();
                start.prefix.view_id() == self.view
                    && start.prefix.replica == self.primary_index()
                    && start.op.get() <= self.journal.head()
                    && start.commit.get() <= self.commit
            }
            // A prepare this backup holds and applied (a repair answer or a
            // retransmission the network delivers after the quiesce
            // heartbeat); below the journal's window, a committed op it
            // holds sound.
            Message::Prepare(prepare) if !self.is_primary() => {
                let header = prepare.header();
                let op = header.op.get();
                let held = if op < self.journal.base() {
                    !self.faulty_ops.contains(&op)
                } else {
                    self.journal.checksum(op) == Some(prepare.checksum())
                };
                header.prefix.view_id() <= self.view && op <= self.commit && held
            }
            // Cursor events this backup holds already (shipped before the
            // quiesce heartbeat, delivered after it).
            Message::Cursors(cursors) if !self.is_primary() => {
                let cursors = cursors.header();
                cursors.prefix.view_id() == self.view
                    && cursors.prefix.replica == self.primary_index()
                    && cursors.cursor_end() <= self.cursors.tail
            }
            _ => false,
        }
    }

    /// Primary: whether the group is idle and every backup it can reach
    /// holds everything, so the next heartbeat may quiesce it.
    pub(crate) fn may_quiesce_primary(&self) -> bool {
        let head = self.journal.head();
        let idle = self.is_serving_primary()
            && !self.abdicated
            && !self.votes.suspecting()
            && self.target.is_none()
            && self.adoption.is_none()
            && self.deferred_cut.is_none()
            // Its own damaged entries in the journal's window are repaired
            // first (until then it may refuse requests:
            // `client_table_incomplete`); a backup with some declines the
            // quiesce heartbeat and repairs them, waking this primary.
            && self.faulty_ops.range(self.journal.base()..).next().is_none()
            && head == self.commit
            && self.handover.is_none()
            && self.cursors.durable == self.cursors.tail;
        // A backup that holds everything applies the commit the quiesce
        // heartbeat carries before it goes quiet, so the primary need not
        // wait a heartbeat and an ack more for it to say it applied: that
        // round cost a group woken by each of its ops four frames per op.
        idle && self
            .others()
            .all(|slot| self.quiet.suspects(slot) || self.holds_everything(slot))
    }

    /// Primary: whether the backup at `slot` said, in this view, that it
    /// holds and applied everything and repairs nothing.
    pub(crate) fn caught_up(&self, slot: u8) -> bool {
        self.holds_everything(slot) && self.progress.backup_commit(slot) == self.commit
    }

    /// Primary: whether the backup at `slot` said, in this view, that it
    /// holds every op and cursor event this primary holds and repairs
    /// nothing (it may not have learned the latest commit yet).
    pub(crate) fn holds_everything(&self, slot: u8) -> bool {
        assert!(slot < REPLICAS_MAX, "slot {slot} out of range");
        let index = usize::from(slot);
        self.progress.reports_whole(slot)
            && self.progress.ack(slot) == self.journal.head()
            && (self.cursors.replica_tails[index] >= self.cursors.durable
                || self.cursors.replica_tails[index] < self.cursors.log_start)
    }

    /// Primary: whether a repair request with `prefix` comes from a backup
    /// of this view that said it lacks nothing.
    fn asked_by_caught_up_backup(&self, prefix: &HeaderPrefix) -> bool {
        prefix.view_id() == self.view
            && prefix.replica != self.config.replica
            && prefix.replica < REPLICAS_MAX
            && self.is_peer(prefix.replica)
            && self.holds_everything(prefix.replica)
    }

    /// The driver found that the cursor log holds events only from `start`
    /// on (a transferred or compacted log): a backup whose tail is below it
    /// cannot be caught up by shipping, and keeping the group awake would
    /// not change that.
    pub fn note_cursor_log_start(&mut self, start: u64) {
        self.cursors.log_start = self.cursors.log_start.max(start);
    }

    /// Backup: whether the quiesce heartbeat naming `op` and `commit` can be
    /// followed: this replica holds and applied exactly that.
    pub(crate) fn may_quiesce_backup(&mut self, op: u64, commit: u64) -> bool {
        self.status == Status::Normal
            && !self.votes.suspecting()
            && self.trust.is_trusted()
            && self.deferred_cut.is_none()
            && self.journal.head() == op
            && !self.journal.has_gaps()
            // Damaged entries in its window are repaired first: a quiet
            // backup would be woken by the answers. Until then it stays
            // awake, and its repair requests wake the primary.
            && !self.lacks_entries()
            && self.stored_through() == op
            && self.commit == commit
    }

    /// Goes quiet: every timer Normal status runs stops, but for the commit
    /// persist timer, which pauses (a quiet replica's ticks do nothing) and
    /// resumes on waking. So a group woken by each of its ops persists its
    /// commit once per `commit_persist_ticks` of awake time, not at every
    /// quiesce (which cost each op a superblock write on every replica).
    /// The commit a quiet replica has not persisted is a hint it can
    /// relearn: its driver persists it on its periodic check
    /// ([`Replica::persist_commit_now`]), as does a view change, and
    /// retention asks for it before it drops anything.
    pub(crate) fn quiesce(&mut self) {
        assert_eq!(
            self.status,
            Status::Normal,
            "only a Normal replica quiesces"
        );
        assert!(
            self.deferred_cut.is_none(),
            "quiet with a cut waiting for its persist"
        );
        self.quiet.begin();
        self.timers.heartbeat.stop();
        self.timers.primary.stop();
        self.timers.progress.stop();
        self.timers.prepare.stop();
        self.timers.repair.stop();
        self.repair_due = false;
    }

    /// Leaving Normal status (or entering it afresh) ends any quiet.
    pub(crate) fn end_quiet(&mut self) {
        self.quiet.end();
        self.progress.forget_reports();
    }
}

#[cfg(test)]
mod quiet_state_tests {
    use super::*;

    #[test]
    fn a_suspicion_lasts_until_the_peer_is_heard_again() {
        let mut quiet = Quiet::default();
        quiet.begin();
        quiet.peer(2, false);
        assert!(quiet.is_on() && quiet.suspects(2) && !quiet.suspects(1));
        assert!(!quiet.suspects(REPLICAS_MAX), "no such slot");
        quiet.peer(2, true);
        quiet.end();
        assert!(!quiet.is_on() && !quiet.suspects(2));
        quiet.assert_invariants(0);
    }
}
