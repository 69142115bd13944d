//! After a crash: making durable what the crashed process may have left in
//! the page cache only.
//!
//! A failed fdatasync does not keep its bytes dirty. Linux marks the pages
//! clean (or drops them), so they read back whole for as long as they stay
//! cached, and no later fdatasync writes them: only a power loss shows they
//! never reached the disk. So every open after an unclean stop (a crash, or
//! a failed write or sync in this process) writes again, not just syncs,
//! every byte whose sync no durable record confirms:
//! - what the record log holds past the superblock's `op_checkpoint` (the
//!   active segment's tail, and any segment sealed since);
//! - what the cursor log holds past its `cursor_checkpoint` (both
//!   checkpoints name only what a sync confirmed);
//! - the spans a repair was about to write in place, anywhere in the log:
//!   each is recorded in `rewrites.intent`, durably, before its first write
//!   (one synced write per damaged run), and the file is removed once the
//!   open has written them again.
//!
//! Written again, the bytes are dirty and the sync that follows makes them
//! durable; a page the kernel dropped reads what the disk holds, so the
//! scan already saw the damage. Either way the open counts on nothing a
//! power loss can take. The cost is bounded by what was written since the
//! last superblock write (plus the repairs since the last open), and an
//! idle partition writes and syncs nothing.

use std::path::Path;

use crate::disk::Disk;
use crate::error::PartitionError;
use crate::layout::{cursors_log_path, rewrite_intent_path, segment_path};
use crate::partition::Partition;
use crate::scan::frame_payloads_past_damage;

/// Bytes written again per call (each call ends in an fdatasync).
const REWRITE_CHUNK_BYTES: u64 = 8 << 20;

/// Bytes of one recorded intent: segment, first byte, end.
const INTENT_PAYLOAD_BYTES: usize = 24;

/// Byte spans a repair was about to write: (segment first offset, from, to).
pub(crate) type Intent = (u64, u64, u64);

impl<D: Disk> Partition<D> {
    /// Writes again, durably, the bytes of the record log and of the cursor
    /// log past the superblock's checkpoints and the spans repairs recorded
    /// (see the module docs).
    pub(crate) fn rewrite_unsynced_tails(&mut self) -> Result<(), PartitionError> {
        for (path, from, to) in self.log.unsynced_spans(self.superblock.op_checkpoint) {
            rewrite_span(&mut self.io.disk, &path, from, to)?;
        }
        let (from, to) = self
            .cursors
            .unsynced_span(self.superblock.cursor_checkpoint);
        rewrite_span(&mut self.io.disk, &cursors_log_path(&self.dir), from, to)?;
        self.rewrite_intended_spans(true)
    }

    /// The spans repairs recorded: written again (`rewrite`: after an
    /// unclean stop) and forgotten. A clean shutdown synced them all.
    pub(crate) fn rewrite_intended_spans(&mut self, rewrite: bool) -> Result<(), PartitionError> {
        let path = rewrite_intent_path(&self.dir);
        let Some(bytes) = self
            .io
            .disk
            .read_file(&path)
            .map_err(|error| PartitionError::io(&path, "read the rewrite intents", &error))?
        else {
            return Ok(());
        };
        for (segment_first_offset, from, to) in
            decode_intents(&bytes).into_iter().filter(|_| rewrite)
        {
            let segment = segment_path(&self.dir, segment_first_offset);
            let len = self
                .io
                .disk
                .file_len(&segment)
                .map_err(|error| PartitionError::io(&segment, "stat a segment", &error))?;
            if let Some(len) = len {
                rewrite_span(&mut self.io.disk, &segment, from, to.min(len))?;
            }
        }
        self.io
            .disk
            .remove_file(&path)
            .map_err(|error| PartitionError::io(&path, "remove the rewrite intents", &error))
    }
}

/// Records, durably, that bytes `from..to` of the segment starting at
/// `segment_first_offset` are about to be written in place (`to` may lie
/// past the file's end: a run that ends its segment).
pub(crate) fn record_rewrite_intent<D: Disk>(
    disk: &mut D,
    dir: &Path,
    (segment_first_offset, from, to): Intent,
) -> Result<(), PartitionError> {
    let path = rewrite_intent_path(dir);
    let frame = encode_intent((segment_first_offset, from, to));
    let at = disk
        .file_len(&path)
        .map_err(|error| PartitionError::io(&path, "stat the rewrite intents", &error))?
        .unwrap_or(0);
    disk.write_at(&path, at, &frame)
        .map_err(|error| PartitionError::io(&path, "record a rewrite intent", &error))
}

/// One intent as appended: a WAL frame of three little-endian words.
pub(crate) fn encode_intent((segment_first_offset, from, to): Intent) -> Vec<u8> {
    let mut payload = Vec::with_capacity(INTENT_PAYLOAD_BYTES);
    for word in [segment_first_offset, from, to] {
        payload.extend_from_slice(&word.to_le_bytes());
    }
    let mut frame = Vec::new();
    strand_wal::encode_frame_into(&payload, &mut frame).expect("an intent fits a frame");
    frame
}

/// The intents a file holds; damaged or torn frames are skipped (a torn
/// one was never followed by its write: the record is synced first).
pub(crate) fn decode_intents(bytes: &[u8]) -> Vec<Intent> {
    let word = |payload: &[u8], at: usize| {
        u64::from_le_bytes(payload[at..at + 8].try_into().expect("8 bytes"))
    };
    frame_payloads_past_damage(bytes)
        .into_iter()
        .filter(|payload| payload.len() == INTENT_PAYLOAD_BYTES)
        .map(|payload| (word(payload, 0), word(payload, 8), word(payload, 16)))
        .collect()
}

/// Writes bytes `from..to` of `path` again as they read now, in chunks,
/// each synced.
fn rewrite_span<D: Disk>(
    disk: &mut D,
    path: &Path,
    from: u64,
    to: u64,
) -> Result<(), PartitionError> {
    if from >= to {
        return Ok(());
    }
    tracing::debug!(path = %path.display(), from, to, "partition: writing bytes a failed sync may have left unsynced again");
    let mut at = from;
    while at < to {
        let len = (to - at).min(REWRITE_CHUNK_BYTES);
        let bytes = disk
            .read_at(path, at, len as usize)
            .map_err(|error| PartitionError::io(path, "read an unsynced span", &error))?;
        disk.write_at(path, at, &bytes)
            .map_err(|error| PartitionError::io(path, "write an unsynced span again", &error))?;
        at += len;
    }
    Ok(())
}
