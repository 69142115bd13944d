//! TLS with real processes: a cluster whose nodes serve TLS 1.3 on the
//! client port (checked by `openssl s_client`, a client that is not ours)
//! and mutual TLS on the replica bus. A plaintext connection to a TLS port
//! is closed; a fake peer without a certificate, or with another node's
//! certificate, is refused while the real link stays up; a client without a
//! node certificate cannot send `EpochStarted`; a rolling restart under load
//! loses nothing. With signing in required, each operation is checked
//! against the user's rights; an access token acts as its user until it is
//! revoked, expires or its user is deleted; a user certificate signs in as
//! the user it names.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Node;
use strand_client::cli::Outcome;
use strand_client::tls::ClientTls;
use strand_client::{Client, ClientError, Durability, TopicSpec};
use strand_wire::CommandHeader;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A running TLS cluster of three nodes with `s`/`t` (one partition, three
/// replicas) and a client verifying the nodes with the cluster's CA.
struct TlsCluster {
    nodes: Vec<Node>,
    certs: std::path::PathBuf,
    runtime: tokio::runtime::Runtime,
    deadline: Instant,
    client: Client,
    group: u64,
}

impl TlsCluster {
    fn start(dir: &Path) -> TlsCluster {
        let mut nodes = common::configure_cluster(dir, 3);
        let certs = common::enable_tls(dir, &nodes);
        for node in &mut nodes {
            node.start();
        }
        let runtime = common::runtime();
        let deadline = Instant::now() + Duration::from_secs(240);
        let (client, group) = runtime.block_on(async {
            let client = common::connect_tls(common::bootstrap(&nodes), &certs, deadline).await;
            client.create_stream("s").await.expect("create stream");
            let mut spec = TopicSpec::new("s", "t");
            spec.partition_count = 1;
            spec.replica_count = 3;
            spec.durability = Some(Durability::Persisted);
            let groups = client.create_topic(spec).await.expect("create topic");
            (client, groups[0])
        });
        TlsCluster {
            nodes,
            certs,
            runtime,
            deadline,
            client,
            group,
        }
    }

    /// Produces batches `batches` and records their acks in `acked`.
    fn produce(
        &self,
        batches: std::ops::Range<u64>,
        acked: &mut BTreeMap<u64, strand_client::ProduceAck>,
    ) {
        self.runtime.block_on(async {
            for batch in batches {
                let ack = common::produce_batch(&self.client, batch, self.deadline).await;
                acked.insert(batch, ack);
            }
        });
    }
}

/// Whether `address` closes a connection that speaks plaintext frames to it
/// (it must, within a few seconds, without answering a frame).
fn closes_plaintext(address: &str) -> bool {
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    // A request header's worth of bytes: not a TLS record.
    let _ = stream.write_all(&[0x5a; 256]);
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => !answer.contains(&0x5a),
        Err(error) => error.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

#[test]
fn clients_verify_nodes_by_the_ca_and_plaintext_or_forged_reports_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = TlsCluster::start(dir.path());
    let mut acked = BTreeMap::new();
    cluster.produce(0..20, &mut acked);
    cluster.runtime.block_on(common::check_acknowledged(
        &cluster.client,
        &acked,
        acked.len() * common::BATCH as usize,
    ));

    // `openssl s_client`: the chain verifies against the CA, over TLS 1.3.
    let node = &cluster.nodes[0];
    let output = Command::new("openssl")
        .args(["s_client", "-brief", "-verify_return_error", "-connect"])
        .arg(&node.client_address)
        .arg("-CAfile")
        .arg(cluster.certs.join("ca.pem"))
        .stdin(Stdio::null())
        .output()
        .expect("run openssl (the openssl command line is needed)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.contains("Verification: OK"), "{text}");
    assert!(text.contains("Protocol version: TLSv1.3"), "{text}");

    // Plaintext to either TLS port is closed.
    assert!(closes_plaintext(&node.client_address), "client port");
    assert!(closes_plaintext(&node.replica_address), "replica bus");

    // The topic's creation is in the audit log of the node that took it,
    // with who asked (a TLS client without a node certificate) and how it
    // ended.
    let entries = common::audit_entries(dir.path(), &cluster.nodes);
    let created = entries.iter().find(|entry| {
        entry["action"] == "CreateTopic" && entry["target"] == "s/t" && entry["outcome"] == "Ok"
    });
    let created = created.unwrap_or_else(|| panic!("no CreateTopic entry in {entries:?}"));
    assert_eq!(created["identity"], "anonymous");
    assert!(
        created["source"]
            .as_str()
            .is_some_and(|source| source.starts_with("127.0.0.1:"))
    );
    assert!(
        created["time"]
            .as_str()
            .is_some_and(|time| time.ends_with('Z'))
    );
    assert!(
        cluster
            .nodes
            .iter()
            .map(|node| common::metric_sum(node, "audit_actions_total"))
            .sum::<f64>()
            >= 2.0,
        "the stream and the topic were counted"
    );

    // A client that does not trust the CA (no CA given: plaintext) gets nowhere.
    let mut plain = strand_client::ClientConfig::new(common::bootstrap(&cluster.nodes));
    plain.deadline_ms = 1_500;
    plain.request_timeout_ms = 500;
    let plaintext = cluster.runtime.block_on(Client::connect(plain));
    assert!(
        matches!(plaintext, Err(ClientError::Connect { .. })),
        "{plaintext:?}"
    );
}

/// Opens a TLS connection to `node`'s replica port presenting `identity`
/// (a node's certificate and key files) or none, says `Ping` as node
/// `claimed`, follows with a frame a peer would send, and returns whether
/// the node kept the connection open for a moment.
async fn fake_peer(certs: &Path, node: &Node, identity: Option<u32>, claimed: u32) -> bool {
    let tls = ClientTls {
        ca: certs.join("ca.pem"),
        server_name: None,
        identity: identity.map(|id| {
            let files = strand_server::net::tls::node_files(certs, id);
            (files.cert, files.key)
        }),
    };
    let connector = tls.connector().expect("connector");
    let stream = tokio::net::TcpStream::connect(&node.replica_address)
        .await
        .expect("connect");
    let name = strand_server::net::tls::node_name(node.node);
    let Ok(mut stream) = connector
        .connect(&node.replica_address, Some(&name), stream)
        .await
    else {
        return false;
    };
    let mut ping = strand_wire::PingHeader::new(common::CLUSTER, 0, strand_wire::ViewId::ZERO, 0);
    ping.node.set(claimed);
    let mut frame = bytes::BytesMut::new();
    strand_wire::Message::Ping(strand_wire::Msg::new(ping, bytes::Bytes::new()))
        .encode_into(&mut frame);
    if stream.write_all(&frame).await.is_err() || stream.flush().await.is_err() {
        return false;
    }
    let mut buffer = [0u8; 64];
    match tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buffer)).await {
        Err(_) => true,                  // still open, nothing said: accepted
        Ok(Ok(0)) | Ok(Err(_)) => false, // closed
        Ok(Ok(_)) => true,
    }
}

#[test]
fn a_fake_peer_is_refused_and_the_real_link_stays_up() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = TlsCluster::start(dir.path());
    let mut acked = BTreeMap::new();
    cluster.produce(0..10, &mut acked);
    let target = &cluster.nodes[2];
    let rejected_before = common::metric(target, "replica_frames_rejected_total");
    let view_before = cluster
        .runtime
        .block_on(common::group_status(&cluster.client, 3, cluster.group))
        .expect("node 3 reports the group")
        .view;

    let no_certificate = cluster
        .runtime
        .block_on(fake_peer(&cluster.certs, target, None, 1));
    assert!(!no_certificate, "a peer without a certificate is refused");
    let wrong_certificate = cluster
        .runtime
        .block_on(fake_peer(&cluster.certs, target, Some(2), 1));
    assert!(
        !wrong_certificate,
        "node 2's certificate claiming node 1 is refused"
    );
    common::wait_until("both refusals are counted", 10, || {
        common::metric(target, "replica_frames_rejected_total") >= rejected_before + 2.0
    });
    let log = std::fs::read_to_string(&target.log).expect("node 3's log");
    assert!(
        log.contains("claimed to be node 1 with a certificate of node 2"),
        "node 3 says why"
    );

    // The real links never dropped: writes go on in the same view.
    cluster.produce(10..30, &mut acked);
    cluster.runtime.block_on(common::check_acknowledged(
        &cluster.client,
        &acked,
        acked.len() * common::BATCH as usize,
    ));
    let after = cluster
        .runtime
        .block_on(common::group_status(&cluster.client, 3, cluster.group))
        .expect("node 3 reports the group");
    assert_eq!(after.view, view_before, "no view change");
    assert!(
        !log.contains("bus: connection lost"),
        "no real bus connection was replaced or lost"
    );
}

#[test]
fn a_rolling_restart_of_a_tls_cluster_under_load_loses_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cluster = TlsCluster::start(dir.path());
    let mut acked = BTreeMap::new();
    cluster.produce(0..20, &mut acked);
    let mut next = 20;
    for index in 0..3 {
        let producing = {
            let client = cluster.client.clone();
            let deadline = cluster.deadline;
            let first = next;
            cluster.runtime.spawn(async move {
                let mut acked = BTreeMap::new();
                for batch in first..first + 60 {
                    acked.insert(batch, common::produce_batch(&client, batch, deadline).await);
                }
                acked
            })
        };
        std::thread::sleep(Duration::from_millis(200));
        cluster.nodes[index].terminate();
        cluster.nodes[index].start();
        let during = cluster.runtime.block_on(producing).expect("producer task");
        assert_eq!(
            during.len(),
            60,
            "producing went on through node {}'s restart",
            index + 1
        );
        acked.extend(during);
        next += 60;
        let node = cluster.nodes[index].node;
        let client = cluster.client.clone();
        let group = cluster.group;
        common::wait_until("the restarted node is normal again", 60, || {
            cluster
                .runtime
                .block_on(common::group_status(&client, node, group))
                .is_some_and(|status| status.status == "normal")
        });
    }
    cluster.runtime.block_on(common::check_acknowledged(
        &cluster.client,
        &acked,
        acked.len() * common::BATCH as usize,
    ));
}

/// Whether a call was refused for want of a right.
fn denied<T>(result: &Result<T, ClientError>) -> bool {
    matches!(result, Err(ClientError::PermissionDenied { .. }))
}

/// A client of the TLS cluster under `certs`, signing in as `user` when given.
async fn signed_in(
    nodes: &[Node],
    certs: &Path,
    user: Option<(&str, &str)>,
) -> Result<Client, ClientError> {
    let credentials =
        user.map(|(user, password)| strand_client::Credentials::password(user, password));
    connect_as(nodes, certs, credentials, None).await
}

/// A client of the TLS cluster under `certs` with `credentials` and, when
/// given, a client certificate and key.
async fn connect_as(
    nodes: &[Node],
    certs: &Path,
    credentials: Option<strand_client::Credentials>,
    identity: Option<(std::path::PathBuf, std::path::PathBuf)>,
) -> Result<Client, ClientError> {
    let mut config = strand_client::ClientConfig::new(common::bootstrap(nodes));
    config.tls = Some(ClientTls {
        identity,
        ..ClientTls::new(certs.join("ca.pem"))
    });
    config.credentials = credentials;
    config.deadline_ms = 5_000;
    Client::connect(config).await
}

/// Starts a TLS cluster of three nodes that requires signing in, with
/// the built-in admin's password `admin password`; returns its nodes and
/// certificate directory.
fn start_signed_in_cluster(dir: &Path) -> (Vec<Node>, std::path::PathBuf) {
    common::start_signed_in_cluster(dir, "admin password")
}

/// The admin's client, once the cluster answers it.
async fn admin_client(nodes: &[Node], certs: &Path, deadline: Instant) -> Client {
    loop {
        match signed_in(nodes, certs, Some(("admin", "admin password"))).await {
            Ok(client) => return client,
            Err(error) => {
                assert!(Instant::now() < deadline, "admin cannot connect: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

#[test]
fn signing_in_is_required_and_each_operation_is_checked_against_the_users_rights() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (nodes, certs) = start_signed_in_cluster(dir.path());
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(120);
    runtime.block_on(async {
        let admin = admin_client(&nodes, &certs, deadline).await;
        admin
            .create_stream("s")
            .await
            .expect("admin creates a stream");
        let mut spec = TopicSpec::new("s", "t");
        spec.partition_count = 1;
        spec.replica_count = 3;
        let group = admin
            .create_topic(spec)
            .await
            .expect("admin creates a topic")[0];
        let mut other = TopicSpec::new("s", "other");
        other.partition_count = 1;
        admin
            .create_topic(other)
            .await
            .expect("admin creates another topic");
        admin
            .create_user("reader", "reader password")
            .await
            .expect("user");
        let consume = strand_client::users::parse_permission("consume:s/t").expect("permission");
        admin
            .grant_permission("reader", consume)
            .await
            .expect("grant");
        admin
            .create_user("writer", "writer password")
            .await
            .expect("user");
        let produce = strand_client::users::parse_permission("produce:s/t").expect("permission");
        admin
            .grant_permission("writer", produce)
            .await
            .expect("grant");
        common::produce_batch(&admin, 0, deadline).await;

        // No credentials, a wrong password, an unknown user: refused, typed.
        for user in [
            None,
            Some(("reader", "wrong password")),
            Some(("nobody", "any password")),
        ] {
            let refused = signed_in(&nodes, &certs, user).await;
            assert!(
                matches!(&refused, Err(ClientError::AuthenticationFailed { .. })),
                "{user:?}: {refused:?}"
            );
        }

        // A consume-only user reads its topic and nothing else.
        let reader = signed_in(&nodes, &certs, Some(("reader", "reader password")))
            .await
            .expect("reader signs in");
        let fetched = reader.fetch("s", "t", 0, 0, 1 << 20, 0).await;
        assert!(fetched.is_ok(), "{fetched:?}");
        let produced = reader.produce("s", "t", 0, common::batch_records(1)).await;
        assert!(denied(&produced), "{produced:?}");
        let created = reader.create_topic(TopicSpec::new("s", "mine")).await;
        assert!(denied(&created), "{created:?}");
        let moved = reader
            .reassign_partition(
                strand_client::PartitionTarget::Group(group),
                &[1, 2],
                None,
                true,
            )
            .await;
        assert!(denied(&moved), "{moved:?}");
        let dropped = reader
            .drop_replica(strand_client::PartitionTarget::Group(group), 3, true)
            .await;
        assert!(denied(&dropped), "{dropped:?}");
        let users = reader.create_user("mallory", "mallory password").await;
        assert!(denied(&users), "{users:?}");
        let accepted = reader.accept_loss(group).await.expect("answers");
        assert!(
            !accepted.is_empty() && accepted.iter().all(|answer| denied(&answer.result)),
            "{accepted:?}"
        );
        let by_admin = admin.accept_loss(group).await.expect("answers");
        assert!(
            by_admin.iter().all(|answer| !denied(&answer.result)),
            "admin may (nothing is stuck, so nothing is lost): {by_admin:?}"
        );
        let joined = reader
            .join_consumer_group("readers", "s", "t", 7, 30_000)
            .await
            .expect("a consumer joins a group on its topic");

        // A producer on s/t cannot read it, nor produce to s/other.
        let writer = signed_in(&nodes, &certs, Some(("writer", "writer password")))
            .await
            .expect("writer signs in");
        common::produce_batch(&writer, 1, deadline).await;
        let read = writer.fetch("s", "t", 0, 0, 1 << 20, 0).await;
        assert!(denied(&read), "{read:?}");
        let elsewhere = writer
            .produce("s", "other", 0, common::batch_records(2))
            .await;
        assert!(denied(&elsewhere), "{elsewhere:?}");
        // ... nor act as a member of a group reading s/t.
        let beat = writer
            .consumer_heartbeat("readers", 7, joined.generation)
            .await;
        assert!(denied(&beat), "{beat:?}");
        let left = writer.leave_consumer_group("readers", 7).await;
        assert!(denied(&left), "{left:?}");
        let still = reader
            .consumer_heartbeat("readers", 7, joined.generation)
            .await;
        assert!(still.is_ok(), "the member is still in: {still:?}");

        // Nothing the refusals named happened; admin sees it all.
        let metadata = admin.metadata().await.expect("metadata");
        let topics: Vec<&str> = metadata
            .topics
            .iter()
            .map(|topic| topic.topic.as_str())
            .collect();
        assert_eq!(topics.len(), 2, "{topics:?}");
        let users = admin.list_users().await.expect("users");
        assert_eq!(users.users.len(), 2, "{users:?}");
        let records = common::read_partition(&admin, "s", "t", 0, 20, deadline).await;
        assert_eq!(
            records.len(),
            20,
            "the two batches admin and writer produced"
        );
    });
    let entries = common::audit_entries(dir.path(), &nodes);
    assert!(
        entries.iter().any(|entry| entry["action"] == "CreateTopic"
            && entry["identity"] == "user reader"
            && entry["outcome"] == "PermissionDenied"),
        "{entries:?}"
    );
}

/// A client of the TLS cluster under `certs`, signing in with `token`.
async fn with_token(nodes: &[Node], certs: &Path, token: &str) -> Result<Client, ClientError> {
    let token = strand_client::Credentials::Token(token.to_owned());
    connect_as(nodes, certs, Some(token), None).await
}

/// Admin's client, once it has made `s`/`t` (one partition, three
/// replicas) holding one batch, and a user `user` (password `password`)
/// that may consume it.
async fn admin_with_reader(
    nodes: &[Node],
    certs: &Path,
    user: &str,
    password: &str,
    deadline: Instant,
) -> Client {
    let admin = admin_client(nodes, certs, deadline).await;
    admin.create_stream("s").await.expect("stream");
    let mut spec = TopicSpec::new("s", "t");
    spec.partition_count = 1;
    spec.replica_count = 3;
    admin.create_topic(spec).await.expect("topic");
    admin.create_user(user, password).await.expect("user");
    let consume = strand_client::users::parse_permission("consume:s/t").expect("permission");
    admin.grant_permission(user, consume).await.expect("grant");
    common::produce_batch(&admin, 0, deadline).await;
    admin
}

/// Whether a call was refused for credentials that do not hold.
fn unauthenticated<T>(result: &Result<T, ClientError>) -> bool {
    matches!(result, Err(ClientError::AuthenticationFailed { .. }))
}

#[test]
fn an_access_token_acts_as_its_user_until_revoked_expired_or_its_user_deleted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (nodes, certs) = start_signed_in_cluster(dir.path());
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(120);
    let cluster = common::bootstrap(&nodes).join(",");
    let ca = certs.join("ca.pem");
    let ca = ca.to_str().expect("UTF-8 path");
    let admin_password = dir.path().join("admin.password");
    std::fs::write(&admin_password, "admin password\n").expect("password file");
    let admin_password = admin_password.to_str().expect("UTF-8 path");
    runtime.block_on(async {
        let admin = admin_with_reader(&nodes, &certs, "reader", "reader password", deadline).await;

        // The user makes its own token, signed in with its password; the
        // admin makes one for it through the command line.
        let reader = signed_in(&nodes, &certs, Some(("reader", "reader password")))
            .await
            .expect("reader signs in");
        let own = reader
            .create_token("reader", "laptop", None)
            .await
            .expect("reader's own token");
        let for_admin = reader.create_token("admin", "", None).await;
        assert!(denied(&for_admin), "{for_admin:?}");
        let created = common::strand(
            &cluster,
            &[
                "--ca",
                ca,
                "--user",
                "admin",
                "--password-file",
                admin_password,
                "token",
                "create",
                "reader",
                "--label",
                "ci",
                "--expires-in",
                "1h",
            ],
            b"",
        )
        .await;
        assert_eq!(created.outcome, Outcome::Success, "{}", created.stderr);
        let ci = created.stdout.trim().to_owned();
        assert!(strand_wire::ops::parse_token(&ci).is_some(), "{ci}");
        let brief = admin
            .create_token("reader", "brief", Some(1))
            .await
            .expect("a token that expires at once");

        // A token signs in as its user, with exactly its rights, and
        // cannot mint tokens.
        let by_token = with_token(&nodes, &certs, &own.token)
            .await
            .expect("the token signs in");
        let fetched = by_token.fetch("s", "t", 0, 0, 1 << 20, 0).await;
        assert!(fetched.is_ok(), "{fetched:?}");
        let produced = by_token
            .produce("s", "t", 0, common::batch_records(1))
            .await;
        assert!(denied(&produced), "{produced:?}");
        let minted = by_token.create_token("reader", "", None).await;
        assert!(denied(&minted), "{minted:?}");
        let ci_file = dir.path().join("ci.token");
        std::fs::write(&ci_file, format!("{ci}\n")).expect("token file");
        let listed = common::strand(
            &cluster,
            &[
                "--ca",
                ca,
                "--token-file",
                ci_file.to_str().expect("UTF-8 path"),
                "--json",
                "token",
                "list",
            ],
            b"",
        )
        .await;
        assert_eq!(listed.outcome, Outcome::Failed, "listing needs admin");
        assert!(
            listed.stderr.contains("permission denied"),
            "{}",
            listed.stderr
        );
        // Any node answers from its catalog: wait until it applied all three.
        let listed = loop {
            let listed = admin.list_users().await.expect("users");
            if listed.users[0].tokens.len() >= 3 || Instant::now() > deadline {
                break listed;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let labels: Vec<&str> = listed.users[0]
            .tokens
            .iter()
            .map(|token| token.label.as_str())
            .collect();
        assert_eq!(labels.len(), 3, "{labels:?}");
        for label in ["laptop", "ci", "brief"] {
            assert!(labels.contains(&label), "{labels:?}");
        }

        // Expired, then revoked: refused at sign-in, and a connection
        // signed in with the revoked token is refused from its next request.
        let expired = with_token(&nodes, &certs, &brief.token).await;
        assert!(unauthenticated(&expired), "{expired:?}");
        // The CLI's configuration file, paths relative to it, stands for
        // the flags.
        let cli_config = dir.path().join("cli.toml");
        std::fs::write(
            &cli_config,
            format!(
                "cluster = {cluster:?}\nca = \"certs/ca.pem\"\nuser = \"admin\"\n\
                 password_file = \"admin.password\"\n"
            ),
        )
        .expect("CLI config");
        let cli_config = cli_config.to_str().expect("UTF-8 path");
        let revoked = common::strand(
            &cluster,
            &["--config", cli_config, "token", "revoke", &own.id],
            b"",
        )
        .await;
        assert_eq!(revoked.outcome, Outcome::Success, "{}", revoked.stderr);
        let again = with_token(&nodes, &certs, &own.token).await;
        assert!(unauthenticated(&again), "{again:?}");
        let stale = by_token.fetch("s", "t", 0, 0, 1 << 20, 0).await;
        assert!(unauthenticated(&stale), "{stale:?}");
        let cursor = by_token.store_cursor("s", "t", 0, "stolen", 5).await;
        assert!(unauthenticated(&cursor), "{cursor:?}");
        let kept = admin.get_cursor("s", "t", 0, "stolen").await;
        assert!(
            matches!(kept, Ok(None)),
            "nothing a revoked token asked for happened: {kept:?}"
        );

        // The user deleted: its tokens go with it.
        let still = with_token(&nodes, &certs, &ci).await;
        assert!(still.is_ok(), "{still:?}");
        admin.delete_user("reader").await.expect("delete");
        let gone = with_token(&nodes, &certs, &ci).await;
        assert!(unauthenticated(&gone), "{gone:?}");
        assert!(admin.list_users().await.expect("users").users.is_empty());
    });
    let entries = common::audit_entries(dir.path(), &nodes);
    assert!(
        entries.iter().any(|entry| entry["action"] == "CreateToken"
            && entry["identity"] == "user reader"
            && entry["outcome"] == "Ok"),
        "{entries:?}"
    );
    assert!(
        entries.iter().any(|entry| entry["action"] == "RevokeToken"
            && entry["identity"] == "user admin"
            && entry["outcome"] == "Ok"),
        "{entries:?}"
    );
}

/// A client of the TLS cluster under `certs` presenting the certificate
/// and key `files`, with no other credentials.
async fn with_certificate(
    nodes: &[Node],
    certs: &Path,
    files: (std::path::PathBuf, std::path::PathBuf),
) -> Result<Client, ClientError> {
    connect_as(nodes, certs, None, Some(files)).await
}

/// `strand-server user-cert --dir DIR --name NAME`, as an operator runs it.
fn user_cert(dir: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let status = Command::new(env!("CARGO_BIN_EXE_strand-server"))
        .args(["user-cert", "--dir"])
        .arg(dir)
        .args(["--name", name])
        .stdout(Stdio::null())
        .status()
        .expect("strand-server user-cert");
    assert!(status.success(), "user-cert {name}");
    (
        dir.join(format!("user-{name}.pem")),
        dir.join(format!("user-{name}.key")),
    )
}

#[test]
fn a_user_certificate_signs_in_as_the_user_it_names() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (nodes, certs) = start_signed_in_cluster(dir.path());
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(120);
    let service = user_cert(&certs, "service");
    let ghost = user_cert(&certs, "ghost");
    let stranger_ca = dir.path().join("stranger");
    strand_server::net::tls::generate(&stranger_ca, &[1], &["127.0.0.1".to_owned()])
        .expect("another CA");
    let stranger = user_cert(&stranger_ca, "service");
    let cluster = common::bootstrap(&nodes).join(",");
    runtime.block_on(async {
        let admin =
            admin_with_reader(&nodes, &certs, "service", "service password", deadline).await;

        // The certificate alone signs in, with the user's rights only.
        let client = with_certificate(&nodes, &certs, service.clone())
            .await
            .expect("the certificate signs in");
        let fetched = client.fetch("s", "t", 0, 0, 1 << 20, 0).await;
        assert!(fetched.is_ok(), "{fetched:?}");
        let produced = client.produce("s", "t", 0, common::batch_records(1)).await;
        assert!(denied(&produced), "{produced:?}");
        let created = client.create_topic(TopicSpec::new("s", "mine")).await;
        assert!(denied(&created), "{created:?}");
        let path = |path: &std::path::PathBuf| path.to_str().expect("UTF-8 path").to_owned();
        let (ca, cert, key) = (
            path(&certs.join("ca.pem")),
            path(&service.0),
            path(&service.1),
        );
        let consumed = common::strand(
            &cluster,
            &[
                "--ca", &ca, "--cert", &cert, "--key", &key, "consume", "s/t", "--count", "1",
            ],
            b"",
        )
        .await;
        assert_eq!(consumed.outcome, Outcome::Success, "{}", consumed.stderr);

        // A certificate for a user the cluster lacks, or from another CA:
        // refused.
        let unknown = with_certificate(&nodes, &certs, ghost).await;
        assert!(unauthenticated(&unknown), "{unknown:?}");
        let foreign = with_certificate(&nodes, &certs, stranger).await;
        assert!(foreign.is_err(), "another CA's certificate: {foreign:?}");

        // The user deleted: its certificate signs in no more.
        admin.delete_user("service").await.expect("delete");
        let gone = with_certificate(&nodes, &certs, service).await;
        assert!(unauthenticated(&gone), "{gone:?}");
    });
    let entries = common::audit_entries(dir.path(), &nodes);
    assert!(
        entries.iter().any(|entry| entry["action"] == "CreateTopic"
            && entry["identity"] == "user service (certificate)"
            && entry["outcome"] == "PermissionDenied"),
        "{entries:?}"
    );
}
