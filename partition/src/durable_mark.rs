//! The durable mark (`<dir>/durable.mark`): the highest op the record log
//! made durable, kept in a file of its own.
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
//! The mark is written in the same WAL turn as the appends it covers, so it
//! costs no extra round: it may name an op whose entry never reached the
//! disk (a crash between the two writes), which only makes that op "maybe
//! acked", as a torn tail is. A cut lowers it first (before the log's
//! files shrink), so ops a view change removed are never taken for lost.
//!
//! On disk: two slots of [`SLOT_BYTES`], each one WAL frame holding
//! `magic, sequence, op`; writes alternate between them (the slot is the
//! sequence's parity) and open takes the valid slot with the higher
//! sequence. Only `persisted` partitions keep one: `replicated` ones ack
//! before the fsync, and reopen untrusted after any crash.

use std::collections::VecDeque;
use std::path::Path;

use bytes::Bytes;
use strand_wal::{Ack, FRAME_HEADER_BYTES, FileId, Frame, OpenMode, Request};

use crate::disk::Disk;
use crate::error::PartitionError;
use crate::io::{Io, Pending};
use crate::layout::durable_mark_path;

/// Bytes of one slot: one frame, padded to a block.
pub const SLOT_BYTES: usize = 4096;

const MAGIC: u64 = u64::from_le_bytes(*b"STDMARK1");
const PAYLOAD_BYTES: usize = SLOT_BYTES - FRAME_HEADER_BYTES;

/// A slot's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkSlot {
    /// Which write this was (higher is newer).
    pub sequence: u64,
    /// Every op up to this one may have been acknowledged.
    pub op: u64,
}

/// The frame payload of a slot.
fn encode(slot: MarkSlot) -> Bytes {
    let mut payload = vec![0u8; PAYLOAD_BYTES];
    payload[..8].copy_from_slice(&MAGIC.to_le_bytes());
    payload[8..16].copy_from_slice(&slot.sequence.to_le_bytes());
    payload[16..24].copy_from_slice(&slot.op.to_le_bytes());
    Bytes::from(payload)
}

/// The slot the bytes of one slot hold, if they are exactly one valid frame
/// of a mark (pure: the proptests reach the same checks open makes).
pub fn decode_slot(bytes: &[u8]) -> Option<MarkSlot> {
    let report = strand_wal::scan(bytes);
    let [frame] = report.frames[..] else {
        return None;
    };
    let payload = frame.payload(bytes);
    if !report.is_clean() || payload.len() != PAYLOAD_BYTES {
        return None;
    }
    let word = |at: usize| u64::from_le_bytes(payload[at..at + 8].try_into().expect("8 bytes"));
    (word(0) == MAGIC).then(|| MarkSlot {
        sequence: word(8),
        op: word(16),
    })
}

/// The newest valid slot of the mark file's bytes, if any.
pub fn decode_file(bytes: &[u8]) -> Option<MarkSlot> {
    bytes
        .chunks(SLOT_BYTES)
        .take(2)
        .filter_map(decode_slot)
        .max_by_key(|slot| slot.sequence)
}

/// The bytes of one slot as written.
pub fn encode_slot(slot: MarkSlot) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(SLOT_BYTES);
    strand_wal::encode_frame_into(&encode(slot), &mut bytes).expect("a slot fits a frame");
    assert_eq!(bytes.len(), SLOT_BYTES);
    bytes
}

/// Reads the mark at `dir` (`None`: absent or no valid slot, said in the
/// log: the checkpoint alone then vouches, as before marks existed).
pub(crate) fn read<D: Disk>(disk: &mut D, dir: &Path) -> Option<MarkSlot> {
    let path = durable_mark_path(dir);
    match disk.read_file(&path) {
        Ok(Some(bytes)) => {
            let slot = decode_file(&bytes);
            if slot.is_none() {
                tracing::warn!(path = %path.display(), "partition: the durable mark is unreadable");
            }
            slot
        }
        Ok(None) => None,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "partition: the durable mark cannot be read");
            None
        }
    }
}

/// What [`DurableMark::admit`] made of a prepare the log made durable.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// A durable mark covers it: report it durable.
    Durable,
    /// It waits for the mark write in flight or the next.
    Held,
    /// A mark write failed: report the prepare failed.
    Failed(PartitionError),
}

/// Whether the mark file at `path` is exactly two valid slots.
fn both_slots_valid<D: Disk>(disk: &mut D, path: &Path) -> bool {
    match disk.read_file(path) {
        Ok(Some(bytes)) => {
            bytes.len() == 2 * SLOT_BYTES
                && bytes
                    .chunks(SLOT_BYTES)
                    .all(|slot| decode_slot(slot).is_some())
        }
        _ => false,
    }
}

/// The mark of an open `persisted` partition: what is durable, what is in
/// flight, and the prepares waiting for it.
#[derive(Debug, Default)]
pub(crate) struct DurableMark {
    /// The mark's WAL file (`None`: the partition keeps no mark).
    file: Option<FileId>,
    /// The newest sequence written or submitted.
    sequence: u64,
    /// The op the newest durable slot names.
    durable_op: u64,
    /// The write in flight: its sequence and op.
    in_flight: Option<(u64, u64)>,
    /// The highest op a mark is due for.
    wanted_op: u64,
    /// Prepares durable in the log that wait for a mark covering them.
    awaiting: VecDeque<(u64, u32)>,
    /// The first failed write: every later prepare fails with it.
    pub failure: Option<PartitionError>,
}

impl DurableMark {
    /// Opens the mark of a `persisted` partition whose log ends at `log_op`:
    /// writes the file whole (both slots), durably, unless it holds exactly
    /// two valid slots (a crash may have cut a write short, or torn a
    /// slot: the WAL opens the file only as long as its valid frames, and
    /// a write to the other slot would fail), or when it names an op below
    /// `log_op` (the ops read back at open may have been acknowledged).
    /// Returns the op the mark named before (0: none).
    pub fn open<D: Disk>(
        io: &mut Io<D>,
        dir: &Path,
        log_op: u64,
    ) -> Result<(DurableMark, u64), PartitionError> {
        let path = durable_mark_path(dir);
        let found = read(&mut io.disk, dir);
        let whole = both_slots_valid(&mut io.disk, &path);
        let named = found.map_or(0, |slot| slot.op);
        let mut slot = found.unwrap_or(MarkSlot { sequence: 0, op: 0 });
        if found.is_none() || slot.op < log_op || !whole {
            slot = MarkSlot {
                sequence: slot.sequence + 1,
                op: slot.op.max(log_op),
            };
            let mut bytes = encode_slot(slot);
            let other = encode_slot(MarkSlot {
                sequence: slot.sequence.saturating_sub(1),
                op: slot.op,
            });
            if slot.sequence % 2 == 1 {
                bytes = [other, bytes].concat();
            } else {
                bytes.extend_from_slice(&other);
            }
            io.disk
                .write_at(&path, 0, &bytes)
                .map_err(|error| PartitionError::io(&path, "write the durable mark", &error))?;
        }
        let opened = io.open(&path, OpenMode::AppendDamaged)?;
        let mark = DurableMark {
            file: Some(opened.file),
            sequence: slot.sequence,
            durable_op: slot.op,
            wanted_op: slot.op,
            ..DurableMark::default()
        };
        Ok((mark, named))
    }

    /// Whether the partition keeps a mark (durable completions wait for it).
    pub fn kept(&self) -> bool {
        self.file.is_some()
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

    /// A mark for `op` is due (it was just appended): written now unless a
    /// write is in flight, in which case the next one covers it.
    pub fn want<D: Disk>(&mut self, io: &mut Io<D>, op: u64) -> Result<(), PartitionError> {
        if !self.kept() {
            return Ok(());
        }
        self.wanted_op = self.wanted_op.max(op);
        self.submit_if_due(io)
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
    /// durable), after submitting the next write if one is due.
    pub fn on_written<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        sequence: u64,
        result: Result<(), PartitionError>,
        released: &mut Vec<(u64, u32)>,
    ) -> Result<(), PartitionError> {
        let Some((in_flight, op)) = self.in_flight else {
            return Ok(()); // superseded by a synchronous write
        };
        if in_flight != sequence {
            return Ok(());
        }
        self.in_flight = None;
        if let Err(error) = result {
            self.failure.get_or_insert(error.clone());
            return Err(error);
        }
        self.durable_op = self.durable_op.max(op);
        while let Some(&(awaiting, checksum)) = self.awaiting.front() {
            if awaiting > self.durable_op {
                break;
            }
            released.push((awaiting, checksum));
            self.awaiting.pop_front();
        }
        self.submit_if_due(io)
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
        let Some(file) = self.file else {
            return Ok(());
        };
        self.awaiting.retain(|&(awaiting, _)| awaiting <= op);
        self.wanted_op = self.wanted_op.min(op);
        if self.durable_op <= op && self.in_flight.is_none_or(|(_, target)| target <= op) {
            return Ok(());
        }
        self.sequence += 1;
        let sequence = self.sequence;
        self.in_flight = None;
        let frame = slot_frame(MarkSlot { sequence, op })?;
        io.run(file, |user_data| Request::WriteAt {
            file,
            offset: slot_offset(sequence),
            frame,
            user_data,
            ack: Ack::Durable,
        })?;
        self.durable_op = op;
        released.extend(self.awaiting.drain(..));
        Ok(())
    }

    /// Closes the mark's file (nothing in flight).
    pub fn close<D: Disk>(&mut self, io: &mut Io<D>) -> Result<(), PartitionError> {
        match self.file.take() {
            Some(file) => io.close(file),
            None => Ok(()),
        }
    }

    fn submit_if_due<D: Disk>(&mut self, io: &mut Io<D>) -> Result<(), PartitionError> {
        let Some(file) = self.file else {
            return Ok(());
        };
        if self.in_flight.is_some() || self.wanted_op <= self.durable_op || self.failure.is_some() {
            return Ok(());
        }
        self.sequence += 1;
        let (sequence, op) = (self.sequence, self.wanted_op);
        let frame = slot_frame(MarkSlot { sequence, op })?;
        io.request(file, Pending::Mark { sequence }, |user_data| {
            Request::WriteAt {
                file,
                offset: slot_offset(sequence),
                frame,
                user_data,
                ack: Ack::Durable,
            }
        })?;
        self.in_flight = Some((sequence, op));
        Ok(())
    }
}

/// Where the slot of write `sequence` lies.
fn slot_offset(sequence: u64) -> u64 {
    (sequence % 2) * SLOT_BYTES as u64
}

fn slot_frame(slot: MarkSlot) -> Result<Frame, PartitionError> {
    Frame::new(encode(slot)).map_err(|error| PartitionError::wal(Path::new("durable.mark"), error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newer_valid_slot_wins_and_a_damaged_one_is_skipped() {
        let older = encode_slot(MarkSlot {
            sequence: 4,
            op: 40,
        });
        let newer = encode_slot(MarkSlot {
            sequence: 5,
            op: 52,
        });
        let file = [older.clone(), newer.clone()].concat();
        assert_eq!(
            decode_file(&file),
            Some(MarkSlot {
                sequence: 5,
                op: 52
            })
        );
        let mut damaged = file.clone();
        damaged[SLOT_BYTES + 100] ^= 1;
        assert_eq!(
            decode_file(&damaged),
            Some(MarkSlot {
                sequence: 4,
                op: 40
            })
        );
        assert_eq!(
            decode_file(&vec![0; 2 * SLOT_BYTES]),
            None,
            "zeros: no mark"
        );
        assert_eq!(
            decode_file(&file[..SLOT_BYTES + 10]),
            Some(MarkSlot {
                sequence: 4,
                op: 40
            })
        );
    }
}
