//! A shard's queues, and a group's inbox in them: how every other task
//! hands a group its inputs without waiting.
//!
//! Bounds: a shard's inbox holds [`SHARD_INBOX_CAPACITY`] inputs for all
//! its groups together (peer frames beyond it are dropped, consensus
//! retransmits; client requests beyond it are answered `Busy` by the
//! caller). Starting and stopping groups, and the rare inputs that must
//! arrive, go through an unbounded control queue instead, so that no full
//! inbox loses them. The inbox's backlog is counted in bytes, requests and
//! peer frames apart, for the client port and the bus readers to push back
//! on ([`SHARD_REQUEST_BYTES_ADMIT`], [`SHARD_PEER_BYTES_ADMIT`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, TrySendError, channel, sync_channel};

use strand_wal::Wal;
use tokio::sync::mpsc::UnboundedSender;

use crate::group::spec::GroupSpec;
use crate::metadata::hosted::Hosted;
use crate::refused::Refused;
use crate::runtime::input::Input;

/// Inputs one shard's inbox holds at most, for all its groups.
pub const SHARD_INBOX_CAPACITY: usize = 16_384;

/// Bytes of client requests a shard's inbox may hold before the client port
/// stops reading the connections that send it more: peer frames (prepares,
/// acks, commits) share the inbox, and a backup that found its primary's
/// prepare behind a gigabyte of requests for its own groups took the primary
/// for silent. Held below it, a turn's backlog is tens of milliseconds.
pub const SHARD_REQUEST_BYTES_ADMIT: u64 = 8 * 1024 * 1024;

/// Bytes of peer frames a shard's inbox may hold before the bus readers stop
/// reading the peers that send it more (TCP then pushes back on their
/// writers, their bus queues fill, and their primaries stop admitting
/// produces): prepares from other nodes' primaries would otherwise pile up
/// here faster than this shard writes them, and the backups' timers would
/// run out behind the pile.
pub const SHARD_PEER_BYTES_ADMIT: u64 = 16 * 1024 * 1024;

/// A group's inbox: its shard's, addressed to the group.
#[derive(Clone)]
pub struct GroupInbox {
    group: u64,
    shard: SyncSender<(u64, Input)>,
    control: Sender<Control>,
    /// Bytes of client requests and of peer frames in the shard's inbox
    /// (all its groups).
    backlog: Arc<Backlog>,
}

/// Bytes waiting in one shard's inbox, by where they came from.
#[derive(Debug, Default)]
pub struct Backlog {
    requests: AtomicU64,
    peers: AtomicU64,
}

impl Backlog {
    fn add(&self, input: &Input) {
        let (requests, peers) = input_bytes(input);
        self.requests.fetch_add(requests, Ordering::Relaxed);
        self.peers.fetch_add(peers, Ordering::Relaxed);
    }

    /// `input` left the inbox (the shard took it, or the inbox refused it).
    pub(crate) fn remove(&self, input: &Input) {
        let (requests, peers) = input_bytes(input);
        let requests_before = self.requests.fetch_sub(requests, Ordering::Relaxed);
        let peers_before = self.peers.fetch_sub(peers, Ordering::Relaxed);
        assert!(
            requests_before >= requests && peers_before >= peers,
            "an input left the inbox that was never counted in it"
        );
    }
}

impl GroupInbox {
    /// `group`'s inbox in the shard behind `queues`.
    pub(crate) fn new(group: u64, queues: &ShardQueues) -> GroupInbox {
        GroupInbox {
            group,
            shard: queues.inbox.clone(),
            control: queues.control.clone(),
            backlog: Arc::clone(&queues.backlog),
        }
    }

    /// Tells the group its placement mailbox holds a new assignment, on the
    /// control queue: no full inbox loses it (the group may be quiet, with
    /// no tick to look for it).
    pub fn placement_changed(&self) {
        let _ = self
            .control
            .send(Control::Deliver(self.group, Input::Placement));
        let _ = self.shard.try_send((self.group, Input::Storage));
    }

    /// Hands `input` to the group on the control queue: never lost to a
    /// full inbox (for rare inputs that must arrive).
    pub fn send_control(&self, input: Input) {
        let _ = self.control.send(Control::Deliver(self.group, input));
        let _ = self.shard.try_send((self.group, Input::Storage));
    }

    /// Hands `input` to the group without blocking.
    pub fn try_send(&self, input: Input) -> Result<(), Refused> {
        self.backlog.add(&input);
        self.shard
            .try_send((self.group, input))
            .map_err(|error| match error {
                TrySendError::Full((_, input)) => {
                    self.backlog.remove(&input);
                    Refused::Full
                }
                TrySendError::Disconnected((_, input)) => {
                    self.backlog.remove(&input);
                    Refused::Gone
                }
            })
    }

    /// Whether the shard's inbox holds more client request bytes than
    /// [`SHARD_REQUEST_BYTES_ADMIT`].
    pub fn requests_backed_up(&self) -> bool {
        self.backlog.requests.load(Ordering::Relaxed) > SHARD_REQUEST_BYTES_ADMIT
    }

    /// Whether the shard's inbox holds more peer frame bytes than
    /// [`SHARD_PEER_BYTES_ADMIT`].
    pub fn peers_backed_up(&self) -> bool {
        self.backlog.peers.load(Ordering::Relaxed) > SHARD_PEER_BYTES_ADMIT
    }
}

/// The bytes `input` counts toward its shard's backlog: (client requests,
/// peer frames).
fn input_bytes(input: &Input) -> (u64, u64) {
    match input {
        Input::Request(request) => (request.body().len() as u64, 0),
        Input::Peer(message) => (0, u64::from(message.prefix().size.get())),
        _ => (0, 0),
    }
}

/// What a shard is told outside its inbox.
pub(crate) enum Control {
    /// Open a group's actor and host it.
    Start(Box<Start>),
    /// An input that must not be lost to a full inbox.
    Deliver(u64, Input),
    /// A peer node's liveness changed.
    Liveness { node: u32, alive: bool },
    /// Close every group and exit.
    Stop,
}

/// A group to open on a shard: what opening it (again) takes.
pub(crate) struct Start {
    /// The group as its latest assignment says.
    pub(crate) spec: GroupSpec,
    /// The node's WAL writer.
    pub(crate) wal: Wal,
    /// For the metadata plane only: where its actor tells the node of the
    /// partitions hosted here.
    pub(crate) hosted: Option<UnboundedSender<Hosted>>,
}

/// One shard's queues, as the node and the shard hold them.
#[derive(Clone)]
pub(crate) struct ShardQueues {
    /// The bounded inbox of every group of the shard.
    pub(crate) inbox: SyncSender<(u64, Input)>,
    /// The unbounded control queue.
    pub(crate) control: Sender<Control>,
    /// Bytes waiting in the inbox.
    pub(crate) backlog: Arc<Backlog>,
}

impl ShardQueues {
    /// A shard's queues, and the receiving ends its thread reads.
    pub(crate) fn new() -> (ShardQueues, Receiver<(u64, Input)>, Receiver<Control>) {
        let (inbox, inputs) = sync_channel(SHARD_INBOX_CAPACITY);
        let (control, controls) = channel();
        let queues = ShardQueues {
            inbox,
            control,
            backlog: Arc::new(Backlog::default()),
        };
        (queues, inputs, controls)
    }

    /// Hands the shard `control`, then wakes it (it also looks at its
    /// control queue every tick). False if the shard is gone.
    pub(crate) fn send_control(&self, control: Control) -> bool {
        let sent = self.control.send(control).is_ok();
        let _ = self.inbox.try_send((u64::MAX, Input::Storage));
        sent
    }
}

/// Tells every shard of a peer node's liveness changes.
#[derive(Clone)]
pub struct LivenessNotifier {
    queues: Vec<ShardQueues>,
}

impl LivenessNotifier {
    /// A notifier to the shards behind `queues`.
    pub(crate) fn new(queues: Vec<ShardQueues>) -> LivenessNotifier {
        LivenessNotifier { queues }
    }

    /// Peer `node` is suspected (`alive` false) or heard again.
    pub fn liveness(&self, node: u32, alive: bool) {
        for queues in &self.queues {
            queues.send_control(Control::Liveness { node, alive });
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use strand_wire::{CommandHeader, Msg, Operation, RequestHeader, ViewId};

    use super::*;

    fn produce(body_bytes: usize) -> Input {
        let mut header = RequestHeader::new(0, 0, ViewId::ZERO, 0);
        header.operation = Operation::Produce as u8;
        header.client.set(5);
        header.request.set(1);
        Input::Request(Msg::new(header, Bytes::from(vec![0u8; body_bytes])))
    }

    fn inbox(capacity: usize) -> (GroupInbox, Receiver<(u64, Input)>) {
        let (shard, inputs) = sync_channel(capacity);
        let (control, _controls) = channel();
        let inbox = GroupInbox {
            group: 9,
            shard,
            control,
            backlog: Arc::new(Backlog::default()),
        };
        (inbox, inputs)
    }

    /// A shard's inbox counts the client request bytes it holds, so the
    /// client port can stop reading before a backlog of requests delays the
    /// peers' frames behind it; frames from peers do not count.
    #[test]
    fn a_shard_inbox_counts_the_request_bytes_it_holds() {
        let (inbox, inputs) = inbox(64);
        let half = SHARD_REQUEST_BYTES_ADMIT as usize / 2;
        inbox.try_send(produce(half)).expect("room");
        inbox.try_send(Input::Storage).expect("room");
        assert!(!inbox.requests_backed_up());
        inbox.try_send(produce(half + 1)).expect("room");
        assert!(inbox.requests_backed_up());
        let (_, first) = inputs.recv().expect("an input");
        inbox.backlog.remove(&first);
        assert!(!inbox.requests_backed_up());
        assert!(!inbox.peers_backed_up());
    }

    /// A request refused by a full inbox is not counted.
    #[test]
    fn a_refused_request_is_not_counted() {
        let (inbox, _inputs) = inbox(1);
        inbox.try_send(produce(10)).expect("room");
        assert!(matches!(inbox.try_send(produce(20)), Err(Refused::Full)));
        assert_eq!(inbox.backlog.requests.load(Ordering::Relaxed), 10);
    }
}
