//! Records going out (built into batches) and coming back (cut out of fetch
//! replies without copying their bytes).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use strand_wire::ops::{FetchReply, PRODUCE_BATCH_BYTES_MAX};
use strand_wire::{BatchBuilder, RecordBatch};

/// A record to produce.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewRecord {
    /// The key (may be empty).
    pub key: Bytes,
    /// The value.
    pub value: Bytes,
    /// Named headers, in order.
    pub headers: Vec<(String, Bytes)>,
    /// Microseconds since the Unix epoch; `None` stamps the time it is batched.
    pub timestamp_us: Option<u64>,
}

impl NewRecord {
    /// A record with this key and value, no headers, stamped when batched.
    pub fn new(key: impl Into<Bytes>, value: impl Into<Bytes>) -> NewRecord {
        NewRecord {
            key: key.into(),
            value: value.into(),
            headers: Vec::new(),
            timestamp_us: None,
        }
    }

    /// Adds a header.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<Bytes>) -> NewRecord {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Bytes this record adds to a batch.
    pub fn encoded_size(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(name, value)| 2 + name.len() + 4 + value.len())
            .sum();
        strand_wire::batch::RECORD_OVERHEAD + self.key.len() + self.value.len() + headers
    }

    pub(crate) fn check(&self) -> Result<(), crate::ClientError> {
        let too_long = self.headers.len() > usize::from(u16::MAX)
            || self
                .headers
                .iter()
                .any(|(name, _)| name.len() > usize::from(u16::MAX))
            || self.encoded_size() > u32::MAX as usize / 2;
        if too_long {
            return Err(crate::ClientError::InvalidArgument {
                reason: "record too large: at most 65535 headers, header names under 64 KiB, \
                         records under 2 GiB"
                    .to_owned(),
            });
        }
        let batch_size = self.encoded_size() + strand_wire::batch::BATCH_HEADER_SIZE;
        if batch_size > PRODUCE_BATCH_BYTES_MAX {
            return Err(crate::ClientError::TooLarge {
                size: batch_size as u64,
                max: PRODUCE_BATCH_BYTES_MAX as u64,
            });
        }
        Ok(())
    }
}

/// Where a produced batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceAck {
    /// Offset of the batch's first record.
    pub offset_base: u64,
    /// Number of records (offsets `offset_base..offset_base + record_count`).
    pub record_count: u32,
}

/// A record read from a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedRecord {
    /// Its offset in the partition.
    pub offset: u64,
    /// Microseconds since the Unix epoch.
    pub timestamp_us: u64,
    /// The key (a slice of the fetch reply, not a copy).
    pub key: Bytes,
    /// The value (a slice of the fetch reply, not a copy).
    pub value: Bytes,
    /// Named headers, in order.
    pub headers: Vec<(String, Bytes)>,
}

/// What one fetch returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedRecords {
    /// The records at or after the offset asked for, in offset order.
    pub records: Vec<ConsumedRecord>,
    /// The offset to fetch next: one past the last record returned, or the
    /// offset asked for when none was.
    pub next_offset: u64,
    /// One past the last committed offset.
    pub high_watermark: u64,
    /// The oldest retained offset.
    pub log_start_offset: u64,
}

/// Microseconds since the Unix epoch, now.
pub(crate) fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_micros() as u64)
}

/// Builds one batch from `records` (stamping those without a timestamp).
pub(crate) fn build_batch(records: &[NewRecord]) -> RecordBatch {
    let size: usize = records.iter().map(NewRecord::encoded_size).sum();
    let mut builder = BatchBuilder::with_capacity(strand_wire::batch::BATCH_HEADER_SIZE + size);
    let now = now_us();
    for record in records {
        let headers: Vec<(&str, &[u8])> = record
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_ref()))
            .collect();
        builder.push(
            record.timestamp_us.unwrap_or(now),
            &record.key,
            &record.value,
            &headers,
        );
    }
    builder.finish()
}

/// Cuts the records at or after `from_offset` out of a fetch reply.
pub(crate) fn unpack_fetch(reply: FetchReply, from_offset: u64) -> FetchedRecords {
    let mut records = Vec::new();
    let mut next_offset = from_offset;
    for batch in &reply.batches {
        append_records(batch, from_offset, &mut records);
    }
    if let Some(last) = records.last() {
        next_offset = last.offset + 1;
    }
    FetchedRecords {
        records,
        next_offset,
        high_watermark: reply.high_watermark,
        log_start_offset: reply.log_start_offset,
    }
}

fn append_records(batch: &RecordBatch, from_offset: u64, out: &mut Vec<ConsumedRecord>) {
    let bytes = batch.bytes();
    for record in batch.records() {
        if record.offset < from_offset {
            continue; // the reply starts with the batch holding `from_offset`
        }
        out.push(ConsumedRecord {
            offset: record.offset,
            timestamp_us: record.timestamp_us,
            key: bytes.slice_ref(record.key),
            value: bytes.slice_ref(record.value),
            headers: record
                .headers()
                .map(|(name, value)| (name.to_owned(), bytes.slice_ref(value)))
                .collect(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The batch as a fetch reply carries it: `offset_base` patched in
    /// (bytes 0..8, outside the batch checksum).
    fn stored_at(batch: &RecordBatch, offset_base: u64) -> RecordBatch {
        let mut bytes = batch.bytes().to_vec();
        bytes[..8].copy_from_slice(&offset_base.to_le_bytes());
        RecordBatch::from_bytes(Bytes::from(bytes)).expect("patched batch is valid")
    }

    #[test]
    fn fetched_records_skip_what_precedes_the_offset() {
        let records: Vec<NewRecord> = (0..4)
            .map(|index: u8| NewRecord::new(vec![index], vec![index; 3]).with_header("h", vec![9]))
            .collect();
        let reply = FetchReply {
            high_watermark: 14,
            log_start_offset: 0,
            batches: vec![stored_at(&build_batch(&records), 10)],
        };
        let fetched = unpack_fetch(reply, 12);
        let offsets: Vec<u64> = fetched.records.iter().map(|record| record.offset).collect();
        assert_eq!(offsets, vec![12, 13]);
        assert_eq!(fetched.next_offset, 14);
        assert_eq!(&fetched.records[0].value[..], &[2, 2, 2]);
        assert_eq!(
            fetched.records[0].headers,
            vec![("h".to_owned(), Bytes::from_static(&[9]))]
        );
    }

    #[test]
    fn an_empty_fetch_keeps_the_offset() {
        let reply = FetchReply {
            high_watermark: 5,
            log_start_offset: 0,
            batches: Vec::new(),
        };
        assert_eq!(unpack_fetch(reply, 5).next_offset, 5);
    }
}
