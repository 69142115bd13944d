//! Normal operation: a request becomes a prepare, backups append and ack,
//! the primary commits on W copies in op order, heartbeats carry the commit.

use bytes::Bytes;
use strand_wire::ops::ErrorBody;
use strand_wire::{
    CommandHeader, CommitFlags, CommitHeader, Message, Msg, Operation, PrepareHeader,
    PrepareOkFlags, PrepareOkHeader, ReplyHeader, ResultCode, Route,
};

use crate::client_table::Lookup;
use crate::effects::{DropReason, Effect, Effects, Event};
use crate::journal::{JOURNAL_SLOTS_MAX, SlotState};
use crate::replica::{ClientRequest, Replica, Status};
use crate::state_machine::StateMachine;

/// Most prepares the primary has in flight (prepared, not committed). At the
/// bound a new request is answered `Busy` (retry with the same request
/// number); nothing is dropped silently.
pub const PIPELINE_PREPARES_MAX: u64 = 64;

const _: () = assert!(PIPELINE_PREPARES_MAX <= strand_wire::DVC_SUFFIX_HEADERS_MAX as u64 / 2);

impl<S: StateMachine> Replica<S> {
    /// A client request for this group.
    pub fn on_request(&mut self, request: ClientRequest, effects: &mut Effects) {
        let header = *request.request.header();
        if self.is_quiet() && self.would_prepare(&header, request.record_count) {
            self.wake_to_prepare(effects);
        } else {
            self.wake(effects);
        }
        if let Err(error) = self.admit_request(&header, request.record_count) {
            self.reply_error(&header, error, effects);
            return;
        }
        let client = header.client.get();
        let number = header.request.get();
        match self
            .client_table
            .lookup(client, number, self.in_flight_next(client))
        {
            Lookup::New => {}
            Lookup::Committed(reply) => {
                let mut out = self.reply_header(&header, reply.result);
                out.op.set(reply.op);
                out.commit.set(self.commit.max(reply.op));
                effects.push(Effect::Reply {
                    reply: Msg::new(out, reply.body),
                });
                return;
            }
            Lookup::TooOld { oldest } => {
                let message =
                    format!("request {number} is older than the oldest remembered ({oldest})");
                self.reply_error(
                    &header,
                    ErrorBody::message(ResultCode::InvalidRequest, message),
                    effects,
                );
                return;
            }
            Lookup::OutOfOrder { expected } => {
                if self.in_flight_contains(client, number) {
                    return; // prepared already; the reply comes at commit
                }
                self.reply_error(&header, ErrorBody::OutOfOrder { expected }, effects);
                return;
            }
            Lookup::Evicted => {
                let message = "this client id is unknown or was evicted: start a new client id";
                self.reply_error(
                    &header,
                    ErrorBody::message(ResultCode::SessionEvicted, message),
                    effects,
                );
                return;
            }
        }
        self.prepare(request, effects);
    }

    /// Checks that this replica can prepare the request now.
    /// Whether `header` would become a new prepare if handed to
    /// [`Replica::on_request`] now: this replica admits it (serving primary,
    /// room in the pipeline) and it is the next request the client table
    /// expects from its client. A driver's own admission checks (a full
    /// disk) apply only to these, so that a retry of a committed request
    /// still gets its reply and a backup still redirects.
    pub fn would_prepare(&self, header: &strand_wire::RequestHeader, record_count: u32) -> bool {
        let (client, number) = (header.client.get(), header.request.get());
        client != 0
            && number != 0
            && self.admit_request(header, record_count).is_ok()
            && matches!(
                self.client_table
                    .lookup(client, number, self.in_flight_next(client)),
                Lookup::New
            )
    }

    fn admit_request(
        &self,
        header: &strand_wire::RequestHeader,
        record_count: u32,
    ) -> Result<(), ErrorBody> {
        if !self.is_primary() || matches!(self.status, Status::Recovering | Status::Retired) {
            return Err(self.not_primary());
        }
        if self.status != Status::Normal {
            return Err(ErrorBody::message(
                ResultCode::Unavailable,
                "view change in progress: retry soon",
            ));
        }
        if self.handover.is_some() {
            return Err(ErrorBody::message(
                ResultCode::Unavailable,
                "handing over to the preferred primary: retry soon",
            ));
        }
        let operation = header.operation();
        let info = operation.info();
        if !info.replicated || info.route == Route::Internal {
            return Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                "operation is not replicated",
            ));
        }
        if record_count > 0 && operation != Operation::Produce {
            return Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                "records outside a produce",
            ));
        }
        if self.client_table_incomplete() {
            return Err(ErrorBody::message(
                ResultCode::Unavailable,
                "repairing damaged entries: retry soon",
            ));
        }
        if self.journal.head() - self.commit >= PIPELINE_PREPARES_MAX {
            return Err(ErrorBody::Busy { retry_after_ms: 10 });
        }
        Ok(())
    }

    /// Whether a committed op's header is still unknown (its entry damaged):
    /// until it is repaired the client table may lack that request, so no new
    /// request is admitted (it could be a retry of that very one).
    fn client_table_incomplete(&self) -> bool {
        self.faulty_ops
            .range(..=self.commit)
            .any(|op| *op >= self.journal.base() && self.journal.header(*op).is_none())
    }

    /// A redirect to the primary of the current view.
    pub(crate) fn not_primary(&self) -> ErrorBody {
        ErrorBody::NotPrimary {
            view: self.view.view,
            primary_replica: self.primary_index(),
            primary_node: 0,
            address: String::new(),
        }
    }

    fn reply_header(
        &self,
        request: &strand_wire::RequestHeader,
        result: ResultCode,
    ) -> ReplyHeader {
        let mut reply: ReplyHeader = self.new_header();
        reply.client = request.client;
        reply.request = request.request;
        reply.operation = request.operation;
        reply.result.set(result as u16);
        reply.commit.set(self.commit);
        reply
    }

    fn reply_error(
        &self,
        request: &strand_wire::RequestHeader,
        error: ErrorBody,
        effects: &mut Effects,
    ) {
        let reply = self.reply_header(request, error.code());
        effects.push(Effect::Reply {
            reply: Msg::new(reply, Bytes::from(error.to_vec())),
        });
    }

    /// The number that follows `client`'s requests prepared and not yet
    /// committed (each takes its span: one, or a sequenced client's
    /// produce's records), if it has any in the pipeline.
    fn in_flight_next(&self, client: u128) -> Option<u64> {
        self.journal
            .slots_from(self.commit + 1)
            .filter_map(|(_, slot)| slot)
            .filter(|slot| slot.header.client.get() == client)
            .map(|slot| {
                let header = &slot.header;
                let span = strand_wire::sequenced::request_span(
                    client,
                    header.operation(),
                    header.record_count.get(),
                );
                header.request.get() + span
            })
            .max()
    }

    fn in_flight_contains(&self, client: u128, request: u64) -> bool {
        self.journal
            .slots_from(self.commit + 1)
            .filter_map(|(_, slot)| slot)
            .any(|slot| slot.header.client.get() == client && slot.header.request.get() == request)
    }

    /// Turns an admitted request into the next prepare.
    fn prepare(&mut self, request: ClientRequest, effects: &mut Effects) {
        assert!(
            self.journal.head() - self.commit < PIPELINE_PREPARES_MAX,
            "a request admitted into a full pipeline"
        );
        let request_header = *request.request.header();
        let mut header = self.next_prepare_header();
        header.client = request_header.client;
        header.request = request_header.request;
        // Never before the op it follows (the head's time, which a new
        // primary inherits): a partition's times only move forward, so a
        // lookup by time finds one place, whatever the primaries' clocks.
        let after = header.timestamp_ns.get();
        header.timestamp_ns.set(request.timestamp_ns.max(after));
        let operation = request_header.operation();
        header
            .record_count
            .set(operation.info().offsets.count(request.record_count));
        header.operation = request_header.operation;
        // The request's body checksum, checked when it arrived, is the
        // prepare's: the batch is not read again.
        self.append_prepare(Msg::with_body_of(header, request.request), effects);
    }

    /// The header of the op after the log's head, chained to it: op, parent,
    /// commit, offsets and the membership that will confirm it. The caller
    /// fills in what the op is.
    pub(crate) fn next_prepare_header(&self) -> PrepareHeader {
        let head = self.journal.head();
        let head_header = match self.journal.header(head) {
            Some(header) => *header,
            None => {
                assert_eq!(head, 0, "the head slot has a header");
                self.genesis()
            }
        };
        let mut header: PrepareHeader = self.new_header();
        header
            .parent
            .set(if head == 0 { 0 } else { head_header.checksum() });
        header.op.set(head + 1);
        header.commit.set(self.commit);
        header.timestamp_ns.set(head_header.timestamp_ns.get());
        header.offset_base.set(if head == 0 {
            self.machine_offset_base()
        } else {
            head_header.offset_end()
        });
        header.membership_epoch.set(self.log_epoch());
        header
    }

    /// Primary: appends a new prepare to the log and sends it to every backup.
    pub(crate) fn append_prepare(&mut self, prepare: Msg<PrepareHeader>, effects: &mut Effects) {
        assert!(self.is_serving_primary());
        assert_eq!(prepare.header().op.get(), self.journal.head() + 1);
        self.journal.set_header_with_body(
            *prepare.header(),
            SlotState::Missing,
            Some(prepare.clone()),
        );
        self.flush_writes(effects);
        self.broadcast(Message::Prepare(prepare), effects);
        if !self.timers.prepare.ticking() {
            self.start_prepare_timeout();
        }
        assert!(self.journal.head() - self.commit <= PIPELINE_PREPARES_MAX);
    }

    /// A stand-in for op 0's header when the log is empty.
    fn genesis(&self) -> PrepareHeader {
        let mut header: PrepareHeader = self.new_header();
        header.operation = Operation::Produce as u8;
        header
    }

    /// Offset of the first record when the log is empty.
    fn machine_offset_base(&self) -> u64 {
        0
    }

    /// A prepare from the primary (or a repair answer from any replica).
    pub(crate) fn on_prepare(&mut self, prepare: Msg<PrepareHeader>, effects: &mut Effects) {
        let header = *prepare.header();
        let op = header.op.get();
        let view = header.prefix.view_id();
        let live = self.status == Status::Normal && view == self.view && !self.is_primary();
        if !live {
            // A repair answer: the body of a slot whose header is known, or
            // of a damaged committed op below the window.
            if self.store_below_window(&prepare, effects) {
                return;
            }
            if self.store_body(&prepare) {
                self.flush_writes(effects);
                self.advance_adoption(effects);
                return;
            }
            if view > self.view {
                self.request_start_view(self.primary_of(view), effects);
            }
            effects.event(Event::Dropped {
                reason: DropReason::WrongStatus,
            });
            return;
        }
        debug_assert_eq!(
            header.prefix.replica,
            self.primary_index(),
            "validated by view"
        );
        self.heard_from_primary();
        self.primary_op = self.primary_op.max(op);
        self.note_commit_max(header.commit.get(), effects);
        if op <= self.commit {
            // Applied already; the body may still be a repair answer for
            // an entry storage found damaged, prepared in this very view.
            if self.store_below_window(&prepare, effects) {
                return;
            }
            if self.store_body(&prepare) {
                self.flush_writes(effects);
            }
            self.send_ack(true, effects);
            return;
        }
        if op > self.commit + JOURNAL_SLOTS_MAX {
            effects.event(Event::Dropped {
                reason: DropReason::Busy,
            });
            self.schedule_repair();
            return;
        }
        if !self.install_canonical_header(&header, effects) {
            return;
        }
        self.store_body(&prepare);
        self.flush_writes(effects);
        if self.journal.has_gaps() {
            self.schedule_repair();
        }
        self.send_ack(op <= self.acked, effects);
    }

    /// Puts a header from the primary of this view (canonical) into the
    /// journal, checking it chains with its neighbours. Returns false (and
    /// drops it) if it contradicts the journal.
    pub(crate) fn install_canonical_header(
        &mut self,
        header: &PrepareHeader,
        effects: &mut Effects,
    ) -> bool {
        let op = header.op.get();
        if let Some(existing) = self.journal.header(op) {
            if existing.checksum() == header.checksum() {
                return true;
            }
            effects.event(Event::Dropped {
                reason: DropReason::Invalid,
            });
            return false;
        }
        if op < self.journal.base() {
            return false;
        }
        let below_matches = match self.journal.checksum(op - 1) {
            Some(checksum) => checksum == header.parent.get(),
            None => true,
        };
        let above_matches = self
            .journal
            .header(op + 1)
            .is_none_or(|above| above.parent.get() == header.checksum());
        if !below_matches || !above_matches {
            effects.event(Event::Dropped {
                reason: DropReason::Invalid,
            });
            return false;
        }
        self.fill_slot(header, effects);
        true
    }

    /// Puts a canonical header into a slot whose header was unknown. Below
    /// the append point storage holds an entry there. A committed op's entry
    /// is this very prepare: intact unless storage reported it damaged (open
    /// reports only a window of committed headers, so an intact one may just
    /// not have been read), else rewritten in place. An uncommitted op's
    /// unreadable entry may be another prepare: it and everything after it
    /// leave storage, to be appended again. Committed means at or below the
    /// commit this replica persisted, too: after a restart whose log lost a
    /// committed header, the commit it applied stops below that op, and
    /// storage never truncates what its superblock records as committed.
    pub(crate) fn fill_slot(&mut self, header: &PrepareHeader, effects: &mut Effects) {
        let op = header.op.get();
        assert!(
            op >= self.journal.base() && self.journal.header(op).is_none(),
            "op {op} is no gap of the journal's window from {}",
            self.journal.base()
        );
        assert!(
            op <= self.commit + JOURNAL_SLOTS_MAX,
            "op {op} beyond the journal's window above commit {}",
            self.commit
        );
        let committed = op <= self.commit.max(self.durable.commit);
        if op <= self.commit {
            // The client table could not learn this op at open; it does now.
            let (result, body) = crate::state_machine::reply_from_header(header);
            self.client_table.recover(header, result, body);
            self.persistence.client_table_at = 0; // the next persist writes it
        }
        let state = if op >= self.write_next {
            SlotState::Missing
        } else if committed && !self.faulty_ops.contains(&op) {
            SlotState::Durable
        } else if committed {
            SlotState::Faulty
        } else {
            self.truncate_storage(op - 1, effects);
            SlotState::Missing
        };
        self.journal.set_header(*header, state);
        let keep_from = self.view.epoch.min(self.log_view.epoch);
        crate::replica::learn_from_header(&mut self.memberships, header, keep_from);
    }

    /// Learns a commit number from the primary and applies what it can.
    pub(crate) fn note_commit_max(&mut self, commit: u64, effects: &mut Effects) {
        self.commit_max = self.commit_max.max(commit);
        self.commit_stored(effects);
    }

    /// Backup: applies ops up to the known commit number that are stored.
    pub(crate) fn commit_stored(&mut self, effects: &mut Effects) {
        assert!(
            !self.is_primary(),
            "a primary commits on its backups' acks, not on a commit number"
        );
        while self.commit < self.commit_max {
            let op = self.commit + 1;
            let Some(slot) = self.journal.get(op) else {
                break;
            };
            if !slot.state.stored(false) {
                break;
            }
            self.apply(op, effects);
        }
    }

    /// Applies committed op `op`: state machine, client table, reply (primary).
    pub(crate) fn apply(&mut self, op: u64, effects: &mut Effects) {
        assert_eq!(op, self.commit + 1, "ops commit in order");
        let (header, prepare) = self
            .journal
            .update(op, |slot| (slot.header, slot.prepare.take()))
            .expect("a committed op is in the journal");
        let (result, reply_body) = self
            .machine
            .commit(&header, prepare.as_ref().map(Msg::body));
        self.client_table
            .commit(&header, result, reply_body.clone());
        self.commit = op;
        self.commit_max = self.commit_max.max(op);
        effects.push(Effect::Commit { header });
        if let Some((epoch, _, _)) = header.next_membership() {
            self.epoch_started(epoch, effects);
        }
        if self.is_serving_primary() && header.client.get() != 0 {
            let mut reply: ReplyHeader = self.new_header();
            reply.client = header.client;
            reply.request = header.request;
            reply.operation = header.operation;
            reply.op.set(op);
            reply.commit.set(op);
            reply.result.set(result as u16);
            effects.push(Effect::Reply {
                reply: Msg::new(reply, reply_body),
            });
        }
        self.trim_journal();
    }

    /// Primary: an ack from a backup.
    pub(crate) fn on_prepare_ok(&mut self, ok: &PrepareOkHeader, effects: &mut Effects) {
        if !self.is_serving_primary() || ok.prefix.view_id() != self.view {
            effects.event(Event::Dropped {
                reason: DropReason::WrongStatus,
            });
            return;
        }
        let from = ok.prefix.replica;
        let op = ok.op.get();
        self.cursor_tail_reported(from, ok.cursor_tail.get(), effects);
        if from < strand_wire::REPLICAS_MAX {
            let repairing = ok.flags().contains(PrepareOkFlags::REPAIRING);
            self.progress.reported(from, repairing, ok.commit.get());
        }
        if op == 0 {
            return; // an empty log's report: nothing acked
        }
        match self.journal.checksum(op) {
            Some(checksum) if checksum == ok.prepare_checksum.get() => {}
            Some(_) => {
                effects.event(Event::Dropped {
                    reason: DropReason::Invalid,
                });
                return;
            }
            None if op < self.journal.base() && op <= self.commit => {}
            None => return,
        }
        self.progress.acked(from, op);
        self.try_commit(effects);
        self.continue_handover(effects);
    }

    /// Primary: commits every op that W replicas (itself included) hold.
    pub(crate) fn try_commit(&mut self, effects: &mut Effects) {
        if !self.is_serving_primary() {
            return;
        }
        let stored = self.stored_through();
        self.progress.stored(self.config.replica, stored);
        let commit_before = self.commit;
        loop {
            let op = self.commit + 1;
            if op > self.journal.head() || !self.confirmed(op) {
                break;
            }
            self.apply(op, effects);
        }
        // The progress timeout measures how long prepares wait without any
        // commit; a primary that stalls too long stops heartbeating so that
        // the backups elect another (which also lets a replica stuck in a
        // higher view back in).
        if self.commit > commit_before {
            self.maybe_reconfigure(effects);
        }
        if self.commit == self.journal.head() {
            self.timers.prepare.stop();
            self.timers.progress.stop();
            self.resume_serving();
        } else if self.commit > commit_before {
            self.timers.progress.start();
            self.resume_serving();
        } else if !self.timers.progress.ticking() && !self.abdicated {
            self.timers.progress.start();
        }
    }

    /// Primary: commits go on, so a stall that made it abdicate is over; its
    /// vote to leave the view is taken back with it.
    fn resume_serving(&mut self) {
        if self.abdicated {
            self.abdicated = false;
            self.withdraw_vote();
        }
    }

    /// Primary: whether `op` is held by W copies of the membership that
    /// confirms it: the op's own, or the view's if that is later (ops a view
    /// of a new epoch inherited commit under its rule). Only members' acks
    /// count, and an ack means "holds every op up to here", so a replica
    /// that joined counts only once it holds the whole prefix.
    fn confirmed(&self, op: u64) -> bool {
        let Some(header) = self.journal.header(op) else {
            return false;
        };
        let epoch = header.membership_epoch.get().max(self.view.epoch);
        let Some(membership) = self.memberships.get(epoch) else {
            return false; // cannot happen: the op's epoch was learned with the op
        };
        let copies = membership
            .slots
            .iter()
            .filter(|slot| self.progress.ack(*slot) >= op)
            .count();
        copies >= usize::from(membership.rule().write)
    }

    /// Backup: acks the highest op it holds in order, if it may ack at all.
    /// Sends PrepareOk for the highest op stored in order, if it is new (or
    /// `force`: the primary may have lost the last one).
    pub(crate) fn send_ack(&mut self, force: bool, effects: &mut Effects) {
        if self.status != Status::Normal
            || self.is_primary()
            || !self.trust.is_trusted()
            || self.persistence.view() < self.view
            || !self
                .peer_slots(self.view.epoch)
                .contains(self.config.replica)
        {
            return;
        }
        let op = self.stored_through();
        let repairing = self.lacks_entries();
        if op <= self.acked && !force && repairing == self.acked_repairing {
            return;
        }
        // Op 0 (an empty log) is reported with no checksum: it acks nothing,
        // but tells the primary this backup follows the view.
        let checksum = match op {
            0 => 0,
            _ => match self.journal.checksum(op) {
                Some(checksum) => checksum,
                None => return,
            },
        };
        let mut ok: PrepareOkHeader = self.new_header();
        ok.prepare_checksum.set(checksum);
        ok.op.set(op);
        ok.commit.set(self.commit);
        ok.cursor_tail.set(self.cursors.tail);
        if repairing {
            ok.flags = PrepareOkFlags::REPAIRING.bits();
        }
        self.acked = op;
        self.acked_repairing = repairing;
        self.send(
            self.primary_index(),
            Message::PrepareOk(Msg::new(ok, Bytes::new())),
            effects,
        );
    }

    /// Storage made progress: commit, ack, or continue a view's installation.
    pub(crate) fn on_storage_progress(&mut self, effects: &mut Effects) {
        match self.status {
            Status::Normal if self.is_primary() => self.try_commit(effects),
            Status::Normal => {
                self.send_ack(false, effects);
                self.commit_stored(effects);
            }
            _ => {}
        }
        self.flush_writes(effects);
        self.advance_adoption(effects);
    }

    /// Primary: the Commit heartbeat to every backup.
    pub(crate) fn send_heartbeat(&mut self, effects: &mut Effects) {
        self.send_heartbeat_flagged(CommitFlags::empty(), effects);
    }

    /// Primary: a heartbeat with `flags` ([`CommitFlags::QUIESCE`]: the last
    /// one before going quiet).
    pub(crate) fn send_heartbeat_flagged(&mut self, flags: CommitFlags, effects: &mut Effects) {
        if !self.is_serving_primary() || self.abdicated {
            return;
        }
        let mut commit: CommitHeader = self.new_header();
        commit.flags = flags.bits();
        commit.commit.set(self.commit);
        commit
            .commit_checksum
            .set(self.journal.checksum(self.commit).unwrap_or(0));
        commit.op.set(self.journal.head());
        if self.commit > 0 && self.journal.checksum(self.commit).is_none() {
            return;
        }
        self.broadcast(Message::Commit(Msg::new(commit, Bytes::new())), effects);
        self.ship_cursors(effects);
    }

    /// Backup: the primary's heartbeat.
    pub(crate) fn on_commit_heartbeat(&mut self, commit: &CommitHeader, effects: &mut Effects) {
        let view = commit.prefix.view_id();
        if view < self.view {
            effects.event(Event::Dropped {
                reason: DropReason::StaleView,
            });
            return;
        }
        if view > self.view || self.status != Status::Normal {
            if self.status != Status::ViewChange || view > self.view {
                self.request_start_view(commit.prefix.replica, effects);
            }
            return;
        }
        if self.is_primary() || commit.prefix.replica != self.primary_index() {
            effects.event(Event::Dropped {
                reason: DropReason::Invalid,
            });
            return;
        }
        self.heard_from_primary();
        if let Some(checksum) = self.journal.checksum(commit.commit.get()) {
            if checksum != commit.commit_checksum.get()
                && commit.commit.get() <= self.journal.head()
            {
                effects.event(Event::Dropped {
                    reason: DropReason::Invalid,
                });
                return;
            }
        }
        self.primary_op = self.primary_op.max(commit.op.get());
        self.note_commit_max(commit.commit.get(), effects);
        if commit.op.get() > self.journal.head() || self.journal.has_gaps() {
            self.schedule_repair();
        }
        if commit.flags().contains(CommitFlags::QUIESCE)
            && self.may_quiesce_backup(commit.op.get(), commit.commit.get())
        {
            // The primary knows this replica holds it all: no ack.
            self.quiesce();
            return;
        }
        self.send_ack(true, effects);
    }

    /// Primary: resends each unacked prepare to each backup that lacks it.
    ///
    /// Only to a backup that acked nothing since the timeout last fired: one
    /// whose ack moved is receiving the pipeline, and a busy group's ops can
    /// take longer than the timeout to be acked without anything being lost
    /// (resending them every timeout doubled a saturated node's replication
    /// work). A backup that lost a prepare cannot ack past it, so its ack
    /// stops, and it gets everything from there at the next timeout.
    pub(crate) fn retransmit_prepares(&mut self, effects: &mut Effects) {
        if !self.is_serving_primary() {
            self.timers.prepare.stop();
            return;
        }
        for to in self.others().collect::<Vec<_>>() {
            let acked = self.progress.ack(to);
            if self.progress.ack_moved_since_retransmit(to) {
                continue;
            }
            for op in (acked.max(self.commit) + 1)..=self.journal.head() {
                self.send_prepare(to, op, effects);
            }
        }
    }

    /// Starts the prepare timeout for a pipeline that had none: the acks as
    /// they stand are the marks each backup's progress is measured from.
    fn start_prepare_timeout(&mut self) {
        assert!(
            self.is_serving_primary(),
            "prepares retransmitted by a replica that does not serve as primary"
        );
        self.timers.prepare.start();
        self.progress.mark_retransmit();
    }

    /// Sends the prepare at `op` to `to`, from memory or from storage.
    pub(crate) fn send_prepare(&self, to: u8, op: u64, effects: &mut Effects) {
        assert!(
            op <= self.journal.head(),
            "sending prepare {op} past the log's head {}",
            self.journal.head()
        );
        let Some(slot) = self.journal.get(op) else {
            effects.push(Effect::ServePrepare {
                to,
                op,
                checksum: 0,
            });
            return;
        };
        match &slot.prepare {
            Some(prepare) => self.send(to, Message::Prepare(prepare.clone()), effects),
            None if slot.state.stored(false) => {
                effects.push(Effect::ServePrepare {
                    to,
                    op,
                    checksum: slot.header.checksum(),
                });
            }
            None => {}
        }
    }

    /// Backup: the primary is alive; withdraw any vote to leave the view.
    pub(crate) fn heard_from_primary(&mut self) {
        assert!(!self.is_primary(), "a primary heard from itself");
        self.start_patience = 0;
        if self.timers.primary.ticking() {
            self.timers.primary.reset();
        } else {
            self.timers.primary.start_jittered(&mut self.prng);
        }
        self.withdraw_vote();
    }

    /// The view works again (the primary was heard, or commits resumed):
    /// take back this replica's vote to leave it.
    fn withdraw_vote(&mut self) {
        if self.votes.withdraw(self.config.replica) {
            self.timers.view_change_retransmit.stop();
        }
    }

    /// Enters Normal status in the current view (timers, first messages).
    pub(crate) fn enter_normal(&mut self, effects: &mut Effects) {
        assert!(self.adoption.is_none(), "serving while adopting a view");
        assert!(
            self.persistence.view() >= self.view,
            "serving in view {} before it is persisted ({})",
            self.view,
            self.persistence.view()
        );
        self.end_quiet();
        self.status = Status::Normal;
        self.log_view = self.view;
        self.timers.view_change.stop();
        self.timers.view_change_retransmit.stop();
        self.timers.probe.stop();
        self.timers.warning.stop();
        self.view_change = Default::default();
        self.timers.repair.start();
        self.progress.forget_acks();
        self.acked = 0;
        self.acked_repairing = false;
        self.votes.clear();
        self.abdicated = false;
        self.timers.progress.stop();
        effects.event(Event::Normal {
            view: self.view,
            primary: self.is_primary(),
        });
        self.epoch_started(self.view.epoch, effects);
        if self.is_primary() {
            self.timers.primary.stop();
            self.timers.heartbeat.start();
            self.commit_max = self.commit_max.max(self.commit);
            self.try_commit(effects);
            if self.journal.head() > self.commit {
                self.start_prepare_timeout();
            }
            self.send_heartbeat(effects);
            self.maybe_reconfigure(effects);
        } else {
            self.timers.heartbeat.stop();
            self.timers.prepare.stop();
            self.timers.primary.start_jittered(&mut self.prng);
            self.commit_stored(effects);
            self.send_ack(true, effects);
            self.schedule_repair();
        }
    }
}
