//! Node configuration: a TOML file, then environment overrides, then CLI
//! flags. Every error names the field it is about.
//!
//! ```toml
//! node = 1
//! cluster = 7
//! data_dir = "/var/lib/strand"
//! metrics_address = "127.0.0.1:9101"   # optional
//! tick_ms = 10                          # optional
//! shards = 2                            # optional: shard threads (default: one per core)
//! retention_check_ms = 30000            # optional: how often age retention is applied
//! disk_reserve_bytes = 1073741824       # optional: free space kept; produces refused below it
//! insecure = false                      # optional: allow plaintext listeners off loopback
//! direct_io = true                      # optional: append past the page cache (O_DIRECT)
//! cursor_consumers_per_partition_max = 10000  # optional: distinct consumer names with a cursor, per partition
//! cursor_retention_ms = 604800000       # optional: a cursor not stored for this long is deleted (0: never)
//! metadata_snapshot_ops = 10000         # optional: metadata ops between catalog snapshots (the log below goes)
//!
//! [limits]                              # optional: what clients may cost (defaults shown)
//! client_connections_max = 10000        # client connections at once (also held within the open-files limit)
//! client_connections_per_address_max = 1000
//! sign_in_timeout_ms = 10000            # with [auth] required: sign in within this, or be closed
//! client_idle_timeout_ms = 600000       # a connection silent this long is closed
//!
//! [auth]                                # optional
//! required = true                       # connections sign in; operations are checked against permissions
//! admin_password_hash = "$argon2id$..." # the built-in user `admin`: Argon2id within the node's fixed parameters (`auth::hash_policy`)
//!
//! [tls]                                 # TLS on the client port, mutual TLS on the replica bus
//! ca = "certs/ca.pem"                   # the cluster's CA (relative paths: from this file's directory)
//! cert = "certs/node-1.pem"             # this node's certificate: names `node-1.strand`
//! key = "certs/node-1.key"
//!
//! [kafka]                               # optional
//! stream = "default"                    # the stream of Kafka topic names without a dot
//!
//! [[peers]]
//! id = 1
//! replica_address = "127.0.0.1:7101"
//! client_address = "127.0.0.1:7201"
//! kafka_address = "127.0.0.1:9092"      # optional: serve Kafka clients here
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use strand_wire::{ConfirmPolicy, Durability};

/// Why a configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (it names the field).
        message: String,
    },
    /// A field's value is invalid.
    #[error("invalid `{field}`: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// Why.
        reason: String,
    },
}

/// One node of the cluster, as every node's configuration lists it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// The node's id (unique, any `u32`).
    pub id: u32,
    /// Where its replica bus listens.
    pub replica_address: String,
    /// Where its client port listens.
    pub client_address: String,
    /// Where its Kafka listener listens and is advertised to Kafka
    /// clients (`None`: the node serves no Kafka listener).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_address: Option<String>,
}

/// How the node serves Kafka clients (its listener's address is its
/// `peers` entry's `kafka_address`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaConfig {
    /// The stream that Kafka topic names without a dot belong to (see
    /// `strand_kafka::names`).
    #[serde(default = "kafka_stream_by_default")]
    pub stream: String,
}

impl Default for KafkaConfig {
    fn default() -> KafkaConfig {
        KafkaConfig {
            stream: kafka_stream_by_default(),
        }
    }
}

/// The default stream of Kafka topic names: `default`.
fn kafka_stream_by_default() -> String {
    "default".to_owned()
}

/// The certificate files of a node with TLS.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// The cluster's CA certificate (PEM): peers' and client certificates
    /// must chain to it.
    pub ca: PathBuf,
    /// This node's certificate chain (PEM). It must name this node's
    /// `node_name` (of the `tls` module; the replica bus checks it), and the
    /// hosts clients dial.
    pub cert: PathBuf,
    /// This node's private key (PEM).
    pub key: PathBuf,
}

impl TlsFiles {
    /// The same files, relative paths taken from `base`.
    fn resolved(self, base: &Path) -> TlsFiles {
        let resolve = |path: PathBuf| {
            if path.is_relative() {
                base.join(path)
            } else {
                path
            }
        };
        TlsFiles {
            ca: resolve(self.ca),
            cert: resolve(self.cert),
            key: resolve(self.key),
        }
    }
}

/// Who may use the client port.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Every connection must sign in (`Authenticate`) before anything but
    /// signing in, and each operation is checked against the user's
    /// permissions. A node's own connections (node certificates) are exempt.
    #[serde(default)]
    pub required: bool,
    /// An Argon2id hash (PHC form) of the password of the built-in user
    /// `admin`, which every node knows without the catalog, so that a new
    /// cluster can create its first users.
    pub admin_password_hash: Option<String>,
}

/// What clients may cost the node (see `crate::net::connection`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Client connections open at once; one more is closed at once.
    pub client_connections_max: usize,
    /// Client connections open at once from one address.
    pub client_connections_per_address_max: usize,
    /// With `[auth] required`, a connection that has not signed in this
    /// long after it opened is closed (a certificate signs in at once).
    pub sign_in_timeout_ms: u64,
    /// A connection that sent no request for this long, with nothing in
    /// flight, is closed (clients reconnect when they need to).
    pub client_idle_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            client_connections_max: 10_000,
            client_connections_per_address_max: 1_000,
            sign_in_timeout_ms: 10_000,
            client_idle_timeout_ms: 600_000,
        }
    }
}

/// Every limit leaves room for at least one client; a sign-in gets at
/// least a second, and idleness is longer than any long poll.
fn check_limits(limits: &Limits) -> Result<(), ConfigError> {
    let invalid = |field: &'static str, reason: &str| ConfigError::Invalid {
        field,
        reason: reason.to_owned(),
    };
    if limits.client_connections_max == 0 {
        return Err(invalid(
            "limits.client_connections_max",
            "must be at least 1",
        ));
    }
    if limits.client_connections_per_address_max == 0 {
        return Err(invalid(
            "limits.client_connections_per_address_max",
            "must be at least 1",
        ));
    }
    if limits.sign_in_timeout_ms < 1_000 {
        return Err(invalid(
            "limits.sign_in_timeout_ms",
            "must be at least 1000",
        ));
    }
    // Longer than the longest long poll, which is silence while it waits.
    let idle_min_ms = u64::from(strand_wire::ops::FETCH_WAIT_MS_MAX) + 1_000;
    if limits.client_idle_timeout_ms < idle_min_ms {
        return Err(invalid(
            "limits.client_idle_timeout_ms",
            &format!("must be at least {idle_min_ms} (longer than the longest long poll)"),
        ));
    }
    Ok(())
}

/// Defaults for topics created without explicit policies.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TopicDefaults {
    /// `persisted` (default) or `replicated`.
    pub durability: Option<String>,
    /// `majority_durable` (default), `local_durable` or a count.
    pub confirm: Option<String>,
}

/// Shards a node may run at most ([`NodeConfig::shards`]).
pub const SHARDS_MAX: usize = 256;

/// Default [`NodeConfig::retention_check_ms`]: 30 s. Each check visits
/// every partition of the shard once, so it is cheap at any interval a
/// person would pick; the bounds keep a typo from making it a busy loop or
/// a day.
pub const RETENTION_CHECK_MS_DEFAULT: u64 = 30_000;
/// Shortest [`NodeConfig::retention_check_ms`].
pub const RETENTION_CHECK_MS_MIN: u64 = 100;
/// Longest [`NodeConfig::retention_check_ms`]: one hour.
pub const RETENTION_CHECK_MS_MAX: u64 = 3_600_000;

/// Largest [`NodeConfig::cursor_consumers_per_partition_max`]: a million
/// names of up to 255 bytes is about 265 MB of cursor map per partition
/// replica, held in memory and rewritten by every snapshot.
pub const CURSOR_CONSUMERS_PER_PARTITION_MAX_LIMIT: u64 = 1_000_000;

/// Default [`NodeConfig::cursor_retention_ms`]: 7 days, as Kafka's
/// `offsets.retention.minutes`.
pub const CURSOR_RETENTION_MS_DEFAULT: u64 = 7 * 24 * 3_600_000;

/// Default [`NodeConfig::metadata_snapshot_ops`].
pub const METADATA_SNAPSHOT_OPS_DEFAULT: u64 = 10_000;

/// The file's shape.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    node: u32,
    cluster: u64,
    data_dir: PathBuf,
    peers: Vec<PeerConfig>,
    metrics_address: Option<String>,
    tick_ms: Option<u64>,
    shards: Option<usize>,
    retention_check_ms: Option<u64>,
    disk_reserve_bytes: Option<u64>,
    cursor_consumers_per_partition_max: Option<u64>,
    cursor_retention_ms: Option<u64>,
    metadata_snapshot_ops: Option<u64>,
    #[serde(default)]
    topic_defaults: TopicDefaults,
    tls: Option<TlsFiles>,
    #[serde(default)]
    insecure: bool,
    #[serde(default = "direct_io_by_default")]
    direct_io: bool,
    #[serde(default)]
    auth: AuthConfig,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    kafka: KafkaConfig,
}

/// `direct_io` unless the file says: on (see [`NodeConfig::direct_io`]).
fn direct_io_by_default() -> bool {
    true
}

/// A validated node configuration.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This node's id.
    pub node: u32,
    /// The cluster id every frame carries (clients must name the same one;
    /// `0`, the SDK's default, is fine for a single local cluster).
    pub cluster: u64,
    /// Where this node keeps its data.
    pub data_dir: PathBuf,
    /// Every node, this one included, sorted by id (the metadata plane's
    /// replica order).
    pub peers: Vec<PeerConfig>,
    /// Prometheus metrics endpoint, if any.
    pub metrics_address: Option<SocketAddr>,
    /// Milliseconds per consensus tick.
    pub tick_ms: u64,
    /// Shard threads hosting the groups.
    pub shards: usize,
    /// How often each shard applies its partitions' age limits (size
    /// limits are applied as segments fill). Records past a topic's
    /// `retention_ms` are gone within this much more.
    pub retention_check_ms: u64,
    /// Free space the node keeps on its data disk: below it, produces are
    /// refused with `DiskFull` (`None`: 5% of the file system, at most 1
    /// GiB; see [`crate::node::disk`]).
    pub disk_reserve_bytes: Option<u64>,
    /// TLS on the client port and mutual TLS on the replica bus (`None`:
    /// plaintext, allowed on loopback or with [`NodeConfig::insecure`]).
    pub tls: Option<TlsFiles>,
    /// Plaintext listeners off loopback were asked for explicitly.
    pub insecure: bool,
    /// The WAL appends past the page cache (`O_DIRECT`) where the file
    /// system allows (the default): the copy into the cache, its writeback
    /// and its reclaim cost a busy node most of its CPU once the cache fills
    /// the machine's memory, and 1,000 partitions appended faster and
    /// steadier without it (`docs/bench-history.md`). The price: records written
    /// recently are read back from the disk.
    pub direct_io: bool,
    /// Signing in and rights.
    pub auth: AuthConfig,
    /// What clients may cost the node.
    pub limits: Limits,
    /// Durability for topics that do not say.
    pub default_durability: Durability,
    /// Confirm policy for topics that do not say.
    pub default_confirm: ConfirmPolicy,
    /// Most distinct consumer names a partition keeps cursors for (default
    /// [`strand_consensus::CURSOR_CONSUMERS_MAX_DEFAULT`], 10,000): a store
    /// that would add one more is refused `LimitExceeded` until cursors are
    /// deleted. Applied by each partition's primary, so every node should
    /// say the same. A node setting rather than a topic's, as Kafka's
    /// offsets settings are the broker's: it guards each node's memory and
    /// snapshot work, which no topic owner should be able to raise.
    pub cursor_consumers_per_partition_max: u64,
    /// A cursor no consumer stored for this long is deleted by its
    /// partition's primary, as Kafka's `offsets.retention.minutes` does
    /// (default 7 days; `None`, from 0 in the file: never). A consumer
    /// group's cursors wait until the group has no members. Idle time is
    /// counted by the primary that saw the stores: a failover can delay an
    /// expiry by up to this much, never hasten it.
    pub cursor_retention_ms: Option<u64>,
    /// How Kafka clients are served (the listener runs where this node's
    /// `peers` entry has a `kafka_address`).
    pub kafka: KafkaConfig,
    /// Metadata ops committed between two snapshots of the catalog (default
    /// [`METADATA_SNAPSHOT_OPS_DEFAULT`]): each snapshot lets the metadata
    /// log below the one before it go, so the log and the replay at open
    /// stay bounded however long the cluster lives. Checked on the storage
    /// check's period (`retention_check_ms`).
    pub metadata_snapshot_ops: u64,
}

/// Overrides from the environment and the command line.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--node` / `STRAND_NODE`.
    pub node: Option<u32>,
    /// `--data` / `STRAND_DATA_DIR`.
    pub data_dir: Option<PathBuf>,
    /// `--metrics` / `STRAND_METRICS_ADDRESS`.
    pub metrics_address: Option<String>,
}

impl Overrides {
    /// Reads `STRAND_NODE`, `STRAND_DATA_DIR`, `STRAND_METRICS_ADDRESS`, then
    /// lets `cli` win over them.
    pub fn from_env_then(cli: Overrides) -> Result<Overrides, ConfigError> {
        let node = match std::env::var("STRAND_NODE") {
            Ok(value) => Some(value.parse().map_err(|_| ConfigError::Invalid {
                field: "STRAND_NODE",
                reason: format!("{value:?} is not a node id"),
            })?),
            Err(_) => None,
        };
        Ok(Overrides {
            node: cli.node.or(node),
            data_dir: cli
                .data_dir
                .or_else(|| std::env::var_os("STRAND_DATA_DIR").map(PathBuf::from)),
            metrics_address: cli
                .metrics_address
                .or_else(|| std::env::var("STRAND_METRICS_ADDRESS").ok()),
        })
    }
}

impl NodeConfig {
    /// Loads and validates `path`, applying `overrides`.
    pub fn load(path: &Path, overrides: Overrides) -> Result<NodeConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        NodeConfig::parse(path, &text, overrides)
    }

    /// Parses and validates configuration text.
    pub fn parse(path: &Path, text: &str, overrides: Overrides) -> Result<NodeConfig, ConfigError> {
        let file: FileConfig = toml::from_str(text).map_err(|error| ConfigError::Parse {
            path: path.to_path_buf(),
            message: error.to_string(),
        })?;
        let node = overrides.node.unwrap_or(file.node);
        let data_dir = overrides.data_dir.unwrap_or(file.data_dir);
        let metrics_address = overrides.metrics_address.or(file.metrics_address);
        let mut peers = file.peers;
        peers.sort_by_key(|peer| peer.id);
        validate_peers(&peers, node)?;
        let metrics_address = parse_metrics_address(metrics_address)?;
        let tick_ms = checked_tick_ms(file.tick_ms)?;
        let shards = checked_shards(file.shards)?;
        let tls = file
            .tls
            .map(|tls| tls.resolved(path.parent().unwrap_or(Path::new("."))));
        if (tls.is_none() || !file.auth.required) && !file.insecure {
            refuse_open_off_loopback(&peers, node)?;
        }
        check_auth(&file.auth, tls.is_some())?;
        let retention_check_ms = checked_retention_check_ms(file.retention_check_ms)?;
        check_limits(&file.limits)?;
        Ok(NodeConfig {
            node,
            cluster: file.cluster,
            data_dir,
            peers,
            metrics_address,
            tick_ms,
            shards,
            retention_check_ms,
            disk_reserve_bytes: file.disk_reserve_bytes,
            tls,
            insecure: file.insecure,
            direct_io: file.direct_io,
            auth: file.auth,
            limits: file.limits,
            default_durability: parse_durability(file.topic_defaults.durability.as_deref())?,
            default_confirm: parse_confirm(file.topic_defaults.confirm.as_deref())?,
            cursor_consumers_per_partition_max: cursor_consumers_max(
                file.cursor_consumers_per_partition_max,
            )?,
            cursor_retention_ms: match file.cursor_retention_ms {
                None => Some(CURSOR_RETENTION_MS_DEFAULT),
                Some(0) => None,
                Some(retention_ms) => Some(retention_ms),
            },
            metadata_snapshot_ops: checked_metadata_snapshot_ops(file.metadata_snapshot_ops)?,
            kafka: checked_kafka(file.kafka)?,
        })
    }
    /// This node's own entry.
    pub fn me(&self) -> &PeerConfig {
        self.peers
            .iter()
            .find(|peer| peer.id == self.node)
            .expect("validated: the node is a peer")
    }

    /// A peer by id.
    pub fn peer(&self, id: u32) -> Option<&PeerConfig> {
        self.peers.iter().find(|peer| peer.id == id)
    }
}

/// `metrics_address`, if given, as a socket address.
fn parse_metrics_address(address: Option<String>) -> Result<Option<SocketAddr>, ConfigError> {
    address
        .map(|address| {
            address.parse().map_err(|_| ConfigError::Invalid {
                field: "metrics_address",
                reason: format!("{address:?} is not host:port"),
            })
        })
        .transpose()
}

/// `tick_ms`, checked (default: 10).
fn checked_tick_ms(value: Option<u64>) -> Result<u64, ConfigError> {
    let tick_ms = value.unwrap_or(10);
    if !(1..=1000).contains(&tick_ms) {
        return Err(ConfigError::Invalid {
            field: "tick_ms",
            reason: "must be 1..=1000".into(),
        });
    }
    Ok(tick_ms)
}

/// `shards`, checked (default: one per core).
fn checked_shards(value: Option<usize>) -> Result<usize, ConfigError> {
    let shards = value.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    if !(1..=SHARDS_MAX).contains(&shards) {
        return Err(ConfigError::Invalid {
            field: "shards",
            reason: format!("must be 1..={}", SHARDS_MAX),
        });
    }
    Ok(shards)
}

/// `[auth]`, checked: required sign-in needs TLS (`with_tls`), and the
/// admin's hash must be one the node accepts.
fn check_auth(auth: &AuthConfig, with_tls: bool) -> Result<(), ConfigError> {
    if auth.required && !with_tls {
        return Err(ConfigError::Invalid {
            field: "auth.required",
            reason: "needs [tls]: on a plaintext port nothing tells a node's own client \
                     from a user"
                .into(),
        });
    }
    if let Some(hash) = &auth.admin_password_hash
        && let Err(refusal) = crate::security::auth::hash_policy::check(hash)
    {
        // Checked at sign-in too; refused here so that the operator
        // learns it at start, not when admin cannot sign in.
        return Err(ConfigError::Invalid {
            field: "auth.admin_password_hash",
            reason: format!(
                "{refusal}: an Argon2id hash in PHC form within the node's fixed parameters \
                 (as the strand SDK makes it) is needed"
            ),
        });
    }
    Ok(())
}

/// `retention_check_ms`, checked (default [`RETENTION_CHECK_MS_DEFAULT`]).
fn checked_retention_check_ms(value: Option<u64>) -> Result<u64, ConfigError> {
    let retention_check_ms = value.unwrap_or(RETENTION_CHECK_MS_DEFAULT);
    if !(RETENTION_CHECK_MS_MIN..=RETENTION_CHECK_MS_MAX).contains(&retention_check_ms) {
        return Err(ConfigError::Invalid {
            field: "retention_check_ms",
            reason: format!("must be {RETENTION_CHECK_MS_MIN}..={RETENTION_CHECK_MS_MAX}"),
        });
    }
    Ok(retention_check_ms)
}

/// `metadata_snapshot_ops`, checked (default
/// [`METADATA_SNAPSHOT_OPS_DEFAULT`]).
fn checked_metadata_snapshot_ops(value: Option<u64>) -> Result<u64, ConfigError> {
    match value {
        None => Ok(METADATA_SNAPSHOT_OPS_DEFAULT),
        Some(0) => Err(ConfigError::Invalid {
            field: "metadata_snapshot_ops",
            reason: "must be at least 1".into(),
        }),
        Some(ops) => Ok(ops),
    }
}

/// `cursor_consumers_per_partition_max`, checked (default: 10,000).
fn cursor_consumers_max(value: Option<u64>) -> Result<u64, ConfigError> {
    let max = value.unwrap_or(strand_consensus::CURSOR_CONSUMERS_MAX_DEFAULT);
    if !(1..=CURSOR_CONSUMERS_PER_PARTITION_MAX_LIMIT).contains(&max) {
        return Err(ConfigError::Invalid {
            field: "cursor_consumers_per_partition_max",
            reason: format!("must be 1..={CURSOR_CONSUMERS_PER_PARTITION_MAX_LIMIT}"),
        });
    }
    Ok(max)
}

fn validate_peers(peers: &[PeerConfig], node: u32) -> Result<(), ConfigError> {
    if peers.is_empty() {
        return Err(ConfigError::Invalid {
            field: "peers",
            reason: "at least one node".into(),
        });
    }
    if peers.len() >= usize::from(strand_wire::REPLICAS_MAX) {
        return Err(ConfigError::Invalid {
            field: "peers",
            reason: "at most 15 nodes".into(),
        });
    }
    if peers.windows(2).any(|pair| pair[0].id == pair[1].id) {
        return Err(ConfigError::Invalid {
            field: "peers.id",
            reason: "ids must be unique".into(),
        });
    }
    if !peers.iter().any(|peer| peer.id == node) {
        return Err(ConfigError::Invalid {
            field: "node",
            reason: format!("node {node} is not in `peers`"),
        });
    }
    for peer in peers {
        let kafka = peer
            .kafka_address
            .iter()
            .map(|address| ("peers.kafka_address", address));
        let addresses = [
            ("peers.replica_address", &peer.replica_address),
            ("peers.client_address", &peer.client_address),
        ];
        for (field, address) in addresses.into_iter().chain(kafka) {
            if address.parse::<SocketAddr>().is_err() {
                return Err(ConfigError::Invalid {
                    field,
                    reason: format!("{address:?} of node {} is not host:port", peer.id),
                });
            }
        }
    }
    Ok(())
}

/// A node without TLS and required sign-in listens on loopback only, unless
/// the configuration says `insecure = true`: anyone who reaches a plaintext
/// port can pose as a peer or read every record, and anyone who reaches an
/// open client port can do anything.
fn refuse_open_off_loopback(peers: &[PeerConfig], node: u32) -> Result<(), ConfigError> {
    let me = peers
        .iter()
        .find(|peer| peer.id == node)
        .expect("validated: the node is a peer");
    let kafka = me
        .kafka_address
        .iter()
        .map(|address| ("peers.kafka_address", address));
    let addresses = [
        ("peers.replica_address", &me.replica_address),
        ("peers.client_address", &me.client_address),
    ];
    for (field, address) in addresses.into_iter().chain(kafka) {
        let loopback = address
            .parse::<SocketAddr>()
            .is_ok_and(|address| address.ip().is_loopback());
        if !loopback {
            return Err(ConfigError::Invalid {
                field,
                reason: format!(
                    "node {node} would listen on {address} without TLS and required sign-in: \
                     configure [tls] and [auth] required = true, or set `insecure = true` to \
                     serve off loopback anyway"
                ),
            });
        }
    }
    Ok(())
}

/// `[kafka]`, checked: its stream must be a valid stream name without a
/// dot (a dot would make its topics' Kafka names split elsewhere).
fn checked_kafka(kafka: KafkaConfig) -> Result<KafkaConfig, ConfigError> {
    let valid = strand_wire::codec::validate_name("stream", &kafka.stream).is_ok();
    if !valid || kafka.stream.contains('.') {
        return Err(ConfigError::Invalid {
            field: "kafka.stream",
            reason: format!("{:?} is not a stream name without a dot", kafka.stream),
        });
    }
    Ok(kafka)
}

/// Parses `persisted` / `replicated`.
pub fn parse_durability(text: Option<&str>) -> Result<Durability, ConfigError> {
    match text {
        None | Some("persisted") => Ok(Durability::Persisted),
        Some("replicated") => Ok(Durability::Replicated),
        Some(other) => Err(ConfigError::Invalid {
            field: "durability",
            reason: format!("{other:?}: expected persisted or replicated"),
        }),
    }
}

/// Parses `majority_durable` / `local_durable` / a count.
pub fn parse_confirm(text: Option<&str>) -> Result<ConfirmPolicy, ConfigError> {
    match text {
        None | Some("majority_durable") => Ok(ConfirmPolicy::MajorityDurable),
        Some("local_durable") => Ok(ConfirmPolicy::LocalDurable),
        Some(other) => match other.parse::<u8>() {
            Ok(count) if count >= 1 => Ok(ConfirmPolicy::Count(count)),
            _ => Err(ConfigError::Invalid {
                field: "confirm",
                reason: format!("{other:?}: expected majority_durable, local_durable or a count"),
            }),
        },
    }
}

/// Writes a configuration file for node `node` of a local cluster: the
/// file's own structs serialized, so any path or string is quoted as TOML
/// wants (a path that is not UTF-8 cannot be written and is an error).
pub fn local_cluster_toml(
    node: u32,
    cluster: u64,
    data_dir: &Path,
    peers: &[PeerConfig],
    metrics: Option<&str>,
    tls: Option<&TlsFiles>,
    admin_password_hash: Option<&str>,
) -> Result<String, ConfigError> {
    /// The keys of [`FileConfig`] a local cluster sets, tables last.
    #[derive(Serialize)]
    struct LocalFile<'a> {
        node: u32,
        cluster: u64,
        data_dir: &'a Path,
        #[serde(skip_serializing_if = "Option::is_none")]
        metrics_address: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        tls: Option<&'a TlsFiles>,
        #[serde(skip_serializing_if = "Option::is_none")]
        auth: Option<AuthConfig>,
        peers: &'a [PeerConfig],
    }
    assert!(
        peers.iter().any(|peer| peer.id == node),
        "node {node} is not among its peers"
    );
    let file = LocalFile {
        node,
        cluster,
        data_dir,
        metrics_address: metrics,
        tls,
        auth: admin_password_hash.map(|hash| AuthConfig {
            required: true,
            admin_password_hash: Some(hash.to_owned()),
        }),
        peers,
    };
    toml::to_string(&file).map_err(|error| ConfigError::Invalid {
        field: "local cluster file",
        reason: error.to_string(),
    })
}

/// Node 1's configuration in a cluster of nodes `1..=nodes` on loopback,
/// for unit tests that need a [`NodeConfig`] but no files or sockets.
#[cfg(test)]
pub(crate) fn loopback_test_config(nodes: u32) -> NodeConfig {
    let mut text = String::from("node = 1\ncluster = 0\ndata_dir = \"/tmp/strand-unused\"\n");
    for id in 1..=nodes {
        text.push_str(&format!(
            "[[peers]]\nid = {id}\nreplica_address = \"127.0.0.1:{}\"\nclient_address = \"127.0.0.1:{}\"\n",
            7100 + id,
            7200 + id
        ));
    }
    NodeConfig::parse(Path::new("node.toml"), &text, Overrides::default())
        .expect("a valid configuration")
}

#[cfg(test)]
mod tests;
