//! **Pure**: which partition a keyed record goes to.
//!
//! Kafka's default partitioner: the 32-bit MurmurHash2 of the key bytes
//! (seed `0x9747b28c`), its sign bit cleared, modulo the partition count. A
//! key therefore maps to the same partition as in a Kafka client with the
//! same partition count, and every record with one key lands on one
//! partition, in send order (as long as the partition count stays).
//! Records without a key are spread in whole batches instead (see
//! [`StickyPartitions`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// MurmurHash2's seed as Kafka's partitioner uses it.
const SEED: u32 = 0x9747_b28c;
/// MurmurHash2's mixing multiplier.
const M: u32 = 0x5bd1_e995;
/// MurmurHash2's mixing shift.
const R: u32 = 24;

/// The 32-bit MurmurHash2 of `data`, as Kafka computes it (a Java `int`).
pub fn murmur2(data: &[u8]) -> i32 {
    let mut hash = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        hash = hash.wrapping_mul(M) ^ k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (index, byte) in tail.iter().enumerate().rev() {
            hash ^= u32::from(*byte) << (8 * index);
        }
        hash = hash.wrapping_mul(M);
    }
    hash ^= hash >> 13;
    hash = hash.wrapping_mul(M);
    hash ^= hash >> 15;
    hash as i32
}

/// The partition of a record with `key` among `partition_count`.
pub fn partition_for_key(key: &[u8], partition_count: u32) -> u32 {
    assert!(partition_count > 0, "a topic has partitions");
    (murmur2(key) as u32 & 0x7fff_ffff) % partition_count
}

/// Where records without a key go: one partition for a whole batch's worth
/// of records, then the next, so that batches stay full however many
/// partitions there are.
#[derive(Debug)]
pub struct StickyPartitions {
    records_per_partition: u64,
    sent: AtomicU64,
}

impl StickyPartitions {
    /// Moves to the next partition every `records_per_partition` records.
    pub fn new(records_per_partition: u32) -> StickyPartitions {
        StickyPartitions {
            records_per_partition: u64::from(records_per_partition.max(1)),
            sent: AtomicU64::new(0),
        }
    }

    /// The partition of the next record without a key.
    pub fn next(&self, partition_count: u32) -> u32 {
        assert!(partition_count > 0, "a topic has partitions");
        let sent = self.sent.fetch_add(1, Ordering::Relaxed);
        ((sent / self.records_per_partition) % u64::from(partition_count)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes as Kafka's `Utils.murmur2` computes them (published by
    /// clients that check their port against Kafka's).
    const KAFKA_HASHES: [(&str, i32); 11] = [
        ("21", -973_932_308),
        ("foobar", -790_332_482),
        ("a-little-bit-long-string", -985_981_536),
        ("a-little-bit-longer-string", -1_486_304_829),
        (
            "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
            -58_897_971,
        ),
        ("abc", 479_470_107),
        ("1", -1_993_445_489),
        ("12", 126_087_238),
        ("123", -267_702_483),
        ("1234", -1_614_185_708),
        ("12345", -1_188_365_604),
    ];

    #[test]
    fn hashes_match_kafkas() {
        for (key, hash) in KAFKA_HASHES {
            assert_eq!(murmur2(key.as_bytes()), hash, "{key}");
        }
    }

    #[test]
    fn partitions_clear_the_sign_bit_then_take_the_remainder() {
        for (key, hash) in KAFKA_HASHES {
            let expected = (hash & 0x7fff_ffff) as u32 % 12;
            assert_eq!(partition_for_key(key.as_bytes(), 12), expected, "{key}");
        }
        assert_eq!(partition_for_key(b"anything", 1), 0);
    }

    #[test]
    fn records_without_a_key_fill_one_partition_then_the_next() {
        let sticky = StickyPartitions::new(3);
        let partitions: Vec<u32> = (0..10).map(|_| sticky.next(2)).collect();
        assert_eq!(partitions, vec![0, 0, 0, 1, 1, 1, 0, 0, 0, 1]);
    }
}
