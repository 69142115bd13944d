//! Swarm options: every fault rate and cluster shape drawn from the seed, so
//! that a batch of seeds covers many kinds of runs (swarm testing).

use strand_prng::Prng;
use strand_wire::{ConfirmPolicy, Durability};

/// Probabilities are "per million per tick" unless named otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The seed everything is drawn from.
    pub seed: u64,
    /// Replicas in the group (`E`).
    pub replica_count: u8,
    /// The group's confirm policy.
    pub confirm: ConfirmPolicy,
    /// When a copy counts.
    pub durability: Durability,
    /// Ticks of the faulty phase; then a quiet phase checks liveness.
    pub ticks: u64,
    /// Message latency bounds, in ticks.
    pub latency_min_ticks: u64,
    /// Upper bound of message latency.
    pub latency_max_ticks: u64,
    /// Chance a message is lost, per million.
    pub loss_ppm: u64,
    /// Chance a message is delivered twice, per million.
    pub duplicate_ppm: u64,
    /// Chance per tick that the network's partition changes, per million.
    pub partition_ppm: u64,
    /// Chance per tick that a partition heals, per million.
    pub heal_ppm: u64,
    /// Chance per tick and replica of a crash, per million.
    pub crash_ppm: u64,
    /// Chance that a crash is followed at once by a second one.
    pub double_crash_percent: u64,
    /// Chance per tick that every replica crashes at once, per million.
    pub full_crash_ppm: u64,
    /// Chance a stop is a clean shutdown rather than a crash.
    pub clean_percent: u64,
    /// Ticks a crashed replica stays down (bounds).
    pub down_min_ticks: u64,
    /// Upper bound of the down time.
    pub down_max_ticks: u64,
    /// Fsync latency bounds, in ticks.
    pub fsync_min_ticks: u64,
    /// Upper bound of fsync latency.
    pub fsync_max_ticks: u64,
    /// Chance per restart that the disk of a replica took a fault (only on a
    /// minority of replicas), in percent.
    pub storage_fault_percent: u64,
    /// Simulated clients.
    pub clients: u8,
    /// Requests a client keeps in flight.
    pub client_in_flight: u8,
    /// Chance per tick and client of sending a request, per million.
    pub request_ppm: u64,
    /// Chance per tick and client of storing a cursor, per million.
    pub cursor_ppm: u64,
    /// Chance per tick and replica that a power loss is armed to strike a
    /// few storage operations later (inside a superblock write, a cut, a
    /// quarantine, a state-transfer install), per million; a replica
    /// receiving a state transfer draws it ten times as often.
    pub power_loss_ppm: u64,
    /// Chance per tick of the faulty phase, for a primary that leads in
    /// place of its group's preferred primary, that its driver asks it to
    /// hand over, per million; 0 never asks.
    pub handover_ppm: u64,
    /// Chance per tick of the faulty phase and running replica that an I/O
    /// fault is armed on one of its files (a failed fsync, a write that
    /// finds the disk full, a failed read), per million; only on a minority
    /// of replicas, within the durability promise. 0: none.
    pub io_fault_ppm: u64,
    /// The record log's size limit (0: none): retention drops the oldest
    /// segments past it as commits advance, so a replica that falls behind
    /// must catch up by state transfer.
    pub retention_bytes: u64,
    /// Switch off the trusted-quorum gate (`mutations` only).
    pub mutation_untrusted_gate: bool,
    /// Chance per tick of the faulty phase that the catalog reassigns the
    /// group (once the previous reassignment's epoch has started), per
    /// million; 0 keeps the group's membership fixed.
    pub reassign_ppm: u64,
    /// Most ticks a replica hears of a new assignment after the catalog
    /// committed it (drawn per replica and assignment).
    pub catalog_lag_max_ticks: u64,
    /// Most ticks between the start of the epoch that removed a replica and
    /// the catalog telling it to retire.
    pub retire_lag_max_ticks: u64,
    /// Bounds of the ticks a removed replica keeps running after the epoch
    /// that removed it started, before an operator drops it for good.
    pub drop_min_ticks: u64,
    /// Upper bound of the drop delay.
    pub drop_max_ticks: u64,
    /// A view change into a new epoch hears only the new membership's quorum,
    /// not the old one's (`mutations` only).
    pub mutation_new_quorum_only: bool,
    /// A log reopened after an unclean stop under `replicated` is reported
    /// trusted (`mutations` only).
    pub mutation_trust_unclean: bool,
    /// A truncation reports done without cutting the longer tail
    /// (`mutations` only).
    pub mutation_skip_cut: bool,
    /// A state transfer is installed without its marker (`mutations` only).
    pub mutation_install_unmarked: bool,
    /// Every clean stop resumes in its view (`mutations` only).
    pub mutation_resume_any_stop: bool,
    /// An open cuts a log ending in damaged bytes as a plain torn write,
    /// without marking its ops maybe acked (`mutations` only).
    pub mutation_trust_damaged_tail: bool,
    /// An open after a crash skips syncing the superblock copy it chose
    /// (`mutations` only).
    pub mutation_superblock_unsynced: bool,
    /// A reopen after a failed write or sync trusts the page cache
    /// (`mutations` only).
    pub mutation_page_cache_trusted: bool,
    /// Reads return records past the high watermark (`mutations` only).
    pub mutation_reads_uncommitted: bool,
    /// Storage faults at restart include writes the disk lost: misdirected
    /// ones (an entry written over another's place, zeros where it belonged)
    /// and the newest entries gone without a trace (the active segment cut
    /// at an entry past the superblock's checkpoint; only the durable mark
    /// says they were there).
    pub lost_writes: bool,
}

/// Optional fixed choices from the command line; `None` means "draw it".
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Fix the replica count.
    pub replica_count: Option<u8>,
    /// Fix the durability.
    pub durability: Option<Durability>,
    /// Fix the number of faulty-phase ticks.
    pub ticks: Option<u64>,
    /// Switch off the trusted-quorum gate.
    pub mutation_untrusted_gate: bool,
    /// Reassign the group at random during the faulty phase.
    pub reassign: bool,
    /// Drop the old membership's half of the joint view-change quorum.
    pub mutation_new_quorum_only: bool,
    /// Trust a log reopened after an unclean stop under `replicated`.
    pub mutation_trust_unclean: bool,
    /// Report truncations done without cutting the log.
    pub mutation_skip_cut: bool,
    /// Install state transfers without the marker that makes the swap atomic.
    pub mutation_install_unmarked: bool,
    /// Mark every clean stop as one that may resume in its view.
    pub mutation_resume_any_stop: bool,
    /// Cut a log ending in damaged bytes without marking its ops maybe acked.
    pub mutation_trust_damaged_tail: bool,
    /// Skip syncing the chosen superblock copy at an open after a crash.
    pub mutation_superblock_unsynced: bool,
    /// Reopen after a failed write or sync without dropping the unsynced tail.
    pub mutation_page_cache_trusted: bool,
    /// Let reads return records past the high watermark.
    pub mutation_reads_uncommitted: bool,
    /// Leave lost writes (misdirected, or gone without a trace) out of the
    /// storage faults at restart: the model seeds were found with before
    /// they joined the default one.
    pub without_lost_writes: bool,
}

fn between(prng: &mut Prng, low: u64, high: u64) -> u64 {
    assert!(low <= high);
    low + prng.below(high - low + 1)
}

impl Options {
    /// Draws every option from `seed`, then applies the overrides.
    pub fn from_seed(seed: u64, overrides: &Overrides) -> Options {
        let mut prng = Prng::new(seed ^ 0x5eed_5eed_5eed_5eed);
        let (replica_count, confirm, durability) = draw_group(&mut prng, overrides);
        let latency_min_ticks = between(&mut prng, 0, 2);
        let fsync_min_ticks = between(&mut prng, 0, 3);
        let down_min_ticks = between(&mut prng, 1, 50);
        let mut options = Options {
            seed,
            replica_count,
            confirm,
            durability,
            ticks: overrides.ticks.unwrap_or(between(&mut prng, 1_500, 4_000)),
            latency_min_ticks,
            latency_max_ticks: latency_min_ticks + between(&mut prng, 0, 8),
            loss_ppm: [0, 1_000, 20_000, 100_000][prng.below(4) as usize],
            duplicate_ppm: [0, 1_000, 20_000][prng.below(3) as usize],
            partition_ppm: [0, 500, 3_000][prng.below(3) as usize],
            heal_ppm: [5_000, 20_000][prng.below(2) as usize],
            crash_ppm: [0, 300, 1_500, 5_000][prng.below(4) as usize],
            double_crash_percent: [0, 30, 80][prng.below(3) as usize],
            full_crash_ppm: [0, 0, 100, 500][prng.below(4) as usize],
            clean_percent: [0, 20, 50][prng.below(3) as usize],
            down_min_ticks,
            down_max_ticks: down_min_ticks + between(&mut prng, 0, 400),
            fsync_min_ticks,
            fsync_max_ticks: fsync_min_ticks + between(&mut prng, 0, 20),
            storage_fault_percent: [0, 0, 10, 40][prng.below(4) as usize],
            clients: between(&mut prng, 1, 4) as u8,
            client_in_flight: between(&mut prng, 1, 4) as u8,
            request_ppm: [20_000, 100_000, 400_000][prng.below(3) as usize],
            cursor_ppm: [0, 5_000, 50_000][prng.below(3) as usize],
            power_loss_ppm: [0, 300, 2_000][prng.below(3) as usize],
            mutation_untrusted_gate: overrides.mutation_untrusted_gate,
            retention_bytes: 0,
            handover_ppm: 0,
            reassign_ppm: 0,
            catalog_lag_max_ticks: 0,
            retire_lag_max_ticks: 0,
            drop_min_ticks: 0,
            drop_max_ticks: 0,
            mutation_new_quorum_only: overrides.mutation_new_quorum_only,
            mutation_trust_unclean: overrides.mutation_trust_unclean,
            mutation_skip_cut: overrides.mutation_skip_cut,
            mutation_install_unmarked: overrides.mutation_install_unmarked,
            mutation_resume_any_stop: overrides.mutation_resume_any_stop,
            mutation_trust_damaged_tail: overrides.mutation_trust_damaged_tail,
            mutation_superblock_unsynced: overrides.mutation_superblock_unsynced,
            mutation_page_cache_trusted: overrides.mutation_page_cache_trusted,
            mutation_reads_uncommitted: overrides.mutation_reads_uncommitted,
            lost_writes: !overrides.without_lost_writes,
            io_fault_ppm: 0,
        };
        if overrides.reassign {
            options.draw_reassignment(&mut prng);
        }
        options.draw_own_streams();
        options
    }

    /// The options drawn each from a stream of its own, so that every other
    /// option is drawn as before they existed (and a seed hands over alike
    /// with and without reassignment): handovers, retention, I/O faults.
    fn draw_own_streams(&mut self) {
        let seed = self.seed;
        let mut handover = Prng::new(seed ^ 0x4a4d_0ff0_4a4d_0ff0);
        self.handover_ppm = [0, 0, 3_000, 30_000][handover.below(4) as usize];
        let mut retention = Prng::new(seed ^ 0x7e7a_1e57_7e7a_1e57);
        self.retention_bytes = [0, 0, 4 << 10, 12 << 10][retention.below(4) as usize];
        let mut io_faults = Prng::new(seed ^ 0x10fa_0175_10fa_0175);
        self.io_fault_ppm = [0, 300, 1_500, 5_000][io_faults.below(4) as usize];
    }

    /// Draws the reassignment options, after every other draw (so a seed
    /// runs the same cluster shape and faults with and without them).
    fn draw_reassignment(&mut self, prng: &mut Prng) {
        self.reassign_ppm = [1_000, 3_000, 10_000][prng.below(3) as usize];
        self.catalog_lag_max_ticks = [0, 20, 150][prng.below(3) as usize];
        self.retire_lag_max_ticks = [0, 50, 400][prng.below(3) as usize];
        self.drop_min_ticks = between(prng, 20, 300);
        self.drop_max_ticks = self.drop_min_ticks + between(prng, 0, 2_000);
    }

    /// Whether the group is reassigned during the run.
    pub fn reassigns(&self) -> bool {
        self.reassign_ppm > 0
    }
}

/// The group's shape, the first draws of a seed: its replica count, confirm
/// policy and durability (each unless fixed by `overrides`).
fn draw_group(prng: &mut Prng, overrides: &Overrides) -> (u8, ConfirmPolicy, Durability) {
    let replica_count = overrides.replica_count.unwrap_or(match prng.below(10) {
        0 => 1,
        1..=6 => 3,
        _ => 5,
    });
    let confirm = match prng.below(6) {
        0..=2 => ConfirmPolicy::MajorityDurable,
        3 => ConfirmPolicy::LocalDurable,
        _ => ConfirmPolicy::Count(1 + prng.below(u64::from(replica_count) + 1) as u8),
    };
    let durability = overrides.durability.unwrap_or(if prng.chance(1, 2) {
        Durability::Persisted
    } else {
        Durability::Replicated
    });
    (replica_count, confirm, durability)
}
