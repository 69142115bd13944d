//! # strand-server: the Strand node
//!
//! One process per node: the replica bus to its peers, the client port, the
//! metadata plane (group 0, a VSR group over every node) and one actor per
//! hosted partition, each driving a `consensus::Replica` over its partition
//! storage and the node's WAL writer, many actors to each of a few shard
//! threads. The state machines (the catalog, a
//! record log), the reassignment plan and the superblock mapping live in
//! `strand-host`.
//!
//! Rooms, in reading order (each room's own map lists its modules):
//!
//! | module | owns |
//! |---|---|
//! | [`refused`] | why a hand-off to a bounded queue failed (full, gone) |
//! | [`shared`] | the group registry, published status, reply routing, bus queues: handles only, below every room that uses them |
//! | [`runtime`] | shard threads hosting many groups each; containment of a group's failure; vouching; leadership balance |
//! | [`group`] | a group's actor around its `GroupHost`: client API, outputs out, status |
//! | [`net`] | the replica bus, the per-shard outbox, the client port, connection bounds, TLS, reply frames |
//! | [`security`] | signing in and rights, the audit log, quotas |
//! | [`metadata`] | the metadata plane's node duties: partition-move checks, the consumer-group coordinator |
//! | [`metrics`] | metric names, the Prometheus endpoint |
//! | [`node`] | a node's lifetime: start, host partitions, shut down; its configuration, disk, limits, boot count, the dev cluster |
//!
//! Invariants that matter most:
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
pub mod metadata;
pub mod metrics;
pub mod net;
pub mod node;
pub mod refused;
pub mod runtime;
pub mod security;
pub mod shared;
