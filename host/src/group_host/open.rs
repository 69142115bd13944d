//! Opening a group on a node: the partition from its directory, the trust
//! decision, a newcomer's placement, the replica, and (for the metadata
//! plane) the catalog rebuilt from the log. One function for the server and
//! the simulator, so a restart runs the same rules in both.

use std::path::PathBuf;

use strand_consensus::{Config, Effects, RecordLog, Recovered, Replica, Status};
#[cfg(feature = "mutations")]
use strand_partition::OpenMutations;
use strand_partition::{
    Disk, Partition, PartitionConfig, PartitionError, Quarantined, Recovery, RetentionPolicy,
};
use strand_wire::{ConfirmPolicy, ViewId};

use super::{GroupHost, Reopen};
use crate::convert::recovered_of;
use crate::machine::Machine;

/// Everything a node knows about one group it hosts, as its catalog says.
#[derive(Debug, Clone)]
pub struct HostSpec {
    /// The replica's configuration: cluster, group, this replica's slot,
    /// the memberships it is in now, durability, timeouts, jitter seed.
    pub replica: Config,
    /// The newest confirm policy.
    pub confirm: ConfirmPolicy,
    /// The partition directory.
    pub dir: PathBuf,
    /// For the metadata plane: the cluster's nodes (its catalog starts
    /// over them); `None` for a partition's record log.
    pub catalog_nodes: Option<Vec<u32>>,
    /// Segment and index layout, header window (the replica, durability and
    /// confirm fields are taken from this spec).
    pub storage: PartitionConfig,
    /// How much of the record log to keep ([`GroupHost::retain`]).
    pub retention: RetentionPolicy,
}

/// Storage-side protections a mutation run of the simulator switches off,
/// to show it catches what they prevent. Honoured only in builds with the
/// `mutations` feature ([`GroupHost::open_mutated`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mutations {
    /// A log reopened after an unclean stop under `replicated` is reported
    /// trusted (it may lack ops it acknowledged).
    pub trust_unclean: bool,
    /// A cut reports done without cutting the log (its longer tail, the
    /// cursor events past a view's start).
    pub skip_cut: bool,
    /// A state transfer is installed without its marker (a crash between
    /// the swap's renames leaves no partition).
    pub install_unmarked: bool,
    /// Every clean stop is marked as one taken while serving in the view,
    /// even one of a replica back from a crash that has not yet learned its
    /// view again (a primary then resumes having forgotten prepares it sent).
    pub resume_any_stop: bool,
    /// The partition's open cuts a log ending in damaged bytes as a plain
    /// torn write, without marking its ops maybe acked.
    pub trust_damaged_tail: bool,
    /// The partition's open after a crash skips syncing the superblock copy
    /// it chose before it rewrites the other.
    pub superblock_unsynced: bool,
    /// A failed fsync of a prepare is taken as done (the fsyncgate mistake):
    /// the host reports the op durable and goes on acking from the page
    /// cache, and the reopen after the next failure trusts what reads show
    /// (`PartitionConfig::drop_unsynced` ignored).
    pub page_cache_trusted: bool,
    /// The view change's trusted-quorum gate is off (see
    /// `Replica::disable_trusted_gate`).
    pub trusted_gate_off: bool,
    /// A membership change's joint quorum counts only the new membership
    /// (see `Replica::disable_old_quorum`).
    pub old_quorum_off: bool,
    /// A read returns what the log holds past the high watermark.
    pub reads_uncommitted: bool,
}

impl Mutations {
    /// Whether a prepare write that failed with `error` is taken as durable:
    /// only a failed fsync, and only under `page_cache_trusted`.
    pub(super) fn trusts_failed_sync(&self, error: &PartitionError) -> bool {
        use strand_wal::{IoOp, PoisonCause, WalError};
        let sync = matches!(
            error,
            PartitionError::Wal {
                error: WalError::SyncFailed { .. }
                    | WalError::Poisoned {
                        cause: PoisonCause { op: IoOp::Sync, .. },
                        ..
                    },
                ..
            }
        );
        cfg!(feature = "mutations") && self.page_cache_trusted && sync
    }
}

/// Opens (or fences) the group's partition, with the recovery rules a
/// mutation run switches off.
fn open_partition<D: Disk>(
    disk: D,
    spec: &HostSpec,
    config: PartitionConfig,
    mutations: Mutations,
) -> Result<(Partition<D>, Recovery, Option<Quarantined>), PartitionError> {
    #[cfg(feature = "mutations")]
    let opened = Partition::open_or_fence_mutated(
        disk,
        &spec.dir,
        config,
        OpenMutations {
            trust_damaged_tail: mutations.trust_damaged_tail,
            ignore_durable_mark: mutations.trust_damaged_tail || mutations.resume_any_stop,
            superblock_unsynced: mutations.superblock_unsynced,
        },
    );
    #[cfg(not(feature = "mutations"))]
    let opened = {
        let _ = mutations;
        Partition::open_or_fence(disk, &spec.dir, config)
    };
    opened
}

/// Why a group could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Its storage could not be opened.
    #[error(transparent)]
    Storage(#[from] PartitionError),
    /// The assignment this node knows does not fit the group's storage yet
    /// (its catalog lags): the next placement tries again.
    #[error("not placed here yet: {0}")]
    NotPlaced(String),
}

impl HostSpec {
    /// The newest membership's epoch.
    pub fn newest_epoch(&self) -> u32 {
        self.replica
            .memberships
            .last()
            .expect("a group has a membership")
            .epoch
    }
}

impl<D: Disk> GroupHost<D> {
    /// Opens the group `spec` describes over `disk`, not started yet (the
    /// owner calls `start` on the replica and settles); `reopen` makes a
    /// fresh disk for the same directory when an operation that consumed the
    /// partition failed. Also returns what the partition found at open.
    pub fn open(
        spec: &HostSpec,
        disk: D,
        new_disk: Box<dyn FnMut() -> D + Send>,
    ) -> Result<(GroupHost<D>, Recovery), OpenError> {
        GroupHost::open_with(spec, disk, new_disk, Mutations::default())
    }

    /// [`GroupHost::open`] with protections switched off.
    #[cfg(feature = "mutations")]
    pub fn open_mutated(
        spec: &HostSpec,
        disk: D,
        new_disk: Box<dyn FnMut() -> D + Send>,
        mutations: Mutations,
    ) -> Result<(GroupHost<D>, Recovery), OpenError> {
        GroupHost::open_with(spec, disk, new_disk, mutations)
    }

    /// Opens the group in named steps: its storage, what consensus
    /// recovers from it, the state machine, the replica, then (for the
    /// metadata plane) the catalog replayed up to the commit.
    fn open_with(
        spec: &HostSpec,
        disk: D,
        new_disk: Box<dyn FnMut() -> D + Send>,
        mutations: Mutations,
    ) -> Result<(GroupHost<D>, Recovery), OpenError> {
        assert_eq!(
            spec.catalog_nodes.is_some(),
            spec.replica.group == 0,
            "group {}: the metadata plane's group (0), and it alone, keeps a catalog",
            spec.replica.group
        );
        let (mut partition, recovery, config, joining) = open_storage(spec, disk, mutations)?;
        let mut recovered = recovered_at_open(spec, &recovery, joining, mutations);
        let (machine, snapshot_op) = machine_at_open(spec, &mut recovered, &mut partition)?;
        let mut replica = replica_at_open(spec, recovered, machine, mutations);
        let mut effects = Effects::new();
        if recovery.retired_epoch > 0 {
            replica.retire(recovery.retired_epoch, &mut effects);
        }
        assert!(
            !joining
                || matches!(
                    replica.status(),
                    Status::AwaitingStateTransfer | Status::Retired
                ),
            "a newly placed copy opens {:?}, not awaiting its state transfer",
            replica.status()
        );
        if spec.catalog_nodes.is_some() {
            crate::machine::replay_catalog(&mut replica, &mut partition, snapshot_op)?;
            crate::machine::keep_uncommitted_bodies(&mut replica, &mut partition);
        }
        tracing::info!(
            replica = spec.replica.replica,
            view = %replica.view(),
            op = replica.op(),
            commit = replica.commit(),
            trusted = replica.trusted(),
            fresh = recovery.fresh,
            faulty = recovery.faulty.len(),
            "host: group opened"
        );
        let reopen = Reopen {
            dir: spec.dir.clone(),
            config,
            new_disk,
        };
        let (cluster, group) = (spec.replica.cluster, spec.replica.group);
        let mut host = GroupHost::new(replica, partition, effects, reopen, cluster, group);
        host.mutations = mutations;
        host.retention = spec.retention;
        host.note_log_start();
        Ok((host, recovery))
    }
}

/// The group's partition, opened (or, if its log contradicts itself, fenced
/// to await a transfer) with the configuration it was opened with, and
/// whether this copy is joining: a replica added to a group with history
/// starts empty and must not serve that emptiness, so its partition is
/// created awaiting a state transfer. Refused while this node's catalog is
/// behind the group (the next placement reopens it).
fn open_storage<D: Disk>(
    spec: &HostSpec,
    mut disk: D,
    mutations: Mutations,
) -> Result<(Partition<D>, Recovery, PartitionConfig, bool), OpenError> {
    let newest = spec.newest_epoch();
    let joining = newest > 0 && !strand_partition::partition_present(&mut disk, &spec.dir);
    let page_cache_trusted = cfg!(feature = "mutations") && mutations.page_cache_trusted;
    let config = PartitionConfig {
        replica: spec.replica.replica,
        durability: spec.replica.durability,
        confirm: spec.confirm,
        create_awaiting_transfer: joining,
        drop_unsynced: spec.storage.drop_unsynced && !page_cache_trusted,
        ..spec.storage
    };
    let (partition, recovery, _fenced) = open_partition(disk, spec, config, mutations)?;
    if recovery.durable.view.epoch > newest {
        return Err(OpenError::NotPlaced(format!(
            "the partition is at epoch {} but this node's catalog only knows {newest}",
            recovery.durable.view.epoch
        )));
    }
    Ok((partition, recovery, config, joining))
}

/// What consensus opens from: what the partition found, trusted as a
/// mutation run forces, and placed at the newest epoch at most when this
/// copy was placed by a reassignment (its slot may have named another node
/// in earlier epochs).
fn recovered_at_open(
    spec: &HostSpec,
    recovery: &Recovery,
    joining: bool,
    mutations: Mutations,
) -> Recovered {
    let mut recovered = recovered_of(recovery);
    if cfg!(feature = "mutations") && mutations.trust_unclean {
        recovered.trusted = true;
    }
    if joining || never_entered_a_view(recovery) {
        recovered.joined_epoch = spec.newest_epoch();
    }
    recovered
}

/// The state machine the replica commits into and the op it already
/// reflects: for the metadata plane, the catalog from its newest usable
/// snapshot at or below the commit its log supports, the commit rewound
/// below a damaged committed op after it; a
/// partition's record log otherwise (from op 0).
fn machine_at_open<D: Disk>(
    spec: &HostSpec,
    recovered: &mut Recovered,
    partition: &mut Partition<D>,
) -> Result<(Machine, u64), PartitionError> {
    let Some(nodes) = &spec.catalog_nodes else {
        return Ok((Machine::Records(RecordLog::default()), 0));
    };
    // The commit the replica will open at, not the one the superblock
    // holds: a log that lost its tail lowers it, and a catalog snapshot
    // above it would then be ahead of the ops committed again after repair.
    let commit = recovered.commit_the_log_supports();
    let (catalog, snapshot_op) = crate::machine::catalog_at_open(nodes.clone(), commit, partition)?;
    crate::machine::rewind_below_damage(recovered, partition, snapshot_op)?;
    let opens_at = recovered.commit_the_log_supports();
    assert!(
        snapshot_op <= opens_at,
        "the catalog opens at op {snapshot_op}, past the commit {opens_at} the replica opens at"
    );
    Ok((Machine::catalog_from(catalog), snapshot_op))
}

/// The replica over what storage recovered, with the protections a
/// mutation run switches off.
fn replica_at_open(
    spec: &HostSpec,
    recovered: Recovered,
    machine: Machine,
    mutations: Mutations,
) -> Replica<Machine> {
    #[cfg_attr(not(feature = "mutations"), allow(unused_mut))]
    let mut replica = Replica::open(spec.replica.clone(), recovered, machine);
    #[cfg(feature = "mutations")]
    {
        if mutations.trusted_gate_off {
            replica.disable_trusted_gate();
        }
        if mutations.old_quorum_off {
            replica.disable_old_quorum();
        }
    }
    #[cfg(not(feature = "mutations"))]
    let _ = mutations;
    replica
}

/// A copy that has not entered any view since it was placed: it awaits its
/// state transfer, or installed one (a log no view vouches for) and stopped
/// before adopting a view. Either way its superblock's view is still zero and
/// says nothing of the epoch it joined at, which the opener must supply.
fn never_entered_a_view(recovery: &Recovery) -> bool {
    recovery.durable.view == ViewId::ZERO
        && (recovery.awaiting_state_transfer || recovery.durable.log_unsettled)
}
