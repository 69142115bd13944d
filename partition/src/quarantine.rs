//! Quarantine: when a replica adopts a view that contradicts history it
//! already applied, its partition directory is moved aside to
//! `<dir>.fenced.N` (the next number after the highest in use; the parent
//! directory synced) and **never deleted**. A fresh directory is rebuilt from
//! the op both histories agree on: whole segments at or below it are hard
//! links into the fenced copy, the segment holding it is copied up to it, and
//! the superblock marks the partition as awaiting the state transfer that
//! brings the rest (with the fenced partition's views, which never go back).
//!
//! Crash safety: the rebuild is made complete at `<dir>.rebuilt`, superblock
//! last, before anything moves; then two durable renames swap it in. An open
//! finds at most a rebuild beside a missing partition (swapped in) or beside
//! the old one (removed): never a directory without a superblock, which
//! would open as a fresh partition at view 0.
//!
//! Files shared with the fenced copy are never written: the last rebuilt
//! segment (which becomes the active one) is always a copy, a segment with
//! damage is copied, and truncating a sealed segment replaces its file.

use std::path::{Path, PathBuf};

use crate::disk::Disk;
use crate::error::{FailedSwap, PartitionError};
use crate::layout::{
    fenced_path, file_name, index_path, parent_dir, parse_fenced_name, rebuilt_path, records_dir,
    segment_path,
};
use crate::partition::Partition;
use crate::recovery::Recovery;
use crate::superblock::{self, SealedSegment, Superblock};

/// Where a quarantined copy went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// The fenced directory.
    pub fenced_dir: PathBuf,
    /// Its number N in `<dir>.fenced.N`.
    pub fenced_number: u64,
    /// The op the rebuilt partition ends at.
    pub agreed_op: u64,
    /// Segments hard-linked from the fenced copy.
    pub segments_linked: usize,
    /// Segments copied (wholly or up to the agreed op).
    pub segments_copied: usize,
}

/// How one segment of the agreed prefix is rebuilt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rebuild {
    Link,
    Copy { len_bytes: u64 },
}

#[derive(Debug, Clone, Copy)]
struct PlannedSegment {
    first_offset: u64,
    first_op: u64,
    how: Rebuild,
}

/// The rebuilt partition's shape.
#[derive(Debug, Clone)]
struct Plan {
    segments: Vec<PlannedSegment>,
    agreed_op: u64,
    head_op: u64,
    head_offset: u64,
    head_parent_checksum: u32,
}

impl<D: Disk> Partition<D> {
    /// Moves this partition aside to `<dir>.fenced.N` and rebuilds it from
    /// `agreed_op` (a `Quarantine` effect). The returned partition reports
    /// `awaiting_state_transfer`; install a state transfer next. On failure
    /// the disk comes back; reopening it finds the partition as it was, or
    /// finishes the swap when it had begun.
    pub fn quarantine(
        mut self,
        agreed_op: u64,
    ) -> Result<(Partition<D>, Recovery, Quarantined), FailedSwap<D>> {
        let plan = plan(&self, agreed_op.min(self.log.op));
        let superblock = self.superblock.clone();
        let (dir, config) = (self.dir.clone(), self.config);
        if let Err(error) = self.settle() {
            return Err(FailedSwap::with_disk(error, self.release()));
        }
        let mut disk = self.release();
        let swapped = rebuild(&mut disk, &dir, &plan, &superblock)
            .and_then(|(linked, copied)| Ok((swap_rebuilt_in(&mut disk, &dir)?, linked, copied)));
        let ((fenced_dir, fenced_number), linked, copied) = match swapped {
            Ok(swapped) => swapped,
            Err(error) => return Err(FailedSwap::with_disk(error, disk)),
        };
        tracing::warn!(dir = %dir.display(), fenced = %fenced_dir.display(), agreed_op = plan.agreed_op,
            "partition: quarantined; rebuilt from the agreed prefix");
        let (partition, recovery) = Partition::open_or_hand_back(disk, &dir, config)?;
        let quarantined = Quarantined {
            fenced_dir,
            fenced_number,
            agreed_op: plan.agreed_op,
            segments_linked: linked,
            segments_copied: copied,
        };
        Ok((partition, recovery, quarantined))
    }
}

/// The swap that commits a quarantine: the partition goes to the next free
/// `<dir>.fenced.N`, then the complete rebuild at `<dir>.rebuilt` takes its
/// place. Each rename is durable; a crash between them leaves no partition
/// but the rebuild, which the next open swaps in
/// ([`finish_interrupted_fence`]). Returns the fenced directory and N.
fn swap_rebuilt_in<D: Disk>(disk: &mut D, dir: &Path) -> Result<(PathBuf, u64), PartitionError> {
    let rebuilt = rebuilt_path(dir);
    assert!(
        disk.exists(&rebuilt),
        "the rebuild is complete before the swap"
    );
    let fenced_number = next_fenced_number(disk, dir)?;
    let fenced_dir = fenced_path(dir, fenced_number);
    disk.rename(dir, &fenced_dir)
        .map_err(|error| PartitionError::io(dir, "move the partition aside", &error))?;
    disk.rename(&rebuilt, dir)
        .map_err(|error| PartitionError::io(dir, "swap the rebuilt partition in", &error))?;
    Ok((fenced_dir, fenced_number))
}

/// At open: completes a quarantine's swap that a crash interrupted. A
/// rebuild beside a missing partition was complete (the partition is moved
/// aside only after it): it is swapped in. A rebuild beside the partition
/// was never swapped in, and may be incomplete: it is removed, and the
/// partition opens as it was before the quarantine began.
pub fn finish_interrupted_fence<D: Disk>(disk: &mut D, dir: &Path) -> Result<(), PartitionError> {
    let rebuilt = rebuilt_path(dir);
    if !disk.exists(&rebuilt) {
        return Ok(());
    }
    if disk.exists(dir) {
        tracing::warn!(rebuilt = %rebuilt.display(), "partition: removing a quarantine's rebuild never swapped in");
        return disk
            .remove_dir_all(&rebuilt)
            .map_err(|error| PartitionError::io(&rebuilt, "remove an unfinished rebuild", &error));
    }
    tracing::warn!(dir = %dir.display(), "partition: finishing a quarantine a crash interrupted");
    disk.rename(&rebuilt, dir)
        .map_err(|error| PartitionError::io(dir, "swap the rebuilt partition in", &error))
}

/// The next free quarantine number beside `dir`: one past the highest in use.
pub fn next_fenced_number<D: Disk>(disk: &mut D, dir: &Path) -> Result<u64, PartitionError> {
    let parent = parent_dir(dir);
    let name = file_name(dir);
    let entries = disk
        .list_dir(&parent)
        .map_err(|error| PartitionError::io(&parent, "list quarantined copies", &error))?;
    Ok(entries
        .iter()
        .filter_map(|entry| parse_fenced_name(&name, entry))
        .max()
        .map_or(0, |highest| highest + 1))
}

/// Which segments of the log make up the agreed prefix, and how.
fn plan<D: Disk>(partition: &Partition<D>, agreed_op: u64) -> Plan {
    let log = &partition.log;
    if agreed_op + 1 < log.head_op {
        return Plan {
            segments: Vec::new(),
            agreed_op: 0,
            head_op: 1,
            head_offset: 0,
            head_parent_checksum: 0,
        };
    }
    let mut segments = Vec::new();
    for segment in log
        .segments
        .iter()
        .filter(|segment| segment.first_op <= agreed_op)
    {
        let whole = segment.last_op() <= agreed_op;
        let damaged = segment.entries.iter().any(|meta| meta.damaged);
        let how = if whole && !damaged {
            Rebuild::Link
        } else {
            let last = agreed_op.min(segment.last_op());
            let len_bytes = segment
                .entry(last)
                .map_or(0, |meta| meta.end().max(meta.position));
            Rebuild::Copy { len_bytes }
        };
        segments.push(PlannedSegment {
            first_offset: segment.first_offset,
            first_op: segment.first_op,
            how,
        });
    }
    if let Some(last) = segments.last_mut() {
        if last.how == Rebuild::Link {
            let segment = log
                .segments
                .iter()
                .find(|segment| segment.first_offset == last.first_offset)
                .expect("planned from the log");
            last.how = Rebuild::Copy {
                len_bytes: segment.len,
            };
        }
    }
    Plan {
        segments,
        agreed_op,
        head_op: log.head_op,
        head_offset: log.head_offset,
        head_parent_checksum: log.head_parent_checksum,
    }
}

/// Builds the partition that replaces the one at `dir` in `<dir>.rebuilt`
/// (an earlier attempt's leftover removed first), from `dir`'s files:
/// complete, superblock last, before anything is moved. Returns (linked,
/// copied).
fn rebuild<D: Disk>(
    disk: &mut D,
    dir: &Path,
    plan: &Plan,
    previous: &Superblock,
) -> Result<(usize, usize), PartitionError> {
    let rebuilt = rebuilt_path(dir);
    disk.remove_dir_all(&rebuilt)
        .map_err(|error| PartitionError::io(&rebuilt, "remove an unfinished rebuild", &error))?;
    let records = records_dir(&rebuilt);
    disk.create_dir_all(&records)
        .map_err(|error| PartitionError::io(&records, "create the rebuilt partition", &error))?;
    let (mut linked, mut copied) = (0, 0);
    let mut sealed = Vec::new();
    for planned in &plan.segments {
        let from = segment_path(dir, planned.first_offset);
        let to = segment_path(&rebuilt, planned.first_offset);
        let len_bytes = match planned.how {
            Rebuild::Link => {
                disk.hard_link(&from, &to)
                    .and_then(|()| {
                        disk.hard_link(
                            &index_path(dir, planned.first_offset),
                            &index_path(&rebuilt, planned.first_offset),
                        )
                    })
                    .map_err(|error| PartitionError::io(&to, "link a segment", &error))?;
                linked += 1;
                disk.file_len(&to)
                    .map_err(|error| PartitionError::io(&to, "stat a segment", &error))?
                    .unwrap_or(0)
            }
            Rebuild::Copy { len_bytes } => {
                let bytes = disk
                    .read_at(&from, 0, len_bytes as usize)
                    .map_err(|error| PartitionError::io(&from, "read a segment", &error))?;
                disk.write_at(&to, 0, &bytes)
                    .map_err(|error| PartitionError::io(&to, "copy a segment", &error))?;
                copied += 1;
                len_bytes
            }
        };
        sealed.push(SealedSegment {
            first_op: planned.first_op,
            last_op: 0,
            first_offset: planned.first_offset,
            len_bytes,
        });
    }
    // Segments are contiguous: each ends where the next begins.
    for at in 1..sealed.len() {
        sealed[at - 1].last_op = sealed[at].first_op - 1;
    }
    sealed.pop(); // the last one is the active segment
    let superblock = rebuilt_superblock(previous, plan, sealed);
    superblock::write_now(disk, &rebuilt, &superblock)?;
    Ok((linked, copied))
}

/// The rebuilt partition's superblock: same identity, views and history
/// starts; commit and checkpoint at most the agreed op; awaiting a transfer.
fn rebuilt_superblock(
    previous: &Superblock,
    plan: &Plan,
    sealed: Vec<SealedSegment>,
) -> Superblock {
    let mut superblock = previous.clone();
    superblock.sequence = previous.sequence + 1;
    superblock.durable.commit = previous.durable.commit.min(plan.agreed_op);
    superblock.clean_shutdown = false;
    superblock.stopped_in_view = false;
    superblock.awaiting_state_transfer = true;
    superblock.op_checkpoint = plan.agreed_op;
    superblock.cursor_checkpoint = 0;
    superblock.head_op = plan.head_op;
    superblock.head_offset = plan.head_offset;
    superblock.head_parent_checksum = plan.head_parent_checksum;
    superblock.sealed_segments = sealed;
    superblock
}

impl<D: Disk> Partition<D> {
    /// For a partition that cannot be opened ([`PartitionError::LogInconsistent`],
    /// a log without a readable superblock): moves it aside to `<dir>.fenced.N` and creates an empty
    /// partition awaiting a state transfer. The old superblock's views and
    /// history starts are kept when it is readable, so the replica's view
    /// never goes backwards; when it is not, the view starts at 0 and the
    /// replica relies on consensus never letting a replica awaiting a transfer
    /// vote or ack. The empty partition is built complete beside the old one
    /// before the swap, so no crash leaves the directory without it.
    pub fn fence_unopenable(
        mut disk: D,
        dir: &Path,
        config: crate::PartitionConfig,
    ) -> Result<(Partition<D>, Recovery, Quarantined), FailedSwap<D>> {
        let swapped = fence_swap(&mut disk, dir, config);
        let (fenced_dir, fenced_number) = match swapped {
            Ok(swapped) => swapped,
            Err(error) => return Err(FailedSwap::with_disk(error, disk)),
        };
        tracing::error!(dir = %dir.display(), fenced = %fenced_dir.display(),
            "partition: unopenable; fenced, awaiting a state transfer");
        let (partition, recovery) = Partition::open_or_hand_back(disk, dir, config)?;
        let quarantined = Quarantined {
            fenced_dir,
            fenced_number,
            agreed_op: 0,
            segments_linked: 0,
            segments_copied: 0,
        };
        Ok((partition, recovery, quarantined))
    }
}

/// [`Partition::fence_unopenable`]'s steps on disk: an empty rebuild from
/// the readable superblock, then the swap.
fn fence_swap<D: Disk>(
    disk: &mut D,
    dir: &Path,
    config: crate::PartitionConfig,
) -> Result<(PathBuf, u64), PartitionError> {
    let copies = [
        superblock::read_copy(disk, dir, 0)?,
        superblock::read_copy(disk, dir, 1)?,
    ];
    let previous = superblock::choose(dir, copies).ok().flatten();
    let base = previous
        .unwrap_or_else(|| Superblock::fresh(config.replica, config.durability, config.confirm));
    let plan = Plan {
        segments: Vec::new(),
        agreed_op: 0,
        head_op: 1,
        head_offset: 0,
        head_parent_checksum: 0,
    };
    rebuild(disk, dir, &plan, &base)?;
    swap_rebuilt_in(disk, dir)
}
