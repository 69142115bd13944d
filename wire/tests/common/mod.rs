//! Strategies shared by the wire tests: one valid frame of every command.

#![allow(dead_code)]

use bytes::Bytes;
use proptest::prelude::*;
use strand_wire::*;
use zerocopy::IntoBytes;

/// Recomputes the header checksum of an encoded frame after a test edited its header.
pub fn reseal(frame: &mut [u8]) {
    let checksum = strand_wire::checksum::checksum(&frame[4..HEADER_SIZE]);
    frame[..4].copy_from_slice(&checksum.to_le_bytes());
}

fn prefix_args() -> impl Strategy<Value = (u64, u64, ViewId, u8)> {
    (
        any::<u64>(),
        1..u64::MAX,
        (any::<u32>(), 1..u32::MAX).prop_map(|(epoch, view)| ViewId::new(epoch, view)),
        0..REPLICAS_MAX,
    )
}

/// A view below `view` (the same epoch, the previous number).
fn previous(view: ViewId) -> ViewId {
    ViewId::new(view.epoch, view.view - 1)
}

/// A valid prepare header with no body yet (sealed later).
pub fn prepare_header() -> impl Strategy<Value = PrepareHeader> {
    (
        prefix_args(),
        1..u64::MAX / 2,
        any::<u32>(),
        any::<u128>(),
        any::<u64>(),
        any::<u64>(),
        0..u64::MAX / 2,
        any::<u32>(),
        any::<bool>(),
    )
        .prop_map(
            |(
                (cluster, group, view, replica),
                op,
                parent,
                client,
                request,
                timestamp,
                offset,
                count,
                produce,
            )| {
                let mut header = PrepareHeader::new(cluster, group, view, replica);
                header.op.set(op);
                header.commit.set(op / 2);
                header.parent.set(if op == 1 { 0 } else { parent });
                header.client.set(client);
                header.request.set(request);
                header.timestamp_ns.set(timestamp);
                header.offset_base.set(offset);
                if produce {
                    header.operation = Operation::Produce as u8;
                    header.record_count.set(count);
                } else {
                    header.operation = Operation::CreateTopic as u8;
                }
                header
            },
        )
}

/// A sealed prepare with a random body.
pub fn prepare() -> impl Strategy<Value = Msg<PrepareHeader>> {
    (
        prepare_header(),
        proptest::collection::vec(any::<u8>(), 0..2048),
    )
        .prop_map(|(header, body)| Msg::new(header, Bytes::from(body)))
}

/// `count` sealed prepare headers with strictly ascending ops ending at `op_end`.
pub fn header_suffix(headers: Vec<PrepareHeader>, op_end: u64) -> Vec<PrepareHeader> {
    let count = headers.len() as u64;
    headers
        .into_iter()
        .enumerate()
        .map(|(index, mut header)| {
            let op = op_end - count + 1 + index as u64;
            header.op.set(op);
            header.commit.set(op - 1);
            if op == 1 {
                header.parent.set(0);
            }
            header.seal(&[b"body"]);
            header
        })
        .collect()
}

/// History starts a StartView of `view` may carry: up to `earlier` starts
/// of earlier views of its epoch, then the view's own.
pub fn history(
    view: ViewId,
    replica: u8,
    cursor_tail: u64,
    earlier: usize,
    accepted_loss: bool,
) -> Vec<HistoryStartRecord> {
    let earlier = earlier.min(view.view as usize - 1);
    let mut starts: Vec<HistoryStartRecord> = (0..earlier)
        .map(|index| {
            let mut start = HistoryStartRecord::default();
            start.set_view_id(ViewId::new(
                view.epoch,
                view.view - (earlier - index) as u32,
            ));
            start.op.set(index as u64);
            start.cursor_tail.set(cursor_tail / 2);
            start.replica = index as u8 % REPLICAS_MAX;
            start
        })
        .collect();
    let mut own = HistoryStartRecord::default();
    own.set_view_id(view);
    own.cursor_tail.set(cursor_tail);
    own.replica = replica;
    if accepted_loss {
        own.flags = HistoryStartFlags::ACCEPTED_LOSS.bits();
    }
    starts.push(own);
    starts
}

fn headers_bytes(headers: &[PrepareHeader]) -> Bytes {
    Bytes::copy_from_slice(headers.as_bytes())
}

fn bits_below(count: usize, raw: u128) -> u128 {
    if count == 128 {
        raw
    } else {
        raw & ((1u128 << count) - 1)
    }
}

/// A valid frame of every command, with random field values.
pub fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (prefix_args(), any::<u32>(), any::<u64>()).prop_map(
            |((cluster, _, view, replica), node, ts)| {
                let mut header = PingHeader::new(cluster, 0, view, replica);
                header.node.set(node);
                header.ping_timestamp_ns.set(ts);
                Message::from(Msg::new(header, Bytes::new()))
            }
        ),
        (prefix_args(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(
            |((cluster, _, view, replica), node, a, b)| {
                let mut header = PongHeader::new(cluster, 0, view, replica);
                header.node.set(node);
                header.ping_timestamp_ns.set(a);
                header.pong_timestamp_ns.set(b);
                Message::from(Msg::new(header, Bytes::new()))
            }
        ),
        (
            prefix_args(),
            1..u128::MAX,
            1..u64::MAX,
            0..Operation::ALL.len(),
            proptest::collection::vec(any::<u8>(), 0..512)
        )
            .prop_map(
                |((cluster, group, view, replica), client, request, operation, body)| {
                    let mut header = RequestHeader::new(cluster, group, view, replica);
                    header.client.set(client);
                    header.request.set(request);
                    header.operation = Operation::ALL[operation] as u8;
                    Message::from(Msg::new(header, Bytes::from(body)))
                }
            ),
        (
            prefix_args(),
            1..u128::MAX,
            1..u64::MAX,
            any::<u64>(),
            0..Operation::ALL.len(),
            0..ResultCode::ALL.len(),
            proptest::collection::vec(any::<u8>(), 0..512)
        )
            .prop_map(
                |(
                    (cluster, group, view, replica),
                    client,
                    request,
                    commit,
                    operation,
                    result,
                    body,
                )| {
                    let mut header = ReplyHeader::new(cluster, group, view, replica);
                    header.client.set(client);
                    header.request.set(request);
                    header.commit.set(commit);
                    header.op.set(commit / 3);
                    header.operation = Operation::ALL[operation] as u8;
                    header.result.set(ResultCode::ALL[result] as u16);
                    Message::from(Msg::new(header, Bytes::from(body)))
                }
            ),
        prepare().prop_map(Message::from),
        (prefix_args(), any::<u32>(), 1..u64::MAX, any::<u64>()).prop_map(
            |((cluster, group, view, replica), checksum, op, commit)| {
                let mut header = PrepareOkHeader::new(cluster, group, view, replica);
                header.prepare_checksum.set(checksum);
                header.op.set(op);
                header.commit.set(commit);
                Message::from(Msg::new(header, Bytes::new()))
            }
        ),
        (prefix_args(), any::<u32>(), 1..u64::MAX).prop_map(
            |((cluster, group, view, replica), checksum, op)| {
                let mut header = CommitHeader::new(cluster, group, view, replica);
                header.commit_checksum.set(checksum);
                header.commit.set(op - 1);
                header.op.set(op);
                if op == 1 {
                    header.commit_checksum.set(0);
                }
                Message::from(Msg::new(header, Bytes::new()))
            }
        ),
        prefix_args().prop_map(|(cluster, group, view, replica)| {
            Message::from(Msg::new(
                StartViewChangeHeader::new(cluster, group, view, replica),
                Bytes::new(),
            ))
        }),
        (
            prefix_args(),
            proptest::collection::vec(prepare_header(), 0..=128),
            128..u64::MAX / 4,
            any::<u64>(),
            any::<u128>(),
            any::<u128>(),
            any::<bool>(),
            any::<u64>()
        )
            .prop_map(
                |(
                    (cluster, group, view, replica),
                    headers,
                    op,
                    cursor_tail,
                    nack,
                    present,
                    untrusted,
                    start,
                )| {
                    let headers = header_suffix(headers, op);
                    let mut header = DoViewChangeHeader::new(cluster, group, view, replica);
                    header.op.set(op);
                    header.commit.set(op - headers.len() as u64);
                    header.cursor_tail.set(cursor_tail);
                    let present = bits_below(headers.len(), present);
                    header.present_bitset.set(present);
                    header
                        .nack_bitset
                        .set(bits_below(headers.len(), nack) & !present);
                    header.set_log_view_id(previous(view));
                    header.set_history_start_view_id(ViewId::new(
                        view.epoch / 2,
                        (view.view - 1) / 2,
                    ));
                    header.history_start_op.set(start);
                    header.history_start_replica = replica;
                    header.ack_op.set(op - headers.len() as u64 / 2);
                    header.flags = if untrusted { FLAG_UNTRUSTED_LOG } else { 0 };
                    Message::from(Msg::new(header, headers_bytes(&headers)))
                }
            ),
        (prefix_args(), any::<u64>()).prop_map(|((cluster, group, view, replica), op)| {
            let mut header = DoViewChangeHeader::new(cluster, group, view, replica);
            header.op.set(op);
            header.set_log_view_id(previous(view));
            header.flags = (DoViewChangeFlags::UNTRUSTED_LOG
                | DoViewChangeFlags::AWAITING_STATE_TRANSFER)
                .bits();
            Message::from(Msg::new(header, Bytes::new()))
        }),
        (
            prefix_args(),
            proptest::collection::vec(prepare_header(), 1..=128),
            128..u64::MAX / 4,
            any::<u64>(),
            any::<u64>(),
            0..START_VIEW_HISTORY_STARTS_MAX,
            any::<bool>()
        )
            .prop_map(
                |(
                    (cluster, group, view, replica),
                    headers,
                    op,
                    cursor_tail,
                    nonce,
                    earlier,
                    accepted_loss,
                )| {
                    let headers = header_suffix(headers, op);
                    let mut header = StartViewHeader::new(cluster, group, view, replica);
                    header.op.set(op);
                    header.commit.set(op - 1);
                    header.cursor_tail.set(cursor_tail);
                    header.nonce.set(nonce);
                    let starts = history(view, replica, cursor_tail, earlier, accepted_loss);
                    header.history_start_count = starts.len() as u8;
                    let mut body = headers.as_bytes().to_vec();
                    body.extend_from_slice(starts.as_bytes());
                    Message::from(Msg::new(header, Bytes::from(body)))
                }
            ),
        (prefix_args(), 1..u64::MAX).prop_map(|((cluster, group, view, replica), nonce)| {
            let mut header = RequestStartViewHeader::new(cluster, group, view, replica);
            header.nonce.set(nonce);
            Message::from(Msg::new(header, Bytes::new()))
        }),
        (prefix_args(), any::<u32>(), 1..u64::MAX).prop_map(
            |((cluster, group, view, replica), checksum, op)| {
                let mut header = RequestPrepareHeader::new(cluster, group, view, replica);
                header.prepare_checksum.set(checksum);
                header.op.set(op);
                Message::from(Msg::new(header, Bytes::new()))
            }
        ),
        (prefix_args(), 2..u64::MAX / 2, 0..u64::MAX / 2).prop_map(
            |((cluster, group, view, replica), log_start_op, ahead)| {
                let mut header = LogStartHeader::new(cluster, group, view, replica);
                header.log_start_op.set(log_start_op);
                header.commit.set(log_start_op - 1 + ahead);
                Message::from(Msg::new(header, Bytes::new()))
            }
        ),
        (prefix_args(), 1..u64::MAX / 2, 0..128u64).prop_map(
            |((cluster, group, view, replica), op_min, length)| {
                let mut header = RequestHeadersHeader::new(cluster, group, view, replica);
                header.op_min.set(op_min);
                header.op_max.set(op_min + length);
                Message::from(Msg::new(header, Bytes::new()))
            }
        ),
        (
            prefix_args(),
            proptest::collection::vec(prepare_header(), 0..=128),
            128..u64::MAX / 4
        )
            .prop_map(|((cluster, group, view, replica), headers, op)| {
                let headers = header_suffix(headers, op);
                let header = HeadersHeader::new(cluster, group, view, replica);
                Message::from(Msg::new(header, headers_bytes(&headers)))
            }),
        (prefix_args(), any::<u64>(), any::<u64>(), any::<u32>()).prop_map(
            |((cluster, group, view, replica), op, offset, chunk)| {
                let mut header = RequestStateTransferHeader::new(cluster, group, view, replica);
                header.frontier_op.set(op);
                header.frontier_offset.set(offset);
                header.chunk.set(chunk);
                Message::from(Msg::new(header, Bytes::new()))
            }
        ),
        (
            prefix_args(),
            any::<u64>(),
            any::<u64>(),
            1..u32::MAX,
            proptest::collection::vec(any::<u8>(), 0..4096)
        )
            .prop_map(
                |((cluster, group, view, replica), op, offset, count, body)| {
                    let mut header = StateTransferChunkHeader::new(cluster, group, view, replica);
                    header.frontier_op.set(op);
                    header.frontier_offset.set(offset);
                    header.chunk.set(count - 1);
                    header.chunk_count.set(count);
                    Message::from(Msg::new(header, Bytes::from(body)))
                }
            ),
        (
            prefix_args(),
            0..u64::MAX / 2,
            1..u32::MAX,
            proptest::collection::vec(any::<u8>(), 1..512)
        )
            .prop_map(|((cluster, group, view, replica), base, count, body)| {
                let mut header = CursorsHeader::new(cluster, group, view, replica);
                header.cursor_base.set(base);
                header.event_count.set(count);
                Message::from(Msg::new(header, Bytes::from(body)))
            }),
    ]
}
