//! Replica-bus housekeeping: identifying a peer connection and measuring it.

use zerocopy::little_endian::{U32, U64};

use crate::command::Command;
use crate::header::{FieldError, command_header, ensure};

command_header! {
    /// First frame on a replica-bus connection, then a periodic liveness probe.
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
        ensure(body.is_empty(), "ping has a body")
    }
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
