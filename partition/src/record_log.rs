//! The record log: segment files of prepares, one WAL frame each, in op order.
//!
//! Every op from the retained head to the log's head has an [`EntryMeta`] in
//! memory (where its frame is, its checksum and record offsets), so reads by
//! op or by offset go straight to the bytes. The last segment is the *active*
//! one, open through the WAL; the others are *sealed* and were synced before
//! their successor received a byte, so a crash can only tear the last one.
//!
//! Invariants (checked by [`RecordLog::assert_invariants`]):
//! - segments are contiguous by op and ascending by first offset; the first
//!   segment's first op is the retained head;
//! - an entry is `damaged` exactly when its op is in `faulty`; `faulty` may also
//!   hold ops above the head (lost below the durable checkpoint), which come
//!   back as ordinary appends;
//! - `in_flight` holds, in op order, the appended prepares not yet reported
//!   durable, so reads never look for bytes the writer has not written.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use strand_wal::{Ack, FRAME_HEADER_BYTES, FileId, OpenMode, WalError};
use strand_wire::{CommandHeader, Msg, PrepareHeader};

use crate::disk::Disk;
use crate::entry::{EntryMeta, carries_records, frame_prepare};
use crate::error::PartitionError;
use crate::index::{IndexConfig, IndexEntry, encode_index, should_index};
use crate::io::{Io, Pending};
use crate::layout::{index_path, index_tmp_path, segment_path};
use crate::log_rewrite::unshare;
use crate::superblock::{SEALED_SEGMENTS_LISTED_MAX, SealedSegment};

/// How the record log is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// A segment rolls once the next entry would take it past this size.
    pub segment_bytes_max: u64,
    /// Index sparseness.
    pub index: IndexConfig,
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
            segment_bytes_max: 256 << 20,
            index: IndexConfig::default(),
        }
    }
}

/// One segment in memory.
#[derive(Debug, Clone)]
pub(crate) struct Segment {
    /// First record offset: the file name.
    pub first_offset: u64,
    /// First op.
    pub first_op: u64,
    /// One per op, from `first_op`.
    pub entries: Vec<EntryMeta>,
    /// Bytes of the segment (the append end of the active one).
    pub len: u64,
    /// The sparse index as it is on disk.
    pub index: Vec<IndexEntry>,
}

impl Segment {
    /// A segment with nothing in it yet.
    pub fn empty(first_offset: u64, first_op: u64) -> Segment {
        Segment {
            first_offset,
            first_op,
            entries: Vec::new(),
            len: 0,
            index: Vec::new(),
        }
    }

    /// Its last op (`first_op - 1` when empty).
    pub fn last_op(&self) -> u64 {
        self.first_op + self.entries.len() as u64 - 1
    }

    /// The entry of `op`, if this segment holds it.
    pub fn entry(&self, op: u64) -> Option<&EntryMeta> {
        self.entries
            .get(usize::try_from(op.checked_sub(self.first_op)?).ok()?)
    }

    pub(crate) fn entry_mut(&mut self, op: u64) -> Option<&mut EntryMeta> {
        let slot = usize::try_from(op.checked_sub(self.first_op)?).ok()?;
        self.entries.get_mut(slot)
    }

    /// The newest timestamp of a readable entry.
    pub(crate) fn timestamp_max_ns(&self) -> u64 {
        self.entries
            .iter()
            .filter(|meta| !meta.damaged)
            .map(|meta| meta.timestamp_ns)
            .max()
            .unwrap_or(0)
    }
}

/// The WAL handles of the active segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ActiveFiles {
    /// The segment's log file.
    pub log: FileId,
    /// Its index file.
    pub index: FileId,
}

/// A run of damaged ops inside one segment, awaiting their rewrites. The ops
/// are rewritten in order from `cursor`; a prepare that arrives early waits in
/// `early` for its predecessors.
#[derive(Debug, Clone)]
pub(crate) struct Gap {
    /// The segment holding the run (its first offset).
    pub segment_first_offset: u64,
    /// First damaged op.
    pub first_op: u64,
    /// Last damaged op.
    pub last_op: u64,
    /// Where the run's bytes end.
    pub end: u64,
    /// The run ends its (sealed) segment and its length is unknown: nothing
    /// follows it in the file, so the rewrites need not fit `end`.
    pub open_ended: bool,
    /// The next op to write.
    pub next_op: u64,
    /// Where it goes.
    pub cursor: u64,
    /// Rewrites that arrived ahead of their turn.
    pub early: BTreeMap<u64, Msg<PrepareHeader>>,
}

/// How long and how much of the log to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionPolicy {
    /// Keep at least this many bytes of the log: the oldest sealed segment
    /// is dropped only if what remains without it (the active segment
    /// included) still holds this many. So a log that reached the limit
    /// keeps between the limit and the limit plus its oldest segment.
    pub retention_bytes: Option<u64>,
    /// Drop sealed segments whose newest entry is older than this.
    pub retention_ms: Option<u64>,
}

/// The record log. See the module docs.
pub(crate) struct RecordLog {
    pub dir: PathBuf,
    pub config: LogConfig,
    pub segments: Vec<Segment>,
    pub active: Option<ActiveFiles>,
    pub head_op: u64,
    pub head_offset: u64,
    pub head_parent_checksum: u32,
    pub op: u64,
    pub offset_end: u64,
    pub durable_op: u64,
    pub faulty: BTreeSet<u64>,
    pub gaps: Vec<Gap>,
    pub in_flight: VecDeque<Msg<PrepareHeader>>,
    pub failure: Option<PartitionError>,
    /// The segment whose refills of a lost tail a rewrite intent covers.
    pub refill_intent: Option<u64>,
}

impl RecordLog {
    /// Checks the invariants of the module docs; a violation is a bug.
    pub fn assert_invariants(&self) {
        assert!(!self.segments.is_empty(), "the log has an active segment");
        assert_eq!(self.segments[0].first_op, self.head_op);
        for pair in self.segments.windows(2) {
            assert_eq!(
                pair[1].first_op,
                pair[0].last_op() + 1,
                "segments contiguous by op"
            );
            assert!(
                pair[0].first_offset < pair[1].first_offset,
                "segment names ascend"
            );
        }
        let last = self.segments.last().expect("checked above");
        assert_eq!(
            last.last_op(),
            self.op,
            "the head is the last segment's last op"
        );
        assert!(self.durable_op <= self.op || self.op < self.head_op);
        if let (Some(first), Some(last)) = (self.in_flight.front(), self.in_flight.back()) {
            assert!(first.header().op.get() <= last.header().op.get());
            assert!(last.header().op.get() <= self.op);
        }
    }

    /// The index of the segment holding `op`.
    pub fn segment_of(&self, op: u64) -> Option<usize> {
        if op < self.head_op || op > self.op {
            return None;
        }
        let after = self
            .segments
            .partition_point(|segment| segment.first_op <= op);
        let index = after.checked_sub(1)?;
        (op <= self.segments[index].last_op()).then_some(index)
    }

    /// The entry of `op` and the segment holding it.
    pub fn entry(&self, op: u64) -> Option<(&Segment, &EntryMeta)> {
        let segment = &self.segments[self.segment_of(op)?];
        Some((segment, segment.entry(op)?))
    }

    /// The checksum of `op` when the log knows it.
    pub fn checksum_of(&self, op: u64) -> Option<u32> {
        if op + 1 == self.head_op {
            return match (op, self.head_parent_checksum) {
                (0, _) => Some(0),
                (_, 0) => None,
                (_, checksum) => Some(checksum),
            };
        }
        let (_, meta) = self.entry(op)?;
        (meta.checksum != 0 || !meta.damaged).then_some(meta.checksum)
    }

    /// The record offset at which `op`'s records would start if it had any:
    /// the end of the records before it.
    pub(crate) fn offset_before(&self, op: u64) -> u64 {
        match self.entry(op.saturating_sub(1)) {
            Some((_, meta)) if op > self.head_op => meta.offset_end,
            _ => self.head_offset,
        }
    }

    /// The segments holding ops past `op_checkpoint`, each with the bytes
    /// from the end of the last entry the checkpoint covers (from its start
    /// when it covers none of them, or that entry is damaged) to its end:
    /// what a failed sync may have left in the page cache only. Usually the
    /// active segment's tail; more when a roll followed the last superblock
    /// write (or happened after a failed sync, the successor still empty).
    pub(crate) fn unsynced_spans(&self, op_checkpoint: u64) -> Vec<(PathBuf, u64, u64)> {
        self.segments
            .iter()
            .filter(|segment| segment.len > 0 && segment.last_op() > op_checkpoint)
            .map(|segment| {
                let from = match segment.entry(op_checkpoint) {
                    Some(meta) if !meta.damaged && meta.frame_len > 0 => {
                        meta.position + meta.frame_len
                    }
                    _ => 0,
                };
                (self.path_of(segment), from.min(segment.len), segment.len)
            })
            .collect()
    }

    pub(crate) fn path_of(&self, segment: &Segment) -> PathBuf {
        segment_path(&self.dir, segment.first_offset)
    }

    /// The log's earlier failure, if any, as the error every later change
    /// of it returns (until the partition is reopened).
    pub(crate) fn refuse_if_failed(&self) -> Result<(), PartitionError> {
        match &self.failure {
            Some(cause) => Err(PartitionError::LogFailed {
                cause: Box::new(cause.clone()),
            }),
            None => Ok(()),
        }
    }

    /// Checks that `prepare` may follow the log and chains to it.
    fn check_append(&self, prepare: &Msg<PrepareHeader>) -> Result<(), PartitionError> {
        let header = prepare.header();
        let op = header.op.get();
        if op != self.op + 1 {
            return Err(PartitionError::OpNotNext { op, head: self.op });
        }
        if let Some(expected) = self.checksum_of(op - 1) {
            if header.parent.get() != expected {
                return Err(PartitionError::ParentMismatch {
                    op,
                    parent: header.parent.get(),
                    expected,
                });
            }
        }
        if carries_records(header) && header.offset_base.get() != self.offset_end {
            return Err(PartitionError::OffsetsNotContiguous {
                op,
                offset_base: header.offset_base.get(),
                offset_end: self.offset_end,
            });
        }
        Ok(())
    }

    /// Appends `prepare` (op = head + 1) through the WAL; `Ok` means queued.
    /// Its durable completion comes back as a [`Pending::Prepare`].
    pub fn append<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        prepare: Msg<PrepareHeader>,
    ) -> Result<(), PartitionError> {
        self.refuse_if_failed()?;
        self.check_append(&prepare)?;
        let frame =
            frame_prepare(&prepare).map_err(|error| PartitionError::wal(&self.dir, error))?;
        let frame_len = frame.len();
        assert_eq!(
            frame_len,
            (FRAME_HEADER_BYTES + prepare.frame_size()) as u64
        );
        self.roll_if_needed(io, frame_len)?;
        let active = self.active.expect("an open log has an active segment");
        let header = *prepare.header();
        let op = header.op.get();
        self.record_refill_intent(io, op)?;
        let checksum = header.checksum();
        let pending = Pending::Prepare { op, checksum };
        if let Err(error) = io.append_frame(active.log, frame, Ack::Durable, pending) {
            self.failure = Some(error.clone());
            return Err(error);
        }
        let offset_at = self.offset_end;
        let segment = self.segments.last_mut().expect("never empty");
        let meta = EntryMeta::of(&header, segment.len, offset_at);
        segment.entries.push(meta);
        segment.len += frame_len;
        if should_index(self.config.index, segment.index.last(), meta.position) {
            let entry = IndexEntry::of(op, &meta);
            segment.index.push(entry);
            let bytes = Bytes::copy_from_slice(&entry.encode());
            if let Err(error) = io.append(active.index, bytes, Ack::Written, Pending::Ignored) {
                tracing::warn!(%error, "partition: index append refused; rebuilt at next open");
            }
        }
        self.op = op;
        self.offset_end = meta.offset_end;
        self.faulty.remove(&op);
        self.in_flight.push_back(prepare);
        Ok(())
    }

    /// Before the first append that refills a lost tail (an op counted
    /// faulty, below a checkpoint or mark that vouches for it) in the active
    /// segment: the bytes from here to the segment's end are recorded as a
    /// rewrite intent, since the checkpoint already covers them and an open
    /// after a crash would otherwise not write them again (see `unsynced`).
    fn record_refill_intent<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        op: u64,
    ) -> Result<(), PartitionError> {
        let segment = self.segments.last().expect("never empty");
        if !self.faulty.contains(&op) || self.refill_intent == Some(segment.first_offset) {
            return Ok(());
        }
        let intent = (segment.first_offset, segment.len, u64::MAX);
        crate::unsynced::record_rewrite_intent(&mut io.disk, &self.dir, intent)?;
        self.refill_intent = Some(segment.first_offset);
        Ok(())
    }

    fn roll_if_needed<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        frame_len: u64,
    ) -> Result<(), PartitionError> {
        let segment = self.segments.last().expect("never empty");
        let full = segment.len > 0 && segment.len + frame_len > self.config.segment_bytes_max;
        // A successor is named by the record offset end; it must differ.
        if !full || self.offset_end == segment.first_offset {
            return Ok(());
        }
        self.roll(io)
    }

    /// Seals the active segment (closing it syncs it, and the close is waited
    /// for, so it is durable before its successor gets a byte) and starts the
    /// next one at the record offset end.
    fn roll<D: Disk>(&mut self, io: &mut Io<D>) -> Result<(), PartitionError> {
        let active = self
            .active
            .take()
            .expect("an open log has an active segment");
        let sealed = self.segments.last().expect("never empty");
        let (sealed_path, sealed_len) = (self.path_of(sealed), sealed.len);
        let closed = io
            .close_durable(active.log)
            .and_then(|durable| io.close(active.index).map(|()| durable))
            .and_then(|durable| sealed_whole(io, active.log, &sealed_path, durable, sealed_len));
        if let Err(error) = closed {
            self.failure = Some(error.clone());
            return Err(error);
        }
        let segment = Segment::empty(self.offset_end, self.op + 1);
        match open_active(io, &self.dir, &segment, OpenMode::CreateNew) {
            Ok(files) => self.active = Some(files),
            Err(error) => {
                self.failure = Some(error.clone());
                return Err(error);
            }
        }
        tracing::debug!(
            first_offset = segment.first_offset,
            first_op = segment.first_op,
            "partition: rolled to a new segment"
        );
        self.segments.push(segment);
        Ok(())
    }

    /// A prepare append became durable. Ignored when the op was truncated or
    /// replaced since.
    pub fn on_durable(&mut self, op: u64, checksum: u32) -> bool {
        let current = self.entry(op).map(|(_, meta)| meta.checksum);
        if current != Some(checksum) {
            return false;
        }
        self.durable_op = self.durable_op.max(op);
        while self
            .in_flight
            .front()
            .is_some_and(|prepare| prepare.header().op.get() <= self.durable_op)
        {
            self.in_flight.pop_front();
        }
        true
    }

    /// Removes every op above `op` from the segment files, durably (the caller
    /// has written a superblock that no longer claims them).
    pub fn truncate_files<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        op: u64,
    ) -> Result<(), PartitionError> {
        assert!(
            op < self.op && op + 1 >= self.head_op,
            "truncate {op} of {}..={}",
            self.head_op,
            self.op
        );
        let keep = self.segment_of(op + 1).expect("op + 1 is in the log");
        let cut = self.cut_position(keep, op + 1)?;
        let was_active = keep + 1 == self.segments.len();
        // Once the active files are closed, any failure leaves the log
        // without them: it refuses appends from then on.
        let truncated = self.truncate_closed(io, op, keep, cut, was_active);
        if let Err(error) = &truncated {
            self.failure.get_or_insert(error.clone());
        }
        truncated
    }

    /// [`RecordLog::truncate_files`] past its checks: closes the active
    /// files, drops the segments after `keep`, cuts `keep` at `cut` and
    /// reopens the active files.
    fn truncate_closed<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        op: u64,
        keep: usize,
        cut: u64,
        was_active: bool,
    ) -> Result<(), PartitionError> {
        if let Some(active) = self.active.take() {
            io.close(active.log).and(io.close(active.index))?;
        }
        for segment in self.segments.drain(keep + 1..).collect::<Vec<_>>() {
            remove_segment_files(io, &self.dir, segment.first_offset)?;
        }
        let segment = &mut self.segments[keep];
        segment
            .entries
            .truncate((op + 1 - segment.first_op) as usize);
        segment.index.retain(|entry| entry.position < cut);
        segment.len = cut;
        let path = segment_path(&self.dir, segment.first_offset);
        if was_active {
            io.disk
                .set_len(&path, cut)
                .map_err(|error| PartitionError::io(&path, "truncate a segment", &error))?;
        } else {
            replace_with_prefix(io, &path, cut)?;
        }
        write_index_file(io, &self.dir, segment)?;
        self.forget_above(op);
        self.reopen_active(io)
    }

    /// Byte position where op `first_removed` starts in segment `keep`.
    fn cut_position(&self, keep: usize, first_removed: u64) -> Result<u64, PartitionError> {
        let segment = &self.segments[keep];
        if first_removed == segment.first_op {
            return Ok(0);
        }
        let meta = segment.entry(first_removed).expect("in the segment");
        let before = segment.entry(first_removed - 1).expect("in the segment");
        // A damaged entry whose header is readable still says where it ends.
        if !before.damaged || before.frame_len != 0 {
            return Ok(before.end());
        }
        if meta.frame_len != 0 || self.gaps.iter().any(|gap| gap.next_op == first_removed) {
            return Ok(meta.position);
        }
        Err(PartitionError::LogInconsistent {
            op: first_removed,
            reason: "cannot tell where the op starts inside a damaged run".to_owned(),
        })
    }

    /// Drops the in-memory state of every op above `op`.
    fn forget_above(&mut self, op: u64) {
        self.op = op;
        self.offset_end = self.offset_before(op + 1);
        self.durable_op = self.durable_op.min(op);
        self.in_flight
            .retain(|prepare| prepare.header().op.get() <= op);
        self.faulty.retain(|&faulty| faulty <= op);
        self.gaps.retain(|gap| gap.first_op <= op);
        for gap in &mut self.gaps {
            if gap.last_op > op {
                gap.last_op = op;
                gap.early.retain(|&early, _| early <= op);
            }
        }
        self.assert_invariants();
    }

    /// Opens the last segment through the WAL as the active one; when the WAL
    /// refuses it (a damaged entry inside), starts a new segment after it.
    pub fn reopen_active<D: Disk>(&mut self, io: &mut Io<D>) -> Result<(), PartitionError> {
        assert!(self.active.is_none());
        let last = self.segments.last().expect("never empty");
        let has_damage = last.entries.iter().any(|meta| meta.damaged);
        if !has_damage {
            match open_active(io, &self.dir, last, OpenMode::Append) {
                Ok(files) => {
                    self.active = Some(files);
                    return Ok(());
                }
                Err(PartitionError::Wal {
                    error: WalError::Corrupt { .. },
                    ..
                }) => tracing::warn!("partition: the last segment is damaged; starting a new one"),
                Err(error) => return Err(error),
            }
        }
        if self.offset_end == last.first_offset {
            return self.reopen_damaged_active(io);
        }
        let segment = Segment::empty(self.offset_end, self.op + 1);
        let files = open_active(io, &self.dir, &segment, OpenMode::CreateOrAppend)?;
        self.segments.push(segment);
        self.active = Some(files);
        Ok(())
    }

    /// The damaged last segment holds no record, so a segment after it would
    /// take its name (segments are named by first offset): appends go on
    /// after its last byte instead, the damage kept for repair in place. A
    /// hard link shared with a quarantined copy gets a file of its own first.
    fn reopen_damaged_active<D: Disk>(&mut self, io: &mut Io<D>) -> Result<(), PartitionError> {
        let last = self.segments.last().expect("never empty");
        tracing::warn!(
            first_offset = last.first_offset,
            "partition: the last segment is damaged and holds no record; appending after the damage"
        );
        unshare(io, &segment_path(&self.dir, last.first_offset))?;
        let files = open_active(io, &self.dir, last, OpenMode::AppendDamaged)?;
        self.active = Some(files);
        Ok(())
    }

    /// The sealed segments as the superblock lists them.
    pub fn sealed_list(&self) -> Vec<SealedSegment> {
        let sealed = &self.segments[..self.segments.len() - 1];
        let skip = sealed.len().saturating_sub(SEALED_SEGMENTS_LISTED_MAX);
        sealed[skip..]
            .iter()
            .map(|segment| SealedSegment {
                first_op: segment.first_op,
                last_op: segment.last_op(),
                first_offset: segment.first_offset,
                len_bytes: segment.len,
            })
            .collect()
    }

    /// How many of the oldest sealed segments the policy drops, never one
    /// holding `keep_from_op` or above, nor the active segment. By size, a
    /// segment goes only if what remains after it is still at least the
    /// limit (a user who asks to keep B bytes keeps at least B); by age, a
    /// segment whose newest entry is older than the limit goes.
    pub fn retention_count(
        &self,
        policy: RetentionPolicy,
        now_ns: u64,
        keep_from_op: u64,
    ) -> usize {
        let mut remaining: u64 = self.segments.iter().map(|segment| segment.len).sum();
        let mut count = 0;
        for segment in &self.segments[..self.segments.len() - 1] {
            if segment.last_op() >= keep_from_op {
                break;
            }
            assert!(remaining >= segment.len, "the total holds every segment");
            let after = remaining - segment.len;
            let leaves_enough = policy.retention_bytes.is_some_and(|min| after >= min);
            let too_old = policy.retention_ms.is_some_and(|ms| {
                segment
                    .timestamp_max_ns()
                    .saturating_add(ms.saturating_mul(1_000_000))
                    < now_ns
            });
            if !leaves_enough && !too_old {
                break;
            }
            remaining = after;
            count += 1;
        }
        assert!(count < self.segments.len(), "the active segment stays");
        count
    }

    /// The retained head (op, offset, parent checksum) after dropping the
    /// oldest `count` segments.
    pub fn head_after_dropping(&self, count: usize) -> (u64, u64, u32) {
        assert!(
            count < self.segments.len(),
            "the active segment is never dropped"
        );
        let segment = &self.segments[count];
        let parent = self.checksum_of(segment.first_op - 1).unwrap_or(0);
        (segment.first_op, segment.first_offset, parent)
    }

    /// Drops the oldest `count` segments (the caller has written a superblock
    /// whose head is past them).
    pub fn drop_head_segments<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        count: usize,
    ) -> Result<(), PartitionError> {
        let (head_op, head_offset, parent) = self.head_after_dropping(count);
        for segment in self.segments.drain(..count).collect::<Vec<_>>() {
            remove_segment_files(io, &self.dir, segment.first_offset)?;
        }
        self.head_op = head_op;
        self.head_offset = head_offset;
        self.head_parent_checksum = parent;
        self.faulty.retain(|&op| op >= head_op);
        self.gaps.retain(|gap| gap.first_op >= head_op);
        self.assert_invariants();
        Ok(())
    }

    /// Closes the active segment's files (syncing them).
    pub fn close<D: Disk>(&mut self, io: &mut Io<D>) -> Result<(), PartitionError> {
        let Some(active) = self.active.take() else {
            return Ok(());
        };
        let log = io.close(active.log);
        let index = io.close(active.index);
        log.and(index)
    }
}

/// A segment being sealed must be durable to its last byte before its
/// successor gets one: the open trusts sealed segments whole, and cuts only
/// the last one's tail. The WAL closes a file an earlier write or sync
/// poisoned without syncing it (its failed appends may not even be in the
/// page cache), so the durable length it answers falls short; then the roll
/// fails with that earlier failure, and the log stops where it is.
fn sealed_whole<D: Disk>(
    io: &Io<D>,
    file: FileId,
    path: &Path,
    durable: u64,
    len: u64,
) -> Result<(), PartitionError> {
    if durable >= len {
        return Ok(());
    }
    tracing::error!(path = %path.display(), durable, len,
        "partition: a segment to seal is not durable whole; an earlier write or sync failed");
    let cause = match io.stashed_failure(file) {
        Some(error) => PartitionError::wal(path, error),
        None => PartitionError::io(
            path,
            "seal a segment an earlier write or sync left short",
            &std::io::Error::other(format!("durable to byte {durable} of {len}")),
        ),
    };
    Err(PartitionError::LogFailed {
        cause: Box::new(cause),
    })
}

/// Opens a segment's log and index through the WAL.
pub(crate) fn open_active<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    segment: &Segment,
    mode: OpenMode,
) -> Result<ActiveFiles, PartitionError> {
    let log = io.open(&segment_path(dir, segment.first_offset), mode)?;
    if log.len != segment.len {
        return Err(PartitionError::LogInconsistent {
            op: segment.first_op,
            reason: format!(
                "segment is {} bytes, the log expects {}",
                log.len, segment.len
            ),
        });
    }
    let index_mode = if mode == OpenMode::CreateNew {
        OpenMode::CreateNew
    } else {
        OpenMode::CreateOrAppend
    };
    let index = io.open(&index_path(dir, segment.first_offset), index_mode)?;
    Ok(ActiveFiles {
        log: log.file,
        index: index.file,
    })
}

/// Writes a segment's index file from memory (temp file, then rename).
pub(crate) fn write_index_file<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    segment: &Segment,
) -> Result<(), PartitionError> {
    let tmp = index_tmp_path(dir, segment.first_offset);
    let path = index_path(dir, segment.first_offset);
    let bytes = encode_index(&segment.index);
    io.disk
        .remove_file(&tmp)
        .and_then(|()| io.disk.write_at(&tmp, 0, &bytes))
        .and_then(|()| io.disk.rename(&tmp, &path))
        .map_err(|error| PartitionError::io(&path, "write an index", &error))
}

/// Replaces a sealed segment file by its first `len` bytes in a new file: a
/// sealed segment may be a hard link shared with a quarantined copy, which
/// must never change.
pub(crate) fn replace_with_prefix<D: Disk>(
    io: &mut Io<D>,
    path: &Path,
    len: u64,
) -> Result<(), PartitionError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let prefix = io
        .disk
        .read_at(path, 0, len as usize)
        .map_err(|error| PartitionError::io(path, "read a segment", &error))?;
    io.disk
        .remove_file(&tmp)
        .and_then(|()| io.disk.write_at(&tmp, 0, &prefix))
        .and_then(|()| io.disk.rename(&tmp, path))
        .map_err(|error| PartitionError::io(path, "truncate a sealed segment", &error))
}

/// Removes a segment's log and index files.
pub(crate) fn remove_segment_files<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    first_offset: u64,
) -> Result<(), PartitionError> {
    // The index first: a crash in between leaves a segment whose index open
    // rebuilds, never an index whose segment is gone.
    for path in [
        index_path(dir, first_offset),
        segment_path(dir, first_offset),
    ] {
        io.disk
            .remove_file(&path)
            .map_err(|error| PartitionError::io(&path, "remove a segment", &error))?;
    }
    Ok(())
}
