//! The `strand-server` binary: `run` one node from a configuration file, or
//! start a local `dev-cluster` of real node processes on loopback.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use strand_server::node::config::{NodeConfig, Overrides};
use strand_server::node::{self, dev_cluster};

#[derive(Parser)]
#[command(name = "strand-server", version, about = "The Strand streaming server")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one node.
    Run {
        /// The node's configuration file (TOML).
        #[arg(long)]
        config: PathBuf,
        /// Override the node id (also `STRAND_NODE`).
        #[arg(long)]
        node: Option<u32>,
        /// Override the data directory (also `STRAND_DATA_DIR`).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Override the metrics address (also `STRAND_METRICS_ADDRESS`).
        #[arg(long)]
        metrics: Option<String>,
    },
    /// Start a local cluster of real node processes on loopback; Ctrl-C stops
    /// every node cleanly.
    DevCluster {
        /// How many nodes.
        #[arg(long, default_value_t = 3)]
        nodes: u32,
        /// Where the nodes keep their data (one directory per node).
        #[arg(long, default_value = "strand-dev-data")]
        data: PathBuf,
        /// First port: node `i` listens on `port + i` (replica bus),
        /// `port + 100 + i` (clients), `port + 200 + i` (metrics) and `port + 300 + i` (Kafka clients).
        #[arg(long, default_value_t = 7100)]
        port: u16,
        /// Serve plaintext: no certificates, no TLS.
        #[arg(long)]
        insecure: bool,
    },
    /// Make a cluster CA and a certificate per node: `ca.pem`, `ca.key`,
    /// `node-N.pem`, `node-N.key` (keys readable by their owner only). Each
    /// node certificate names `node-N.strand` (the replica bus checks it)
    /// and every `--host`.
    Certs {
        /// Where to write them.
        #[arg(long)]
        dir: PathBuf,
        /// The node ids, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        nodes: Vec<u32>,
        /// A DNS name or IP address clients dial (repeatable).
        #[arg(long = "host", default_values_t = ["127.0.0.1".to_owned(), "localhost".to_owned()])]
        hosts: Vec<String>,
    },
    /// Make a certificate for a user, signed by the CA in `--dir` (`ca.pem`,
    /// `ca.key`): `user-NAME.pem` and `user-NAME.key`. A client presenting
    /// it (`strand --cert --key`) is signed in as NAME, with NAME's rights.
    UserCert {
        /// Where the CA is, and where to write them.
        #[arg(long)]
        dir: PathBuf,
        /// The user it signs in as.
        #[arg(long)]
        name: String,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run {
            config,
            node,
            data,
            metrics,
        } => run(config, node, data, metrics),
        Command::DevCluster {
            nodes,
            data,
            port,
            insecure,
        } => dev_cluster::run(nodes, &data, port, insecure),
        Command::UserCert { dir, name } => {
            strand_server::net::tls::generate_user(&dir, &name).map(|(cert, key)| {
                println!("wrote {} and {}", cert.display(), key.display());
                // What `strand cert revoke` takes, to revoke it later.
                if let Ok(fingerprint) = strand_credentials::certificate_fingerprint_of_file(&cert)
                {
                    println!("SHA-256 fingerprint: {fingerprint}");
                }
            })
        }
        Command::Certs { dir, nodes, hosts } => {
            strand_server::net::tls::generate(&dir, &nodes, &hosts).map(|()| {
                println!(
                    "wrote ca.pem, ca.key and node certificates to {}",
                    dir.display()
                );
            })
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("strand-server: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(
    config: PathBuf,
    node: Option<u32>,
    data: Option<PathBuf>,
    metrics: Option<String>,
) -> Result<(), String> {
    let overrides = Overrides::from_env_then(Overrides {
        node,
        data_dir: data,
        metrics_address: metrics,
    })
    .map_err(|error| error.to_string())?;
    let config = NodeConfig::load(&config, overrides).map_err(|error| error.to_string())?;
    node::run(config).map_err(|error| error.to_string())
}
