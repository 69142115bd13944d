//! A local cluster of real `strand-server` processes on loopback: one
//! configuration file, data directory and log per node under one directory,
//! started with `strand-server run --config FILE`. Nodes can be SIGKILLed
//! and restarted on the same configuration; every process still running is
//! killed when the cluster is dropped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::BenchError;

/// The cluster id local clusters use (the SDK's default).
pub const CLUSTER_ID: u64 = 0;

/// Most nodes a local cluster may have.
pub const NODES_MAX: u32 = 7;

/// The server binary's file name.
pub const SERVER_BIN_NAME: &str = "strand-server";

/// One node of a [`LocalCluster`].
#[derive(Debug)]
pub struct LocalNode {
    /// Its id (1-based).
    pub node: u32,
    /// Its client port (`host:port`).
    pub client_address: String,
    /// Its Prometheus endpoint (`host:port`; the path is `/metrics`).
    pub metrics_address: String,
    /// Its configuration file.
    pub config: PathBuf,
    /// Its data directory (`data_dir` of its configuration): what a soak
    /// measures.
    pub data_dir: PathBuf,
    /// Its log (stderr), appended to across restarts.
    pub log: PathBuf,
    child: Option<Child>,
}

/// How a node's process ended after a SIGTERM (see
/// [`LocalCluster::terminate_nodes`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Termination {
    /// The node.
    pub node: u32,
    /// Milliseconds from the SIGTERM until the process was reaped.
    pub exit_ms: u64,
    /// Its exit status, as the OS reports it.
    pub status: String,
    /// True when it exited on its own with status 0 (a clean shutdown).
    pub success: bool,
    /// True when it did not exit within the bound and was SIGKILLed.
    pub killed: bool,
}

/// How often a terminating node is checked for its exit.
const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Running node processes and the directory that holds their state.
#[derive(Debug)]
pub struct LocalCluster {
    server_bin: PathBuf,
    nodes: Vec<LocalNode>,
    /// Removed when the cluster is dropped (unless the caller gave a directory).
    _temp: Option<tempfile::TempDir>,
    dir: PathBuf,
    /// The cluster's CA certificate, when the nodes serve TLS.
    ca: Option<PathBuf>,
    /// The built-in admin's password, when the nodes require signing in.
    admin_password: Option<String>,
}

/// The `strand-server` binary: `explicit` if given, else the one beside the
/// running executable (or one level up, for test executables in `deps/`).
pub fn locate_server_binary(explicit: Option<&Path>) -> Result<PathBuf, BenchError> {
    if let Some(path) = explicit {
        if path.is_file() {
            return Ok(path.to_owned());
        }
        return Err(BenchError::ServerBinary(format!(
            "--server-bin {}: no such file",
            path.display()
        )));
    }
    let exe = std::env::current_exe()
        .map_err(|error| BenchError::ServerBinary(format!("cannot find myself: {error}")))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [
        dir.join(SERVER_BIN_NAME),
        dir.join("..").join(SERVER_BIN_NAME),
    ];
    candidates
        .iter()
        .find(|candidate| candidate.is_file())
        .cloned()
        .ok_or_else(|| {
            BenchError::ServerBinary(format!(
                "no {SERVER_BIN_NAME} beside {}: build it in the same profile \
                 (`cargo build --release -p strand-server -p strand-bench`) or pass --server-bin",
                exe.display()
            ))
        })
}

/// How a local cluster's nodes write their WALs: the server's `direct_io`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum NodeIo {
    /// The server binary's own default (no `direct_io` line): what each
    /// build does untold, so an A/B of two builds compares their defaults.
    #[default]
    Default,
    /// `direct_io = true`: appends past the page cache.
    Direct,
    /// `direct_io = false`: appends through the page cache.
    PageCache,
}

impl NodeIo {
    /// The `direct_io` value that asks for it (none for the default: a
    /// server older than the key refuses it).
    fn direct_io(self) -> Option<bool> {
        match self {
            NodeIo::Default => None,
            NodeIo::Direct => Some(true),
            NodeIo::PageCache => Some(false),
        }
    }
}

/// A node's configuration file as a local cluster writes it, in the
/// server's key names: serialized, so any path or string is quoted as TOML
/// wants. Restated here because the bench does not link the server; the
/// server refuses unknown keys, so a drift fails the first start.
#[derive(Serialize)]
struct NodeFile<'a> {
    node: u32,
    cluster: u64,
    data_dir: &'a Path,
    metrics_address: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    direct_io: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tls: Option<TlsFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    auth: Option<AuthFile<'a>>,
    peers: &'a [PeerFile],
}

/// The server's `[tls]` table: the CA, this node's certificate and key.
#[derive(Serialize)]
struct TlsFile {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

/// The server's `[auth]` table: sign-in required, the admin's hash.
#[derive(Serialize)]
struct AuthFile<'a> {
    required: bool,
    admin_password_hash: &'a str,
}

/// One of the server's `[[peers]]`.
#[derive(Serialize)]
struct PeerFile {
    id: u32,
    replica_address: String,
    client_address: String,
}

impl LocalCluster {
    /// Writes the configuration of `count` nodes under `data_dir` (a fresh
    /// temporary directory when `None`) and starts every node; with `tls`,
    /// first makes a CA and node certificates (`strand-server certs`) and
    /// turns TLS on in every configuration; `io` says how the nodes' WALs
    /// write.
    pub fn start(
        count: u32,
        server_bin: PathBuf,
        data_dir: Option<PathBuf>,
        tls: bool,
        io: NodeIo,
    ) -> Result<LocalCluster, BenchError> {
        if !(1..=NODES_MAX).contains(&count) {
            return Err(BenchError::Options(format!(
                "--nodes {count}: a local cluster has 1 to {NODES_MAX} nodes"
            )));
        }
        let (temp, dir) = match data_dir {
            Some(dir) => {
                std::fs::create_dir_all(&dir).map_err(|error| {
                    BenchError::Cluster(format!("cannot create {}: {error}", dir.display()))
                })?;
                (None, dir)
            }
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("strand-bench-")
                    .tempdir()
                    .map_err(|error| BenchError::Cluster(format!("temp dir: {error}")))?;
                let dir = temp.path().to_owned();
                (Some(temp), dir)
            }
        };
        let certs = dir.join("certs");
        let (ca, admin_password) = if tls {
            make_certificates(&server_bin, &certs, count)?;
            let password = format!("bench-{:032x}", rand::random::<u128>());
            (Some(certs.join("ca.pem")), Some(password))
        } else {
            (None, None)
        };
        let admin_hash = admin_password
            .as_deref()
            .map(strand_client::users::hash_password)
            .transpose()
            .map_err(|error| BenchError::Cluster(format!("admin password: {error}")))?;
        let secured = tls.then_some((certs.as_path(), admin_hash.as_deref().unwrap_or_default()));
        let nodes = configure(&dir, count, secured, io)?;
        let mut cluster = LocalCluster {
            server_bin,
            nodes,
            _temp: temp,
            dir,
            ca,
            admin_password,
        };
        for node in 1..=count {
            cluster.start_node(node)?;
        }
        Ok(cluster)
    }

    /// The cluster's CA certificate, when the nodes serve TLS.
    pub fn ca(&self) -> Option<&Path> {
        self.ca.as_deref()
    }

    /// The built-in admin's credentials, when the nodes require signing in.
    pub fn admin(&self) -> Option<strand_client::Credentials> {
        self.admin_password
            .as_ref()
            .map(|password| strand_client::Credentials::password("admin", password.clone()))
    }

    /// The nodes, by id order.
    pub fn nodes(&self) -> &[LocalNode] {
        &self.nodes
    }

    /// Where the configurations, data and logs are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every node's client address.
    pub fn bootstrap(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|node| node.client_address.clone())
            .collect()
    }

    /// Starts (or restarts) node `node`'s process.
    pub fn start_node(&mut self, node: u32) -> Result<(), BenchError> {
        let server_bin = self.server_bin.clone();
        let local = self.node_mut(node)?;
        if local.child.is_some() {
            return Err(BenchError::Cluster(format!(
                "node {node} is running already"
            )));
        }
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&local.log)
            .map_err(|error| {
                BenchError::Cluster(format!("cannot open {}: {error}", local.log.display()))
            })?;
        let child = Command::new(&server_bin)
            .arg("run")
            .arg("--config")
            .arg(&local.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|error| {
                BenchError::Cluster(format!(
                    "cannot start node {node} ({}): {error}",
                    server_bin.display()
                ))
            })?;
        local.child = Some(child);
        Ok(())
    }

    /// SIGKILLs node `node` (no clean shutdown) and reaps it.
    pub fn kill_node(&mut self, node: u32) -> Result<(), BenchError> {
        let local = self.node_mut(node)?;
        let mut child = local
            .child
            .take()
            .ok_or_else(|| BenchError::Cluster(format!("node {node} is not running")))?;
        // `Child::kill` is SIGKILL on Unix.
        child
            .kill()
            .map_err(|error| BenchError::Cluster(format!("SIGKILL node {node}: {error}")))?;
        let _ = child.wait();
        Ok(())
    }

    /// Sends `signal` (`STOP`, `CONT`) to node `node`'s running process.
    pub fn signal_node(&mut self, node: u32, signal: &str) -> Result<(), BenchError> {
        let local = self.node_mut(node)?;
        let child = local
            .child
            .as_ref()
            .ok_or_else(|| BenchError::Cluster(format!("node {node} is not running")))?;
        send_signal(node, child.id(), signal)
    }

    /// The OS process id of node `node`, while it runs: to read its CPU
    /// time and memory from `/proc`.
    pub fn pid(&self, node: u32) -> Option<u32> {
        self.nodes
            .iter()
            .find(|local| local.node == node)
            .and_then(|local| local.child.as_ref())
            .map(Child::id)
    }

    /// Stops node `node` cleanly: SIGTERM, then waits up to `timeout` for
    /// it to exit (SIGKILL after that, noted in the result). Blocks the
    /// calling thread while it waits.
    pub fn terminate_node(
        &mut self,
        node: u32,
        timeout: Duration,
    ) -> Result<Termination, BenchError> {
        let mut terminations = self.terminate_nodes(&[node], timeout)?;
        assert_eq!(terminations.len(), 1, "one node, one termination");
        Ok(terminations.remove(0))
    }

    /// Stops `nodes` cleanly and at once: SIGTERM to each, then waits up to
    /// `timeout` (from the first signal) for all of them to exit, SIGKILLing
    /// those still running then. Blocks the calling thread while it waits.
    /// In `nodes` order.
    pub fn terminate_nodes(
        &mut self,
        nodes: &[u32],
        timeout: Duration,
    ) -> Result<Vec<Termination>, BenchError> {
        let mut distinct = nodes.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), nodes.len(), "nodes {nodes:?} repeat");
        // Check every node before taking any child: a child taken and then
        // dropped on an error would leave its process running, unreaped.
        for &node in nodes {
            if self.pid(node).is_none() {
                return Err(BenchError::Cluster(format!("node {node} is not running")));
            }
        }
        let mut children = Vec::with_capacity(nodes.len());
        for &node in nodes {
            let child = self.node_mut(node)?.child.take();
            children.push((node, child.expect("checked running above")));
        }
        let signalled_at = Instant::now();
        let deadline = signalled_at + timeout;
        let signalled: Vec<_> = children
            .iter()
            .map(|(node, child)| send_signal(*node, child.id(), "TERM"))
            .collect();
        let mut terminations = Vec::with_capacity(children.len());
        for ((node, mut child), signal) in children.into_iter().zip(signalled) {
            // A node the SIGTERM did not reach is SIGKILLed at once.
            let deadline = if signal.is_ok() {
                deadline
            } else {
                signalled_at
            };
            let mut termination = await_exit(node, &mut child, signalled_at, deadline);
            if let Err(error) = signal {
                termination.status = format!("{error}; {}", termination.status);
            }
            terminations.push(termination);
        }
        assert_eq!(terminations.len(), nodes.len());
        Ok(terminations)
    }

    /// Nodes whose process should run and has exited, with how.
    pub fn exited(&mut self) -> Vec<(u32, String)> {
        let mut exited = Vec::new();
        for local in &mut self.nodes {
            if let Some(child) = local.child.as_mut() {
                match child.try_wait() {
                    Ok(Some(status)) => exited.push((local.node, status.to_string())),
                    Ok(None) => {}
                    Err(error) => exited.push((local.node, error.to_string())),
                }
            }
        }
        exited
    }

    fn node_mut(&mut self, node: u32) -> Result<&mut LocalNode, BenchError> {
        self.nodes
            .iter_mut()
            .find(|local| local.node == node)
            .ok_or_else(|| BenchError::Cluster(format!("no node {node}")))
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for local in &mut self.nodes {
            if let Some(mut child) = local.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Sends `signal` (`TERM`, `STOP`, …) to process `pid` through `kill(1)`,
/// which keeps this crate free of unsafe signal calls.
fn send_signal(node: u32, pid: u32, signal: &str) -> Result<(), BenchError> {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .map_err(|error| BenchError::Cluster(format!("SIG{signal} node {node}: {error}")))?;
    if !status.success() {
        return Err(BenchError::Cluster(format!(
            "SIG{signal} node {node}: kill exited with {status}"
        )));
    }
    Ok(())
}

/// Reaps `child` once it exits, or SIGKILLs it at `deadline`.
fn await_exit(
    node: u32,
    child: &mut Child,
    signalled_at: Instant,
    deadline: Instant,
) -> Termination {
    let termination = |status: String, success: bool, killed: bool| Termination {
        node,
        exit_ms: signalled_at.elapsed().as_millis() as u64,
        status,
        success,
        killed,
    };
    let why_killed = loop {
        match child.try_wait() {
            Ok(Some(status)) => return termination(status.to_string(), status.success(), false),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(EXIT_POLL_INTERVAL),
            Ok(None) => break "still running at the deadline".to_owned(),
            Err(error) => break format!("cannot wait for it: {error}"),
        }
    };
    // `Child::kill` is SIGKILL on Unix.
    let _ = child.kill();
    let status = child.wait().map_or_else(
        |error| format!("cannot wait for it: {error}"),
        |status| status.to_string(),
    );
    termination(format!("{why_killed}; SIGKILLed: {status}"), false, true)
}

/// Runs `strand-server certs` for nodes `1..=count` into `certs`.
fn make_certificates(server_bin: &Path, certs: &Path, count: u32) -> Result<(), BenchError> {
    let nodes: Vec<String> = (1..=count).map(|node| node.to_string()).collect();
    let output = Command::new(server_bin)
        .arg("certs")
        .arg("--dir")
        .arg(certs)
        .arg("--nodes")
        .arg(nodes.join(","))
        .output()
        .map_err(|error| {
            BenchError::Cluster(format!("cannot run {}: {error}", server_bin.display()))
        })?;
    if !output.status.success() {
        return Err(BenchError::Cluster(format!(
            "strand-server certs failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

/// Writes `count` node configurations (loopback, free ports) under `dir`;
/// with `secured`, TLS from the certificates in its directory and required
/// sign-in with its admin password hash.
fn configure(
    dir: &Path,
    count: u32,
    secured: Option<(&Path, &str)>,
    io: NodeIo,
) -> Result<Vec<LocalNode>, BenchError> {
    let ports = free_ports(3 * count as usize)?;
    let addresses: Vec<[String; 3]> = ports
        .chunks_exact(3)
        .map(|ports| [ports[0], ports[1], ports[2]].map(|port| format!("127.0.0.1:{port}")))
        .collect();
    let peers: Vec<PeerFile> = addresses
        .iter()
        .zip(1..=count)
        .map(|([replica, client, _], id)| PeerFile {
            id,
            replica_address: replica.clone(),
            client_address: client.clone(),
        })
        .collect();
    let mut nodes = Vec::new();
    for ([_, client, metrics], node) in addresses.into_iter().zip(1..=count) {
        let data = dir.join(format!("node-{node}"));
        let file = NodeFile {
            node,
            cluster: CLUSTER_ID,
            data_dir: &data,
            metrics_address: &metrics,
            direct_io: io.direct_io(),
            tls: secured.map(|(certs, _)| TlsFile {
                ca: certs.join("ca.pem"),
                cert: certs.join(format!("node-{node}.pem")),
                key: certs.join(format!("node-{node}.key")),
            }),
            auth: secured.map(|(_, admin_password_hash)| AuthFile {
                required: true,
                admin_password_hash,
            }),
            peers: &peers,
        };
        let config = toml::to_string(&file).map_err(|error| {
            BenchError::Cluster(format!("cannot write node {node}'s configuration: {error}"))
        })?;
        let path = dir.join(format!("node-{node}.toml"));
        std::fs::write(&path, config).map_err(|error| {
            BenchError::Cluster(format!("cannot write {}: {error}", path.display()))
        })?;
        nodes.push(LocalNode {
            node,
            client_address: client,
            metrics_address: metrics,
            config: path,
            data_dir: data,
            log: dir.join(format!("node-{node}.log")),
            child: None,
        });
    }
    Ok(nodes)
}

/// `count` distinct loopback ports nobody listens on right now. Every
/// listener is held until all are bound: a port released at once could be
/// handed out again, and two nodes would then race for it.
fn free_ports(count: usize) -> Result<Vec<u16>, BenchError> {
    let listeners = hold_free_ports(count)?;
    listeners
        .iter()
        .map(|listener| listener.local_addr().map(|address| address.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| BenchError::Cluster(format!("no free port: {error}")))
}

/// `count` listeners on distinct free loopback ports, for the caller to
/// hold while it binds more (a test's proxies) and drop before the nodes
/// start.
///
/// The ports lie outside the kernel's ephemeral range: a port `bind(0)`
/// hands out is also one outgoing connections get, so while a node is down
/// a peer's redial could take its port and its restart would fail.
pub fn hold_free_ports(count: usize) -> Result<Vec<TcpListener>, BenchError> {
    let (first, end) = fixed_port_range();
    let span = u32::from(end - first);
    // Start somewhere different in every process, so that concurrent
    // clusters rarely probe the same ports.
    let seed = std::process::id().wrapping_mul(2_654_435_761)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
    let listeners: Vec<TcpListener> = (0..span)
        .map(|step| first + (seed.wrapping_add(step) % span) as u16)
        .filter_map(|port| TcpListener::bind(("127.0.0.1", port)).ok())
        .take(count)
        .collect();
    if listeners.len() < count {
        return Err(BenchError::Cluster(format!(
            "fewer than {count} free ports in {first}..{end}"
        )));
    }
    Ok(listeners)
}

/// Ports below the kernel's ephemeral range (`ip_local_port_range`), or
/// above it when there is more room there.
fn fixed_port_range() -> (u16, u16) {
    const LOWEST: u16 = 10_000;
    let (low, high) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut bounds = text.split_whitespace().map(str::parse::<u16>);
            Some((bounds.next()?.ok()?, bounds.next()?.ok()?))
        })
        .unwrap_or((32_768, 60_999));
    if low.saturating_sub(LOWEST) >= u16::MAX - high {
        (LOWEST, low.max(LOWEST + 1))
    } else {
        (high.saturating_add(1), u16::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_gets_distinct_ports() {
        let mut ports = free_ports(21).expect("free ports");
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 21);
    }

    /// A cluster of `count` nodes whose "server" is the shell script `body`.
    fn scripted_cluster(dir: &Path, count: u32, body: &str) -> LocalCluster {
        let script = dir.join("fake-server.sh");
        std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).expect("the script");
        let chmod = Command::new("chmod").arg("+x").arg(&script).status();
        assert!(chmod.is_ok_and(|status| status.success()));
        LocalCluster::start(
            count,
            script,
            Some(dir.join("cluster")),
            false,
            NodeIo::Default,
        )
        .expect("started")
    }

    #[test]
    fn a_node_that_exits_on_sigterm_is_reaped_cleanly() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let body = "trap 'exit 0' TERM\nwhile :; do sleep 0.05; done";
        let mut cluster = scripted_cluster(dir.path(), 2, body);
        std::thread::sleep(Duration::from_millis(200)); // let the traps be set
        assert!(cluster.pid(1).is_some() && cluster.pid(3).is_none());
        let exits = cluster
            .terminate_nodes(&[2, 1], Duration::from_secs(10))
            .expect("both running");
        assert_eq!(
            exits.iter().map(|exit| exit.node).collect::<Vec<_>>(),
            [2, 1]
        );
        assert!(
            exits.iter().all(|exit| exit.success && !exit.killed),
            "{exits:?}"
        );
        assert_eq!(cluster.pid(1), None);
        assert!(cluster.terminate_node(1, Duration::from_secs(1)).is_err());
        cluster.start_node(1).expect("restarted");
        assert!(cluster.pid(1).is_some());
    }

    #[test]
    fn a_node_that_ignores_sigterm_is_killed_at_the_bound() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut cluster = scripted_cluster(dir.path(), 1, "trap '' TERM\nexec sleep 30");
        std::thread::sleep(Duration::from_millis(200));
        let exit = cluster
            .terminate_node(1, Duration::from_millis(300))
            .expect("running");
        assert!(exit.killed && !exit.success, "{exit:?}");
        assert!(exit.exit_ms >= 300, "{exit:?}");
        assert!(exit.status.contains("SIGKILLed"), "{exit:?}");
    }

    #[test]
    fn every_node_lists_every_peer() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let nodes = configure(dir.path(), 3, None, NodeIo::Default).expect("configs");
        let config = std::fs::read_to_string(&nodes[1].config).expect("node 2's config");
        assert!(config.starts_with("node = 2\n"), "{config}");
        assert_eq!(config.matches("[[peers]]").count(), 3);
        for node in &nodes {
            assert!(config.contains(&node.client_address), "{config}");
        }
        assert!(!config.contains("direct_io"), "the server's own default");
    }

    #[test]
    fn a_node_file_keeps_quotes_and_backslashes_in_paths() {
        let temp = tempfile::tempdir().expect("a temp dir");
        let dir = temp.path().join("a \"quoted\" dir\\with\\backslashes");
        std::fs::create_dir(&dir).expect("the cluster's dir");
        let certs = dir.join("certs \"ca\"");
        let nodes =
            configure(&dir, 2, Some((&certs, "$argon2id$\"h\\")), NodeIo::Direct).expect("configs");
        let text = std::fs::read_to_string(&nodes[1].config).expect("node 2's config");
        let table: toml::Table = toml::from_str(&text).expect("valid TOML");
        let string =
            |value: Option<&toml::Value>| value.and_then(toml::Value::as_str).map(str::to_owned);
        assert_eq!(
            string(table.get("data_dir")),
            nodes[1].data_dir.to_str().map(str::to_owned),
            "{text}"
        );
        let tls = table
            .get("tls")
            .and_then(toml::Value::as_table)
            .expect("[tls]");
        let ca = certs.join("ca.pem");
        assert_eq!(string(tls.get("ca")), ca.to_str().map(str::to_owned));
        let auth = table
            .get("auth")
            .and_then(toml::Value::as_table)
            .expect("[auth]");
        assert_eq!(
            string(auth.get("admin_password_hash")).as_deref(),
            Some("$argon2id$\"h\\")
        );
        assert_eq!(
            table.get("direct_io").and_then(toml::Value::as_bool),
            Some(true)
        );
    }

    #[test]
    fn node_io_asks_for_direct_or_cached_appends_only_when_told() {
        for (io, line) in [
            (NodeIo::Direct, Some("direct_io = true")),
            (NodeIo::PageCache, Some("direct_io = false")),
            (NodeIo::Default, None),
        ] {
            let dir = tempfile::tempdir().expect("a temp dir");
            let nodes = configure(dir.path(), 1, None, io).expect("configs");
            let config = std::fs::read_to_string(&nodes[0].config).expect("the config");
            match line {
                Some(line) => assert_eq!(config.matches(line).count(), 1, "{config}"),
                None => assert!(!config.contains("direct_io"), "{config}"),
            }
        }
    }
}
