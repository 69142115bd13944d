//! Opening a replica from what storage recovered, as named steps: the
//! memberships the driver and the log name, the commit number the log
//! still supports, the damaged ops, the journal, the view to start in, the
//! replica itself, then its starting status.

use std::collections::BTreeSet;

use strand_prng::Prng;
use strand_wire::ViewId;

use crate::client_table::restore_client_table;
use crate::config::Config;
use crate::cursors::CursorState;
use crate::epoch::Memberships;
use crate::journal::{Journal, SlotState};
use crate::persistence::Persistence;
use crate::progress::PrimaryProgress;
use crate::replica::{
    Replica, START_PATIENCE_TIMEOUTS, Status, ViewChangeProgress, learn_from_header,
};
use crate::state::{DurableState, Recovered};
use crate::state_machine::StateMachine;
use crate::timers::Timers;
use crate::trust::Trust;
use crate::votes::{LeaveVotes, StartViewProbe};

impl<S: StateMachine> Replica<S> {
    /// Builds a replica from what storage recovered. Call [`Replica::start`] next.
    pub fn open(config: Config, recovered: Recovered, machine: S) -> Replica<S> {
        config.assert_valid();
        let mut memberships = memberships_at_open(&config, &recovered);
        let state = recovered.state.clone();
        assert!(state.log_view <= state.view, "{state:?}");
        let commit = recovered.commit_the_log_supports();
        let faulty = faulty_at_open(&recovered);
        let journal = journal_at_open(&recovered, &faulty, commit, &mut memberships);
        let mut machine = machine;
        let retained_through = recovered.log_start.saturating_sub(1);
        match journal.header(commit) {
            None if commit > 0 && commit == retained_through => {
                machine.restore_retained(recovered.log_start_offset)
            }
            header => machine.restore(header),
        }
        let state = view_at_open(state, &memberships, recovered.joined_epoch);
        let head = journal.head();
        let opened = Opened {
            memberships,
            state,
            journal,
            commit,
            faulty,
        };
        let mut replica = Replica::assemble(config, &recovered, opened, machine);
        if replica.faulty_ops.iter().any(|op| *op > head) {
            replica.trust.lost();
        }
        replica.place_at_open();
        replica.status_at_open(&recovered);
        replica
    }

    /// The replica over the parts an open worked out, not yet placed in
    /// its first view or given its starting status.
    fn assemble(config: Config, recovered: &Recovered, opened: Opened, machine: S) -> Replica<S> {
        let Opened {
            memberships,
            state,
            journal,
            commit,
            faulty,
        } = opened;
        let view_membership = *memberships.get(state.view.epoch).unwrap_or_else(|| {
            panic!(
                "no membership for the persisted view {} (known: {memberships:?})",
                state.view
            )
        });
        let client_table = restore_client_table(&state.client_table, &journal, commit);
        let log_head = recovered.log_head;
        Replica {
            memberships,
            view_membership,
            target: None,
            started_epoch: 0,
            prng: Prng::new(config.seed ^ u64::from(config.replica).wrapping_mul(0x9e37_79b9)),
            machine,
            status: Status::Recovering,
            view: state.view,
            log_view: state.log_view,
            // A transferred log stays untrusted until a view settles it,
            // whatever the durability policy says of a log read from disk.
            trust: Trust::opened(recovered.trusted && !state.log_unsettled),
            persistence: Persistence::opened(state.view, commit),
            durable: state,
            faulty_ops: faulty,
            rewriting_below_window: BTreeSet::new(),
            log_start: recovered.log_start.max(1),
            journal,
            commit,
            commit_max: commit,
            write_next: log_head + 1,
            appended_from: log_head + 1,
            stored_hint: commit,
            client_table,
            cursors: CursorState::new(recovered.cursor_tail),
            progress: PrimaryProgress::default(),
            acked: 0,
            acked_repairing: false,
            view_change: ViewChangeProgress::default(),
            adoption: None,
            primary_op: 0,
            recovered_head: log_head,
            repair_due: false,
            repair_rounds: 0,
            deferred_cut: None,
            handover: None,
            probe: StartViewProbe::default(),
            votes: LeaveVotes::default(),
            abdicated: false,
            quiet: Default::default(),
            start_patience: START_PATIENCE_TIMEOUTS,
            timers: Timers::new(&config.timeouts),
            trusted_gate: true,
            #[cfg(feature = "mutations")]
            old_quorum_gate: true,
            config,
        }
    }

    /// The epoch started so far, the first view this replica belongs to,
    /// and a membership still to take up.
    fn place_at_open(&mut self) {
        // Started: the log view's epoch, or a later one a committed
        // `Reconfigure` moved to.
        self.started_epoch = self
            .journal
            .header(self.commit)
            .map_or(0, crate::reconfigure::epoch_after)
            .max(self.log_view.epoch);
        // A replica that joined by a view-change transition is no peer of
        // the old epoch's views: it starts at the first view it belongs to.
        let me = self.config.replica;
        if !self.peer_slots(self.view.epoch).contains(me) {
            let joined = self
                .memberships
                .iter()
                .map(|membership| membership.epoch)
                .filter(|epoch| *epoch > self.view.epoch)
                .find(|epoch| self.peer_slots(*epoch).contains(me));
            if let Some(epoch) = joined {
                self.set_view(ViewId::new(epoch, 0));
                self.durable.view = self.view;
            }
        }
        // A membership the driver knows beyond the log's epoch is a change
        // still to take up (the replica may have restarted in its middle).
        let newest = *self.memberships.newest();
        if newest.epoch > self.log_epoch() {
            self.target = Some(newest);
        }
    }

    /// The status the replica starts in: awaiting a transfer, serving at
    /// once (fresh, resumed in its view, or alone), or recovering.
    fn status_at_open(&mut self, recovered: &Recovered) {
        if recovered.awaiting_state_transfer {
            self.status = Status::AwaitingStateTransfer;
            self.trust.lost();
            self.durable.log_unsettled = true;
        } else if recovered.fresh && self.view == ViewId::ZERO {
            self.status = Status::Normal;
        } else if recovered.stopped_in_view && self.may_resume_in_view() {
            // It stopped serving in its view with everything it held on
            // disk: as after a pause, it serves in that view again. A
            // primary that is back finds its backups there; backups whose
            // primary is not back elect, one view change.
            self.status = Status::Normal;
        } else if self.alone() {
            // Alone, there is no one to adopt a view from and nothing to
            // distrust against: a lone replica serves on what it has.
            self.status = Status::Normal;
            self.log_view = self.view;
            self.trust.settled();
        }
        assert!(
            self.status != Status::Normal || self.log_view == self.view || self.alone(),
            "a replica serves at open only in the view its log settled in"
        );
    }
}

/// What an open worked out before the replica exists.
struct Opened {
    memberships: Memberships,
    state: DurableState,
    journal: Journal,
    commit: u64,
    faulty: BTreeSet<u64>,
}

/// The memberships the driver names, and those the log's `Reconfigure`
/// ops name after them.
fn memberships_at_open(config: &Config, recovered: &Recovered) -> Memberships {
    let mut memberships = Memberships::new(config.memberships[0]);
    let keep_from = recovered.state.log_view.epoch;
    for membership in &config.memberships[1..] {
        if let Err(conflict) = memberships.learn(*membership, keep_from) {
            panic!("the driver named two memberships for one epoch: {conflict:?}");
        }
    }
    // A `Reconfigure` op the log holds names the membership after it.
    for header in &recovered.headers {
        learn_from_header(&mut memberships, header, keep_from);
    }
    memberships
}

/// The ops found damaged, and those the replica may have acked but no
/// longer holds: they count as damaged.
fn faulty_at_open(recovered: &Recovered) -> BTreeSet<u64> {
    let mut faulty: BTreeSet<u64> = recovered.faulty.iter().copied().collect();
    faulty.extend(recovered.log_head + 1..=recovered.state.maybe_acked_op);
    faulty
}

/// The journal over the recovered headers (the damaged ones marked), then
/// the headers of the log adopted in the log view, which survive where a
/// crash took bodies: known, their bodies missing.
fn journal_at_open(
    recovered: &Recovered,
    faulty: &BTreeSet<u64>,
    commit: u64,
    memberships: &mut Memberships,
) -> Journal {
    let log_head = recovered.log_head;
    let first_faulty = faulty.iter().copied().filter(|op| *op <= log_head).min();
    let first_header = recovered
        .headers
        .first()
        .map_or(u64::MAX, |header| header.op.get());
    let base = first_header
        .min(commit + 1)
        .min(first_faulty.unwrap_or(u64::MAX))
        .max(1);
    let mut journal = Journal::starting_at(base);
    for header in &recovered.headers {
        let state = if faulty.contains(&header.op.get()) {
            SlotState::Faulty
        } else {
            SlotState::Durable
        };
        journal.set_header(*header, state);
    }
    let view_headers = &recovered.state.view_headers;
    let keep_from = recovered.state.log_view.epoch;
    for header in view_headers {
        learn_from_header(memberships, header, keep_from);
    }
    for header in view_headers.iter().filter(|header| header.op.get() >= base) {
        let op = header.op.get();
        if journal.header(op).is_some() {
            continue;
        }
        let slot_state = if op <= log_head {
            SlotState::Faulty
        } else {
            SlotState::Missing
        };
        journal.set_header(*header, slot_state);
    }
    assert!(
        journal.base() <= commit + 1,
        "journal lacks uncommitted ops"
    );
    journal
}

/// The view the replica starts in: past a history start a transfer brought,
/// at or after the first epoch its copy belongs to, and in an epoch the
/// driver names.
fn view_at_open(
    mut state: DurableState,
    memberships: &Memberships,
    joined_epoch: u32,
) -> DurableState {
    let persisted = state.view;
    if let Some(start) = state.latest_start().filter(|start| start.view > state.view) {
        // A state transfer brought the start of a view this replica never
        // entered: that view began, so every view below it is over. Taking
        // part in one could start it from a log that ends below this start.
        state.view = start.view;
    }
    let floor = first_epoch_of_copy(memberships, joined_epoch);
    if state.view.epoch < floor {
        // The copy was placed at a later epoch than its view names: it
        // starts at the first view it may belong to.
        state.view = ViewId::new(floor, 0);
    }
    if memberships.get(state.view.epoch).is_none() {
        // A replica that joined at a later epoch, or whose view's epoch the
        // driver no longer names, starts at the first view of the next epoch
        // it knows: raising the view only fences more.
        let later = memberships
            .iter()
            .map(|membership| membership.epoch)
            .find(|epoch| *epoch > state.view.epoch);
        if let Some(epoch) = later {
            state.view = ViewId::new(epoch, 0);
        }
    }
    assert!(
        state.view >= persisted,
        "opening in view {}, below the persisted {persisted}",
        state.view
    );
    state
}

/// The first epoch whose views a copy placed at `joined_epoch` belongs to:
/// that epoch, or an earlier one it was reached from in place (its views go
/// on into the joined epoch, and the copy is their peer). Before the first
/// view-change transition back, its slot may have named another replica.
fn first_epoch_of_copy(memberships: &Memberships, joined_epoch: u32) -> u32 {
    let mut first = joined_epoch;
    while let (Some(previous), Some(current)) = (
        first
            .checked_sub(1)
            .and_then(|epoch| memberships.get(epoch)),
        memberships.get(first),
    ) {
        if crate::epoch::transition(previous, current) != crate::epoch::Transition::InPlace {
            break;
        }
        first -= 1;
    }
    first
}
