//! Why a hand-off to one of the node's bounded queues failed. Every queue
//! that carries work between tasks (a shard's inbox, a peer's bus queue, a
//! client connection's replies) refuses rather than waits; the caller then
//! drops what consensus retransmits or answers `Busy`.

/// Why a frame could not be handed to a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The queue is at its bound.
    Full,
    /// Nobody listens there (closed, unknown).
    Gone,
}
