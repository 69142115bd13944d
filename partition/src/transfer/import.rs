//! Importing an export into `<dir>.staging` and swapping it in.
//!
//! Resumable: the staging directory keeps the manifest and a progress file
//! (one WAL frame per finished chunk, written after the chunk's data is
//! durable). [`Partition::import_begin`] with the same manifest resumes where
//! the last attempt stopped; with another manifest it starts over.
//!
//! The swap: verify every staged file, write the staged superblock, write the
//! install marker (`<dir>.install`), close the partition, rename `<dir>` to
//! `<dir>.replaced`, rename the staging directory to `<dir>`, remove
//! `<dir>.replaced` and the marker. [`finish_interrupted_install`] (run by
//! every open) completes a swap a crash interrupted; without a marker the
//! partition directory was never touched.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use strand_wal::{encode_frame_into, scan};
use strand_wire::CommandHeader;

use super::decode_chunk;
use super::manifest::{Manifest, ManifestFile, ManifestFileKind};
use crate::cursor_snapshot::decode_snapshot;
use crate::disk::Disk;
use crate::entry::{EntryMeta, carries_records};
use crate::error::{FailedSwap, PartitionError};
use crate::index::{encode_index, expected_index};
use crate::layout::{
    cursors_snapshot_path, index_path, install_marker_path, machine_snapshot_path, records_dir,
    replaced_path, segment_path, staging_client_table_path, staging_manifest_path, staging_path,
    staging_progress_path,
};
use crate::partition::{Partition, PartitionConfig};
use crate::recovery::Recovery;
use crate::scan::{Item, scan_segment};
use crate::superblock::{self, HISTORY_STARTS_MAX, HistoryStart, SealedSegment, Superblock};

/// An import in progress. See the module docs.
#[derive(Debug, Clone)]
pub struct Import {
    staging: PathBuf,
    manifest: Manifest,
    done: BTreeSet<u32>,
    reused: usize,
}

impl Import {
    /// The manifest being imported.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The chunks still to fetch, ascending.
    pub fn needed_chunks(&self) -> Vec<u32> {
        (1..self.manifest.chunk_count)
            .filter(|chunk| !self.done.contains(chunk))
            .collect()
    }

    /// Segments taken from the local partition instead of the stream.
    pub fn segments_reused(&self) -> usize {
        self.reused
    }

    /// The staging directory.
    pub fn staging_dir(&self) -> &Path {
        &self.staging
    }
}

impl<D: Disk> Partition<D> {
    /// Starts (or resumes) importing the export whose chunk 0 is
    /// `manifest_chunk`. Segments this partition already holds identically
    /// (same ops, same last checksum) are linked or copied, not fetched.
    pub fn import_begin(&mut self, manifest_chunk: &[u8]) -> Result<Import, PartitionError> {
        let manifest = Manifest::decode(manifest_chunk)?;
        let staging = staging_path(&self.dir);
        let disk = &mut self.io.disk;
        let manifest_path = staging_manifest_path(&staging);
        let existing = disk.read_file(&manifest_path).map_err(|error| {
            PartitionError::io(&manifest_path, "read the staged manifest", &error)
        })?;
        if existing.as_deref() == Some(manifest_chunk) {
            let done = read_progress(disk, &staging)?;
            tracing::info!(
                done = done.len(),
                "partition: resuming a state-transfer import"
            );
            return Ok(Import {
                staging,
                manifest,
                done,
                reused: 0,
            });
        }
        disk.remove_dir_all(&staging)
            .and_then(|()| disk.create_dir_all(&records_dir(&staging)))
            .and_then(|()| disk.write_at(&manifest_path, 0, manifest_chunk))
            .map_err(|error| PartitionError::io(&staging, "start a staging directory", &error))?;
        let mut import = Import {
            staging,
            manifest,
            done: BTreeSet::new(),
            reused: 0,
        };
        self.reuse_local_segments(&mut import)?;
        Ok(import)
    }

    /// Takes every manifest segment this partition holds identically from
    /// the local directory, and marks its chunks done.
    fn reuse_local_segments(&mut self, import: &mut Import) -> Result<(), PartitionError> {
        let files = import.manifest.files.clone();
        for file in files {
            let ManifestFileKind::Segment {
                first_offset,
                first_op,
                last_op,
                last_checksum,
            } = file.kind
            else {
                continue;
            };
            let Some(index) = self.log.segment_of(last_op) else {
                continue;
            };
            let segment = &self.log.segments[index];
            let identical = segment.first_offset == first_offset
                && segment.first_op == first_op
                && segment.entry(last_op).is_some_and(|meta| {
                    !meta.damaged && meta.checksum == last_checksum && meta.end() == file.len_bytes
                })
                && segment.entries.iter().all(|meta| !meta.damaged)
                && last_op <= self.log.durable_op;
            if !identical {
                continue;
            }
            let sealed_whole = index + 1 < self.log.segments.len() && segment.len == file.len_bytes;
            let from = segment_path(&self.dir, first_offset);
            let to = segment_path(&import.staging, first_offset);
            let disk = &mut self.io.disk;
            let linked = if sealed_whole {
                disk.hard_link(&from, &to)
            } else {
                disk.read_at(&from, 0, file.len_bytes as usize)
                    .and_then(|bytes| disk.write_at(&to, 0, &bytes))
            };
            linked.map_err(|error| PartitionError::io(&to, "reuse a local segment", &error))?;
            for chunk in file.first_chunk..file.first_chunk + file.chunk_count {
                record_progress(disk, &import.staging, chunk)?;
                import.done.insert(chunk);
            }
            import.reused += 1;
        }
        Ok(())
    }

    /// Writes one chunk into the staging directory (durably). A chunk with a
    /// bad checksum, or that does not fit the manifest, is refused and
    /// nothing is written. Chunks already done are accepted again.
    pub fn import_chunk(
        &mut self,
        import: &mut Import,
        chunk: u32,
        body: &[u8],
    ) -> Result<(), PartitionError> {
        if chunk == 0 {
            return Ok(());
        }
        let (header, data) = decode_chunk(chunk, body)?;
        let expected = import
            .manifest
            .locate(chunk)
            .ok_or(PartitionError::ChunkInvalid {
                chunk,
                reason: "past the export's last chunk".to_owned(),
            })?;
        if (header.file, header.file_offset, u64::from(header.data_len)) != expected {
            return Err(PartitionError::ChunkInvalid {
                chunk,
                reason: format!(
                    "carries {:?}, the manifest places {expected:?}",
                    (header.file, header.file_offset, header.data_len)
                ),
            });
        }
        if import.done.contains(&chunk) {
            return Ok(());
        }
        let path = staged_path(import, header.file as usize);
        let disk = &mut self.io.disk;
        disk.write_at(&path, header.file_offset, data)
            .map_err(|error| PartitionError::io(&path, "write a chunk", &error))?;
        record_progress(disk, &import.staging, chunk)?;
        import.done.insert(chunk);
        Ok(())
    }

    /// Verifies the staged partition and writes its superblock: the staging
    /// directory is then a complete partition, ready to swap in. Refused while
    /// chunks are missing or a staged file fails verification.
    pub fn finish_staging(&mut self, import: &Import) -> Result<(), PartitionError> {
        let missing = import.needed_chunks();
        if !missing.is_empty() {
            return Err(PartitionError::ImportRejected {
                reason: format!("{} chunks missing, first {}", missing.len(), missing[0]),
            });
        }
        let sealed = verify_and_index(self, import)?;
        self.verify_staged_machine_snapshot(import)?;
        let mut staged = staged_superblock(&self.superblock, &import.manifest, sealed);
        staged.durable.client_table = self.staged_client_table(import)?;
        superblock::write_now(&mut self.io.disk, &import.staging, &staged)
    }

    /// Finishes staging, swaps the staged partition in for this one and
    /// opens it. Nothing is swapped if staging is refused. On failure the
    /// disk comes back; reopening it finds this partition, or finishes the
    /// swap once its marker is written.
    pub fn install(self, import: Import) -> Result<(Partition<D>, Recovery), FailedSwap<D>> {
        let (mut disk, dir, config) = self.close_for_swap(&import)?;
        let marker = install_marker_path(&dir);
        let swapped = disk
            .write_at(&marker, 0, b"install")
            .map_err(|error| PartitionError::io(&marker, "write the install marker", &error))
            .and_then(|()| finish_interrupted_install(&mut disk, &dir));
        if let Err(error) = swapped {
            return Err(FailedSwap::with_disk(error, disk));
        }
        tracing::info!(dir = %dir.display(), frontier_op = import.manifest.frontier_op,
            "partition: state transfer installed");
        Partition::open_or_hand_back(disk, &dir, config)
    }

    /// Finishes staging and closes this partition's files for the swap;
    /// hands back the disk, the directory and the config to reopen with.
    fn close_for_swap(
        mut self,
        import: &Import,
    ) -> Result<(D, PathBuf, PartitionConfig), FailedSwap<D>> {
        let staged = self.finish_staging(import).and_then(|()| self.settle());
        if let Err(error) = staged {
            return Err(FailedSwap::with_disk(error, self.release()));
        }
        let (dir, config) = (self.dir.clone(), self.config);
        Ok((self.release(), dir, config))
    }
}

#[cfg(feature = "mutations")]
impl<D: Disk> Partition<D> {
    /// A broken [`Partition::install`], for the simulator's mutation runs:
    /// the swap without its marker, so a crash between its renames leaves
    /// no partition at all, and the replica reopens as a fresh one.
    pub fn install_unmarked(
        self,
        import: Import,
    ) -> Result<(Partition<D>, Recovery), FailedSwap<D>> {
        let (mut disk, dir, config) = self.close_for_swap(&import)?;
        if let Err(error) = swap_unmarked(&mut disk, &dir) {
            return Err(FailedSwap::with_disk(error, disk));
        }
        Partition::open_or_hand_back(disk, &dir, config)
    }
}

/// [`Partition::install_unmarked`]'s swap: the renames without a marker.
#[cfg(feature = "mutations")]
fn swap_unmarked<D: Disk>(disk: &mut D, dir: &Path) -> Result<(), PartitionError> {
    let (staging, replaced) = (staging_path(dir), replaced_path(dir));
    let step = |result: std::io::Result<()>, action| {
        result.map_err(|error| PartitionError::io(dir, action, &error))
    };
    step(
        disk.remove_dir_all(&replaced),
        "remove an old replaced copy",
    )?;
    step(
        disk.rename(dir, &replaced),
        "move the replaced partition aside",
    )?;
    step(disk.rename(&staging, dir), "swap the staged partition in")?;
    step(
        disk.remove_dir_all(&replaced),
        "remove the replaced partition",
    )?;
    step(
        disk.remove_file(&staging_manifest_path(dir)),
        "remove the transfer manifest",
    )?;
    step(
        disk.remove_file(&staging_progress_path(dir)),
        "remove the transfer progress",
    )
}

/// Completes a swap an earlier install started (its marker exists); leaves
/// an unfinished staging directory alone (an import may resume from it).
pub fn finish_interrupted_install<D: Disk>(disk: &mut D, dir: &Path) -> Result<(), PartitionError> {
    let marker = install_marker_path(dir);
    if !disk.exists(&marker) {
        return Ok(());
    }
    let staging = staging_path(dir);
    let replaced = replaced_path(dir);
    let step = |result: std::io::Result<()>, action| {
        result.map_err(|error| PartitionError::io(dir, action, &error))
    };
    if disk.exists(&staging) {
        if disk.exists(dir) {
            step(
                disk.remove_dir_all(&replaced),
                "remove an old replaced copy",
            )?;
            step(
                disk.rename(dir, &replaced),
                "move the replaced partition aside",
            )?;
        }
        step(disk.rename(&staging, dir), "swap the staged partition in")?;
    }
    step(
        disk.remove_dir_all(&replaced),
        "remove the replaced partition",
    )?;
    let manifest = staging_manifest_path(dir);
    let progress = staging_progress_path(dir);
    step(disk.remove_file(&manifest), "remove the transfer manifest")?;
    step(disk.remove_file(&progress), "remove the transfer progress")?;
    step(
        disk.remove_file(&staging_client_table_path(dir)),
        "remove the transferred client table",
    )?;
    step(disk.remove_file(&marker), "remove the install marker")
}

impl<D: Disk> Partition<D> {
    /// The machine snapshot the transfer carried, if any, reads whole and
    /// fits the log it came with: after an op at or below the frontier that
    /// the exported log reaches back to.
    fn verify_staged_machine_snapshot(&mut self, import: &Import) -> Result<(), PartitionError> {
        let manifest = &import.manifest;
        let listed = manifest
            .files
            .iter()
            .any(|file| file.kind == ManifestFileKind::MachineSnapshot);
        if !listed {
            return Ok(());
        }
        let rejected = |reason: String| PartitionError::ImportRejected { reason };
        let snapshot =
            match crate::machine_snapshot::read_copy(&mut self.io.disk, &import.staging, 0)? {
                Some(Ok((snapshot, _))) => snapshot,
                Some(Err(reason)) => return Err(rejected(format!("machine snapshot: {reason}"))),
                None => return Err(rejected("the machine snapshot is missing".to_owned())),
            };
        if snapshot.op > manifest.frontier_op || snapshot.op + 1 < manifest.head_op {
            return Err(rejected(format!(
                "a machine snapshot after op {} with a log of ops {}..={}",
                snapshot.op, manifest.head_op, manifest.frontier_op
            )));
        }
        Ok(())
    }

    /// The client table the transfer carried (empty when it carried none).
    fn staged_client_table(&mut self, import: &Import) -> Result<Bytes, PartitionError> {
        let listed = import
            .manifest
            .files
            .iter()
            .find(|file| file.kind == ManifestFileKind::ClientTable);
        let Some(file) = listed else {
            return Ok(Bytes::new());
        };
        let path = staging_client_table_path(&import.staging);
        let bytes = self
            .io
            .disk
            .read_file(&path)
            .map_err(|error| PartitionError::io(&path, "read the staged client table", &error))?
            .unwrap_or_default();
        if bytes.len() as u64 != file.len_bytes {
            return Err(PartitionError::ImportRejected {
                reason: format!(
                    "the staged client table holds {} bytes, the manifest says {}",
                    bytes.len(),
                    file.len_bytes
                ),
            });
        }
        Ok(Bytes::from(bytes))
    }
}

/// Where file `file` of the manifest goes in the staging directory.
fn staged_path(import: &Import, file: usize) -> PathBuf {
    match import.manifest.files[file].kind {
        ManifestFileKind::Segment { first_offset, .. } => {
            segment_path(&import.staging, first_offset)
        }
        ManifestFileKind::CursorSnapshot => cursors_snapshot_path(&import.staging),
        ManifestFileKind::ClientTable => staging_client_table_path(&import.staging),
        ManifestFileKind::MachineSnapshot => machine_snapshot_path(&import.staging, 0),
    }
}

/// The chunks a staging directory's progress file says are done.
fn read_progress<D: Disk>(disk: &mut D, staging: &Path) -> Result<BTreeSet<u32>, PartitionError> {
    let path = staging_progress_path(staging);
    let bytes = disk
        .read_file(&path)
        .map_err(|error| PartitionError::io(&path, "read the transfer progress", &error))?
        .unwrap_or_default();
    let report = scan(&bytes);
    Ok(report
        .frames
        .iter()
        .filter_map(|span| span.payload(&bytes).try_into().ok().map(u32::from_le_bytes))
        .collect())
}

/// Appends "chunk done" to the progress file, durably.
fn record_progress<D: Disk>(
    disk: &mut D,
    staging: &Path,
    chunk: u32,
) -> Result<(), PartitionError> {
    let path = staging_progress_path(staging);
    let len = disk
        .file_len(&path)
        .map_err(|error| PartitionError::io(&path, "stat the transfer progress", &error))?
        .unwrap_or(0);
    let mut frame = Vec::with_capacity(12);
    encode_frame_into(&chunk.to_le_bytes(), &mut frame).expect("four bytes fit a frame");
    disk.write_at(&path, len, &frame)
        .map_err(|error| PartitionError::io(&path, "record transfer progress", &error))
}

/// Where verification of the staged log has reached.
struct Chain {
    op: u64,
    offset: u64,
    parent: Option<u32>,
}

/// Checks every staged segment (whole frames, ops in sequence, chained,
/// offsets contiguous, the manifest's last checksums and frontier header) and
/// the snapshot; writes each segment's index. Returns the sealed segments.
fn verify_and_index<D: Disk>(
    partition: &mut Partition<D>,
    import: &Import,
) -> Result<Vec<SealedSegment>, PartitionError> {
    let manifest = &import.manifest;
    let known_parent = manifest.head_op == 1 || manifest.head_parent_checksum != 0;
    let mut chain = Chain {
        op: manifest.head_op,
        offset: manifest.head_offset,
        parent: known_parent.then_some(manifest.head_parent_checksum),
    };
    let mut sealed = Vec::new();
    for file in &manifest.files {
        if let ManifestFileKind::Segment { .. } = file.kind {
            sealed.push(verify_segment(partition, import, file, &mut chain)?);
        }
    }
    verify_frontier(partition, import, chain.op, chain.offset, chain.parent)?;
    sealed.pop(); // the last segment is the active one
    Ok(sealed)
}

/// The staged segment's entries, each following the one before on
/// `chain` (op, parent checksum, record offset), which they advance.
fn chain_entries(
    scan: &crate::scan::SegmentScan,
    chain: &mut Chain,
    first_offset: u64,
) -> Result<Vec<EntryMeta>, PartitionError> {
    let mut entries = Vec::with_capacity(scan.items.len());
    for item in &scan.items {
        let Item::Entry(entry) = item else {
            unreachable!("checked for faults above");
        };
        let header = &entry.header;
        let chained = chain
            .parent
            .is_none_or(|parent| header.parent.get() == parent);
        let contiguous = !carries_records(header) || header.offset_base.get() == chain.offset;
        if header.op.get() != chain.op || !chained || !contiguous {
            return Err(PartitionError::ImportRejected {
                reason: format!("op {} does not follow in segment {first_offset}", chain.op),
            });
        }
        let meta = EntryMeta::of(header, entry.position, chain.offset);
        entries.push(meta);
        chain.op += 1;
        chain.offset = meta.offset_end;
        chain.parent = Some(header.checksum());
    }
    Ok(entries)
}

/// Checks one staged segment against the chain so far and writes its index.
fn verify_segment<D: Disk>(
    partition: &mut Partition<D>,
    import: &Import,
    file: &ManifestFile,
    chain: &mut Chain,
) -> Result<SealedSegment, PartitionError> {
    let reject = |reason: String| PartitionError::ImportRejected { reason };
    let ManifestFileKind::Segment {
        first_offset,
        first_op,
        last_op,
        last_checksum,
    } = file.kind
    else {
        unreachable!("called for segments only");
    };
    let path = segment_path(&import.staging, first_offset);
    let bytes = partition
        .io
        .disk
        .read_file(&path)
        .map_err(|error| PartitionError::io(&path, "read a staged segment", &error))?
        .unwrap_or_default();
    let scan = scan_segment(&bytes);
    if scan.has_faults() || scan.torn_from.is_some() || bytes.len() as u64 != file.len_bytes {
        return Err(reject(format!(
            "staged segment {first_offset} is damaged or short"
        )));
    }
    if first_op != chain.op {
        return Err(reject(format!(
            "segment {first_offset} starts at op {first_op}, not {}",
            chain.op
        )));
    }
    let entries = chain_entries(&scan, chain, first_offset)?;
    if chain.op != last_op + 1 || chain.parent != Some(last_checksum) {
        return Err(reject(format!(
            "segment {first_offset} does not end at op {last_op} as announced"
        )));
    }
    let index = expected_index(partition.config.log.index, first_op, &entries);
    let index_file = index_path(&import.staging, first_offset);
    let disk = &mut partition.io.disk;
    disk.remove_file(&index_file)
        .and_then(|()| disk.write_at(&index_file, 0, &encode_index(&index)))
        .map_err(|error| PartitionError::io(&index_file, "write a staged index", &error))?;
    Ok(SealedSegment {
        first_op,
        last_op,
        first_offset,
        len_bytes: file.len_bytes,
    })
}

/// The staged log must end at the frontier with its header, and the staged
/// snapshot must read back.
fn verify_frontier<D: Disk>(
    partition: &mut Partition<D>,
    import: &Import,
    expected_op: u64,
    expected_offset: u64,
    parent: Option<u32>,
) -> Result<(), PartitionError> {
    let manifest = &import.manifest;
    let reject = |reason: String| PartitionError::ImportRejected { reason };
    if expected_op != manifest.frontier_op + 1 || expected_offset != manifest.frontier_offset {
        return Err(reject(format!(
            "the staged log ends at op {}, not the frontier",
            expected_op - 1
        )));
    }
    if let Some(header) = &manifest.frontier_header {
        if parent != Some(header.checksum()) {
            return Err(reject(
                "the staged log's last op is not the frontier's".to_owned(),
            ));
        }
    }
    let path = cursors_snapshot_path(&import.staging);
    let bytes = partition
        .io
        .disk
        .read_file(&path)
        .map_err(|error| PartitionError::io(&path, "read the staged snapshot", &error))?
        .unwrap_or_default();
    let (covers, _) =
        decode_snapshot(&bytes).map_err(|reason| reject(format!("staged snapshot: {reason}")))?;
    if covers != manifest.cursor_tail {
        return Err(reject(
            "the staged snapshot covers another cursor tail".to_owned(),
        ));
    }
    Ok(())
}

/// The installed partition's superblock: this replica's identity, views and
/// policies; the exporter's history starts merged in; commit and checkpoint at
/// the frontier; the exporter's retained head.
fn staged_superblock(
    local: &Superblock,
    manifest: &Manifest,
    sealed: Vec<SealedSegment>,
) -> Superblock {
    let mut staged = local.clone();
    staged.sequence = local.sequence + 1;
    staged.durable.commit = manifest.frontier_op;
    // A committed prefix no view vouches for: untrusted until the replica
    // adopts a view (consensus's `DurableState::log_unsettled`).
    staged.durable.log_unsettled = true;
    staged.durable.history_starts = merge_starts(
        &local.durable.history_starts,
        &manifest.durable.history_starts,
    );
    staged.clean_shutdown = false;
    staged.awaiting_state_transfer = false;
    staged.op_checkpoint = manifest.frontier_op;
    staged.cursor_checkpoint = manifest.cursor_tail;
    staged.head_op = manifest.head_op;
    staged.head_offset = manifest.head_offset;
    staged.head_parent_checksum = manifest.head_parent_checksum;
    staged.sealed_segments = sealed;
    staged
}

/// The exporter's starts (the installed logs follow its history, which a
/// cursor log's cut compares), then any local start of a view after its
/// latest (the guard still needs it), newest kept. Consensus takes the same
/// list when the transfer is done (`DurableState::take_transferred_history`).
fn merge_starts(local: &[HistoryStart], remote: &[HistoryStart]) -> Vec<HistoryStart> {
    let latest = remote.last().map(|start| start.view);
    let mut merged: Vec<HistoryStart> = remote.to_vec();
    merged.extend(
        local
            .iter()
            .filter(|start| latest.is_none_or(|latest| start.view > latest)),
    );
    let skip = merged.len().saturating_sub(HISTORY_STARTS_MAX);
    merged.split_off(skip)
}
