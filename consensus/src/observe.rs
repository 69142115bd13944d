//! What the replica shows of itself: read-only accessors for its owner
//! (status reports, routing, the simulator's checkers) and the check of its
//! invariants.

use strand_wire::{PrepareHeader, REPLICAS_MAX, ViewId};

use crate::client_table::ClientTable;
use crate::config::Config;
use crate::effects::WaitReason;
use crate::epoch::{Membership, Memberships, SlotSet};
use crate::replica::{Replica, Status};
use crate::state::DurableState;
use crate::state_machine::StateMachine;

impl<S: StateMachine> Replica<S> {
    /// The highest commit number this replica has heard of (from a primary's
    /// prepare or commit, or a view it adopted): once `commit()` reaches it
    /// in normal status, the replica has applied what its primary told it.
    pub fn commit_max(&self) -> u64 {
        self.commit_max
    }

    /// The replica's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The membership of the current view's epoch.
    pub fn view_membership(&self) -> &Membership {
        &self.view_membership
    }

    /// The replicas a state transfer may come from: this view's peers and,
    /// until the view's epoch has started here, the previous epoch's members.
    /// While a group moves to new replicas, the old ones may be the only
    /// ones holding the log (the new ones may all await a transfer).
    pub fn transfer_sources(&self) -> SlotSet {
        self.peer_slots(self.view.epoch)
    }

    /// Every membership this replica knows.
    pub fn memberships(&self) -> &Memberships {
        &self.memberships
    }

    /// The highest assignment epoch this replica knows to have started (a
    /// view of it became normal, or the op that moved to it committed).
    pub fn started_epoch(&self) -> u32 {
        self.started_epoch
    }

    /// The current view.
    pub fn view(&self) -> ViewId {
        self.view
    }

    /// The view the log was last settled in.
    pub fn log_view(&self) -> ViewId {
        self.log_view
    }

    /// The replica's status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The log's head op.
    pub fn op(&self) -> u64 {
        self.journal.head()
    }

    /// One past the last record offset of the log's head op: the records
    /// the log holds, committed or not. A primary in a new view holds every
    /// record its predecessor committed, but its commit may trail this until
    /// a backup acks the view.
    pub fn log_offset_end(&self) -> u64 {
        let head = self.journal.head();
        self.journal
            .header(head)
            .map_or(0, PrepareHeader::offset_end)
    }

    /// Ops up to here are applied.
    pub fn commit(&self) -> u64 {
        self.commit
    }

    /// Whether the log is trusted.
    pub fn trusted(&self) -> bool {
        self.trust.is_trusted()
    }

    /// The primary of the current view.
    pub fn primary_index(&self) -> u8 {
        self.view_membership.primary_of(self.view.view)
    }

    /// The primary of `view`, under the membership of its epoch (which the
    /// caller made sure is known: a frame's epoch is checked on arrival).
    pub(crate) fn primary_of(&self, view: ViewId) -> u8 {
        self.memberships
            .get(view.epoch)
            .unwrap_or_else(|| panic!("no membership for view {view}"))
            .primary_of(view.view)
    }

    /// Moves the replica to `view` (whose epoch's membership is known).
    pub(crate) fn set_view(&mut self, view: ViewId) {
        assert!(view >= self.view, "view {view} below {}", self.view);
        self.view_membership = *self
            .memberships
            .get(view.epoch)
            .unwrap_or_else(|| panic!("no membership for view {view}"));
        if view != self.view {
            // What an earlier view's primary had says nothing of this
            // view's log (its uncommitted ops may be gone).
            self.primary_op = 0;
        }
        self.view = view;
    }

    /// Whether this replica is the primary of its view (in any status).
    pub fn is_primary(&self) -> bool {
        self.primary_index() == self.config.replica
    }

    /// Whether this replica serves as primary right now.
    pub fn is_serving_primary(&self) -> bool {
        self.status == Status::Normal && self.is_primary()
    }

    /// The journal's header of `op`, if in memory.
    pub fn header(&self, op: u64) -> Option<&PrepareHeader> {
        self.journal.header(op)
    }

    /// The state machine.
    pub fn machine(&self) -> &S {
        &self.machine
    }

    /// The state machine, for the driver to restore application state at
    /// open (replaying the committed log up to [`Replica::commit`]) before
    /// the replica handles any input.
    pub fn machine_mut(&mut self) -> &mut S {
        &mut self.machine
    }

    /// The cursor event log's length.
    pub fn cursor_tail(&self) -> u64 {
        self.cursors.tail
    }

    /// The client table: a state transfer carries it to the receiver.
    pub fn client_table(&self) -> &ClientTable {
        &self.client_table
    }

    /// The durable state as last asked to be persisted.
    pub fn durable_state(&self) -> &DurableState {
        &self.durable
    }

    /// The highest op each replica acked in this view (primary only; index
    /// by slot; slots that are no member read 0).
    pub fn acks(&self) -> &[u64; REPLICAS_MAX as usize] {
        self.progress.acks()
    }

    /// Checks the replica's own invariants (views in order, commit below
    /// the highest heard of, persists in sequence) and each sub-state's (a
    /// full pass over the journal's window, the timers): the simulator calls
    /// it after every turn, and the group host after every input in debug
    /// builds, so a count that drifts fails a seed or a test rather than
    /// hiding a gap or a body to repair.
    pub fn assert_invariants(&self) {
        self.journal.assert_invariants();
        self.timers.assert_invariants();
        assert!(
            self.log_view <= self.view,
            "log view {} past view {}",
            self.log_view,
            self.view
        );
        self.persistence.assert_invariants();
        self.progress.assert_invariants();
        assert!(
            self.persistence.view() <= self.view,
            "persisted view {} past view {}",
            self.persistence.view(),
            self.view
        );
        assert!(
            self.persistence.view() <= self.durable.view,
            "persisted view {} never asked for (durable view {})",
            self.persistence.view(),
            self.durable.view
        );
        assert!(
            self.commit <= self.commit_max,
            "commit {} past the highest heard of, {}",
            self.commit,
            self.commit_max
        );
        assert!(self.log_start >= 1, "the log starts at op 1 or later");
        self.votes
            .assert_invariants(self.config.replica, self.status == Status::Retired);
        self.probe.assert_invariants();
        self.assert_log_invariants();
        self.assert_role_invariants();
        self.cursors.assert_invariants();
    }

    /// The journal, storage and client table against the commit number:
    /// the window reaches the op after the commit, the log holds every
    /// applied op, appends continue where storage was handed ops, the
    /// client table knows every applied request, and a cut waits for a
    /// persist in flight.
    fn assert_log_invariants(&self) {
        assert!(
            self.journal.base() <= self.commit + 1,
            "the journal starts at {}, past the op after commit {}",
            self.journal.base(),
            self.commit
        );
        assert!(
            self.journal.head() >= self.commit,
            "the log's head {} below commit {}",
            self.journal.head(),
            self.commit
        );
        assert!(
            self.appended_from <= self.write_next,
            "appends from {} past the next write {}",
            self.appended_from,
            self.write_next
        );
        assert!(
            self.client_table.through() >= self.commit,
            "the client table stops at {}, below commit {}",
            self.client_table.through(),
            self.commit
        );
        if let Some(deferred) = self.deferred_cut {
            assert!(
                self.persistence.is_in_flight(deferred.gate),
                "a cut waits for persist {} that is not in flight ({}..={})",
                deferred.gate,
                self.persistence.completed() + 1,
                self.persistence.requested()
            );
        }
        debug_assert!(
            self.rewriting_below_window
                .iter()
                .all(|op| *op <= self.commit && self.faulty_ops.contains(op)),
            "a rewrite below the window of an op that is not a damaged committed one"
        );
    }

    /// What the replica's role and status imply: the view's membership is
    /// at hand, acks stay within the log, a vote to leave is this
    /// replica's own exactly while it suspects, a serving log is trusted,
    /// and an adoption belongs to the view change of the current view.
    fn assert_role_invariants(&self) {
        assert_eq!(
            self.view_membership.epoch, self.view.epoch,
            "the membership at hand is not the view's"
        );
        if self.is_serving_primary() {
            let head = self.journal.head();
            assert!(
                self.progress.acks().iter().all(|ack| *ack <= head),
                "an ack above the primary's head {head}: {:?}",
                self.progress.acks()
            );
        } else if self.status == Status::Normal {
            assert!(
                self.acked <= self.journal.head(),
                "acked {} above the log's head {}",
                self.acked,
                self.journal.head()
            );
        }
        self.trust
            .assert_invariants(self.status, self.durable.log_unsettled);
        self.quiet.assert_invariants(self.config.replica);
        assert!(
            self.handover.is_none_or(|drain| drain.ticks_left > 0),
            "a handover drain that ran out is still on"
        );
        assert!(
            self.start_patience <= crate::replica::START_PATIENCE_TIMEOUTS,
            "patience {} past its start",
            self.start_patience
        );
        if let Some(adoption) = &self.adoption {
            assert_eq!(
                self.status,
                Status::ViewChange,
                "adopting view {} outside a view change",
                adoption.view
            );
            assert_eq!(
                adoption.view, self.view,
                "adopting view {} while in view {}",
                adoption.view, self.view
            );
        }
    }

    /// Why the view change waits and for whom (a bitset), if it does.
    pub fn attention(&self) -> Option<(WaitReason, u32)> {
        if self.status == Status::Retired {
            return None;
        }
        if self.status == Status::AwaitingStateTransfer {
            return Some((WaitReason::AwaitingStateTransfer, 0));
        }
        if self.status != Status::ViewChange {
            return None;
        }
        self.view_change.waiting
    }

    /// `mutations` only: switches the trusted-quorum gate of the view change
    /// off, to show that the simulator's checkers catch the loss it prevents.
    #[cfg(feature = "mutations")]
    pub fn disable_trusted_gate(&mut self) {
        self.trusted_gate = false;
    }

    /// `mutations` only: a view change into a new epoch hears only the new
    /// membership's quorum, to show that the simulator's checkers catch the
    /// loss the old membership's half of the joint quorum prevents.
    #[cfg(feature = "mutations")]
    pub fn disable_old_quorum(&mut self) {
        self.old_quorum_gate = false;
    }
}
