//! A replica's identity, policies and timeouts.

use strand_wire::{ConfirmPolicy, Durability, REPLICAS_MAX};

use crate::epoch::{Membership, SlotSet};

/// Tick counts for every timeout. The server ticks every 10 ms, so the
/// defaults are: heartbeat 50 ms, primary presumed dead after 300 ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// The primary sends a Commit heartbeat this often.
    pub heartbeat_ticks: u64,
    /// A backup that hears nothing from its primary this long starts a view change.
    pub primary_ticks: u64,
    /// The primary resends unacked prepares this often.
    pub prepare_retransmit_ticks: u64,
    /// A view change that has not finished this long moves to the next view
    /// (with backoff).
    pub view_change_ticks: u64,
    /// StartViewChange and DoViewChange are resent this often while waiting.
    pub view_change_retransmit_ticks: u64,
    /// A restarted replica asks for the current view this often.
    pub start_view_probe_ticks: u64,
    /// After this many unanswered probes it starts a view change itself.
    pub start_view_probes_max: u32,
    /// Missing headers and prepares are asked for again this often.
    pub repair_ticks: u64,
    /// A waiting view change repeats its warning at most this often.
    pub warning_ticks: u64,
    /// The commit number is persisted at most this often (it is also
    /// persisted with every view change). Every busy group writes its
    /// superblock once per period, so the period sets a node's superblock
    /// writes a second (1,000 busy partitions: 1,000 a second at 1 s, 200 at
    /// the default 5 s, the interval Kafka checkpoints its high watermarks
    /// at). A persisted commit behind the real one is safe: a restarted
    /// replica learns the rest from its primary.
    pub commit_persist_ticks: u64,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            heartbeat_ticks: 5,
            primary_ticks: 30,
            prepare_retransmit_ticks: 10,
            view_change_ticks: 40,
            view_change_retransmit_ticks: 10,
            start_view_probe_ticks: 10,
            start_view_probes_max: 5,
            repair_ticks: 10,
            warning_ticks: 500,
            commit_persist_ticks: 500,
        }
    }
}

/// Everything fixed about one replica of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The cluster id every frame must carry.
    pub cluster: u64,
    /// The group (partition, or 0 for the metadata plane).
    pub group: u64,
    /// This replica's slot (index) in the group.
    pub replica: u8,
    /// The memberships the driver knows (from the metadata plane), ascending
    /// by epoch, at least one: who serves the group in each epoch and how
    /// many copies confirm. A group created with `E` replicas starts with
    /// [`Membership::initial`]; later ones the replica also learns from
    /// `Reconfigure` ops in its log and from [`crate::Replica::on_assignment`].
    pub memberships: Vec<Membership>,
    /// When a copy of a prepare counts: after fsync (`Persisted`) or once
    /// queued to the WAL writer (`Replicated`).
    pub durability: Durability,
    /// Whether a cursor commit is acked after fsync or once queued.
    pub cursor_durability: Durability,
    /// Tick counts.
    pub timeouts: Timeouts,
    /// Seed for timeout jitter.
    pub seed: u64,
}

impl Config {
    /// Checks the configuration's own consistency (a bug if it fails).
    pub fn assert_valid(&self) {
        assert!(!self.memberships.is_empty(), "{self:?}");
        assert!(
            self.memberships
                .windows(2)
                .all(|pair| pair[0].epoch < pair[1].epoch),
            "memberships not ascending by epoch: {self:?}"
        );
        assert!(self.replica < REPLICAS_MAX, "{self:?}");
        let timeouts = &self.timeouts;
        assert!(timeouts.heartbeat_ticks >= 1);
        assert!(
            timeouts.primary_ticks > timeouts.heartbeat_ticks,
            "backups would time out between heartbeats"
        );
        assert!(timeouts.start_view_probes_max >= 1);
    }

    /// Whether acks wait for fsync.
    pub fn acks_wait_for_durable(&self) -> bool {
        self.durability == Durability::Persisted
    }

    /// The newest membership the driver knows.
    pub fn membership(&self) -> Membership {
        *self.memberships.last().expect("at least one membership")
    }
}

impl Membership {
    /// A group as it is created: epoch 0, slots `0..replica_count`.
    pub fn initial(replica_count: u8, confirm: ConfirmPolicy) -> Membership {
        Membership::new(0, SlotSet::first(replica_count), confirm)
    }
}
