//! The node's sign-in defenses, one set per node: the bounded pool password
//! checks run on and the failed sign-in limits, held in the node's shared
//! state for every connection's sign-in.

use super::check_pool::{CheckPool, QUEUE_MAX, checks_default};
use super::failure_limits::FailureLimits;

/// The node's sign-in state: the check pool and the failure limits.
#[derive(Debug)]
pub struct SignIns {
    /// Where password checks run.
    pub pool: CheckPool,
    /// Failed sign-ins per address and per user name.
    pub limits: FailureLimits,
}

impl Default for SignIns {
    fn default() -> SignIns {
        SignIns {
            pool: CheckPool::new(checks_default(), QUEUE_MAX),
            limits: FailureLimits::default(),
        }
    }
}
