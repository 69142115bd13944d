//! **Pure**: what a topic's size limit promises, in the bench's terms. A
//! soak judges the server against these three numbers: the segment size a
//! limit wants, the most bytes one partition may hold on a node, and the
//! highest earliest offset the limit may leave behind.
//!
//! The server's rule (`RecordLog::retention_count` in `strand-partition`):
//! drop the oldest sealed segment only while what remains without it (the
//! active segment included) still holds at least the limit, never the
//! active segment nor one holding an op past the persisted commit (a
//! replica whose retention waits on its commit persists it at once). So
//! once anything was dropped the log holds at least the limit, and at most
//! the limit plus its oldest segment, plus the active segment's growth and
//! the one or two sealed while the commit's write was in flight, plus a
//! 1 MiB zero-filled tail ahead of the active segment's appends.

use serde::Serialize;
use strand_client::{SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN};

/// The default segment size is the limit divided by this: retention drops
/// whole segments, so a partition overshoots its limit by a segment or two,
/// and sixteen segments keep that within about a fifth of the limit.
pub const SEGMENTS_PER_RETENTION: u64 = 16;

/// Segments a partition may hold beyond its limit: the oldest one (kept
/// while the rest alone is below the limit), the active one's growth, and
/// the one or two sealed while the commit that lets them go was being
/// persisted.
pub const SEGMENTS_OVER_LIMIT_MAX: u64 = 4;

/// Bytes a partition may hold beyond its limit and those segments: the
/// 1 MiB zero-filled tail ahead of the active segment, the index files,
/// superblocks and cursor files, with room to spare.
pub const PARTITION_SLACK_BYTES: u64 = 2 << 20;

/// Bytes a log entry adds to its records, at most: the 8-byte frame
/// header, the 256-byte prepare header and the 64-byte batch header,
/// rounded up.
pub const ENTRY_OVERHEAD_BYTES_MAX: u64 = 512;

/// Log bytes the bench does not write that a retained range may hold:
/// entries without records (a new primary's no-op, cursor events).
pub const FOREIGN_ENTRY_BYTES_MAX: u64 = 1 << 20;

/// A topic's size limit and the segment size it is applied with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RetentionLimit {
    /// Per-partition limit (`retention_bytes` of the topic).
    pub retention_bytes: u64,
    /// Bytes per record-log segment (`segment_bytes` of the topic).
    pub segment_bytes: u64,
}

/// How large the bench's records are on the log, at most: what turns a
/// byte limit into an offset bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RecordSizes {
    /// One record alone in its entry: the record's encoded bytes plus a
    /// whole entry's overhead (the most log bytes one offset can take).
    pub record_bytes_max: u64,
}

/// The segment size for a limit of `retention_bytes` when none was given:
/// a sixteenth of it, within the server's 64 KiB to 1 GiB.
pub fn segment_bytes_for(retention_bytes: u64) -> u64 {
    (retention_bytes / SEGMENTS_PER_RETENTION).clamp(SEGMENT_BYTES_MIN, SEGMENT_BYTES_MAX)
}

impl RecordSizes {
    /// The sizes of records of `record_encoded_bytes` (key, value and record
    /// header), however they are batched.
    pub fn new(record_encoded_bytes: u64) -> RecordSizes {
        assert!(record_encoded_bytes > 0);
        RecordSizes {
            record_bytes_max: record_encoded_bytes + ENTRY_OVERHEAD_BYTES_MAX,
        }
    }
}

impl RetentionLimit {
    /// The most bytes one partition's directory may hold on a node: the
    /// limit, [`SEGMENTS_OVER_LIMIT_MAX`] segments and
    /// [`PARTITION_SLACK_BYTES`].
    pub fn partition_bytes_max(&self) -> u64 {
        self.retention_bytes
            .saturating_add(SEGMENTS_OVER_LIMIT_MAX.saturating_mul(self.segment_bytes))
            .saturating_add(PARTITION_SLACK_BYTES)
    }

    /// The highest earliest offset retention may leave in a partition whose
    /// high watermark is `high_watermark`: once it drops, the log still
    /// holds at least the limit, so at least that many bytes' worth of the
    /// newest records (counted at their largest, less
    /// [`FOREIGN_ENTRY_BYTES_MAX`] of entries that are not records) must
    /// still be there, whatever the segment size. A lenient bound: it
    /// catches a partition that dropped more than the limit allows, not one
    /// that dropped a little.
    pub fn earliest_offset_max(&self, high_watermark: u64, sizes: RecordSizes) -> u64 {
        assert!(sizes.record_bytes_max > 0);
        let kept_bytes_min = self.retention_bytes.saturating_sub(FOREIGN_ENTRY_BYTES_MAX);
        let kept_records_min = kept_bytes_min / sizes.record_bytes_max;
        let earliest_offset_max = high_watermark.saturating_sub(kept_records_min);
        assert!(earliest_offset_max <= high_watermark);
        earliest_offset_max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_default_segment_is_a_sixteenth_of_the_limit_within_the_server_range() {
        assert_eq!(segment_bytes_for(1 << 30), 64 * MIB);
        assert_eq!(segment_bytes_for(16 * MIB), MIB);
        assert_eq!(segment_bytes_for(100_000), SEGMENT_BYTES_MIN, "floor");
        assert_eq!(segment_bytes_for(1 << 40), SEGMENT_BYTES_MAX, "ceiling");
    }

    #[test]
    fn a_partition_may_hold_its_limit_four_segments_and_two_mebibytes() {
        let limit = RetentionLimit {
            retention_bytes: 1 << 30,
            segment_bytes: 64 * MIB,
        };
        assert_eq!(limit.partition_bytes_max(), (1024 + 4 * 64 + 2) * MIB);
    }

    #[test]
    fn retention_keeps_at_least_the_limit() {
        let limit = RetentionLimit {
            retention_bytes: 16 * MIB,
            segment_bytes: MIB,
        };
        let sizes = RecordSizes::new(1_000);
        assert_eq!(sizes.record_bytes_max, 1_512);
        // 16 MiB less 1 MiB of foreign entries, at 1,512 bytes a record:
        // 10,402 records must remain.
        assert_eq!(limit.earliest_offset_max(1_000_000, sizes), 989_598);
        assert_eq!(
            limit.earliest_offset_max(5_000, sizes),
            0,
            "a log below its limit may drop nothing"
        );
    }

    #[test]
    fn a_segment_larger_than_the_limit_still_keeps_the_limit() {
        let limit = RetentionLimit {
            retention_bytes: 8 * MIB,
            segment_bytes: 64 * MIB,
        };
        let sizes = RecordSizes::new(1_000);
        let kept = (8 * MIB - MIB) / 1_512;
        assert_eq!(
            limit.earliest_offset_max(1_000_000, sizes),
            1_000_000 - kept
        );
    }
}
