//! What the SDK knows of a node's safety check of a partition move: the
//! node asks the cluster for the primary's status before it proposes a
//! `ReassignPartition` or `DropReplica` (the rule itself is
//! `strand_host::move_safety`), so such a request's answer takes longer.

use strand_wire::Operation;
use strand_wire::ops::GroupStatus;

use crate::Client;

/// The longest a node's safety check of a move may take (it asks the
/// cluster for the primary's status): an attempt of a checked operation
/// waits this much longer before the SDK suspects the node.
pub const NODE_CHECK_MS_MAX: u64 = 3_000;

/// How much longer than usual an attempt of `operation` waits for its
/// answer: the node checks a reassignment or drop before it proposes it.
pub fn node_check_wait_ms(operation: Operation) -> u64 {
    match operation {
        Operation::ReassignPartition | Operation::DropReplica => NODE_CHECK_MS_MAX,
        _ => 0,
    }
}

/// The status of `group` as its serving primary reports it (the one that
/// knows which copies are caught up); `None` when no node answers for one.
pub async fn primary_status(client: &Client, group: u64) -> Option<GroupStatus> {
    let status = client.cluster_status().await.ok()?;
    status
        .groups()
        .map(|(_, status)| status)
        .filter(|status| {
            status.group == group && status.status == "normal" && status.replica == status.primary
        })
        .max_by_key(|status| (status.epoch, status.view))
        .cloned()
}
