//! Simulated clients: they produce record batches with retries (same client
//! id and request number), follow redirects, and store cursors.

use std::collections::VecDeque;

use bytes::Bytes;
use strand_prng::Prng;
use strand_wire::ops::{DeleteCursor, ErrorBody, ProduceReply, StoreCursor};
use strand_wire::{
    BatchBuilder, Body, CommandHeader, Msg, Operation, ReplyHeader, RequestHeader, ResultCode,
};

/// A produce waiting for its reply.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The request number.
    pub request: u64,
    /// Records in the batch.
    pub records: u32,
    /// The batch.
    pub body: Bytes,
}

/// An acknowledged produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// The client.
    pub client: u128,
    /// The request number.
    pub request: u64,
    /// The op it committed at.
    pub op: u64,
    /// Its first record offset.
    pub offset_base: u64,
    /// Its record count.
    pub record_count: u32,
}

/// One client.
#[derive(Debug)]
pub struct Client {
    /// Its index (endpoint `CLIENT_BASE + index`).
    pub index: u8,
    /// Its id (changes if evicted).
    pub id: u128,
    next_request: u64,
    /// Produces in flight, in request order.
    pub pending: VecDeque<Pending>,
    in_flight_max: usize,
    /// The replica it believes is primary.
    pub primary_guess: u8,
    /// The slots of the group's replicas, ascending, as the metadata plane
    /// last told it (the SDK's routing table): it tries them in turn.
    slots: Vec<u8>,
    last_send_tick: u64,
    timeouts: u32,
    /// Highest record offset end it was told.
    pub offset_end: u64,
    cursor_request: u64,
}

/// Ticks without a reply before a client resends.
pub const CLIENT_RETRY_TICKS: u64 = 60;

impl Client {
    /// A client with `in_flight_max` produces in flight at most, routing to
    /// the replicas at `slots`.
    pub fn new(index: u8, seed: u64, in_flight_max: u8, slots: Vec<u8>) -> Client {
        assert!(!slots.is_empty(), "a group has a replica");
        Client {
            index,
            id: (u128::from(seed) << 16) | (u128::from(index) + 1),
            next_request: 1,
            pending: VecDeque::new(),
            in_flight_max: usize::from(in_flight_max),
            primary_guess: slots[0],
            slots,
            last_send_tick: 0,
            timeouts: 0,
            offset_end: 0,
            cursor_request: 0,
        }
    }

    /// Starts a new produce if there is room; returns the frames to send.
    pub fn produce(&mut self, now: u64, prng: &mut Prng) -> Option<Msg<RequestHeader>> {
        // The window is contiguous: never more than `in_flight_max` request
        // numbers past the oldest unanswered one (so a retry of it is always
        // still in the primary's client table).
        let oldest = self
            .pending
            .front()
            .map_or(self.next_request, |pending| pending.request);
        if self.pending.len() >= self.in_flight_max
            || self.next_request >= oldest + self.in_flight_max as u64
        {
            return None;
        }
        let records = 1 + prng.below(4) as u32;
        let mut builder = BatchBuilder::with_capacity(256);
        for record in 0..records {
            let value = format!(
                "client {} request {} record {}",
                self.id, self.next_request, record
            );
            builder.push(now, b"", value.as_bytes(), &[]);
        }
        let pending = Pending {
            request: self.next_request,
            records,
            body: builder.finish().bytes().clone(),
        };
        self.next_request += 1;
        let frame = self.frame(&pending);
        self.pending.push_back(pending);
        self.last_send_tick = now;
        Some(frame)
    }

    fn frame(&self, pending: &Pending) -> Msg<RequestHeader> {
        let mut header = RequestHeader::new(0, 0, strand_wire::ViewId::ZERO, 0);
        header.client.set(self.id);
        header.request.set(pending.request);
        header.operation = Operation::Produce as u8;
        Msg::new(header, pending.body.clone())
    }

    /// Every pending produce, to resend in order.
    pub fn resend_all(&mut self, now: u64) -> Vec<Msg<RequestHeader>> {
        self.last_send_tick = now;
        self.pending
            .iter()
            .map(|pending| self.frame(pending))
            .collect()
    }

    /// Whether it is time to resend (no reply for a while); rotates the
    /// primary guess after repeated silence.
    pub fn retry_due(&mut self, now: u64) -> bool {
        if self.pending.is_empty() || now < self.last_send_tick + CLIENT_RETRY_TICKS {
            return false;
        }
        self.timeouts += 1;
        if self.timeouts % 2 == 0 {
            self.primary_guess = self.next_slot();
        }
        true
    }

    /// The slot after the current guess, wrapping around.
    fn next_slot(&self) -> u8 {
        self.slots
            .iter()
            .copied()
            .find(|slot| *slot > self.primary_guess)
            .unwrap_or(self.slots[0])
    }

    /// The metadata plane reassigned the group: route to `slots` from now on.
    pub fn set_slots(&mut self, slots: Vec<u8>) {
        assert!(!slots.is_empty(), "a group has a replica");
        self.slots = slots;
    }

    /// A cursor store for a random committed offset this client has seen,
    /// or now and then a delete of the client's cursor.
    pub fn store_cursor(&mut self, prng: &mut Prng) -> Msg<RequestHeader> {
        self.cursor_request += 1;
        let mut header = RequestHeader::new(0, 0, strand_wire::ViewId::ZERO, 0);
        header.client.set(self.id ^ (1 << 100));
        header.request.set(self.cursor_request);
        let consumer = format!("consumer-{}", self.index);
        // One in eight deletes the cursor instead (a tombstone event).
        if prng.chance(1, 8) {
            header.operation = Operation::DeleteCursor as u8;
            let delete = DeleteCursor { consumer };
            return Msg::new(header, Bytes::from(delete.to_vec()));
        }
        header.operation = Operation::StoreCursor as u8;
        let cursor = StoreCursor {
            consumer,
            offset: prng.below(self.offset_end + 1),
            fence: None,
        };
        Msg::new(header, Bytes::from(cursor.to_vec()))
    }

    /// A produce answered `Ok`: its pending batch is done, and the ack the
    /// durability checker holds the group to.
    fn on_produced(&mut self, reply: &Msg<ReplyHeader>, now: u64) -> Option<Ack> {
        let header = reply.header();
        let request = header.request.get();
        let body = ProduceReply::from_bytes(reply.body()).ok()?;
        let position = self
            .pending
            .iter()
            .position(|pending| pending.request == request)?;
        let pending = self.pending.remove(position).expect("position exists");
        assert_eq!(
            pending.records, body.record_count,
            "reply for another batch"
        );
        self.offset_end = self
            .offset_end
            .max(body.offset_base + u64::from(body.record_count));
        self.timeouts = 0;
        self.last_send_tick = now;
        Some(Ack {
            client: self.id,
            request,
            op: header.op.get(),
            offset_base: body.offset_base,
            record_count: body.record_count,
        })
    }

    /// Handles a reply; returns the acked produce, if this reply acks one,
    /// and whether everything pending must be resent now.
    pub fn on_reply(&mut self, reply: &Msg<ReplyHeader>, now: u64) -> (Option<Ack>, bool) {
        let header = reply.header();
        if header.client.get() != self.id || header.operation() != Operation::Produce {
            return (None, false);
        }
        let request = header.request.get();
        match header.result() {
            ResultCode::Ok => (self.on_produced(reply, now), false),
            ResultCode::NotPrimary => {
                if let Ok(ErrorBody::NotPrimary {
                    primary_replica, ..
                }) = ErrorBody::from_bytes(ResultCode::NotPrimary, reply.body())
                {
                    if self.slots.contains(&primary_replica)
                        && primary_replica != self.primary_guess
                    {
                        self.primary_guess = primary_replica;
                        return (None, now > self.last_send_tick);
                    }
                }
                (None, false)
            }
            // Older than the client table remembers: it committed (requests
            // commit in order and later ones did), its reply is gone.
            ResultCode::InvalidRequest if reply_says_too_old(reply) => {
                self.pending.retain(|pending| pending.request != request);
                (None, false)
            }
            // Out of order (an earlier request was lost): resend everything,
            // once per round trip (on the answer to the oldest).
            ResultCode::OutOfOrder => {
                let oldest = self
                    .pending
                    .front()
                    .is_some_and(|pending| pending.request == request);
                (None, oldest && now > self.last_send_tick)
            }
            ResultCode::SessionEvicted => {
                // The outcome of what was in flight is unknown: start over.
                self.pending.clear();
                self.id = self.id.wrapping_add(1 << 64);
                self.next_request = 1;
                (None, false)
            }
            _ => (None, false),
        }
    }
}

fn reply_says_too_old(reply: &Msg<ReplyHeader>) -> bool {
    matches!(
        ErrorBody::from_bytes(ResultCode::InvalidRequest, reply.body()),
        Ok(ErrorBody::Message { message, .. }) if message.contains("older than")
    )
}
