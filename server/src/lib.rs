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
//! Modules, in reading order:
//!
//! | module | owns |
//! |---|---|
//! | [`config`] | the TOML file, env and CLI overrides, field-named errors |
//! | [`shared`] | the group registry, published status, reply routing, bus queues |
//! | [`shard`] | shard threads: many groups each, inputs in order per group, ticks, the periodic storage check (age retention, cursor compaction) |
//! | [`contain`] | a panic in a group's code stops that group alone: dropped as by a crash, shown, reopened after a pause |
//! | [`vouch`] | which groups a node's liveness ping vouches for (not those failed there) |
//! | [`balance`] | per shard: which groups hand leadership back to their preferred primary, paced |
//! | [`group`] | a group's actor around its `GroupHost`: client API, outputs out, status |
//! | [`outbox`] | per shard: its groups' frames to each peer, one batch per peer per turn |
//! | [`replies`] | reply frames the node builds itself; redirects with addresses |
//! | [`tls`] | TLS on the client port, mutual TLS on the bus (a peer is the node its certificate names), a cluster's certificates |
//! | [`bus`] | the replica bus: one connection per node pair |
//! | [`client_port`] | client connections: routing each request by its operation's row of `strand_wire::operation_table` |
//! | [`local_answers`] | what a node answers from its own catalog and status (every `Route::Local` operation): metadata, status, attention, consumer groups, users, quotas |
//! | [`connection`] | what one connection may cost (reply bytes, back-pressure) and how many there may be |
//! | [`quota`] | per-user produce, fetch and request rates, enforced by delaying |
//! | [`auth`] | signing in and the right each operation needs; sign-in hardened against hostile clients (fixed Argon2 parameters, a bounded check pool, failure limits, client id owners) |
//! | [`audit`] | the audit log: every admin action with identity, source, time, target and outcome |
//! | [`guard`] | the node's safety checks of partition moves (reassign, drop-replica) before it proposes them |
//! | [`coordinator`] | consumer groups: session deadlines on the metadata primary, expired members removed |
//! | [`metrics`] | metric names, the Prometheus endpoint |
//! | [`node`] | a node's lifetime: start, host partitions, shut down |
//! | [`disk`] | the data disk's room: the reserve, produces refused while it is used up |
//! | [`limits`] | the open-files limit: raised at start, partitions it allows |
//! | [`boot`] | the boot count, raised at start: which clean marks still hold |
//! | [`dev_cluster`] | `strand-server dev-cluster` |
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

pub mod audit;
pub mod auth;
pub mod balance;
pub mod boot;
pub mod bus;
pub mod client_port;
pub mod config;
pub mod connection;
pub mod contain;
pub mod coordinator;
pub mod dev_cluster;
pub mod disk;
pub mod group;
pub mod guard;
pub mod limits;
pub mod local_answers;
pub mod metrics;
pub mod node;
pub mod outbox;
pub mod quota;
pub mod replies;
pub mod shard;
pub mod shared;
pub mod tls;
pub mod vouch;
