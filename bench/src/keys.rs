//! Record keys: each record the bench produces names its producer and its
//! sequence number in its key, so a read-back can tell every record apart and
//! match it to its acknowledgement.
//!
//! A key is 16 bytes: the producer id, then the sequence, both big-endian
//! `u64`. A producer's records go round-robin over the partitions, starting
//! at its own id, one record or one batch's worth of records at a time (the
//! [`Spread`]), so the partition of a record follows from its key and the
//! run length.

/// Bytes in every key.
pub const KEY_SIZE: usize = 16;

/// Who produced a record, and its place in that producer's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordKey {
    /// The bench producer (0-based).
    pub producer: u32,
    /// The record's sequence number within its producer (0-based).
    pub sequence: u64,
}

impl RecordKey {
    /// The key's 16 bytes.
    pub fn encode(self) -> [u8; KEY_SIZE] {
        let mut bytes = [0; KEY_SIZE];
        bytes[..8].copy_from_slice(&u64::from(self.producer).to_be_bytes());
        bytes[8..].copy_from_slice(&self.sequence.to_be_bytes());
        bytes
    }

    /// Reads a key back; `None` for bytes the bench did not write (another
    /// length, or a producer id above `u32::MAX`).
    pub fn decode(bytes: &[u8]) -> Option<RecordKey> {
        let bytes: &[u8; KEY_SIZE] = bytes.try_into().ok()?;
        let producer = u64::from_be_bytes(bytes[..8].try_into().ok()?);
        let sequence = u64::from_be_bytes(bytes[8..].try_into().ok()?);
        Some(RecordKey {
            producer: u32::try_from(producer).ok()?,
            sequence,
        })
    }

    /// The partition this record is produced to, of `partition_count`,
    /// when each partition takes `run_length` consecutive records in turn.
    pub fn partition(self, partition_count: u32, run_length: u64) -> u32 {
        assert!(partition_count >= 1, "a topic has at least one partition");
        assert!(run_length >= 1, "a run of no records");
        let turn = self.sequence / run_length;
        let slot = (u64::from(self.producer) + turn) % u64::from(partition_count);
        slot as u32
    }
}

/// How consecutive records of a producer are spread over the partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Spread {
    /// A batch's worth of consecutive records to one partition, then the
    /// next: what a sticky partitioner does with records without a key
    /// (Kafka's default for them, Iggy's balanced partitioning), so every
    /// partition gets whole batches.
    Batch,
    /// Each record to the next partition: records whose keys fall evenly on
    /// every partition. At a given rate, the more partitions, the smaller
    /// each batch.
    Record,
}

impl Spread {
    /// Consecutive records one partition gets before the next one's turn.
    pub fn run_length(self, batch: u32) -> u64 {
        match self {
            Spread::Batch => u64::from(batch.max(1)),
            Spread::Record => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_back_as_written() {
        let key = RecordKey {
            producer: 7,
            sequence: 1 << 40,
        };
        assert_eq!(RecordKey::decode(&key.encode()), Some(key));
    }

    #[test]
    fn foreign_bytes_are_not_a_key() {
        assert_eq!(RecordKey::decode(b"k1"), None);
        assert_eq!(RecordKey::decode(&[0xff; KEY_SIZE]), None);
    }

    #[test]
    fn a_producer_spreads_its_records_round_robin_from_its_own_id() {
        let partitions: Vec<u32> = (0..5)
            .map(|sequence| {
                RecordKey {
                    producer: 2,
                    sequence,
                }
                .partition(3, 1)
            })
            .collect();
        assert_eq!(partitions, vec![2, 0, 1, 2, 0]);
    }
}
