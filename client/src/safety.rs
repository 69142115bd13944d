//! What the SDK knows of a node's safety check of a partition move: the
//! node asks the nodes for the partition's status before it proposes a
//! `ReassignPartition` or `DropReplica` (the rule itself is
//! `strand_host::move_safety`), so such a request's answer takes longer.

use strand_wire::Operation;

pub use strand_wire::ops::NODE_CHECK_MS_MAX;

/// How much longer than usual an attempt of `operation` waits for its
/// answer: the node checks a reassignment or drop before it proposes it.
pub fn node_check_wait_ms(operation: Operation) -> u64 {
    match operation {
        Operation::ReassignPartition | Operation::DropReplica => NODE_CHECK_MS_MAX,
        _ => 0,
    }
}
