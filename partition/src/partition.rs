//! [`Partition`]: one partition replica's storage, opened from its directory.
//! This module holds opening, closing, reads and accessors; writes and their
//! completions live in [`crate::writes`], the cut in [`crate::cut`],
//! quarantine and state transfer in their own modules.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

use strand_wire::{ConfirmPolicy, Durability, Msg, PrepareHeader};

use crate::cursors::CursorLog;
use crate::disk::Disk;
use crate::durable_mark::{DurableMark, ROTATE_BYTES};
use crate::error::{FailedSwap, PartitionError};
use crate::io::Io;
use crate::layout::{
    cursors_log_path, install_marker_path, parse_segment_name, rebuilt_path, records_dir,
    segment_path, superblock_path,
};
use crate::log_reads::FetchedBatch;
use crate::log_recovery::{LogFindings, recover_log};
use crate::quarantine::{Quarantined, finish_interrupted_fence};
use crate::record_log::{LogConfig, RecordLog};
use crate::recovery::Recovery;
use crate::superblock::{self, CopyRead, Superblock, read_copy};
use crate::transfer::finish_interrupted_install;
use crate::writes::{Completed, SuperblockWriter};

/// Default number of committed headers reported at open (consensus keeps as
/// many committed slots in its journal).
pub const HEADERS_COMMITTED_MAX_DEFAULT: usize = 256;

/// Where one entry's frame lies: its segment file, the byte it starts at,
/// and its length (frame header included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryLocation {
    /// The segment file.
    pub path: PathBuf,
    /// Where the frame starts.
    pub position: u64,
    /// Frame bytes (8-byte frame header and payload).
    pub frame_len: u64,
}

/// How a partition is laid out and who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionConfig {
    /// This replica's index (used when the partition is created).
    pub replica: u8,
    /// The durability policy (used when the partition is created).
    pub durability: Durability,
    /// The confirm policy (used when the partition is created).
    pub confirm: ConfirmPolicy,
    /// Segment and index layout.
    pub log: LogConfig,
    /// Committed headers reported at open, below the uncommitted ones.
    pub headers_committed_max: usize,
    /// A replica joining a group that already has history (a reassignment
    /// added it): when the partition is created, it is created awaiting a
    /// state transfer, so that a restart before the transfer finished still
    /// knows its empty log is not the group's.
    pub create_awaiting_transfer: bool,
    /// The node's boot number: counted by its driver, durably, once per
    /// process start before any partition opens (0: no count kept). The
    /// clean-shutdown mark names the boot it was written in and is honoured
    /// only in the next, so opening a cleanly closed partition writes and
    /// syncs nothing; without a count, open clears the mark with a write.
    pub boot: u64,
    /// A write or sync of this partition failed earlier in this process, and
    /// it is opened again: a failed sync may leave bytes in the page cache
    /// that never reached the disk (and a later sync does not retry them),
    /// so reads would show them whole. What the last segment holds past the
    /// superblock's durable checkpoint is then cut at open, its ops marked
    /// as maybe acked first (never nacked; the log untrusted until a view
    /// change settles it), and its peers supply them again.
    pub drop_unsynced: bool,
    /// Bytes a durable-mark file takes before the marks move to the other
    /// (see `durable_mark`): [`ROTATE_BYTES`], smaller in the simulator so
    /// that its short runs move them too.
    pub durable_mark_rotate_bytes: u64,
}

impl Default for PartitionConfig {
    fn default() -> PartitionConfig {
        PartitionConfig {
            replica: 0,
            durability: Durability::Persisted,
            confirm: ConfirmPolicy::MajorityDurable,
            log: LogConfig::default(),
            headers_committed_max: HEADERS_COMMITTED_MAX_DEFAULT,
            create_awaiting_transfer: false,
            boot: 0,
            drop_unsynced: false,
            durable_mark_rotate_bytes: ROTATE_BYTES,
        }
    }
}

/// Whether a superblock's clean-shutdown mark holds at an open in node boot
/// `boot`: it was written in the boot just before, or in this one (a close
/// and a reopen in one process; any boot without a count). A mark from an
/// older boot was opened since, in a boot that did not end cleanly.
fn marked_clean(superblock: &Superblock, boot: u64) -> bool {
    superblock.clean_shutdown
        && (boot == 0 || superblock.clean_boot + 1 == boot || superblock.clean_boot == boot)
}

/// Whether an open that found its mark holding may leave it on disk: only
/// a mark of the boot before, which no later boot honours (a mark of this
/// boot would still hold at the next one, after whatever this open leads to).
fn mark_expires_by_itself(superblock: &Superblock, boot: u64) -> bool {
    boot > 0 && superblock.clean_boot + 1 == boot
}

/// Recovery rules a mutation run of the simulator switches off at open, to
/// show that it catches the loss each one prevents. Honoured only in builds
/// with the `mutations` feature ([`Partition::open_or_fence_mutated`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenMutations {
    /// A log ending in damaged bytes is cut as a plain torn write, without
    /// first marking its ops maybe acked (a damaged acked entry is then
    /// counted as never had).
    pub trust_damaged_tail: bool,
    /// The durable mark is not read at open: the ops it names that the log
    /// lacks count as never had. The mark is a second guard against the
    /// loss the other switches show (it remembers the ops they make a
    /// replica forget), so their runs turn it off too.
    pub ignore_durable_mark: bool,
    /// An open after a crash rewrites the other superblock copy without
    /// first syncing the chosen one (which a crashed process may have left
    /// in the page cache only).
    pub superblock_unsynced: bool,
}

/// An open that failed, with the disk when it can be used again.
struct FailedOpen<D> {
    error: PartitionError,
    disk: Option<D>,
}

impl<D> From<PartitionError> for FailedOpen<D> {
    fn from(error: PartitionError) -> Self {
        FailedOpen { error, disk: None }
    }
}

impl<D> From<FailedOpen<D>> for FailedSwap<D> {
    fn from(failed: FailedOpen<D>) -> Self {
        FailedSwap {
            error: failed.error,
            disk: failed.disk,
        }
    }
}

/// Whether a partition is stored at `dir`: its directory, or a swap a crash
/// interrupted that the next open finishes into it (a quarantine's rebuild,
/// a state transfer's install).
pub fn partition_present<D: Disk>(disk: &mut D, dir: &Path) -> bool {
    disk.exists(dir) || disk.exists(&rebuilt_path(dir)) || disk.exists(&install_marker_path(dir))
}

/// Finishes an interrupted quarantine or state-transfer swap, then reads the
/// superblock, creating one when there is none; `true` when the partition is
/// new.
fn read_or_create_superblock<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    config: PartitionConfig,
    mutations: OpenMutations,
) -> Result<(Superblock, bool), PartitionError> {
    finish_interrupted_fence(&mut io.disk, dir)?;
    finish_interrupted_install(&mut io.disk, dir)?;
    let copies = [
        read_copy(&mut io.disk, dir, 0)?,
        read_copy(&mut io.disk, dir, 1)?,
    ];
    let fresh = matches!(copies, [CopyRead::Absent, CopyRead::Absent]);
    let superblock = match superblock::choose(dir, copies)? {
        Some(superblock) => superblock,
        None => create(io, dir, config)?,
    };
    let unsynced = cfg!(feature = "mutations") && mutations.superblock_unsynced;
    if !fresh && (config.drop_unsynced || !superblock.clean_shutdown) && !unsynced {
        // A crashed process may have left the chosen copy in the page cache
        // only; the open rewrites the other copy next. Were the chosen one
        // lost to a power loss after that, neither copy would hold this state
        // (or neither would be whole), so it is made durable first: written
        // again, not just synced, since an fsync that failed in this process
        // or a crashed one may have left it in the page cache marked clean.
        rewrite_chosen_copy(io, dir, &superblock)?;
    }
    Ok((superblock, fresh))
}

/// At an open after a crash, or after a failed write or sync in this
/// process: the chosen copy may be what a failed fsync left in the page
/// cache, marked clean, which no later sync writes (a power loss then takes
/// it, and with the other copy rewritten next, neither would be whole). Its
/// bytes are written again and synced, which makes them durable; a crash in
/// between leaves the other copy, untouched and durable, whose state the
/// failed write never reported persisted.
fn rewrite_chosen_copy<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    superblock: &Superblock,
) -> Result<(), PartitionError> {
    let path = superblock_path(dir, superblock.copy());
    let bytes = io
        .disk
        .read_file(&path)
        .map_err(|error| PartitionError::io(&path, "read the superblock", &error))?
        .unwrap_or_default();
    io.disk
        .write_at(&path, 0, &bytes)
        .map_err(|error| PartitionError::io(&path, "rewrite the superblock", &error))
}

/// One partition replica's storage. See the crate docs.
pub struct Partition<D: Disk> {
    pub(crate) dir: PathBuf,
    pub(crate) config: PartitionConfig,
    pub(crate) io: Io<D>,
    pub(crate) log: RecordLog,
    pub(crate) cursors: CursorLog,
    pub(crate) superblock: Superblock,
    pub(crate) writer: SuperblockWriter,
    /// The durable mark (`persisted` partitions only).
    pub(crate) mark: DurableMark,
    pub(crate) events: VecDeque<Completed>,
    /// The ops of the readable machine snapshot copies, by copy.
    pub(crate) machine_snapshot_ops: [Option<u64>; 2],
}

impl<D: Disk> Partition<D> {
    /// Opens the partition at `dir` (creating it when nothing is there),
    /// recovers it, and reports what it found. Finishes an interrupted
    /// state-transfer swap first.
    pub fn open(
        disk: D,
        dir: &Path,
        config: PartitionConfig,
    ) -> Result<(Partition<D>, Recovery), PartitionError> {
        Partition::open_handing_back(disk, dir, config, OpenMutations::default())
            .map_err(|failed| failed.error)
    }

    /// [`Partition::open`], except that a partition whose record log
    /// contradicts itself ([`PartitionError::LogInconsistent`]: damage the
    /// walk cannot number) is fenced and recreated awaiting a state transfer
    /// ([`Partition::fence_unopenable`]) instead of refused: what a node
    /// does, so that one replica's unreadable log costs a transfer from its
    /// peers and not the group's replica.
    pub fn open_or_fence(
        disk: D,
        dir: &Path,
        config: PartitionConfig,
    ) -> Result<(Partition<D>, Recovery, Option<Quarantined>), PartitionError> {
        Partition::open_or_fence_with(disk, dir, config, OpenMutations::default())
    }

    /// [`Partition::open_or_fence`] with recovery rules switched off.
    #[cfg(feature = "mutations")]
    pub fn open_or_fence_mutated(
        disk: D,
        dir: &Path,
        config: PartitionConfig,
        mutations: OpenMutations,
    ) -> Result<(Partition<D>, Recovery, Option<Quarantined>), PartitionError> {
        Partition::open_or_fence_with(disk, dir, config, mutations)
    }

    fn open_or_fence_with(
        disk: D,
        dir: &Path,
        config: PartitionConfig,
        mutations: OpenMutations,
    ) -> Result<(Partition<D>, Recovery, Option<Quarantined>), PartitionError> {
        match Partition::open_handing_back(disk, dir, config, mutations) {
            Ok((partition, recovery)) => Ok((partition, recovery, None)),
            Err(FailedOpen {
                error: error @ PartitionError::LogInconsistent { .. },
                disk: Some(disk),
            }) => {
                tracing::error!(dir = %dir.display(), %error, "partition: the record log cannot be opened");
                let (partition, recovery, quarantined) =
                    Partition::fence_unopenable(disk, dir, config)
                        .map_err(|failed| failed.error)?;
                Ok((partition, recovery, Some(quarantined)))
            }
            Err(failed) => Err(failed.error),
        }
    }

    /// The open; a log the walk refuses hands the disk back for fencing.
    fn open_handing_back(
        disk: D,
        dir: &Path,
        config: PartitionConfig,
        mutations: OpenMutations,
    ) -> Result<(Partition<D>, Recovery), FailedOpen<D>> {
        let mut io = Io::new(disk);
        if io.disk.exists(&crate::layout::fence_request_path(dir)) {
            return Err(FailedOpen {
                error: PartitionError::LogInconsistent {
                    op: 0,
                    reason: "a repair found the log laid out otherwise than its open inferred"
                        .to_owned(),
                },
                disk: Some(io.disk),
            });
        }
        let (mut superblock, fresh) =
            match read_or_create_superblock(&mut io, dir, config, mutations) {
                Ok(read) => read,
                Err(error) => {
                    return Err(FailedOpen {
                        error,
                        disk: Some(io.disk),
                    });
                }
            };
        // The log's recovery may rewrite the superblock (a damaged tail's
        // mark): the report still names the one read.
        let read_sequence = superblock.sequence;
        let (log, log_findings) =
            match recover_log(&mut io, dir, &mut superblock, config, mutations) {
                Ok(recovered) => recovered,
                Err(error) => {
                    return Err(FailedOpen {
                        error,
                        disk: Some(io.disk),
                    });
                }
            };
        let (partition, mut recovery) =
            Partition::finish_open(io, dir, config, superblock, fresh, log, log_findings)?;
        recovery.superblock_sequence = read_sequence;
        Ok((partition, recovery))
    }

    /// [`Partition::open`] for the end of an operation that consumed the
    /// partition: a failure hands the disk back.
    pub(crate) fn open_or_hand_back(
        disk: D,
        dir: &Path,
        config: PartitionConfig,
    ) -> Result<(Partition<D>, Recovery), FailedSwap<D>> {
        Partition::open_handing_back(disk, dir, config, OpenMutations::default())
            .map_err(FailedSwap::from)
    }

    /// Closes what the partition holds open, ignoring failures (an operation
    /// that failed hands the disk back for a reopen), and returns the disk.
    pub(crate) fn release(mut self) -> D {
        if self.settle().is_ok() {
            self.close_superblock_copies();
        }
        let _ = self.log.close(&mut self.io);
        let _ = self.cursors.close(&mut self.io);
        let _ = self.mark.close(&mut self.io);
        self.io.disk
    }

    /// Under `persisted`, the durable mark: appended again after an
    /// unclean stop (its newest frame may be page-cache-only bytes).
    fn open_durable_mark(
        &mut self,
        fresh: bool,
        clean_shutdown: bool,
    ) -> Result<(), PartitionError> {
        if self.superblock.durability != Durability::Persisted {
            return Ok(());
        }
        let (mark, _) = DurableMark::open(
            &mut self.io,
            &self.dir,
            self.log.op,
            self.config.durable_mark_rotate_bytes,
            !fresh && !clean_shutdown,
        )?;
        self.mark = mark;
        Ok(())
    }

    /// What the open found and left, for the replica and the operator.
    fn recovery_of(
        &self,
        superblock: &Superblock,
        fresh: bool,
        clean_shutdown: bool,
        log_findings: LogFindings,
        cursor_findings: crate::CursorFindings,
    ) -> Recovery {
        Recovery {
            fresh,
            recovered_from_disk: !fresh,
            clean_shutdown,
            stopped_in_view: clean_shutdown && superblock.stopped_in_view,
            durable: superblock.durable.clone(),
            replica: superblock.replica,
            durability: superblock.durability,
            confirm: superblock.confirm,
            superblock_sequence: superblock.sequence,
            op_checkpoint: superblock.op_checkpoint,
            headers: log_findings.headers,
            faulty: self.log.faulty.iter().copied().collect(),
            op: self.log.op,
            head_op: self.log.head_op,
            head_offset: self.log.head_offset,
            offset_end: self.log.offset_end,
            cursor_tail: self.cursors.tail,
            awaiting_state_transfer: superblock.awaiting_state_transfer,
            retired_epoch: superblock.retired_epoch,
            torn_bytes_cut: log_findings.torn_bytes_cut,
            damaged_tail_from: log_findings.damaged_tail_from,
            unsynced_dropped_from: log_findings.unsynced_dropped_from,
            lost_tail_from: log_findings.lost_tail_from,
            damage: log_findings.damage,
            indexes_rebuilt: log_findings.indexes_rebuilt,
            cursors: cursor_findings,
        }
    }

    /// The rest of the open, once the record log is recovered.
    fn finish_open(
        io: Io<D>,
        dir: &Path,
        config: PartitionConfig,
        superblock: Superblock,
        fresh: bool,
        log: RecordLog,
        log_findings: LogFindings,
    ) -> Result<(Partition<D>, Recovery), FailedOpen<D>> {
        let (mut io, mut log) = (io, log);
        let trusted_cursor_tail = config.drop_unsynced.then_some(superblock.cursor_checkpoint);
        let (cursors, cursor_findings) = match CursorLog::open(&mut io, dir, trusted_cursor_tail) {
            Ok(opened) => opened,
            Err(error) => {
                let _ = log.close(&mut io);
                return Err(FailedOpen {
                    error,
                    disk: Some(io.disk),
                });
            }
        };
        let mut partition = Partition {
            dir: dir.to_path_buf(),
            config,
            io,
            log,
            cursors,
            superblock: superblock.clone(),
            writer: SuperblockWriter::default(),
            mark: DurableMark::default(),
            events: VecDeque::new(),
            machine_snapshot_ops: [None, None],
        };
        let mut cursor_findings = cursor_findings;
        cursor_findings.cursors_clamped = partition.cursors.clamp(partition.log.offset_end);
        // A reopen after a failed write is never one after a clean stop,
        // whatever mark the superblock holds from this boot's start (the
        // close before it may have failed before clearing it): its log was
        // just cut, and a replica that resumed in its view as if nothing
        // was lost would prepare again at ops it had sent before.
        let clean_shutdown = marked_clean(&superblock, config.boot) && !config.drop_unsynced;
        let untouched = log_findings.torn_bytes_cut == 0
            && log_findings.damage.is_empty()
            && partition.log.faulty.is_empty();
        let durable = crate::machine_snapshot::copy_ops(&mut partition.io.disk, dir)
            .map(|ops| partition.machine_snapshot_ops = ops)
            .and_then(|()| partition.make_open_durable(fresh, clean_shutdown, untouched))
            .and_then(|()| partition.open_durable_mark(fresh, clean_shutdown));
        if let Err(error) = durable {
            return Err(FailedOpen {
                error,
                disk: Some(partition.release()),
            });
        }
        let recovery = partition.recovery_of(
            &superblock,
            fresh,
            clean_shutdown,
            log_findings,
            cursor_findings,
        );
        tracing::info!(dir = %dir.display(), fresh, op = recovery.op, faulty = recovery.faulty.len(),
            clean_shutdown = recovery.clean_shutdown, "partition: opened");
        Ok((partition, recovery))
    }

    /// The open's durable steps: what a crash may have left unsynced is
    /// written again and synced, and the superblock is rewritten unless the open changed
    /// nothing and a mark left in place expires by itself. A partition
    /// created just now holds nothing a crash could have left unsynced, and
    /// its superblock is the one `create` made durable: opening it writes
    /// nothing more.
    fn make_open_durable(
        &mut self,
        fresh: bool,
        clean_shutdown: bool,
        untouched: bool,
    ) -> Result<(), PartitionError> {
        let boot = self.config.boot;
        if !clean_shutdown && !fresh {
            // Not a sync alone: a failed one may have left bytes a sync no
            // longer writes (see `unsynced`). Not needed after a clean
            // shutdown: its close synced every file before it wrote the mark.
            self.rewrite_unsynced_tails()?;
        } else if !fresh {
            self.rewrite_intended_spans(false)?;
        }
        let settled = fresh && untouched;
        let mark_stays =
            clean_shutdown && untouched && mark_expires_by_itself(&self.superblock, boot);
        if !settled && !mark_stays {
            self.write_superblock_now(|_| {})?;
        }
        Ok(())
    }

    /// Shuts down cleanly: waits for every write, syncs and closes every file,
    /// then writes the clean-shutdown mark. Returns the disk.
    pub fn close(self) -> Result<D, PartitionError> {
        self.close_marking(true, false)
    }

    /// Shuts down like [`Partition::close`], and marks that the replica
    /// stopped serving in its view (its driver checked that nothing it sent
    /// is missing from this log): it may resume there.
    pub fn close_in_view(self) -> Result<D, PartitionError> {
        self.close_marking(true, true)
    }

    /// Shuts down like [`Partition::close`] but without the clean-shutdown
    /// mark: for a replica whose log is untrusted (it has not yet recovered
    /// from an earlier crash), which must stay untrusted across the restart.
    pub fn close_unmarked(self) -> Result<D, PartitionError> {
        self.close_marking(false, false)
    }

    fn close_marking(
        mut self,
        clean_shutdown: bool,
        stopped_in_view: bool,
    ) -> Result<D, PartitionError> {
        let boot = self.config.boot;
        self.settle()?;
        self.log.close(&mut self.io)?;
        self.cursors.close(&mut self.io)?;
        self.mark.close(&mut self.io)?;
        self.settle()?;
        self.write_superblock_now(|superblock| {
            superblock.clean_shutdown = clean_shutdown;
            superblock.stopped_in_view = stopped_in_view;
            superblock.clean_boot = boot;
        })?;
        self.close_superblock_copies();
        tracing::info!(
            dir = %self.dir.display(),
            op = self.log.op,
            clean_shutdown,
            stopped_in_view,
            "partition: closed"
        );
        Ok(self.io.disk)
    }

    /// Gives the disk back without syncing or closing anything: what a crash
    /// leaves. Tests and the simulator crash the disk next
    /// ([`crate::MemoryDisk::crash`]); a [`crate::FileDisk`] closes its WAL
    /// files when dropped.
    pub fn abandon(self) -> D {
        self.io.disk
    }

    /// The disk (to look at an in-memory one's files).
    pub fn disk(&self) -> &D {
        &self.io.disk
    }

    /// The disk (to inject faults into an in-memory one).
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.io.disk
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The log's head op (0 when empty).
    pub fn op(&self) -> u64 {
        self.log.op
    }

    /// The highest op reported durable (appends: in the log and, under
    /// `persisted`, covered by the durable mark), or the head at open.
    pub fn durable_op(&self) -> u64 {
        self.log.durable_op.min(self.mark.durable_op())
    }

    /// The commit number the latest superblock holds (retention never drops
    /// the op it names, nor any after it).
    pub fn persisted_commit(&self) -> u64 {
        self.superblock.durable.commit
    }

    /// The first retained op.
    pub fn head_op(&self) -> u64 {
        self.log.head_op
    }

    /// The first retained record offset (a fetch reply's `log_start_offset`).
    pub fn head_offset(&self) -> u64 {
        self.log.head_offset
    }

    /// One past the log's last record offset. The high watermark (committed
    /// records) is the caller's to apply.
    pub fn offset_end(&self) -> u64 {
        self.log.offset_end
    }

    /// Ops whose entries are damaged or missing, ascending.
    pub fn faulty(&self) -> Vec<u64> {
        self.log.faulty.iter().copied().collect()
    }

    /// Where op `op`'s frame lies on disk, if the log holds it readable: for
    /// tests and the simulator, which damage it on purpose.
    pub fn entry_location(&self, op: u64) -> Option<EntryLocation> {
        let (segment, meta) = self.log.entry(op)?;
        (!meta.damaged && meta.frame_len > 0).then(|| EntryLocation {
            path: self.log.path_of(segment),
            position: meta.position,
            frame_len: meta.frame_len,
        })
    }

    /// The checksum of op `op`'s prepare, when the log knows it.
    pub fn checksum(&self, op: u64) -> Option<u32> {
        self.log.checksum_of(op)
    }

    /// The latest superblock written or being written.
    pub fn superblock(&self) -> &Superblock {
        &self.superblock
    }

    /// Whether a superblock write is in flight or queued: until it is not,
    /// [`Partition::superblock`] may not be what a crash leaves.
    pub fn superblock_writing(&self) -> bool {
        self.writer.busy()
    }

    /// The number of segments (sealed and active).
    pub fn segment_count(&self) -> usize {
        self.log.segments.len()
    }

    /// The first record offsets of the segments (their file names).
    pub fn segment_offsets(&self) -> Vec<u64> {
        self.log
            .segments
            .iter()
            .map(|segment| segment.first_offset)
            .collect()
    }

    /// The cursor event log's length.
    pub fn cursor_tail(&self) -> u64 {
        self.cursors.tail
    }

    /// The cursor event log's durable length.
    pub fn cursor_durable_tail(&self) -> u64 {
        self.cursors.durable_tail
    }

    /// Where the cursor snapshot's boundary is.
    pub fn cursor_snapshot_covers(&self) -> u64 {
        self.cursors.snapshot_covers()
    }

    /// The first cursor event the log can still ship.
    pub fn cursor_log_start(&self) -> u64 {
        self.cursors.log_start()
    }

    /// `consumer`'s cursor.
    pub fn cursor(&self, consumer: &str) -> Option<u64> {
        self.cursors.map.get(consumer).copied()
    }

    /// Every cursor.
    pub fn cursors(&self) -> &BTreeMap<String, u64> {
        &self.cursors.map
    }

    /// Reads op `op`'s prepare, validated, exactly as it was written (to serve
    /// a peer's repair). `None` when the log holds no good copy.
    pub fn read_prepare(&mut self, op: u64) -> Result<Option<Msg<PrepareHeader>>, PartitionError> {
        self.log.read_prepare(&mut self.io, op)
    }

    /// Reads the headers of the readable ops in `op_min..=op_max`.
    pub fn read_headers(
        &mut self,
        op_min: u64,
        op_max: u64,
    ) -> Result<Vec<PrepareHeader>, PartitionError> {
        assert!(op_min <= op_max, "empty header range {op_min}..={op_max}");
        self.log.read_headers(&mut self.io, op_min, op_max)
    }

    /// Reads record batches from `offset`: the batch holding it first, then
    /// more until `max_bytes` are in (at least one when any is there).
    pub fn fetch(
        &mut self,
        offset: u64,
        max_bytes: u64,
    ) -> Result<Vec<FetchedBatch>, PartitionError> {
        self.log.fetch(&mut self.io, offset, max_bytes)
    }

    /// The first record offset whose prepare is at or after `timestamp_ns`.
    pub fn offset_for_timestamp(&self, timestamp_ns: u64) -> Option<u64> {
        self.log.offset_for_timestamp(timestamp_ns)
    }

    /// Cursor events `from..to`, to ship to a backup.
    pub fn read_cursor_events(
        &mut self,
        from: u64,
        to: u64,
    ) -> Result<Vec<strand_wire::ops::CursorEvent>, PartitionError> {
        self.cursors.read_events(&mut self.io, from, to)
    }

    /// Waits until nothing the partition submitted is outstanding.
    pub(crate) fn settle(&mut self) -> Result<(), PartitionError> {
        loop {
            self.process_stash();
            if !self.io.outstanding() && !self.writer.busy() {
                return Ok(());
            }
            self.io.wait_once()?;
        }
    }
}

/// Creates a partition directory with its first superblock.
fn create<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    config: PartitionConfig,
) -> Result<Superblock, PartitionError> {
    let leftovers = io
        .disk
        .list_dir(&records_dir(dir))
        .map_err(|error| PartitionError::io(dir, "list segments", &error))?;
    let has_log = leftovers
        .iter()
        .any(|name| parse_segment_name(name).is_some())
        || io.disk.exists(&cursors_log_path(dir));
    if has_log {
        return Err(PartitionError::SuperblockUnreadable {
            dir: dir.to_path_buf(),
            copy0: "absent".to_owned(),
            copy1: "absent, yet the partition has a log".to_owned(),
        });
    }
    io.disk
        .create_dir_all(&records_dir(dir))
        .map_err(|error| PartitionError::io(dir, "create the partition directory", &error))?;
    let mut superblock = Superblock::fresh(config.replica, config.durability, config.confirm);
    superblock.awaiting_state_transfer = config.create_awaiting_transfer;
    superblock::write_now(&mut io.disk, dir, &superblock)?;
    // The second copy exists from the start, empty: it reads as invalid
    // beside the valid first one (written before it, so a crash in between
    // leaves a partition that opens). The first asynchronous write to it,
    // usually a view change's when a node's groups fail over together, then
    // opens it instead of creating it and syncing the directory on the
    // node's WAL thread, one group after the other.
    let second = superblock_path(dir, 1);
    io.disk.write_at(&second, 0, &[]).map_err(|error| {
        PartitionError::io(&second, "create the second superblock copy", &error)
    })?;
    let first = segment_path(dir, 0);
    io.disk
        .write_at(&first, 0, &[])
        .map_err(|error| PartitionError::io(&first, "create the first segment", &error))?;
    tracing::info!(dir = %dir.display(), "partition: created");
    Ok(superblock)
}
