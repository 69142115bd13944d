//! Replica-bus housekeeping: identifying a peer connection and measuring it.

use zerocopy::little_endian::{U32, U64};

use crate::command::Command;
use crate::header::{FieldError, command_header, ensure};

/// Groups one ping may list as not vouched for by its sender.
pub const PING_UNVOUCHED_GROUPS_MAX: usize = 1024;

command_header! {
    /// First frame on a replica-bus connection, then a periodic liveness probe.
    /// Its body lists the groups whose replicas on the sender are down while
    /// the sender lives (little-endian `u64` group ids, at most
    /// [`PING_UNVOUCHED_GROUPS_MAX`]): the ping vouches for every other.
    PingHeader => Command::Ping;
    /// The sending node's id.
    node: U32,
    /// The sender's monotonic clock when it sent the ping, in nanoseconds.
    ping_timestamp_ns: U64,
}

impl PingHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        ensure(self.prefix.group.get() == 0, "ping names a group")
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        ensure(body.len() % 8 == 0, "ping body is not whole group ids")?;
        ensure(
            body.len() / 8 <= PING_UNVOUCHED_GROUPS_MAX,
            "ping lists too many groups",
        )
    }
}

/// The body of a ping listing `groups` (at most [`PING_UNVOUCHED_GROUPS_MAX`]).
pub fn ping_body(groups: &[u64]) -> Vec<u8> {
    assert!(groups.len() <= PING_UNVOUCHED_GROUPS_MAX, "a bounded list");
    groups
        .iter()
        .flat_map(|group| group.to_le_bytes())
        .collect()
}

/// The groups a checked ping's body lists.
pub fn ping_groups(body: &[u8]) -> Vec<u64> {
    body.chunks_exact(8)
        .map(|chunk| u64::from_le_bytes(chunk.try_into().expect("eight bytes")))
        .collect()
}

command_header! {
    /// Answer to a ping, echoing its timestamp so the sender can measure the round trip.
    PongHeader => Command::Pong;
    /// The answering node's id.
    node: U32,
    /// The timestamp from the ping being answered.
    ping_timestamp_ns: U64,
    /// The answering node's monotonic clock, in nanoseconds.
    pong_timestamp_ns: U64,
}

impl PongHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        ensure(self.prefix.group.get() == 0, "pong names a group")
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        ensure(body.is_empty(), "pong has a body")
    }
}
