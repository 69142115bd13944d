//! The node's own safety checks of partition moves, before it proposes them.
//!
//! A `ReassignPartition` that changes a partition's replica set, and a
//! `DropReplica`, are checked on the node that receives them against the
//! partition's primary's status (asked of every node by a node call,
//! [`crate::net::node_calls`]), by the rules of [`strand_host::move_safety`]: a set that would
//! leave `min(W, W')` or more replicas without every acknowledged record,
//! or a drop while a member catches up or no primary serves, is refused
//! with `Refused` and nothing is proposed. A request marked `force` skips
//! the check (and says so in the log). A `dry_run` is checked the same way
//! and then answered by the node itself with the plan its catalog gives
//! ([`preview`]): the command line's preview of a move. A reassignment onto the same
//! replicas (a confirm-policy change) has nothing to check here.

use std::time::Duration;

use bytes::Bytes;
use strand_wire::ops::{
    DropReplica, ErrorBody, GroupStatus, GroupStatusReply, GroupStatusRequest, ReassignPartition,
};
use strand_wire::{Body, Msg, Operation, RequestHeader, ResultCode};

use strand_consensus::replica::Status;

use crate::net::node_calls;
use crate::shared::Shared;

/// A request the node checks before proposing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// A new replica set (or policy) for a partition.
    Reassign(ReassignPartition),
    /// Forgetting a removed replica's retired copy (its data is deleted).
    Drop(DropReplica),
}

impl Check {
    /// The check `request` needs, if any: `None` for other operations, a
    /// forced request that is not a dry run, or a body that does not decode
    /// (the metadata plane refuses that one itself).
    pub fn of(request: &Msg<RequestHeader>) -> Option<Check> {
        let check = match request.header().operation() {
            Operation::ReassignPartition => {
                Check::Reassign(ReassignPartition::from_bytes(request.body()).ok()?)
            }
            Operation::DropReplica => Check::Drop(DropReplica::from_bytes(request.body()).ok()?),
            _ => return None,
        };
        if check.forced() && !check.dry_run() {
            tracing::warn!(
                ?check,
                "guard: a forced partition move skips the safety check"
            );
            return None;
        }
        Some(check)
    }

    /// Whether the request only asks what would happen: the node answers
    /// it itself, proposing nothing.
    pub fn dry_run(&self) -> bool {
        match self {
            Check::Reassign(request) => request.dry_run,
            Check::Drop(request) => request.dry_run,
        }
    }

    fn forced(&self) -> bool {
        match self {
            Check::Reassign(request) => request.force,
            Check::Drop(request) => request.force,
        }
    }

    fn group(&self) -> u64 {
        match self {
            Check::Reassign(request) => request.group,
            Check::Drop(request) => request.group,
        }
    }
}

/// Why the node refuses `check` now, if it does (a forced dry run skips
/// the safety rule, as the forced move would).
pub async fn refusal(shared: &Shared, check: &Check) -> Option<String> {
    if check.forced() {
        return None;
    }
    let primary = primary_status(shared, check.group()).await;
    judge(check, primary.as_ref())
}

/// A dry run's answer: what the metadata plane would reply to the move,
/// planned from this node's catalog (its reply body), or why it would
/// refuse it.
pub fn preview(shared: &Shared, check: &Check) -> Result<Bytes, ErrorBody> {
    assert!(check.dry_run(), "only a dry run is previewed");
    if shared.catalog_freshness() == crate::shared::CatalogFreshness::Loading {
        return Err(ErrorBody::message(
            ResultCode::Unavailable,
            "this node's catalog is still loading: ask another node",
        ));
    }
    let catalog = shared.catalog();
    match check {
        Check::Reassign(request) => catalog
            .preview_reassignment(request)
            .map(|reply| Bytes::from(reply.to_vec())),
        Check::Drop(request) => catalog.preview_drop(request).map(|()| Bytes::new()),
    }
}

/// The rule itself, given what the primary reports (`None`: no primary
/// serves, or none answered).
pub fn judge(check: &Check, primary: Option<&GroupStatus>) -> Option<String> {
    let target = |status: Option<&GroupStatus>, group: u64| match status {
        Some(status) => format!("{}/{}/{}", status.stream, status.topic, status.partition),
        None => format!("group {group}"),
    };
    match check {
        Check::Reassign(request) => {
            // No primary to judge by: the move that revives a partition
            // whose replicas are gone must stay possible.
            let primary = primary?;
            let mut current: Vec<u32> = primary
                .replicas
                .iter()
                .map(|replica| replica.node)
                .collect();
            let mut wanted = request.nodes.clone();
            current.sort_unstable();
            wanted.sort_unstable();
            if current == wanted {
                return None;
            }
            strand_host::move_safety::shortfall(primary, &request.nodes, request.confirm)
                .map(|short| short.refusal(&target(Some(primary), request.group)))
        }
        Check::Drop(request) => strand_host::move_safety::drop_too_soon(
            request.node,
            &target(primary, request.group),
            primary,
        ),
    }
}

/// How long the node waits for the nodes' answers about the partition: a
/// node that is down or stopped must not hold an operator's command long.
/// Well within `NODE_CHECK_MS_MAX`, the longer wait the SDK gives a
/// checked operation.
const STATUS_TIMEOUT: Duration = Duration::from_millis(1_000);

/// The partition's status as its serving primary reports it; `None` when
/// no node answers for one within [`STATUS_TIMEOUT`]. Every node is asked
/// at once (a node call each): the catalog may not name the nodes that
/// serve the partition right now (a move in progress).
async fn primary_status(shared: &Shared, group: u64) -> Option<GroupStatus> {
    const _: () = assert!(STATUS_TIMEOUT.as_millis() < strand_wire::ops::NODE_CHECK_MS_MAX as u128);
    let deadline = tokio::time::Instant::now() + STATUS_TIMEOUT;
    let body = Bytes::from(GroupStatusRequest { group }.to_vec());
    let calls: Vec<_> = shared
        .config
        .peers
        .iter()
        .filter_map(|peer| {
            node_calls::ask(shared, peer.id, Operation::GroupStatus, body.clone()).ok()
        })
        .collect();
    let mut statuses = Vec::new();
    for call in calls {
        let Ok(reply) = call.answer(deadline).await else {
            continue;
        };
        if reply.header().result.get() != ResultCode::Ok as u16 {
            continue;
        }
        if let Ok(GroupStatusReply {
            status: Some(status),
        }) = GroupStatusReply::from_bytes(reply.body())
        {
            statuses.push(status);
        }
    }
    let status = statuses
        .into_iter()
        .filter(|status| status.status == Status::Normal.name() && status.replica == status.primary)
        .max_by_key(|status| (status.epoch, status.view));
    if status.is_none() {
        tracing::warn!(
            group,
            "guard: no serving primary's status within the deadline"
        );
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::ConfirmPolicy;

    fn status(caught_up: [bool; 3]) -> GroupStatus {
        strand_host::move_safety::fixtures::majority_of_three(caught_up)
    }

    fn reassign(nodes: &[u32], confirm: Option<ConfirmPolicy>) -> Check {
        Check::Reassign(ReassignPartition {
            group: 1,
            nodes: nodes.to_vec(),
            confirm,
            force: false,
            dry_run: false,
        })
    }

    #[test]
    fn a_set_short_of_good_copies_is_refused_a_policy_change_in_place_is_not() {
        let lagging = status([true, true, false]);
        let refusal = judge(&reassign(&[1, 3, 4], None), Some(&lagging)).expect("refused");
        assert!(
            refusal.contains("shop/orders/0") && refusal.contains("--force"),
            "{refusal}"
        );
        assert_eq!(judge(&reassign(&[1, 2, 4], None), Some(&lagging)), None);
        assert_eq!(
            judge(
                &reassign(&[3, 2, 1], Some(ConfirmPolicy::Count(1))),
                Some(&lagging)
            ),
            None,
            "the same replicas: a policy change, not a move"
        );
        assert_eq!(
            judge(&reassign(&[1, 3, 4], None), None),
            None,
            "nobody to judge by"
        );
    }

    #[test]
    fn a_drop_waits_for_every_member_and_for_a_primary() {
        let drop = Check::Drop(DropReplica {
            group: 1,
            node: 4,
            force: false,
            dry_run: false,
        });
        assert!(judge(&drop, Some(&status([true, true, false]))).is_some());
        assert!(judge(&drop, None).is_some(), "no primary serves");
        assert_eq!(judge(&drop, Some(&status([true; 3]))), None);
    }
}
