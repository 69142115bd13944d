//! The durable mark (`<dir>/durable.0.mark`, `durable.1.mark`): the
//! highest op the record log made durable, kept in files of its own.
//!
//! Under `persisted` a replica acknowledges a prepare only once it is
//! durable. A disk that loses the newest writes without a trace (a tail
//! block written nowhere, or somewhere else) leaves a log that simply ends
//! earlier, and no scan of the log can tell it from one that never had
//! those ops: the superblock's `op_checkpoint` vouches only for ops up to
//! its last write, every few seconds. The mark closes that gap. Every
//! prepare's durable completion waits until a mark covering it is durable
//! too, so after any crash the mark names at least every op this replica
//! may have acknowledged; open counts the ops it names that the log lacks
//! as faulty (never nacked, repaired from peers), as it does below the
//! checkpoint. A single lost or misdirected write cannot take both the
//! entry and the mark: they live in different files.
//!
//! Each append of the log comes with an append of a mark naming it, in the
//! same WAL turn: the two files' fsyncs run side by side and the marks
//! pipeline like the log's own appends, so a prepare waits for no extra
//! round. A mark may name an op whose entry never reached the disk (a
//! crash between the two writes), which only makes that op "maybe acked",
//! as a torn tail is. A cut lowers the mark first (before the log's files
//! shrink), so ops a view change removed are never taken for lost.
//!
//! On disk: each file is a WAL log of small frames `magic, sequence, op`;
//! the valid frame with the highest sequence, in either file, is the mark.
//! Marks go to one file until it holds [`ROTATE_BYTES`]; then the other is
//! cut to nothing and takes the next ones (only once a mark in the first
//! is durable, so a newer durable mark always survives the cut). Only
//! `persisted` partitions keep one: `replicated` ones ack before the
//! fsync, and reopen untrusted after any crash.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use strand_wal::{Ack, FRAME_HEADER_BYTES, FileId, Frame, OpenMode, Request};

use crate::disk::Disk;
use crate::error::PartitionError;
use crate::io::{Io, Pending};
use crate::layout::durable_mark_path;
use crate::scan::frame_payloads_past_damage;

/// Bytes of one mark's payload.
const PAYLOAD_BYTES: usize = 24;

/// Bytes of one mark as appended.
pub const MARK_BYTES: usize = FRAME_HEADER_BYTES + PAYLOAD_BYTES;

/// The file taking marks moves to the other once it holds this much (a
/// mark per append: at a few thousand appends a second, every few
/// seconds; open reads at most twice this). The default of
/// `PartitionConfig::durable_mark_rotate_bytes`.
pub const ROTATE_BYTES: u64 = 256 * 1024;

const MAGIC: u64 = u64::from_le_bytes(*b"STDMARK2");

/// Sequences at or above this are never written (2^62 marks): a frame
/// claiming one is not a mark, so the next sequence never overflows.
pub const SEQUENCE_LIMIT: u64 = 1 << 62;

/// One mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkSlot {
    /// Which write this was (higher is newer, across both files).
    pub sequence: u64,
    /// Every op up to this one may have been acknowledged.
    pub op: u64,
}

/// The frame payload of a mark.
fn encode(mark: MarkSlot) -> Bytes {
    let mut payload = Vec::with_capacity(PAYLOAD_BYTES);
    payload.extend_from_slice(&MAGIC.to_le_bytes());
    payload.extend_from_slice(&mark.sequence.to_le_bytes());
    payload.extend_from_slice(&mark.op.to_le_bytes());
    Bytes::from(payload)
}

/// The newest valid mark among the frames of one file's bytes, if any
/// (pure: the proptests reach the same checks open makes). Damaged frames
/// are skipped: the marks after them are newer still.
pub fn decode_file(bytes: &[u8]) -> Option<MarkSlot> {
    let marks = frame_payloads_past_damage(bytes)
        .into_iter()
        .filter_map(decode_payload);
    marks.fold(None, |newest: Option<MarkSlot>, mark| match newest {
        Some(newest) if mark.sequence <= newest.sequence => Some(newest),
        _ => Some(mark),
    })
}

fn decode_payload(payload: &[u8]) -> Option<MarkSlot> {
    if payload.len() != PAYLOAD_BYTES {
        return None;
    }
    let word = |at: usize| u64::from_le_bytes(payload[at..at + 8].try_into().expect("8 bytes"));
    (word(0) == MAGIC && word(8) < SEQUENCE_LIMIT).then(|| MarkSlot {
        sequence: word(8),
        op: word(16),
    })
}

/// The bytes of one mark as appended.
pub fn encode_mark(mark: MarkSlot) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(MARK_BYTES);
    strand_wal::encode_frame_into(&encode(mark), &mut bytes).expect("a mark fits a frame");
    assert_eq!(bytes.len(), MARK_BYTES);
    bytes
}

/// The newest mark of file `index` at `dir` (`None`: absent; `Some(None)`:
/// present, but no mark in it is valid).
fn read_one<D: Disk>(disk: &mut D, dir: &Path, index: usize) -> Option<Option<MarkSlot>> {
    let path = durable_mark_path(dir, index);
    match disk.read_file(&path) {
        Ok(Some(bytes)) => {
            let mark = decode_file(&bytes);
            if mark.is_none() && !bytes.is_empty() {
                tracing::warn!(path = %path.display(), "partition: a durable-mark file holds no readable mark");
            }
            Some(mark)
        }
        Ok(None) => None,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "partition: a durable-mark file cannot be read");
            Some(None)
        }
    }
}

/// Which of the two files at `dir` exist, and the newest mark with the
/// file holding it (`None`: no valid mark, said in the log: the checkpoint
/// alone then vouches, as before marks existed).
fn read_newest<D: Disk>(disk: &mut D, dir: &Path) -> ([bool; 2], Option<(MarkSlot, usize)>) {
    let found = [read_one(disk, dir, 0), read_one(disk, dir, 1)];
    let newest = (0..2)
        .filter_map(|index| found[index].flatten().map(|mark| (mark, index)))
        .max_by_key(|(mark, _)| mark.sequence);
    (found.map(|file| file.is_some()), newest)
}

/// Reads the mark at `dir`.
pub(crate) fn read<D: Disk>(disk: &mut D, dir: &Path) -> Option<MarkSlot> {
    read_newest(disk, dir).1.map(|(mark, _)| mark)
}

/// What [`DurableMark::admit`] made of a prepare the log made durable.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// A durable mark covers it: report it durable.
    Durable,
    /// It waits for a mark in flight.
    Held,
    /// A mark write failed: report the prepare failed.
    Failed(PartitionError),
}

/// The mark of an open `persisted` partition: what is durable, what is in
/// flight, and the prepares waiting for it.
#[derive(Debug, Default)]
pub(crate) struct DurableMark {
    /// Whether the partition keeps a mark.
    kept: bool,
    /// The partition's directory.
    dir: PathBuf,
    /// Bytes a file takes before the marks move to the other.
    rotate_bytes: u64,
    /// The two files: the active one is open; the other once it exists
    /// (created at the first move, so a partition that never fills one
    /// file holds one).
    files: [Option<FileId>; 2],
    /// Which file takes the next mark.
    active: usize,
    /// Bytes in the active file.
    active_len: u64,
    /// The sequence of the first mark in the active file.
    active_first_sequence: u64,
    /// The newest sequence submitted.
    sequence: u64,
    /// The op the newest submitted mark names.
    submitted_op: u64,
    /// The sequence of the newest durable mark.
    durable_sequence: u64,
    /// The op the newest durable mark names.
    durable_op: u64,
    /// Marks in flight, in order: sequence and op.
    in_flight: VecDeque<(u64, u64)>,
    /// Prepares durable in the log that wait for a mark covering them.
    awaiting: VecDeque<(u64, u32)>,
    /// The first failed write: every later prepare fails with it.
    pub failure: Option<PartitionError>,
}

impl DurableMark {
    /// Opens the mark of a `persisted` partition whose log ends at `log_op`:
    /// the file holding the newest mark (created when missing) and the
    /// other if it exists, marks going on in the first. Appends a mark
    /// durably when none is readable, when the newest names an op below
    /// `log_op` (the ops read back at open may have been acknowledged), or
    /// `after_crash`: the newest may then be one a failed sync left in the
    /// page cache only, which no later sync writes, and prepares this
    /// process reports durable on its word must not rest on it.
    /// Returns the op the mark named before (0: none).
    pub fn open<D: Disk>(
        io: &mut Io<D>,
        dir: &Path,
        log_op: u64,
        rotate_bytes: u64,
        after_crash: bool,
    ) -> Result<(DurableMark, u64), PartitionError> {
        assert!(rotate_bytes >= MARK_BYTES as u64, "a file holds a mark");
        let (exists, newest) = read_newest(&mut io.disk, dir);
        let (found, active) = newest.map_or((MarkSlot { sequence: 0, op: 0 }, 0), |n| n);
        let mut files = [None; 2];
        let mut active_len = 0;
        for (index, file) in files.iter_mut().enumerate() {
            let path = durable_mark_path(dir, index);
            let mode = match (exists[index], index == active) {
                (true, _) => OpenMode::AppendDamaged,
                (false, true) => OpenMode::CreateNew,
                (false, false) => continue,
            };
            let opened = io.open(&path, mode)?;
            *file = Some(opened.file);
            if index == active {
                active_len = opened.len;
            }
        }
        let mut mark = DurableMark {
            kept: true,
            dir: dir.to_path_buf(),
            rotate_bytes,
            files,
            active,
            active_len,
            active_first_sequence: found.sequence,
            sequence: found.sequence,
            submitted_op: found.op,
            durable_sequence: found.sequence,
            durable_op: found.op,
            ..DurableMark::default()
        };
        if newest.is_none() || found.op < log_op || after_crash {
            mark.write_now(io, found.op.max(log_op))?;
        }
        Ok((mark, found.op))
    }

    /// Whether the partition keeps a mark (durable completions wait for it).
    pub fn kept(&self) -> bool {
        self.kept
    }

    /// The op the newest durable mark names (`u64::MAX` without a mark: no
    /// durable completion waits).
    pub fn durable_op(&self) -> u64 {
        if self.kept() {
            self.durable_op
        } else {
            u64::MAX
        }
    }

    /// A mark for `op` is due (it was just appended): appended now, in the
    /// same WAL turn as the log's entry.
    pub fn want<D: Disk>(&mut self, io: &mut Io<D>, op: u64) -> Result<(), PartitionError> {
        if !self.kept || op <= self.submitted_op || self.failure.is_some() {
            return Ok(());
        }
        let file = self.rotate_if_due(io)?;
        self.sequence += 1;
        let sequence = self.sequence;
        let payload = encode(MarkSlot { sequence, op });
        io.append(file, payload, Ack::Durable, Pending::Mark { sequence })?;
        self.active_len += MARK_BYTES as u64;
        self.in_flight.push_back((sequence, op));
        self.submitted_op = op;
        Ok(())
    }

    /// The file the next mark goes to: the active one, or the other once
    /// the active one is full and one of its marks is durable. The other is
    /// cut to nothing first (its marks are all older than that durable
    /// one); it is created the first time, which waits for the create.
    fn rotate_if_due<D: Disk>(&mut self, io: &mut Io<D>) -> Result<FileId, PartitionError> {
        let active = self.files[self.active].expect("the active mark file is open");
        if self.active_len < self.rotate_bytes || self.durable_sequence < self.active_first_sequence
        {
            return Ok(active);
        }
        let other = 1 - self.active;
        let file = match self.files[other] {
            Some(file) => {
                io.request(file, Pending::Ignored, |user_data| Request::Truncate {
                    file,
                    len: 0,
                    user_data,
                })?;
                file
            }
            None => {
                io.open(&durable_mark_path(&self.dir, other), OpenMode::Truncate)?
                    .file
            }
        };
        self.files[other] = Some(file);
        self.active = other;
        self.active_len = 0;
        self.active_first_sequence = self.sequence + 1;
        Ok(file)
    }

    /// What becomes of a prepare the log made durable: durable now (a mark
    /// covers it), held until one does, or failed (a mark write failed: no
    /// later mark will cover it).
    pub fn admit(&mut self, op: u64, checksum: u32) -> Admitted {
        if op <= self.durable_op() {
            return Admitted::Durable;
        }
        if let Some(failure) = &self.failure {
            return Admitted::Failed(failure.clone());
        }
        self.awaiting.push_back((op, checksum));
        Admitted::Held
    }

    /// A mark write completed: the prepares it covers, in order (to report
    /// durable).
    pub fn on_written(
        &mut self,
        sequence: u64,
        result: Result<(), PartitionError>,
        released: &mut Vec<(u64, u32)>,
    ) -> Result<(), PartitionError> {
        while self.in_flight.front().is_some_and(|&(s, _)| s < sequence) {
            self.in_flight.pop_front();
        }
        let Some(&(_, op)) = self.in_flight.front().filter(|&&(s, _)| s == sequence) else {
            return Ok(()); // superseded by a synchronous write
        };
        self.in_flight.pop_front();
        if let Err(error) = result {
            self.failure.get_or_insert(error.clone());
            return Err(error);
        }
        self.durable_sequence = sequence;
        self.durable_op = self.durable_op.max(op);
        while let Some(&(awaiting, checksum)) = self.awaiting.front() {
            if awaiting > self.durable_op {
                break;
            }
            released.push((awaiting, checksum));
            self.awaiting.pop_front();
        }
        Ok(())
    }

    /// The prepares still waiting (after a failure: to report them failed).
    pub fn take_awaiting(&mut self) -> Vec<(u64, u32)> {
        self.awaiting.drain(..).collect()
    }

    /// Lowers the mark to `op`, durably, before the log is cut there: ops a
    /// view change removed are never taken for lost. Drops what waited
    /// above `op` (those prepares leave the log) and releases what waited
    /// at or below it (the mark covers them once written).
    pub fn lower_now<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        op: u64,
        released: &mut Vec<(u64, u32)>,
    ) -> Result<(), PartitionError> {
        if !self.kept() {
            return Ok(());
        }
        self.awaiting.retain(|&(awaiting, _)| awaiting <= op);
        if self.durable_op <= op && self.submitted_op <= op {
            return Ok(());
        }
        self.write_now(io, op)?;
        released.extend(self.awaiting.drain(..));
        Ok(())
    }

    /// Appends a mark naming `op` and waits until it is durable; marks in
    /// flight before it no longer count.
    fn write_now<D: Disk>(&mut self, io: &mut Io<D>, op: u64) -> Result<(), PartitionError> {
        assert!(self.kept, "a kept mark");
        let file = self.rotate_if_due(io)?;
        self.sequence += 1;
        let sequence = self.sequence;
        io.run(file, |user_data| {
            Request::append_frame(
                file,
                mark_frame(MarkSlot { sequence, op }),
                user_data,
                Ack::Durable,
            )
        })?;
        self.active_len += MARK_BYTES as u64;
        self.in_flight.clear();
        self.submitted_op = op;
        self.durable_sequence = sequence;
        self.durable_op = op;
        Ok(())
    }

    /// Closes the mark's files (nothing in flight).
    pub fn close<D: Disk>(&mut self, io: &mut Io<D>) -> Result<(), PartitionError> {
        self.kept = false;
        let mut result = Ok(());
        for file in self.files.iter_mut().filter_map(Option::take) {
            result = result.and(io.close(file));
        }
        result
    }
}

fn mark_frame(mark: MarkSlot) -> Frame {
    Frame::new(encode(mark)).expect("a mark fits a frame")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(range: std::ops::Range<u64>) -> Vec<u8> {
        range
            .flat_map(|sequence| {
                encode_mark(MarkSlot {
                    sequence,
                    op: sequence * 10,
                })
            })
            .collect()
    }

    #[test]
    fn the_newest_valid_mark_wins_and_a_damaged_or_torn_one_is_skipped() {
        let file = marks(1..6);
        let newest = MarkSlot {
            sequence: 5,
            op: 50,
        };
        assert_eq!(decode_file(&file), Some(newest));
        let mut damaged = file.clone();
        damaged[4 * MARK_BYTES + 20] ^= 1;
        assert_eq!(decode_file(&damaged).map(|mark| mark.sequence), Some(4));
        let mut middle = file.clone();
        middle[2 * MARK_BYTES + 20] ^= 1;
        assert_eq!(decode_file(&middle), Some(newest), "newer marks follow");
        assert_eq!(
            decode_file(&file[..4 * MARK_BYTES + 10]).map(|mark| mark.sequence),
            Some(4)
        );
        assert_eq!(decode_file(&[0u8; 4096]), None, "zeros: no mark");
        assert_eq!(decode_file(&[]), None);
    }
}
