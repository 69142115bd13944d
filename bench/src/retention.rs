//! **Pure**: what a topic's size limit promises, in the bench's terms. A
//! soak judges the server against these three numbers: the segment size a
//! limit wants, the most bytes one partition may hold on a node, and the
//! highest earliest offset the limit may leave behind.
//!
//! The server's rule (`RecordLog::retention_count` in `strand-partition`):
//! while the log is larger than the limit, drop its oldest sealed segment,
//! never the active one nor one holding an op past the persisted commit (a
//! replica whose retention waits on its commit persists it at once). So
//! after a drop the log still holds more than the limit less one segment,
//! and at most the limit plus the active segment plus the one or two sealed
//! while the commit's write was in flight, plus a 1 MiB zero-filled tail
//! ahead of the active segment's appends.

use serde::Serialize;
use strand_client::{SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN};

/// The default segment size is the limit divided by this: retention drops
/// whole segments, so a partition overshoots its limit by a segment or two,
/// and sixteen segments keep that within about a fifth of the limit.
pub const SEGMENTS_PER_RETENTION: u64 = 16;

/// Segments a partition may hold beyond its limit: the active one and the
/// one or two sealed while the commit that lets them go was being persisted.
pub const SEGMENTS_OVER_LIMIT_MAX: u64 = 3;

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

/// How large the bench's records and entries are on the log, at most: what
/// turns a byte limit into an offset bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RecordSizes {
    /// One record alone in its entry: the record's encoded bytes plus a
    /// whole entry's overhead (the most log bytes one offset can take).
    pub record_bytes_max: u64,
    /// The largest entry: a full batch plus the entry overhead.
    pub entry_bytes_max: u64,
}

/// The segment size for a limit of `retention_bytes` when none was given:
/// a sixteenth of it, within the server's 64 KiB to 1 GiB.
pub fn segment_bytes_for(retention_bytes: u64) -> u64 {
    (retention_bytes / SEGMENTS_PER_RETENTION).clamp(SEGMENT_BYTES_MIN, SEGMENT_BYTES_MAX)
}

impl RecordSizes {
    /// The sizes of records of `record_encoded_bytes` (key, value and record
    /// header) sent in batches of at most `batch_bytes_max` bytes.
    pub fn new(record_encoded_bytes: u64, batch_bytes_max: u64) -> RecordSizes {
        assert!(record_encoded_bytes > 0);
        assert!(batch_bytes_max >= record_encoded_bytes);
        RecordSizes {
            record_bytes_max: record_encoded_bytes + ENTRY_OVERHEAD_BYTES_MAX,
            entry_bytes_max: batch_bytes_max + ENTRY_OVERHEAD_BYTES_MAX,
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
    /// holds more than the limit less one sealed segment, so at least that
    /// many bytes' worth of the newest records (counted at their largest,
    /// less [`FOREIGN_ENTRY_BYTES_MAX`] of entries that are not records)
    /// must still be there. A lenient bound: it catches a partition that
    /// dropped more than the limit allows, not one that dropped a little.
    pub fn earliest_offset_max(&self, high_watermark: u64, sizes: RecordSizes) -> u64 {
        assert!(sizes.record_bytes_max > 0);
        let sealed_segment_bytes_max = self.segment_bytes.max(sizes.entry_bytes_max);
        let kept_bytes_min = self
            .retention_bytes
            .saturating_sub(sealed_segment_bytes_max)
            .saturating_sub(FOREIGN_ENTRY_BYTES_MAX);
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
    fn a_partition_may_hold_its_limit_three_segments_and_two_mebibytes() {
        let limit = RetentionLimit {
            retention_bytes: 1 << 30,
            segment_bytes: 64 * MIB,
        };
        assert_eq!(limit.partition_bytes_max(), (1024 + 3 * 64 + 2) * MIB);
    }

    #[test]
    fn retention_may_drop_all_but_the_limit_less_one_segment() {
        let limit = RetentionLimit {
            retention_bytes: 16 * MIB,
            segment_bytes: MIB,
        };
        let sizes = RecordSizes::new(1_000, 100_000);
        assert_eq!(sizes.record_bytes_max, 1_512);
        // 16 MiB less a 1 MiB segment less 1 MiB of foreign entries, at
        // 1,512 bytes a record: 9,709 records must remain.
        assert_eq!(limit.earliest_offset_max(1_000_000, sizes), 990_291);
        assert_eq!(
            limit.earliest_offset_max(5_000, sizes),
            0,
            "a log below its limit may drop nothing"
        );
    }

    #[test]
    fn an_entry_larger_than_a_segment_is_the_segment() {
        let limit = RetentionLimit {
            retention_bytes: 8 * MIB,
            segment_bytes: 64 * 1024,
        };
        let sizes = RecordSizes::new(1_000, 4 * MIB);
        let kept = (8 * MIB - (4 * MIB + 512) - MIB) / 1_512;
        assert_eq!(
            limit.earliest_offset_max(1_000_000, sizes),
            1_000_000 - kept
        );
    }
}
