//! Starting real `strand-server` processes for the end-to-end tests.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The cluster id the test clusters use (the SDK's default).
pub const CLUSTER: u64 = 0;

/// A running node; killed when dropped.
pub struct Node {
    /// The process.
    pub child: Child,
    /// Its client port.
    pub client_address: String,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

/// Three nodes with their configuration and logs under `dir`.
pub fn start_cluster(dir: &Path) -> Vec<Node> {
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let mut peers = String::new();
    for (index, (replica, client)) in ports.iter().enumerate() {
        peers.push_str(&format!(
            "\n[[peers]]\nid = {}\nreplica_address = \"127.0.0.1:{replica}\"\nclient_address = \"127.0.0.1:{client}\"\n",
            index + 1
        ));
    }
    (1..=3)
        .map(|node| {
            let data = dir.join(format!("node-{node}"));
            let config = format!(
                "node = {node}\ncluster = {CLUSTER}\ndata_dir = {:?}\n{peers}",
                data.display().to_string()
            );
            let path = dir.join(format!("node-{node}.toml"));
            std::fs::write(&path, config).expect("write config");
            let log = std::fs::File::create(dir.join(format!("node-{node}.log"))).expect("log");
            let child = Command::new(env!("CARGO_BIN_EXE_strand-server"))
                .arg("run")
                .arg("--config")
                .arg(&path)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start a node");
            Node {
                child,
                client_address: format!("127.0.0.1:{}", ports[node - 1].1),
            }
        })
        .collect()
}
