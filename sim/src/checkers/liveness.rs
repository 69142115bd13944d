//! Checker 5: once faults stop (every replica up, the network whole), every
//! pending request commits within [`LIVENESS_TICKS_MAX`] ticks.
//!
//! The bound covers, at the default timeouts: a primary timeout (30 ticks
//! plus jitter), view changes backed off up to 8 × 40 ticks each, a restart's
//! probes, repair of a lagging log, and clients' retry period (60 ticks).
//! The simulator runs the quiet phase tick by tick and fails the seed when a
//! request is still pending at the bound. A stall that raises `attention`
//! gets the operator's `accept-loss` after [`OPERATOR_PATIENCE_TICKS`].

/// Ticks after faults stop by which every pending request must be acked.
pub const LIVENESS_TICKS_MAX: u64 = 6_000;

/// Ticks of a stall with `attention` raised before the simulated operator
/// runs `accept-loss` (at most once per this many ticks). A stall the design
/// requires (the replica that took over at the latest history start lost its
/// log before anyone else copied it: reference A's second failure) waits for
/// an operator; the run then goes on under every checker, so an accepted
/// loss that drops an acknowledged record still fails the seed.
pub const OPERATOR_PATIENCE_TICKS: u64 = 2_000;
