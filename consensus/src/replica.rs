//! The `Replica`: its state, its construction from what storage recovered, and
//! the dispatch of every input to the module that owns the rule.
//!
//! Inputs: [`Replica::on_message`], [`Replica::on_request`], [`Replica::on_tick`],
//! [`Replica::on_write`], [`Replica::on_truncated`], [`Replica::on_state_persisted`],
//! [`Replica::on_cursors_written`], [`Replica::on_state_transfer_done`],
//! [`Replica::accept_loss`]. Each pushes effects into the caller's [`Effects`].

use std::collections::BTreeMap;

use bytes::Bytes;

use strand_prng::Prng;
use strand_wire::{
    CommandHeader, CommitFlags, Durability, Message, Msg, PrepareHeader, REPLICAS_MAX,
    RequestHeader, ViewId,
};

use crate::client_table::{ClientTable, restore_client_table, restore_client_table_from};
use crate::config::Config;
use crate::cursors::CursorState;
use crate::effects::{DropReason, Effect, Effects, Event, WaitReason};
use crate::epoch::{Membership, Memberships, SlotSet};
use crate::journal::{Journal, SlotState};
use crate::merge::{Canonical, DvcSummary};
use crate::state::{DurableState, HistoryStart, Recovered};
use crate::state_machine::StateMachine;
use crate::timers::Timers;

/// Primary timeouts a backup lets pass after it starts, before it votes to
/// leave the view, while its primary's node lives but the primary has not
/// spoken (a node opening thousands of groups takes seconds to reach this
/// one). A suspected primary node, a word from the primary, or a view
/// change ends the patience.
pub const START_PATIENCE_TIMEOUTS: u32 = 10;

/// Where a replica is in the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Serving in its view: the primary prepares, backups ack.
    Normal,
    /// Moving to a new view: acks nothing, collects or sends DoViewChanges.
    ViewChange,
    /// Restarted: asks for the current view before it serves.
    Recovering,
    /// Cannot use its log; waits for a state transfer.
    AwaitingStateTransfer,
    /// Removed from the group by a reassignment: it serves, acks and votes
    /// no more; its data stays until an operator drops it.
    Retired,
}

impl Status {
    /// The name used in status output.
    pub fn name(self) -> &'static str {
        match self {
            Status::Normal => "normal",
            Status::ViewChange => "view_change",
            Status::Recovering => "recovering",
            Status::AwaitingStateTransfer => "awaiting_state_transfer",
            Status::Retired => "retired",
        }
    }
}

/// A client request as the driver hands it over: the validated frame plus
/// what only the driver can know.
#[derive(Debug, Clone)]
pub struct ClientRequest {
    /// The request frame.
    pub request: Msg<RequestHeader>,
    /// Records in a produce's batch (0 for other operations); the driver has
    /// validated the batch.
    pub record_count: u32,
    /// The driver's wall clock, nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
}

/// Which stage of a storage write completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteStage {
    /// Handed to the WAL writer.
    Queued,
    /// Fsynced.
    Durable,
}

/// Progress of the view change this replica is in.
#[derive(Debug, Clone, Default)]
pub(crate) struct ViewChangeProgress {
    /// DoViewChanges received for the current view (candidate only).
    pub dvcs: BTreeMap<u8, DvcSummary>,
    /// The merge's result once ready (candidate only).
    pub canonical: Option<Canonical>,
    /// The operator accepted loss for this view.
    pub accept_loss: bool,
    /// The latest wait, for `attention`.
    pub waiting: Option<(WaitReason, u32)>,
    /// StartViewChange and DoViewChange were sent for the current view.
    pub announced: bool,
}

/// A StartView being adopted (or the merge result being installed): the log
/// must match `headers` before the replica persists the view and serves.
#[derive(Debug, Clone)]
pub(crate) struct Adoption {
    /// The view being adopted.
    pub view: ViewId,
    /// The canonical head op.
    pub op: u64,
    /// The canonical commit number (at least).
    pub commit: u64,
    /// The history the view's logs follow, its own start last (what the
    /// replica records as its history once the view is adopted).
    pub history: Vec<HistoryStart>,
    /// The replica canonical headers below the suffix are fetched from.
    pub source: u8,
    /// Lowest op whose canonical header has been matched against this
    /// replica's log; reconciliation is done once it reaches `commit + 1`
    /// (or the log's head is below it).
    pub verified_from: u64,
    /// A storage truncation is in flight (its target op).
    pub truncating: Option<u64>,
    /// The durable-state persist carrying the view was requested (its sequence).
    pub persisting: Option<u64>,
    /// The canonical suffix being adopted (recorded as the view headers).
    pub headers: Vec<PrepareHeader>,
    /// The boundary canonical headers were last asked for below.
    pub requested_upper: u64,
}

/// A cut that waits for a persist (`gate`): the ops it drops may have been
/// acked, and the persist records that before they leave storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeferredCut {
    /// The persist sequence it waits for.
    pub(crate) gate: u64,
    /// The op the record log keeps up to.
    pub(crate) op: u64,
    /// The cursor events the cursor log keeps, if it is cut too.
    pub(crate) cursor_tail: Option<u64>,
}

impl DeferredCut {
    /// This cut and another: the lower of each.
    fn merged(self, op: u64, cursor_tail: Option<u64>) -> DeferredCut {
        let cursor_tail = match (self.cursor_tail, cursor_tail) {
            (Some(earlier), Some(later)) => Some(earlier.min(later)),
            (earlier, later) => earlier.or(later),
        };
        DeferredCut {
            gate: self.gate,
            op: self.op.min(op),
            cursor_tail,
        }
    }
}

/// One replica of one VSR group: see the crate docs.
#[derive(Debug)]
pub struct Replica<S> {
    pub(crate) config: Config,
    /// Every membership this replica knows, by epoch.
    pub(crate) memberships: Memberships,
    /// The membership of the current view's epoch (kept at hand for the hot
    /// paths): who its primary is, who votes to leave it.
    pub(crate) view_membership: Membership,
    /// The newest membership the metadata plane assigned, while this
    /// replica's log has not reached its epoch.
    pub(crate) target: Option<Membership>,
    /// The highest epoch this replica has seen start (a view of it became
    /// normal, or its `Reconfigure` op committed).
    pub(crate) started_epoch: u32,
    pub(crate) prng: Prng,
    pub(crate) machine: S,

    pub(crate) status: Status,
    pub(crate) view: ViewId,
    pub(crate) log_view: ViewId,
    pub(crate) trusted: bool,
    /// The durable state last asked for, and the sequence numbers of asks.
    pub(crate) durable: DurableState,
    pub(crate) persist_requested: u64,
    pub(crate) persist_completed: u64,
    /// Persists in flight: (sequence, view, log view, commit) each carries.
    pub(crate) persists_in_flight: std::collections::VecDeque<(u64, ViewId, ViewId, u64)>,
    /// The view known to be on disk (a replica acks nothing in a view before).
    pub(crate) view_persisted: ViewId,

    pub(crate) journal: Journal,
    /// Ops whose stored entry was found damaged (or was dropped while
    /// damaged): they may have been acked, so they are never nacked; they
    /// leave the set once their canonical prepare is durable again.
    pub(crate) faulty_ops: std::collections::BTreeSet<u64>,
    /// Damaged committed ops below the journal's window whose canonical
    /// prepare was handed to storage and is not durable yet (the journal
    /// holds no slot for them to mark).
    pub(crate) rewriting_below_window: std::collections::BTreeSet<u64>,
    /// The first op storage still holds: retention dropped the ones below
    /// (all committed). Peers asking for them get a LogStart answer.
    pub(crate) log_start: u64,
    /// Ops up to here are applied.
    pub(crate) commit: u64,
    /// The highest commit number heard of.
    pub(crate) commit_max: u64,
    /// The next op to append to storage (all below were handed over).
    pub(crate) write_next: u64,
    /// Ops from here up to `write_next` were handed to storage as appends
    /// by this process (those below were read from disk at open, or
    /// installed): storage holds them whole by the time a later effect
    /// runs, even while they are still faulty here (not yet durable).
    pub(crate) appended_from: u64,
    /// Every op from the commit number up to this one was stored (per policy)
    /// when last looked; lowered by every truncation.
    pub(crate) stored_hint: u64,
    pub(crate) client_table: ClientTable,
    /// The commit the client table in `durable` was encoded at.
    pub(crate) client_table_persisted: u64,
    pub(crate) cursors: CursorState,

    /// Primary: the highest op each replica acked in this view.
    pub(crate) acks: [u64; REPLICAS_MAX as usize],
    /// Primary: each replica's ack when the prepare timeout last fired (or
    /// started). A backup whose ack moved since is taking the pipeline in,
    /// however slowly, and is sent nothing again (see
    /// `retransmit_prepares`).
    pub(crate) acks_at_retransmit: [u64; REPLICAS_MAX as usize],
    /// Backup: the highest op acked to the primary in this view.
    pub(crate) acked: u64,
    /// Backup: whether its latest ack in this view said it was repairing.
    pub(crate) acked_repairing: bool,
    pub(crate) view_change: ViewChangeProgress,
    pub(crate) adoption: Option<Adoption>,
    /// The log head recovered at open (what survived a crash).
    pub(crate) recovered_head: u64,
    /// A repair round is wanted at the next tick.
    pub(crate) repair_due: bool,
    /// Repair rounds so far (rotates which peer is asked).
    pub(crate) repair_rounds: u64,
    /// A cut waiting for the persist that records which of the ops it
    /// drops may have been acked.
    pub(crate) deferred_cut: Option<DeferredCut>,
    /// Primary: a handover waiting for the requests in flight to commit
    /// (no new one is admitted meanwhile).
    pub(crate) handover: Option<crate::handover::Drain>,
    /// Backup: the highest op the primary of this view is known to have.
    pub(crate) primary_op: u64,
    /// Nonce of this replica's outstanding RequestStartView (0: none).
    pub(crate) probe_nonce: u64,
    pub(crate) probes: u32,
    pub(crate) commit_persisted: u64,
    /// Replicas (bitset) that voted to leave the current view (StartViewChange).
    pub(crate) svc_votes: u32,
    /// This replica voted to leave the current view.
    pub(crate) suspecting: bool,
    /// A healthy replica heard of this higher view and asked its primary
    /// for the StartView; if none comes within a probe period it joins the
    /// view change (the view may need its DoViewChange to start at all).
    pub(crate) higher_view: Option<ViewId>,
    /// Primary: no ack arrived for too long with prepares in flight, so it
    /// stopped heartbeating to let the backups elect another primary.
    pub(crate) abdicated: bool,
    /// Quiet: idle, its timers stopped ([`crate::quiet`]).
    pub(crate) quiet: bool,
    /// Primary: backups (bitset) that sent a PrepareOk in this view.
    pub(crate) reported: crate::quiet::SlotBits,
    /// Primary: backups (bitset) whose latest PrepareOk said they are
    /// repairing ([`strand_wire::PrepareOkFlags::REPAIRING`]).
    pub(crate) repairing: crate::quiet::SlotBits,
    /// Primary: each backup's commit number, from its PrepareOk.
    pub(crate) backup_commits: [u64; REPLICAS_MAX as usize],
    /// Peers (bitset) the driver's node-level liveness suspects.
    pub(crate) suspected: crate::quiet::SlotBits,
    /// Primary timeouts a backup may still let pass, since it started,
    /// without a word from its primary while the primary's node lives (0
    /// once it heard the primary): see [`START_PATIENCE_TIMEOUTS`].
    pub(crate) start_patience: u32,

    pub(crate) timers: Timers,

    /// `mutations` only: the trusted-quorum gate.
    pub(crate) trusted_gate: bool,
    /// `mutations` only: the old membership's half of the joint quorum.
    #[cfg(feature = "mutations")]
    pub(crate) old_quorum_gate: bool,
}

impl<S: StateMachine> Replica<S> {
    /// Builds a replica from what storage recovered. Call [`Replica::start`] next.
    pub fn open(config: Config, recovered: Recovered, machine: S) -> Replica<S> {
        config.assert_valid();
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
        let log_head = recovered.log_head;
        let last_header = recovered.headers.last().map_or(0, |header| header.op.get());
        assert!(last_header <= log_head, "a header above the log head");
        let state = recovered.state.clone();
        assert!(state.log_view <= state.view, "{state:?}");
        // Ops up to the persisted commit were applied, as far as the log still
        // holds them readably: the commit number is the highest readable op
        // at or below it (a damaged file may have cut or garbled the rest).
        // Ops retention dropped were committed and applied, whatever is
        // readable above them.
        let retained_through = recovered.log_start.saturating_sub(1);
        let commit = recovered
            .headers
            .iter()
            .map(|header| header.op.get())
            .filter(|op| *op <= state.commit.min(log_head))
            .max()
            .unwrap_or(0)
            .max(retained_through);
        // Ops the replica may have acked but no longer holds count as damaged.
        let mut faulty: std::collections::BTreeSet<u64> =
            recovered.faulty.iter().copied().collect();
        faulty.extend(log_head + 1..=state.maybe_acked_op);
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
        // The headers of the log adopted in `log_view` survive even where a
        // crash took bodies: they are known, their bodies missing.
        for header in &state.view_headers {
            learn_from_header(&mut memberships, header, keep_from);
        }
        let base = journal.base();
        for header in state
            .view_headers
            .iter()
            .filter(|header| header.op.get() >= base)
        {
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
        let head = journal.head();
        assert!(
            journal.base() <= commit + 1,
            "journal lacks uncommitted ops"
        );
        let mut machine = machine;
        match journal.header(commit) {
            None if commit > 0 && commit == retained_through => {
                machine.restore_retained(recovered.log_start_offset)
            }
            header => machine.restore(header),
        }
        let client_table = restore_client_table(&state.client_table, &journal, commit);
        let timeouts = config.timeouts;
        let mut state = state;
        if let Some(start) = state.latest_start().filter(|start| start.view > state.view) {
            // A state transfer brought the start of a view this replica
            // never entered: that view began, so every view below it is
            // over. Taking part in one could start it from a log that ends
            // below this start.
            state.view = start.view;
        }
        let floor = first_epoch_of_copy(&memberships, recovered.joined_epoch);
        if state.view.epoch < floor {
            // The copy was placed at a later epoch than its view names: it
            // starts at the first view it may belong to.
            state.view = ViewId::new(floor, 0);
        }
        if memberships.get(state.view.epoch).is_none() {
            // A replica that joined at a later epoch, or whose view's epoch
            // the driver no longer names, starts at the first view of the
            // next epoch it knows: raising the view only fences more.
            let later = memberships
                .iter()
                .map(|membership| membership.epoch)
                .find(|epoch| *epoch > state.view.epoch);
            if let Some(epoch) = later {
                state.view = ViewId::new(epoch, 0);
            }
        }
        let view_membership = *memberships.get(state.view.epoch).unwrap_or_else(|| {
            panic!(
                "no membership for the persisted view {} (known: {memberships:?})",
                state.view
            )
        });
        let mut replica = Replica {
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
            trusted: recovered.trusted && !state.log_unsettled,
            view_persisted: state.view,
            commit_persisted: commit,
            durable: state,
            persist_requested: 0,
            persist_completed: 0,
            persists_in_flight: std::collections::VecDeque::new(),
            faulty_ops: faulty.clone(),
            rewriting_below_window: std::collections::BTreeSet::new(),
            log_start: recovered.log_start.max(1),
            journal,
            commit,
            commit_max: commit,
            write_next: log_head + 1,
            appended_from: log_head + 1,
            stored_hint: commit,
            client_table,
            client_table_persisted: 0,
            cursors: CursorState::new(recovered.cursor_tail),
            acks: [0; REPLICAS_MAX as usize],
            acks_at_retransmit: [0; REPLICAS_MAX as usize],
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
            probe_nonce: 0,
            probes: 0,
            svc_votes: 0,
            suspecting: false,
            higher_view: None,
            abdicated: false,
            quiet: false,
            reported: 0,
            repairing: 0,
            backup_commits: [0; REPLICAS_MAX as usize],
            suspected: 0,
            start_patience: START_PATIENCE_TIMEOUTS,
            timers: Timers::new(&timeouts),
            trusted_gate: true,
            #[cfg(feature = "mutations")]
            old_quorum_gate: true,
            config,
        };
        if faulty.iter().any(|op| *op > head) {
            replica.trusted = false;
        }
        // Started: the log view's epoch, or a later one a committed
        // `Reconfigure` moved to.
        replica.started_epoch = replica
            .journal
            .header(replica.commit)
            .map_or(0, crate::reconfigure::epoch_after);
        replica.started_epoch = replica.started_epoch.max(replica.log_view.epoch);
        // A replica that joined by a view-change transition is no peer of
        // the old epoch's views: it starts at the first view it belongs to.
        let me = replica.config.replica;
        if !replica.peer_slots(replica.view.epoch).contains(me) {
            let joined = replica
                .memberships
                .iter()
                .map(|membership| membership.epoch)
                .filter(|epoch| *epoch > replica.view.epoch)
                .find(|epoch| replica.peer_slots(*epoch).contains(me));
            if let Some(epoch) = joined {
                replica.set_view(ViewId::new(epoch, 0));
                replica.durable.view = replica.view;
            }
        }
        // A membership the driver knows beyond the log's epoch is a change
        // still to take up (the replica may have restarted in its middle).
        let newest = *replica.memberships.newest();
        if newest.epoch > replica.log_epoch() {
            replica.target = Some(newest);
        }
        if recovered.awaiting_state_transfer {
            replica.status = Status::AwaitingStateTransfer;
            replica.trusted = false;
            replica.durable.log_unsettled = true;
        } else if recovered.fresh && replica.view == ViewId::ZERO {
            replica.status = Status::Normal;
        } else if recovered.stopped_in_view && replica.may_resume_in_view() {
            // It stopped serving in its view with everything it held on
            // disk: as after a pause, it serves in that view again. A
            // primary that is back finds its backups there; backups whose
            // primary is not back elect, one view change.
            replica.status = Status::Normal;
        } else if replica.alone() {
            // Alone, there is no one to adopt a view from and nothing to
            // distrust against: a lone replica serves on what it has.
            replica.status = Status::Normal;
            replica.log_view = replica.view;
            replica.trusted = true;
        }
        replica
    }

    /// Whether a clean stop now may be marked as one taken while serving in
    /// this view, so that the replica resumes there: it is Normal (one that
    /// recovers from a crash may have forgotten prepares it sent as a
    /// primary; one in a view change has promised a later view), trusted,
    /// and every prepare it holds is handed to storage (the driver then
    /// syncs them all before the mark).
    pub fn resumable_in_view(&self) -> bool {
        self.status == Status::Normal
            && self.trusted
            && self.deferred_cut.is_none()
            && self.write_next > self.journal.head()
    }

    /// At open, after a stop marked [`Replica::resumable_in_view`]: the log
    /// read back must still be whole (storage found no damage since), be
    /// settled in the view, and the replica a member of it.
    fn may_resume_in_view(&self) -> bool {
        self.trusted
            && self.faulty_ops.is_empty()
            && self.log_view == self.view
            && self.view_membership.slots.contains(self.config.replica)
    }

    /// Whether a backup that has not heard its primary since it started
    /// gives it another primary timeout: the primary's node lives (the
    /// driver does not suspect it), so its replica is most likely still
    /// opening among thousands of groups, and a view change now would only
    /// churn.
    fn waits_for_primary_to_start(&self) -> bool {
        let primary_bit: crate::quiet::SlotBits = 1 << self.primary_index();
        self.start_patience > 0 && self.suspected & primary_bit == 0 && !self.is_primary()
    }

    /// Starts the replica's timers and first messages.
    pub fn start(&mut self, effects: &mut Effects) {
        self.timers.commit_persist.start();
        if !self.trusted {
            effects.event(Event::UntrustedLog { untrusted: true });
        }
        match self.status {
            Status::Normal => self.enter_normal(effects),
            Status::Recovering => self.start_probing(effects),
            Status::AwaitingStateTransfer | Status::Retired => {}
            Status::ViewChange => unreachable!("a replica never opens in a view change"),
        }
        self.maybe_seal_for_target(effects);
    }

    // ----- accessors ---------------------------------------------------------

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
        self.trusted
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
        &self.acks
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
        assert!(
            self.view_persisted <= self.view,
            "persisted view {} past view {}",
            self.view_persisted,
            self.view
        );
        assert!(
            self.commit <= self.commit_max,
            "commit {} past the highest heard of, {}",
            self.commit,
            self.commit_max
        );
        assert!(self.log_start >= 1, "the log starts at op 1 or later");
        assert!(
            self.persist_completed <= self.persist_requested,
            "persist {} completed before it was asked for ({})",
            self.persist_completed,
            self.persist_requested
        );
        let mut sequence = self.persist_completed;
        for (in_flight, ..) in &self.persists_in_flight {
            assert!(
                *in_flight > sequence && *in_flight <= self.persist_requested,
                "persists in flight out of order: {in_flight} after {sequence}"
            );
            sequence = *in_flight;
        }
        assert!(
            self.svc_votes >> REPLICAS_MAX == 0,
            "a view change vote from a slot past the last"
        );
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

    // ----- inputs --------------------------------------------------------------

    /// A frame from a peer replica of this group.
    pub fn on_message(&mut self, message: Message, effects: &mut Effects) {
        if self.status == Status::Retired {
            effects.event(Event::Dropped {
                reason: DropReason::WrongStatus,
            });
            return;
        }
        if let Err(reason) = self.check_envelope(&message) {
            effects.event(Event::Dropped { reason });
            return;
        }
        self.wake_for_message(&message, effects);
        match message {
            Message::Prepare(prepare) => self.on_prepare(prepare, effects),
            Message::PrepareOk(ok) => self.on_prepare_ok(ok.header(), effects),
            Message::Commit(commit) => self.on_commit_heartbeat(commit.header(), effects),
            Message::StartViewChange(svc) => self.on_start_view_change(svc.header(), effects),
            Message::DoViewChange(dvc) => self.on_do_view_change(dvc, effects),
            Message::StartView(start) => self.on_start_view(start, effects),
            Message::RequestStartView(request) => {
                self.on_request_start_view(request.header(), effects)
            }
            Message::RequestPrepare(request) => self.on_request_prepare(request.header(), effects),
            Message::RequestHeaders(request) => self.on_request_headers(request.header(), effects),
            Message::Headers(headers) => self.on_headers(headers, effects),
            Message::Cursors(cursors) => self.on_cursors(cursors, effects),
            Message::LogStart(notice) => self.on_log_start(notice.header(), effects),
            Message::Ping(_)
            | Message::Pong(_)
            | Message::Request(_)
            | Message::Reply(_)
            | Message::RequestStateTransfer(_)
            | Message::StateTransferChunk(_) => {
                effects.event(Event::Dropped {
                    reason: DropReason::WrongStatus,
                });
            }
        }
    }

    /// One tick of time.
    pub fn on_tick(&mut self, effects: &mut Effects) {
        if self.status == Status::Retired || self.is_quiet() {
            return;
        }
        // Quiet ends with Normal status, whichever way it was left.
        self.quiet = false;
        for timeout in self.timers.all_mut() {
            timeout.tick();
        }
        if self.timers.heartbeat.fired() {
            self.timers.heartbeat.start();
            if self.may_quiesce_primary() {
                self.send_heartbeat_flagged(CommitFlags::QUIESCE, effects);
                self.quiesce();
                return;
            }
            self.send_heartbeat(effects);
        }
        if self.timers.primary.fired() {
            if self.waits_for_primary_to_start() {
                self.start_patience -= 1;
                self.timers.primary.start_jittered(&mut self.prng);
            } else {
                self.timers.primary.stop();
                self.vote_leave_view(crate::effects::LeaveReason::PrimarySilent, effects);
            }
        }
        if self.timers.progress.fired() {
            self.timers.progress.stop();
            if self.is_serving_primary() && self.journal.head() > self.commit {
                // Stalled: stop heartbeating and vote to leave the view too.
                self.abdicated = true;
                self.vote_leave_view(crate::effects::LeaveReason::Stalled, effects);
            }
        }
        if self.timers.prepare.fired() {
            self.timers.prepare.start();
            self.retransmit_prepares(effects);
        }
        self.tick_handover(effects);
        if self.timers.view_change.fired() {
            self.on_view_change_timeout(effects);
        }
        if self.timers.view_change_retransmit.fired() {
            self.timers.view_change_retransmit.start();
            self.retransmit_view_change(effects);
        }
        if self.timers.probe.fired() {
            self.on_probe_timeout(effects);
        }
        if self.timers.repair.fired() || self.repair_due {
            self.timers.repair.start();
            self.repair_due = false;
            self.repair(effects);
        }
        if self.timers.commit_persist.fired() {
            self.timers.commit_persist.start();
            if self.commit > self.commit_persisted && self.status == Status::Normal {
                self.durable.commit = self.commit;
                self.request_persist(effects);
            }
        }
    }

    /// Ticks until the next one that may do anything, counting that one
    /// (1: the next tick); `None` while no tick would do anything (quiet,
    /// retired, or no timer running). A driver that keeps deadlines ticks
    /// the replica only then, and tells it of the ticks it skipped
    /// ([`Replica::skip_ticks`]) before any other input.
    pub fn ticks_until_due(&self) -> Option<u64> {
        if self.status == Status::Retired || self.is_quiet() {
            return None;
        }
        // Work that runs on every tick, whatever the timers say.
        if self.quiet || self.repair_due || self.handover.is_some() {
            return Some(1);
        }
        self.timers
            .all()
            .iter()
            .filter_map(|timeout| timeout.ticks_left())
            .min()
            .map(|left| left.max(1))
    }

    /// `ticks` ticks passed in which none was due ([`Replica::ticks_until_due`]):
    /// the same as that many calls of [`Replica::on_tick`], each of which
    /// would have done nothing but count. Panics if one was due.
    pub fn skip_ticks(&mut self, ticks: u64) {
        if ticks == 0 || self.status == Status::Retired || self.is_quiet() {
            return;
        }
        assert!(
            self.ticks_until_due().is_none_or(|due| ticks < due),
            "skipping {ticks} ticks past one that is due"
        );
        for timeout in self.timers.all_mut() {
            timeout.skip(ticks);
        }
    }

    /// Storage took a write of `op` (whose prepare has `checksum`) to `stage`.
    pub fn on_write(&mut self, op: u64, checksum: u32, stage: WriteStage, effects: &mut Effects) {
        let keep_body = self.is_primary() || self.machine.needs_bodies();
        let Some(state) = self.journal.update(op, |slot| {
            if slot.header.checksum() != checksum {
                return None; // a write truncated away and replaced since
            }
            if slot.state == SlotState::Missing {
                // A write truncated away since (the same prepare, its slot
                // waiting to be written again): storage no longer holds it.
                return None;
            }
            slot.state = match (slot.state, stage) {
                (SlotState::Durable, _) => SlotState::Durable,
                (_, WriteStage::Durable) => SlotState::Durable,
                (SlotState::Writing | SlotState::Faulty, WriteStage::Queued) => SlotState::Queued,
                (state, WriteStage::Queued) => state,
            };
            if !keep_body && slot.state != SlotState::Writing {
                slot.prepare = None;
            }
            Some(slot.state)
        }) else {
            if stage == WriteStage::Durable && self.rewriting_below_window.remove(&op) {
                self.faulty_ops.remove(&op);
                self.on_storage_progress(effects);
            }
            return;
        };
        let Some(state) = state else {
            return;
        };
        if state == SlotState::Durable {
            // Repaired: it is an ordinary stored op again.
            self.faulty_ops.remove(&op);
        }
        self.on_storage_progress(effects);
    }

    /// Storage finished truncating the log to `op`.
    pub fn on_truncated(&mut self, op: u64, effects: &mut Effects) {
        if let Some(adoption) = &mut self.adoption {
            if adoption.truncating == Some(op) {
                adoption.truncating = None;
            }
        }
        self.advance_adoption(effects);
    }

    /// Storage persisted the durable state of request `sequence`.
    pub fn on_state_persisted(&mut self, sequence: u64, effects: &mut Effects) {
        assert!(
            sequence <= self.persist_requested,
            "persisted a state never asked for"
        );
        if sequence <= self.persist_completed {
            return;
        }
        self.persist_completed = sequence;
        while let Some(&(pending, view, log_view, commit)) = self.persists_in_flight.front() {
            if pending > sequence {
                break;
            }
            self.persists_in_flight.pop_front();
            self.view_persisted = self.view_persisted.max(view);
            self.commit_persisted = self.commit_persisted.max(commit);
            // The log on disk is settled in the persisted log view, even if the
            // adoption that asked for it was overtaken by a newer view change.
            self.log_view = self.log_view.max(log_view);
        }
        if let Some(deferred) = self.deferred_cut {
            if deferred.gate <= sequence {
                self.deferred_cut = None;
                effects.push(Effect::Cut {
                    op: deferred.op,
                    cursor_tail: deferred.cursor_tail,
                });
                self.flush_writes(effects);
            }
        }
        self.on_persisted(effects);
    }

    /// The cursor log reached `cursor_end` events at `stage`.
    pub fn on_cursors_written(
        &mut self,
        cursor_end: u64,
        stage: WriteStage,
        effects: &mut Effects,
    ) {
        self.cursors_written(cursor_end, stage, effects);
    }

    /// A state transfer finished: the log now ends at `head` (committed), the
    /// cursor log at `cursor_tail`; `None` when the source had committed
    /// nothing (the log is empty: every op is repaired from the view's
    /// primary once the replica adopts a view). `recent` are the installed
    /// log's last headers up to `head`, ascending (as storage reports them at
    /// open), and `client_table` the source's client table as the transfer
    /// carried it (empty when it carried none): the table is restored from
    /// them, so a retry of a request the group committed before the transfer
    /// is answered, never committed twice, should this replica lead.
    /// `history_starts` are the source's: its logs are this replica's now,
    /// and so is the history they follow.
    pub fn on_state_transfer_done(
        &mut self,
        head: Option<PrepareHeader>,
        cursor_tail: u64,
        recent: &[PrepareHeader],
        client_table: &[u8],
        history_starts: &[HistoryStart],
        effects: &mut Effects,
    ) {
        assert_eq!(
            self.status,
            Status::AwaitingStateTransfer,
            "no state transfer was awaited"
        );
        let op = head.map_or(0, |head| head.op.get());
        match head {
            Some(head) => {
                let keep_from = self.view.epoch.min(self.log_view.epoch);
                learn_from_header(&mut self.memberships, &head, keep_from);
                self.journal.reset_at(head);
            }
            None => self.journal = Journal::new(),
        }
        self.machine.restore(head.as_ref());
        // The damaged entries were the old log's: the installed one was
        // verified whole.
        self.faulty_ops.clear();
        self.rewriting_below_window.clear();
        self.stored_hint = op;
        self.commit = op;
        self.commit_max = self.commit_max.max(op);
        // The install persisted this commit with the log: a later persist
        // must not lower it (below a dropped head, no export names its frontier).
        self.durable.commit = op;
        self.commit_persisted = op;
        self.write_next = op + 1;
        self.appended_from = op + 1;
        self.cursors = CursorState::new(cursor_tail);
        self.durable.take_transferred_history(history_starts);
        if let Some(start) = self
            .durable
            .latest_start()
            .filter(|start| start.view > self.view)
            .filter(|start| self.memberships.get(start.view.epoch).is_some())
        {
            // The transfer brought the start of a view this replica never
            // entered: that view began, so every view below it is over (as
            // at open). Adopting one of them would take an older history.
            self.set_view(start.view);
            self.durable.view = start.view;
        }
        // The installed log is a committed prefix that no view vouches for
        // (it may end below the latest history start, which this replica
        // does not know): untrusted, across restarts, until a view is adopted.
        self.durable.log_unsettled = true;
        self.client_table = restore_client_table_from(client_table, recent, op);
        self.durable.client_table = Bytes::new();
        self.status = Status::Recovering;
        self.start_probing(effects);
    }

    /// An operator lets this replica's group go on with the logs at hand:
    /// the view change it is candidate of (or, if it is not, one to the next
    /// view it is primary of) starts from the DoViewChanges it has, without
    /// the trusted quorum and history-start waits. May lose confirmed records;
    /// the view's history start records that loss was accepted. Returns false
    /// when the group is not stuck (this replica serves, or follows a primary).
    pub fn accept_loss(&mut self, effects: &mut Effects) -> bool {
        if matches!(self.status, Status::AwaitingStateTransfer | Status::Retired) {
            return false;
        }
        self.wake(effects);
        let candidate = self.status == Status::ViewChange && self.is_primary();
        if self.view_change.canonical.is_some()
            || (self.status == Status::Normal && !self.suspecting)
        {
            return false;
        }
        let next_epoch = self.next_view().epoch;
        let leads_some_view = self
            .memberships
            .get(next_epoch)
            .is_some_and(|membership| membership.slots.contains(self.config.replica));
        if !candidate && !leads_some_view {
            return false; // not a member of the epoch the group moves in
        }
        if !candidate {
            let mut view = self.next_view();
            while self.primary_of(view) != self.config.replica {
                view = view.next();
            }
            // The logs at hand are the DoViewChanges of the stuck view: the
            // merge of the new one starts from them (a reporter's DoViewChange
            // for the new view replaces its own), never from this log alone.
            let at_hand = std::mem::take(&mut self.view_change.dvcs);
            self.start_view_change(view, effects);
            self.view_change.dvcs = at_hand;
        }
        self.view_change.accept_loss = true;
        self.try_merge(effects);
        true
    }

    // ----- shared helpers ------------------------------------------------------

    fn check_envelope(&self, message: &Message) -> Result<(), DropReason> {
        let prefix = message.prefix();
        if prefix.cluster.get() != self.config.cluster {
            return Err(DropReason::WrongCluster);
        }
        if prefix.group.get() != self.config.group {
            return Err(DropReason::WrongGroup);
        }
        let epoch = prefix.epoch.get();
        if matches!(message, Message::Prepare(_)) && prefix.view_id() < self.view {
            // A prepare of an older view, relayed by repair: its prefix names
            // the view and primary that made it (perhaps of an epoch this
            // replica has forgotten or never knew); its checksum chain, not
            // its author, vouches for it.
            return Ok(());
        }
        if self.memberships.get(epoch).is_none() {
            return Err(DropReason::UnknownEpoch);
        }
        let from_self_allowed = matches!(message, Message::Prepare(_) | Message::Headers(_));
        if !self.peer_slots(epoch).contains(prefix.replica) {
            return Err(DropReason::ReplicaOutOfRange);
        }
        if prefix.replica == self.config.replica && !from_self_allowed {
            return Err(DropReason::Invalid);
        }
        Ok(())
    }

    /// A header prefix for a frame from this replica in the current view.
    pub(crate) fn new_header<H: CommandHeader>(&self) -> H {
        H::new(
            self.config.cluster,
            self.config.group,
            self.view,
            self.config.replica,
        )
    }

    /// Sends `message` to replica `to`: a peer, or a replica of an older
    /// epoch this one answers (a removed replica learns so from the reply).
    pub(crate) fn send(&self, to: u8, message: Message, effects: &mut Effects) {
        assert!(
            to != self.config.replica && self.memberships.slots_from(0).contains(to),
            "replica {to} is no replica of any known membership"
        );
        effects.push(Effect::Send { to, message });
    }

    /// Sends `message` to every other replica.
    pub(crate) fn broadcast(&self, message: Message, effects: &mut Effects) {
        for to in self.others() {
            effects.push(Effect::Send {
                to,
                message: message.clone(),
            });
        }
    }

    /// Every slot this replica talks to in its view: the members of the
    /// view's epoch and of any later one it knows (replicas joining by an
    /// in-place change hear the primary before their epoch starts), but
    /// not itself.
    pub(crate) fn others(&self) -> impl Iterator<Item = u8> + use<S> {
        let me = self.config.replica;
        self.peer_slots(self.view.epoch)
            .iter()
            .filter(move |replica| *replica != me)
    }

    /// Whether `slot` is one of [`Replica::others`].
    pub(crate) fn is_peer(&self, slot: u8) -> bool {
        slot != self.config.replica && self.peer_slots(self.view.epoch).contains(slot)
    }

    /// Every slot a replica in a view of `epoch` talks to: the members of
    /// that epoch and of the later ones reached from it in place (they join
    /// its views before their epoch starts), and, until `epoch` has started
    /// here, the members of the epoch before (a view change into a new epoch
    /// hears the old members first; afterwards they are fenced). Members
    /// that only a view-change transition adds are no peers of the old
    /// epoch's views: they join at the new epoch's first view.
    #[inline]
    pub(crate) fn peer_slots(&self, epoch: u32) -> SlotSet {
        let Some(mut from) = self.memberships.get(epoch).copied() else {
            return self.memberships.slots_from(epoch);
        };
        let mut slots = from.slots;
        while let Some(next) = self.memberships.get(from.epoch + 1) {
            if crate::epoch::transition(&from, next) != crate::epoch::Transition::InPlace {
                break;
            }
            slots = slots.union(next.slots);
            from = *next;
        }
        if epoch <= self.started_epoch {
            return slots;
        }
        epoch
            .checked_sub(1)
            .and_then(|previous| self.memberships.get(previous))
            .map_or(slots, |previous| slots.union(previous.slots))
    }

    /// Whether this replica, opening, may serve its view on its log as it
    /// is: its log was settled in that view, and no other replica takes
    /// part in the view or in the epoch its log reached. A view outlives an
    /// in-place change, so replicas the change added hold (and may have
    /// acked) the view's later prepares; a restarted primary that resumed
    /// the view without a view change would prepare other ops at the op
    /// numbers it lost. A transferred log no view vouches for yet is never
    /// served alone either: its view and slot may predate this replica.
    pub(crate) fn alone(&self) -> bool {
        let me = SlotSet::EMPTY.with(self.config.replica);
        self.log_view == self.view
            && !self.durable.log_unsettled
            && self.peer_slots(self.view.epoch) == me
            && self.peer_slots(self.log_epoch()) == me
    }

    /// Persists the commit number now instead of on its timer, when it is
    /// ahead of the persisted one and no superblock write is in flight:
    /// retention drops nothing above the persisted commit, so a driver
    /// whose retention waits on it asks (at most once per write); and a
    /// quiet replica's timer does not run, so its driver asks on its
    /// periodic storage check. Quiet stays quiet.
    pub fn persist_commit_now(&mut self, effects: &mut Effects) {
        if self.status == Status::Normal
            && self.commit > self.commit_persisted
            && self.persists_in_flight.is_empty()
        {
            self.durable.commit = self.commit;
            self.request_persist(effects);
        }
    }

    /// Asks for the durable state to be persisted (coalescing: only the
    /// newest matters), with the client table as of the commit.
    pub(crate) fn request_persist(&mut self, effects: &mut Effects) -> u64 {
        self.persist_requested += 1;
        self.persists_in_flight.push_back((
            self.persist_requested,
            self.durable.view,
            self.durable.log_view,
            self.durable.commit,
        ));
        if self.durable.client_table.is_empty() || self.client_table_persisted != self.commit {
            self.durable.client_table = Bytes::from(self.client_table.encode());
            self.client_table_persisted = self.commit;
        }
        effects.push(Effect::PersistState {
            state: self.durable.clone(),
            sequence: self.persist_requested,
        });
        self.persist_requested
    }

    /// Whether acks wait for durability under this group's policy.
    pub(crate) fn ack_needs_durable(&self) -> bool {
        self.config.durability == Durability::Persisted
    }

    /// The highest op such that every op from the commit number up to it is
    /// stored (per the durability policy): what this replica can ack.
    pub(crate) fn stored_through(&mut self) -> u64 {
        let durable = self.ack_needs_durable();
        let mut op = self.commit.max(self.stored_hint.min(self.journal.head()));
        while let Some(slot) = self.journal.get(op + 1) {
            if !slot.state.stored(durable) {
                break;
            }
            op += 1;
        }
        self.stored_hint = op;
        op
    }

    /// Hands every slot that can be appended in order to storage, then
    /// rewrites in place every faulty slot whose prepare has arrived.
    pub(crate) fn flush_writes(&mut self, effects: &mut Effects) {
        if self.deferred_cut.is_some() {
            return; // appends follow the cut they depend on
        }
        loop {
            let op = self.write_next;
            let writing = self.journal.update(op, |slot| {
                let (SlotState::Missing, Some(prepare)) = (slot.state, &slot.prepare) else {
                    return None;
                };
                let prepare = prepare.clone();
                slot.state = SlotState::Writing;
                Some(prepare)
            });
            let Some(Some(prepare)) = writing else {
                break;
            };
            effects.push(Effect::WritePrepare { prepare });
            self.write_next += 1;
        }
        if self.faulty_ops.is_empty() {
            return;
        }
        // Damaged entries below the append point are rewritten in place once
        // their prepare has arrived (they leave `faulty_ops` once durable).
        let faulty: Vec<u64> = self
            .faulty_ops
            .iter()
            .copied()
            .filter(|op| *op < self.write_next)
            .collect();
        for op in faulty {
            let rewriting = self.journal.update(op, |slot| {
                if slot.state != SlotState::Faulty {
                    return None;
                }
                let prepare = slot.prepare.clone()?;
                slot.state = SlotState::Writing;
                Some(prepare)
            });
            let Some(Some(prepare)) = rewriting else {
                continue;
            };
            effects.push(Effect::WritePrepare { prepare });
        }
    }

    /// Where storage can cut to keep `op`: `op` itself unless it and the
    /// op after it are both damaged; then below their damaged run, down to
    /// the commit at most.
    fn storage_cut_point(&self, op: u64) -> u64 {
        let mut cut = op;
        while cut > self.commit && self.damaged_in_storage(cut) && self.damaged_in_storage(cut + 1)
        {
            cut -= 1;
        }
        cut
    }

    /// Whether storage may still hold `op` damaged when a cut asked for now
    /// runs: it is faulty, and not one this process appended. Storage runs
    /// effects in order, so an op handed to it as an append (a tail the
    /// disk lost, written again) is whole by then, though it stays faulty
    /// here until durable (a failed write fails the log, which refuses the
    /// cut); cutting below it would drop an op storage holds readably, and
    /// maybe committed. A rewrite in place is not: storage may hold it
    /// until the damaged ops before it are rewritten.
    fn damaged_in_storage(&self, op: u64) -> bool {
        self.faulty_ops.contains(&op) && !(self.appended_from..self.write_next).contains(&op)
    }

    /// Removes every op above `op` from the journal and from storage.
    pub(crate) fn truncate_log(&mut self, op: u64, effects: &mut Effects) {
        self.cut_log(op, None, effects);
    }

    /// Reference A's cut, as a replica adopts a view: the record log down to
    /// `op` (the view's head, or the commit if higher) and, for a backup whose
    /// log was settled in an older view, the cursor log down to the view's
    /// history start. One `Cut` effect carries both, so storage executes the
    /// rule in one place (the partition's `cut`).
    pub(crate) fn cut_to_view(&mut self, op: u64, cursor_tail: Option<u64>, effects: &mut Effects) {
        let cursor_tail = cursor_tail.filter(|tail| self.cursors.tail > *tail);
        if let Some(tail) = cursor_tail {
            self.cursors = CursorState::new(tail);
        }
        if self.journal.head() > op || self.write_next > op + 1 {
            self.cut_log(op, cursor_tail, effects);
        } else {
            // Damage storage reported above its own head (ops a crash took)
            // is outside the view too: those ops are not repaired, and a new
            // op at that number is not a rewrite.
            self.faulty_ops.retain(|faulty| *faulty <= op);
            self.cut_cursors_only(cursor_tail, effects);
        }
    }

    /// Removes every op above `op` from the journal and from storage, and
    /// the cursor events from `cursor_tail` if given.
    fn cut_log(&mut self, op: u64, cursor_tail: Option<u64>, effects: &mut Effects) {
        // Where storage can cut depends on what is damaged above `op` too.
        let cut = self.storage_cut_point(op);
        self.journal.truncate(op);
        // Ops cut from the journal were divergent, not damaged canonical ones.
        self.faulty_ops.retain(|faulty| *faulty <= op);
        self.durable.maybe_acked_op = self.durable.maybe_acked_op.min(op.max(self.commit));
        self.truncate_storage_at(op, cut, cursor_tail, effects);
    }

    /// Removes every op above `op` from storage; their journal slots (if any
    /// stay) go back to Missing, to be written again. Storage cannot cut
    /// between two damaged entries (it may not know where the second one
    /// starts), so the cut goes below the damaged run that holds `op`, never
    /// below the commit: the run's ops are written again, as appends.
    pub(crate) fn truncate_storage(&mut self, op: u64, effects: &mut Effects) {
        let cut = self.storage_cut_point(op);
        self.truncate_storage_at(op, cut, None, effects);
    }

    /// [`Replica::truncate_storage`] with the cut storage can make (`cut`,
    /// at most `op`) already found, and the cursor log's cut if any.
    fn truncate_storage_at(
        &mut self,
        op: u64,
        cut: u64,
        cursor_tail: Option<u64>,
        effects: &mut Effects,
    ) {
        assert!(
            op >= self.commit,
            "truncating committed op {} (commit {})",
            op + 1,
            self.commit
        );
        assert!(cut <= op && cut >= self.commit);
        if self.write_next <= op + 1 {
            self.cut_cursors_only(cursor_tail, effects);
            return;
        }
        let op = cut;
        let ops: Vec<u64> = self
            .journal
            .slots_from(op + 1)
            .map(|(slot_op, _)| slot_op)
            .collect();
        let mut dropped_max = self
            .faulty_ops
            .range(op + 1..self.write_next)
            .next_back()
            .copied();
        for slot_op in ops {
            // A canonical op dropped only because storage is sequential may
            // have been acked: it must not be nacked until it is durable
            // again.
            let was_stored = self.journal.update(slot_op, |slot| {
                let was_stored = slot.state.stored(false) || slot.state == SlotState::Faulty;
                slot.state = SlotState::Missing;
                was_stored
            });
            if was_stored == Some(true) {
                self.faulty_ops.insert(slot_op);
                dropped_max = dropped_max.max(Some(slot_op));
            }
        }
        self.write_next = op + 1;
        self.appended_from = self.appended_from.min(op + 1);
        self.stored_hint = self.stored_hint.min(op);
        // That knowledge must reach the disk before the ops leave it.
        if let Some(dropped_max) = dropped_max.filter(|max| *max > self.durable.maybe_acked_op) {
            self.durable.maybe_acked_op = dropped_max;
            let gate = self.request_persist(effects);
            let deferred = match self.deferred_cut {
                Some(earlier) => earlier.merged(op, cursor_tail),
                None => DeferredCut {
                    gate,
                    op,
                    cursor_tail,
                },
            };
            self.deferred_cut = Some(DeferredCut { gate, ..deferred });
            self.await_cut(deferred.op);
            return;
        }
        self.push_cut(op, cursor_tail, effects);
    }

    /// A cut of the cursor log alone (if asked for): the record log keeps
    /// everything handed to storage.
    fn cut_cursors_only(&mut self, cursor_tail: Option<u64>, effects: &mut Effects) {
        if cursor_tail.is_some() {
            let kept = self.write_next.saturating_sub(1).max(self.commit);
            self.push_cut(kept, cursor_tail, effects);
        }
    }

    /// Asks storage for a cut, or folds it into the one waiting for a persist.
    fn push_cut(&mut self, op: u64, cursor_tail: Option<u64>, effects: &mut Effects) {
        match self.deferred_cut {
            Some(earlier) => {
                let merged = earlier.merged(op, cursor_tail);
                self.deferred_cut = Some(merged);
                self.await_cut(merged.op);
            }
            None => {
                if self.write_next > op {
                    // Records go: an adoption waits until they have.
                    self.await_cut(op);
                }
                effects.push(Effect::Cut { op, cursor_tail });
            }
        }
    }

    /// An adoption in progress continues only once storage reports the cut
    /// at `op` (`on_truncated`).
    fn await_cut(&mut self, op: u64) {
        if let Some(adoption) = &mut self.adoption {
            adoption.truncating = Some(op);
        }
    }

    /// Trims committed slots beyond what the journal keeps in memory, and
    /// every slot below the log start (storage dropped those ops: no gap
    /// there is worth repairing).
    pub(crate) fn trim_journal(&mut self) {
        let keep = crate::journal::JOURNAL_COMMITTED_KEEP;
        self.journal.trim_below(
            self.commit
                .saturating_sub(keep)
                .max(self.log_start.min(self.commit + 1))
                .min(self.write_next.saturating_sub(1)),
        );
    }

    /// Stores a body for `op` if its header matches and storage lacks it.
    pub(crate) fn store_body(&mut self, prepare: &Msg<PrepareHeader>) -> bool {
        let op = prepare.header().op.get();
        self.journal
            .update(op, |slot| {
                if slot.header.checksum() != prepare.checksum() || !slot.lacks_body() {
                    return false;
                }
                slot.prepare = Some(prepare.clone());
                true
            })
            .unwrap_or(false)
    }
}

/// Remembers the membership a `Reconfigure` header names (a header that
/// contradicts a known one is left out: the driver's catalog is the authority,
/// and the op cannot commit under two memberships).
pub(crate) fn learn_from_header(
    memberships: &mut Memberships,
    header: &PrepareHeader,
    keep_from: u32,
) -> bool {
    let Some((epoch, slots, confirm)) = header.next_membership() else {
        return false;
    };
    let slots = SlotSet::from_bits(slots);
    if slots.is_empty() {
        return false;
    }
    memberships
        .learn(Membership::new(epoch, slots, confirm), keep_from)
        .unwrap_or(false)
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
