//! What a group's actor receives, through its shard's inbox or control
//! queue: the one input type every sender (the bus, the client port, the
//! node, the shard itself) hands a group.

use strand_wire::{Message, Msg, RequestHeader};

/// What a group's actor receives.
#[derive(Debug)]
pub enum Input {
    /// A frame from a peer replica of this group.
    Peer(Message),
    /// A client request addressed to this group.
    Request(Msg<RequestHeader>),
    /// An operator's accept-loss for this group (the request came to group 0).
    AcceptLoss(Msg<RequestHeader>),
    /// The WAL completed something: poll storage.
    Storage,
    /// The metadata plane changed the group's assignment (taken from the
    /// handle's placement mailbox).
    Placement,
    /// Stop: finish in-flight work, close storage, exit.
    Shutdown,
    /// A peer node's ping stopped or started vouching for its replica of
    /// this group (see [`crate::runtime::vouch`]).
    PeerVouch {
        /// The peer.
        node: u32,
        /// Whether it vouches for it now.
        vouches: bool,
    },
    /// A test asked this group's code to panic (see
    /// the injection file of the runtime's `contain`).
    #[cfg(feature = "fault-injection")]
    InjectPanic,
}
