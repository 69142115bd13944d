//! What one client connection may cost the node, and how many there may be.
//!
//! - **Reply bytes.** Replies to a connection wait in its queue until its
//!   writer sends them. The queue counts their bytes: above
//!   [`REPLY_BYTES_PAUSE`] the node stops reading the connection's requests
//!   (back-pressure: a client that does not read its replies stops being
//!   read), and a reply that would take the queue past
//!   [`REPLY_BYTES_MAX`] is answered `Busy` instead (a small frame; the
//!   client asks again). A connection's replies never hold more than that.
//! - **Connections.** At most `client_connections_max` at once on the node
//!   and `client_connections_per_address_max` from one address; one more
//!   is closed at once and counted. The node's open-files limit is split
//!   so that these sockets never take the WAL's descriptors
//!   ([`crate::node::limits::DescriptorBudget`]).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use strand_wire::ops::ErrorBody;
use strand_wire::{CommandHeader, HEADER_SIZE, Msg, ReplyHeader, ResultCode};
use tokio::sync::{Notify, mpsc};
use zerocopy::FromBytes;

/// Queued reply bytes above which the node stops reading the connection.
pub const REPLY_BYTES_PAUSE: u64 = 32 * 1024 * 1024;

/// Queued reply bytes a reply may not take the queue past (it is answered
/// `Busy` instead).
pub const REPLY_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// The retry hint of a reply answered `Busy` for a full queue.
const FULL_RETRY_AFTER_MS: u32 = 100;

/// The sending side of one connection's reply queue: frames and their bytes.
#[derive(Clone, Debug)]
pub struct ConnectionSender {
    frames: mpsc::Sender<Bytes>,
    outbound: Arc<Outbound>,
}

/// The writer's side of one connection's reply queue.
#[derive(Debug)]
pub struct ConnectionReceiver {
    frames: mpsc::Receiver<Bytes>,
    outbound: Arc<Outbound>,
}

#[derive(Debug, Default)]
struct Outbound {
    queued_bytes: AtomicU64,
    room: Notify,
    /// The user the connection signed in as: its fetch replies count
    /// against that user's fetch quota.
    user: Mutex<Option<String>>,
    /// Requests the node delayed for a quota, and by how many ms: their
    /// replies say so. The newest [`THROTTLED_KEPT`].
    throttled: Mutex<VecDeque<((u128, u64), u32)>>,
}

/// Delayed requests a connection remembers until their replies leave.
const THROTTLED_KEPT: usize = 1024;

/// A reply queue of `capacity` frames.
pub fn reply_queue(capacity: usize) -> (ConnectionSender, ConnectionReceiver) {
    let (sender, receiver) = mpsc::channel(capacity);
    let outbound = Arc::new(Outbound::default());
    (
        ConnectionSender {
            frames: sender,
            outbound: Arc::clone(&outbound),
        },
        ConnectionReceiver {
            frames: receiver,
            outbound,
        },
    )
}

impl ConnectionSender {
    /// Queues `frame` without waiting; a reply that would take the queue
    /// past [`REPLY_BYTES_MAX`] is queued as `Busy` instead.
    pub fn try_send(&self, frame: Bytes) -> Result<(), mpsc::error::TrySendError<Bytes>> {
        let queued = self.outbound.queued_bytes.load(Ordering::Relaxed);
        let frame = match queued + frame.len() as u64 > REPLY_BYTES_MAX {
            true => busy_instead(&frame).unwrap_or(frame),
            false => frame,
        };
        let size = frame.len() as u64;
        self.outbound
            .queued_bytes
            .fetch_add(size, Ordering::Relaxed);
        self.frames.try_send(frame).inspect_err(|_| {
            self.outbound
                .queued_bytes
                .fetch_sub(size, Ordering::Relaxed);
        })
    }

    /// Whether both send to the same connection.
    pub fn same_channel(&self, other: &ConnectionSender) -> bool {
        self.frames.same_channel(&other.frames)
    }

    /// Reply bytes queued and not yet written.
    pub fn queued_bytes(&self) -> u64 {
        self.outbound.queued_bytes.load(Ordering::Relaxed)
    }

    /// The connection signed in as `user`.
    pub fn set_user(&self, user: Option<String>) {
        *self.outbound.user.lock().expect("connection lock") = user;
    }

    /// Request `request` of `client` waited `throttle_ms` for a quota: its
    /// reply will say so.
    pub fn note_throttle(&self, client: u128, request: u64, throttle_ms: u32) {
        let mut throttled = self.outbound.throttled.lock().expect("connection lock");
        if throttled.len() >= THROTTLED_KEPT {
            throttled.pop_front();
        }
        throttled.push_back(((client, request), throttle_ms));
    }

    /// Waits until the queued replies are at most [`REPLY_BYTES_PAUSE`].
    pub async fn room(&self) {
        loop {
            let room = self.outbound.room.notified();
            if self.queued_bytes() <= REPLY_BYTES_PAUSE {
                return;
            }
            room.await;
        }
    }
}

impl ConnectionReceiver {
    /// The frame queue, for the writer to take from.
    pub fn frames(&mut self) -> &mut mpsc::Receiver<Bytes> {
        &mut self.frames
    }

    /// The user the connection signed in as, if any.
    pub fn user(&self) -> Option<String> {
        self.outbound.user.lock().expect("connection lock").clone()
    }

    /// `frame` as it leaves: with its `throttle_ms` filled in when its
    /// request was delayed for a quota (the header resealed; the body is
    /// the same bytes), as one or two slices.
    pub fn stamped(&self, frame: Bytes) -> (Bytes, Option<Bytes>) {
        let Ok((reply, _)) = ReplyHeader::read_from_prefix(&frame) else {
            return (frame, None);
        };
        let key = (reply.client.get(), reply.request.get());
        let throttle_ms = {
            let mut throttled = self.outbound.throttled.lock().expect("connection lock");
            if throttled.is_empty() {
                return (frame, None);
            }
            let Some(at) = throttled.iter().position(|(noted, _)| *noted == key) else {
                return (frame, None);
            };
            throttled.remove(at).map_or(0, |(_, ms)| ms)
        };
        let mut header = [0u8; HEADER_SIZE];
        header.copy_from_slice(&frame[..HEADER_SIZE]);
        let Ok(reply) = ReplyHeader::mut_from_bytes(&mut header) else {
            return (frame, None);
        };
        reply.throttle_ms.set(throttle_ms);
        let sum = strand_wire::checksum::checksum(&header[4..]);
        header[..4].copy_from_slice(&sum.to_le_bytes());
        let body = frame.slice(HEADER_SIZE..);
        (Bytes::copy_from_slice(&header), Some(body))
    }

    /// The writer sent `bytes` of queued frames: room for more.
    pub fn written(&self, bytes: u64) {
        let before = self
            .outbound
            .queued_bytes
            .fetch_sub(bytes, Ordering::Relaxed);
        assert!(before >= bytes, "written {bytes} bytes of {before} queued");
        self.outbound.room.notify_waiters();
    }
}

/// A `Busy` reply in place of the reply `frame`, if it is one.
fn busy_instead(frame: &[u8]) -> Option<Bytes> {
    let (reply, _) = ReplyHeader::read_from_prefix(frame).ok()?;
    let prefix = &reply.prefix;
    let mut header = ReplyHeader::new(
        prefix.cluster.get(),
        prefix.group.get(),
        strand_wire::ViewId::ZERO,
        0,
    );
    header.client = reply.client;
    header.request = reply.request;
    header.operation = reply.operation;
    header.result.set(ResultCode::Busy as u16);
    let body = ErrorBody::Busy {
        retry_after_ms: FULL_RETRY_AFTER_MS,
    };
    crate::metrics::reply_busy_queue_full();
    Some(Msg::new(header, Bytes::from(body.to_vec())).to_bytes())
}

/// The node's count of client connections, in all and per address.
#[derive(Debug)]
pub struct Connections {
    max: usize,
    per_address_max: usize,
    open: AtomicUsize,
    by_address: Mutex<HashMap<IpAddr, usize>>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TooMany {
    /// The node holds its most connections.
    Node,
    /// This address holds its most connections.
    Address,
}

/// One admitted connection; counted until dropped.
#[derive(Debug)]
pub struct Admitted {
    connections: Arc<Connections>,
    address: IpAddr,
}

impl Connections {
    /// At most `max` connections, `per_address_max` from one address.
    pub fn new(max: usize, per_address_max: usize) -> Arc<Connections> {
        assert!(max >= 1 && per_address_max >= 1, "room for a connection");
        Arc::new(Connections {
            max,
            per_address_max,
            open: AtomicUsize::new(0),
            by_address: Mutex::new(HashMap::new()),
        })
    }

    /// Admits a connection from `address`, or says why not.
    pub fn admit(self: &Arc<Connections>, address: IpAddr) -> Result<Admitted, TooMany> {
        let mut by_address = self.by_address.lock().expect("connections lock");
        if self.open.load(Ordering::Relaxed) >= self.max {
            return Err(TooMany::Node);
        }
        let from_address = by_address.entry(address).or_default();
        if *from_address >= self.per_address_max {
            return Err(TooMany::Address);
        }
        *from_address += 1;
        let open = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        assert!(
            open <= self.max,
            "{open} connections open past the bound {}",
            self.max
        );
        crate::metrics::client_connections(self.open.load(Ordering::Relaxed));
        Ok(Admitted {
            connections: Arc::clone(self),
            address,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let connections = &self.connections;
        let mut by_address = connections.by_address.lock().expect("connections lock");
        if let Some(count) = by_address.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                by_address.remove(&self.address);
            }
        }
        let open = connections.open.fetch_sub(1, Ordering::Relaxed) - 1;
        crate::metrics::client_connections(open);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::{Message, RequestHeader};

    fn reply_of(bytes: usize) -> Bytes {
        let mut request = RequestHeader::new(0, 3, strand_wire::ViewId::ZERO, 0);
        request.client.set(9);
        request.request.set(4);
        request.operation = strand_wire::Operation::Fetch as u8;
        crate::net::replies::reply_frame(&request, ResultCode::Ok, Bytes::from(vec![1u8; bytes]))
    }

    #[tokio::test]
    async fn replies_past_the_bound_are_answered_busy_and_reading_waits_for_room() {
        let (sender, mut receiver) = reply_queue(1024);
        let big = reply_of(8 << 20);
        for _ in 0..7 {
            sender.try_send(big.clone()).expect("room");
        }
        assert!(sender.queued_bytes() > REPLY_BYTES_PAUSE);
        sender.try_send(big.clone()).expect("room");
        assert!(
            sender.queued_bytes() <= REPLY_BYTES_MAX,
            "the eighth is Busy"
        );
        let mut frames = Vec::new();
        while let Ok(frame) = receiver.frames().try_recv() {
            frames.push(frame);
        }
        let last = frames.last().expect("frames");
        let mut buffer = bytes::BytesMut::from(&last[..]);
        let decoded = strand_wire::FrameDecoder::new(1 << 20)
            .decode(&mut buffer)
            .expect("valid")
            .expect("whole");
        let Message::Reply(reply) = decoded else {
            panic!("a reply");
        };
        assert_eq!(reply.header().result(), ResultCode::Busy);
        assert_eq!(reply.header().request.get(), 4);
        let waiting = tokio::spawn({
            let sender = sender.clone();
            async move { sender.room().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "no room yet");
        let total: u64 = frames.iter().map(|frame| frame.len() as u64).sum();
        receiver.written(total);
        waiting.await.expect("room after the writer sent them");
    }

    #[test]
    fn connections_are_bounded_in_all_and_per_address() {
        let connections = Connections::new(3, 2);
        let one: IpAddr = "10.0.0.1".parse().expect("address");
        let two: IpAddr = "10.0.0.2".parse().expect("address");
        let a = connections.admit(one).expect("first");
        let _b = connections.admit(one).expect("second");
        assert_eq!(connections.admit(one).err(), Some(TooMany::Address));
        let _c = connections.admit(two).expect("another address");
        assert_eq!(connections.admit(two).err(), Some(TooMany::Node));
        drop(a);
        assert_eq!(connections.open(), 2);
        connections.admit(one).expect("room again");
    }
}
