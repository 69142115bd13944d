//! The Kafka room: Kafka clients served on a listener of their own, their
//! requests translated by `strand_kafka` into the same operations the
//! client port takes, checked and routed through the same door.
//!
//! | module | owns |
//! |---|---|
//! | [`listener`] | connections within the node's bounds (and TLS), frames within a size bound, responses in request order |
//! | [`serve`] | one request: decoded, SASL or refused before sign-in, handed to its API |
//! | [`link`] | a connection's Strand operations: numbered, checked (rights, client ids, quotas), routed, their replies matched back |
//! | [`sasl`] | SASL PLAIN against Strand's users (a token works as a password) |
//! | [`metadata`] | brokers, topics and leaders from this node's catalog; Kafka names to groups |
//! | [`produce`] | Kafka batches to Strand produces, answered when the confirm rule holds |
//! | [`fetch`] | Strand fetches to Kafka batches, long polls across partitions |
//! | [`offsets`] | earliest, latest and by-time offsets |
//! | [`admin`] | CreateTopics, DeleteTopics, CreatePartitions, configs, DescribeCluster as metadata operations on the plane's primary (the controller Kafka clients see) |
//! | [`coordinator`] | the classic consumer group protocol's memberships, generations and rebalances, in memory on the metadata plane's primary |
//! | [`groups`] | FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and the groups' offsets as cursors |

pub mod admin;
pub mod coordinator;
pub mod fetch;
pub mod groups;
pub mod link;
pub mod listener;
pub mod metadata;
pub mod offsets;
pub mod produce;
pub mod sasl;
pub mod serve;
