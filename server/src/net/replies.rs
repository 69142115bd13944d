//! Building reply frames for requests the node answers itself (fetches,
//! cursors, status, refusals), and rewriting redirects with addresses.

use bytes::{Bytes, BytesMut};
use strand_wire::ops::ErrorBody;
use strand_wire::{CommandHeader, Message, Msg, ReplyHeader, RequestHeader, ResultCode};

/// A reply to `request` with `result` and `body`, as a frame.
pub fn reply_frame(request: &RequestHeader, result: ResultCode, body: Bytes) -> Bytes {
    reply_frame_as_of(request, result, body, 0)
}

/// A reply to a query answered from the group's state as of its op
/// `commit` (in the header's commit field; a client that saw a later op of
/// the group asks again).
pub fn reply_frame_as_of(
    request: &RequestHeader,
    result: ResultCode,
    body: Bytes,
    commit: u64,
) -> Bytes {
    let prefix = &request.prefix;
    let mut header = ReplyHeader::new(
        prefix.cluster.get(),
        prefix.group.get(),
        strand_wire::ViewId::ZERO,
        0,
    );
    header.client = request.client;
    header.request = request.request;
    header.operation = request.operation;
    header.commit.set(commit);
    header.result.set(result as u16);
    Msg::new(header, body).to_bytes()
}

/// An error reply to `request`.
pub fn error_frame(request: &RequestHeader, error: &ErrorBody) -> Bytes {
    reply_frame(request, error.code(), Bytes::from(error.to_vec()))
}

/// Encodes any frame.
pub fn frame_of(message: &Message) -> Bytes {
    let mut out = BytesMut::with_capacity(message.prefix().frame_size());
    message.encode_into(&mut out);
    out.freeze()
}

/// Fills a `NotPrimary` reply's node and address from the group's replica
/// set, so the client goes straight to the primary. Other replies pass.
pub fn with_redirect(
    reply: Msg<ReplyHeader>,
    slots: &[Option<u32>],
    address_of: impl Fn(u32) -> Option<String>,
) -> Msg<ReplyHeader> {
    if reply.header().result.get() != ResultCode::NotPrimary as u16 {
        return reply;
    }
    let Ok(ErrorBody::NotPrimary {
        view,
        primary_replica,
        ..
    }) = ErrorBody::from_bytes(ResultCode::NotPrimary, reply.body())
    else {
        return reply;
    };
    let Some(node) = slots.get(usize::from(primary_replica)).copied().flatten() else {
        return reply;
    };
    let body = ErrorBody::NotPrimary {
        view,
        primary_replica,
        primary_node: node,
        address: address_of(node).unwrap_or_default(),
    };
    let (header, _) = reply.into_parts();
    Msg::new(header, Bytes::from(body.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::Operation;

    #[test]
    fn redirects_name_the_primary_node_and_address() {
        let mut header = ReplyHeader::new(1, 5, strand_wire::ViewId::new(0, 3), 0);
        header.client.set(9);
        header.request.set(1);
        header.operation = Operation::Produce as u8;
        header.result.set(ResultCode::NotPrimary as u16);
        let body = ErrorBody::NotPrimary {
            view: 3,
            primary_replica: 0,
            primary_node: 0,
            address: String::new(),
        };
        let reply = Msg::new(header, Bytes::from(body.to_vec()));
        let rewritten = with_redirect(reply, &[Some(40), Some(41), Some(42)], |node| {
            Some(format!("host:{node}"))
        });
        let decoded = ErrorBody::from_bytes(ResultCode::NotPrimary, rewritten.body());
        assert_eq!(
            decoded,
            Ok(ErrorBody::NotPrimary {
                view: 3,
                primary_replica: 0,
                primary_node: 40,
                address: "host:40".into()
            })
        );
    }
}
