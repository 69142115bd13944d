//! The state machine's snapshot (`machine.snapshot.0`, `machine.snapshot.1`):
//! an opaque image of what a group's state machine holds after an op, kept
//! beside the log so that the log below it can be dropped. The metadata
//! plane keeps its catalog here; a partition's record log needs none (its
//! records are the state).
//!
//! Two copies alternate: a new snapshot replaces the older one, so the
//! newer stays whole while the other is written, and a copy that later
//! reads back damaged leaves the other, with the log from its op on (the
//! owner drops the log only below the older copy's op). Each copy is one or
//! more WAL frames, each a piece of at most [`SNAPSHOT_PIECE_BYTES_MAX`]
//! payload bytes:
//!
//! ```text
//! magic u32 ("STMS") | op u64 | piece u32 | piece_count u32 | image bytes
//! ```
//!
//! A copy is read whole or not at all: a missing, damaged, reordered or
//! extra piece rejects it.

use std::path::Path;

use strand_wal::{FRAME_HEADER_BYTES, encode_frame_into, scan};

use crate::cursor_snapshot::SNAPSHOT_PIECE_BYTES_MAX;
use crate::disk::Disk;
use crate::error::PartitionError;
use crate::layout::{machine_snapshot_path, machine_snapshot_tmp_path};
use crate::partition::Partition;

/// The magic of a piece.
const MAGIC: u32 = 0x534d_5453; // "STMS"
/// Bytes before a piece's image bytes: magic, op, piece, piece count.
const PIECE_PREFIX_BYTES: usize = 4 + 8 + 4 + 4;
/// Image bytes one piece carries at most.
const PIECE_DATA_BYTES_MAX: usize = SNAPSHOT_PIECE_BYTES_MAX - PIECE_PREFIX_BYTES;

/// The largest image a snapshot holds: far above any catalog the metadata
/// plane's bounds allow, and below what a reader may allocate for one.
pub const MACHINE_SNAPSHOT_BYTES_MAX: usize = 256 << 20;

/// A state machine's image after `op`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineSnapshot {
    /// The last op the image reflects.
    pub op: u64,
    /// The image, in the state machine's own encoding.
    pub image: Vec<u8>,
}

/// The bytes of a snapshot file holding `image` after `op`.
pub(crate) fn encode(op: u64, image: &[u8]) -> Result<Vec<u8>, PartitionError> {
    if image.len() > MACHINE_SNAPSHOT_BYTES_MAX {
        return Err(PartitionError::MachineSnapshotInvalid {
            reason: format!("an image of {} bytes", image.len()),
        });
    }
    let pieces: Vec<&[u8]> = match image.is_empty() {
        true => vec![&[]],
        false => image.chunks(PIECE_DATA_BYTES_MAX).collect(),
    };
    let piece_count = pieces.len() as u32;
    let mut bytes = Vec::with_capacity(image.len() + pieces.len() * 64);
    for (piece, data) in pieces.into_iter().enumerate() {
        let mut payload = Vec::with_capacity(PIECE_PREFIX_BYTES + data.len());
        payload.extend_from_slice(&MAGIC.to_le_bytes());
        payload.extend_from_slice(&op.to_le_bytes());
        payload.extend_from_slice(&(piece as u32).to_le_bytes());
        payload.extend_from_slice(&piece_count.to_le_bytes());
        payload.extend_from_slice(data);
        bytes.reserve(FRAME_HEADER_BYTES + payload.len());
        encode_frame_into(&payload, &mut bytes).map_err(|error| {
            PartitionError::MachineSnapshotInvalid {
                reason: format!("piece {piece}: {error}"),
            }
        })?;
    }
    Ok(bytes)
}

/// Decodes a snapshot file, whole or not at all.
pub(crate) fn decode(bytes: &[u8]) -> Result<MachineSnapshot, String> {
    let report = scan(bytes);
    if !report.is_clean() {
        return Err("a damaged or torn piece".to_owned());
    }
    if report.frames.is_empty() {
        return Err("no piece".to_owned());
    }
    let mut expected: Option<(u64, u32)> = None;
    let mut image = Vec::new();
    for (index, span) in report.frames.iter().enumerate() {
        let payload = span.payload(bytes);
        let (op, piece, piece_count) = decode_prefix(payload)?;
        let (want_op, want_count) = *expected.get_or_insert((op, piece_count));
        if op != want_op || piece_count != want_count || piece as usize != index {
            return Err(format!(
                "piece {index} reads as piece {piece} of {piece_count} after op {op}"
            ));
        }
        image.extend_from_slice(&payload[PIECE_PREFIX_BYTES..]);
    }
    let (op, piece_count) = expected.expect("one piece at least");
    if report.frames.len() != piece_count as usize {
        return Err(format!("{} pieces of {piece_count}", report.frames.len()));
    }
    Ok(MachineSnapshot { op, image })
}

/// A piece's op, index and count.
fn decode_prefix(payload: &[u8]) -> Result<(u64, u32, u32), String> {
    let prefix = payload
        .get(..PIECE_PREFIX_BYTES)
        .ok_or_else(|| "a short piece".to_owned())?;
    let word = |at: usize| {
        u32::from_le_bytes([prefix[at], prefix[at + 1], prefix[at + 2], prefix[at + 3]])
    };
    if word(0) != MAGIC {
        return Err("bad magic".to_owned());
    }
    let mut op = [0; 8];
    op.copy_from_slice(&prefix[4..12]);
    Ok((u64::from_le_bytes(op), word(12), word(16)))
}

/// A copy read from disk: the snapshot and the file's bytes, or why it
/// does not read.
pub(crate) type CopyRead = Result<(MachineSnapshot, Vec<u8>), String>;

/// Reads copy `copy`: `None` when absent, `Some(Err(reason))` when present
/// but unreadable.
pub(crate) fn read_copy<D: Disk>(
    disk: &mut D,
    dir: &Path,
    copy: u8,
) -> Result<Option<CopyRead>, PartitionError> {
    let path = machine_snapshot_path(dir, copy);
    let bytes = disk
        .read_file(&path)
        .map_err(|error| PartitionError::io(&path, "read a machine snapshot", &error))?;
    Ok(bytes.map(|bytes| decode(&bytes).map(|snapshot| (snapshot, bytes))))
}

/// The ops of the readable copies, by copy (damaged ones are `None`, with
/// a warning: the other copy and the log from its op stand in).
pub(crate) fn copy_ops<D: Disk>(
    disk: &mut D,
    dir: &Path,
) -> Result<[Option<u64>; 2], PartitionError> {
    let mut ops = [None, None];
    for copy in 0..2u8 {
        match read_copy(disk, dir, copy)? {
            None => {}
            Some(Ok((snapshot, _))) => ops[copy as usize] = Some(snapshot.op),
            Some(Err(reason)) => tracing::warn!(
                copy,
                %reason,
                dir = %dir.display(),
                "partition: a machine snapshot copy is unreadable; the other stands in"
            ),
        }
    }
    Ok(ops)
}

impl<D: Disk> Partition<D> {
    /// Writes a snapshot of the state machine after `op`, durably, over the
    /// older copy (or an unreadable one): the newer copy is never touched.
    /// `op` must be above the newest copy's, and committed in the superblock
    /// on disk (waited for here): a reopen then finds a commit that covers
    /// the snapshot, and never applies an op twice.
    pub fn write_machine_snapshot(&mut self, op: u64, image: &[u8]) -> Result<(), PartitionError> {
        self.wait_for_superblock_writer(crate::writes::SuperblockWriter::busy)?;
        if op > self.superblock.durable.commit || op > self.log.durable_op {
            return Err(PartitionError::MachineSnapshotInvalid {
                reason: format!(
                    "after op {op}, past the durable commit {} or the durable log end {}",
                    self.superblock.durable.commit, self.log.durable_op
                ),
            });
        }
        let [first, second] = self.machine_snapshot_ops;
        assert!(
            first.max(second).is_none_or(|newest| op > newest),
            "snapshots move forward"
        );
        let copy = match (first, second) {
            (None, _) => 0,
            (_, None) => 1,
            (Some(first), Some(second)) => u8::from(second < first),
        };
        let bytes = encode(op, image)?;
        let (path, tmp) = (
            machine_snapshot_path(&self.dir, copy),
            machine_snapshot_tmp_path(&self.dir),
        );
        let disk = &mut self.io.disk;
        disk.remove_file(&tmp)
            .and_then(|()| disk.write_at(&tmp, 0, &bytes))
            .and_then(|()| disk.rename(&tmp, &path))
            .map_err(|error| PartitionError::io(&path, "write a machine snapshot", &error))?;
        self.machine_snapshot_ops[copy as usize] = Some(op);
        tracing::info!(
            op,
            copy,
            bytes = bytes.len(),
            "partition: machine snapshot written"
        );
        Ok(())
    }

    /// The readable snapshots, newest first (read from disk: a copy damaged
    /// since the open is left out).
    pub fn machine_snapshots(&mut self) -> Result<Vec<MachineSnapshot>, PartitionError> {
        let mut found = Vec::new();
        for copy in 0..2u8 {
            if let Some(Ok((snapshot, _))) = read_copy(&mut self.io.disk, &self.dir, copy)? {
                found.push(snapshot);
            }
        }
        found.sort_by_key(|snapshot| std::cmp::Reverse(snapshot.op));
        Ok(found)
    }

    /// The newest snapshot's op, if any copy was readable when last looked.
    pub fn machine_snapshot_newest(&self) -> Option<u64> {
        let [first, second] = self.machine_snapshot_ops;
        first.max(second)
    }

    /// The op below which the log may go: the older readable copy's (each
    /// copy then has the log from its op on), or the only one's.
    pub fn machine_snapshot_floor(&self) -> Option<u64> {
        match self.machine_snapshot_ops {
            [Some(first), Some(second)] => Some(first.min(second)),
            [first, second] => first.or(second),
        }
    }

    /// The newest readable copy a state transfer at `frontier_op` can ship:
    /// after an op at or below the frontier, and one the log reaches back
    /// to. Returns the file's bytes as on disk.
    pub(crate) fn machine_snapshot_for_export(
        &mut self,
        frontier_op: u64,
    ) -> Result<Option<Vec<u8>>, PartitionError> {
        let head_op = self.log.head_op;
        let mut best: Option<(u64, Vec<u8>)> = None;
        for copy in 0..2u8 {
            let Some(Ok((snapshot, bytes))) = read_copy(&mut self.io.disk, &self.dir, copy)? else {
                continue;
            };
            let usable = snapshot.op <= frontier_op && snapshot.op + 1 >= head_op;
            if usable && best.as_ref().is_none_or(|(op, _)| snapshot.op > *op) {
                best = Some((snapshot.op, bytes));
            }
        }
        Ok(best.map(|(_, bytes)| bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_larger_than_a_piece_round_trips_in_several_pieces() {
        let image: Vec<u8> = (0..3 * PIECE_DATA_BYTES_MAX + 17)
            .map(|at| at as u8)
            .collect();
        let bytes = encode(41, &image).expect("encodes");
        assert_eq!(scan(&bytes).frames.len(), 4);
        let decoded = decode(&bytes).expect("decodes");
        assert_eq!(decoded, MachineSnapshot { op: 41, image });
    }

    #[test]
    fn an_empty_image_is_one_piece() {
        let bytes = encode(3, &[]).expect("encodes");
        assert_eq!(scan(&bytes).frames.len(), 1);
        assert_eq!(
            decode(&bytes),
            Ok(MachineSnapshot {
                op: 3,
                image: Vec::new()
            })
        );
    }

    #[test]
    fn a_copy_missing_a_piece_or_with_a_damaged_one_is_rejected_whole() {
        let image = vec![7u8; 2 * PIECE_DATA_BYTES_MAX + 5];
        let bytes = encode(9, &image).expect("encodes");
        let frames = scan(&bytes).frames;
        assert_eq!(frames.len(), 3);
        let last = &frames[2];
        assert!(decode(&bytes[..last.offset as usize]).is_err());
        let middle = &frames[1];
        let mut without = bytes[..middle.offset as usize].to_vec();
        without.extend_from_slice(&bytes[middle.end() as usize..]);
        assert!(decode(&without).is_err());
        let mut damaged = bytes.clone();
        damaged[middle.offset as usize + 100] ^= 0x40;
        assert!(decode(&damaged).is_err());
        let mut repeated = bytes.clone();
        repeated.extend_from_slice(&bytes[last.offset as usize..last.end() as usize]);
        assert!(decode(&repeated).is_err());
        assert!(decode(&[0xAB; 64]).is_err());
        assert!(decode(&[]).is_err());
    }
}
