//! The replica bus's outbound queues, one per peer: bounded in entries and
//! bytes, and counted, so that a group's actor never waits on the network
//! and a primary can see how much waits for a backup before it admits more
//! work for it. The bus's writers drain them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::refused::Refused;

/// Entries queued to one peer at most: a frame, or a shard's batch of
/// frames of one turn (the shard's outbox).
pub const PEER_QUEUE_CAPACITY: usize = 16 * 1024;

/// Bytes queued to one peer at most: a frame or batch that would go past it
/// is dropped whole (consensus retransmits), so a peer that stopped reading, or is
/// gone, holds at most this much of the node's memory.
pub const PEER_QUEUE_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// Bytes queued to a peer past which a primary takes no new produce for a
/// group that needs that peer to commit: the client port stops reading the
/// connection until the queue drains (TCP pushes back on the producer). A
/// prepare admitted below it waits at most this much ahead of it, tens of
/// milliseconds on a loopback link, well inside a backup's primary timeout;
/// without it a burst of large batches queued hundreds of megabytes, seconds
/// of delay, and the backups left the view.
pub const PEER_QUEUE_BYTES_ADMIT: u64 = 8 * 1024 * 1024;

/// The sending side of one peer's outbound queue, with the bytes it holds:
/// the frames wait here until the peer's writer takes them, and the count
/// is what a primary checks before it admits more work for that peer. An
/// entry is a batch of slices (a shard's frames to the peer in one turn,
/// the shard's outbox), written in order.
#[derive(Debug, Clone)]
pub struct PeerSender {
    sender: mpsc::Sender<Vec<Bytes>>,
    queued_bytes: Arc<AtomicU64>,
}

impl PeerSender {
    /// Queues one frame without waiting; a full queue refuses it.
    pub fn try_send(&self, frame: Bytes) -> Result<(), Refused> {
        self.try_send_chunks(vec![frame])
    }

    /// Queues a batch of slices without waiting; a full queue refuses the
    /// whole batch.
    pub fn try_send_chunks(&self, chunks: Vec<Bytes>) -> Result<(), Refused> {
        let size = chunks_bytes(&chunks);
        // Counted before the batch can be taken, so the writer never
        // subtracts what was not added.
        let before = self.queued_bytes.fetch_add(size, Ordering::Relaxed);
        if before + size > PEER_QUEUE_BYTES_MAX {
            self.queued_bytes.fetch_sub(size, Ordering::Relaxed);
            return Err(Refused::Full);
        }
        match self.sender.try_send(chunks) {
            Ok(()) => Ok(()),
            Err(error) => {
                self.queued_bytes.fetch_sub(size, Ordering::Relaxed);
                match error {
                    mpsc::error::TrySendError::Full(_) => Err(Refused::Full),
                    mpsc::error::TrySendError::Closed(_) => Err(Refused::Gone),
                }
            }
        }
    }

    /// Bytes queued and not yet taken by the writer.
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes.load(Ordering::Relaxed)
    }
}

fn chunks_bytes(chunks: &[Bytes]) -> u64 {
    chunks.iter().map(|chunk| chunk.len() as u64).sum()
}

/// The receiving side of one peer's outbound queue (see [`PeerSender`]).
#[derive(Debug)]
pub struct PeerReceiver {
    receiver: mpsc::Receiver<Vec<Bytes>>,
    queued_bytes: Arc<AtomicU64>,
}

impl PeerReceiver {
    /// The next batch queued, once one is.
    pub(crate) async fn recv(&mut self) -> Option<Vec<Bytes>> {
        let chunks = self.receiver.recv().await?;
        self.taken(&chunks);
        Some(chunks)
    }

    /// The next batch queued, if one is ready.
    pub(crate) fn try_recv(&mut self) -> Option<Vec<Bytes>> {
        let chunks = self.receiver.try_recv().ok()?;
        self.taken(&chunks);
        Some(chunks)
    }

    fn taken(&self, chunks: &[Bytes]) {
        self.queued_bytes
            .fetch_sub(chunks_bytes(chunks), Ordering::Relaxed);
    }
}

/// The outbound queues, one per peer: senders for the node's shared state,
/// receivers for the bus's writers.
pub fn queues(
    me: u32,
    peers: impl Iterator<Item = u32>,
) -> (BTreeMap<u32, PeerSender>, BTreeMap<u32, PeerReceiver>) {
    let mut senders = BTreeMap::new();
    let mut receivers = BTreeMap::new();
    for peer in peers.filter(|peer| *peer != me) {
        let (sender, receiver) = mpsc::channel(PEER_QUEUE_CAPACITY);
        let queued_bytes = Arc::new(AtomicU64::new(0));
        senders.insert(
            peer,
            PeerSender {
                sender,
                queued_bytes: Arc::clone(&queued_bytes),
            },
        );
        receivers.insert(
            peer,
            PeerReceiver {
                receiver,
                queued_bytes,
            },
        );
    }
    (senders, receivers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(size: usize) -> Bytes {
        Bytes::from(vec![7u8; size])
    }

    #[tokio::test]
    async fn a_peer_queue_counts_its_bytes_until_the_writer_takes_them() {
        let (senders, mut receivers) = queues(1, [1, 2].into_iter());
        let sender = &senders[&2];
        let receiver = receivers.get_mut(&2).expect("a queue to node 2");
        sender.try_send(frame(1000)).expect("room");
        sender.try_send(frame(500)).expect("room");
        assert_eq!(sender.queued_bytes(), 1500);
        assert_eq!(
            receiver.recv().await.map(|chunks| chunks_bytes(&chunks)),
            Some(1000)
        );
        assert_eq!(sender.queued_bytes(), 500);
        assert_eq!(
            receiver.try_recv().map(|chunks| chunks_bytes(&chunks)),
            Some(500)
        );
        assert_eq!(sender.queued_bytes(), 0);
    }

    /// A peer that stopped reading holds a bounded share of the node's
    /// memory, whatever the size of the frames queued to it.
    #[test]
    fn a_peer_queue_refuses_frames_past_its_byte_bound() {
        let (senders, _receivers) = queues(1, [1, 2].into_iter());
        let sender = &senders[&2];
        let frame_size = 1024 * 1024;
        let fits = PEER_QUEUE_BYTES_MAX as usize / frame_size;
        for _ in 0..fits {
            sender
                .try_send(frame(frame_size))
                .expect("within the bound");
        }
        assert!(matches!(
            sender.try_send(frame(frame_size)),
            Err(Refused::Full)
        ));
        assert_eq!(sender.queued_bytes(), PEER_QUEUE_BYTES_MAX);
        sender
            .try_send(Bytes::new())
            .expect("an empty frame still fits");
    }
}
