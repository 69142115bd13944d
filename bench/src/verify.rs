//! **Pure**: the exactly-once check. Every acknowledged record must be read
//! back exactly once, in the partition and at the offset it was acknowledged
//! with; a record whose produce failed (its outcome unknown) may be there at
//! most once; nothing else may be there at all.
//!
//! Memory is 9 bytes per record sent: per producer, one offset and one
//! read count per sequence number.

use serde::Serialize;

use crate::keys::RecordKey;

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
    verification: Verification,
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
            verification: Verification::default(),
        }
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
        for (producer, offsets) in self.offsets.iter().enumerate() {
            for (sequence, offset) in offsets.iter().enumerate() {
                if *offset != NOT_ACKNOWLEDGED && self.reads[producer][sequence] == 0 {
                    self.verification.missing += 1;
                    let text = format!(
                        "producer {producer} sequence {sequence}: acknowledged at offset \
                         {offset}, never read back"
                    );
                    self.verification.example(text);
                }
            }
        }
        self.verification
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
}
