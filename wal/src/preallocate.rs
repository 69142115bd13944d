//! Zero-filled room ahead of a file's appends, for files whose fsyncs are small.
//!
//! An `fdatasync` of a file that grew must also commit the new size and the
//! new blocks: a second, synchronous metadata write per fsync (on ext4 without
//! a journal, the inode block). When each fsync carries only a few KiB, that
//! write is about half its cost. Overwriting blocks that already exist and
//! hold data (zeros) needs no metadata at all, so a file whose recent fsyncs
//! were all small gets [`FILL_BYTES`] of zeros written past its append end
//! whenever less than [`LOW_WATER_BYTES`] of such room is left: one metadata
//! commit per fill instead of one per fsync. (`fallocate` does not help: its
//! unwritten extents must be converted, which is a metadata write again.)
//!
//! The price is writing every byte twice (zeros, then data), which is why
//! only files with small fsyncs get it: with large ones the size commit is
//! small beside the data, and the bandwidth matters more. A file synced by a
//! shared sync (one `syncfs` for many files) earns none either: the size
//! commits of all its files ride on one journal commit.
//!
//! What callers see: nothing while the file is open. A clean close or rename
//! cuts the room off again (`ftruncate` + `fdatasync`), so closed files hold
//! exactly their frames. After a crash, an open file may end in zeros past its
//! last frame; the recovery scan reads them as a torn tail with nothing valid
//! after it, so they are cut like any other.
//!
//! A direct file (see [`crate::direct`]) gets room too, for another reason and
//! in another way: not zeros but an `fallocate` (no bytes written), so that
//! its appends land inside the file rather than extending it, which lets the
//! kernel issue them at once instead of on an io_uring worker. It needs no
//! run of small fsyncs, only a file past [`DIRECT_ROOM_AFTER_BYTES`], and its
//! room grows with the file ([`Preallocation::room_due`]).
//!
//! The zeros are written synchronously on the writer thread (a page-cache copy,
//! no wait for the device) and always start at or past the end of every append
//! planned so far, so no data write in flight can ever be overwritten by them,
//! and every later data write lands after them in the page cache.

/// Bytes of zeros one fill writes.
pub const FILL_BYTES: u64 = 1 << 20;

/// A fill is due when less than this much zero-filled room is left ahead of
/// the append end.
pub const LOW_WATER_BYTES: u64 = FILL_BYTES / 2;

/// A direct file gets room ahead only once it holds this much: a file
/// written once or rewritten in place (a superblock copy) never does.
pub const DIRECT_ROOM_AFTER_BYTES: u64 = 64 << 10;

/// The most room a direct file gets at a time (256 KiB): room stays
/// allocated until the file is closed, so a node of 10,000 partitions ties
/// up at most about 2.5 GiB of disk in it; a busy file allocates again every
/// 128 KiB or so, one `fallocate` for dozens of appends.
pub const DIRECT_ROOM_BYTES_MAX: u64 = 256 << 10;

/// An fsync covering fewer bytes than this counts as small.
///
/// Where the break-even lies depends on the disk (its bandwidth times the
/// cost of a size commit). Measured on the development VM: with 256 KiB,
/// one appender of 64 KiB ran 58% faster (latency-bound: 90 -> 142 MB/s),
/// but 16 appenders of 64 KiB over 16 files ran at half the speed (their
/// zeros doubled the bytes of a bandwidth-bound disk: 416 -> 221 MB/s). A
/// partition's appends (prepares of ~100 KiB) are of the second kind, so
/// only fsyncs below 64 KiB earn room.
pub const SMALL_SYNC_BYTES_BELOW: u64 = 64 << 10;

/// Consecutive small fsyncs after which a file gets zero-filled room. A file
/// written once and closed (a temp file renamed into place) never does.
pub const SMALL_SYNCS_BEFORE_FILL: u32 = 2;

/// A region of zeros to write now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fill {
    /// First byte to zero: at or past every append planned so far.
    pub offset: u64,
    /// Bytes to zero.
    pub len: u64,
}

/// One file's preallocation state: how far the file physically extends and
/// whether its fsyncs have been small enough to earn room ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preallocation {
    /// The file's physical length as far as the writer knows: never below
    /// what was on disk at open, grown by fills (appends past it grow the file
    /// too; [`Preallocation::fill_due`] takes the larger of the two).
    allocated_end: u64,
    /// Consecutive fsyncs that each covered fewer than
    /// [`SMALL_SYNC_BYTES_BELOW`] bytes, saturating.
    small_syncs: u32,
    /// Set after a fill failed: no more fills for this file.
    off: bool,
}

impl Preallocation {
    /// A file that holds `len` bytes and no room ahead.
    pub fn new(len: u64) -> Preallocation {
        Preallocation {
            allocated_end: len,
            small_syncs: 0,
            off: false,
        }
    }

    /// Records a completed fdatasync that made `covered_bytes` new bytes durable.
    pub fn on_sync(&mut self, covered_bytes: u64) {
        if covered_bytes == 0 {
            return;
        }
        self.small_syncs = if covered_bytes < SMALL_SYNC_BYTES_BELOW {
            self.small_syncs.saturating_add(1)
        } else {
            0
        };
    }

    /// Records a completed shared sync (one `syncfs` for many files). It
    /// commits every file's new size in one journal commit, so room ahead
    /// would save nothing and would double the bytes of a node that writes
    /// to many files at once: it ends the run of small fsyncs.
    pub fn on_shared_sync(&mut self) {
        self.small_syncs = 0;
    }

    /// The fill to write now, given the end of every append planned so far.
    pub fn fill_due(&self, append_end: u64) -> Option<Fill> {
        if self.off || self.small_syncs < SMALL_SYNCS_BEFORE_FILL {
            return None;
        }
        let room = self.allocated_end.saturating_sub(append_end);
        (room < LOW_WATER_BYTES).then(|| Fill {
            offset: self.allocated_end.max(append_end),
            len: FILL_BYTES,
        })
    }

    /// The room to allocate now for a direct file, whatever its syncs, once
    /// it has grown past [`DIRECT_ROOM_AFTER_BYTES`]: its appends then land
    /// inside the file instead of extending it. The room grows with the file
    /// (its length rounded up to a power of two, at most
    /// [`DIRECT_ROOM_BYTES_MAX`]), so a slowly growing file (an index) ties up
    /// little space.
    pub fn room_due(&self, append_end: u64) -> Option<Fill> {
        if self.off || append_end < DIRECT_ROOM_AFTER_BYTES {
            return None;
        }
        let len = append_end.next_power_of_two().min(DIRECT_ROOM_BYTES_MAX);
        let room = self.allocated_end.saturating_sub(append_end);
        (room < len / 2).then(|| Fill {
            offset: self.allocated_end.max(append_end),
            len,
        })
    }

    /// Records that `fill` was written.
    pub fn on_filled(&mut self, fill: Fill) {
        assert!(fill.len > 0, "a fill writes something");
        self.allocated_end = self.allocated_end.max(fill.offset + fill.len);
    }

    /// Records that `fill` failed (e.g. ENOSPC, EFBIG): the file gets no
    /// more. The data writes meet the real condition themselves and report
    /// it. The failed write may still have zeroed part of the region, so the
    /// file counts as extending over it: a close or rename cuts it off.
    pub fn on_fill_failed(&mut self, fill: Fill) {
        self.off = true;
        self.allocated_end = self.allocated_end.max(fill.offset + fill.len);
    }

    /// True when the file extends past `append_end` with zeros that a close or
    /// rename should cut off.
    pub fn has_room_past(&self, append_end: u64) -> bool {
        self.allocated_end > append_end
    }

    /// Records that the file was cut (or extended) to exactly `len` bytes.
    pub fn on_set_len(&mut self, len: u64) {
        self.allocated_end = len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn earned(len: u64) -> Preallocation {
        let mut state = Preallocation::new(len);
        for _ in 0..SMALL_SYNCS_BEFORE_FILL {
            state.on_sync(4096);
        }
        state
    }

    #[test]
    fn a_file_earns_room_only_after_consecutive_small_fsyncs() {
        let mut state = Preallocation::new(0);
        for _ in 1..SMALL_SYNCS_BEFORE_FILL {
            state.on_sync(1024);
        }
        assert_eq!(state.fill_due(4096), None);
        state.on_sync(SMALL_SYNC_BYTES_BELOW);
        state.on_sync(1024);
        assert_eq!(state.fill_due(4096), None, "a large fsync resets the count");
        state.on_sync(0);
        assert_eq!(state.fill_due(4096), None, "an empty fsync says nothing");
        for _ in 1..SMALL_SYNCS_BEFORE_FILL {
            state.on_sync(1024);
        }
        assert_eq!(
            state.fill_due(4096),
            Some(Fill {
                offset: 4096,
                len: FILL_BYTES
            })
        );
    }

    #[test]
    fn fills_start_past_every_planned_append_and_only_at_low_water() {
        let mut state = earned(100);
        let fill = state.fill_due(100).expect("no room yet");
        assert_eq!(fill.offset, 100);
        state.on_filled(fill);
        let end = 100 + FILL_BYTES;
        assert_eq!(state.fill_due(end - LOW_WATER_BYTES), None, "room left");
        let due = state
            .fill_due(end - LOW_WATER_BYTES + 1)
            .expect("low water");
        assert_eq!(due.offset, end, "the next fill continues the room");
        let outran = state.fill_due(end + 5000).expect("appends outran the room");
        assert_eq!(outran.offset, end + 5000, "never below planned appends");
    }

    #[test]
    fn direct_room_waits_for_growth_then_grows_with_the_file() {
        let mut state = Preallocation::new(0);
        assert_eq!(
            state.room_due(4096),
            None,
            "a superblock-sized file gets none"
        );
        assert_eq!(state.room_due(DIRECT_ROOM_AFTER_BYTES - 1), None);
        let first = state
            .room_due(DIRECT_ROOM_AFTER_BYTES + 100)
            .expect("due without any small fsync");
        assert_eq!(first.offset, DIRECT_ROOM_AFTER_BYTES + 100);
        assert_eq!(
            first.len,
            2 * DIRECT_ROOM_AFTER_BYTES,
            "the length rounded up"
        );
        state.on_filled(first);
        let end = first.offset + first.len;
        assert_eq!(state.room_due(first.offset + 4096), None, "room left");
        let next = state.room_due(end - 1000).expect("low water");
        assert_eq!(next.offset, end, "the room continues");
        state.on_filled(next);
        let large = state.room_due(64 * FILL_BYTES).expect("appends outran it");
        assert_eq!(large.len, DIRECT_ROOM_BYTES_MAX, "never more than the cap");
        state.on_fill_failed(large);
        assert_eq!(state.room_due(128 * FILL_BYTES), None, "a failure ends it");
    }

    #[test]
    fn a_failed_fill_stops_filling_and_a_cut_forgets_the_room() {
        let mut state = earned(0);
        let fill = state.fill_due(0).expect("due");
        state.on_filled(fill);
        assert!(state.has_room_past(10));
        state.on_set_len(10);
        assert!(!state.has_room_past(10));
        state.on_fill_failed(Fill {
            offset: 10,
            len: FILL_BYTES,
        });
        assert_eq!(state.fill_due(10), None);
        assert!(state.has_room_past(10), "a failed fill may have left zeros");
    }
}
