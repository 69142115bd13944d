//! Opening a group's actor: its partition directory (renamed from a
//! legacy name once), its storage on the node's WAL writer and read
//! descriptors, its host, and for group 0 the metadata plane's duties.

use std::sync::{Arc, Mutex};

use strand_consensus::{Config, Timeouts};
use strand_host::group_host::{GroupHost, HostSpec, OpenError};
use strand_partition::{FileDisk, LogConfig, PartitionConfig, ReadHandles};
use strand_wal::Wal;
use tokio::sync::mpsc::UnboundedSender;

use super::Actor;
use crate::group::parked::ParkedFetches;
use crate::group::publishing::Publishing;
use crate::group::spec::GroupSpec;
use crate::metadata::hosted::Hosted;
use crate::metadata::plane::MetadataPlane;
use crate::metrics;
use crate::net::outbox::Outbox;
use crate::runtime::inbox::GroupInbox;
use crate::runtime::input::Input;
use crate::shared::Shared;

/// Bytes per segment of the metadata plane's log: small, so that the
/// segments below a catalog snapshot can go soon after it (a segment goes
/// only whole).
const METADATA_SEGMENT_BYTES: u64 = 256 << 10;

impl Actor {
    /// Opens the group's storage and its host. `hosted` receives, from the
    /// metadata plane's actor only, every partition assignment this node
    /// hosts.
    pub fn open(
        shared: Arc<Shared>,
        wal: Wal,
        spec: GroupSpec,
        inbox: GroupInbox,
        outbox: Arc<Mutex<Outbox>>,
        hosted: Option<UnboundedSender<Hosted>>,
    ) -> Result<Actor, OpenError> {
        assert!(
            hosted.is_none() || spec.group == 0,
            "group {}: only the metadata plane's replica tells the node what it hosts",
            spec.group
        );
        let me = shared.config.node;
        let Some(replica) = spec.slot_of(me) else {
            return Err(OpenError::NotPlaced(format!(
                "node {me} holds no slot of group {}",
                spec.group
            )));
        };
        adopt_legacy_dir(&spec, &shared.config.data_dir)?;
        let host = open_host(&shared, &host_spec(&shared, &spec, replica), &wal, inbox)?;
        let plane = (spec.group == 0).then(|| MetadataPlane::open(&shared, &host, hosted));
        let label = spec.group.to_string();
        Ok(Actor {
            shared,
            spec,
            wal,
            host,
            outputs: Vec::new(),
            committed_unhandled: false,
            outbox,
            parked: ParkedFetches::default(),
            plane,
            epoch_reported: 0,
            produce_started: Default::default(),
            write_queued: Default::default(),
            untrusted_reported: false,
            stopping: false,
            commit_gauge: metrics::commit_op_gauge(&label),
            label,
            publishing: Publishing::default(),
        })
    }
}

/// What the host of `spec`'s group is opened with, as `replica` of it on
/// this node.
fn host_spec(shared: &Shared, spec: &GroupSpec, replica: u8) -> HostSpec {
    let me = shared.config.node;
    HostSpec {
        replica: Config {
            cluster: shared.config.cluster,
            group: spec.group,
            replica,
            memberships: spec.memberships.clone(),
            durability: spec.durability,
            cursor_durability: spec.cursor_durability,
            timeouts: Timeouts::default(),
            seed: spec.group ^ (u64::from(me) << 32),
        },
        confirm: spec.confirm,
        dir: spec.dir.clone(),
        catalog_nodes: (spec.group == 0).then(|| spec.slots.iter().flatten().copied().collect()),
        storage: partition_config(spec, shared.boot),
        retention: spec.retention,
    }
}

/// Opens the host on the node's WAL writer and read descriptors; its
/// storage completions wake the actor behind `inbox`.
fn open_host(
    shared: &Shared,
    host_spec: &HostSpec,
    wal: &Wal,
    inbox: GroupInbox,
) -> Result<GroupHost<FileDisk>, OpenError> {
    let read_handles = shared.read_handles.clone();
    let disk = disk_for(wal, &read_handles, &inbox);
    let reopen_wal = wal.clone();
    let (mut host, recovery) = GroupHost::open(
        host_spec,
        disk,
        Box::new(move || disk_for(&reopen_wal, &read_handles, &inbox)),
    )?;
    metrics::storage_found(&recovery);
    host.set_cursor_consumers_max(shared.config.cursor_consumers_per_partition_max);
    Ok(host)
}

/// Moves a partition directory from before directories named their group
/// (`<topic>/<partition>`) to its current name, once, when the partition
/// opens. Its quarantined copies keep their old names.
fn adopt_legacy_dir(spec: &GroupSpec, data_dir: &std::path::Path) -> Result<(), OpenError> {
    if spec.group == 0 || spec.dir.exists() {
        return Ok(());
    }
    let legacy = strand_partition::layout::legacy_partition_dir(
        data_dir,
        &spec.stream,
        &spec.topic,
        spec.partition,
    );
    if !legacy.is_dir() {
        return Ok(());
    }
    std::fs::rename(&legacy, &spec.dir)
        .map_err(|error| strand_partition::PartitionError::io(&legacy, "rename", &error))?;
    tracing::info!(group = spec.group, from = %legacy.display(), to = %spec.dir.display(),
        "group: partition directory renamed to carry its group id");
    Ok(())
}

/// The partition layout a group's spec asks for: its topic's segment size
/// (or the default; the metadata plane's small one), opened in this node
/// boot.
fn partition_config(spec: &GroupSpec, boot: u64) -> PartitionConfig {
    let defaults = PartitionConfig::default();
    let segment_bytes_max = match spec.segment_bytes {
        _ if spec.group == 0 => METADATA_SEGMENT_BYTES,
        0 => defaults.log.segment_bytes_max,
        bytes => bytes,
    };
    PartitionConfig {
        boot,
        drop_unsynced: spec.after_failed_write,
        log: LogConfig {
            segment_bytes_max,
            ..defaults.log
        },
        ..defaults
    }
}

/// A disk on `wal`, reading through the node's `read_handles`, whose
/// completions wake the actor behind `inbox`.
fn disk_for(wal: &Wal, read_handles: &ReadHandles, inbox: &GroupInbox) -> FileDisk {
    let inbox = inbox.clone();
    let notify = move || {
        // A full inbox is about to be drained anyway; storage is polled
        // after every input.
        let _ = inbox.try_send(Input::Storage);
    };
    FileDisk::with_notify(wal.clone(), notify).with_read_handles(read_handles.clone())
}
