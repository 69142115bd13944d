//! A careless or hostile client hurts no one else, with real processes.
//!
//! - A batch larger than a fetch's `max_bytes` comes back alone, and no
//!   fetch reply is ever larger than the frame a client takes, so a
//!   consumer is never stuck at an offset; a produce whose batch could not
//!   be fetched back is refused with `TooLarge`, by the SDK before sending
//!   and by the node for a client that sends it anyway.
//! - A request whose body does not decode as its operation's is refused
//!   `InvalidRequest` at the door, and a node's own report
//!   (`EpochStarted`, an expired member's removal) is refused
//!   `PermissionDenied` to any client: neither is prepared, so the
//!   metadata log does not grow by one op.
//! - A reader that pipelines large fetches and never reads its socket
//!   stops being read: the node's memory stays bounded, and a well-behaved
//!   client keeps producing and fetching meanwhile.
//! - Connections are bounded per node and per address; a connection that
//!   does not sign in within its deadline (where the cluster requires it)
//!   is closed, and before signing in a frame is at most 64 KiB.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use strand_client::{ClientError, NewRecord, TopicSpec};
use strand_wire::Body;
use strand_wire::ops::{EpochStarted, ErrorBody, LeaveConsumerGroup, PRODUCE_BATCH_BYTES_MAX};
use strand_wire::{
    BatchBuilder, CommandHeader, FrameDecoder, Message, Msg, Operation, RequestHeader, ResultCode,
    Route,
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
        assert_eq!(ack.offset_base, index as u64);
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
        let metadata = operation.info().route == Route::MetadataReplicated;
        let group = match metadata {
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
            if metadata {
                assert_eq!(
                    result,
                    ResultCode::InvalidRequest,
                    "{operation:?} with {body:?}"
                );
            }
        }
    }
    assert!(common::metric_sum(node, "requests_refused_invalid_body_total") > 0.0);
    // The nodes' own reports travel on the replica bus: on the client port
    // they are refused to everyone, here a plaintext caller the node
    // cannot tell from a node.
    let forged: [(Operation, Vec<u8>); 2] = [
        (
            Operation::EpochStarted,
            EpochStarted { group: 1, epoch: 1 }.to_vec(),
        ),
        (
            Operation::LeaveConsumerGroup,
            LeaveConsumerGroup {
                group: "readers".into(),
                member: 7,
                expired: true,
            }
            .to_vec(),
        ),
    ];
    for (index, (operation, body)) in forged.iter().enumerate() {
        let frame = request_frame(*operation, 0, body, 0x0f09_ed00 + index as u128);
        let reply = one_reply(&node.client_address, &frame);
        assert_eq!(
            reply.header().result(),
            ResultCode::PermissionDenied,
            "{operation:?}"
        );
    }
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

/// The node's resident memory, in bytes.
fn rss_bytes(node: &mut common::Node) -> u64 {
    let pid = node.child().id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib * 1024
}

/// Nodes configured under `dir` with `extra` TOML appended to each
/// configuration, started.
fn cluster_with(dir: &std::path::Path, extra: &str) -> Vec<common::Node> {
    let mut nodes = common::configure_cluster(dir, 3);
    for node in &mut nodes {
        let mut config = std::fs::read_to_string(&node.config).expect("read config");
        config.push_str(extra);
        std::fs::write(&node.config, config).expect("write config");
        node.start();
    }
    nodes
}

/// A well-behaved producer and consumer on `s/good`: one batch produced and
/// read back; how long it took.
fn well_behaved_round(
    runtime: &tokio::runtime::Runtime,
    client: &strand_client::Client,
    round: u64,
) -> Duration {
    let started = Instant::now();
    let value = format!("good-{round}");
    let ack = runtime.block_on(async {
        loop {
            match client
                .produce("s", "good", 0, vec![NewRecord::new("k", value.clone())])
                .await
            {
                Ok(ack) => break ack,
                Err(error) => {
                    assert!(started.elapsed() < Duration::from_secs(30), "{error}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    });
    let fetched = runtime
        .block_on(client.fetch("s", "good", 0, ack.offset_base, 1 << 20, 0))
        .expect("fetch");
    assert_eq!(fetched.records[0].value, value.as_bytes());
    started.elapsed()
}

/// Fetch requests the never-reading client sends at most (27 MB of them).
const FLOOD_FETCHES: u64 = 100_000;

#[test]
fn a_reader_that_never_reads_stops_being_read_and_costs_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut nodes, runtime, client) = common::cluster_with_stream_s(dir.path());
    let mut groups = Vec::new();
    for topic in ["t", "good"] {
        let mut spec = TopicSpec::new("s", topic);
        spec.replica_count = 3;
        groups.push(
            runtime
                .block_on(client.create_topic(spec))
                .expect("create topic")[0],
        );
    }
    let group = groups[0];
    for _ in 0..2 {
        runtime
            .block_on(client.produce("s", "t", 0, vec![record_of(7 << 20)]))
            .expect("a large batch");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let primary = runtime.block_on(common::serving_primary(&client, group, None, deadline));
    let at = nodes
        .iter()
        .position(|node| node.node == primary)
        .expect("node");
    let before = rss_bytes(&mut nodes[at]);
    // Fetches of the two 7 MiB batches, pipelined, never read: more than
    // the socket buffers hold once the node stops reading.
    let address = nodes[at].client_address.clone();
    let flood = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(&address).expect("connect");
        stream
            .set_write_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let fetch = strand_wire::ops::FetchRequest {
            offset: 0,
            max_bytes: 8 << 20,
            wait_ms: 0,
        };
        let body = strand_wire::Body::to_vec(&fetch);
        let mut sent = 0;
        for request in 0..FLOOD_FETCHES {
            let frame = request_frame(
                Operation::Fetch,
                group,
                &body,
                0x5107_0000 + request as u128,
            );
            if stream.write_all(&frame).is_err() {
                break; // the node stopped reading: its buffers are full
            }
            sent += 1;
        }
        std::thread::sleep(Duration::from_secs(3));
        (stream, sent)
    });
    for round in 0..20 {
        let took = well_behaved_round(&runtime, &client, round);
        eprintln!("well-behaved round {round}: {} ms", took.as_millis());
    }
    let (_stream, sent) = flood.join().expect("the flood");
    let after = rss_bytes(&mut nodes[at]);
    eprintln!(
        "{sent} fetches sent, never read; node RSS {} MiB -> {} MiB",
        before >> 20,
        after >> 20
    );
    assert!(sent < FLOOD_FETCHES, "the node stopped reading");
    assert!(
        after < before + (256 << 20),
        "RSS grew by {} MiB",
        (after - before) >> 20
    );
    nodes[at].assert_alive();
}

#[test]
fn connections_are_bounded_per_node_and_per_address() {
    let dir = tempfile::tempdir().expect("tempdir");
    let extra =
        "\n[limits]\nclient_connections_max = 60\nclient_connections_per_address_max = 20\n";
    let nodes = cluster_with(dir.path(), extra);
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = runtime.block_on(common::connect(common::bootstrap(&nodes), deadline));
    runtime
        .block_on(client.create_stream("s"))
        .expect("create stream");
    let mut spec = TopicSpec::new("s", "good");
    spec.replica_count = 3;
    runtime
        .block_on(client.create_topic(spec))
        .expect("create topic");
    well_behaved_round(&runtime, &client, 0);
    let target: std::net::SocketAddr = nodes[0].client_address.parse().expect("address");
    let mut held = Vec::new();
    let mut refused = 0;
    runtime.block_on(async {
        for source in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
            for _ in 0..25 {
                let socket = tokio::net::TcpSocket::new_v4().expect("socket");
                socket
                    .bind(format!("{source}:0").parse().expect("source"))
                    .expect("bind");
                let mut stream = socket.connect(target).await.expect("connect");
                // A refused connection is closed at once: its read ends.
                let mut byte = [0u8; 1];
                let read = tokio::time::timeout(
                    Duration::from_millis(300),
                    tokio::io::AsyncReadExt::read(&mut stream, &mut byte),
                )
                .await;
                match read {
                    Ok(Ok(0)) | Ok(Err(_)) => refused += 1,
                    _ => held.push(stream),
                }
            }
        }
    });
    eprintln!("{} connections held, {refused} refused", held.len());
    assert!(held.len() <= 60, "at most the node's bound");
    assert!(refused >= 15, "past 20 from one address and 60 on the node");
    let node = &nodes[0];
    assert!(common::metric_sum(node, "client_connections_closed_total") >= refused as f64);
    for round in 1..5 {
        let took = well_behaved_round(&runtime, &client, round);
        eprintln!(
            "well-behaved round {round} during the flood: {} ms",
            took.as_millis()
        );
    }
    drop(held);
    common::wait_until("the connections are counted out", 10, || {
        common::metric(node, "client_connections") < 10.0
    });
}

/// A TLS connection to `node`'s client port, verifying it by `certs/ca.pem`.
async fn tls_connection(
    certs: &std::path::Path,
    node: &common::Node,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let tls = strand_client::tls::ClientTls::new(certs.join("ca.pem"));
    let connector = tls.connector().expect("connector");
    let stream = tokio::net::TcpStream::connect(&node.client_address)
        .await
        .expect("connect");
    connector
        .connect(&node.client_address, None, stream)
        .await
        .expect("handshake")
}

#[test]
fn a_connection_that_does_not_sign_in_in_time_is_closed_and_sends_only_small_frames() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().expect("tempdir");
    let mut nodes = common::configure_cluster(dir.path(), 3);
    let certs = common::enable_tls(dir.path(), &nodes);
    let extra = "\n[auth]\nrequired = true\n\n[limits]\nsign_in_timeout_ms = 1000\n";
    for node in &mut nodes {
        let mut config = std::fs::read_to_string(&node.config).expect("read config");
        config.push_str(extra);
        std::fs::write(&node.config, config).expect("write config");
        node.start();
    }
    let address = nodes[0].client_address.clone();
    common::wait_until("the node listens", 30, || {
        TcpStream::connect(&address).is_ok()
    });
    let runtime = common::runtime();
    runtime.block_on(async {
        // Silent: closed after the deadline.
        let mut silent = tls_connection(&certs, &nodes[0]).await;
        let started = Instant::now();
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(10), silent.read(&mut byte)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
        eprintln!(
            "closed after {} ms without a sign-in",
            started.elapsed().as_millis()
        );
        // Large before signing in: refused TooLarge, closed.
        let mut large = tls_connection(&certs, &nodes[0]).await;
        let frame = request_frame(Operation::Metadata, 0, &vec![0u8; 100 * 1024], 0x5161);
        let _ = large.write_all(&frame).await;
        let mut received = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(10), large.read_to_end(&mut received)).await;
        let mut buffer = BytesMut::from(&received[..]);
        let reply = FrameDecoder::new(1 << 20)
            .decode(&mut buffer)
            .expect("a valid frame")
            .expect("a reply before the close");
        let Message::Reply(reply) = reply else {
            panic!("not a reply");
        };
        assert_eq!(reply.header().result(), ResultCode::TooLarge);
    });
    let node = &nodes[0];
    assert!(common::metric_sum(node, "client_connections_closed_total") >= 1.0);
}
