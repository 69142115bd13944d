//! The network room: the replica bus between nodes, the client port, and
//! what bounds them (per-peer and per-connection queues, connection limits,
//! TLS, the reply frames the node builds itself).
//!
//! | module | owns |
//! |---|---|
//! | [`peer_queue`] | each peer's outbound bus queue, bounded in entries and bytes, counted for admission |
//! | [`outbox`] | per shard: its groups' frames to each peer, one batch per peer per turn |
//! | [`bus`] | the replica bus: one connection per node pair, each frame checked against its group |
//! | [`ping`] | the node's ping: its liveness signal and the groups it does not vouch for |
//! | [`liveness`] | node-level liveness: pings out, silent peers suspected, every shard told |
//! | [`frame_writer`] | queued frames written with gathered vectored writes |
//! | [`client_port`] | client connections: accepted within bounds, read, checked, answered |
//! | [`routing`] | where each request goes by its operation's route: answered here, to a group's replica, to the metadata plane |
//! | [`call_table`] | a node's own calls in flight and their sessions (held by the shared state, which routes answers into it) |
//! | [`node_calls`] | requests a node makes itself (reports to the metadata plane, a replica's status), to its own groups or over the bus, and their answers |
//! | [`local_answers`] | what a node answers from its own catalog and status (every `Route::Local` operation) |
//! | [`connection`] | what one connection may cost (reply bytes, back-pressure) and how many there may be |
//! | [`tls`] | TLS on the client port, mutual TLS on the bus (a peer is the node its certificate names), a cluster's certificates |
//! | [`replies`] | reply frames the node builds itself; redirects with addresses |

pub mod bus;
pub mod call_table;
pub mod client_port;
pub mod connection;
pub mod frame_writer;
pub mod liveness;
pub mod local_answers;
pub mod node_calls;
pub mod outbox;
pub mod peer_queue;
pub mod ping;
pub mod replies;
pub mod routing;
pub mod tls;
