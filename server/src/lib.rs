//! # strand-server: the Strand node
//!
//! One process per node: the replica bus to its peers, the client port, the
//! metadata plane (group 0, a VSR group over every node) and one actor per
//! hosted partition, each driving a `consensus::Replica` over its partition
//! storage and the node's WAL writer, many actors to each of a few shard
//! threads. The state machines (the catalog, a record log), the
//! reassignment plan and the superblock mapping live in `strand-host`.
//!
//! Rooms, in reading order, each with its modules (each room's own map says
//! more):
//!
//! | module | owns |
//! |---|---|
//! | [`refused`] | why a hand-off to a bounded queue failed (full, gone) |
//! | [`shared`] | the group registry, published status, the catalog as last committed, reply routing, bus queues: handles only |
//! | [`runtime`] | the shard threads hosting many groups each: `input`, `inbox`, `shards`, `shard`, `storage_retries`, `contain` (a group's panic stops that group alone), `vouch`, `balance` |
//! | [`group`] | a group's actor around its `GroupHost`: `spec`, `open`, `output`, `events`, `requests`, `reads`, `parked`, `cursors`, `storage`, `placement`, `status`, `publishing`, `attention`, `log_span` |
//! | [`net`] | the replica bus and the client port: `peer_queue`, `outbox`, `bus`, `ping`, `liveness`, `frame_writer`, `client_port`, `routing` (by each operation's row of `strand_wire::operation_table`), `local_answers`, `call_table` and `node_calls` (what a node asks the cluster itself, over the bus), `connection`, `tls`, `replies` |
//! | [`security`] | who calls and what it may do: `caller`, `request_checks`, `auth` (sign-in hardened against hostile clients), `audit`, `quota` |
//! | [`kafka`] | Kafka clients served: `listener` (bounds, TLS, frames, responses in order), `serve` (one request to its API), `link` (the Strand operations a Kafka connection makes, through the client port's checks and routing), `sasl`, `metadata`, `produce`, `fetch`, `offsets` |
//! | [`metadata`] | the metadata plane's node duties: `hosted`, `plane` (its replica's duties, outside the partition actor), `coordinator`, `session_sweep`, `epoch_reports`, `guard` (partition-move checks), `proposals` |
//! | [`metrics`] | metric names, the Prometheus endpoint |
//! | [`node`] | a node's lifetime (start, host partitions, shut down): `config`, `disk`, `disk_watch`, `limits`, `boot`, `dev_cluster` |
//!
//! Arrows run one way: [`shared`] holds handles and values only, and
//! depends on nothing that uses it (the handle types it holds live in low
//! modules: `runtime::input`, `runtime::inbox`, `net::peer_queue`,
//! `metadata::coordinator`, `node::disk`, ...); the group actor sits above
//! it, the shards above the actor, the network tasks beside the shards, and
//! `node` at the top starts them all. No two files import each other in a
//! circle.
//!
//! Invariants that matter most:
//! - The node is no client of its own cluster: what it asks (its reports to
//!   the metadata plane, a replica's status before a move) travels as node
//!   calls, to its own groups' inboxes or over the replica bus; the crate
//!   does not depend on the SDK.
//! - Consensus decides; the group's host executes its effects and reports
//!   completions, in order, per group, on the group's shard.
//! - Nothing blocks a group on the network: every queue is bounded and a
//!   full queue drops (peer frames, which are retransmitted) or refuses with
//!   `Busy` (client requests). Bytes are bounded too, by pushing back on the
//!   sockets: the client port holds a produce while its shard or the bus
//!   queues to its backups hold too much, and a bus reader holds its peer
//!   while the shard it feeds does.
//! - A clean-shutdown mark is written only for a replica whose log is trusted.

pub mod group;
pub mod kafka;
pub mod metadata;
pub mod metrics;
pub mod net;
pub mod node;
pub mod refused;
pub mod runtime;
pub mod security;
pub mod shared;
