//! Requests as frames, replies as values: the only place the SDK touches
//! `strand_wire` headers. Pure: no I/O.

use bytes::{Bytes, BytesMut};
use strand_wire::ops::ErrorBody;
use strand_wire::{CommandHeader, Msg, Operation, ReplyHeader, RequestHeader, ResultCode, ViewId};

/// Names one TCP connection attempt for the lifetime of the client; replies
/// and losses are attributed to it.
pub type ConnectionId = u64;

/// A reply, taken apart: who it is for and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The connection it arrived on.
    pub connection: ConnectionId,
    /// The group in the reply's prefix (the group the request was sent to).
    pub group: u64,
    /// The client id it answers.
    pub client: u128,
    /// The request number it answers.
    pub request: u64,
    /// The op the request committed at; 0 when it was not prepared (so its
    /// request number was not consumed).
    pub op: u64,
    /// The answering replica's commit number; for a metadata answer, the
    /// metadata op its catalog reflects.
    pub commit: u64,
    /// The operation answered.
    pub operation: Operation,
    /// The outcome.
    pub body: ReplyBody,
}

/// What a reply says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyBody {
    /// `ResultCode::Ok`: the operation's reply body, still encoded.
    Ok(Bytes),
    /// An error result with its decoded body.
    Error(ErrorBody),
    /// An error result whose body could not be decoded.
    Malformed(String),
}

/// Builds and seals one request frame.
pub fn request_frame(
    cluster: u64,
    group: u64,
    client: u128,
    request: u64,
    operation: Operation,
    body: &Bytes,
) -> FrameParts {
    assert!(client != 0, "client id 0 is reserved");
    assert!(request != 0, "request numbers count from 1");
    let mut header = RequestHeader::new(cluster, group, ViewId::new(0, 0), 0);
    header.client.set(client);
    header.request.set(request);
    header.operation = operation as u8;
    let message = Msg::new(header, body.clone());
    FrameParts {
        header: Bytes::copy_from_slice(message.header_bytes()),
        body: message.body().clone(),
    }
}

/// A frame to send, as its header and its body: the connection writes both
/// as slices of one vectored write, so a produce's batch, encoded once, is
/// never copied into a frame buffer (with thousands of partitions in
/// flight, those buffers were fresh memory the kernel zeroed page by page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameParts {
    /// The encoded header (its checksum covers the body).
    pub header: Bytes,
    /// The body, shared with the request that carries it.
    pub body: Bytes,
}

impl FrameParts {
    /// The whole frame in one buffer (a copy: for the sign-in frame, sent
    /// once per connection).
    pub fn to_bytes(&self) -> Bytes {
        let mut frame = BytesMut::with_capacity(self.header.len() + self.body.len());
        frame.extend_from_slice(&self.header);
        frame.extend_from_slice(&self.body);
        frame.freeze()
    }
}

/// Takes a validated reply frame apart.
pub fn parse_reply(connection: ConnectionId, reply: &Msg<ReplyHeader>) -> Reply {
    let header = reply.header();
    let result = header.result();
    let body = if result == ResultCode::Ok {
        ReplyBody::Ok(reply.body().clone())
    } else {
        match ErrorBody::from_bytes(result, reply.body()) {
            Ok(error) => ReplyBody::Error(error),
            Err(error) => ReplyBody::Malformed(format!("{result:?} reply body: {error}")),
        }
    };
    Reply {
        connection,
        group: header.prefix.group.get(),
        client: header.client.get(),
        request: header.request.get(),
        op: header.op.get(),
        commit: header.commit.get(),
        operation: header.operation(),
        body,
    }
}

/// Builds a reply frame the way a server does (tests).
#[cfg(test)]
pub fn reply_frame(
    cluster: u64,
    group: u64,
    client: u128,
    request: u64,
    operation: Operation,
    op: u64,
    result: Result<Bytes, ErrorBody>,
) -> Msg<ReplyHeader> {
    let mut header = ReplyHeader::new(cluster, group, ViewId::new(0, 0), 0);
    header.client.set(client);
    header.request.set(request);
    header.operation = operation as u8;
    header.op.set(op);
    header.commit.set(op);
    let body = match result {
        Ok(body) => {
            header.result.set(ResultCode::Ok as u16);
            body
        }
        Err(error) => {
            header.result.set(error.code() as u16);
            Bytes::from(error.to_vec())
        }
    };
    Msg::new(header, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use strand_wire::{FrameDecoder, Message};

    #[test]
    fn request_frames_decode_with_their_numbers() {
        let frame = request_frame(9, 42, 7, 3, Operation::Produce, &Bytes::from_static(b"x"));
        let mut buffer = BytesMut::from(&frame.to_bytes()[..]);
        let decoded = FrameDecoder::default().decode(&mut buffer);
        let Ok(Some(Message::Request(request))) = decoded else {
            panic!("a request frame: {decoded:?}");
        };
        assert_eq!(request.header().prefix.cluster.get(), 9);
        assert_eq!(request.header().prefix.group.get(), 42);
        assert_eq!(request.header().client.get(), 7);
        assert_eq!(request.header().request.get(), 3);
        assert_eq!(request.header().operation(), Operation::Produce);
    }

    #[test]
    fn error_replies_parse_to_their_bodies() {
        let reply = reply_frame(
            0,
            5,
            7,
            3,
            Operation::Produce,
            0,
            Err(ErrorBody::OutOfOrder { expected: 2 }),
        );
        let parsed = parse_reply(1, &reply);
        assert_eq!(
            parsed.body,
            ReplyBody::Error(ErrorBody::OutOfOrder { expected: 2 })
        );
        assert_eq!(
            (parsed.group, parsed.client, parsed.request, parsed.op),
            (5, 7, 3, 0)
        );
    }
}
