//! The network room: the replica bus between nodes, the client port, and
//! what bounds them (per-peer and per-connection queues, connection limits,
//! TLS, the reply frames the node builds itself).
//!
//! | module | owns |
//! |---|---|
//! | [`peer_queue`] | each peer's outbound bus queue, bounded in entries and bytes, counted for admission |
//! | [`outbox`] | per shard: its groups' frames to each peer, one batch per peer per turn |
//! | [`bus`] | the replica bus: one connection per node pair |
//! | [`client_port`] | client connections: routing each request by its operation's row of `strand_wire::operation_table` |
//! | [`local_answers`] | what a node answers from its own catalog and status (every `Route::Local` operation) |
//! | [`connection`] | what one connection may cost (reply bytes, back-pressure) and how many there may be |
//! | [`tls`] | TLS on the client port, mutual TLS on the bus (a peer is the node its certificate names), a cluster's certificates |
//! | [`replies`] | reply frames the node builds itself; redirects with addresses |

pub mod bus;
pub mod client_port;
pub mod connection;
pub mod local_answers;
pub mod outbox;
pub mod peer_queue;
pub mod replies;
pub mod tls;
