//! What a caller can tune: the client, producers, consumers, and the spec of
//! a new topic. Every field has a default and a stated bound.

use strand_wire::{ConfirmPolicy, Durability, FRAME_SIZE_MAX_DEFAULT};

use crate::error::ClientError;
use crate::session::WINDOW_MAX;

/// How a [`crate::Client`] connects and retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// Client addresses (`host:port`) of some nodes; any one that answers is enough.
    pub bootstrap: Vec<String>,
    /// The cluster id; must equal the servers' (frames of other clusters are dropped).
    pub cluster: u64,
    /// The longest one attempt may go unanswered before the connection is
    /// suspected and the request resent at the next candidate (a fetch adds
    /// its `wait_ms`). Attempts usually wait less: the cluster's failover
    /// time (from its metadata), or a node's observed latency when it is
    /// slower (see [`crate::health`]).
    pub request_timeout_ms: u64,
    /// How long a call may take in all, retries included.
    pub deadline_ms: u64,
    /// Requests in flight per group, 1 to 32 (the group remembers the last
    /// 32 replies per client; more would make old retries unanswerable).
    pub in_flight_per_group_max: usize,
    /// First retry delay after `Unavailable` and friends.
    pub retry_backoff_min_ms: u64,
    /// Longest retry delay.
    pub retry_backoff_max_ms: u64,
    /// Largest reply frame accepted, header included.
    pub frame_size_max: u32,
    /// TLS to the nodes' client ports (`None`: plaintext, for a cluster
    /// configured `insecure`).
    pub tls: Option<crate::tls::ClientTls>,
    /// What each connection signs in with (a cluster with `[auth]
    /// required` refuses anything else first).
    pub credentials: Option<Credentials>,
}

/// How each connection signs in.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// A user's name and password.
    Password {
        /// The user's name.
        user: String,
        /// Its password.
        password: String,
    },
    /// One of a user's access tokens (`strand_<id>_<secret>`, from
    /// [`crate::Client::create_token`]), for programs that should not hold
    /// the password: it can be revoked alone.
    Token(String),
}

impl Credentials {
    /// A user and its password.
    pub fn password(user: impl Into<String>, password: impl Into<String>) -> Credentials {
        Credentials::Password {
            user: user.into(),
            password: password.into(),
        }
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::Password { user, .. } => f
                .debug_struct("Credentials::Password")
                .field("user", user)
                .finish_non_exhaustive(),
            Credentials::Token(token) => {
                let id = strand_wire::ops::parse_token(token).map_or("?", |(id, _)| id);
                f.debug_struct("Credentials::Token")
                    .field("id", &id)
                    .finish_non_exhaustive()
            }
        }
    }
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            bootstrap: Vec::new(),
            cluster: 0,
            request_timeout_ms: 5_000,
            deadline_ms: 30_000,
            in_flight_per_group_max: 8,
            retry_backoff_min_ms: 10,
            retry_backoff_max_ms: 500,
            frame_size_max: FRAME_SIZE_MAX_DEFAULT,
            tls: None,
            credentials: None,
        }
    }
}

impl ClientConfig {
    /// The default configuration for these bootstrap addresses.
    pub fn new(bootstrap: impl IntoIterator<Item = impl Into<String>>) -> ClientConfig {
        ClientConfig {
            bootstrap: bootstrap.into_iter().map(Into::into).collect(),
            ..ClientConfig::default()
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ClientError> {
        let invalid = |reason: &str| {
            Err(ClientError::InvalidArgument {
                reason: reason.to_owned(),
            })
        };
        if self.bootstrap.is_empty() {
            return invalid("bootstrap is empty: give at least one node's client address");
        }
        if self.request_timeout_ms == 0 || self.deadline_ms == 0 {
            return invalid("request_timeout_ms and deadline_ms must be above 0");
        }
        if !(1..=WINDOW_MAX).contains(&self.in_flight_per_group_max) {
            return invalid("in_flight_per_group_max must be in 1..=32");
        }
        if self.retry_backoff_min_ms == 0 || self.retry_backoff_max_ms < self.retry_backoff_min_ms {
            return invalid("retry backoff must satisfy 1 <= min_ms <= max_ms");
        }
        if (self.frame_size_max as usize) < strand_wire::HEADER_SIZE * 2 {
            return invalid("frame_size_max is too small to hold a reply");
        }
        Ok(())
    }
}

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    /// The stream it belongs to (must exist).
    pub stream: String,
    /// Its name.
    pub topic: String,
    /// Number of partitions, 1 to 4096 (each its own replicated group).
    pub partition_count: u32,
    /// Replicas per partition, 1 to 15.
    pub replica_count: u8,
    /// When a copy of a record counts (fsynced or queued); `None` takes the
    /// cluster's `topic_defaults` (`persisted` unless configured otherwise).
    pub durability: Option<Durability>,
    /// How many copies confirm a record; `None` takes the cluster's
    /// `topic_defaults` (`majority_durable` unless configured otherwise).
    pub confirm: Option<ConfirmPolicy>,
    /// Whether a cursor commit is fsynced before it is acknowledged; `None`
    /// follows the topic's durability.
    pub consumer_offset_durability: Option<Durability>,
    /// Per-partition size limit in bytes, oldest dropped first (0: none).
    pub retention_bytes: u64,
    /// Age limit in milliseconds (0: none).
    pub retention_ms: u64,
    /// Bytes per record-log segment file, [`crate::SEGMENT_BYTES_MIN`] (64 KiB)
    /// to [`crate::SEGMENT_BYTES_MAX`] (1 GiB); `None` takes the node's
    /// default (256 MiB).
    /// Retention drops whole segments, so a small retention wants small
    /// segments.
    pub segment_bytes: Option<u64>,
}

impl TopicSpec {
    /// A topic with one partition, three replicas, the cluster's default
    /// policies (safe unless an operator configured otherwise: `persisted`,
    /// majority confirm) and no retention limit.
    pub fn new(stream: impl Into<String>, topic: impl Into<String>) -> TopicSpec {
        TopicSpec {
            stream: stream.into(),
            topic: topic.into(),
            partition_count: 1,
            replica_count: 3,
            durability: None,
            confirm: None,
            consumer_offset_durability: None,
            retention_bytes: 0,
            retention_ms: 0,
            segment_bytes: None,
        }
    }
}

/// A change to an existing topic's policies ([`crate::Client::alter_topic`]).
/// A field left `None` stays as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicChange {
    /// The new per-partition size limit in bytes, oldest dropped first
    /// (`Some(0)`: no limit).
    pub retention_bytes: Option<u64>,
    /// The new age limit in milliseconds (`Some(0)`: no limit).
    pub retention_ms: Option<u64>,
    /// How many copies confirm a record from now on, in every partition
    /// (each partition changes through its own reassignment).
    pub confirm: Option<ConfirmPolicy>,
}

impl TopicChange {
    /// True when the change changes nothing.
    pub fn is_empty(&self) -> bool {
        self.retention_bytes.is_none() && self.retention_ms.is_none() && self.confirm.is_none()
    }

    /// True when it changes the retention limits (one request for the
    /// whole topic).
    pub fn changes_retention(&self) -> bool {
        self.retention_bytes.is_some() || self.retention_ms.is_some()
    }
}

/// How a [`crate::Producer`] batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerConfig {
    /// A batch is sent once it holds this many records.
    pub batch_records_max: u32,
    /// A batch is sent before it would grow past this many bytes (a single
    /// larger record still goes, alone).
    pub batch_bytes_max: usize,
    /// A batch is sent at the latest this long after its first record, while
    /// its partition's pipeline is not busy (see [`crate::Producer`]).
    pub linger_ms: u64,
    /// Batches in flight per partition (more wait, in order).
    pub in_flight_max: usize,
    /// Records buffered and unacknowledged in all; `send` waits beyond it.
    pub buffer_records_max: usize,
    /// Bytes of records (as encoded in a batch) buffered and unacknowledged
    /// in all; `send` waits beyond it. A record larger than the whole
    /// buffer counts as the whole buffer: it goes alone. Bounds the
    /// producer's memory whatever its records' sizes (a count alone let
    /// large records take gigabytes); 32 MiB by default, as a Kafka
    /// producer's `buffer.memory`.
    pub buffer_bytes_max: usize,
}

impl Default for ProducerConfig {
    fn default() -> ProducerConfig {
        ProducerConfig {
            batch_records_max: 1_000,
            batch_bytes_max: 256 * 1024,
            linger_ms: 5,
            in_flight_max: 8,
            buffer_records_max: 100_000,
            buffer_bytes_max: 32 * 1024 * 1024,
        }
    }
}

impl ProducerConfig {
    pub(crate) fn validate(&self) -> Result<(), ClientError> {
        let valid = self.batch_records_max >= 1
            && (1..=strand_wire::ops::PRODUCE_BATCH_BYTES_MAX).contains(&self.batch_bytes_max)
            && (1..=WINDOW_MAX).contains(&self.in_flight_max)
            && self.buffer_records_max >= 1
            && self.buffer_records_max <= tokio::sync::Semaphore::MAX_PERMITS
            && (1..=u32::MAX as usize).contains(&self.buffer_bytes_max);
        if valid {
            Ok(())
        } else {
            Err(ClientError::InvalidArgument {
                reason: "producer config: batch limits and buffer_records_max must be at least 1, \
                         batch_bytes_max at most 8 MiB less 272 bytes, buffer_bytes_max in 1..=4 GiB, in_flight_max in 1..=32"
                    .to_owned(),
            })
        }
    }
}

/// Where a [`crate::Consumer`] starts reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartFrom {
    /// The oldest retained record.
    Earliest,
    /// Only records produced from now on.
    Latest,
    /// This offset.
    Offset(u64),
    /// The cursor stored under the consumer's name, or the oldest retained
    /// record if it never stored one.
    StoredCursor,
}

/// How a [`crate::Consumer`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// The name its cursor is stored under (needed by `commit` and `StoredCursor`).
    pub name: Option<String>,
    /// Where to start.
    pub start_from: StartFrom,
    /// Bytes per fetch (at least one batch is returned when one is available).
    pub max_bytes: u32,
    /// How long a poll waits for new records before returning empty (up to 60 000).
    pub wait_ms: u32,
}

impl Default for ConsumerConfig {
    fn default() -> ConsumerConfig {
        ConsumerConfig {
            name: None,
            start_from: StartFrom::Earliest,
            max_bytes: 1024 * 1024,
            wait_ms: 1_000,
        }
    }
}
