//! Rewriting damaged entries in place: a damaged run of ops (a [`Gap`]) is
//! refilled in op order from where its bytes start, each prepare exactly as
//! its peers hold it (same bytes, same checksum, so the same length and
//! position), durably. In the active segment the rewrite goes through the
//! WAL's in-place write (`Request::WriteAt`), ordered after the appends in
//! flight on that file and acknowledged once an fdatasync covers it; in a
//! sealed segment (not open in the WAL, and opening it there would re-read it
//! whole) it is a plain write, synced. Each run's span is recorded in
//! `rewrites.intent` first, durably (see `unsynced`). A prepare that arrives before the ops
//! ahead of it in its run waits in memory for them.

use std::collections::BTreeMap;
use std::path::Path;

use strand_wal::{Ack, FRAME_HEADER_BYTES, Frame, Request};
use strand_wire::{CommandHeader, Msg, PrepareHeader};

use crate::disk::Disk;
use crate::entry::{EntryMeta, carries_records, frame_prepare};
use crate::error::PartitionError;
use crate::io::Io;
use crate::layout::{fence_request_path, segment_path};
use crate::record_log::{Gap, RecordLog, replace_with_prefix};
use crate::unsynced::record_rewrite_intent;

/// Why a rewrite that cannot fit its damaged region is refused: the copy
/// is fenced at its next open and rebuilt by state transfer.
pub const REWRITE_DOES_NOT_FIT: &str =
    "does not fit the damaged region; the copy is fenced at its next open";

impl RecordLog {
    /// Rewrites a damaged op in place (same bytes, same position), durably.
    /// Returns the ops (with checksums) now written: the op itself and any
    /// early arrivals it unblocked, or nothing while its predecessors in the
    /// damaged run are still missing.
    pub fn rewrite<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        prepare: Msg<PrepareHeader>,
    ) -> Result<Vec<(u64, u32)>, PartitionError> {
        let op = prepare.header().op.get();
        assert!(
            self.faulty.contains(&op) && op <= self.op,
            "op {op} is not damaged"
        );
        self.check_rewrite(&prepare)?;
        let gap_index = self
            .gaps
            .iter()
            .position(|gap| gap.first_op <= op && op <= gap.last_op)
            .ok_or(PartitionError::RewriteMismatch {
                op,
                reason: "no damaged region holds it",
            })?;
        self.gaps[gap_index].early.insert(op, prepare);
        let mut written = Vec::new();
        loop {
            let gap = &mut self.gaps[gap_index];
            let Some(next) = gap.early.remove(&gap.next_op) else {
                break;
            };
            written.push(self.write_gap_entry(io, gap_index, &next)?);
        }
        let gap = &self.gaps[gap_index];
        if gap.next_op > gap.last_op {
            let gap = self.gaps.remove(gap_index);
            self.close_gap(io, &gap)?;
        }
        Ok(written)
    }

    /// A rewrite must match what is known of the damaged entry and chain.
    fn check_rewrite(&self, prepare: &Msg<PrepareHeader>) -> Result<(), PartitionError> {
        let header = prepare.header();
        let op = header.op.get();
        let mismatch = |reason| PartitionError::RewriteMismatch { op, reason };
        let (_, meta) = self.entry(op).ok_or(mismatch("op not in the log"))?;
        if meta.checksum != 0 && meta.checksum != header.checksum() {
            return Err(mismatch("checksum differs from the damaged entry's header"));
        }
        if meta.frame_len != 0
            && meta.frame_len != (FRAME_HEADER_BYTES + prepare.frame_size()) as u64
        {
            return Err(mismatch("size differs from the damaged entry's header"));
        }
        if let Some(parent) = self.checksum_of(op - 1) {
            if header.parent.get() != parent {
                return Err(mismatch("parent does not chain"));
            }
        }
        Ok(())
    }

    /// Writes the gap's next op at its cursor.
    fn write_gap_entry<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        gap_index: usize,
        prepare: &Msg<PrepareHeader>,
    ) -> Result<(u64, u32), PartitionError> {
        let header = *prepare.header();
        let op = header.op.get();
        let offset_at = self.offset_before(op);
        let gap = &self.gaps[gap_index];
        assert_eq!(gap.next_op, op);
        let frame =
            frame_prepare(prepare).map_err(|error| PartitionError::wal(&self.dir, error))?;
        let frame_len = frame.len();
        let fits = gap.open_ended || gap.cursor + frame_len <= gap.end;
        if !fits || !self.chains_into_next(io, &header)? {
            // The region the open inferred for this run cannot hold it, or
            // the op after it does not follow from it: the log is not laid
            // out as the open thought (a misdirected write put a frame out
            // of place behind the damage), or what follows is another
            // history's. No repair in place can be right.
            return Err(self.request_fence(io, op)?);
        }
        let gap = &self.gaps[gap_index];
        let position = gap.cursor;
        if gap.next_op == gap.first_op {
            // Before the run's first write: were its sync to fail, an open
            // after a crash writes the run's bytes again (see `unsynced`).
            let to = if gap.open_ended { u64::MAX } else { gap.end };
            let intent = (gap.segment_first_offset, position, to);
            record_rewrite_intent(&mut io.disk, &self.dir, intent)?;
        }
        self.write_in_place(io, gap.segment_first_offset, position, frame)?;
        let gap = &mut self.gaps[gap_index];
        gap.cursor += frame_len;
        gap.next_op += 1;
        let segment_index = self.segment_of(op).expect("a gap op is in the log");
        let meta = EntryMeta::of(&header, position, offset_at);
        *self.segments[segment_index]
            .entry_mut(op)
            .expect("checked above") = meta;
        self.faulty.remove(&op);
        tracing::info!(op, position, "partition: rewrote a damaged entry in place");
        Ok((op, header.checksum()))
    }

    /// Whether the whole op after `header`'s (if the log holds one, read
    /// or in flight) chains to it: its parent is `header`'s checksum, and
    /// when both carry records, its records start where `header`'s end.
    fn chains_into_next<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        header: &PrepareHeader,
    ) -> Result<bool, PartitionError> {
        let next_op = header.op.get() + 1;
        if self.entry(next_op).is_none_or(|(_, meta)| meta.damaged) {
            return Ok(true);
        }
        let Some(next) = self.read_headers(io, next_op, next_op)?.pop() else {
            return Ok(true);
        };
        let records_meet = !carries_records(header)
            || !carries_records(&next)
            || next.offset_base.get()
                == header.offset_base.get() + u64::from(header.record_count.get());
        Ok(next.parent.get() == header.checksum() && records_meet)
    }

    /// Marks the copy to be fenced at its next open (a repair in place
    /// cannot be right) and returns the error that fails the repair.
    fn request_fence<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        op: u64,
    ) -> Result<PartitionError, PartitionError> {
        let mark = fence_request_path(&self.dir);
        io.disk
            .write_at(&mark, 0, b"a rewrite did not fit its damaged region\n")
            .map_err(|error| PartitionError::io(&mark, "request a fence", &error))?;
        tracing::error!(
            op,
            "partition: a repair does not fit; the copy is fenced at its next open"
        );
        Ok(PartitionError::RewriteMismatch {
            op,
            reason: REWRITE_DOES_NOT_FIT,
        })
    }

    /// Writes `frame` at `position` of the segment starting at
    /// `segment_first_offset`, durably: through the WAL when it is the active
    /// segment, with a plain synced write when it is sealed.
    fn write_in_place<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        segment_first_offset: u64,
        position: u64,
        frame: Frame,
    ) -> Result<(), PartitionError> {
        let is_active = self
            .segments
            .last()
            .is_some_and(|segment| segment.first_offset == segment_first_offset);
        if let (true, Some(active)) = (is_active, self.active) {
            let file = active.log;
            io.run(file, |user_data| Request::WriteAt {
                file,
                offset: position,
                frame,
                user_data,
                ack: Ack::Durable,
            })?;
            return Ok(());
        }
        let path = segment_path(&self.dir, segment_first_offset);
        unshare(io, &path)?;
        io.disk
            .write_at(&path, position, &frame.to_vec())
            .map_err(|error| PartitionError::io(&path, "rewrite a damaged entry", &error))
    }

    /// A finished run that ended short of its region leaves junk bytes; at
    /// the end of a sealed segment they are cut away, and the segment ends
    /// where the run's last rewrite does.
    fn close_gap<D: Disk>(&mut self, io: &mut Io<D>, gap: &Gap) -> Result<(), PartitionError> {
        if gap.cursor == gap.end && !gap.open_ended {
            return Ok(());
        }
        let Some(index) = self
            .segments
            .iter()
            .position(|segment| segment.first_offset == gap.segment_first_offset)
        else {
            return Ok(());
        };
        let is_active = index + 1 == self.segments.len();
        let trailing = gap.open_ended || self.segments[index].len == gap.end;
        if !is_active && trailing {
            let path = self.path_of(&self.segments[index]);
            unshare(io, &path)?;
            io.disk
                .set_len(&path, gap.cursor)
                .map_err(|error| PartitionError::io(&path, "cut junk after a rewrite", &error))?;
            self.segments[index].len = gap.cursor;
        }
        Ok(())
    }

    /// Marks `op`'s entry damaged after a read found it so, so it is reported
    /// and can be rewritten.
    pub fn mark_damaged(&mut self, op: u64) {
        let Some(index) = self.segment_of(op) else {
            return;
        };
        let segment = &mut self.segments[index];
        let first_offset = segment.first_offset;
        let meta = segment.entry_mut(op).expect("segment_of checked it");
        if meta.damaged {
            return;
        }
        meta.damaged = true;
        let (start, end) = (meta.position, meta.end());
        self.faulty.insert(op);
        self.gaps.push(Gap {
            segment_first_offset: first_offset,
            first_op: op,
            last_op: op,
            end,
            open_ended: false,
            next_op: op,
            cursor: start,
            early: BTreeMap::new(),
        });
        tracing::error!(op, "partition: entry found damaged on read");
    }
}

/// Gives a sealed segment that shares its bytes with another name (a hard
/// link into a `.fenced.N` copy, which must never change) a file of its own
/// before it is changed in place: a copy, renamed over it.
pub(crate) fn unshare<D: Disk>(io: &mut Io<D>, path: &Path) -> Result<(), PartitionError> {
    let links = io
        .disk
        .link_count(path)
        .map_err(|error| PartitionError::io(path, "stat a segment", &error))?;
    if links <= 1 {
        return Ok(());
    }
    let len = io
        .disk
        .file_len(path)
        .map_err(|error| PartitionError::io(path, "stat a segment", &error))?
        .unwrap_or(0);
    replace_with_prefix(io, path, len)
}
