//! The checkers, one property each, run continuously. Each returns a
//! `Violation` describing what broke; the simulator stops at the first.

mod acked;
mod cursor_logs;
mod cursors;
mod epoch_fence;
mod history;
mod liveness;
mod open_durable;
mod reads;
mod storage;
mod trust;
mod views;

pub use acked::AckedStays;
pub use cursor_logs::CursorLogsAgree;
pub use cursors::CursorsBounded;
pub use epoch_fence::{EpochFence, Speaker};
pub use history::{CommittedOp, LinearHistory};
pub use liveness::{LIVENESS_TICKS_MAX, OPERATOR_PATIENCE_TICKS, reassign_extra_ticks};
pub use open_durable::OpenDurable;
pub use reads::{ReadBatch, reads_committed};
pub use storage::StorageAgrees;
pub use trust::UntrustedSilent;
pub use views::ViewsMonotonic;

/// A broken property: which checker, and what it saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The checker's number and name, as in the design of the simulator.
    pub checker: &'static str,
    /// What happened.
    pub detail: String,
}

impl core::fmt::Display for Violation {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: {}", self.checker, self.detail)
    }
}
