//! Record batches: what producers send and fetches hand out, without copying.
//!
//! A batch is a 64-byte [`BatchHeader`] followed by its records:
//!
//! ```text
//! record := length u32 (bytes after this field)
//!           timestamp_delta_us i64 (from the batch's first_timestamp_us)
//!           key_length u32, key
//!           value_length u32, value
//!           header_count u16, { name_length u16, name (UTF-8), value_length u32, value }*
//! ```
//!
//! The batch checksum covers bytes `16..length`: everything but `offset_base`,
//! `length` and the checksum itself. Producers send `offset_base = 0`; the
//! partition's offset for the batch lives in the prepare that carries it, so
//! the stored bytes (and their checksums) are exactly what the producer sent.
//! A fetch reply patches `offset_base` into a copy of the 64-byte header and
//! hands out the records themselves as slices of the stored bytes.

use bytes::Bytes;
use zerocopy::little_endian::{I64, U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::checksum::checksum;
use crate::error::BodyError;
use crate::header::is_zero;

/// Size of a batch header, in bytes.
pub const BATCH_HEADER_SIZE: usize = 64;
/// Bytes a record takes besides its key, value and headers.
pub const RECORD_OVERHEAD: usize = 4 + 8 + 4 + 4 + 2;
/// Bytes the batch checksum skips at the start (`offset_base`, `length`, `crc`).
const CHECKSUM_START: usize = 16;

bitflags::bitflags! {
    /// Batch attributes. None are defined yet; any set bit is rejected, so a
    /// later version can add compression without old readers misreading it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct BatchAttributes: u16 {}
}

/// The fixed header in front of every record batch.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct BatchHeader {
    /// Offset of the first record (0 from producers; assigned by the partition).
    pub offset_base: U64,
    /// Size of the whole batch, this header included.
    pub length: U32,
    /// crc32c over bytes `16..length`.
    pub crc: U32,
    /// Number of records.
    pub record_count: U32,
    /// [`BatchAttributes`].
    pub attributes: U16,
    /// Zero.
    pub reserved_a: U16,
    /// Timestamp of the first record, microseconds since the Unix epoch.
    pub first_timestamp_us: U64,
    /// Largest record timestamp in the batch.
    pub max_timestamp_us: U64,
    /// Zero.
    pub reserved: [u8; 24],
}

const _: () = assert!(size_of::<BatchHeader>() == BATCH_HEADER_SIZE);

impl BatchHeader {
    /// A copy of this header with `offset_base` set: what a fetch reply sends
    /// in front of the stored records. The checksum stays valid.
    pub fn with_offset_base(&self, offset_base: u64) -> BatchHeader {
        let mut header = *self;
        header.offset_base.set(offset_base);
        header
    }
}

/// One record, borrowed from its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The record's offset: the batch's base offset plus its index.
    pub offset: u64,
    /// Microseconds since the Unix epoch.
    pub timestamp_us: u64,
    /// The key (may be empty).
    pub key: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    headers: &'a [u8],
    header_count: u16,
}

impl<'a> Record<'a> {
    /// The record's headers, as (name, value) pairs.
    pub fn headers(&self) -> RecordHeaders<'a> {
        RecordHeaders {
            bytes: self.headers,
            remaining: self.header_count,
        }
    }
}

/// Iterator over a record's headers. The batch was validated, so it never fails.
#[derive(Debug, Clone)]
pub struct RecordHeaders<'a> {
    bytes: &'a [u8],
    remaining: u16,
}

impl<'a> Iterator for RecordHeaders<'a> {
    type Item = (&'a str, &'a [u8]);

    fn next(&mut self) -> Option<(&'a str, &'a [u8])> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let (name, value, rest) =
            split_header(self.bytes).expect("headers of a validated batch parse");
        self.bytes = rest;
        Some((name, value))
    }
}

/// A record batch whose structure and checksum have been validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordBatch {
    bytes: Bytes,
}

impl RecordBatch {
    /// Validates `bytes` as exactly one record batch.
    pub fn from_bytes(bytes: Bytes) -> Result<RecordBatch, BodyError> {
        validate_batch(&bytes)?;
        Ok(RecordBatch { bytes })
    }

    /// The batch's bytes, as stored and sent.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The batch header.
    pub fn header(&self) -> &BatchHeader {
        header_of(&self.bytes).expect("a validated batch has a header")
    }

    /// Number of records.
    pub fn record_count(&self) -> u32 {
        self.header().record_count.get()
    }

    /// The records, with offsets counted from `offset_base`.
    pub fn records_from(&self, offset_base: u64) -> Records<'_> {
        let header = self.header();
        Records {
            bytes: &self.bytes[BATCH_HEADER_SIZE..],
            next_offset: offset_base,
            remaining: header.record_count.get(),
            first_timestamp_us: header.first_timestamp_us.get(),
        }
    }

    /// The records, with offsets counted from the header's `offset_base`.
    pub fn records(&self) -> Records<'_> {
        self.records_from(self.header().offset_base.get())
    }
}

/// Iterator over the records of a validated batch.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    bytes: &'a [u8],
    next_offset: u64,
    remaining: u32,
    first_timestamp_us: u64,
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let (parts, rest) = split_record(self.bytes).expect("records of a validated batch parse");
        self.bytes = rest;
        let record = Record {
            offset: self.next_offset,
            timestamp_us: self
                .first_timestamp_us
                .wrapping_add_signed(parts.timestamp_delta_us),
            key: parts.key,
            value: parts.value,
            headers: parts.headers,
            header_count: parts.header_count,
        };
        self.next_offset += 1;
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining as usize, Some(self.remaining as usize))
    }
}

/// Builds a record batch for a producer.
#[derive(Debug)]
pub struct BatchBuilder {
    bytes: Vec<u8>,
    record_count: u32,
    first_timestamp_us: Option<u64>,
    max_timestamp_us: u64,
}

impl Default for BatchBuilder {
    fn default() -> BatchBuilder {
        BatchBuilder::with_capacity(4096)
    }
}

impl BatchBuilder {
    /// A builder with room for `capacity` bytes before it reallocates.
    pub fn with_capacity(capacity: usize) -> BatchBuilder {
        let mut bytes = Vec::with_capacity(capacity.max(BATCH_HEADER_SIZE));
        bytes.resize(BATCH_HEADER_SIZE, 0);
        BatchBuilder {
            bytes,
            record_count: 0,
            first_timestamp_us: None,
            max_timestamp_us: 0,
        }
    }

    /// Number of records pushed.
    pub fn record_count(&self) -> u32 {
        self.record_count
    }

    /// Size the batch would have if finished now.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// Size a record with these parts adds to the batch.
    pub fn record_size(key: &[u8], value: &[u8], headers: &[(&str, &[u8])]) -> usize {
        let header_bytes: usize = headers
            .iter()
            .map(|(name, value)| 2 + name.len() + 4 + value.len())
            .sum();
        RECORD_OVERHEAD + key.len() + value.len() + header_bytes
    }

    /// Appends one record.
    pub fn push(&mut self, timestamp_us: u64, key: &[u8], value: &[u8], headers: &[(&str, &[u8])]) {
        assert!(self.record_count < u32::MAX, "batch record count overflows");
        assert!(
            headers.len() <= usize::from(u16::MAX),
            "too many record headers"
        );
        let first = *self.first_timestamp_us.get_or_insert(timestamp_us);
        self.max_timestamp_us = self.max_timestamp_us.max(timestamp_us);
        let size = BatchBuilder::record_size(key, value, headers);
        let length = u32::try_from(size - 4).expect("record shorter than 4 GiB");
        let delta = (timestamp_us as i64).wrapping_sub(first as i64);
        self.bytes.reserve(size);
        self.bytes.extend_from_slice(&length.to_le_bytes());
        self.bytes.extend_from_slice(&delta.to_le_bytes());
        put_bytes_u32(&mut self.bytes, key);
        put_bytes_u32(&mut self.bytes, value);
        self.bytes
            .extend_from_slice(&(headers.len() as u16).to_le_bytes());
        for (name, value) in headers {
            let name_length = u16::try_from(name.len()).expect("header name shorter than 64 KiB");
            self.bytes.extend_from_slice(&name_length.to_le_bytes());
            self.bytes.extend_from_slice(name.as_bytes());
            put_bytes_u32(&mut self.bytes, value);
        }
        self.record_count += 1;
    }

    /// Seals the batch: fills in the header and its checksum.
    pub fn finish(mut self) -> RecordBatch {
        let length = u32::try_from(self.bytes.len()).expect("batch shorter than 4 GiB");
        let mut header = BatchHeader::new_zeroed();
        header.length.set(length);
        header.record_count.set(self.record_count);
        header
            .first_timestamp_us
            .set(self.first_timestamp_us.unwrap_or(0));
        header.max_timestamp_us.set(self.max_timestamp_us);
        self.bytes[..BATCH_HEADER_SIZE].copy_from_slice(header.as_bytes());
        let crc = checksum(&self.bytes[CHECKSUM_START..]);
        self.bytes[12..16].copy_from_slice(&crc.to_le_bytes());
        let batch = RecordBatch {
            bytes: Bytes::from(self.bytes),
        };
        debug_assert_eq!(validate_batch(&batch.bytes), Ok(()));
        batch
    }
}

fn put_bytes_u32(out: &mut Vec<u8>, value: &[u8]) {
    let length = u32::try_from(value.len()).expect("field shorter than 4 GiB");
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(value);
}

fn header_of(bytes: &[u8]) -> Result<&BatchHeader, BodyError> {
    let (header, _) = BatchHeader::ref_from_prefix(bytes).map_err(|_| BodyError::Truncated {
        at: 0,
        field: "batch header",
    })?;
    Ok(header)
}

/// Validates one whole record batch: header, checksum, every record's bounds,
/// every header name's UTF-8, timestamps within the batch's range.
pub fn validate_batch(bytes: &[u8]) -> Result<(), BodyError> {
    let header = header_of(bytes)?;
    let length = header.length.get() as usize;
    if length < BATCH_HEADER_SIZE || length != bytes.len() {
        return Err(BodyError::Invalid {
            field: "batch length",
            reason: "does not match the bytes",
        });
    }
    let expected = header.crc.get();
    let actual = checksum(&bytes[CHECKSUM_START..]);
    if expected != actual {
        return Err(BodyError::BatchChecksum { expected, actual });
    }
    let unknown = header.attributes.get() & !BatchAttributes::all().bits();
    if unknown != 0 {
        return Err(BodyError::UnknownFlags {
            field: "batch attributes",
            bits: u64::from(unknown),
        });
    }
    if header.reserved_a.get() != 0 || !is_zero(&header.reserved) {
        return Err(BodyError::ReservedNotZero {
            field: "batch header",
        });
    }
    let first = header.first_timestamp_us.get();
    let max = header.max_timestamp_us.get();
    if max < first {
        return Err(BodyError::Invalid {
            field: "batch timestamps",
            reason: "max below first",
        });
    }
    let mut rest = &bytes[BATCH_HEADER_SIZE..];
    for _ in 0..header.record_count.get() {
        let (parts, after) = split_record(rest)?;
        let timestamp = first.wrapping_add_signed(parts.timestamp_delta_us);
        if timestamp > max {
            return Err(BodyError::Invalid {
                field: "record timestamp",
                reason: "above the batch's max timestamp",
            });
        }
        let mut headers = parts.headers;
        for _ in 0..parts.header_count {
            let (_, _, after_header) = split_header(headers)?;
            headers = after_header;
        }
        if !headers.is_empty() {
            return Err(BodyError::Invalid {
                field: "record",
                reason: "length disagrees with fields",
            });
        }
        rest = after;
    }
    if !rest.is_empty() {
        return Err(BodyError::TrailingBytes { count: rest.len() });
    }
    Ok(())
}

struct RecordParts<'a> {
    timestamp_delta_us: i64,
    key: &'a [u8],
    value: &'a [u8],
    header_count: u16,
    headers: &'a [u8],
}

fn take<'a>(
    bytes: &mut &'a [u8],
    length: usize,
    field: &'static str,
) -> Result<&'a [u8], BodyError> {
    if bytes.len() < length {
        return Err(BodyError::Truncated { at: 0, field });
    }
    let (head, tail) = bytes.split_at(length);
    *bytes = tail;
    Ok(head)
}

fn take_u32(bytes: &mut &[u8], field: &'static str) -> Result<usize, BodyError> {
    let raw = take(bytes, 4, field)?;
    Ok(u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize)
}

fn take_u16(bytes: &mut &[u8], field: &'static str) -> Result<u16, BodyError> {
    let raw = take(bytes, 2, field)?;
    Ok(u16::from_le_bytes([raw[0], raw[1]]))
}

/// Splits one record off the front of `bytes`.
fn split_record(bytes: &[u8]) -> Result<(RecordParts<'_>, &[u8]), BodyError> {
    let mut cursor = bytes;
    let length = take_u32(&mut cursor, "record length")?;
    let mut record = take(&mut cursor, length, "record")?;
    let rest = cursor;
    let delta_bytes = take(&mut record, 8, "record timestamp")?;
    let delta = I64::read_from_bytes(delta_bytes).map_err(|_| BodyError::Truncated {
        at: 0,
        field: "record timestamp",
    })?;
    let key_length = take_u32(&mut record, "key length")?;
    let key = take(&mut record, key_length, "key")?;
    let value_length = take_u32(&mut record, "value length")?;
    let value = take(&mut record, value_length, "value")?;
    let header_count = take_u16(&mut record, "header count")?;
    let parts = RecordParts {
        timestamp_delta_us: delta.get(),
        key,
        value,
        header_count,
        headers: record,
    };
    Ok((parts, rest))
}

/// Splits one record header off the front of `bytes`.
fn split_header(bytes: &[u8]) -> Result<(&str, &[u8], &[u8]), BodyError> {
    let mut cursor = bytes;
    let name_length = usize::from(take_u16(&mut cursor, "header name length")?);
    let name = take(&mut cursor, name_length, "header name")?;
    let name = core::str::from_utf8(name).map_err(|_| BodyError::Utf8 {
        field: "header name",
    })?;
    let value_length = take_u32(&mut cursor, "header value length")?;
    let value = take(&mut cursor, value_length, "header value")?;
    Ok((name, value, cursor))
}

/// Splits a run of concatenated batches (a fetch reply) into validated batches.
pub fn split_batches(mut bytes: Bytes) -> Result<Vec<RecordBatch>, BodyError> {
    let mut batches = Vec::new();
    while !bytes.is_empty() {
        let length = header_of(&bytes)?.length.get() as usize;
        if length < BATCH_HEADER_SIZE || length > bytes.len() {
            return Err(BodyError::Invalid {
                field: "batch length",
                reason: "past the end",
            });
        }
        batches.push(RecordBatch::from_bytes(bytes.split_to(length))?);
    }
    Ok(batches)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RecordBatch {
        let mut builder = BatchBuilder::default();
        builder.push(1_000, b"k1", b"value one", &[("trace", b"abc")]);
        builder.push(900, b"", b"value two", &[]);
        builder.push(1_500, b"k3", &[7u8; 300], &[("a", b""), ("b", b"xyz")]);
        builder.finish()
    }

    #[test]
    fn built_batch_reads_back() {
        let batch = sample();
        assert_eq!(batch.record_count(), 3);
        let records: Vec<_> = batch.records_from(40).collect();
        assert_eq!(records.len(), 3);
        assert_eq!(records[0].offset, 40);
        assert_eq!(records[2].offset, 42);
        assert_eq!(records[0].timestamp_us, 1_000);
        assert_eq!(records[1].timestamp_us, 900);
        assert_eq!(records[1].key, b"");
        assert_eq!(records[2].value, &[7u8; 300][..]);
        let headers: Vec<_> = records[2].headers().collect();
        assert_eq!(headers, vec![("a", &b""[..]), ("b", &b"xyz"[..])]);
        assert_eq!(batch.header().max_timestamp_us.get(), 1_500);
    }

    #[test]
    fn offset_base_is_outside_the_checksum() {
        let batch = sample();
        let mut bytes = batch.bytes().to_vec();
        let patched = batch.header().with_offset_base(1 << 40);
        bytes[..BATCH_HEADER_SIZE].copy_from_slice(patched.as_bytes());
        let patched = RecordBatch::from_bytes(Bytes::from(bytes)).expect("still valid");
        assert_eq!(
            patched.records().next().map(|record| record.offset),
            Some(1 << 40)
        );
    }

    #[test]
    fn every_flipped_byte_after_the_offset_is_caught() {
        let batch = sample();
        for index in 8..batch.bytes().len() {
            let mut bytes = batch.bytes().to_vec();
            bytes[index] ^= 0x5a;
            assert!(
                RecordBatch::from_bytes(Bytes::from(bytes)).is_err(),
                "byte {index}"
            );
        }
    }

    #[test]
    fn every_truncation_is_caught() {
        let batch = sample();
        for length in 0..batch.bytes().len() {
            assert!(RecordBatch::from_bytes(batch.bytes().slice(..length)).is_err());
        }
    }

    #[test]
    fn unknown_attributes_are_rejected_even_with_a_good_checksum() {
        let batch = sample();
        let mut bytes = batch.bytes().to_vec();
        bytes[20] = 1;
        let crc = checksum(&bytes[CHECKSUM_START..]);
        bytes[12..16].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            RecordBatch::from_bytes(Bytes::from(bytes)),
            Err(BodyError::UnknownFlags { .. })
        ));
    }

    #[test]
    fn concatenated_batches_split() {
        let (a, b) = (sample(), sample());
        let mut bytes = a.bytes().to_vec();
        bytes.extend_from_slice(b.bytes());
        let batches = split_batches(Bytes::from(bytes.clone())).expect("valid");
        assert_eq!(batches, vec![a, b]);
        bytes.pop();
        assert!(split_batches(Bytes::from(bytes)).is_err());
    }

    #[test]
    fn empty_batch_is_valid() {
        let batch = BatchBuilder::default().finish();
        assert_eq!(batch.record_count(), 0);
        assert_eq!(batch.records().count(), 0);
    }
}
