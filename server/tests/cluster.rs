//! A real three-node cluster of `strand-server` processes on loopback, driven
//! with raw wire frames: the metadata plane creates a topic, its partitions
//! start on their nodes, a produce to a partition's primary commits, a fetch
//! reads the record back, and SIGTERM stops every node with exit 0.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use strand_wire::ops::{
    ClusterStatusReply, CreateStream, CreateTopic, FetchReply, FetchRequest, MetadataReply,
    MetadataRequest, ProduceReply,
};
use strand_wire::{
    BatchBuilder, Body, CommandHeader, FrameDecoder, Message, Msg, Operation, ReplyHeader,
    RequestHeader, ResultCode,
};

const CLIENT: u128 = 0x5eed;
const READER: u128 = 0x5eed_0001;

/// One blocking client connection speaking raw frames.
struct Connection {
    stream: TcpStream,
    buffer: BytesMut,
    decoder: FrameDecoder,
}

impl Connection {
    fn open(address: &str, deadline: Instant) -> Connection {
        loop {
            match TcpStream::connect(address) {
                Ok(stream) => {
                    stream
                        .set_read_timeout(Some(Duration::from_secs(10)))
                        .expect("timeout");
                    return Connection {
                        stream,
                        buffer: BytesMut::new(),
                        decoder: FrameDecoder::new(16 * 1024 * 1024),
                    };
                }
                Err(error) => {
                    assert!(Instant::now() < deadline, "cannot reach {address}: {error}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }

    fn call(
        &mut self,
        group: u64,
        client: u128,
        request: u64,
        operation: Operation,
        body: Bytes,
    ) -> Msg<ReplyHeader> {
        let mut header =
            RequestHeader::new(common::CLUSTER, group, strand_wire::ViewId::new(0, 0), 0);
        header.client.set(client);
        header.request.set(request);
        header.operation = operation as u8;
        let frame = Msg::new(header, body).to_bytes();
        self.stream.write_all(&frame).expect("send");
        loop {
            if let Some(message) = self.decoder.decode(&mut self.buffer).expect("valid reply") {
                let Message::Reply(reply) = message else {
                    panic!("expected a reply, got {:?}", message.command());
                };
                assert_eq!(
                    reply.header().request.get(),
                    request,
                    "reply to another request"
                );
                return reply;
            }
            let mut chunk = [0u8; 64 * 1024];
            let read = self.stream.read(&mut chunk).expect("read a reply");
            assert!(read > 0, "the node closed the connection");
            self.buffer.extend_from_slice(&chunk[..read]);
        }
    }
}

fn result(reply: &Msg<ReplyHeader>) -> ResultCode {
    reply.header().result()
}

/// Retries `attempt` until it returns `Some` or `deadline` passes.
fn eventually<T>(deadline: Instant, what: &str, mut attempt: impl FnMut() -> Option<T>) -> T {
    loop {
        if let Some(value) = attempt() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_three_node_cluster_creates_a_topic_produces_and_fetches() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = common::start_cluster(dir.path());
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut first = Connection::open(&nodes[0].client_address, deadline);

    // The metadata plane is Normal on node 1 (its primary in view 0).
    eventually(deadline, "the metadata plane", || {
        let reply = first.call(0, READER, 1, Operation::ClusterStatus, Bytes::new());
        let status = ClusterStatusReply::from_bytes(reply.body()).expect("status");
        status
            .groups
            .iter()
            .any(|group| group.group == 0 && group.status == "normal")
            .then_some(())
    });

    let stream = Bytes::from(CreateStream { name: "s".into() }.to_vec());
    let reply = first.call(0, CLIENT, 1, Operation::CreateStream, stream);
    assert_eq!(result(&reply), ResultCode::Ok);
    let topic = CreateTopic {
        stream: "s".into(),
        topic: "t".into(),
        partition_count: 3,
        replica_count: 3,
        confirm: None,
        durability: None,
        consumer_offset_durability: None,
        retention_bytes: 0,
        retention_ms: 0,
        segment_bytes: None,
    };
    let reply = first.call(
        0,
        CLIENT,
        2,
        Operation::CreateTopic,
        Bytes::from(topic.to_vec()),
    );
    assert_eq!(result(&reply), ResultCode::Ok);
    // A retry of the same request is answered from the client table.
    let reply = first.call(
        0,
        CLIENT,
        2,
        Operation::CreateTopic,
        Bytes::from(topic.to_vec()),
    );
    assert_eq!(result(&reply), ResultCode::Ok);

    let query = MetadataRequest {
        stream: Some("s".into()),
        topic: Some("t".into()),
    };
    let reply = first.call(
        0,
        READER,
        2,
        Operation::Metadata,
        Bytes::from(query.to_vec()),
    );
    assert_eq!(result(&reply), ResultCode::Ok);
    let metadata = MetadataReply::from_bytes(reply.body()).expect("metadata");
    assert_eq!(metadata.topics.len(), 1);
    let partition = metadata.topics[0].partitions[0].clone();
    assert_eq!(metadata.topics[0].partitions.len(), 3);
    let primary = partition.replicas[0];
    let address = metadata
        .nodes
        .iter()
        .find(|node| node.id == primary)
        .map(|node| node.client_address.clone())
        .expect("the primary's address");

    let mut to_primary = Connection::open(&address, deadline);
    let mut batch = BatchBuilder::with_capacity(256);
    batch.push(1, b"key", b"hello, strand", &[]);
    let body = batch.finish().bytes().clone();
    let ack = eventually(deadline, "the produce to commit", || {
        let reply = to_primary.call(partition.group, CLIENT, 1, Operation::Produce, body.clone());
        match result(&reply) {
            ResultCode::Ok => Some(ProduceReply::from_bytes(reply.body()).expect("ack")),
            ResultCode::UnknownGroup | ResultCode::Unavailable | ResultCode::Busy => None,
            other => panic!("produce failed: {other:?}"),
        }
    });
    assert_eq!(ack.offset_base, 0);
    assert_eq!(ack.record_count, 1);

    let fetch = FetchRequest {
        offset: 0,
        max_bytes: 1024 * 1024,
        wait_ms: 0,
    };
    let reply = to_primary.call(
        partition.group,
        READER,
        3,
        Operation::Fetch,
        Bytes::from(fetch.to_vec()),
    );
    assert_eq!(result(&reply), ResultCode::Ok);
    let fetched = FetchReply::from_bytes(reply.body().clone()).expect("fetch reply");
    assert_eq!(fetched.high_watermark, 1);
    let records: Vec<(u64, Vec<u8>)> = fetched
        .batches
        .iter()
        .flat_map(|batch| {
            let base = batch.header().offset_base.get();
            batch
                .records_from(base)
                .map(|record| (record.offset, record.value.to_vec()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(records, vec![(0, b"hello, strand".to_vec())]);

    // SIGTERM: every node finishes and exits 0.
    for node in &mut nodes {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(node.child().id().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
    }
    for node in &mut nodes {
        let status = node.child().wait().expect("wait");
        assert!(status.success(), "a node exited with {status}");
    }
}
