//! A careless or hostile client hurts no one else, with real processes.
//!
//! - A batch larger than a fetch's `max_bytes` comes back alone, and no
//!   fetch reply is ever larger than the frame a client takes, so a
//!   consumer is never stuck at an offset; a produce whose batch could not
//!   be fetched back is refused with `TooLarge`, by the SDK before sending
//!   and by the node for a client that sends it anyway.
//! - A request whose body does not decode as its operation's is refused
//!   `InvalidRequest` at the door: it is never prepared, so the metadata
//!   log does not grow by one op.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use strand_client::{ClientError, NewRecord, TopicSpec};
use strand_wire::ops::{ErrorBody, PRODUCE_BATCH_BYTES_MAX};
use strand_wire::{
    BatchBuilder, CommandHeader, FrameDecoder, Message, Msg, Operation, RequestHeader, ResultCode,
};

/// One record whose value is `bytes` long.
fn record_of(bytes: usize) -> NewRecord {
    NewRecord::new("big", vec![0x5a; bytes])
}

/// Sends `frame` on a new connection to `address` and reads the first
/// reply.
fn one_reply(address: &str, frame: &[u8]) -> Msg<strand_wire::ReplyHeader> {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    stream.write_all(frame).expect("send");
    let decoder = FrameDecoder::new(16 * 1024 * 1024);
    let mut buffer = BytesMut::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if let Some(message) = decoder.decode(&mut buffer).expect("a valid reply") {
            let Message::Reply(reply) = message else {
                panic!("not a reply: {:?}", message.command());
            };
            return reply;
        }
        let read = stream.read(&mut chunk).expect("read the reply");
        assert!(read > 0, "closed before replying");
        buffer.extend_from_slice(&chunk[..read]);
    }
}

/// A request frame of `operation` for `group` with `body`, from `client`.
fn request_frame(operation: Operation, group: u64, body: &[u8], client: u128) -> Vec<u8> {
    let mut header = RequestHeader::new(common::CLUSTER, group, strand_wire::ViewId::new(0, 0), 0);
    header.client.set(client);
    header.request.set(1);
    header.operation = operation as u8;
    Msg::new(header, bytes::Bytes::copy_from_slice(body))
        .to_bytes()
        .to_vec()
}

/// A produce frame for `group` whose body is one batch of exactly
/// `batch_bytes` (one record, its value sized to fit).
fn produce_frame(group: u64, batch_bytes: usize) -> Vec<u8> {
    let batch_of = |value_bytes: usize| {
        let mut batch = BatchBuilder::with_capacity(batch_bytes);
        batch.push(1, b"k", &vec![0x5a; value_bytes], &[]);
        batch.finish().bytes().clone()
    };
    let mut value_bytes = batch_bytes - 256;
    let body = loop {
        let body = batch_of(value_bytes);
        match body.len().cmp(&batch_bytes) {
            std::cmp::Ordering::Equal => break body,
            std::cmp::Ordering::Less => value_bytes += 1,
            std::cmp::Ordering::Greater => value_bytes -= 1,
        }
    };
    let mut header = RequestHeader::new(common::CLUSTER, group, strand_wire::ViewId::new(0, 0), 0);
    header.client.set(0x0b16_ba7c);
    header.request.set(1);
    header.operation = Operation::Produce as u8;
    Msg::new(header, body).to_bytes().to_vec()
}

#[test]
fn a_batch_larger_than_a_fetch_comes_alone_and_one_too_large_to_fetch_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (nodes, runtime, client) = common::cluster_with_stream_s(dir.path());
    let mut spec = TopicSpec::new("s", "t");
    spec.replica_count = 3;
    let groups = runtime
        .block_on(client.create_topic(spec))
        .expect("create topic");
    let deadline = Instant::now() + Duration::from_secs(60);
    let sizes = [3 << 20, 7 << 20, 2 << 20];
    for (index, size) in sizes.into_iter().enumerate() {
        let ack = runtime.block_on(async {
            loop {
                match client.produce("s", "t", 0, vec![record_of(size)]).await {
                    Ok(ack) => break ack,
                    Err(error) => {
                        assert!(Instant::now() < deadline, "produce {size}: {error}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        assert_eq!(ack.base_offset, index as u64);
    }
    // 8 MiB asked: each batch alone, since the next would pass it.
    for (offset, size) in sizes.into_iter().enumerate() {
        let fetched = runtime
            .block_on(client.fetch("s", "t", 0, offset as u64, 8 << 20, 0))
            .expect("every fetch fits a frame");
        let records = &fetched.records;
        assert_eq!(records.len(), 1, "batch at {offset} alone");
        assert_eq!(records[0].value.len(), size);
    }
    // One byte asked: the first batch still comes, whole.
    let fetched = runtime
        .block_on(client.fetch("s", "t", 0, 1, 1, 0))
        .expect("fetch");
    assert_eq!(fetched.records[0].value.len(), 7 << 20);

    // A batch that could not be fetched back: the SDK refuses it.
    let refused =
        runtime.block_on(client.produce("s", "t", 0, vec![record_of(PRODUCE_BATCH_BYTES_MAX)]));
    assert!(
        matches!(refused, Err(ClientError::TooLarge { max, .. }) if max == PRODUCE_BATCH_BYTES_MAX as u64),
        "{refused:?}"
    );
    // And the node refuses it from a client that sends it anyway.
    let primary = runtime.block_on(common::serving_primary(&client, groups[0], None, deadline));
    let node = nodes
        .iter()
        .find(|node| node.node == primary)
        .expect("node");
    let reply = one_reply(
        &node.client_address,
        &produce_frame(groups[0], PRODUCE_BATCH_BYTES_MAX + 8),
    );
    assert_eq!(reply.header().result(), ResultCode::TooLarge);
    let body = ErrorBody::from_bytes(ResultCode::TooLarge, reply.body()).expect("error body");
    assert_eq!(
        body,
        ErrorBody::TooLarge {
            size: (PRODUCE_BATCH_BYTES_MAX + 8) as u64,
            max: PRODUCE_BATCH_BYTES_MAX as u64,
        }
    );
    let fetched = runtime
        .block_on(client.fetch("s", "t", 0, 3, 1 << 20, 0))
        .expect("fetch past the end");
    assert!(fetched.records.is_empty(), "nothing more was written");
}

#[test]
fn a_body_that_does_not_decode_is_refused_at_the_door_and_never_prepared() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (nodes, runtime, client) = common::cluster_with_stream_s(dir.path());
    let deadline = Instant::now() + Duration::from_secs(60);
    let primary = runtime.block_on(common::serving_primary(&client, 0, None, deadline));
    let node = nodes
        .iter()
        .find(|node| node.node == primary)
        .expect("node");
    let metadata_op = || {
        runtime
            .block_on(common::group_status(&client, primary, 0))
            .expect("the metadata plane's status")
            .op
    };
    // The status is published by ticks: wait until it holds still.
    let mut before = metadata_op();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = metadata_op();
        if now == before && now > 0 {
            break;
        }
        before = now;
    }
    let garbage: &[&[u8]] = &[b"", b"\xff", &[0xa5; 300]];
    for (index, operation) in Operation::ALL.into_iter().enumerate() {
        let group = match operation.is_metadata() {
            true => 0,
            false => 1,
        };
        for (attempt, body) in garbage.iter().enumerate() {
            if operation == Operation::ClusterStatus || body.is_empty() && decodes_empty(operation)
            {
                continue;
            }
            let client_id = 0x6a4b_0000 + (index * 16 + attempt) as u128;
            let reply = one_reply(
                &node.client_address,
                &request_frame(operation, group, body, client_id),
            );
            let result = reply.header().result();
            assert_ne!(result, ResultCode::Ok, "{operation:?} with {body:?}");
            if operation.is_metadata() {
                assert_eq!(
                    result,
                    ResultCode::InvalidRequest,
                    "{operation:?} with {body:?}"
                );
            }
        }
    }
    assert!(common::metric_sum(node, "requests_refused_invalid_body_total") > 0.0);
    runtime
        .block_on(client.create_stream("still-works"))
        .expect("the metadata plane still serves");
    // One op more, the good request's, once the status shows it.
    common::wait_until("the good request's op in the status", 10, || {
        metadata_op() > before
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        metadata_op(),
        before + 1,
        "only the good request reached the metadata log"
    );
}

/// Operations whose request body is empty (an empty body is theirs).
fn decodes_empty(operation: Operation) -> bool {
    matches!(
        operation,
        Operation::ClusterStatus | Operation::Attention | Operation::ListUsers
    )
}
