//! Kafka clients against real nodes: librdkafka through `kcat` (installed
//! by `scripts/test.sh`) produces and consumes on a 3-node cluster, reads
//! what the SDK wrote and the other way round (keys, values, headers,
//! timestamps, offsets), with every compression Kafka producers use; SASL
//! PLAIN over TLS signs Kafka clients in as Strand users with their rights;
//! an idempotent producer's retries are written once, across a failover
//! too; a client that sends hostile frames costs the node nothing. The
//! client libraries' tests are in `kafka_libraries.rs`.

mod common;

use common::kafka::{brokers, kcat, leader_of, orders_topic};

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use strand_client::{Client, NewRecord, ProducerConfig, TopicSpec};
use strand_kafka::codec::{Reader, Writer};
use strand_wire::ops::{Permission, Right, Scope};
/// One record as kcat prints it with [`FORMAT`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct Printed {
    partition: u32,
    offset: u64,
    key: String,
    value: String,
    headers: String,
    timestamp_ms: u64,
}

/// kcat's output format for [`Printed`].
const FORMAT: &str = "%p|%o|%k|%s|%h|%T\n";

fn parse(output: &str) -> Vec<Printed> {
    output
        .lines()
        .filter(|line| !line.starts_with('%'))
        .map(|line| {
            let fields: Vec<&str> = line.split('|').collect();
            assert_eq!(fields.len(), 6, "a kcat line: {line}");
            Printed {
                partition: fields[0].parse().expect("partition"),
                offset: fields[1].parse().expect("offset"),
                key: fields[2].to_owned(),
                value: fields[3].to_owned(),
                headers: fields[4].to_owned(),
                timestamp_ms: fields[5].parse().expect("timestamp"),
            }
        })
        .collect()
}

#[test]
fn kcat_and_the_sdk_read_each_others_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nodes = common::start_cluster(dir.path());
    let runtime = common::runtime();
    let client = orders_topic(&nodes, &runtime);
    let brokers = brokers(&nodes);

    // kcat writes 20 records to partition 0 with each compression.
    let codecs = ["none", "gzip", "snappy", "lz4", "zstd"];
    for codec in codecs {
        let input: String = (0..20)
            .map(|index| format!("{codec}-k{index}\t{codec}-v{index}\n"))
            .collect();
        let args = [
            "-b",
            &brokers,
            "-P",
            "-t",
            "orders",
            "-p",
            "0",
            "-K",
            "\t",
            "-z",
            codec,
            "-H",
            "from=kcat",
        ];
        kcat(&args, &input);
    }
    // The SDK reads them in order, keys, values and headers as written.
    let deadline = Instant::now() + Duration::from_secs(60);
    let read = runtime.block_on(common::read_partition(
        &client, "default", "orders", 0, 100, deadline,
    ));
    let expected: Vec<(u64, Vec<u8>, Vec<u8>)> = codecs
        .iter()
        .flat_map(|codec| (0..20).map(move |index| (codec, index)))
        .enumerate()
        .map(|(offset, (codec, index))| {
            (
                offset as u64,
                format!("{codec}-k{index}").into_bytes(),
                format!("{codec}-v{index}").into_bytes(),
            )
        })
        .collect();
    assert_eq!(read, expected);
    let headers = runtime.block_on(async {
        client
            .fetch("default", "orders", 0, 0, 1 << 20, 0)
            .await
            .expect("fetch")
            .records[0]
            .headers
            .clone()
    });
    assert_eq!(
        headers,
        vec![("from".to_owned(), Bytes::from_static(b"kcat"))]
    );

    // The SDK writes 10 records to partition 2 with headers and times.
    let timestamp_us = 1_700_000_000_123_000u64;
    runtime.block_on(async {
        let records: Vec<NewRecord> = (0..10)
            .map(|index| NewRecord {
                key: Bytes::from(format!("sdk-k{index}")),
                value: Bytes::from(format!("sdk-v{index}")),
                headers: vec![("from".to_owned(), Bytes::from_static(b"sdk"))],
                timestamp_us: Some(timestamp_us + index * 1000),
            })
            .collect();
        client
            .produce("default", "orders", 2, records)
            .await
            .expect("produce");
    });
    // kcat reads every partition to its end.
    let printed = parse(&kcat(
        &["-b", &brokers, "-C", "-t", "orders", "-e", "-f", FORMAT],
        "",
    ));
    let from_sdk: Vec<&Printed> = printed
        .iter()
        .filter(|record| record.partition == 2)
        .collect();
    assert_eq!(from_sdk.len(), 10, "{printed:?}");
    for (index, record) in from_sdk.iter().enumerate() {
        assert_eq!(record.offset, index as u64);
        assert_eq!(record.key, format!("sdk-k{index}"));
        assert_eq!(record.value, format!("sdk-v{index}"));
        assert_eq!(record.headers, "from=sdk");
        assert_eq!(record.timestamp_ms, timestamp_us / 1000 + index as u64);
    }
    let from_kcat = printed
        .iter()
        .filter(|record| record.partition == 0)
        .count();
    assert_eq!(from_kcat, 100);

    // `strand produce` writes with a key, a header and its own time; kcat
    // reads them as written, and `strand consume` reads what kcat wrote.
    let cluster = common::bootstrap(&nodes).join(",");
    let before_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    let args = [
        "produce",
        "default/orders",
        "--partition",
        "1",
        "--key-sep",
        "=",
        "--header",
        "from=cli",
    ];
    let produced = runtime.block_on(common::strand(&cluster, &args, b"ck0=cv0\nck1=cv1\n"));
    assert_eq!(
        produced.outcome,
        strand_client::cli::Outcome::Success,
        "{}",
        produced.stderr
    );
    let args = [
        "-b", &brokers, "-C", "-t", "orders", "-p", "1", "-e", "-f", FORMAT,
    ];
    let from_cli = parse(&kcat(&args, ""));
    assert_eq!(from_cli.len(), 2, "{from_cli:?}");
    for (index, record) in from_cli.iter().enumerate() {
        assert_eq!(
            (record.offset, record.key.as_str()),
            (index as u64, format!("ck{index}").as_str())
        );
        assert_eq!(
            (record.value.as_str(), record.headers.as_str()),
            (format!("cv{index}").as_str(), "from=cli")
        );
        assert!(
            record.timestamp_ms >= before_ms,
            "stamped when sent: {record:?}"
        );
    }
    let args = [
        "consume",
        "default/orders",
        "--partition",
        "0",
        "--from",
        "earliest",
        "--count",
        "2",
        "--key-sep",
        "=",
    ];
    let consumed = runtime.block_on(common::strand(&cluster, &args, b""));
    assert_eq!(
        consumed.outcome,
        strand_client::cli::Outcome::Success,
        "{}",
        consumed.stderr
    );
    assert_eq!(consumed.stdout, "0\tnone-k0=none-v0\n1\tnone-k1=none-v1\n");

    // Offsets by query: earliest, latest, and by time.
    let offsets = kcat(
        &[
            "-b",
            &brokers,
            "-Q",
            "-t",
            "orders:0:-2",
            "-t",
            "orders:2:-1",
        ],
        "",
    );
    assert!(offsets.contains("orders [0] offset 0"), "{offsets}");
    assert!(offsets.contains("orders [2] offset 10"), "{offsets}");
    assert!(kcat(&["-b", &brokers, "-Q", "-t", "orders:1:-1"], "").contains("orders [1] offset 2"));
}

/// A Kafka request frame: size, then `payload`.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut frame = (payload.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(payload);
    frame
}

/// Sends `bytes` on a new connection to `address` and says whether the
/// node closed it (reads end) within ten seconds.
fn closed_after(address: &str, bytes: &[u8]) -> bool {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let _ = stream.write_all(bytes);
    let mut sink = Vec::new();
    stream.read_to_end(&mut sink).is_ok()
}

#[test]
fn a_hostile_kafka_client_costs_the_node_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut nodes = common::start_cluster(dir.path());
    let runtime = common::runtime();
    let _client = orders_topic(&nodes, &runtime);
    let address = nodes[0].kafka_address.clone();
    // Metadata v0 whose topic array claims 2^31 - 1 entries on five bytes.
    let mut lying = vec![0, 3, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
    lying.extend_from_slice(&i32::MAX.to_be_bytes());
    lying.push(0);
    assert!(
        closed_after(&address, &frame(&lying)),
        "a lying array count closes"
    );
    // A frame that says it is 2 GiB.
    assert!(
        closed_after(&address, &[0x7f, 0xff, 0xff, 0xff, 0, 0]),
        "an oversized frame closes"
    );
    // An API the node does not serve, and random bytes.
    assert!(closed_after(
        &address,
        &frame(&[0, 99, 0, 0, 0, 0, 0, 1, 0xff, 0xff])
    ));
    assert!(closed_after(&address, &frame(&[0xde, 0xad, 0xbe, 0xef])));
    // A produce whose gzip batch would inflate past the bound is refused
    // by the client's own library long before; the node's bound is in the
    // crate's tests. The node serves on.
    for node in &mut nodes {
        node.assert_alive();
    }
    let listing = kcat(&["-b", &brokers(&nodes), "-L", "-t", "orders"], "");
    assert!(
        listing.contains("topic \"orders\" with 3 partitions"),
        "{listing}"
    );
    // An unknown topic is Kafka's unknown topic.
    let unknown = kcat(&["-b", &brokers(&nodes), "-L", "-t", "missing"], "");
    assert!(unknown.contains("Unknown topic or partition"), "{unknown}");
}

/// kcat's options to reach a TLS cluster over SASL PLAIN as `user`.
fn sasl_options(nodes: &[common::Node], certs: &Path, user: &str, password: &str) -> Vec<String> {
    [
        "-b".to_owned(),
        brokers(nodes),
        "-X".to_owned(),
        "security.protocol=SASL_SSL".to_owned(),
        "-X".to_owned(),
        "sasl.mechanisms=PLAIN".to_owned(),
        "-X".to_owned(),
        format!("sasl.username={user}"),
        "-X".to_owned(),
        format!("sasl.password={password}"),
        "-X".to_owned(),
        format!("ssl.ca.location={}", certs.join("ca.pem").display()),
    ]
    .to_vec()
}

/// Runs kcat with `options` then `args`; whether it succeeded, and its
/// stdout and stderr.
fn kcat_outcome(options: &[String], args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new("timeout")
        .arg("30")
        .arg("kcat")
        .args(options)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is installed (scripts/test.sh installs it)");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.as_bytes())
        .expect("write kcat's input");
    drop(input);
    let output = child.wait_with_output().expect("kcat runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn sasl_plain_over_tls_signs_kafka_clients_in_as_strand_users_with_their_rights() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (nodes, certs) = common::start_signed_in_cluster(dir.path(), "admin password");
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(60);
    runtime.block_on(async {
        let mut config = strand_client::ClientConfig::new(common::bootstrap(&nodes));
        config.tls = Some(strand_client::tls::ClientTls::new(certs.join("ca.pem")));
        config.credentials = Some(strand_client::Credentials::password(
            "admin",
            "admin password",
        ));
        let admin = loop {
            match Client::connect(config.clone()).await {
                Ok(client) => break client,
                Err(error) => {
                    assert!(Instant::now() < deadline, "cannot connect: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        admin.create_stream("default").await.expect("create stream");
        let mut spec = TopicSpec::new("default", "orders");
        spec.partition_count = 1;
        admin.create_topic(spec).await.expect("create topic");
        admin
            .create_user("reader", "reader password")
            .await
            .expect("create user");
        let consume = Permission {
            right: Right::Consume,
            scope: Scope::Topic("default".to_owned(), "orders".to_owned()),
        };
        admin
            .grant_permission("reader", consume)
            .await
            .expect("grant");
    });
    let admin = sasl_options(&nodes, &certs, "admin", "admin password");
    common::wait_until("the admin produces over SASL_SSL", 60, || {
        kcat_outcome(&admin, &["-P", "-t", "orders", "-p", "0"], "first\n").0
    });
    let reader = sasl_options(&nodes, &certs, "reader", "reader password");
    common::wait_until("the reader reads what the admin wrote", 60, || {
        let (ok, out, _) = kcat_outcome(&reader, &["-C", "-t", "orders", "-e", "-f", "%s\n"], "");
        ok && out.lines().any(|line| line == "first")
    });
    // The reader may not produce: Kafka's authorization error.
    let (_, _, stderr) = kcat_outcome(&reader, &["-P", "-t", "orders", "-p", "0"], "denied\n");
    assert!(stderr.contains("Topic authorization failed"), "{stderr}");
    // A wrong password is refused at the handshake.
    let wrong = sasl_options(&nodes, &certs, "reader", "not the password");
    let (ok, _, stderr) = kcat_outcome(&wrong, &["-L"], "");
    assert!(
        !ok && stderr.contains("SASL authentication error"),
        "{stderr}"
    );
    // Without SASL, nothing but the handshake is served.
    let anonymous = [
        "-b".to_owned(),
        brokers(&nodes),
        "-X".to_owned(),
        "security.protocol=SSL".to_owned(),
        "-X".to_owned(),
        format!("ssl.ca.location={}", certs.join("ca.pem").display()),
    ];
    let (ok, _, _) = kcat_outcome(&anonymous, &["-L", "-m", "5"], "");
    assert!(!ok, "an anonymous client gets no metadata");
}

/// A Kafka connection speaking raw frames (the few requests the
/// idempotence test sends).
struct RawKafka {
    stream: TcpStream,
    correlation: i32,
}

impl RawKafka {
    fn connect(address: &str) -> RawKafka {
        let stream = TcpStream::connect(address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        RawKafka {
            stream,
            correlation: 0,
        }
    }

    /// Sends one classic-encoding request and returns its response body.
    fn call(&mut self, api_key: i16, version: i16, body: &[u8]) -> Bytes {
        self.correlation += 1;
        let mut writer = Writer::new(false);
        writer.i16(api_key);
        writer.i16(version);
        writer.i32(self.correlation);
        writer.nullable_string(Some("raw"));
        writer.raw(body);
        self.stream
            .write_all(&frame(&writer.finish()))
            .expect("send");
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).expect("a response");
        let mut payload = vec![0u8; u32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut payload).expect("a response");
        assert_eq!(payload[..4], self.correlation.to_be_bytes(), "in order");
        Bytes::from(payload).slice(4..)
    }

    /// InitProducerId v1: the producer id and epoch.
    fn init_producer(&mut self) -> (i64, i16) {
        let mut body = Writer::new(false);
        body.nullable_string(None);
        body.i32(60_000);
        let mut reader = Reader::new(self.call(22, 1, &body.finish()), false);
        reader.i32("throttle").expect("throttle");
        assert_eq!(reader.i16("error").expect("error"), 0);
        (
            reader.i64("id").expect("id"),
            reader.i16("epoch").expect("epoch"),
        )
    }

    /// Produce v3 of one batch to `topic` partition 0: the error code and
    /// base offset.
    fn produce(&mut self, topic: &str, batch: &[u8]) -> (i16, i64) {
        let mut body = Writer::new(false);
        body.nullable_string(None);
        body.i16(-1);
        body.i32(30_000);
        body.i32(1);
        body.string(topic);
        body.i32(1);
        body.i32(0);
        body.bytes(batch);
        let mut reader = Reader::new(self.call(0, 3, &body.finish()), false);
        assert_eq!(reader.i32("topics").expect("topics"), 1);
        reader.string("name").expect("name");
        assert_eq!(reader.i32("partitions").expect("partitions"), 1);
        reader.i32("index").expect("index");
        let error = reader.i16("error").expect("error");
        (error, reader.i64("offset").expect("offset"))
    }
}

/// An idempotent producer's Kafka batch of `values`, uncompressed.
fn idempotent_batch(producer: (i64, i16), first_sequence: i32, values: &[&str]) -> Vec<u8> {
    let mut records = Writer::new(true);
    for (index, value) in values.iter().enumerate() {
        let mut record = Writer::new(true);
        record.i8(0);
        record.varlong(0);
        record.varint(index as i32);
        record.varint(-1);
        record.varint(value.len() as i32);
        record.raw(value.as_bytes());
        record.varint(0);
        let record = record.finish();
        records.varint(record.len() as i32);
        records.raw(&record);
    }
    let mut tail = Writer::new(false);
    tail.i16(0);
    tail.i32(values.len() as i32 - 1);
    tail.i64(1_700_000_000_000);
    tail.i64(1_700_000_000_000);
    tail.i64(producer.0);
    tail.i16(producer.1);
    tail.i32(first_sequence);
    tail.i32(values.len() as i32);
    tail.raw(&records.finish());
    let tail = tail.finish();
    let mut batch = Writer::new(false);
    batch.i64(0);
    batch.i32((4 + 1 + 4 + tail.len()) as i32);
    batch.i32(-1);
    batch.i8(2);
    batch.raw(&strand_wire::checksum::checksum(&tail).to_be_bytes());
    batch.raw(&tail);
    batch.finish().to_vec()
}

#[test]
fn an_idempotent_producers_retries_are_written_once_even_across_a_failover() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut nodes = common::start_cluster(dir.path());
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = runtime.block_on(async {
        let client = common::connect(common::bootstrap(&nodes), deadline).await;
        client
            .create_stream("default")
            .await
            .expect("create stream");
        let mut spec = TopicSpec::new("default", "dedup");
        spec.partition_count = 1;
        client.create_topic(spec).await.expect("create topic");
        drop(
            common::producer(
                &client,
                "default",
                "dedup",
                ProducerConfig::default(),
                deadline,
            )
            .await,
        );
        client
    });
    let leader = leader_of(&nodes, "dedup");
    let mut kafka = RawKafka::connect(&nodes[leader].kafka_address);
    let producer = kafka.init_producer();
    let first = idempotent_batch(producer, 0, &["a", "b", "c"]);
    let second = idempotent_batch(producer, 3, &["d", "e"]);
    assert_eq!(kafka.produce("dedup", &first), (0, 0));
    assert_eq!(
        kafka.produce("dedup", &first),
        (0, 0),
        "a retry gets the first answer"
    );
    assert_eq!(kafka.produce("dedup", &second), (0, 3));
    // Sequences that skip ahead, or start inside a batch written, are out of order.
    let skipped = idempotent_batch(producer, 10, &["x"]);
    assert_eq!(kafka.produce("dedup", &skipped).0, 45);
    let inside = idempotent_batch(producer, 4, &["x"]);
    assert_eq!(kafka.produce("dedup", &inside).0, 45);

    // The leader dies; the retry of the second batch at the new leader is
    // answered from the replicated client table, and the next one follows.
    nodes[leader].kill();
    let new_leader = leader_of(&nodes, "dedup");
    let mut kafka = RawKafka::connect(&nodes[new_leader].kafka_address);
    common::wait_until("the new leader answers the retry", 60, || {
        kafka.produce("dedup", &second) == (0, 3)
    });
    let third = idempotent_batch(producer, 5, &["f"]);
    assert_eq!(kafka.produce("dedup", &third), (0, 5));
    let read = runtime.block_on(common::read_partition(
        &client, "default", "dedup", 0, 6, deadline,
    ));
    let values: Vec<&[u8]> = read.iter().map(|(_, _, value)| value.as_slice()).collect();
    assert_eq!(
        values,
        [b"a", b"b", b"c", b"d", b"e", b"f"].map(|value| &value[..])
    );
    let fetched = runtime
        .block_on(client.fetch("default", "dedup", 0, 6, 1 << 20, 0))
        .expect("fetch");
    assert!(
        fetched.records.is_empty(),
        "nothing written twice: {:?}",
        fetched.records
    );
}
