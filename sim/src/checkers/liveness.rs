//! Checker 5: once faults stop (every replica up, the network whole), every
//! pending request commits within [`LIVENESS_TICKS_MAX`] ticks.
//!
//! The bound covers, at the default timeouts: a primary timeout (30 ticks
//! plus jitter), view changes backed off up to 8 × 40 ticks each, a restart's
//! probes, repair of a lagging log, and clients' retry period (60 ticks).
//! The simulator runs the quiet phase tick by tick and fails the seed when a
//! request is still pending at the bound.

/// Ticks after faults stop by which every pending request must be acked.
pub const LIVENESS_TICKS_MAX: u64 = 6_000;
