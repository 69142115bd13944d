//! Starting real `strand-server` processes for the end-to-end tests, and the
//! SDK calls every test needs before it can produce (connect, wait for a
//! topic's partitions to take requests).

// Each test binary compiles this module and uses a different part of it.
#![allow(dead_code)]

pub mod kafka;
pub mod proxy;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use strand_bench::scrape::http_get;
use strand_client::{
    Client, ClientConfig, GroupStatus, NewRecord, ProduceAck, Producer, ProducerConfig,
};

/// The cluster id the test clusters use (the SDK's default).
pub const CLUSTER: u64 = 0;

/// A running node; killed when dropped.
pub struct Node {
    /// The process (`None` while the node is stopped).
    pub child: Option<Child>,
    /// Its id.
    pub node: u32,
    /// Its client port.
    pub client_address: String,
    /// Its replica-bus port.
    pub replica_address: String,
    /// Its Kafka listener.
    pub kafka_address: String,
    /// Its Prometheus endpoint (`host:port`; the path is `/metrics`).
    pub metrics_address: String,
    /// Its configuration file.
    pub config: PathBuf,
    /// Where its stderr (the log) goes; appended to across restarts.
    pub log: PathBuf,
}

impl Node {
    /// Starts (or restarts) the node's process on its configuration.
    pub fn start(&mut self) {
        assert!(
            self.child.is_none(),
            "node {} is running already",
            self.node
        );
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the node's log");
        let child = Command::new(env!("CARGO_BIN_EXE_strand-server"))
            .arg("run")
            .arg("--config")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start a node");
        self.child = Some(child);
    }

    /// SIGKILLs the process and reaps it: no clean shutdown.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM: the node shuts down cleanly (clean-shutdown marks) and
    /// must exit 0.
    pub fn terminate(&mut self) {
        let mut child = self.child.take().expect("the node is running");
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "SIGTERM to node {}", self.node);
        let status = child.wait().expect("wait for the node");
        assert!(status.success(), "node {} exited with {status}", self.node);
    }

    /// The process, which must be running.
    pub fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("the node is running")
    }

    /// Asserts that the process has not exited.
    pub fn assert_alive(&mut self) {
        let node = self.node;
        let status = self.child().try_wait().expect("poll the node process");
        assert!(
            status.is_none(),
            "node {node} exited ({status:?}); its log is {}",
            self.log.display()
        );
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            self.print_log_tail();
        }
    }
}

/// Lines of a node's log a failing test prints.
const LOG_TAIL_LINES: usize = 60;

impl Node {
    /// Prints the end of the node's log to stderr: a failing test shows
    /// what each node was doing, even where its directory is gone after.
    fn print_log_tail(&self) {
        let Ok(log) = std::fs::read_to_string(&self.log) else {
            return;
        };
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
        eprintln!(
            "--- the last {} lines of node {}'s log ---",
            tail.len(),
            self.node
        );
        for line in tail {
            eprintln!("{line}");
        }
    }
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `count` distinct ports nobody listens on right now: every listener is
/// held until all are known, so the OS never hands one out twice.
pub fn free_ports(count: usize) -> Vec<u16> {
    ports_of(&held_ports(count))
}

/// `count` listeners on distinct free ports (outside the kernel's
/// ephemeral range, so a stopped node's ports stay free for its restart),
/// to hold while more ports are bound (a test proxy's), so none of those
/// can take one of these.
fn held_ports(count: usize) -> Vec<TcpListener> {
    strand_bench::cluster::hold_free_ports(count).expect("free ports")
}

fn ports_of(listeners: &[TcpListener]) -> Vec<u16> {
    listeners
        .iter()
        .map(|listener| listener.local_addr().expect("bound").port())
        .collect()
}

/// The test nodes' disk reserve: small, so that the tests do not depend on
/// how full the machine's disk is (the full-disk test sets its own).
pub const TEST_DISK_RESERVE_BYTES: u64 = 16 << 20;

/// Three running nodes with their configuration, data and logs under `dir`.
pub fn start_cluster(dir: &Path) -> Vec<Node> {
    let mut nodes = configure_cluster(dir, 3);
    for node in &mut nodes {
        node.start();
    }
    nodes
}

/// Three running nodes under `dir`, a runtime, and a client connected to
/// them (waiting up to a minute for the cluster), with stream `s` created.
pub fn cluster_with_stream_s(dir: &Path) -> (Vec<Node>, tokio::runtime::Runtime, Client) {
    let nodes = start_cluster(dir);
    let runtime = runtime();
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = runtime.block_on(async {
        let client = connect(bootstrap(&nodes), deadline).await;
        client.create_stream("s").await.expect("create stream");
        client
    });
    (nodes, runtime, client)
}

/// Writes the configuration of `count` nodes under `dir`; starts none.
pub fn configure_cluster(dir: &Path, count: u32) -> Vec<Node> {
    configure_cluster_routed(dir, count, |_| BTreeMap::new())
}

/// Like [`configure_cluster`], but `dial` may reroute replica-bus links: it
/// gets every node's replica address by id and returns, for some (lower id,
/// higher id) pairs, the address the lower node dials to reach the higher
/// one (the bus is dialed by the lower id), such as a test proxy's.
pub fn configure_cluster_routed(
    dir: &Path,
    count: u32,
    dial: impl FnOnce(&BTreeMap<u32, String>) -> BTreeMap<(u32, u32), String>,
) -> Vec<Node> {
    // Held until the proxies (if any) are bound: a proxy's port is never
    // one a node is about to listen on.
    let held = held_ports(4 * count as usize);
    let addresses: Vec<[String; 4]> = ports_of(&held)
        .chunks(4)
        .map(|ports| {
            [ports[0], ports[1], ports[2], ports[3]].map(|port| format!("127.0.0.1:{port}"))
        })
        .collect();
    let replicas: BTreeMap<u32, String> = (1..=count)
        .zip(addresses.iter().map(|[replica, ..]| replica.clone()))
        .collect();
    let rerouted = dial(&replicas);
    drop(held);
    let peers_seen_by = |me: u32| {
        let mut peers = String::new();
        for (index, [replica, client, _, kafka]) in addresses.iter().enumerate() {
            let peer = index as u32 + 1;
            let replica = rerouted.get(&(me, peer)).unwrap_or(replica);
            peers.push_str(&format!(
                "\n[[peers]]\nid = {peer}\nreplica_address = \"{replica}\"\nclient_address = \"{client}\"\n\
                 kafka_address = \"{kafka}\"\n"
            ));
        }
        peers
    };
    addresses
        .iter()
        .zip(1..=count)
        .map(|([replica, client, metrics, kafka], node)| {
            let data = dir.join(format!("node-{node}"));
            let config = format!(
                "node = {node}\ncluster = {CLUSTER}\ndata_dir = {:?}\nmetrics_address = \"{metrics}\"\n\
                 disk_reserve_bytes = {TEST_DISK_RESERVE_BYTES}\n{}",
                data.display().to_string(),
                peers_seen_by(node)
            );
            let path = dir.join(format!("node-{node}.toml"));
            std::fs::write(&path, config).expect("write config");
            Node {
                child: None,
                node,
                client_address: client.clone(),
                replica_address: replica.clone(),
                kafka_address: kafka.clone(),
                metrics_address: metrics.clone(),
                config: path,
                log: dir.join(format!("node-{node}.log")),
            }
        })
        .collect()
}

/// The audit log entries of every node of a cluster configured under
/// `dir`, in file order per node.
pub fn audit_entries(dir: &Path, nodes: &[Node]) -> Vec<serde_json::Value> {
    nodes
        .iter()
        .filter_map(|node| {
            std::fs::read_to_string(dir.join(format!("node-{}", node.node)).join("audit.log")).ok()
        })
        .flat_map(|text| {
            text.lines()
                .map(|line| serde_json::from_str(line).expect("an audit entry is JSON"))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Makes a CA and node certificates under `dir/certs` and turns TLS on in
/// every node's configuration; returns the certificates' directory (its
/// `ca.pem` is what clients verify against).
pub fn enable_tls(dir: &Path, nodes: &[Node]) -> PathBuf {
    let certs = dir.join("certs");
    let ids: Vec<u32> = nodes.iter().map(|node| node.node).collect();
    strand_server::net::tls::generate(&certs, &ids, &["127.0.0.1".to_owned()])
        .expect("certificates");
    for node in nodes {
        let files = strand_server::net::tls::node_files(&certs, node.node);
        let mut config = std::fs::read_to_string(&node.config).expect("read config");
        // Top-level keys end where the first table starts.
        let tls = format!(
            "[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n\n",
            files.ca.display().to_string(),
            files.cert.display().to_string(),
            files.key.display().to_string()
        );
        let first_table = config.find("\n[").map_or(config.len(), |at| at + 1);
        config.insert_str(first_table, &tls);
        std::fs::write(&node.config, config).expect("write config");
    }
    certs
}

/// Starts three TLS nodes under `dir` that require signing in, the built-in
/// admin's password being `admin_password`; returns the nodes and the
/// certificates' directory.
pub fn start_signed_in_cluster(dir: &Path, admin_password: &str) -> (Vec<Node>, PathBuf) {
    let mut nodes = configure_cluster(dir, 3);
    let certs = enable_tls(dir, &nodes);
    let admin_hash = strand_client::users::hash_password(admin_password).expect("hash");
    for node in &mut nodes {
        let mut config = std::fs::read_to_string(&node.config).expect("config");
        config.push_str(&format!(
            "\n[auth]\nrequired = true\nadmin_password_hash = {admin_hash:?}\n"
        ));
        std::fs::write(&node.config, config).expect("write config");
        node.start();
    }
    (nodes, certs)
}

/// An SDK client of a TLS cluster, verifying the nodes with `certs/ca.pem`,
/// once some node answers.
pub async fn connect_tls(bootstrap: Vec<String>, certs: &Path, deadline: Instant) -> Client {
    loop {
        let mut config = ClientConfig::new(bootstrap.clone());
        config.tls = Some(strand_client::tls::ClientTls::new(certs.join("ca.pem")));
        match Client::connect(config).await {
            Ok(client) => return client,
            Err(error) => {
                assert!(Instant::now() < deadline, "cannot connect: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// `count` nodes whose replica-bus links all run through proxies on
/// `runtime` (so a test can cut a node off from its peers); starts none.
pub fn configure_proxied_cluster(
    dir: &Path,
    count: u32,
    runtime: &tokio::runtime::Runtime,
) -> (Vec<Node>, proxy::BusProxies) {
    let mut proxies = None;
    let nodes = configure_cluster_routed(dir, count, |replicas| {
        let targets = replicas
            .keys()
            .flat_map(|low| {
                replicas
                    .range(low + 1..)
                    .map(move |(high, address)| ((*low, *high), address.clone()))
            })
            .collect();
        let (started, addresses) = proxy::BusProxies::start(runtime, targets);
        proxies = Some(started);
        addresses
    });
    (nodes, proxies.expect("the proxies started"))
}

/// Sends a signal (`STOP`, `CONT`, ...) to a running node's process.
pub fn signal(node: &mut Node, signal: &str) {
    let pid = node.child().id();
    let sent = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(sent.success(), "{signal} to node {}", node.node);
}

/// The client addresses of `nodes`, for the SDK's bootstrap list.
pub fn bootstrap(nodes: &[Node]) -> Vec<String> {
    nodes
        .iter()
        .map(|node| node.client_address.clone())
        .collect()
}

/// What one in-process `strand` run printed, how it ended, and how long it
/// took.
pub struct Run {
    pub outcome: strand_client::cli::Outcome,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Runs `strand --cluster <cluster> --timeout-ms 30000 <args>` in-process
/// (`strand_client::cli::run`) with `stdin` as its input.
pub async fn strand(cluster: &str, args: &[&str], stdin: &[u8]) -> Run {
    let mut argv = vec!["strand", "--cluster", cluster, "--timeout-ms", "30000"];
    argv.extend_from_slice(args);
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let started = Instant::now();
    let outcome = strand_client::cli::run(argv, stdin, &mut stdout, &mut stderr).await;
    Run {
        outcome,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}

/// The tokio runtime the SDK tests drive the client with.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// An SDK client, once some node answers (nodes take a moment to bind).
pub async fn connect(bootstrap: Vec<String>, deadline: Instant) -> Client {
    loop {
        match Client::connect(ClientConfig::new(bootstrap.clone())).await {
            Ok(client) => return client,
            Err(error) => {
                assert!(Instant::now() < deadline, "cannot connect: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// A producer for `stream`/`topic`, once the node the client asks knows the
/// topic (backups apply the metadata commit a heartbeat later).
pub async fn producer(
    client: &Client,
    stream: &str,
    topic: &str,
    config: ProducerConfig,
    deadline: Instant,
) -> Producer {
    loop {
        match client.producer(stream, topic, config.clone()).await {
            Ok(producer) => return producer,
            Err(error) => {
                assert!(Instant::now() < deadline, "no producer: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A partition's records as `(offset, key, value)`, in offset order.
pub type Records = Vec<(u64, Vec<u8>, Vec<u8>)>;

/// The first `count` records of a partition, as `(offset, key, value)`,
/// fetched 4 MiB at a time; a failed fetch (a group still recovering) is
/// retried until `deadline`.
pub async fn read_partition(
    client: &Client,
    stream: &str,
    topic: &str,
    partition: u32,
    count: usize,
    deadline: Instant,
) -> Records {
    let mut read = Vec::with_capacity(count);
    let mut offset = 0;
    while read.len() < count {
        assert!(
            Instant::now() < deadline,
            "partition {partition}: read {} of {count} records before the deadline",
            read.len()
        );
        let fetched = match client
            .fetch(stream, topic, partition, offset, 4 * 1024 * 1024, 1000)
            .await
        {
            Ok(fetched) => fetched,
            Err(error) => {
                assert!(
                    Instant::now() < deadline,
                    "partition {partition}: fetch at {offset}: {error}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        for record in fetched.records {
            read.push((record.offset, record.key.to_vec(), record.value.to_vec()));
        }
        offset = fetched.next_offset;
    }
    read
}

/// The value of the unlabelled metric `name` on `node`'s Prometheus
/// endpoint; 0 when the node has not reported it yet.
pub fn metric(node: &Node, name: &str) -> f64 {
    let (status, body) = http_get(&node.metrics_address, "/metrics").expect("scrape metrics");
    assert_eq!(status, 200, "GET /metrics on node {}: {body}", node.node);
    body.lines()
        .filter_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .map(|value| value.trim().parse::<f64>().expect("a metric value"))
        .next()
        .unwrap_or(0.0)
}

/// The sum of metric `name` over every label set on `node`'s Prometheus
/// endpoint (`name` may name one label set: `view_changes_total{group="1"}`);
/// 0 when absent or while the node does not answer.
pub fn metric_sum(node: &Node, name: &str) -> f64 {
    let Ok((200, body)) = http_get(&node.metrics_address, "/metrics") else {
        return 0.0;
    };
    body.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let value = match rest.strip_prefix('{') {
                Some(labelled) => labelled.split_once("} ")?.1,
                None => rest.strip_prefix(' ')?,
            };
            value.trim().parse::<f64>().ok()
        })
        .sum()
}

// ----- produce, read back, wait: the failure tests' shared steps ----------

/// The node serving `group` as its Normal primary (other than `not`), as
/// the cluster's status shows it; waits for one until `deadline`.
pub async fn serving_primary(
    client: &Client,
    group: u64,
    not: Option<u32>,
    deadline: Instant,
) -> u32 {
    loop {
        if let Ok(status) = client.cluster_status().await {
            let serving = status.groups().find(|(node, status)| {
                status.group == group
                    && status.status == "normal"
                    && Some(*node) != not
                    && status
                        .replicas
                        .get(usize::from(status.primary))
                        .map(|replica| replica.node)
                        == Some(*node)
            });
            if let Some((node, _)) = serving {
                return node;
            }
        }
        assert!(Instant::now() < deadline, "no primary for group {group}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Records per produced batch (one op each).
pub const BATCH: u64 = 10;

/// A client that waits up to two minutes for each request: a failover on a
/// slow, shared disk must not turn an in-flight batch into "outcome unknown".
pub async fn connect_patient(nodes: &[Node], deadline: Instant) -> Client {
    loop {
        let mut config = ClientConfig::new(bootstrap(nodes));
        config.deadline_ms = 120_000;
        match Client::connect(config).await {
            Ok(client) => return client,
            Err(error) => {
                assert!(Instant::now() < deadline, "cannot connect: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Batch `batch`'s records: keys `k<index>`, values `v<index>`.
pub fn batch_records(batch: u64) -> Vec<NewRecord> {
    (batch * BATCH..(batch + 1) * BATCH)
        .map(|index| NewRecord::new(format!("k{index}"), format!("v{index}")))
        .collect()
}

/// Produces batch `batch`, retrying errors (a topic not known yet, a group
/// in a view change) until `deadline`.
pub async fn produce_batch(client: &Client, batch: u64, deadline: Instant) -> ProduceAck {
    loop {
        match client.produce("s", "t", 0, batch_records(batch)).await {
            Ok(ack) => return ack,
            Err(error) => {
                assert!(Instant::now() < deadline, "batch {batch}: {error}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Reads the partition back and checks every acknowledged batch is there
/// exactly once, at the offsets it was acknowledged with, and that no key
/// appears twice.
pub async fn check_acknowledged(client: &Client, acked: &BTreeMap<u64, ProduceAck>, total: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let read = read_partition(client, "s", "t", 0, total, deadline).await;
    let mut seen = BTreeMap::new();
    for (offset, key, value) in &read {
        let key = String::from_utf8(key.clone()).expect("utf-8 key");
        assert!(
            seen.insert(key.clone(), *offset).is_none(),
            "{key} appears twice"
        );
        assert_eq!(&value[1..], &key.as_bytes()[1..], "{key}'s value");
    }
    for (batch, ack) in acked {
        assert_eq!(u64::from(ack.record_count), BATCH);
        for (index, offset) in (batch * BATCH..(batch + 1) * BATCH).zip(ack.offset_base..) {
            assert_eq!(
                seen.get(&format!("k{index}")),
                Some(&offset),
                "acknowledged record k{index} at offset {offset}"
            );
        }
    }
}

/// The group's status as `node_index`'s node reports it, if it answers.
pub async fn group_status(client: &Client, node: u32, group: u64) -> Option<GroupStatus> {
    let status = client.cluster_status().await.ok()?;
    status
        .groups()
        .find(|(answering, status)| *answering == node && status.group == group)
        .map(|(_, status)| status.clone())
}

/// Polls `check` every 100 ms until it holds or `seconds` pass.
pub fn wait_until(what: &str, seconds: u64, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !check() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen in {seconds} s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `view_changes_total` of `group` on `node` (0 when absent or unreachable).
pub fn view_changes(node: &Node, group: u64) -> f64 {
    metric_sum(node, &format!("view_changes_total{{group=\"{group}\"}}"))
}

/// Whether `node`'s replica of `group` is normal, trusted and committed as
/// far as its primary (false while the status cannot be read).
pub fn caught_up(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    node: u32,
    group: u64,
) -> bool {
    let Ok(status) = runtime.block_on(client.cluster_status()) else {
        return false;
    };
    let of = |node| {
        status
            .groups()
            .find(|(at, s)| *at == node && s.group == group)
    };
    let Some((_, mine)) = of(node) else {
        return false;
    };
    let primary = mine.replicas.get(usize::from(mine.primary)).map(|r| r.node);
    let Some((_, theirs)) = primary.and_then(of) else {
        return false;
    };
    mine.status == "normal" && !mine.untrusted_log && mine.commit_op == theirs.commit_op
}
