//! # strand-client: the Strand Rust SDK
//!
//! Talks to a Strand cluster over its client port: routing (which node is a
//! group's primary), redirects, idempotent retries, a batching producer, a
//! long-polling consumer with stored cursors, and the operator calls.
//!
//! ```no_run
//! # async fn example() -> Result<(), strand_client::ClientError> {
//! use strand_client::{Client, ClientConfig, TopicSpec};
//! let client = Client::connect(ClientConfig::new(["127.0.0.1:7000"])).await?;
//! client.create_stream("shop").await?;
//! client.create_topic(TopicSpec::new("shop", "orders")).await?;
//! let producer = client.producer("shop", "orders", Default::default()).await?;
//! let offset = producer.send(0, "order-1", "42 apples").await?.await?;
//! # let _ = offset; Ok(()) }
//! ```
//!
//! Modules, in reading order:
//!
//! | module | owns |
//! |---|---|
//! | [`error`] | `ClientError`: every failure, each saying what to do |
//! | [`config`] | client, producer and consumer settings; `TopicSpec`, `TopicChange` |
//! | [`session`] | **pure**: one group's request numbering, window and retries |
//! | [`query`] | **pure**: retries of non-replicated requests (fetch, cursors, status) |
//! | [`routing`] | **pure**: node addresses, group primaries, redirects |
//! | [`health`] | **pure**: nodes that did not answer, latencies, attempt timeouts |
//! | [`backoff`] | **pure**: bounded exponential backoff, the seeded generator |
//! | [`partitioner`] | **pure**: a keyed record's partition (Kafka's murmur2), batches of unkeyed ones spread |
//! | `frames` | requests as frames, replies as values (the only wire-header code) |
//! | `connection`, `connections` | one TCP connection per node; reconnect pacing |
//! | `driver` | the event loop: feeds the pure cores, carries out their actions |
//! | [`Client`] (`client`, `admin`) | the API: admin calls, produce, fetch, cursors |
//! | [`users`] | users, permissions and access tokens: Argon2id hashing here, tokens made and shown once |
//! | `reassign` | moving a partition: reassign, drop a retired copy; [`PartitionTarget`] |
//! | [`Producer`], [`Consumer`] | batching producer; partition consumer |
//! | [`ConsumerGroupMember`] (`consumer_group`) | consumer groups: join, heartbeat, leave, describe; a member reading what its group gives it |
//! | `records` | records out (batches) and in (zero-copy from fetch replies) |
//! | [`cli`] | the `strand` command line as a library (the binary is a thin wrapper) |
//!
//! Invariants that matter most (enforced in [`session`], property-tested):
//! - A `(client id, request number)` pair, once sent, always carries the same
//!   batch; only never-sent requests are renumbered. So a retry after a
//!   timeout, redirect or failover is answered from the group's client table,
//!   never appended twice.
//! - Per group, request numbers go out contiguously from 1 and in submission
//!   order (after any resend too); a number the group will never take makes
//!   the later requests move to a fresh client id, so no gap ever blocks them.
//! - Non-replicated requests use a separate client id, so their replies are
//!   never confused with replicated ones.

pub mod backoff;
pub mod cli;
pub mod config;
pub mod error;
pub mod health;
pub mod partitioner;
pub mod query;
pub mod routing;
pub mod safety;
pub mod session;
pub mod tls;
pub mod users;

mod admin;
mod client;
mod connection;
mod connections;
mod consumer;
mod consumer_group;
mod driver;
mod frames;
mod producer;
mod reassign;
mod records;

pub use admin::{AttentionReport, ClusterStatus, NodeAnswer};
pub use client::{Client, FETCH_WAIT_MS_MAX, PARTITIONS_PER_TOPIC_MAX};
pub use config::{
    ClientConfig, ConsumerConfig, Credentials, ProducerConfig, StartFrom, TopicChange, TopicSpec,
};
pub use consumer::Consumer;
pub use consumer_group::{
    ConsumerGroupEvent, ConsumerGroupMember, ConsumerGroupMemberConfig, ConsumerGroupRecords,
};
pub use error::ClientError;
pub use frames::{ConnectionId, Reply, ReplyBody};
pub use producer::{Delivery, DeliveryReport, Producer};
pub use reassign::PartitionTarget;
pub use records::{ConsumedRecord, FetchedRecords, NewRecord, ProduceAck};

/// The wire types that appear in this crate's API.
pub use strand_wire::ops::{
    AcceptLossReply, AttentionEntry, AttentionReason, AttentionReply, AttentionStart,
    ClusterStatusReply, ConsumerGroupAssignment, ConsumerGroupInfo, DescribeConsumerGroupsReply,
    GroupStatus, MemberInfo, MetadataReply, NodeInfo, PartitionInfo, Reassigned, ReplicaStatus,
    TopicInfo,
};
pub use strand_wire::{ConfirmPolicy, Durability, Operation};

/// The range of [`TopicSpec::segment_bytes`] (64 KiB to 1 GiB; the server
/// refuses others).
pub use strand_wire::ops::{SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN};
