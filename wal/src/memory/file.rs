//! One inode's bytes: what reads see (the cache), what the last successful
//! fdatasync kept (the disk) and the writes between; what a sync, a failed
//! sync and a crash make of them.

use strand_prng::Prng;

use super::{CrashMode, FAILED_SYNC_PAGE_BYTES, MemoryFile};

impl MemoryFile {
    pub(super) fn sync(&mut self) {
        for write in self.unsynced.drain(..) {
            apply_write(&mut self.synced, write.offset, &write.data);
        }
    }

    /// A failed fdatasync: the unsynced writes never reach the disk, and each
    /// page they touched is kept in the cache (reads see the new bytes) or
    /// dropped from it (reads see the disk's), as `rng` draws.
    pub(super) fn fail_sync(&mut self, rng: &mut Prng) {
        let pages: std::collections::BTreeSet<u64> = self
            .unsynced
            .iter()
            .filter(|write| !write.data.is_empty())
            .flat_map(|write| {
                let first = write.offset / FAILED_SYNC_PAGE_BYTES;
                let last = (write.offset + write.data.len() as u64 - 1) / FAILED_SYNC_PAGE_BYTES;
                first..=last
            })
            .collect();
        self.unsynced.clear();
        for page in pages {
            if rng.below(2) == 0 {
                continue; // kept, marked clean
            }
            let start = (page * FAILED_SYNC_PAGE_BYTES) as usize;
            let end = (start + FAILED_SYNC_PAGE_BYTES as usize).min(self.current.len());
            for at in start..end {
                self.current[at] = self.synced.get(at).copied().unwrap_or(0);
            }
        }
    }

    /// Forgets the faults armed on this file that have not struck.
    pub(super) fn clear_faults(&mut self) {
        self.fail_next_write = None;
        self.fail_next_sync = None;
        self.fail_next_read = None;
    }

    /// The bytes a crash in `mode` leaves, drawing from `rng`.
    pub(super) fn crash_image(&self, mode: CrashMode, rng: &mut Prng) -> Vec<u8> {
        if mode == CrashMode::KeepAll {
            return self.current.clone();
        }
        let mut image = self.synced.clone();
        let pending = self.unsynced.len() as u64;
        let (kept, torn) = match mode {
            CrashMode::LoseUnsynced => (0, false),
            CrashMode::KeepAll | CrashMode::ProcessCrash => unreachable!("handled by the caller"),
            CrashMode::KeepPrefix => (rng.up_to(pending), false),
            CrashMode::TornWrite if pending == 0 => (0, false),
            CrashMode::TornWrite => (rng.below(pending), true),
            CrashMode::PowerLoss | CrashMode::Random => unreachable!("resolved by the caller"),
        };
        for write in &self.unsynced[..kept as usize] {
            apply_write(&mut image, write.offset, &write.data);
        }
        if let (true, Some(next)) = (torn, self.unsynced.get(kept as usize)) {
            let piece = rng.below(next.data.len().max(1) as u64) as usize;
            apply_write(&mut image, next.offset, &next.data[..piece]);
        }
        image
    }
}

pub(super) fn apply_write(buffer: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = offset as usize;
    let end = start + data.len();
    if buffer.len() < end {
        buffer.resize(end, 0);
    }
    buffer[start..end].copy_from_slice(data);
}

/// Writes `data` at `offset` of `file` wherever its bytes are (the cache,
/// "disk", the unsynced writes over them), never growing any of them: a
/// fault that rewrites bytes in place.
pub(super) fn overwrite(file: &mut MemoryFile, offset: u64, data: &[u8]) {
    for bytes in [&mut file.current, &mut file.synced] {
        for (at, byte) in data.iter().enumerate() {
            if let Some(slot) = bytes.get_mut(offset as usize + at) {
                *slot = *byte;
            }
        }
    }
    for write in &mut file.unsynced {
        for (at, byte) in data.iter().enumerate() {
            let position = offset + at as u64;
            if let Some(slot) = position
                .checked_sub(write.offset)
                .and_then(|within| write.data.get_mut(within as usize))
            {
                *slot = *byte;
            }
        }
    }
}
