//! A node's lifetime: lock the data directory, start the WAL writer, bind the
//! replica bus and the client port, open the metadata plane, start every
//! partition the catalog places here (now and as topics are created), and on
//! SIGTERM or SIGINT shut down cleanly.
//!
//! | module | owns |
//! |---|---|
//! | [`config`] | the TOML file, env and CLI overrides, field-named errors |
//! | [`disk`] | the data disk's room: the reserve, produces refused while it is used up |
//! | [`disk_watch`] | the task that reads the data disk's free space into its room |
//! | [`limits`] | the open-files limit: raised at start, partitions it allows |
//! | [`boot`] | the boot count, raised at start: which clean marks still hold |
//! | [`dev_cluster`] | `strand-server dev-cluster` |

pub mod boot;
pub mod config;
pub mod dev_cluster;
pub mod disk;
pub mod disk_watch;
pub mod limits;

use std::collections::BTreeMap;
use std::fs::File;
use std::sync::Arc;

use strand_wal::{Wal, WalConfig};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::group::spec::GroupSpec;
use crate::metadata::hosted::Hosted;
use crate::metrics::{self, WalMetrics};
use crate::net::bus;
use crate::net::client_port;
use crate::net::peer_queue::{PeerReceiver, PeerSender};
use crate::node::config::NodeConfig;
use crate::node::limits::DescriptorBudget;
use crate::runtime::input::Input;
use crate::runtime::shards::Shards;
use crate::shared::{EpochReport, Shared};
use strand_host::catalog::Assignment;
use strand_partition::ReadHandles;

/// Why a node could not start (or stopped badly).
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The data directory could not be created or locked.
    #[error("data directory {path}: {reason}")]
    DataDir {
        /// The directory.
        path: String,
        /// Why.
        reason: String,
    },
    /// The boot count could not be raised.
    #[error(transparent)]
    Boot(#[from] crate::node::boot::BootError),
    /// A listener could not be bound.
    #[error("cannot listen on {address} ({what}): {source}")]
    Bind {
        /// The address.
        address: String,
        /// Which listener.
        what: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// The TLS certificates or key could not be loaded.
    #[error("TLS: {0}")]
    Tls(#[from] strand_credentials::TlsError),
    /// The WAL writer could not start.
    #[error("cannot start the WAL writer: {0}")]
    Wal(String),
    /// The metrics endpoint could not start.
    #[error("{0}")]
    Metrics(String),
    /// A thread or the runtime could not start.
    #[error("cannot start: {0}")]
    Runtime(std::io::Error),
    /// The metadata plane's actor ended without a shutdown (it panicked):
    /// the node cannot learn placements any more, so it stops.
    #[error("the metadata plane stopped unexpectedly (see the log); the node shut down")]
    MetadataStopped,
}

/// Runs a node until SIGTERM or SIGINT, then shuts it down cleanly.
pub fn run(config: NodeConfig) -> Result<(), NodeError> {
    let _lock = lock_data_dir(&config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("strand-io")
        .enable_all()
        .build()
        .map_err(NodeError::Runtime)?;
    runtime.block_on(serve(config))
}

/// Holds the data directory's lock file: one node per directory.
fn lock_data_dir(config: &NodeConfig) -> Result<File, NodeError> {
    let path = config.data_dir.display().to_string();
    std::fs::create_dir_all(&config.data_dir).map_err(|error| NodeError::DataDir {
        path: path.clone(),
        reason: error.to_string(),
    })?;
    let lock = File::create(config.data_dir.join("LOCK")).map_err(|error| NodeError::DataDir {
        path: path.clone(),
        reason: error.to_string(),
    })?;
    lock.try_lock().map_err(|_| NodeError::DataDir {
        path,
        reason: "another node is running on it".to_owned(),
    })?;
    Ok(lock)
}

async fn bind(address: &str, what: &'static str) -> Result<TcpListener, NodeError> {
    TcpListener::bind(address)
        .await
        .map_err(|source| NodeError::Bind {
            address: address.to_owned(),
            what,
            source,
        })
}

/// Raises the open-files limit and says how many partitions it allows (a
/// node past it cannot open a partition's files: the group stays down and
/// its log says "Too many open files").
/// Raises the open-files limit and splits it between the WAL and reads.
fn descriptor_budget(connections_wanted: usize) -> DescriptorBudget {
    let limit = crate::node::limits::raise_open_files_limit();
    let budget = DescriptorBudget::within(limit, connections_wanted);
    tracing::info!(
        limit = ?limit,
        wal_descriptors = budget.wal,
        read_descriptors = budget.reads,
        client_connections = budget.connections,
        "node: open-files limit; idle partitions give their descriptors back past these"
    );
    budget
}

async fn serve(config: NodeConfig) -> Result<(), NodeError> {
    // First: a SIGTERM that comes while the node starts is a clean
    // shutdown too, not the default action (an exit by signal).
    let mut signals = Signals::new()?;
    let budget = descriptor_budget(config.limits.client_connections_max);
    let tls = config
        .tls
        .as_ref()
        .map(crate::net::tls::NodeTls::load)
        .transpose()?;
    let me = config.me().clone();
    let listeners = Listeners {
        bus: bind(&me.replica_address, "replica bus").await?,
        client: bind(&me.client_address, "client port").await?,
        kafka: match &me.kafka_address {
            Some(address) => Some(bind(address, "Kafka listener").await?),
            None => None,
        },
    };
    if let Some(address) = config.metrics_address {
        metrics::install(address).map_err(NodeError::Metrics)?;
    }
    let wal = Wal::start(WalConfig {
        observer: Some(Arc::new(WalMetrics)),
        descriptors_max: budget.wal,
        direct_appends: config.direct_io,
        ..WalConfig::default()
    })
    .map_err(|error| NodeError::Wal(error.to_string()))?;
    let (senders, receivers) =
        crate::net::peer_queue::queues(config.node, config.peers.iter().map(|peer| peer.id));
    let shared = Arc::new(shared_state(config, senders, &budget, tls)?);
    let (shards, hosted) = start_tasks(&shared, listeners, receivers, &wal)?;
    tracing::info!(
        node = shared.config.node,
        replica_address = %me.replica_address,
        client_address = %me.client_address,
        kafka_address = me.kafka_address.as_deref().unwrap_or("-"),
        "node: serving"
    );
    let outcome = host_until_signal(&shared, &shards, &wal, hosted, &mut signals).await;
    shut_down(&shared, shards, &wal).await;
    outcome
}

/// The node's listeners, bound before anything starts.
struct Listeners {
    /// The replica bus's.
    bus: TcpListener,
    /// The client port's.
    client: TcpListener,
    /// The Kafka listener's, where the node serves one.
    kafka: Option<TcpListener>,
}

/// The node's shared state: its boot counted (before any partition opens:
/// the clean marks of the last boot hold in this one only) and its audit
/// log opened.
fn shared_state(
    config: NodeConfig,
    senders: BTreeMap<u32, PeerSender>,
    budget: &DescriptorBudget,
    tls: Option<crate::net::tls::NodeTls>,
) -> Result<Shared, NodeError> {
    let data_dir = config.data_dir.clone();
    let boot = crate::node::boot::count_boot(&data_dir)?;
    tracing::info!(boot, "node: boot counted");
    let audit = crate::security::audit::AuditLog::start(&data_dir).map_err(|source| {
        NodeError::DataDir {
            path: data_dir
                .join(crate::security::audit::AUDIT_LOG_FILE)
                .display()
                .to_string(),
            reason: format!("cannot open the audit log: {source}"),
        }
    })?;
    Ok(
        Shared::new(config, senders, ReadHandles::new(budget.reads), boot)
            .with_connections_max(budget.connections)
            .with_tls(tls)
            .with_audit(audit),
    )
}

/// Starts the node's tasks (the bus, the client port, the disk watcher,
/// the metadata duties, liveness) and its shards, and hosts the metadata
/// plane's replica: the shards, and where that replica tells the node of
/// the partitions hosted here.
fn start_tasks(
    shared: &Arc<Shared>,
    listeners: Listeners,
    receivers: BTreeMap<u32, PeerReceiver>,
    wal: &Wal,
) -> Result<(Shards, mpsc::UnboundedReceiver<Hosted>), NodeError> {
    // Made before the first sign-in for an unknown user, so that the
    // first such refusal takes no longer than the next.
    tokio::task::spawn_blocking(crate::security::auth::hash_policy::dummy_hash);
    tokio::spawn(bus::run(Arc::clone(shared), listeners.bus, receivers));
    tokio::spawn(client_port::run(Arc::clone(shared), listeners.client));
    if let Some(kafka) = listeners.kafka {
        tokio::spawn(crate::kafka::listener::run(Arc::clone(shared), kafka));
    }
    tokio::spawn(crate::node::disk_watch::watch(Arc::clone(shared)));
    #[cfg(feature = "fault-injection")]
    tokio::spawn(crate::runtime::contain::watch_injections(Arc::clone(
        shared,
    )));
    let (hosted_sender, hosted) = mpsc::unbounded_channel::<Hosted>();
    let (epoch_sender, epoch_reports) = mpsc::unbounded_channel::<EpochReport>();
    shared.set_epoch_reporter(epoch_sender);
    tokio::spawn(crate::metadata::epoch_reports::run(
        Arc::clone(shared),
        epoch_reports,
    ));
    tokio::spawn(crate::metadata::session_sweep::run(Arc::clone(shared)));
    let shards = Shards::start(shared, shared.config.shards).map_err(NodeError::Runtime)?;
    tokio::spawn(crate::net::liveness::watch_liveness(
        Arc::clone(shared),
        shards.liveness_notifier(),
    ));
    let nodes: Vec<u32> = shared.config.peers.iter().map(|peer| peer.id).collect();
    let metadata = GroupSpec::metadata(nodes, &shared.config.data_dir);
    shards.host(shared, wal.clone(), metadata, Some(hosted_sender));
    Ok((shards, hosted))
}

/// Hosts, stops and removes partitions as the metadata plane's replica
/// says, until a signal (or until that replica stops: an error).
async fn host_until_signal(
    shared: &Arc<Shared>,
    shards: &Shards,
    wal: &Wal,
    mut hosted: mpsc::UnboundedReceiver<Hosted>,
    signals: &mut Signals,
) -> Result<(), NodeError> {
    let data_dir = shared.config.data_dir.clone();
    loop {
        tokio::select! {
            hosted = hosted.recv() => {
                let Some(hosted) = hosted else {
                    tracing::error!("node: the metadata plane stopped; shutting down");
                    return Err(NodeError::MetadataStopped);
                };
                match hosted {
                    Hosted::Placed(assignment) => place(shared, shards, wal, &data_dir, assignment),
                    Hosted::Dropped(assignment) => drop_copy(shared, &data_dir, &assignment),
                    Hosted::CatalogLoaded => sweep_deleted(shared, &data_dir),
                }
            }
            signal = signals.next() => {
                tracing::info!(signal, "node: shutting down");
                return Ok(());
            }
        }
    }
}
/// Hosts a partition placed on this node, or hands its running actor the
/// changed assignment. A copy this node retired from is not started (its
/// data stays until dropped).
fn place(
    shared: &Arc<Shared>,
    shards: &Shards,
    wal: &Wal,
    data_dir: &std::path::Path,
    assignment: Assignment,
) {
    let me = shared.config.node;
    let spec = GroupSpec::partition(&assignment, data_dir, me);
    if shared.place(assignment) || spec.retired {
        return;
    }
    tracing::info!(group = spec.group, stream = %spec.stream, topic = %spec.topic,
        partition = spec.partition, epoch = spec.epoch, "node: hosting a partition");
    shards.host(shared, wal.clone(), spec, None);
}

/// A partition is no longer hosted here (its topic was deleted, or an
/// operator dropped this node's retired copy): stop its actor, then delete
/// everything of it on this node (in the background: the actor closes its
/// files first).
fn drop_copy(shared: &Arc<Shared>, data_dir: &std::path::Path, assignment: &Assignment) {
    let group = assignment.group;
    let deleted = shared.catalog().is_deleted(group);
    let _ = shared.send_to_group(group, Input::Shutdown);
    let shared = Arc::clone(shared);
    let data_dir = data_dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        while shared.group(group).is_some() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        remove_group_data(&data_dir, &[group]);
        // A group that failed to open left its status behind.
        shared.unregister(group);
        match deleted {
            true => tracing::warn!(group, "node: a deleted partition's data removed"),
            false => tracing::warn!(group, "node: retired copy dropped"),
        }
    });
}

/// Removes, once the metadata plane's catalog is loaded, the data of every
/// partition the catalog knows deleted: what a node finds after it was down
/// (or stopped half way) while a topic was deleted.
fn sweep_deleted(shared: &Arc<Shared>, data_dir: &std::path::Path) {
    let shared = Arc::clone(shared);
    let data_dir = data_dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let catalog = shared.catalog();
        let deleted: Vec<u64> = group_entries(&data_dir)
            .into_iter()
            .map(|(group, _)| group)
            .filter(|group| catalog.is_deleted(*group) && shared.group(*group).is_none())
            .collect();
        if !deleted.is_empty() {
            tracing::warn!(groups = ?deleted, "node: removing the data of deleted partitions");
            remove_group_data(&data_dir, &deleted);
        }
    });
}

/// Every partition directory entry (and its siblings) under the data
/// directory, with the group it belongs to.
fn group_entries(data_dir: &std::path::Path) -> Vec<(u64, std::path::PathBuf)> {
    let mut found = Vec::new();
    for stream in read_dir_paths(&strand_partition::layout::partitions_root(data_dir)) {
        for topic in read_dir_paths(&stream) {
            for entry in read_dir_paths(&topic) {
                let name = strand_partition::layout::file_name(&entry);
                if let Some(group) = strand_partition::layout::parse_group_of_entry(&name) {
                    found.push((group, entry));
                }
            }
        }
    }
    found
}

fn read_dir_paths(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Deletes every directory and file of `groups` under the data directory,
/// then the topic and stream directories left empty.
fn remove_group_data(data_dir: &std::path::Path, groups: &[u64]) {
    for (group, path) in group_entries(data_dir) {
        if !groups.contains(&group) {
            continue;
        }
        let removed = match path.is_dir() {
            true => std::fs::remove_dir_all(&path),
            false => std::fs::remove_file(&path),
        };
        match removed {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                tracing::error!(group, path = %path.display(), %error, "node: cannot remove a partition's data")
            }
        }
        // Empty topic and stream directories go too (a failure means
        // something else still lives there).
        if let Some(topic) = path.parent() {
            let _ = std::fs::remove_dir(topic);
            if let Some(stream) = topic.parent() {
                let _ = std::fs::remove_dir(stream);
            }
        }
    }
}

/// Stops taking requests, lets every group finish and close its storage
/// (clean marks where trusted), then stops the WAL writer.
async fn shut_down(shared: &Arc<Shared>, shards: Shards, wal: &Wal) {
    shared.begin_shutdown();
    let wal = wal.clone();
    let joined = tokio::task::spawn_blocking(move || {
        shards.stop();
        if let Err(error) = wal.shutdown() {
            tracing::warn!(%error, "node: WAL shutdown");
        }
    })
    .await;
    if joined.is_err() {
        tracing::error!("node: shutdown did not complete");
    } else {
        tracing::info!("node: stopped cleanly");
    }
}

/// SIGTERM and SIGINT.
struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Signals, NodeError> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            terminate: signal(SignalKind::terminate()).map_err(NodeError::Runtime)?,
            interrupt: signal(SignalKind::interrupt()).map_err(NodeError::Runtime)?,
        })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
        }
    }
}
