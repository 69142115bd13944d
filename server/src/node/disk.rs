//! The data disk's room: a node refuses produces while its data disk has
//! less free space than its reserve, and takes them again by itself once
//! space is freed.
//!
//! A watcher (the node's `disk_watch` task) reads the file system's free
//! space (`statvfs`) every [`DISK_CHECK_MS`]; between readings each
//! admitted produce spends its bytes from the room left above the reserve, so a burst cannot write far
//! past the last reading. The reserve is what the node still writes while
//! it refuses produces: backups appending what their primaries accepted,
//! cursor commits, the metadata plane, superblocks. A full disk takes
//! produces again once a quarter of the reserve is free above it. A write
//! that still finds the disk full fails its replica's storage, which the
//! shard opens again once the disk has room.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// How often the watcher reads the free space.
pub const DISK_CHECK_MS: u64 = 100;

/// The reserve when the configuration names none: 5% of the file system,
/// at most 1 GiB.
pub const DISK_RESERVE_FRACTION: u64 = 20;
/// Largest default reserve.
pub const DISK_RESERVE_DEFAULT_MAX: u64 = 1 << 30;

/// What the node knows of its data disk's room; shared by the watcher and
/// the groups admitting produces.
#[derive(Debug)]
pub struct DiskRoom {
    /// Bytes free above the reserve, less what produces admitted since the
    /// last reading (may go below zero).
    room_bytes: AtomicI64,
    /// Free bytes at the last reading.
    free_bytes: AtomicU64,
    /// The reserve in bytes (0 until the first reading when defaulted).
    reserve_bytes: AtomicU64,
    /// Set while the room is used up.
    full: AtomicBool,
}

impl Default for DiskRoom {
    fn default() -> DiskRoom {
        DiskRoom {
            room_bytes: AtomicI64::new(i64::MAX),
            free_bytes: AtomicU64::new(u64::MAX),
            reserve_bytes: AtomicU64::new(0),
            full: AtomicBool::new(false),
        }
    }
}

impl DiskRoom {
    /// Admits a produce of `bytes`: false (and nothing spent) while the
    /// disk is full; otherwise spends them, and marks the disk full when
    /// they use up the room.
    pub fn admit(&self, bytes: u64) -> bool {
        if self.full.load(Ordering::Relaxed) {
            return false;
        }
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        let before = self.room_bytes.fetch_sub(bytes, Ordering::Relaxed);
        if before < bytes {
            if !self.full.swap(true, Ordering::Relaxed) {
                crate::metrics::disk(self.free_bytes.load(Ordering::Relaxed), true);
            }
            return false;
        }
        true
    }

    /// Takes a reading of the file system: `free_bytes` free, keeping
    /// `reserve_bytes`. Returns whether the disk is full now. A full disk
    /// stays full until a quarter of the reserve is free above it, so that
    /// a disk at the edge (its free space moves by the megabytes as files
    /// are preallocated, rolled and trimmed) does not take and refuse
    /// produces in turn.
    pub fn observe(&self, free_bytes: u64, reserve_bytes: u64) -> bool {
        let room = i64::try_from(free_bytes.saturating_sub(reserve_bytes)).unwrap_or(i64::MAX);
        let resume_at = match self.full.load(Ordering::Relaxed) {
            true => reserve_bytes.saturating_add(reserve_bytes / 4),
            false => reserve_bytes,
        };
        let full = free_bytes < resume_at;
        self.free_bytes.store(free_bytes, Ordering::Relaxed);
        self.reserve_bytes.store(reserve_bytes, Ordering::Relaxed);
        self.room_bytes.store(room, Ordering::Relaxed);
        self.full.store(full, Ordering::Relaxed);
        full
    }

    /// Whether the node refuses produces now.
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    /// Free bytes and the reserve at the last reading.
    pub fn reading(&self) -> (u64, u64) {
        (
            self.free_bytes.load(Ordering::Relaxed),
            self.reserve_bytes.load(Ordering::Relaxed),
        )
    }
}

/// Free and total bytes of the file system holding `path`, as an
/// unprivileged writer may use them.
pub fn space(path: &Path) -> std::io::Result<(u64, u64)> {
    let stats = rustix::fs::statvfs(path)?;
    let block = stats.f_frsize.max(1);
    Ok((
        stats.f_bavail.saturating_mul(block),
        stats.f_blocks.saturating_mul(block),
    ))
}

/// The reserve for a file system of `total_bytes`: the configured one, or
/// 5% of it up to 1 GiB.
pub fn reserve_for(configured: Option<u64>, total_bytes: u64) -> u64 {
    configured.unwrap_or((total_bytes / DISK_RESERVE_FRACTION).min(DISK_RESERVE_DEFAULT_MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn produces_spend_the_room_until_the_next_reading() {
        let room = DiskRoom::default();
        assert!(room.admit(u64::MAX / 4), "no reading yet: nothing refused");
        assert!(!room.observe(1_000, 400));
        assert!(room.admit(500));
        assert!(room.admit(100), "exactly the room");
        assert!(!room.admit(1), "the room is used up");
        assert!(room.is_full());
        assert!(!room.admit(1), "stays full until a reading");
        assert!(
            room.observe(480, 400),
            "full until a quarter of the reserve is free above it"
        );
        assert!(room.observe(300, 400), "below the reserve");
        assert!(!room.admit(1));
        assert!(!room.observe(10_000, 400), "space freed");
        assert!(room.admit(1));
        assert_eq!(room.reading(), (10_000, 400));
    }

    #[test]
    fn the_default_reserve_is_a_twentieth_up_to_a_gibibyte() {
        assert_eq!(reserve_for(None, 100 << 20), 5 << 20);
        assert_eq!(reserve_for(None, 1 << 40), 1 << 30);
        assert_eq!(reserve_for(Some(7), 1 << 40), 7);
    }

    #[test]
    fn the_space_of_a_real_directory_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (free, total) = space(dir.path()).expect("statvfs");
        assert!(total > 0 && free <= total);
    }
}
