//! What `status` and `attention` show of a group on this node besides its
//! replica's own status: why a view change waits, a group whose storage
//! failed or could not open, a group that is down. Kept apart from the
//! actor so that what an operator reads is built in one place.

use strand_consensus::WaitReason;
use strand_wire::ops::{AttentionEntry, AttentionReason, GroupStatus};

use super::GroupSpec;
use crate::shared::GroupView;

/// The attention entry of a group whose storage failed on this node.
pub(super) fn storage_failed_attention(
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
pub(super) fn attention_reason(reason: WaitReason) -> AttentionReason {
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

    #[test]
    fn a_group_that_cannot_open_shows_in_status_and_attention() {
        let spec = GroupSpec::metadata(vec![1, 2, 3], std::path::Path::new("/data"));
        let spec = GroupSpec {
            group: 7,
            stream: "s".to_owned(),
            topic: "t".to_owned(),
            partition: 2,
            ..spec
        };
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
