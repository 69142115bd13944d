//! The node's ping: the liveness signal a node sends each peer (also the
//! bus's opening frame), listing the groups it does not vouch for; and what
//! a peer's ping changes here (its replicas of the listed groups are
//! treated as down).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use strand_wire::{CommandHeader, Message, Msg, PingHeader};

use crate::net::replies::frame_of;
use crate::runtime::input::Input;
use crate::shared::Shared;

/// The node's ping to a peer: who it is, when it was sent, and the groups
/// it does not vouch for ([`crate::runtime::vouch`]).
pub fn ping_frame(shared: &Shared) -> Bytes {
    let mut header = PingHeader::new(shared.config.cluster, 0, strand_wire::ViewId::ZERO, 0);
    header.node.set(shared.config.node);
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    header.ping_timestamp_ns.set(now_ns);
    let body = strand_wire::ping_body(&shared.vouching.mine());
    frame_of(&Message::Ping(Msg::new(header, Bytes::from(body))))
}

/// Peer `node`'s ping listed the groups of `body` as not vouched for: each
/// group hosted here whose listing changed is told, through its shard's
/// control queue (no full inbox loses it).
pub fn take_vouching(shared: &Shared, node: u32, body: &[u8]) {
    let change = shared
        .vouching
        .peer_says(node, &strand_wire::ping_groups(body));
    let told = change
        .withdrawn
        .iter()
        .map(|group| (*group, false))
        .chain(change.restored.iter().map(|group| (*group, true)));
    for (group, vouches) in told {
        tracing::warn!(
            node,
            group,
            vouches,
            "bus: a peer's vouching for a group changed"
        );
        shared.with_group(group, |handle| {
            handle
                .inbox
                .send_control(Input::PeerVouch { node, vouches })
        });
    }
}
