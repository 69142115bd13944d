//! What `status` and `attention` show of a group on this node besides its
//! replica's own status: why a view change waits, a group whose storage
//! failed or could not open, a group that is down. Kept apart from the
//! actor so that what an operator reads is built in one place; pure
//! functions of the group's spec and its replica's report.

use strand_consensus::{HistoryStart, WaitReason};
use strand_wire::ops::{AttentionEntry, AttentionReason, AttentionStart, GroupStatus};

use crate::group::spec::GroupSpec;
use crate::shared::GroupView;

/// A view change's wait as the replica reports it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Waiting {
    /// The view it tries to start.
    pub(crate) view: u32,
    /// Why it waits.
    pub(crate) reason: WaitReason,
    /// The replicas it waits for (a bitset of slots).
    pub(crate) awaited: u32,
    /// The latest history start its view change knows.
    pub(crate) start: Option<HistoryStart>,
}

/// The entry `attention` shows for `waiting`, the slots named by the nodes
/// `spec` places in them.
pub(crate) fn waiting_entry(spec: &GroupSpec, waiting: &Waiting) -> AttentionEntry {
    let awaited: Vec<u8> = (0..strand_wire::REPLICAS_MAX)
        .filter(|slot| waiting.awaited & (1 << slot) != 0)
        .collect();
    let nodes: Vec<u32> = awaited
        .iter()
        .filter_map(|slot| spec.node_at(*slot))
        .collect();
    let history_start = waiting.start.map(|start| AttentionStart {
        view: start.view.view,
        op: start.op,
        offset_end: start.offset_end,
        replica: start.replica,
        node: spec.node_at(start.replica),
    });
    let mut detail = format!("waiting for nodes {nodes:?}");
    if let Some(start) = &history_start {
        let below = waiting.reason == WaitReason::BelowHistoryStart;
        let relation = if below {
            "below the history start of"
        } else {
            "latest history start:"
        };
        detail.push_str(&format!("; {relation} {start}"));
    }
    AttentionEntry {
        group: spec.group,
        stream: spec.stream.clone(),
        topic: spec.topic.clone(),
        partition: spec.partition,
        view: waiting.view,
        reason: attention_reason(waiting.reason),
        awaited,
        detail,
        history_start,
    }
}

/// The attention entry of a group whose storage failed on this node.
pub(crate) fn storage_failed_attention(
    spec: &GroupSpec,
    view: u32,
    failure: &str,
) -> AttentionEntry {
    AttentionEntry {
        group: spec.group,
        stream: spec.stream.clone(),
        topic: spec.topic.clone(),
        partition: spec.partition,
        view,
        reason: AttentionReason::StorageFailed,
        awaited: Vec::new(),
        detail: format!(
            "storage failed: {failure}; the node opens it again by itself once the disk has \
             room (a failing disk: replace it, then restart the node)"
        ),
        history_start: None,
    }
}

/// What `status` and `attention` show of a group this node could not open
/// (its storage refused): down, with the reason.
pub fn failed_open_view(spec: &GroupSpec, me: u32, error: &str) -> GroupView {
    let attention = storage_failed_attention(spec, 0, error);
    down_view(spec, me, "storage_failed", attention)
}

/// What `status` and `attention` show of a group that is down on this node:
/// `status` names why, `attention` says what to do.
pub fn down_view(spec: &GroupSpec, me: u32, status: &str, attention: AttentionEntry) -> GroupView {
    let membership = spec.membership();
    let rule = membership.rule();
    let status = GroupStatus {
        group: spec.group,
        stream: spec.stream.clone(),
        topic: spec.topic.clone(),
        partition: spec.partition,
        epoch: spec.epoch,
        confirm: spec.confirm,
        durability: spec.durability,
        write_quorum: rule.write,
        view_change_quorum: rule.view_change,
        replica: spec.slot_of(me).unwrap_or(0),
        view: 0,
        log_view: 0,
        status: status.to_owned(),
        primary: 0,
        op: 0,
        commit_op: 0,
        log_start_offset: 0,
        high_watermark: 0,
        untrusted_log: false,
        replicas: Vec::new(),
    };
    GroupView {
        status,
        attention: Some(attention),
    }
}

/// The wire's name for why a view change waits.
fn attention_reason(reason: WaitReason) -> AttentionReason {
    match reason {
        WaitReason::FewerTrustedThanQuorum => AttentionReason::FewerTrustedThanQuorum,
        WaitReason::BelowHistoryStart => AttentionReason::BelowHistoryStart,
        WaitReason::AwaitingStateTransfer => AttentionReason::AwaitingStateTransfer,
        WaitReason::MissingPrepare => AttentionReason::MissingPrepare,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::ViewId;

    fn partition_spec() -> GroupSpec {
        let spec = GroupSpec::metadata(vec![1, 2, 3], std::path::Path::new("/data"));
        GroupSpec {
            group: 7,
            stream: "s".to_owned(),
            topic: "t".to_owned(),
            partition: 2,
            ..spec
        }
    }

    #[test]
    fn a_wait_below_the_history_start_names_its_record_offset_and_node() {
        let start = HistoryStart {
            view: ViewId::new(0, 5),
            op: 40,
            cursor_tail: 3,
            replica: 1,
            accepted_loss: false,
            offset_end: Some(1_200),
            checksum: None,
        };
        let waiting = Waiting {
            view: 9,
            reason: WaitReason::BelowHistoryStart,
            awaited: 0b010,
            start: Some(start),
        };
        let entry = waiting_entry(&partition_spec(), &waiting);
        assert_eq!(entry.reason, AttentionReason::BelowHistoryStart);
        assert_eq!(entry.awaited, vec![1]);
        assert_eq!(
            entry.history_start,
            Some(AttentionStart {
                view: 5,
                op: 40,
                offset_end: Some(1_200),
                replica: 1,
                node: Some(2),
            }),
            "slot 1 is node 2's"
        );
        assert_eq!(
            entry.detail,
            "waiting for nodes [2]; below the history start of view 5 at record offset 1200 \
             (op 40), taken over by node 2"
        );
        // A start recorded before starts carried their offset says so.
        let older = Waiting {
            start: Some(HistoryStart {
                offset_end: None,
                ..start
            }),
            ..waiting
        };
        let entry = waiting_entry(&partition_spec(), &older);
        assert!(
            entry.detail.contains("record offset unknown"),
            "{}",
            entry.detail
        );
    }

    #[test]
    fn a_group_that_cannot_open_shows_in_status_and_attention() {
        let spec = partition_spec();
        let view = failed_open_view(&spec, 2, "no space left on device");
        assert_eq!(view.status.group, 7);
        assert_eq!(view.status.status, "storage_failed");
        assert_eq!(view.status.replica, 1, "node 2 holds slot 1");
        let attention = view.attention.expect("an attention entry");
        assert_eq!(attention.reason, AttentionReason::StorageFailed);
        assert_eq!((attention.stream.as_str(), attention.partition), ("s", 2));
        assert!(attention.detail.contains("no space left on device"));
    }
}
