//! `strand-server dev-cluster`: writes a configuration per node (with TLS:
//! a CA and node certificates under `<data>/certs`, made once and kept, so
//! that a restarted dev cluster keeps its identity), starts one
//! real `strand-server run` process per node on loopback, prints where they
//! listen (and each process id, to try a failover with `kill -9`), and on
//! Ctrl-C (or SIGTERM) stops them all with SIGTERM and waits. A node that
//! exits on its own is reported with the command that restarts it; the
//! others keep running.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::node::config::{PeerConfig, local_cluster_toml};

/// The cluster id a dev cluster uses (the SDK's default).
pub const DEV_CLUSTER_ID: u64 = 0;

/// Runs a local cluster of `nodes` processes until Ctrl-C; plaintext when
/// `insecure`, TLS otherwise.
pub fn run(nodes: u32, data: &Path, port: u16, insecure: bool) -> Result<(), String> {
    if !(1..=7).contains(&nodes) {
        return Err(format!("--nodes {nodes}: a dev cluster has 1 to 7 nodes"));
    }
    let peers = peers(nodes, port)?;
    let exe = std::env::current_exe().map_err(|error| format!("cannot find myself: {error}"))?;
    std::fs::create_dir_all(data)
        .map_err(|error| format!("cannot create {}: {error}", data.display()))?;
    let data = data
        .canonicalize()
        .map_err(|error| format!("{}: {error}", data.display()))?;
    let certs = data.join("certs");
    let password_file = data.join("admin.password");
    let admin_hash = if insecure {
        None
    } else {
        ensure_certificates(&certs, &peers)?;
        Some(admin_password_hash(&password_file)?)
    };
    let cluster = Cluster {
        exe,
        data,
        certs,
        password_file,
        port,
        insecure,
        admin_hash,
        peers,
    };
    let mut children: Vec<Running> = Vec::new();
    for peer in &cluster.peers {
        children.push(cluster.start_node(peer)?);
    }
    cluster.tell_how_to_connect()?;
    println!("Ctrl-C stops every node cleanly.");
    wait_for_signal(&mut children, &cluster.exe)?;
    stop(children);
    Ok(())
}

/// A dev cluster being started: where its files go and what its nodes
/// share.
struct Cluster {
    /// This program, run once per node.
    exe: PathBuf,
    /// The cluster's directory (canonical).
    data: PathBuf,
    /// Its CA and node certificates.
    certs: PathBuf,
    /// The admin's password, for the CLI.
    password_file: PathBuf,
    /// The first port: replica and client ports follow it.
    port: u16,
    /// Plaintext, no sign-in.
    insecure: bool,
    /// The admin's password hash, with TLS.
    admin_hash: Option<String>,
    /// Every node.
    peers: Vec<PeerConfig>,
}

impl Cluster {
    /// Writes `peer`'s configuration and starts its process, logging to a
    /// file beside it; says where it listens.
    fn start_node(&self, peer: &PeerConfig) -> Result<Running, String> {
        let data = &self.data;
        let node_dir = data.join(format!("node-{}", peer.id));
        let metrics = format!("127.0.0.1:{}", u32::from(self.port) + 200 + peer.id);
        let tls = (!self.insecure).then(|| crate::net::tls::node_files(&self.certs, peer.id));
        let text = local_cluster_toml(
            peer.id,
            DEV_CLUSTER_ID,
            &node_dir,
            &self.peers,
            Some(&metrics),
            tls.as_ref(),
            self.admin_hash.as_deref(),
        )
        .map_err(|error| error.to_string())?;
        let config_path = data.join(format!("node-{}.toml", peer.id));
        let log_path = data.join(format!("node-{}.log", peer.id));
        std::fs::write(&config_path, text)
            .map_err(|error| format!("cannot write {}: {error}", config_path.display()))?;
        let log = std::fs::File::create(&log_path)
            .map_err(|error| format!("cannot create {}: {error}", log_path.display()))?;
        let log_err = log
            .try_clone()
            .map_err(|error| format!("cannot share {}: {error}", log_path.display()))?;
        let child = Command::new(&self.exe)
            .arg("run")
            .arg("--config")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|error| format!("cannot start node {}: {error}", peer.id))?;
        println!(
            "node {} (pid {}): clients {}  kafka {}  replicas {}  metrics http://{}/metrics  log {}",
            peer.id,
            child.id(),
            peer.client_address,
            peer.kafka_address.as_deref().unwrap_or("-"),
            peer.replica_address,
            metrics,
            log_path.display()
        );
        Ok(Running {
            id: peer.id,
            child,
            config: config_path,
            log: log_path,
            exited: false,
        })
    }

    /// Says how to reach the cluster, and writes the CLI's configuration
    /// file for it.
    fn tell_how_to_connect(&self) -> Result<(), String> {
        let bootstrap: Vec<&str> = self
            .peers
            .iter()
            .map(|peer| peer.client_address.as_str())
            .collect();
        println!(
            "cluster id {DEV_CLUSTER_ID}; connect to {}",
            bootstrap.join(",")
        );
        let cli_config = self.data.join("cli.toml");
        let secured =
            (!self.insecure).then(|| (self.certs.join("ca.pem"), self.password_file.clone()));
        std::fs::write(&cli_config, cli_toml(&bootstrap, secured.as_ref())?)
            .map_err(|error| format!("cannot write {}: {error}", cli_config.display()))?;
        let kafka = self
            .peers
            .iter()
            .filter_map(|peer| peer.kafka_address.as_deref());
        let kafka: Vec<&str> = kafka.collect();
        if self.insecure {
            println!("plaintext (--insecure): no TLS");
            println!("Kafka clients: kcat -b {} -L", kafka.join(","));
        } else {
            println!(
                "Kafka clients: kcat -b {} -X security.protocol=SASL_SSL -X sasl.mechanisms=PLAIN \\\n  \
                 -X sasl.username=admin -X sasl.password=$(cat {}) -X ssl.ca.location={} -L",
                kafka.join(","),
                self.password_file.display(),
                self.certs.join("ca.pem").display()
            );
            println!(
                "TLS and sign-in: the CLI verifies the nodes with the cluster's CA and signs in as admin:\n  \
                 export STRAND_CA={} STRAND_USER=admin STRAND_PASSWORD_FILE={}",
                self.certs.join("ca.pem").display(),
                self.password_file.display()
            );
        }
        println!(
            "or point the CLI at its configuration file (addresses, CA, sign-in):\n  export STRAND_CONFIG={}",
            cli_config.display()
        );
        Ok(())
    }
}

/// Makes the CA and node certificates under `certs` unless a CA is there
/// already (with a certificate for every node).
fn ensure_certificates(certs: &Path, peers: &[PeerConfig]) -> Result<(), String> {
    let complete = certs.join("ca.pem").exists()
        && peers
            .iter()
            .all(|peer| crate::net::tls::node_files(certs, peer.id).cert.exists());
    if complete {
        return Ok(());
    }
    let nodes: Vec<u32> = peers.iter().map(|peer| peer.id).collect();
    let hosts = ["127.0.0.1".to_owned(), "localhost".to_owned()];
    crate::net::tls::generate(certs, &nodes, &hosts)?;
    println!("made a CA and node certificates in {}", certs.display());
    Ok(())
}

/// The CLI's configuration file for this cluster (see the CLI's
/// `--config`): its addresses and, with TLS, the CA and the admin's
/// password file. Serialized, so any path is quoted as TOML wants.
fn cli_toml(bootstrap: &[&str], secured: Option<&(PathBuf, PathBuf)>) -> Result<String, String> {
    /// The keys of the CLI's file this cluster sets.
    #[derive(serde::Serialize)]
    struct CliFile<'a> {
        cluster: String,
        cluster_id: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        ca: Option<&'a Path>,
        #[serde(skip_serializing_if = "Option::is_none")]
        user: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        password_file: Option<&'a Path>,
    }
    assert!(!bootstrap.is_empty(), "a dev cluster has nodes");
    let file = CliFile {
        cluster: bootstrap.join(","),
        cluster_id: DEV_CLUSTER_ID,
        ca: secured.map(|(ca, _)| ca.as_path()),
        user: secured.map(|_| "admin"),
        password_file: secured.map(|(_, password_file)| password_file.as_path()),
    };
    let text = toml::to_string(&file)
        .map_err(|error| format!("cannot write the CLI's configuration: {error}"))?;
    Ok(format!(
        "# The strand CLI's settings for this dev cluster: export STRAND_CONFIG=<this file>.\n{text}"
    ))
}

/// The hash of the built-in `admin`'s password, made once (random) and kept
/// in `path` (readable by its owner only) so that a restarted dev cluster
/// keeps it.
fn admin_password_hash(path: &Path) -> Result<String, String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let password = match std::fs::read_to_string(path) {
        Ok(text) => text.lines().next().unwrap_or_default().to_owned(),
        Err(_) => {
            // Uniform over an alphabet without look-alikes (0/O, 1/l/I),
            // from the thread's OS-seeded CSPRNG: 24 of 57 symbols, 140 bits.
            const ALPHABET: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
            let mut rng = rand::rng();
            let password: String = (0..24)
                .map(|_| {
                    let index = rand::Rng::random_range(&mut rng, 0..ALPHABET.len());
                    char::from(ALPHABET[index])
                })
                .collect();
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(|error| format!("{}: {error}", path.display()))?;
            writeln!(file, "{password}").map_err(|error| format!("{}: {error}", path.display()))?;
            println!("made the admin password in {}", path.display());
            password
        }
    };
    strand_credentials::hash_password(&password).map_err(|error| error.to_string())
}

/// One node process of the dev cluster.
struct Running {
    id: u32,
    child: Child,
    config: PathBuf,
    log: PathBuf,
    /// Reported as exited already.
    exited: bool,
}

fn peers(nodes: u32, port: u16) -> Result<Vec<PeerConfig>, String> {
    if u32::from(port) + 300 + nodes > u32::from(u16::MAX) {
        return Err(format!("--port {port} leaves no room for {nodes} nodes"));
    }
    Ok((1..=nodes)
        .map(|id| PeerConfig {
            id,
            replica_address: format!("127.0.0.1:{}", u32::from(port) + id),
            client_address: format!("127.0.0.1:{}", u32::from(port) + 100 + id),
            kafka_address: Some(format!("127.0.0.1:{}", u32::from(port) + 300 + id)),
        })
        .collect())
}

/// Waits for SIGINT/SIGTERM (or for every node to have exited), reporting
/// each node that exits on its own with the command that restarts it.
fn wait_for_signal(children: &mut [Running], exe: &Path) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start: {error}"))?;
    runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).map_err(|error| error.to_string())?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(|error| error.to_string())?;
        let mut poll = tokio::time::interval(Duration::from_millis(200));
        loop {
            tokio::select! {
                _ = terminate.recv() => return Ok(()),
                _ = interrupt.recv() => return Ok(()),
                _ = poll.tick() => {
                    report_exits(children, exe);
                    if children.iter().all(|running| running.exited) {
                        eprintln!("every node has exited");
                        return Ok(());
                    }
                }
            }
        }
    })
}

/// Reports, once each, the nodes that exited on their own.
fn report_exits(children: &mut [Running], exe: &Path) {
    for running in children.iter_mut().filter(|running| !running.exited) {
        if let Ok(Some(status)) = running.child.try_wait() {
            running.exited = true;
            eprintln!(
                "node {} exited ({status}); the others keep running. Restart it with:\n  {} run --config {} >> {} 2>&1",
                running.id,
                exe.display(),
                running.config.display(),
                running.log.display()
            );
        }
    }
}

/// SIGTERM to every node still running, then wait for each.
fn stop(children: Vec<Running>) {
    for running in children.iter().filter(|running| !running.exited) {
        // `kill` keeps this crate free of unsafe signal calls.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(running.child.id().to_string())
            .status();
    }
    for mut running in children.into_iter().filter(|running| !running.exited) {
        match running.child.wait() {
            Ok(status) => println!("node {} stopped ({status})", running.id),
            Err(error) => eprintln!("node {}: {error}", running.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cli_file_keeps_quotes_and_backslashes_in_paths() {
        let ca = PathBuf::from("/data/\"certs\"/ca.pem");
        let password_file = PathBuf::from("/data\\dev/admin.password");
        let text = cli_toml(
            &["127.0.0.1:7201", "127.0.0.1:7202"],
            Some(&(ca.clone(), password_file.clone())),
        )
        .expect("written");
        let table: toml::Table = toml::from_str(&text).expect("valid TOML");
        let string = |key: &str| table.get(key).and_then(toml::Value::as_str);
        assert_eq!(string("ca"), ca.to_str(), "{text}");
        assert_eq!(string("password_file"), password_file.to_str());
        assert_eq!(string("user"), Some("admin"));
        assert_eq!(string("cluster"), Some("127.0.0.1:7201,127.0.0.1:7202"));
        let plain: toml::Table =
            toml::from_str(&cli_toml(&["127.0.0.1:7201"], None).expect("written"))
                .expect("valid TOML");
        assert!(!plain.contains_key("ca") && !plain.contains_key("user"));
    }

    #[test]
    fn the_admin_password_is_made_once_private_and_from_its_alphabet() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("admin.password");
        admin_password_hash(&path).expect("made");
        let text = std::fs::read_to_string(&path).expect("written");
        let password = text.trim_end();
        assert_eq!(password.len(), 24);
        assert!(
            password
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() && !b"0O1lI".contains(&byte))
        );
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "only its owner reads it");
        admin_password_hash(&path).expect("read back");
        assert_eq!(
            std::fs::read_to_string(&path).expect("kept"),
            text,
            "a second start keeps the password"
        );
    }
}
