//! Cursors: each partition's cursor event log. The primary appends a
//! consumer's stored cursor as an event, acks it per
//! `consumer_offset_durability`, and ships events to backups once durable.
//! Cursor events are not ops of the log; their count (the cursor tail) breaks
//! view-change ties. A view's cursor log is its new primary's; a replica that
//! adopts the view cuts its own where its history leaves the view's (the
//! history starts its StartView carries: `state::cursor_divergence`, and
//! `docs/cursor-cut.md`).
//!
//! A delete is an event too (a tombstone): it replicates, survives
//! snapshots, compaction and state transfer as any store does, and frees its
//! consumer's name.
//!
//! Bounds: the last [`CURSOR_EVENTS_KEPT`] events stay in memory for
//! shipping; a backup further behind is shipped from storage. At most
//! [`CURSOR_COMMITS_PENDING_MAX`] commits wait for their ack; more are
//! answered `Busy`. A partition keeps cursors for at most
//! [`CursorCensus::consumers_max`] distinct consumer names: the primary
//! refuses a store that would add one more (`LimitExceeded`), counting the
//! names its map holds and the new ones it accepted that storage has not
//! applied yet ([`Replica::cursor_bound_refusal`]). A store for a consumer
//! that has a cursor always passes. Backups apply what the primary shipped:
//! the primary's rule is the group's.

use std::collections::VecDeque;

use bytes::Bytes;
use strand_wire::ops::{CursorEvent, CursorEvents, DeleteCursor, ErrorBody, StoreCursor};
use strand_wire::{
    Body, CursorsHeader, Durability, Message, Msg, REPLICAS_MAX, ReplyHeader, RequestHeader,
    ResultCode,
};

use crate::effects::{DropReason, Effect, Effects, Event};
use crate::replica::{Replica, Status, WriteStage};
use crate::state_machine::StateMachine;

/// Cursor events kept in memory for shipping to backups.
pub const CURSOR_EVENTS_KEPT: usize = 4096;
/// Cursor commits waiting for their ack at most.
pub const CURSOR_COMMITS_PENDING_MAX: usize = 4096;
/// Most events in one Cursors frame.
const CURSOR_EVENTS_PER_FRAME: usize = 256;
/// Default most distinct consumer names a partition keeps cursors for: far
/// above what consumers and consumer groups of one partition use (Kafka
/// users rarely run more than a few hundred groups per topic), and small
/// enough that the whole map (at most about 2.6 MiB of names) is cheap to
/// snapshot, ship and hold in memory on every replica.
pub const CURSOR_CONSUMERS_MAX_DEFAULT: u64 = 10_000;

/// What the partition's cursor map says about one store or delete, for the
/// bound on consumer names. The map lives in storage; the host reads it
/// and hands it in with the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CursorCensus {
    /// The consumer has a cursor in the map.
    pub known: bool,
    /// Distinct consumers in the map.
    pub consumers: u64,
    /// The cursor tail the map reflects: every event below it is applied.
    pub applied_tail: u64,
    /// Most distinct consumers the partition may hold.
    pub consumers_max: u64,
}

/// What became of a cursor store or delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorOutcome {
    /// Appended; the reply follows once it is written (or, for a delete of
    /// a consumer without a cursor, already went out).
    Accepted,
    /// Answered with this error at once; nothing was appended.
    Refused(ResultCode),
}

/// An event the primary accepted that storage may not have applied to the
/// map yet: a store of a name the map did not hold, or a delete.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Unapplied {
    sequence: u64,
    consumer: String,
    deletes: bool,
}

/// The replica's cursor log bookkeeping.
#[derive(Debug, Clone)]
pub struct CursorState {
    /// Events appended (handed to storage).
    pub tail: u64,
    /// Events queued to the WAL writer.
    pub queued: u64,
    /// Events fsynced.
    pub durable: u64,
    recent: VecDeque<CursorEvent>,
    recent_base: u64,
    pending: VecDeque<(u64, RequestHeader)>,
    /// Primary: stores of new names and deletes not yet in storage's map.
    unapplied: VecDeque<Unapplied>,
    /// Primary: each replica's reported tail.
    pub replica_tails: [u64; REPLICAS_MAX as usize],
    /// The first event the log still holds as an event (the driver says,
    /// once it finds a peer asking for less): older ones were folded into
    /// its snapshot, so a peer below it cannot be caught up by shipping.
    pub log_start: u64,
}

impl CursorState {
    /// Bookkeeping for a cursor log of `tail` events, all durable.
    pub fn new(tail: u64) -> CursorState {
        CursorState {
            tail,
            queued: tail,
            durable: tail,
            recent: VecDeque::new(),
            recent_base: tail,
            pending: VecDeque::new(),
            unapplied: VecDeque::new(),
            replica_tails: [0; REPLICAS_MAX as usize],
            log_start: 0,
        }
    }

    fn remember(&mut self, event: CursorEvent) {
        self.recent.push_back(event);
        if self.recent.len() > CURSOR_EVENTS_KEPT {
            self.recent.pop_front();
            self.recent_base += 1;
        }
    }

    fn events_from(&self, from: u64, end: u64) -> Option<Vec<CursorEvent>> {
        assert!(from <= end, "cursor events {from}..{end} run backwards");
        if from < self.recent_base || end > self.recent_base + self.recent.len() as u64 {
            return None;
        }
        let start = (from - self.recent_base) as usize;
        let count = (end - from) as usize;
        Some(
            self.recent
                .iter()
                .skip(start)
                .take(count)
                .cloned()
                .collect(),
        )
    }

    /// The log's positions in order (fsynced, queued, appended), the
    /// events kept in memory ending at the tail, commits waiting for their
    /// ack in order and within the log, every reported tail and every
    /// unapplied event within it, and each bound held.
    pub(crate) fn assert_invariants(&self) {
        assert!(
            self.durable <= self.queued && self.queued <= self.tail,
            "cursor log positions out of order: durable {}, queued {}, tail {}",
            self.durable,
            self.queued,
            self.tail
        );
        assert_eq!(
            self.recent_base + self.recent.len() as u64,
            self.tail,
            "the cursor events kept in memory do not end at the tail"
        );
        assert!(
            self.recent.len() <= CURSOR_EVENTS_KEPT
                && self.pending.len() <= CURSOR_COMMITS_PENDING_MAX,
            "cursor bounds passed: {} events kept, {} commits pending",
            self.recent.len(),
            self.pending.len()
        );
        assert!(
            self.replica_tails.iter().all(|tail| *tail <= self.tail),
            "a reported cursor tail past this log's {}: {:?}",
            self.tail,
            self.replica_tails
        );
        debug_assert!(
            self.pending
                .iter()
                .zip(self.pending.iter().skip(1))
                .all(|((earlier, _), (later, _))| earlier < later)
                && self.pending.back().is_none_or(|(end, _)| *end <= self.tail),
            "cursor commits pending out of order or past the tail {}",
            self.tail
        );
        debug_assert!(
            self.unapplied
                .iter()
                .all(|event| event.sequence < self.tail),
            "an unapplied cursor event past the tail {}",
            self.tail
        );
    }
}

impl<S: StateMachine> Replica<S> {
    /// Primary: a consumer stores its cursor. `high_watermark` is the
    /// partition's committed offset end (a cursor may not point past it;
    /// one within the log, not yet committed, is told to retry); `census`
    /// is what the partition's map says for the bound on consumer names.
    pub fn on_store_cursor(
        &mut self,
        request: &Msg<RequestHeader>,
        cursor: StoreCursor,
        high_watermark: u64,
        census: CursorCensus,
        effects: &mut Effects,
    ) -> CursorOutcome {
        self.wake(effects);
        let header = *request.header();
        let error = if !self.is_serving_primary() {
            Some(self.not_primary())
        } else if cursor.offset > high_watermark {
            Some(self.cursor_past_high_watermark(cursor.offset, high_watermark))
        } else if self.cursors.pending.len() >= CURSOR_COMMITS_PENDING_MAX {
            Some(ErrorBody::Busy { retry_after_ms: 10 })
        } else {
            self.cursor_bound_refusal(&cursor.consumer, census)
        };
        if let Some(error) = error {
            let code = error.code();
            self.cursor_reply(&header, code, Bytes::from(error.to_vec()), effects);
            return CursorOutcome::Refused(code);
        }
        let known = self.cursor_known(&cursor.consumer, census);
        if !known {
            self.cursors.unapplied.push_back(Unapplied {
                sequence: self.cursors.tail,
                consumer: cursor.consumer.clone(),
                deletes: false,
            });
        }
        let event = CursorEvent {
            consumer: cursor.consumer,
            offset: cursor.offset,
        };
        self.append_cursor_event(header, event, effects);
        CursorOutcome::Accepted
    }

    /// Primary: a consumer's cursor is deleted (a tombstone appended, acked
    /// as a store is). A consumer without a cursor is answered at once.
    pub fn on_delete_cursor(
        &mut self,
        request: &Msg<RequestHeader>,
        delete: DeleteCursor,
        census: CursorCensus,
        effects: &mut Effects,
    ) -> CursorOutcome {
        self.wake(effects);
        let header = *request.header();
        let error = if !self.is_serving_primary() {
            Some(self.not_primary())
        } else if self.cursors.pending.len() >= CURSOR_COMMITS_PENDING_MAX {
            Some(ErrorBody::Busy { retry_after_ms: 10 })
        } else {
            None
        };
        if let Some(error) = error {
            let code = error.code();
            self.cursor_reply(&header, code, Bytes::from(error.to_vec()), effects);
            return CursorOutcome::Refused(code);
        }
        self.forget_applied(census.applied_tail);
        if !self.cursor_known(&delete.consumer, census) {
            self.cursor_reply(&header, ResultCode::Ok, Bytes::new(), effects);
            return CursorOutcome::Accepted;
        }
        self.cursors.unapplied.push_back(Unapplied {
            sequence: self.cursors.tail,
            consumer: delete.consumer.clone(),
            deletes: true,
        });
        let event = CursorEvent::tombstone(delete.consumer);
        self.append_cursor_event(header, event, effects);
        CursorOutcome::Accepted
    }

    /// Primary: deletes the cursors of `consumers` for want of use (the
    /// driver's expiry of idle cursors decides which, from its clock):
    /// tombstone events appended as a client's delete is, with no reply to
    /// wait for. At most one frame's worth at a time; returns how many.
    pub fn expire_cursors(&mut self, mut consumers: Vec<String>, effects: &mut Effects) -> usize {
        if !self.is_serving_primary() || consumers.is_empty() {
            return 0;
        }
        consumers.truncate(CURSOR_EVENTS_PER_FRAME);
        let base = self.cursors.tail;
        let events: Vec<CursorEvent> = consumers.into_iter().map(CursorEvent::tombstone).collect();
        for (index, event) in events.iter().enumerate() {
            self.cursors.unapplied.push_back(Unapplied {
                sequence: base + index as u64,
                consumer: event.consumer.clone(),
                deletes: true,
            });
            self.cursors.remember(event.clone());
        }
        let count = events.len();
        effects.push(Effect::AppendCursors {
            cursor_base: base,
            event_count: count as u32,
            events: Bytes::from(CursorEvents { events }.to_vec()),
        });
        self.cursors.tail += count as u64;
        assert_eq!(self.cursors.tail, base + count as u64);
        count
    }

    /// The bound on consumer names, as the primary applies it to a store
    /// for `consumer`: refused when the name is new and the names in the
    /// map plus the new ones not yet applied reach `consumers_max`.
    pub fn cursor_bound_refusal(
        &mut self,
        consumer: &str,
        census: CursorCensus,
    ) -> Option<ErrorBody> {
        self.forget_applied(census.applied_tail);
        if self.cursor_known(consumer, census) {
            return None;
        }
        let new_unapplied = self
            .cursors
            .unapplied
            .iter()
            .filter(|event| !event.deletes)
            .count();
        let consumers = census.consumers + new_unapplied as u64;
        if consumers < census.consumers_max {
            return None;
        }
        Some(ErrorBody::message(
            ResultCode::LimitExceeded,
            format!(
                "this partition keeps cursors for at most {} distinct consumer names \
                 (cursor_consumers_per_partition_max) and holds {consumers}: consumer \
                 {consumer} was not stored; delete cursors no longer used (DeleteCursor, \
                 `strand cursor delete`) or raise the bound in every node's configuration",
                census.consumers_max
            ),
        ))
    }

    /// Whether `consumer` has a cursor once every accepted event is
    /// applied: the newest unapplied event for it says, else the map.
    fn cursor_known(&self, consumer: &str, census: CursorCensus) -> bool {
        match self
            .cursors
            .unapplied
            .iter()
            .rev()
            .find(|event| event.consumer == consumer)
        {
            Some(event) => !event.deletes,
            None => census.known,
        }
    }

    /// Drops the unapplied events storage has applied since (those below
    /// `applied_tail`) and any a cut removed (at or past the tail).
    fn forget_applied(&mut self, applied_tail: u64) {
        let tail = self.cursors.tail;
        self.cursors
            .unapplied
            .retain(|event| event.sequence >= applied_tail && event.sequence < tail);
        assert!(
            self.cursors.unapplied.len() as u64 <= tail.saturating_sub(applied_tail),
            "unapplied events lie between the applied tail and the tail"
        );
    }

    /// Primary: appends one accepted event and waits for its write to ack.
    fn append_cursor_event(
        &mut self,
        header: RequestHeader,
        event: CursorEvent,
        effects: &mut Effects,
    ) {
        assert!(
            self.is_serving_primary(),
            "only a serving primary appends events"
        );
        let events = CursorEvents {
            events: vec![event.clone()],
        };
        effects.push(Effect::AppendCursors {
            cursor_base: self.cursors.tail,
            event_count: 1,
            events: Bytes::from(events.to_vec()),
        });
        self.cursors.tail += 1;
        self.cursors.remember(event);
        self.cursors.pending.push_back((self.cursors.tail, header));
    }

    /// The refusal of a cursor at `offset`, past `high_watermark`. Within
    /// the records the log holds, the commit has yet to reach it: a primary
    /// whose view just started commits its predecessor's last records only
    /// once a backup acks the view, yet a consumer may have read them from
    /// that predecessor. So it is told to retry, as for a view change.
    /// Past the log's end, no consumer read it: the argument is wrong.
    fn cursor_past_high_watermark(&self, offset: u64, high_watermark: u64) -> ErrorBody {
        let log_end = self.log_offset_end();
        if offset <= log_end {
            ErrorBody::message(
                ResultCode::Unavailable,
                format!(
                    "cursor {offset} is past the high watermark {high_watermark} while the \
                     primary commits the records it holds up to {log_end}: retry soon"
                ),
            )
        } else {
            ErrorBody::message(
                ResultCode::InvalidRequest,
                format!(
                    "cursor {offset} is past the high watermark {high_watermark} and the end \
                     of the log {log_end}"
                ),
            )
        }
    }

    fn cursor_reply(
        &self,
        request: &RequestHeader,
        result: ResultCode,
        body: Bytes,
        effects: &mut Effects,
    ) {
        let mut reply: ReplyHeader = self.new_header();
        reply.client = request.client;
        reply.request = request.request;
        reply.operation = request.operation;
        reply.result.set(result as u16);
        reply.commit.set(self.commit);
        effects.push(Effect::Reply {
            reply: Msg::new(reply, body),
        });
    }

    /// Storage wrote the cursor log up to `cursor_end` at `stage`.
    pub(crate) fn cursors_written(
        &mut self,
        cursor_end: u64,
        stage: WriteStage,
        effects: &mut Effects,
    ) {
        let cursor_end = cursor_end.min(self.cursors.tail);
        match stage {
            WriteStage::Queued => self.cursors.queued = self.cursors.queued.max(cursor_end),
            WriteStage::Durable => {
                self.cursors.queued = self.cursors.queued.max(cursor_end);
                self.cursors.durable = self.cursors.durable.max(cursor_end);
            }
        }
        let acked = match self.config.cursor_durability {
            Durability::Persisted => self.cursors.durable,
            Durability::Replicated => self.cursors.queued,
        };
        while let Some((end, _)) = self.cursors.pending.front() {
            if *end > acked {
                break;
            }
            let (_, request) = self.cursors.pending.pop_front().expect("front exists");
            self.cursor_reply(&request, ResultCode::Ok, Bytes::new(), effects);
        }
        if stage == WriteStage::Durable && self.is_serving_primary() {
            self.ship_cursors(effects);
        }
    }

    /// Primary: sends each backup the durable events it lacks.
    pub(crate) fn ship_cursors(&mut self, effects: &mut Effects) {
        if !self.is_serving_primary() {
            return;
        }
        let durable = self.cursors.durable;
        for to in self.others().collect::<Vec<_>>() {
            let from = self.cursors.replica_tails[usize::from(to)];
            if from >= durable {
                continue;
            }
            let end = durable.min(from + CURSOR_EVENTS_PER_FRAME as u64);
            match self.cursors.events_from(from, end) {
                Some(events) => {
                    let count = events.len() as u32;
                    let mut header: CursorsHeader = self.new_header();
                    header.cursor_base.set(from);
                    header.event_count.set(count);
                    let body = Bytes::from(CursorEvents { events }.to_vec());
                    self.send(to, Message::Cursors(Msg::new(header, body)), effects);
                }
                None => effects.push(Effect::ShipCursors {
                    to,
                    cursor_from: from,
                }),
            }
        }
    }

    /// Primary: a backup's cursor tail, from its PrepareOk.
    pub(crate) fn cursor_tail_reported(&mut self, from: u8, tail: u64, _effects: &mut Effects) {
        self.cursors.replica_tails[usize::from(from)] = tail.min(self.cursors.tail);
    }

    /// Backup: cursor events from the primary.
    pub(crate) fn on_cursors(&mut self, message: Msg<CursorsHeader>, effects: &mut Effects) {
        let header = *message.header();
        let serving_backup = self.status == Status::Normal && !self.is_primary();
        if !serving_backup
            || header.prefix.view_id() != self.view
            || header.prefix.replica != self.primary_index()
        {
            effects.event(Event::Dropped {
                reason: DropReason::WrongStatus,
            });
            return;
        }
        let base = header.cursor_base.get();
        let end = header.cursor_end();
        if base > self.cursors.tail || end <= self.cursors.tail {
            return; // a gap (re-shipped from our reported tail) or nothing new
        }
        let Ok(events) = CursorEvents::from_bytes(message.body()) else {
            effects.event(Event::Dropped {
                reason: DropReason::Invalid,
            });
            return;
        };
        if events.events.len() as u64 != end - base {
            effects.event(Event::Dropped {
                reason: DropReason::Invalid,
            });
            return;
        }
        let skip = (self.cursors.tail - base) as usize;
        let fresh: Vec<CursorEvent> = events.events.into_iter().skip(skip).collect();
        let count = fresh.len() as u32;
        for event in &fresh {
            self.cursors.remember(event.clone());
        }
        effects.push(Effect::AppendCursors {
            cursor_base: self.cursors.tail,
            event_count: count,
            events: Bytes::from(CursorEvents { events: fresh }.to_vec()),
        });
        self.cursors.tail = end;
    }
}
