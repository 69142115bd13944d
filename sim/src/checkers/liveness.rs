//! Checker 5: once faults stop (every replica up, the network whole), every
//! pending request commits within [`LIVENESS_TICKS_MAX`] ticks.
//!
//! The bound covers, at the default timeouts: a primary timeout (30 ticks
//! plus jitter), view changes backed off up to 8 × 40 ticks each, a restart's
//! probes, repair of a lagging log, and clients' retry period (60 ticks).
//! The simulator runs the quiet phase tick by tick and fails the seed when a
//! request is still pending at the bound. A stall that raises `attention`
//! gets the operator's `accept-loss` after [`OPERATOR_PATIENCE_TICKS`].
//!
//! A run that reassigns the group gets [`reassign_extra_ticks`] more: a
//! reassignment may still be in flight when faults stop.

/// Ticks after faults stop by which every pending request must be acked.
pub const LIVENESS_TICKS_MAX: u64 = 6_000;

/// Ticks of a stall with `attention` raised before the simulated operator
/// runs `accept-loss` (at most once per this many ticks). A stall the design
/// requires (the replica that took over at the latest history start lost its
/// log before anyone else copied it: reference A's second failure) waits for
/// an operator; the run then goes on under every checker, so an accepted
/// loss that drops an acknowledged record still fails the seed.
pub const OPERATOR_PATIENCE_TICKS: u64 = 2_000;

/// State transfer attempts the bound allows per run that reassigns the
/// group (an attempt is retried while no source holds a clean committed
/// prefix).
pub const TRANSFER_ATTEMPTS_ALLOWED: u64 = 25;

/// The extra ticks a run that reassigns the group may take, with the
/// catalog's lag bounded by `catalog_lag_max_ticks` and one state transfer
/// taking `transfer_ticks`. A reassignment in flight when faults stop must
/// still reach every replica (the assignment, then a newcomer's placement:
/// twice the catalog's lag), copy a committed prefix to each newcomer (the
/// transfer attempts above), and start its epoch by a view change that
/// hears both memberships. The weakest membership the window can hold,
/// `LocalDurable`, confirms nothing until every newcomer has caught up, so
/// the whole allowance may be spent before a single request commits.
pub fn reassign_extra_ticks(catalog_lag_max_ticks: u64, transfer_ticks: u64) -> u64 {
    2 * catalog_lag_max_ticks + TRANSFER_ATTEMPTS_ALLOWED * transfer_ticks
}
