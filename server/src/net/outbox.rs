//! A shard's frames to its peers, coalesced per peer per turn.
//!
//! Every group of a shard that sends to a peer in one turn (heartbeats,
//! commits, acks, prepares) has its frame appended to that peer's batch here,
//! and the shard hands each batch to the peer's bus queue once, at the end
//! of the turn: one queue entry, one wakeup of the peer's writer and one
//! vectored write for all of the shard's groups, in place of one of each per
//! frame. Over a thousand sparse groups most frames are header-only
//! (heartbeats and acks), and their per-frame queueing cost the shards and
//! the bus writers more than the bytes did.
//!
//! On the wire the frames stay frames, each with its own header and
//! checksum: the receiver checks each one against its group (a peer speaks
//! only for its own replicas) exactly as before. Header-only and small frames
//! are copied into one buffer per batch; a body larger than
//! [`BODY_COPY_BYTES_MAX`] (a prepare's batch of records) goes out as its own
//! slice of the buffer it already lives in, never copied.
//!
//! Order: frames to one peer leave in the order the groups sent them (per
//! group, the order consensus put them out). Bounds: a peer's batch is handed
//! on as soon as it holds [`BATCH_BYTES_FLUSH`], so a turn never holds more
//! than that per peer; the bus queue's own bounds then apply to the whole
//! batch (past them it is dropped, and consensus retransmits).

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use strand_wire::Message;

use crate::metrics;
use crate::shared::Shared;

/// Bodies up to this size are copied into the batch's buffer; larger ones
/// are sent as their own slice.
pub const BODY_COPY_BYTES_MAX: usize = 1024;

/// A peer's batch is handed to its bus queue once it holds this many bytes,
/// without waiting for the end of the turn.
pub const BATCH_BYTES_FLUSH: usize = 256 * 1024;

/// Room the copy buffer is grown by: a few dozen header-only frames.
const COPY_BUFFER_GROW_BYTES: usize = 16 * 1024;

/// One peer's frames of this turn.
#[derive(Debug, Default)]
struct PeerBatch {
    /// Slices ready to go, in order (copied runs and large bodies).
    chunks: Vec<Bytes>,
    /// Frames copied since the last slice was cut.
    copied: BytesMut,
    /// Bytes in `chunks` and `copied`.
    bytes: usize,
}

impl PeerBatch {
    fn push(&mut self, message: &Message) {
        let header = message.header_bytes();
        let body = message.body();
        if self.copied.capacity() - self.copied.len() < header.len() + BODY_COPY_BYTES_MAX {
            self.copied.reserve(COPY_BUFFER_GROW_BYTES);
        }
        self.copied.extend_from_slice(header);
        if body.len() <= BODY_COPY_BYTES_MAX {
            self.copied.extend_from_slice(body);
        } else {
            self.cut();
            self.chunks.push(body.clone());
        }
        self.bytes += header.len() + body.len();
    }

    /// Ends the current copied run as a slice of its own.
    fn cut(&mut self) {
        if !self.copied.is_empty() {
            self.chunks.push(self.copied.split().freeze());
        }
    }

    /// The batch's slices, in order; the batch is left empty.
    fn take(&mut self) -> Vec<Bytes> {
        self.cut();
        debug_assert_eq!(
            self.chunks.iter().map(Bytes::len).sum::<usize>(),
            self.bytes,
            "a batch's slices hold exactly the bytes it counted"
        );
        self.bytes = 0;
        std::mem::take(&mut self.chunks)
    }
}

/// The frames a shard's groups sent to each peer node this turn.
#[derive(Debug, Default)]
pub struct Outbox {
    peers: BTreeMap<u32, PeerBatch>,
}

impl Outbox {
    /// Appends `message` to `node`'s batch; hands the batch on at once if it
    /// reached [`BATCH_BYTES_FLUSH`].
    pub fn push(&mut self, shared: &Shared, node: u32, message: &Message) {
        let batch = self.peers.entry(node).or_default();
        batch.push(message);
        if batch.bytes >= BATCH_BYTES_FLUSH {
            send(shared, node, batch.take());
        }
    }

    /// Hands every peer's batch to its bus queue.
    pub fn flush(&mut self, shared: &Shared) {
        for (node, batch) in &mut self.peers {
            if batch.bytes > 0 {
                send(shared, *node, batch.take());
            }
        }
    }
}

fn send(shared: &Shared, node: u32, chunks: Vec<Bytes>) {
    if shared.send_chunks_to_node(node, chunks).is_err() {
        metrics::bus_frame_dropped();
    }
}

#[cfg(test)]
mod tests {
    use strand_wire::{CommandHeader, CommitHeader, FrameDecoder, Msg, PrepareHeader};

    use super::*;

    fn commit(group: u64) -> Message {
        let mut header = CommitHeader::new(7, group, strand_wire::ViewId::ZERO, 1);
        header.op.set(group * 10);
        header.commit.set(group * 10);
        Message::Commit(Msg::new(header, Bytes::new()))
    }

    fn prepare(group: u64, body_bytes: usize) -> Message {
        let mut header = PrepareHeader::new(7, group, strand_wire::ViewId::ZERO, 2);
        header.op.set(1);
        header.operation = strand_wire::Operation::Produce as u8;
        Message::Prepare(Msg::new(header, Bytes::from(vec![group as u8; body_bytes])))
    }

    fn decode_all(chunks: &[Bytes]) -> Vec<Message> {
        let mut stream = BytesMut::new();
        for chunk in chunks {
            stream.extend_from_slice(chunk);
        }
        let decoder = FrameDecoder::new(u32::MAX);
        let mut messages = Vec::new();
        while let Some(message) = decoder.decode(&mut stream).expect("well-formed frames") {
            messages.push(message);
        }
        assert!(stream.is_empty(), "no partial frame left");
        messages
    }

    /// A turn's frames of many groups reach a peer's bus queue as one entry,
    /// at the flush; a batch that reaches the flush size goes at once.
    #[test]
    fn a_turn_of_many_groups_is_one_queue_entry_per_peer() {
        let config = crate::node::config::loopback_test_config(3);
        let (senders, mut receivers) = crate::net::peer_queue::queues(1, [1, 2, 3].into_iter());
        let shared = Shared::new(config, senders, strand_partition::ReadHandles::new(16), 1);
        let mut outbox = Outbox::default();
        for group in 1..=50 {
            outbox.push(&shared, 2, &commit(group));
            outbox.push(&shared, 3, &commit(group));
        }
        let to_2 = receivers.get_mut(&2).expect("a queue to node 2");
        assert!(to_2.try_recv().is_none(), "nothing leaves before the flush");
        outbox.flush(&shared);
        let entry = to_2.try_recv().expect("the turn's batch");
        assert_eq!(decode_all(&entry).len(), 50);
        assert!(to_2.try_recv().is_none(), "one entry for the whole turn");
        let to_3 = receivers.get_mut(&3).expect("a queue to node 3");
        assert_eq!(decode_all(&to_3.try_recv().expect("a batch")).len(), 50);

        let large = BATCH_BYTES_FLUSH / 4;
        for group in 1..=4 {
            outbox.push(&shared, 2, &prepare(group, large));
        }
        let to_2 = receivers.get_mut(&2).expect("a queue to node 2");
        let early = to_2
            .try_recv()
            .expect("a full batch leaves before the flush");
        assert_eq!(decode_all(&early).len(), 4);
        outbox.flush(&shared);
        assert!(to_2.try_recv().is_none(), "nothing was left behind");
    }

    /// Frames of many groups leave as one run of bytes that decodes to the
    /// same frames in the same order; a large body is its own slice of the
    /// buffer it lived in, not a copy.
    #[test]
    fn a_batch_decodes_to_its_frames_in_order_and_shares_large_bodies() {
        let mut batch = PeerBatch::default();
        let large = prepare(3, BODY_COPY_BYTES_MAX + 1);
        let sent = vec![
            commit(1),
            commit(2),
            prepare(4, 10),
            large.clone(),
            commit(5),
        ];
        for message in &sent {
            batch.push(message);
        }
        let chunks = batch.take();
        assert_eq!(chunks.len(), 3, "copied run, large body, copied run");
        assert_eq!(
            chunks[1].as_ptr(),
            large.body().as_ptr(),
            "the large body is not copied"
        );
        let received = decode_all(&chunks);
        assert_eq!(received.len(), sent.len());
        for (received, sent) in received.iter().zip(&sent) {
            assert_eq!(received.header_bytes(), sent.header_bytes());
            assert_eq!(received.body(), sent.body());
        }
        assert!(batch.take().is_empty(), "taking empties the batch");
        assert_eq!(batch.bytes, 0);
    }
}
