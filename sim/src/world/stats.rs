//! The counters a run reports in its summary line, and a batch adds up.

/// Counters for the summary line.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Ops in the committed history.
    pub committed: u64,
    /// Produces acknowledged to clients.
    pub acked: u64,
    /// View changes started (all replicas).
    pub view_changes: u64,
    /// Crashes and clean shutdowns.
    pub stops: u64,
    /// Storage faults injected.
    pub storage_faults: u64,
    /// I/O faults armed on running replicas (failed fsyncs, full disks,
    /// failed reads).
    pub io_faults: u64,
    /// Groups opened again after their storage failed.
    pub reopens: u64,
    /// Quarantines.
    pub quarantines: u64,
    /// Messages dropped by the network.
    pub dropped: u64,
    /// Ticks the quiet phase needed.
    pub quiet_ticks: u64,
    /// Reassigning runs whose idle, healed group did not go quiet (or woke
    /// again without a cause): counted, not a failure, while the known
    /// cases (a reconfiguration in place left pending, a copy that never
    /// learns it was removed) are open. In other runs it is a violation.
    pub not_quiet: u64,
    /// Times the simulated operator accepted loss to unstick a group.
    pub accepted_losses: u64,
    /// Handovers to the preferred primary that started.
    pub handovers: u64,
    /// Reassignments the catalog committed that take effect in place.
    pub reassignments_in_place: u64,
    /// Reassignments the catalog committed that take a view change.
    pub reassignments_view_change: u64,
    /// Epochs after the first that started.
    pub epochs_started: u64,
    /// Replicas that joined the group at a new slot.
    pub joins: u64,
    /// State transfers completed (joining and quarantined replicas).
    pub transfers: u64,
    /// Replicas that retired.
    pub retirements: u64,
    /// Removed replicas dropped for good.
    pub drops: u64,
    /// Record-log segments retention removed (all replicas).
    pub retained_segments: u64,
    /// Replicas that lacked ops a peer's retention had dropped.
    pub behind_log_start: u64,
}

impl Stats {
    /// Adds `other`'s counters to these (for a batch's totals).
    pub fn add(&mut self, other: &Stats) {
        self.committed += other.committed;
        self.acked += other.acked;
        self.view_changes += other.view_changes;
        self.stops += other.stops;
        self.storage_faults += other.storage_faults;
        self.io_faults += other.io_faults;
        self.reopens += other.reopens;
        self.quarantines += other.quarantines;
        self.dropped += other.dropped;
        self.quiet_ticks += other.quiet_ticks;
        self.not_quiet += other.not_quiet;
        self.accepted_losses += other.accepted_losses;
        self.handovers += other.handovers;
        self.reassignments_in_place += other.reassignments_in_place;
        self.reassignments_view_change += other.reassignments_view_change;
        self.epochs_started += other.epochs_started;
        self.joins += other.joins;
        self.transfers += other.transfers;
        self.retirements += other.retirements;
        self.retained_segments += other.retained_segments;
        self.behind_log_start += other.behind_log_start;
        self.drops += other.drops;
    }
}
