//! A hostile or careless client hurts no one else: signing in cannot be
//! used as a weapon. Real processes, a TLS cluster that requires signing
//! in; the attacks speak raw frames from their own loopback addresses
//! (127.0.x.y), while a well-behaved client (user `alice`, from 127.0.0.1)
//! produces throughout and must see no error.
//!
//! - A password hash whose Argon2 cost lies outside the node's fixed range
//!   is refused before it is prepared; so is a token hashed with Argon2.
//! - A token's secret is checked with a keyed hash: far faster than a
//!   password.
//! - A flood of sign-ins is refused `Busy` beyond the check pool.
//! - An unknown user takes as long to refuse as a known one.
//! - Failed sign-ins are limited per address and per user name
//!   (`Throttled`, unchecked), cool down, and are audited.
//! - A client id belongs to the user who first used it.
//! - Any user certificate, the built-in admin's too, can be revoked.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::Node;
use strand_client::tls::ClientTls;
use strand_client::{Client, ClientConfig, Credentials, TopicSpec};
use strand_wire::ops::{Authenticate, CreateToken, CreateUser, ErrorBody, MetadataRequest};
use strand_wire::{
    Body, CommandHeader, FrameDecoder, Message, Msg, Operation, RequestHeader, ResultCode, ViewId,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

const ADMIN_PASSWORD: &str = "admin password";
const ALICE_PASSWORD: &str = "alice password";

/// Failures a user name may take in a row (the node's default): the
/// timing phase stays within it.
const USER_FAILURES_MAX: u8 = 5;

/// An answer to a raw request: its result code and message, or the
/// connection closed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Reply(ResultCode, String),
    Closed,
}

impl Answer {
    fn code(&self) -> Option<ResultCode> {
        match self {
            Answer::Reply(code, _) => Some(*code),
            Answer::Closed => None,
        }
    }

    fn message(&self) -> &str {
        match self {
            Answer::Reply(_, message) => message,
            Answer::Closed => "closed",
        }
    }
}

/// A TLS connection to a node's client port from a chosen source address,
/// speaking frames.
struct Raw {
    stream: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    buffer: BytesMut,
}

impl Raw {
    async fn open(address: &str, ca: &Path, from: Ipv4Addr) -> Raw {
        let socket = TcpSocket::new_v4().expect("socket");
        socket
            .bind(SocketAddr::new(IpAddr::V4(from), 0))
            .expect("bind a loopback source address");
        let target: SocketAddr = address.parse().expect("an address");
        let tcp = socket.connect(target).await.expect("connect");
        let connector = ClientTls::new(ca.to_path_buf())
            .connector()
            .expect("connector");
        let stream = connector.connect(address, None, tcp).await.expect("TLS");
        Raw {
            stream,
            buffer: BytesMut::with_capacity(64 * 1024),
        }
    }

    async fn send(&mut self, group: u64, client: u128, request: u64, op: Operation, body: &[u8]) {
        let mut header = RequestHeader::new(common::CLUSTER, group, ViewId::ZERO, 0);
        header.client.set(client);
        header.request.set(request);
        header.operation = op as u8;
        let message = Msg::new(header, Bytes::copy_from_slice(body));
        let mut frame = message.header_bytes().to_vec();
        frame.extend_from_slice(message.body());
        // A refused peer may have closed already: its answer says so.
        let _ = self.stream.write_all(&frame).await;
        let _ = self.stream.flush().await;
    }

    async fn answer(&mut self) -> Answer {
        let decoder = FrameDecoder::new(16 << 20);
        let read = async {
            loop {
                if let Ok(Some(Message::Reply(reply))) = decoder.decode(&mut self.buffer) {
                    let code = reply.header().result();
                    let message = match ErrorBody::from_bytes(code, reply.body()) {
                        Ok(ErrorBody::Message { message, .. }) => message,
                        Ok(other) => format!("{other:?}"),
                        Err(_) => String::new(),
                    };
                    return Answer::Reply(code, message);
                }
                match self.stream.read_buf(&mut self.buffer).await {
                    Ok(0) | Err(_) => return Answer::Closed,
                    Ok(_) => {}
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(60), read)
            .await
            .expect("an answer within a minute")
    }

    async fn request(&mut self, group: u64, client: u128, op: Operation, body: &[u8]) -> Answer {
        self.send(group, client, 1, op, body).await;
        self.answer().await
    }

    /// Signs in with `credential`; the answer and how long it took.
    async fn sign_in(&mut self, credential: &Authenticate) -> (Answer, Duration) {
        let started = Instant::now();
        let client = rand_client();
        let answer = self
            .request(0, client, Operation::Authenticate, &credential.to_vec())
            .await;
        (answer, started.elapsed())
    }
}

/// A fresh client id.
fn rand_client() -> u128 {
    rand::random::<u128>().max(1)
}

fn password(user: &str, password: &str) -> Authenticate {
    Authenticate::Password {
        user: user.to_owned(),
        password: password.to_owned(),
    }
}

/// The cluster under attack and what every phase needs.
struct Cluster {
    dir: PathBuf,
    nodes: Vec<Node>,
    ca: PathBuf,
    admin: Client,
    group: u64,
}

impl Cluster {
    async fn client(&self, credentials: Credentials) -> Result<Client, strand_client::ClientError> {
        let mut config = ClientConfig::new(common::bootstrap(&self.nodes));
        config.tls = Some(ClientTls::new(self.ca.clone()));
        config.credentials = Some(credentials);
        config.deadline_ms = 10_000;
        Client::connect(config).await
    }

    async fn raw(&self, node: usize, from: Ipv4Addr) -> Raw {
        Raw::open(&self.nodes[node].client_address, &self.ca, from).await
    }

    fn metric(&self, name: &str) -> f64 {
        self.nodes
            .iter()
            .map(|node| common::metric_sum(node, name))
            .sum()
    }
}

/// Starts a TLS cluster of three nodes requiring sign-in, with `s`/`t`
/// (one partition, three replicas) and users alice (produce and consume),
/// bob (produce), victim and timed (no rights).
fn start(dir: &Path, runtime: &tokio::runtime::Runtime) -> Cluster {
    let (nodes, certs) = common::start_signed_in_cluster(dir, ADMIN_PASSWORD);
    let ca = certs.join("ca.pem");
    let deadline = Instant::now() + Duration::from_secs(120);
    runtime.block_on(async {
        let admin = loop {
            let mut config = ClientConfig::new(common::bootstrap(&nodes));
            config.tls = Some(ClientTls::new(ca.clone()));
            config.credentials = Some(Credentials::password("admin", ADMIN_PASSWORD));
            config.deadline_ms = 5_000;
            match Client::connect(config).await {
                Ok(client) => break client,
                Err(error) => {
                    assert!(Instant::now() < deadline, "admin cannot connect: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        admin.create_stream("s").await.expect("stream");
        let mut spec = TopicSpec::new("s", "t");
        spec.partition_count = 1;
        spec.replica_count = 3;
        let group = admin.create_topic(spec).await.expect("topic")[0];
        for (user, rights) in [
            ("alice", &["produce:s/t", "consume:s/t"][..]),
            ("bob", &["produce:s/t"][..]),
            ("victim", &[][..]),
            ("timed", &[][..]),
        ] {
            let secret = if user == "alice" {
                ALICE_PASSWORD.to_owned()
            } else {
                format!("{user} password")
            };
            admin.create_user(user, &secret).await.expect("user");
            for right in rights {
                let permission = strand_client::users::parse_permission(right).expect("right");
                admin
                    .grant_permission(user, permission)
                    .await
                    .expect("grant");
            }
        }
        common::produce_batch(&admin, 0, deadline).await;
        Cluster {
            dir: dir.to_path_buf(),
            nodes,
            ca,
            admin,
            group,
        }
    })
}

/// The well-behaved client's figures.
#[derive(Debug, Default)]
struct Figures {
    produced: u64,
    errors: Vec<String>,
    latencies_ms: Vec<f64>,
}

/// Alice produces one batch after another until `stop`.
async fn well_behaved(alice: Client, stop: Arc<AtomicBool>) -> Figures {
    let mut figures = Figures::default();
    let mut batch = 1_000;
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        match alice
            .produce("s", "t", 0, common::batch_records(batch))
            .await
        {
            Ok(_) => figures.produced += 1,
            Err(error) => figures.errors.push(error.to_string()),
        }
        figures
            .latencies_ms
            .push(started.elapsed().as_secs_f64() * 1000.0);
        batch += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    figures
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn percentile(values: &[f64], fraction: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[((sorted.len() - 1) as f64 * fraction) as usize]
}

#[test]
fn signing_in_cannot_be_used_as_a_weapon() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = common::runtime();
    let cluster = start(dir.path(), &runtime);
    runtime.block_on(async {
        let alice = cluster
            .client(Credentials::password("alice", ALICE_PASSWORD))
            .await
            .expect("alice signs in");
        let stop = Arc::new(AtomicBool::new(false));
        let good = tokio::spawn(well_behaved(alice, Arc::clone(&stop)));

        costly_hashes_are_refused_before_they_are_prepared(&cluster).await;
        a_token_is_checked_with_a_keyed_hash(&cluster).await;
        a_flood_of_sign_ins_is_refused_busy_beyond_the_pool(&cluster).await;
        unknown_and_known_users_take_the_same_time(&cluster).await;
        failures_are_limited_per_address_and_per_user(&cluster).await;
        a_client_id_belongs_to_its_first_user(&cluster).await;
        an_admin_certificate_can_be_revoked(&cluster).await;

        stop.store(true, Ordering::Relaxed);
        let figures = good.await.expect("the well-behaved client");
        println!(
            "well-behaved client (alice) during the attacks: {} produces, {} errors, \
             latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            figures.produced,
            figures.errors.len(),
            percentile(&figures.latencies_ms, 0.5),
            percentile(&figures.latencies_ms, 0.99),
            percentile(&figures.latencies_ms, 1.0),
        );
        assert!(figures.errors.is_empty(), "{:?}", figures.errors);
        assert!(figures.produced > 0);
    });
    failures_are_audited(&cluster);
}

/// A CreateUser whose PHC string asks for 4 GiB or a hundred thousand
/// passes, and a CreateToken with an Argon2 secret hash, are refused
/// `InvalidRequest` by the node that receives them, before anything is
/// prepared.
async fn costly_hashes_are_refused_before_they_are_prepared(cluster: &Cluster) {
    let mut admin = cluster.raw(0, Ipv4Addr::new(127, 0, 0, 1)).await;
    let (signed_in, _) = admin.sign_in(&password("admin", ADMIN_PASSWORD)).await;
    assert_eq!(signed_in.code(), Some(ResultCode::Ok), "{signed_in:?}");
    let sdk = strand_client::users::hash_password("costly password").expect("hash");
    for (forged, named) in [
        ("m=4194304,t=2,p=1", "m=4194304"),
        ("m=19456,t=100000,p=1", "t=100000"),
    ] {
        let create = CreateUser {
            name: "costly".to_owned(),
            password_hash: sdk.replacen("m=19456,t=2,p=1", forged, 1),
        };
        let client = rand_client();
        let answer = admin
            .request(0, client, Operation::CreateUser, &create.to_vec())
            .await;
        assert_eq!(
            answer.code(),
            Some(ResultCode::InvalidRequest),
            "{answer:?}"
        );
        assert!(answer.message().contains(named), "{answer:?}");
        println!("CreateUser with {forged}: {answer:?}");
    }
    let token = CreateToken {
        id: "00000000000000ab".to_owned(),
        user: "alice".to_owned(),
        secret_hash: strand_client::users::hash_password("a token secret").expect("hash"),
        label: String::new(),
        expires_at_ms: None,
    };
    let answer = admin
        .request(0, rand_client(), Operation::CreateToken, &token.to_vec())
        .await;
    assert_eq!(
        answer.code(),
        Some(ResultCode::InvalidRequest),
        "{answer:?}"
    );
    assert!(answer.message().contains("HMAC-SHA-256"), "{answer:?}");
    let users = cluster.admin.list_users().await.expect("users");
    assert!(users.users.iter().all(|user| user.name != "costly"));
    let alice = users.users.iter().find(|user| user.name == "alice");
    assert!(
        alice.is_some_and(|alice| alice.tokens.is_empty()),
        "{users:?}"
    );
}

/// A token signs in in far less time than a password: its secret is
/// checked with HMAC-SHA-256, not Argon2.
async fn a_token_is_checked_with_a_keyed_hash(cluster: &Cluster) {
    let token = cluster
        .admin
        .create_token("alice", "keyed", None)
        .await
        .expect("token");
    let mut token_times = Vec::new();
    let mut password_times = Vec::new();
    for _ in 0..7 {
        let mut raw = cluster.raw(0, Ipv4Addr::new(127, 0, 0, 1)).await;
        let (answer, took) = raw.sign_in(&Authenticate::Token(token.token.clone())).await;
        assert_eq!(answer.code(), Some(ResultCode::Ok), "{answer:?}");
        token_times.push(took);
        let mut raw = cluster.raw(0, Ipv4Addr::new(127, 0, 0, 1)).await;
        let (answer, took) = raw.sign_in(&password("alice", ALICE_PASSWORD)).await;
        assert_eq!(answer.code(), Some(ResultCode::Ok), "{answer:?}");
        password_times.push(took);
    }
    let (token, password) = (median(token_times), median(password_times));
    println!("sign-in round trip, median of 7: token {token:?}, password {password:?}");
    assert!(
        token * 3 < password,
        "token {token:?} vs password {password:?}"
    );
}

/// Eighty sign-ins at once, each from its own address for its own user:
/// beyond the running checks and the queue they are refused `Busy`, at
/// once, and counted.
async fn a_flood_of_sign_ins_is_refused_busy_beyond_the_pool(cluster: &Cluster) {
    const FLOOD: u8 = 80;
    let mut connections = Vec::new();
    for index in 1..=FLOOD {
        connections.push(cluster.raw(1, Ipv4Addr::new(127, 0, 1, index)).await);
    }
    let started = Instant::now();
    for (index, raw) in connections.iter_mut().enumerate() {
        let credential = password(&format!("flood{index}"), "not the password");
        raw.send(
            0,
            rand_client(),
            1,
            Operation::Authenticate,
            &credential.to_vec(),
        )
        .await;
    }
    let mut busy = 0;
    let mut failed = 0;
    for raw in &mut connections {
        match raw.answer().await.code() {
            Some(ResultCode::Busy) => busy += 1,
            Some(ResultCode::AuthenticationFailed) => failed += 1,
            other => panic!("a flooded sign-in answered {other:?}"),
        }
    }
    let took = started.elapsed();
    println!(
        "flood of {FLOOD} sign-ins on node 2: {busy} Busy, {failed} checked and failed, in {took:?}"
    );
    assert!(busy > 0, "the pool's bound refused some");
    assert!(failed > 0, "the pool checked some");
    let counted = common::metric_sum(&cluster.nodes[1], "sign_ins_refused_busy_total");
    assert!(counted >= f64::from(busy), "{counted} counted");
}

/// A known user with a wrong password and an unknown user are refused in
/// the same time: the unknown one is checked against a dummy hash.
async fn unknown_and_known_users_take_the_same_time(cluster: &Cluster) {
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    for index in 1..=USER_FAILURES_MAX {
        let mut raw = cluster.raw(2, Ipv4Addr::new(127, 0, 3, index)).await;
        let (answer, took) = raw.sign_in(&password("timed", "wrong password")).await;
        assert_eq!(
            answer.code(),
            Some(ResultCode::AuthenticationFailed),
            "{answer:?}"
        );
        known.push(took);
        let (answer, took) = raw
            .sign_in(&password(&format!("ghost{index}"), "wrong password"))
            .await;
        assert_eq!(
            answer.code(),
            Some(ResultCode::AuthenticationFailed),
            "{answer:?}"
        );
        unknown.push(took);
    }
    let (known, unknown) = (median(known), median(unknown));
    println!(
        "refusal, median of {USER_FAILURES_MAX}: known user {known:?}, unknown user {unknown:?}"
    );
    let ratio = unknown.as_secs_f64() / known.as_secs_f64();
    assert!(
        (0.5..2.0).contains(&ratio),
        "known {known:?}, unknown {unknown:?}"
    );
}

/// One failed sign-in from `from` for `user` on a fresh connection to node 1.
async fn fail_once(cluster: &Cluster, from: Ipv4Addr, user: &str) -> (Answer, Duration) {
    let mut raw = cluster.raw(0, from).await;
    raw.sign_in(&password(user, "wrong password")).await
}

/// Ten failures from one address throttle it (even for a good password),
/// five for one user name throttle that name from any address; others sign
/// in as usual, and a throttled address may try again after the cooling
/// period.
async fn failures_are_limited_per_address_and_per_user(cluster: &Cluster) {
    let attacker = Ipv4Addr::new(127, 0, 0, 5);
    for index in 0..10 {
        let (answer, _) = fail_once(cluster, attacker, &format!("nobody{index}")).await;
        assert_eq!(
            answer.code(),
            Some(ResultCode::AuthenticationFailed),
            "{answer:?}"
        );
    }
    let (answer, took) = fail_once(cluster, attacker, "nobody10").await;
    assert_eq!(answer.code(), Some(ResultCode::Throttled), "{answer:?}");
    assert!(
        answer.message().contains("from address 127.0.0.5"),
        "{answer:?}"
    );
    println!("throttled address answered in {took:?}: {answer:?}");
    let mut raw = cluster.raw(0, attacker).await;
    let (answer, _) = raw.sign_in(&password("alice", ALICE_PASSWORD)).await;
    assert_eq!(
        answer.code(),
        Some(ResultCode::Throttled),
        "even a good password"
    );

    for index in 1..=5 {
        let (answer, _) = fail_once(cluster, Ipv4Addr::new(127, 0, 4, index), "victim").await;
        assert_eq!(
            answer.code(),
            Some(ResultCode::AuthenticationFailed),
            "{answer:?}"
        );
    }
    let (answer, _) = fail_once(cluster, Ipv4Addr::new(127, 0, 4, 6), "victim").await;
    assert_eq!(answer.code(), Some(ResultCode::Throttled), "{answer:?}");
    assert!(answer.message().contains("for user victim"), "{answer:?}");

    let mut raw = cluster.raw(0, Ipv4Addr::new(127, 0, 0, 1)).await;
    let (answer, _) = raw.sign_in(&password("alice", ALICE_PASSWORD)).await;
    assert_eq!(
        answer.code(),
        Some(ResultCode::Ok),
        "another user and address: {answer:?}"
    );
    assert!(cluster.metric("sign_ins_throttled_total") >= 3.0);

    tokio::time::sleep(Duration::from_millis(6_500)).await;
    let (answer, _) = fail_once(cluster, attacker, "nobody11").await;
    assert_eq!(
        answer.code(),
        Some(ResultCode::AuthenticationFailed),
        "checked again after the cooling period: {answer:?}"
    );
}

/// Bob may produce to s/t too, but not with alice's client id: refused
/// before the group sees it, and never given alice's cached reply.
async fn a_client_id_belongs_to_its_first_user(cluster: &Cluster) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let primary = common::serving_primary(&cluster.admin, cluster.group, None, deadline).await;
    let node = cluster
        .nodes
        .iter()
        .position(|node| node.node == primary)
        .expect("the primary is a node");
    let mut batch = strand_wire::batch::BatchBuilder::with_capacity(64);
    batch.push(1, b"key", b"alice's record", &[]);
    let body = batch.finish().bytes().clone();
    let client = rand_client();

    let mut alice = cluster.raw(node, Ipv4Addr::new(127, 0, 0, 1)).await;
    let (answer, _) = alice.sign_in(&password("alice", ALICE_PASSWORD)).await;
    assert_eq!(answer.code(), Some(ResultCode::Ok), "{answer:?}");
    alice
        .send(cluster.group, client, 1, Operation::Produce, &body)
        .await;
    let answer = alice.answer().await;
    assert_eq!(
        answer.code(),
        Some(ResultCode::Ok),
        "alice's produce: {answer:?}"
    );

    let mut bob = cluster.raw(node, Ipv4Addr::new(127, 0, 0, 1)).await;
    let (answer, _) = bob.sign_in(&password("bob", "bob password")).await;
    assert_eq!(answer.code(), Some(ResultCode::Ok), "{answer:?}");
    bob.send(cluster.group, client, 1, Operation::Produce, &body)
        .await;
    let answer = bob.answer().await;
    println!("bob replaying alice's client id and request: {answer:?}");
    assert_eq!(
        answer.code(),
        Some(ResultCode::PermissionDenied),
        "{answer:?}"
    );
    assert!(answer.message().contains("client id"), "{answer:?}");
    let metadata = MetadataRequest {
        stream: None,
        topic: None,
    };
    let answer = bob
        .request(0, client, Operation::Metadata, &metadata.to_vec())
        .await;
    assert_eq!(
        answer.code(),
        Some(ResultCode::PermissionDenied),
        "{answer:?}"
    );

    alice
        .send(cluster.group, client, 2, Operation::Produce, &body)
        .await;
    let answer = alice.answer().await;
    assert_eq!(
        answer.code(),
        Some(ResultCode::Ok),
        "alice goes on: {answer:?}"
    );
    let refused = common::metric_sum(&cluster.nodes[node], "requests_refused_client_id_total");
    assert!(refused >= 2.0, "{refused}");
}

/// A client presenting `files` (certificate and key) and no other
/// credentials.
async fn with_certificate(
    cluster: &Cluster,
    files: (PathBuf, PathBuf),
) -> Result<Client, strand_client::ClientError> {
    let mut config = ClientConfig::new(common::bootstrap(&cluster.nodes));
    config.tls = Some(ClientTls {
        identity: Some(files),
        ..ClientTls::new(cluster.ca.clone())
    });
    config.deadline_ms = 10_000;
    Client::connect(config).await
}

/// A certificate naming `admin` signs in as admin; `strand cert revoke`
/// ends that, for new connections and open ones alike, while other
/// users' certificates keep working.
async fn an_admin_certificate_can_be_revoked(cluster: &Cluster) {
    let certs = cluster.ca.parent().expect("the certificates' directory");
    let admin_files = strand_server::net::tls::generate_user(certs, "admin").expect("admin cert");
    let alice_files = strand_server::net::tls::generate_user(certs, "alice").expect("alice cert");
    let admin = with_certificate(cluster, admin_files.clone())
        .await
        .expect("admin's certificate signs in");
    admin.list_users().await.expect("as admin");

    let password_file = cluster.dir.join("admin.password");
    std::fs::write(&password_file, format!("{ADMIN_PASSWORD}\n")).expect("password file");
    let bootstrap = common::bootstrap(&cluster.nodes).join(",");
    let path = |path: &Path| path.to_str().expect("UTF-8 path").to_owned();
    let (ca, password, cert) = (
        path(&cluster.ca),
        path(&password_file),
        path(&admin_files.0),
    );
    let revoked = common::strand(
        &bootstrap,
        &[
            "--ca",
            &ca,
            "--user",
            "admin",
            "--password-file",
            &password,
            "cert",
            "revoke",
            "--file",
            &cert,
        ],
        b"",
    )
    .await;
    assert_eq!(
        revoked.outcome,
        strand_client::cli::Outcome::Success,
        "{}",
        revoked.stderr
    );
    println!("strand cert revoke: {}", revoked.stdout.trim());

    let open = admin.list_users().await;
    assert!(
        matches!(
            open,
            Err(strand_client::ClientError::AuthenticationFailed { .. })
        ),
        "the open connection: {open:?}"
    );
    let again = with_certificate(cluster, admin_files).await;
    assert!(
        matches!(
            again,
            Err(strand_client::ClientError::AuthenticationFailed { .. })
        ),
        "a new connection: {again:?}"
    );
    let alice = with_certificate(cluster, alice_files)
        .await
        .expect("another certificate still signs in");
    alice
        .fetch("s", "t", 0, 0, 1 << 20, 0)
        .await
        .expect("alice's certificate keeps alice's rights");
}

/// Every failed sign-in is in the audit log, with address and user name.
fn failures_are_audited(cluster: &Cluster) {
    let entries = common::audit_entries(&cluster.dir, &cluster.nodes);
    let failures: Vec<_> = entries
        .iter()
        .filter(|entry| entry["action"] == "Authenticate")
        .collect();
    let from = |address: &str, target: &str, outcome: &str| {
        failures.iter().any(|entry| {
            entry["source"]
                .as_str()
                .is_some_and(|source| source.starts_with(&format!("{address}:")))
                && entry["target"] == target
                && entry["outcome"] == outcome
        })
    };
    assert!(
        from("127.0.0.5", "nobody0", "AuthenticationFailed"),
        "{failures:?}"
    );
    assert!(from("127.0.0.5", "alice", "Throttled"), "{failures:?}");
    assert!(
        from("127.0.4.1", "victim", "AuthenticationFailed"),
        "{failures:?}"
    );
    assert!(from("127.0.4.6", "victim", "Throttled"), "{failures:?}");
    assert!(
        from("127.0.1.1", "flood0", "AuthenticationFailed") || from("127.0.1.1", "flood0", "Busy")
    );
    println!("{} failed sign-ins audited", failures.len());
    assert!(
        entries
            .iter()
            .any(|entry| entry["action"] == "RevokeCertificate"
                && entry["identity"] == "user admin"
                && entry["outcome"] == "Ok"),
        "the revocation is audited"
    );
}
