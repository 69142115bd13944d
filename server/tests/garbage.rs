//! Malformed frames against real nodes, on the client port and on the
//! replica bus: random bytes, a broken header checksum, a broken body
//! checksum, a header claiming more than the frame maximum, a frame cut off
//! mid-body and then closed, an unknown command byte.
//!
//! For each, the node closes that connection (with a typed error reply on the
//! client port when the request header is intact), counts it, and nothing
//! else changes: the process lives, a connection opened before still gets
//! answers, and the SDK still produces and reads back.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use strand_client::{Client, NewRecord, TopicSpec};
use strand_server::net::bus::BUS_FRAME_SIZE_MAX;
use strand_server::net::client_port::CLIENT_FRAME_SIZE_MAX;
use strand_wire::checksum::checksum;
use strand_wire::ops::{ClusterStatusReply, ErrorBody};
use strand_wire::{
    BatchBuilder, Body, CommandHeader, CommitHeader, FrameDecoder, HEADER_SIZE, Message, Msg,
    Operation, PingHeader, RequestHeader, ResultCode,
};

/// The client id and request number of every crafted request.
const CLIENT: u128 = 0xbad_f00d;
const REQUEST: u64 = 7;

/// Byte offsets in the header prefix.
const SIZE_AT: usize = 16;
const COMMAND_AT: usize = 32;

/// A command byte no build knows.
const UNKNOWN_COMMAND: u8 = 0xee;

/// Seed of the random bytes (printed on failure through the case name).
const SEED: u64 = 0x5eed_6a7b_a6e5;

/// One kind of bad input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Garbage {
    RandomBytes,
    BadHeaderChecksum,
    BadBodyChecksum,
    Oversized,
    TruncatedBody,
    UnknownCommand,
}

const EVERY_GARBAGE: [Garbage; 6] = [
    Garbage::RandomBytes,
    Garbage::BadHeaderChecksum,
    Garbage::BadBodyChecksum,
    Garbage::Oversized,
    Garbage::TruncatedBody,
    Garbage::UnknownCommand,
];

/// A valid produce request frame (one record of 2 KiB), as bytes to damage.
fn produce_frame() -> Vec<u8> {
    let mut batch = BatchBuilder::with_capacity(4096);
    batch.push(1, b"key", &[0xa5; 2048], &[]);
    let body = batch.finish().bytes().clone();
    let mut header = RequestHeader::new(common::CLUSTER, 1, strand_wire::ViewId::new(0, 0), 0);
    header.client.set(CLIENT);
    header.request.set(REQUEST);
    header.operation = Operation::Produce as u8;
    Msg::new(header, body).to_bytes().to_vec()
}

/// Recomputes the header checksum after a header field was changed.
fn reseal(frame: &mut [u8]) {
    let sum = checksum(&frame[4..HEADER_SIZE]);
    frame[..4].copy_from_slice(&sum.to_le_bytes());
}

/// `count` bytes from a seeded xorshift generator.
fn random_bytes(seed: u64, count: usize) -> Vec<u8> {
    let mut state = seed | 1;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// The bytes to send for `garbage`, damaging `frame` (a valid frame with a
/// body) where a frame is needed; `frame_size_max` is the receiver's limit.
/// The second value says whether to half-close after sending.
fn garbage_bytes(garbage: Garbage, mut frame: Vec<u8>, frame_size_max: u32) -> (Vec<u8>, bool) {
    assert!(frame.len() > HEADER_SIZE + 16, "the frame needs a body");
    match garbage {
        Garbage::RandomBytes => (random_bytes(SEED, 4096), false),
        Garbage::BadHeaderChecksum => {
            frame[SIZE_AT - 4] ^= 0x01; // the cluster id, covered by the header checksum
            (frame, false)
        }
        Garbage::BadBodyChecksum => {
            let last = frame.len() - 1;
            frame[last] ^= 0x80;
            (frame, false)
        }
        Garbage::Oversized => {
            frame[SIZE_AT..SIZE_AT + 4].copy_from_slice(&(frame_size_max + 1).to_le_bytes());
            reseal(&mut frame);
            frame.truncate(HEADER_SIZE);
            (frame, false)
        }
        Garbage::TruncatedBody => {
            let cut = HEADER_SIZE + (frame.len() - HEADER_SIZE) / 2;
            frame.truncate(cut);
            (frame, true)
        }
        Garbage::UnknownCommand => {
            frame[COMMAND_AT] = UNKNOWN_COMMAND;
            reseal(&mut frame);
            (frame, false)
        }
    }
}

/// Sends `bytes` (then half-closes if asked) and reads until the node
/// closes: returns everything received. Fails if the node keeps the
/// connection open.
fn send_and_read_to_close(stream: &mut TcpStream, bytes: &[u8], half_close: bool) -> Vec<u8> {
    // The node may close before it has read everything; that is its right.
    let _ = stream.write_all(bytes);
    if half_close {
        stream.shutdown(Shutdown::Write).expect("half-close");
    }
    read_to_close(stream)
}

/// Reads until end of stream or reset; a read timeout means the node kept
/// the connection open.
fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let mut received = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return received,
            Ok(read) => received.extend_from_slice(&chunk[..read]),
            Err(error) if error.kind() == ErrorKind::ConnectionReset => return received,
            Err(error) => panic!("the node kept the connection open: {error}"),
        }
    }
}

/// After the node's side has ended its output, checks that it closed the
/// connection completely (not only its writing half): writes fail within
/// the deadline.
fn assert_fully_closed(stream: &mut TcpStream, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if stream.write_all(&[0u8; 64]).is_err() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the node still reads from the connection"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The reply frames in `bytes`.
fn replies(bytes: &[u8]) -> Vec<Msg<strand_wire::ReplyHeader>> {
    let decoder = FrameDecoder::new(16 * 1024 * 1024);
    let mut buffer = BytesMut::from(bytes);
    let mut replies = Vec::new();
    while let Some(message) = decoder
        .decode(&mut buffer)
        .expect("valid frames from the node")
    {
        let Message::Reply(reply) = message else {
            panic!("the client port sent a {:?} frame", message.command());
        };
        replies.push(reply);
    }
    assert!(buffer.is_empty(), "a partial frame before the close");
    replies
}

/// What the client port must answer to `garbage` before closing.
fn check_client_reply(garbage: Garbage, received: &[u8]) {
    let replies = replies(received);
    let expected = match garbage {
        Garbage::RandomBytes | Garbage::BadHeaderChecksum | Garbage::UnknownCommand => None,
        Garbage::Oversized => Some(ResultCode::TooLarge),
        Garbage::BadBodyChecksum | Garbage::TruncatedBody => Some(ResultCode::InvalidRequest),
    };
    let Some(code) = expected else {
        assert!(
            replies.is_empty(),
            "{garbage:?}: no request to answer, yet the node replied"
        );
        return;
    };
    assert_eq!(replies.len(), 1, "{garbage:?}: one error reply, then close");
    let header = replies[0].header();
    assert_eq!(header.client.get(), CLIENT, "{garbage:?}: reply's client");
    assert_eq!(
        header.request.get(),
        REQUEST,
        "{garbage:?}: reply's request"
    );
    assert_eq!(header.result(), code, "{garbage:?}: result code");
    let body = ErrorBody::from_bytes(code, replies[0].body()).expect("a typed error body");
    if garbage == Garbage::Oversized {
        let size = u64::from(CLIENT_FRAME_SIZE_MAX) + 1;
        let max = u64::from(CLIENT_FRAME_SIZE_MAX);
        assert_eq!(body, ErrorBody::TooLarge { size, max });
    }
}

/// A connection that speaks valid requests, kept open across the garbage.
struct Witness {
    stream: TcpStream,
    request: u64,
}

impl Witness {
    fn open(address: &str) -> Witness {
        let stream = TcpStream::connect(address).expect("witness connection");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        Witness { stream, request: 0 }
    }

    /// Asks for the cluster status; the node must answer on this connection.
    fn still_answered(&mut self) {
        self.request += 1;
        let mut header = RequestHeader::new(common::CLUSTER, 0, strand_wire::ViewId::new(0, 0), 0);
        header.client.set(CLIENT + 1);
        header.request.set(self.request);
        header.operation = Operation::ClusterStatus as u8;
        let frame = Msg::new(header, Bytes::new()).to_bytes();
        self.stream.write_all(&frame).expect("witness send");
        let decoder = FrameDecoder::new(16 * 1024 * 1024);
        let mut buffer = BytesMut::new();
        let mut chunk = [0u8; 64 * 1024];
        loop {
            if let Some(message) = decoder.decode(&mut buffer).expect("valid reply") {
                let Message::Reply(reply) = message else {
                    panic!("witness got a {:?} frame", message.command());
                };
                assert_eq!(reply.header().request.get(), self.request);
                assert_eq!(reply.header().result(), ResultCode::Ok);
                ClusterStatusReply::from_bytes(reply.body()).expect("a status body");
                return;
            }
            let read = self.stream.read(&mut chunk).expect("witness reply");
            assert!(read > 0, "the node closed the witness connection");
            buffer.extend_from_slice(&chunk[..read]);
        }
    }
}

/// Produces one batch to every partition through the SDK and reads it back
/// at the acknowledged offsets.
async fn produce_and_read_back(client: &Client, round: u32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for partition in 0..3 {
        let records: Vec<NewRecord> = (0..100)
            .map(|index| {
                NewRecord::new(format!("k{index}"), format!("r{round}p{partition}v{index}"))
            })
            .collect();
        let ack = loop {
            match client.produce("s", "t", partition, records.clone()).await {
                Ok(ack) => break ack,
                Err(error) => {
                    assert!(Instant::now() < deadline, "produce failed: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        assert_eq!(ack.record_count, 100);
        let mut read: Vec<(u64, Bytes)> = Vec::new();
        let mut offset = ack.offset_base;
        while read.len() < 100 {
            assert!(
                Instant::now() < deadline,
                "partition {partition}: read {read:?}"
            );
            let fetched = client
                .fetch("s", "t", partition, offset, 1024 * 1024, 1000)
                .await
                .expect("fetch");
            read.extend(
                fetched
                    .records
                    .into_iter()
                    .map(|record| (record.offset, record.value)),
            );
            offset = fetched.next_offset;
        }
        read.truncate(100);
        let expected: Vec<(u64, Bytes)> = records
            .into_iter()
            .zip(ack.offset_base..)
            .map(|(record, offset)| (offset, record.value))
            .collect();
        assert_eq!(read, expected, "partition {partition} round {round}");
    }
}

/// Opens a replica-bus connection to `target` and, if `identify_as` is
/// given, opens it with a ping as that (lower) node, which `target` accepts
/// in place of that node's own connection. The node's own connection is
/// displaced and redials at once, which shuts down `target`'s writing half
/// of this one; `target` still reads it. Returns once `target` has either
/// sent traffic on it or shut down its writing half (the handshake is done).
fn bus_connection(target: &common::Node, identify_as: Option<u32>) -> TcpStream {
    let mut stream = TcpStream::connect(&target.replica_address).expect("bus connection");
    let Some(node) = identify_as else {
        return stream;
    };
    let mut header = PingHeader::new(common::CLUSTER, 0, strand_wire::ViewId::new(0, 0), 0);
    header.node.set(node);
    let ping = Msg::new(header, Bytes::new()).to_bytes();
    stream.write_all(&ping).expect("send the ping");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let mut first = [0u8; 1];
    match stream.read(&mut first) {
        Ok(_) => {}
        Err(error) => panic!("no answer to a valid ping from node {node}: {error}"),
    }
    stream
}

/// How many times `node`'s log says its bus closed an identified peer's
/// connection for a bad frame (handshake refusals are logged differently).
fn bus_rejections_logged(node: &common::Node) -> usize {
    let log = std::fs::read_to_string(&node.log).expect("read the node's log");
    log.lines()
        .filter(|line| {
            line.contains("bus: malformed frame; closing the connection")
                || line.contains("bus: connection closed in the middle of a frame")
        })
        .count()
}

/// A client of `nodes` that created stream `s` and topic `t` (3 partitions
/// of `replicas` replicas each).
async fn topic_s_t(nodes: &[common::Node], replicas: u8) -> Client {
    let client = common::connect(
        common::bootstrap(nodes),
        Instant::now() + Duration::from_secs(60),
    )
    .await;
    client.create_stream("s").await.expect("create stream");
    let mut spec = TopicSpec::new("s", "t");
    spec.partition_count = 3;
    spec.replica_count = replicas;
    client.create_topic(spec).await.expect("create topic");
    client
}

#[test]
fn malformed_frames_close_only_their_connection() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = common::start_cluster(dir.path());
    let runtime = common::runtime();
    let client = runtime.block_on(async {
        let client = topic_s_t(&nodes, 3).await;
        produce_and_read_back(&client, 0).await;
        client
    });

    // The client port of node 1.
    let mut witness = Witness::open(&nodes[0].client_address);
    witness.still_answered();
    for garbage in EVERY_GARBAGE {
        let rejected = common::metric(&nodes[0], "client_frames_rejected_total");
        let mut stream = TcpStream::connect(&nodes[0].client_address).expect("connect");
        let (bytes, half_close) = garbage_bytes(garbage, produce_frame(), CLIENT_FRAME_SIZE_MAX);
        let received = send_and_read_to_close(&mut stream, &bytes, half_close);
        check_client_reply(garbage, &received);
        if !half_close {
            assert_fully_closed(&mut stream, &format!("client port, {garbage:?}"));
        }
        assert!(
            common::metric(&nodes[0], "client_frames_rejected_total") > rejected,
            "client port, {garbage:?}: the rejection is not counted"
        );
        nodes[0].assert_alive();
        witness.still_answered();
    }

    // The replica bus of node 3: before the handshake, and after one (as
    // node 1, which node 3 accepts; node 1's own connection is displaced and
    // redialed).
    for identify_as in [None, Some(1)] {
        for garbage in EVERY_GARBAGE {
            let what = format!("bus, identified as {identify_as:?}, {garbage:?}");
            let rejected = common::metric(&nodes[2], "replica_frames_rejected_total");
            let logged = bus_rejections_logged(&nodes[2]);
            let mut stream = bus_connection(&nodes[2], identify_as);
            let (bytes, half_close) = garbage_bytes(garbage, produce_frame(), BUS_FRAME_SIZE_MAX);
            // The bus never answers with an error: whatever arrives is the
            // node's traffic for the peer it took this connection for.
            let _ = send_and_read_to_close(&mut stream, &bytes, half_close);
            if !half_close {
                assert_fully_closed(&mut stream, &what);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while common::metric(&nodes[2], "replica_frames_rejected_total") <= rejected {
                assert!(
                    Instant::now() < deadline,
                    "{what}: the rejection is not counted"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            if identify_as.is_some() {
                // Rejected by the identified peer's frame reader, not the handshake.
                while bus_rejections_logged(&nodes[2]) <= logged {
                    assert!(Instant::now() < deadline, "{what}: no rejection logged");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            nodes[2].assert_alive();
        }
    }
    witness.still_answered();
    frames_right_behind_the_ping_are_traffic(&nodes[2]);

    // Every node lives, and the cluster still takes and serves records.
    for node in &mut nodes {
        node.assert_alive();
    }
    runtime.block_on(produce_and_read_back(&client, 1));
    witness.still_answered();
    drop(nodes);
}

/// A dialer may send frames in the same write as its ping (its queue
/// drains at once): the node takes them as the peer's first traffic and
/// answers on the connection, rather than refusing it.
fn frames_right_behind_the_ping_are_traffic(target: &common::Node) {
    let refusals = || {
        std::fs::read_to_string(&target.log)
            .expect("read the node's log")
            .matches("bus: refused a connection")
            .count()
    };
    let refused = refusals();
    let mut header = PingHeader::new(common::CLUSTER, 0, strand_wire::ViewId::new(0, 0), 0);
    header.node.set(1);
    let ping = Msg::new(header, Bytes::new()).to_bytes();
    let mut stream = TcpStream::connect(&target.replica_address).expect("bus connection");
    stream
        .write_all(&[&ping[..], &ping[..], &ping[..]].concat())
        .expect("send three pings in one write");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let mut first = [0u8; 1];
    let read = stream.read(&mut first).expect("traffic from the node");
    assert_eq!(
        read, 1,
        "the node closed a connection whose ping had frames behind it"
    );
    assert_eq!(refusals(), refused, "the node refused the connection");
}

/// A well-formed Commit heartbeat of `group`, from replica `replica` in view 0.
fn commit_frame(group: u64, replica: u8) -> Vec<u8> {
    let header = CommitHeader::new(
        common::CLUSTER,
        group,
        strand_wire::ViewId::new(0, 0),
        replica,
    );
    Msg::new(header, Bytes::new()).to_bytes().to_vec()
}

/// Waits (bounded) until `node`'s counter `name` passes `above`.
fn wait_for_metric_above(node: &common::Node, name: &str, above: f64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while common::metric(node, name) <= above {
        assert!(
            Instant::now() < deadline,
            "{what}: {name} stayed at {above}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_frame_from_a_non_member_is_dropped_and_one_speaking_for_another_replica_closes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let nodes = common::start_cluster(dir.path());
    let runtime = common::runtime();
    let info = runtime.block_on(async {
        let client = topic_s_t(&nodes, 2).await;
        client.topic("s", "t").await.expect("topic info")
    });
    // Node 3 is the target; this connection speaks as node 1.
    let (target, speaker) = (&nodes[2], 1u32);
    let hosted_without_speaker = info
        .partitions
        .iter()
        .find(|p| p.replicas.contains(&target.node) && !p.replicas.contains(&speaker))
        .expect("a partition on node 3 but not on node 1");
    let shared = info
        .partitions
        .iter()
        .find(|p| p.replicas.contains(&target.node) && p.replicas.contains(&speaker))
        .expect("a partition on both");
    let others_index = shared
        .replicas
        .iter()
        .position(|&node| node != speaker)
        .expect("two replicas") as u8;
    // The group's replicas are placed on node 3 once its metadata commit
    // arrives; a frame for a group not hosted yet is ignored before the
    // membership check, so wait until node 3 hosts both.
    let hosted = |group: u64| {
        runtime.block_on(async {
            let client = common::connect(
                vec![target.client_address.clone()],
                Instant::now() + Duration::from_secs(30),
            )
            .await;
            let status = client.cluster_status().await.expect("status");
            status
                .groups()
                .any(|(node, report)| node == target.node && report.group == group)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(hosted(hosted_without_speaker.group) && hosted(shared.group)) {
        assert!(Instant::now() < deadline, "node 3 never hosted both groups");
        std::thread::sleep(Duration::from_millis(50));
    }

    let refused = common::metric(target, "replica_frames_refused_total");
    let mut stream = bus_connection(target, Some(speaker));
    // This connection replaces node 1's real one, whose close may cut a
    // frame in flight (node 1 pings every heartbeat interval): counted
    // before this connection says anything.
    std::thread::sleep(Duration::from_millis(300));
    let rejected = common::metric(target, "replica_frames_rejected_total");
    stream
        .write_all(&commit_frame(hosted_without_speaker.group, 0))
        .expect("send a non-member's frame");
    wait_for_metric_above(
        target,
        "replica_frames_refused_total",
        refused,
        "a non-member's frame",
    );
    assert_eq!(
        common::metric(target, "replica_frames_rejected_total"),
        rejected,
        "a non-member's frame closed the connection"
    );

    // The same connection is still read: a frame speaking for another
    // replica of a group the speaker belongs to closes it.
    stream
        .write_all(&commit_frame(shared.group, others_index))
        .expect("the connection is still open");
    wait_for_metric_above(
        target,
        "replica_frames_rejected_total",
        rejected,
        "an impersonating frame",
    );
    assert_fully_closed(&mut stream, "impersonation");
    let mut nodes = nodes;
    nodes[2].assert_alive();
    drop(nodes);
}
