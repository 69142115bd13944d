//! Repair: asking peers for the headers and prepares this replica lacks, and
//! answering their requests from memory or (through the driver) from storage.
//!
//! Bounds: at most [`REPAIR_PREPARES_MAX`] prepares and one header range are
//! asked for per repair round; rounds run on the repair timeout and whenever
//! a gap is noticed.

use bytes::Bytes;
use strand_wire::{
    CommandHeader, HEADERS_PER_MESSAGE_MAX, HeadersHeader, LogStartHeader, Message, Msg,
    PrepareHeader, RequestHeadersHeader, RequestPrepareHeader,
};
use zerocopy::IntoBytes;

use crate::effects::{DropReason, Effect, Effects, Event};
use crate::journal::JOURNAL_SLOTS_MAX;
use crate::replica::{Replica, Status};
use crate::state_machine::StateMachine;

/// Most prepares asked for in one repair round.
pub const REPAIR_PREPARES_MAX: usize = 32;

impl<S: StateMachine> Replica<S> {
    /// Asks for a repair round at the next tick. Events (a gap noticed, an
    /// answer arrived) never send requests themselves, so however many of
    /// them arrive, repair traffic stays one round per tick.
    pub(crate) fn schedule_repair(&mut self) {
        self.repair_due = true;
    }

    /// One repair round: headers for gaps and for ops beyond the head that
    /// are known to exist, then bodies for slots that lack them.
    pub(crate) fn repair(&mut self, effects: &mut Effects) {
        self.repair_rounds = self.repair_rounds.wrapping_add(1);
        if let Some(adoption) = &self.adoption {
            if adoption.verified_from > self.commit + 1 {
                self.request_verification_headers(true, effects);
                return;
            }
            self.request_missing_prepares(effects);
            return;
        }
        if self.status != Status::Normal {
            return;
        }
        if let Some((op_min, op_max)) = self.header_gap() {
            // The primary's headers are canonical; gaps below known headers
            // can be filled by anyone (checked against the hash chain).
            let to = if self.is_primary() {
                let others: Vec<u8> = self.others().collect();
                if others.is_empty() {
                    return; // a lone member: nobody to ask
                }
                others[(op_min as usize + self.repair_rounds as usize) % others.len()]
            } else {
                self.primary_index()
            };
            let mut request: RequestHeadersHeader = self.new_header();
            request.op_min.set(op_min);
            request.op_max.set(op_max);
            self.send(
                to,
                Message::RequestHeaders(Msg::new(request, Bytes::new())),
                effects,
            );
        }
        self.request_missing_prepares(effects);
        self.request_damaged_below_window(effects);
    }

    /// Whether this replica lacks entries it knows of: headers, bodies, or
    /// sound copies of ops storage found damaged. A backup says so in its
    /// acks, so that its primary does not go quiet before its repairs end.
    pub(crate) fn lacks_entries(&self) -> bool {
        !self.faulty_ops.is_empty() || self.header_gap().is_some() || self.journal.lacks_bodies()
    }

    /// The first range of ops whose headers this backup lacks but knows exist.
    fn header_gap(&self) -> Option<(u64, u64)> {
        let limit = HEADERS_PER_MESSAGE_MAX as u64;
        if let Some(gap) = self.journal.first_gap() {
            // The top end of the first run of missing headers: there a known
            // header vouches (by the hash chain) for the one below it, and
            // each filled one for the next; a run longer than one answer is
            // filled from the top down, round by round.
            let end = (gap..=self.journal.head())
                .take_while(|op| self.journal.header(*op).is_none())
                .last()?;
            return Some((gap.max(end.saturating_sub(limit - 1)), end));
        }
        let head = self.journal.head();
        let known = self.commit_max.max(self.primary_op);
        if known > head && head < self.commit + JOURNAL_SLOTS_MAX {
            let op_max = known.min(head + limit).min(self.commit + JOURNAL_SLOTS_MAX);
            return Some((head + 1, op_max));
        }
        None
    }

    /// Asks for the committed prepares of damaged ops below the journal's
    /// window (no slot holds their header): "whichever is committed"
    /// (checksum 0), which any replica that applied them answers from
    /// storage.
    fn request_damaged_below_window(&mut self, effects: &mut Effects) {
        let base = self.journal.base();
        let wanted: Vec<u64> = self
            .faulty_ops
            .range(..base.min(self.commit + 1))
            .filter(|op| !self.rewriting_below_window.contains(op))
            .copied()
            .take(REPAIR_PREPARES_MAX)
            .collect();
        for (index, op) in wanted.into_iter().enumerate() {
            self.request_prepare(op, 0, index, effects);
        }
    }

    /// Asks the repair target for the prepare at `op` with `checksum` (0:
    /// whichever is committed); `index` rotates the target within a round.
    fn request_prepare(&mut self, op: u64, checksum: u32, index: usize, effects: &mut Effects) {
        let Some(to) = self.repair_target(op, checksum, index) else {
            return;
        };
        let mut request: RequestPrepareHeader = self.new_header();
        request.op.set(op);
        request.prepare_checksum.set(checksum);
        self.send(
            to,
            Message::RequestPrepare(Msg::new(request, Bytes::new())),
            effects,
        );
    }

    /// A repair answer for a damaged committed op below the journal's
    /// window: rewritten in place (storage checks it against the damaged
    /// entry's neighbours). True if it was such an answer.
    pub(crate) fn store_below_window(
        &mut self,
        prepare: &Msg<PrepareHeader>,
        effects: &mut Effects,
    ) -> bool {
        let op = prepare.header().op.get();
        if op >= self.journal.base() || op > self.commit || !self.faulty_ops.contains(&op) {
            return false;
        }
        if self.rewriting_below_window.insert(op) {
            effects.push(Effect::WritePrepare {
                prepare: prepare.clone(),
            });
        }
        true
    }

    /// Asks for the bodies of slots whose header is known and body is not.
    pub(crate) fn request_missing_prepares(&mut self, effects: &mut Effects) {
        let wanted: Vec<(u64, u32)> = self
            .journal
            .lacking_bodies()
            .take(REPAIR_PREPARES_MAX)
            .collect();
        for (index, (op, checksum)) in wanted.into_iter().enumerate() {
            self.request_prepare(op, checksum, index, effects);
        }
    }

    /// Which replica to ask for the prepare at `op`: the primary when
    /// serving; during a view change, a reporter whose DoViewChange holds it
    /// (rotating by `index`), else the adoption's source.
    fn repair_target(&self, op: u64, checksum: u32, index: usize) -> Option<u8> {
        if self.status == Status::Normal && !self.is_primary() {
            return Some(self.primary_index());
        }
        if self.status == Status::Normal {
            let others: Vec<u8> = self.others().collect();
            return (!others.is_empty()).then(|| {
                others[(op as usize + index + self.repair_rounds as usize) % others.len()]
            });
        }
        let holders: Vec<u8> = self
            .view_change
            .dvcs
            .values()
            .filter(|dvc| dvc.replica != self.config.replica && dvc.has_present(op, checksum))
            .map(|dvc| dvc.replica)
            .collect();
        if !holders.is_empty() {
            return Some(holders[(index + self.repair_rounds as usize) % holders.len()]);
        }
        let source = self.adoption.as_ref()?.source;
        if source != self.config.replica {
            return Some(source);
        }
        let others: Vec<u8> = self.others().collect();
        (!others.is_empty()).then(|| others[(index + self.repair_rounds as usize) % others.len()])
    }

    /// A peer asks for headers: answered from the journal, or from storage
    /// for ops the journal no longer holds.
    pub(crate) fn on_request_headers(
        &mut self,
        request: &RequestHeadersHeader,
        effects: &mut Effects,
    ) {
        if self.status == Status::AwaitingStateTransfer {
            return;
        }
        let to = request.prefix.replica;
        if request.op_min.get() < self.log_start {
            self.send_log_start(to, effects);
        }
        let (op_min, op_max) = (
            request.op_min.get().max(self.log_start),
            request.op_max.get().min(self.journal.head()),
        );
        if op_min > op_max {
            return;
        }
        let base = self.journal.base();
        if op_min < base {
            effects.push(Effect::ServeHeaders {
                to,
                op_min,
                op_max: op_max.min(base - 1),
            });
        }
        let headers: Vec<PrepareHeader> = self
            .journal
            .slots_from(op_min.max(base))
            .take_while(|(op, _)| *op <= op_max)
            .filter_map(|(_, slot)| slot.map(|slot| slot.header))
            .collect();
        if headers.is_empty() {
            return;
        }
        let reply: HeadersHeader = self.new_header();
        let body = Bytes::copy_from_slice(headers.as_bytes());
        self.send(to, Message::Headers(Msg::new(reply, body)), effects);
    }

    /// Headers a peer sent: canonical ones from the adoption's source (while
    /// adopting) or from the primary (while serving as backup).
    pub(crate) fn on_headers(&mut self, message: Msg<HeadersHeader>, effects: &mut Effects) {
        let from = message.header().prefix.replica;
        let Ok(headers) = strand_wire::headers::prepare_headers(message.body()) else {
            effects.event(Event::Dropped {
                reason: DropReason::Invalid,
            });
            return;
        };
        let headers = headers.to_vec();
        if let Some(adoption) = &self.adoption {
            if from == adoption.source && adoption.verified_from > self.commit + 1 {
                self.on_verification_headers(&headers, effects);
                return;
            }
        }
        if self.status != Status::Normal {
            effects.event(Event::Dropped {
                reason: DropReason::WrongStatus,
            });
            return;
        }
        let from_primary = !self.is_primary()
            && from == self.primary_index()
            && message.header().prefix.view_id() == self.view;
        let commit = self.commit;
        let base = self.journal.base();
        let usable = |header: &&PrepareHeader| {
            let op = header.op.get();
            op <= commit + JOURNAL_SLOTS_MAX && op >= base
        };
        for header in headers.iter().filter(usable) {
            if from_primary
                && header.op.get() > commit
                && !self.install_canonical_header(header, effects)
            {
                break;
            }
        }
        // Gaps: top down first (each filled header vouches for the one below
        // it), then bottom up (for a run that only its lower neighbour knows).
        let gap_fills = |header: &&PrepareHeader| !from_primary || header.op.get() <= commit;
        for header in headers.iter().rev().filter(usable).filter(gap_fills) {
            if self.is_hole(header.op.get()) && self.chains(header) {
                self.fill_slot(header, effects);
            }
        }
        for header in headers.iter().filter(usable).filter(gap_fills) {
            if !self.is_hole(header.op.get()) {
                continue;
            }
            if self.chains(header) {
                self.fill_slot(header, effects);
            } else {
                effects.event(Event::Dropped {
                    reason: DropReason::Invalid,
                });
            }
        }
        self.schedule_repair();
    }

    /// Whether `op` is in the window with its header unknown.
    fn is_hole(&self, op: u64) -> bool {
        self.journal.in_window(op) && self.journal.header(op).is_none()
    }

    /// Whether a header from any replica chains with a known neighbour (the
    /// hash chain vouches for it): the one above names it as parent, or,
    /// with none known above, it names the one below.
    fn chains(&self, header: &PrepareHeader) -> bool {
        let op = header.op.get();
        let above = self
            .journal
            .header(op + 1)
            .map(|above| above.parent.get() == header.checksum());
        let below = self
            .journal
            .checksum(op - 1)
            .map(|checksum| checksum == header.parent.get());
        above == Some(true) || (above.is_none() && below == Some(true))
    }

    /// A peer asks for a prepare: sent from memory, or read from storage.
    pub(crate) fn on_request_prepare(
        &mut self,
        request: &RequestPrepareHeader,
        effects: &mut Effects,
    ) {
        if self.status == Status::AwaitingStateTransfer {
            return;
        }
        let to = request.prefix.replica;
        let op = request.op.get();
        let checksum = request.prepare_checksum.get();
        if op < self.log_start {
            return self.send_log_start(to, effects);
        }
        match self.journal.get(op) {
            Some(slot) if checksum == 0 || slot.header.checksum() == checksum => {
                if checksum == 0 && op > self.commit {
                    return; // "whichever is committed": not yet
                }
                if let Some(prepare) = &slot.prepare {
                    self.send(to, Message::Prepare(prepare.clone()), effects);
                } else if slot.state.stored(false) {
                    effects.push(Effect::ServePrepare {
                        to,
                        op,
                        checksum: slot.header.checksum(),
                    });
                }
            }
            Some(_) => {}
            None if op < self.journal.base() => {
                effects.push(Effect::ServePrepare { to, op, checksum });
            }
            None => {}
        }
    }

    /// The driver says storage holds ops from `start` on: retention dropped
    /// the ones below (all committed), or a state transfer installed a log
    /// that begins there. Peers asking for ops below it are told so, and
    /// damaged ops below it need no repair any more.
    pub fn note_log_start(&mut self, start: u64) {
        // Retention drops committed ops only; a transfer's install may
        // leave a log that starts past what this replica applied until it
        // takes it in.
        assert!(
            start <= self.commit + 1 || self.status == Status::AwaitingStateTransfer,
            "storage dropped ops up to {}, past commit {}",
            start.saturating_sub(1),
            self.commit
        );
        self.log_start = start.max(1);
        let rewriting = &self.rewriting_below_window;
        self.faulty_ops
            .retain(|op| *op >= start || rewriting.contains(op));
        self.trim_journal();
    }

    /// The first op storage holds (see [`Replica::note_log_start`]).
    pub fn log_start(&self) -> u64 {
        self.log_start
    }

    /// The lowest cursor event a peer may still need shipped from this
    /// replica's cursor log: on a primary the lowest tail its backups
    /// reported, on a backup its own tail (a backup ships nothing).
    /// Compaction keeps the events from there on.
    pub fn cursor_keep_from(&self) -> u64 {
        if !self.is_primary() {
            return self.cursors.tail;
        }
        self.others()
            .map(|slot| self.cursors.replica_tails[usize::from(slot)])
            .min()
            .unwrap_or(self.cursors.tail)
    }

    /// Tells replica `to`, which asked for an op below this replica's log
    /// start, where the log starts now and how far this replica committed.
    fn send_log_start(&mut self, to: u8, effects: &mut Effects) {
        let start = self.log_start;
        if start < 2 || self.commit + 1 < start {
            return; // nothing dropped, or (never expected) dropped above the commit
        }
        let mut notice: LogStartHeader = self.new_header();
        notice.log_start_op.set(start);
        notice.commit.set(self.commit);
        self.send(
            to,
            Message::LogStart(Msg::new(notice, Bytes::new())),
            effects,
        );
    }

    /// A peer no longer holds ops below `log_start_op`. If this replica
    /// lacks one of them (its log, held in order, ends below the op before
    /// the peer's start) or holds one damaged, no repair can bring it from
    /// there: it catches up by a state transfer from that peer. Everything
    /// it acked lies at or below what it holds in order, or among its
    /// damaged ops, so below the peer's start, which the peer committed:
    /// the transfer, reaching at least `log_start_op - 1`, covers it.
    pub(crate) fn on_log_start(&mut self, notice: &LogStartHeader, effects: &mut Effects) {
        // A superblock write or a cut in progress finishes first (the
        // transfer replaces what they change); the next repair round asks
        // again and hears the same answer.
        if matches!(self.status, Status::AwaitingStateTransfer | Status::Retired)
            || self.deferred_cut.is_some()
            || !self.persistence.idle()
        {
            return;
        }
        let start = notice.log_start_op.get();
        let holds_all_below = self.stored_through() + 1 >= start;
        let damaged_below = self.faulty_ops.range(..start).next().is_some()
            || self.journal.lacking_bodies().any(|(op, _)| op < start);
        if holds_all_below && !damaged_below {
            return; // it holds every op up to the peer's start, sound
        }
        effects.event(Event::BehindLogStart {
            from: notice.prefix.replica,
            log_start: start,
        });
        self.await_state_transfer(notice.prefix.replica, start - 1, effects);
    }
}
