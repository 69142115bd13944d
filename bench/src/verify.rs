//! **Pure**: the exactly-once check. Every acknowledged record must be read
//! back exactly once, in the partition and at the offset it was acknowledged
//! with; a record whose produce failed (its outcome unknown) may be there at
//! most once; nothing else may be there at all.
//!
//! Under a size limit ([`Verifier::with_retention`]) the oldest records are
//! gone by design: an acknowledged record below its partition's earliest
//! retained offset counts as dropped by retention, not as missing; every one
//! at or above it must be read back as above; and the earliest offset must
//! not be above what the limit allows to drop
//! ([`RetentionLimit::earliest_offset_max`]). Without a limit every
//! partition must be there from offset 0.
//!
//! Memory is 9 bytes per record sent: per producer, one offset and one
//! read count per sequence number.

use serde::Serialize;

use crate::keys::RecordKey;
use crate::retention::{RecordSizes, RetentionLimit};

/// Examples of failures kept for the report (the counts are complete).
pub const EXAMPLES_MAX: usize = 10;

/// The offset slot of a record that was sent and not acknowledged.
const NOT_ACKNOWLEDGED: u64 = u64::MAX;

/// Collects acknowledgements, then reads, then judges.
#[derive(Debug, Clone)]
pub struct Verifier {
    partition_count: u32,
    /// Consecutive records of a producer that go to one partition.
    run_length: u64,
    /// `offsets[producer][sequence]`: the acked offset, or `NOT_ACKNOWLEDGED`.
    offsets: Vec<Vec<u64>>,
    /// `reads[producer][sequence]`: how often the record was read (saturating).
    reads: Vec<Vec<u8>>,
    /// The topic's size limit and the records' sizes, if it has a limit.
    retention: Option<(RetentionLimit, RecordSizes)>,
    /// Per partition: the earliest offset and the high watermark the
    /// read-back saw.
    ends: Vec<PartitionEnds>,
    verification: Verification,
}

/// What the read-back saw of one partition's ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct PartitionEnds {
    /// The highest earliest retained offset any reply named.
    earliest_offset: u64,
    /// The high watermark when the read-back reached it.
    high_watermark: Option<u64>,
}

/// One partition of a topic with a size limit, as the read-back found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RetainedRange {
    /// The partition.
    pub partition: u32,
    /// Its earliest retained offset: records below it were dropped.
    pub earliest_offset: u64,
    /// One past its last committed offset (`None`: the read-back did not
    /// reach it).
    pub high_watermark: Option<u64>,
    /// The highest earliest offset the limit allows at that high watermark.
    pub earliest_offset_max: Option<u64>,
}

/// What the read-back showed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// Records acknowledged to the producers.
    pub acknowledged: u64,
    /// Records whose produce failed (outcome unknown, or refused).
    pub unacknowledged: u64,
    /// Records read back.
    pub read: u64,
    /// Acknowledged records not read back: **lost**.
    pub missing: u64,
    /// Records read more than once (counted once per extra copy).
    pub duplicated: u64,
    /// Acknowledged records read at another partition or offset.
    pub misplaced: u64,
    /// Records read that the bench never sent.
    pub foreign: u64,
    /// Unacknowledged records read back once (written after all: allowed).
    pub unacknowledged_present: u64,
    /// Acknowledged records below their partition's earliest retained
    /// offset, not read back: dropped by the size limit (allowed).
    pub dropped_by_retention: u64,
    /// Partitions whose earliest offset is above what the size limit
    /// allows: retention dropped more than it may.
    pub dropped_too_early: u64,
    /// With a size limit: each partition's retained range.
    pub retained: Vec<RetainedRange>,
    /// Why the read-back stopped before the end, if it did.
    pub incomplete: Option<String>,
    /// The first few failures, readable.
    pub examples: Vec<String>,
}

impl Verification {
    /// True when every acknowledged record is there exactly once, where it
    /// was acknowledged, and nothing else is there twice or uninvited.
    pub fn passed(&self) -> bool {
        self.missing == 0
            && self.duplicated == 0
            && self.misplaced == 0
            && self.foreign == 0
            && self.dropped_too_early == 0
            && self.incomplete.is_none()
    }

    fn example(&mut self, text: String) {
        if self.examples.len() < EXAMPLES_MAX {
            self.examples.push(text);
        }
    }
}

impl Verifier {
    /// A verifier for a topic of `partition_count` partitions, each taking
    /// `run_length` consecutive records of a producer in turn.
    pub fn new(partition_count: u32, run_length: u64) -> Verifier {
        assert!(partition_count >= 1);
        assert!(run_length >= 1);
        Verifier {
            partition_count,
            run_length,
            offsets: Vec::new(),
            reads: Vec::new(),
            retention: None,
            ends: vec![PartitionEnds::default(); partition_count as usize],
            verification: Verification::default(),
        }
    }

    /// The topic has a size limit: records below a partition's earliest
    /// retained offset may be gone, within what `limit` allows for records
    /// of `sizes`.
    pub fn with_retention(mut self, limit: RetentionLimit, sizes: RecordSizes) -> Verifier {
        assert!(limit.retention_bytes > 0);
        self.retention = Some((limit, sizes));
        self
    }

    /// A reply from `partition` named `earliest_offset` as its earliest
    /// retained offset (it only moves up; the highest seen counts).
    pub fn log_start(&mut self, partition: u32, earliest_offset: u64) {
        assert!(partition < self.partition_count, "partition {partition}");
        let ends = &mut self.ends[partition as usize];
        ends.earliest_offset = ends.earliest_offset.max(earliest_offset);
    }

    /// The read-back of `partition` reached its end, `high_watermark`.
    pub fn high_watermark(&mut self, partition: u32, high_watermark: u64) {
        assert!(partition < self.partition_count, "partition {partition}");
        self.ends[partition as usize].high_watermark = Some(high_watermark);
    }

    /// `key` was acknowledged at `offset` (in its partition).
    pub fn acknowledged(&mut self, key: RecordKey, offset: u64) {
        assert_ne!(offset, NOT_ACKNOWLEDGED, "offset {offset} is out of range");
        let slot = self.slot(key);
        assert_eq!(
            *slot, NOT_ACKNOWLEDGED,
            "{key:?} acknowledged twice by the SDK"
        );
        *slot = offset;
        self.verification.acknowledged += 1;
    }

    /// `key` was sent and its produce failed.
    pub fn failed(&mut self, key: RecordKey) {
        let slot = self.slot(key);
        assert_eq!(*slot, NOT_ACKNOWLEDGED, "{key:?} both failed and acked");
        self.verification.unacknowledged += 1;
    }

    /// A record read back from `partition` at `offset`, with key bytes `key`.
    pub fn read(&mut self, partition: u32, offset: u64, key: &[u8]) {
        self.verification.read += 1;
        let known = RecordKey::decode(key).filter(|key| self.was_sent(*key));
        let Some(key) = known else {
            self.verification.foreign += 1;
            let text = format!("partition {partition} offset {offset}: foreign key {key:02x?}");
            self.verification.example(text);
            return;
        };
        let producer = key.producer as usize;
        let sequence = key.sequence as usize;
        let count = &mut self.reads[producer][sequence];
        *count = count.saturating_add(1);
        if *count > 1 {
            self.verification.duplicated += 1;
            let text = format!("{key:?} read again at partition {partition} offset {offset}");
            self.verification.example(text);
            return;
        }
        let acked = self.offsets[producer][sequence];
        if acked == NOT_ACKNOWLEDGED {
            self.verification.unacknowledged_present += 1;
            return;
        }
        let expected_partition = key.partition(self.partition_count, self.run_length);
        if (partition, offset) != (expected_partition, acked) {
            self.verification.misplaced += 1;
            self.verification.example(format!(
                "{key:?} acknowledged at partition {expected_partition} offset {acked}, \
                 read at partition {partition} offset {offset}"
            ));
        }
    }

    /// The read-back could not finish: the judgement fails, saying why.
    pub fn incomplete(&mut self, reason: String) {
        self.verification.incomplete.get_or_insert(reason);
    }

    /// The judgement, once every partition has been read back.
    pub fn finish(mut self) -> Verification {
        let earliest: Vec<u64> = match self.retention {
            Some(_) => self.ends.iter().map(|ends| ends.earliest_offset).collect(),
            None => vec![0; self.ends.len()],
        };
        for (producer, offsets) in self.offsets.iter().enumerate() {
            for (sequence, offset) in offsets.iter().enumerate() {
                if *offset == NOT_ACKNOWLEDGED || self.reads[producer][sequence] > 0 {
                    continue;
                }
                let key = RecordKey {
                    producer: producer as u32,
                    sequence: sequence as u64,
                };
                let partition = key.partition(self.partition_count, self.run_length);
                if *offset < earliest[partition as usize] {
                    self.verification.dropped_by_retention += 1;
                    continue;
                }
                self.verification.missing += 1;
                let text = format!(
                    "producer {producer} sequence {sequence}: acknowledged at partition \
                     {partition} offset {offset}, never read back"
                );
                self.verification.example(text);
            }
        }
        self.judge_retained_ranges();
        self.verification
    }

    /// With a size limit: each partition's earliest offset against the
    /// highest the limit allows; without one, a partition that does not
    /// start at 0 is an example (its records are counted missing).
    fn judge_retained_ranges(&mut self) {
        let ends = self.ends.clone();
        for (partition, ends) in (0..).zip(ends) {
            let Some((limit, sizes)) = self.retention else {
                if ends.earliest_offset > 0 {
                    self.verification.example(format!(
                        "partition {partition} starts at offset {} on a topic without retention",
                        ends.earliest_offset
                    ));
                }
                continue;
            };
            let earliest_offset_max = ends
                .high_watermark
                .map(|high_watermark| limit.earliest_offset_max(high_watermark, sizes));
            if let (Some(max), Some(high_watermark)) = (earliest_offset_max, ends.high_watermark)
                && ends.earliest_offset > max
            {
                self.verification.dropped_too_early += 1;
                self.verification.example(format!(
                    "partition {partition} starts at offset {}: a limit of {} bytes keeps it at \
                     or below {max} at high watermark {high_watermark}",
                    ends.earliest_offset, limit.retention_bytes
                ));
            }
            self.verification.retained.push(RetainedRange {
                partition,
                earliest_offset: ends.earliest_offset,
                high_watermark: ends.high_watermark,
                earliest_offset_max,
            });
        }
    }

    fn was_sent(&self, key: RecordKey) -> bool {
        self.offsets
            .get(key.producer as usize)
            .is_some_and(|offsets| (key.sequence as usize) < offsets.len())
    }

    /// The offset slot of `key`, growing the tables to hold it.
    fn slot(&mut self, key: RecordKey) -> &mut u64 {
        let producer = key.producer as usize;
        let sequence = usize::try_from(key.sequence).expect("sequence fits in memory");
        if self.offsets.len() <= producer {
            self.offsets.resize_with(producer + 1, Vec::new);
            self.reads.resize_with(producer + 1, Vec::new);
        }
        if self.offsets[producer].len() <= sequence {
            self.offsets[producer].resize(sequence + 1, NOT_ACKNOWLEDGED);
            self.reads[producer].resize(sequence + 1, 0);
        }
        &mut self.offsets[producer][sequence]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(producer: u32, sequence: u64) -> RecordKey {
        RecordKey { producer, sequence }
    }

    /// Two producers on two partitions; producer 0's sequence 2 failed.
    fn acked_run() -> Verifier {
        let mut verifier = Verifier::new(2, 1);
        verifier.acknowledged(key(0, 0), 0); // partition 0
        verifier.acknowledged(key(0, 1), 0); // partition 1
        verifier.failed(key(0, 2)); // partition 0
        verifier.acknowledged(key(1, 0), 1); // partition 1
        verifier.acknowledged(key(1, 1), 1); // partition 0
        verifier
    }

    #[test]
    fn every_acknowledged_record_read_once_at_its_offset_passes() {
        let mut verifier = acked_run();
        verifier.read(0, 0, &key(0, 0).encode());
        verifier.read(0, 1, &key(1, 1).encode());
        verifier.read(1, 0, &key(0, 1).encode());
        verifier.read(1, 1, &key(1, 0).encode());
        let verification = verifier.finish();
        assert!(verification.passed(), "{verification:?}");
        assert_eq!(verification.acknowledged, 4);
        assert_eq!(verification.unacknowledged, 1);
        assert_eq!(verification.read, 4);
    }

    #[test]
    fn an_unacknowledged_record_may_be_present_once() {
        let mut verifier = acked_run();
        verifier.read(0, 0, &key(0, 0).encode());
        verifier.read(0, 1, &key(1, 1).encode());
        verifier.read(0, 2, &key(0, 2).encode());
        verifier.read(1, 0, &key(0, 1).encode());
        verifier.read(1, 1, &key(1, 0).encode());
        let verification = verifier.finish();
        assert!(verification.passed(), "{verification:?}");
        assert_eq!(verification.unacknowledged_present, 1);
    }

    #[test]
    fn a_lost_acknowledged_record_fails() {
        let mut verifier = acked_run();
        verifier.read(0, 0, &key(0, 0).encode());
        verifier.read(1, 0, &key(0, 1).encode());
        verifier.read(1, 1, &key(1, 0).encode());
        let verification = verifier.finish();
        assert!(!verification.passed());
        assert_eq!(verification.missing, 1);
        assert!(verification.examples[0].contains("producer 1 sequence 1"));
    }

    #[test]
    fn a_record_delivered_at_two_offsets_fails() {
        let mut verifier = acked_run();
        verifier.read(0, 0, &key(0, 0).encode());
        verifier.read(0, 1, &key(1, 1).encode());
        verifier.read(0, 2, &key(0, 0).encode());
        verifier.read(1, 0, &key(0, 1).encode());
        verifier.read(1, 1, &key(1, 0).encode());
        let verification = verifier.finish();
        assert_eq!(verification.duplicated, 1);
        assert!(!verification.passed());
    }

    #[test]
    fn an_unacknowledged_record_written_twice_fails() {
        let mut verifier = acked_run();
        verifier.read(0, 2, &key(0, 2).encode());
        verifier.read(0, 3, &key(0, 2).encode());
        assert_eq!(verifier.finish().duplicated, 1);
    }

    #[test]
    fn a_record_at_another_offset_than_acknowledged_fails() {
        let mut verifier = acked_run();
        verifier.read(0, 1, &key(0, 0).encode());
        verifier.read(0, 0, &key(1, 1).encode());
        verifier.read(1, 0, &key(0, 1).encode());
        verifier.read(1, 1, &key(1, 0).encode());
        let verification = verifier.finish();
        assert_eq!(verification.misplaced, 2);
        assert_eq!(verification.missing, 0);
        assert!(!verification.passed());
    }

    #[test]
    fn records_the_bench_never_sent_fail() {
        let mut verifier = acked_run();
        verifier.read(0, 7, b"not a bench key");
        verifier.read(0, 8, &key(5, 0).encode());
        verifier.read(0, 9, &key(0, 99).encode());
        let verification = verifier.finish();
        assert_eq!(verification.foreign, 3);
        assert!(!verification.passed());
    }

    /// One producer, one partition of 1,000 records acknowledged at offsets
    /// 0..1000, under a limit that must keep 16 KiB of records beyond the
    /// 1 MiB allowed for entries that are not records.
    fn retained_run(acknowledged: u64) -> Verifier {
        let limit = RetentionLimit {
            retention_bytes: 16 * 1024 + (1 << 20),
            segment_bytes: 64 * 1024,
        };
        // 100-byte records with a whole entry each: 612 bytes; after a drop
        // at least (16 KiB + 1 MiB - 1 MiB) / 612 = 26 remain, whatever the
        // segment size.
        let sizes = RecordSizes::new(100);
        let mut verifier = Verifier::new(1, 1).with_retention(limit, sizes);
        for sequence in 0..acknowledged {
            verifier.acknowledged(key(0, sequence), sequence);
        }
        verifier
    }

    #[test]
    fn under_retention_records_below_the_earliest_offset_are_dropped_not_lost() {
        let mut verifier = retained_run(1_000);
        verifier.log_start(0, 900);
        verifier.log_start(0, 950);
        verifier.log_start(0, 940); // an older reply: the earliest only moves up
        for offset in 940..1_000 {
            verifier.read(0, offset, &key(0, offset).encode());
        }
        verifier.high_watermark(0, 1_000);
        let verification = verifier.finish();
        assert!(verification.passed(), "{verification:#?}");
        assert_eq!(verification.dropped_by_retention, 940);
        assert_eq!(verification.read, 60);
        assert_eq!(
            verification.retained,
            vec![RetainedRange {
                partition: 0,
                earliest_offset: 950,
                high_watermark: Some(1_000),
                earliest_offset_max: Some(974),
            }]
        );
    }

    #[test]
    fn under_retention_a_record_missing_from_the_retained_range_is_lost() {
        let mut verifier = retained_run(1_000);
        verifier.log_start(0, 950);
        for offset in (950..1_000).filter(|offset| *offset != 990) {
            verifier.read(0, offset, &key(0, offset).encode());
        }
        verifier.high_watermark(0, 1_000);
        let verification = verifier.finish();
        assert_eq!(verification.missing, 1);
        assert_eq!(verification.dropped_by_retention, 950);
        assert!(verification.examples[0].contains("offset 990"));
        assert!(!verification.passed());
    }

    #[test]
    fn retention_that_drops_more_than_its_limit_allows_fails() {
        let mut verifier = retained_run(1_000);
        verifier.log_start(0, 980);
        for offset in 980..1_000 {
            verifier.read(0, offset, &key(0, offset).encode());
        }
        verifier.high_watermark(0, 1_000);
        let verification = verifier.finish();
        assert_eq!(verification.missing, 0);
        assert_eq!(verification.dropped_too_early, 1, "{verification:#?}");
        assert!(verification.examples[0].contains("at or below 974"));
        assert!(!verification.passed());
    }

    #[test]
    fn without_retention_a_partition_that_starts_late_has_lost_records() {
        let mut verifier = Verifier::new(1, 1);
        for sequence in 0..10 {
            verifier.acknowledged(key(0, sequence), sequence);
        }
        verifier.log_start(0, 5);
        for offset in 5..10 {
            verifier.read(0, offset, &key(0, offset).encode());
        }
        verifier.high_watermark(0, 10);
        let verification = verifier.finish();
        assert_eq!(verification.missing, 5);
        assert_eq!(verification.dropped_by_retention, 0);
        assert!(verification.retained.is_empty());
        assert!(!verification.passed());
    }
}
