//! Everything about one hosted group as its latest assignment says: its
//! slots, memberships, policies and directory. A value, built from the
//! catalog's assignment (or the metadata plane's fixed shape), that the
//! shard opens an actor from and keeps to open it again.

use std::path::PathBuf;

use strand_consensus::epoch::Membership;
use strand_host::catalog::{Assignment, Role};
use strand_partition::RetentionPolicy;
use strand_wire::{ConfirmPolicy, Durability};

/// Everything about one hosted group, as its latest assignment says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSpec {
    /// The group id (0: the metadata plane).
    pub group: u64,
    /// Stream name (empty for the metadata plane).
    pub stream: String,
    /// Topic name (empty for the metadata plane).
    pub topic: String,
    /// Partition index.
    pub partition: u32,
    /// The newest assignment epoch the metadata plane made.
    pub epoch: u32,
    /// The node in each slot (replica index) across `memberships`: a slot
    /// names one node in every epoch of the window.
    pub slots: Vec<Option<u32>>,
    /// The memberships the group is in now, ascending by epoch: the
    /// previous one while a reassignment has not started, and the newest.
    pub memberships: Vec<Membership>,
    /// The newest confirm policy.
    pub confirm: ConfirmPolicy,
    /// Durability of records.
    pub durability: Durability,
    /// Durability of cursor commits.
    pub cursor_durability: Durability,
    /// The partition directory.
    pub dir: PathBuf,
    /// Whether the newest assignment has started in the group (the
    /// metadata plane heard `EpochStarted`).
    pub active: bool,
    /// This node was removed from the group by a started reassignment: its
    /// replica serves no more, its data stays.
    pub retired: bool,
    /// How much of the record log to keep.
    pub retention: RetentionPolicy,
    /// Bytes per record-log segment (0: the partition's default).
    pub segment_bytes: u64,
    /// The group is opened again after a write or sync of its storage failed
    /// in this process: its unsynced tail is not trusted
    /// (`PartitionConfig::drop_unsynced`).
    pub after_failed_write: bool,
}

impl GroupSpec {
    /// The metadata plane: every node, in id order, always `persisted`.
    pub fn metadata(nodes: Vec<u32>, data_dir: &std::path::Path) -> GroupSpec {
        GroupSpec {
            group: 0,
            stream: String::new(),
            topic: String::new(),
            partition: 0,
            epoch: 0,
            memberships: vec![Membership::initial(
                nodes.len() as u8,
                ConfirmPolicy::MajorityDurable,
            )],
            slots: nodes.into_iter().map(Some).collect(),
            confirm: ConfirmPolicy::MajorityDurable,
            durability: Durability::Persisted,
            cursor_durability: Durability::Persisted,
            dir: data_dir.join("metadata"),
            active: true,
            retired: false,
            retention: RetentionPolicy::default(),
            segment_bytes: 0,
            after_failed_write: false,
        }
    }

    /// A partition as the catalog places it, seen from node `me`.
    pub fn partition(assignment: &Assignment, data_dir: &std::path::Path, me: u32) -> GroupSpec {
        let mut slots = assignment.slots.clone();
        let mut memberships = Vec::new();
        if let Some(previous) = &assignment.previous {
            for (slot, node) in previous.members() {
                let slot = usize::from(slot);
                if slots.len() <= slot {
                    slots.resize(slot + 1, None);
                }
                assert!(
                    slots[slot].is_none_or(|held| held == node),
                    "slot {slot} names two nodes across epochs: {assignment:?}"
                );
                slots[slot] = Some(node);
            }
            memberships.push(previous.membership());
        }
        memberships.push(assignment.membership());
        GroupSpec {
            group: assignment.group,
            stream: assignment.stream.clone(),
            topic: assignment.topic.clone(),
            partition: assignment.partition,
            epoch: assignment.epoch,
            slots,
            memberships,
            confirm: assignment.confirm,
            durability: assignment.durability,
            cursor_durability: assignment.consumer_offset_durability,
            dir: strand_partition::layout::partition_dir(
                data_dir,
                &assignment.stream,
                &assignment.topic,
                assignment.partition,
                assignment.group,
            ),
            active: assignment.active,
            retired: assignment.role_of(me) == Some(Role::Retired),
            retention: RetentionPolicy {
                retention_bytes: (assignment.retention_bytes > 0)
                    .then_some(assignment.retention_bytes),
                retention_ms: (assignment.retention_ms > 0).then_some(assignment.retention_ms),
            },
            segment_bytes: assignment.segment_bytes,
            after_failed_write: false,
        }
    }

    /// The node in `slot`, if any.
    pub fn node_at(&self, slot: u8) -> Option<u32> {
        self.slots.get(usize::from(slot)).copied().flatten()
    }

    /// The slot `node` holds, if any.
    pub fn slot_of(&self, node: u32) -> Option<u8> {
        self.slots
            .iter()
            .position(|held| *held == Some(node))
            .map(|slot| slot as u8)
    }

    /// The newest membership.
    pub fn membership(&self) -> Membership {
        *self.memberships.last().expect("a group has a membership")
    }
}
