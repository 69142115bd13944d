//! Kafka record batches (v2, magic 2) ↔ Strand record batches.
//!
//! A Kafka produce request carries its records as Kafka record batches; a
//! Kafka fetch response must hand them back in the same format. Strand stores
//! its own [`RecordBatch`] format, so the listener translates at both edges:
//! [`to_strand`] on the way in (with every length, count and compressed
//! stream checked against the bytes and a budget before anything is
//! reserved), [`to_kafka`] on the way out.
//!
//! A v2 batch on the wire (all integers big-endian):
//!
//! ```text
//! baseOffset i64 | batchLength i32 (bytes after this field) | partitionLeaderEpoch i32
//! magic i8 (2) | crc u32 (CRC-32C of attributes..end) | attributes i16
//! lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64
//! producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32
//! records (compressed as a whole when attributes bits 0-2 say so)
//! ```
//!
//! and each record, in zigzag varints:
//!
//! ```text
//! length varint | attributes i8 | timestampDelta varlong | offsetDelta varint
//! keyLength varint (-1: null) key | valueLength varint (-1: null) value
//! headerCount varint { keyLength varint, key (UTF-8), valueLength varint (-1: null), value }*
//! ```

use std::io::{ErrorKind, Read};

use bytes::{BufMut, BytesMut};
use flate2::read::MultiGzDecoder;
use ruzstd::decoding::StreamingDecoder;
use strand_wire::batch::BATCH_HEADER_SIZE;
use strand_wire::ops::PRODUCE_BATCH_BYTES_MAX;
use strand_wire::{BatchBuilder, Record, RecordBatch};

use crate::error::DecodeError;

/// The only record batch format served.
const MAGIC_V2: u8 = 2;
/// Bytes before the records: the whole v2 batch header.
const HEAD_SIZE: usize = 61;
/// Bytes up to the end of `batchLength`, which counts what follows it.
const LENGTH_END: usize = 12;
/// Where `magic` sits, in v2 batches and in the legacy message sets alike.
const MAGIC_AT: usize = 16;
/// Where the CRC sits.
const CRC_AT: usize = 17;
/// Where the bytes the CRC covers start (`attributes`).
const CRC_FROM: usize = 21;
/// Attributes bits 0-2: the compression codec of the records.
const COMPRESSION_MASK: i16 = 0x07;
/// Attributes bit 4: the batch belongs to a transaction.
const TRANSACTIONAL: i16 = 0x10;
/// Attributes bit 5: a control batch (transaction markers).
const CONTROL: i16 = 0x20;
/// Kafka's "no timestamp" (clients older than 0.10).
const NO_TIMESTAMP: i64 = -1;
/// The stream header of snappy-java's framing, which the Java client writes.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
/// The xerial magic plus its two version numbers.
const XERIAL_HEADER_SIZE: usize = 16;
/// A zstd frame's magic number, little-endian on the wire.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The window a zstd frame may ask for even under a smaller budget: the
/// decoder reserves the window up front, and Kafka's producer (zstd-jni,
/// streaming) asks for 2 MiB at its default level and 8 MiB up to level 19.
const ZSTD_WINDOW_FLOOR: usize = 8 << 20;
/// Bytes read from a decompressor at a time.
const CHUNK_SIZE: usize = 16 * 1024;

/// One Kafka record batch, translated. Kafka's idempotent producer numbers
/// its batches per producer; Strand's batch format has no room for that, so
/// the numbering travels beside it for the node to check and store. The
/// record count is `batch.record_count()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaBatch {
    /// The records, as a Strand batch (`offset_base` 0, as a producer sends).
    pub batch: RecordBatch,
    /// `producerId` (-1: not an idempotent producer).
    pub producer_id: i64,
    /// `producerEpoch` (-1 when there is no producer id).
    pub producer_epoch: i16,
    /// `baseSequence`: the sequence number of the batch's first record (-1
    /// when there is no producer id).
    pub base_sequence: i32,
}

/// Decodes the `records` field of a Kafka produce request (record batches
/// v2, back to back) into Strand batches, one per Kafka batch, because
/// Strand stores and replicates only its own format.
///
/// Every batch's CRC-32C is verified; magic 0 and 1, transactional and
/// control batches are refused. Compressed records (gzip, snappy, lz4,
/// zstd) are inflated within `bytes_max` bytes in total over the call:
/// more is [`DecodeError::TooLarge`], found without allocating past the
/// bound. A Strand batch larger than [`PRODUCE_BATCH_BYTES_MAX`] is
/// `TooLarge` too.
pub fn to_strand(records: &[u8], bytes_max: usize) -> Result<Vec<KafkaBatch>, DecodeError> {
    if records.is_empty() {
        return Err(DecodeError::invalid("records", "no record batch"));
    }
    let mut inflater = Inflater {
        bytes_max,
        budget: bytes_max,
        buffer: Vec::new(),
    };
    let mut batches = Vec::new();
    let mut rest = records;
    while !rest.is_empty() {
        let (batch, after) = split_batch(rest)?;
        batches.push(decode_batch(batch, &mut inflater)?);
        rest = after;
    }
    Ok(batches)
}

/// Encodes one Strand batch from a fetch reply (its header's `offset_base`
/// is the partition offset of its first record) as one uncompressed Kafka
/// record batch v2 appended to `out`, because Kafka consumers read nothing
/// else. Keys that are empty go out as null (Strand does not tell them
/// apart; a null key is what a Kafka producer most often meant). A batch
/// with no records appends nothing: it holds no offsets to hand out.
pub fn to_kafka(batch: &RecordBatch, leader_epoch: i32, out: &mut BytesMut) {
    let Some(first) = batch.records().next() else {
        return;
    };
    let base_ms = millis(first.timestamp_us);
    let max_ms = batch
        .records()
        .map(|record| millis(record.timestamp_us))
        .fold(base_ms, i64::max);
    // A Strand batch is shorter than 4 GiB and a record takes at least 22
    // bytes of it, so the count fits an i32.
    let count = batch.record_count() as i32;
    let start = out.len();
    out.reserve(HEAD_SIZE + batch.bytes().len());
    out.put_i64(batch.header().offset_base.get() as i64);
    out.put_i32(0); // batchLength, filled in below
    out.put_i32(leader_epoch);
    out.put_u8(MAGIC_V2);
    out.put_u32(0); // crc, filled in below
    out.put_i16(0); // no compression, CreateTime, not transactional
    out.put_i32(count - 1);
    out.put_i64(base_ms);
    out.put_i64(max_ms);
    out.put_i64(-1); // producerId
    out.put_i16(-1); // producerEpoch
    out.put_i32(-1); // baseSequence
    out.put_i32(count);
    for (index, record) in batch.records().enumerate() {
        put_record(out, &record, index as i64, base_ms);
    }
    let length = (out.len() - start - LENGTH_END) as i32;
    out[start + 8..start + LENGTH_END].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[start + CRC_FROM..]);
    out[start + CRC_AT..start + CRC_FROM].copy_from_slice(&crc.to_be_bytes());
}

/// Milliseconds (Kafka's timestamps) from microseconds (Strand's).
fn millis(timestamp_us: u64) -> i64 {
    // u64::MAX / 1000 is below i64::MAX.
    (timestamp_us / 1000) as i64
}

/// Appends one record of a batch whose base timestamp is `base_ms`.
fn put_record(out: &mut BytesMut, record: &Record<'_>, index: i64, base_ms: i64) {
    let timestamp_delta = millis(record.timestamp_us) - base_ms;
    let key_length = if record.key.is_empty() {
        -1
    } else {
        record.key.len() as i64
    };
    let mut header_count: i64 = 0;
    let mut header_bytes = 0;
    for (name, value) in record.headers() {
        header_count += 1;
        header_bytes += sized(name.len()) + sized(value.len());
    }
    let body = 1
        + varint_size(timestamp_delta)
        + varint_size(index)
        + varint_size(key_length)
        + record.key.len()
        + sized(record.value.len())
        + varint_size(header_count)
        + header_bytes;
    put_varint(out, body as i64);
    out.put_i8(0); // record attributes: none defined
    put_varint(out, timestamp_delta);
    put_varint(out, index);
    put_varint(out, key_length);
    out.put_slice(record.key);
    put_bytes(out, record.value);
    put_varint(out, header_count);
    for (name, value) in record.headers() {
        put_bytes(out, name.as_bytes());
        put_bytes(out, value);
    }
}

/// Zigzag: small magnitudes, of either sign, to small unsigned numbers.
fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// Bytes a zigzag varint (or varlong) of `value` takes.
fn varint_size(value: i64) -> usize {
    let bits = 64 - (zigzag(value) | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Bytes a length-prefixed field of `length` bytes takes.
fn sized(length: usize) -> usize {
    varint_size(length as i64) + length
}

/// A zigzag varint (or varlong: the encoding is the same).
fn put_varint(out: &mut BytesMut, value: i64) {
    let mut raw = zigzag(value);
    while raw >= 0x80 {
        out.put_u8((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.put_u8(raw as u8);
}

/// A varint length, then the bytes.
fn put_bytes(out: &mut BytesMut, bytes: &[u8]) {
    put_varint(out, bytes.len() as i64);
    out.put_slice(bytes);
}

/// Splits the first record batch off `bytes`, checking its length against
/// them and its magic.
fn split_batch(bytes: &[u8]) -> Result<(&[u8], &[u8]), DecodeError> {
    let mut cursor = Cursor::new(bytes);
    cursor.take(8, "base offset")?;
    let length = i32::from_be_bytes(cursor.fixed("batch length")?);
    let length =
        usize::try_from(length).map_err(|_| DecodeError::invalid("batch length", "negative"))?;
    let Some((batch, rest)) = bytes.split_at_checked(LENGTH_END.saturating_add(length)) else {
        return Err(DecodeError::Truncated {
            field: "record batch",
        });
    };
    match batch.get(MAGIC_AT) {
        Some(&MAGIC_V2) => {}
        Some(_) => {
            return Err(DecodeError::invalid(
                "magic",
                "only record batches v2 (magic 2) are served",
            ));
        }
        None => return Err(DecodeError::Truncated { field: "magic" }),
    }
    if batch.len() < HEAD_SIZE {
        return Err(DecodeError::invalid(
            "batch length",
            "shorter than a v2 batch header",
        ));
    }
    Ok((batch, rest))
}

/// The fields of a v2 batch header this node uses.
struct BatchHead {
    crc: u32,
    attributes: i16,
    last_offset_delta: i32,
    base_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    record_count: i32,
}

/// Reads the header of `batch` (whose length and magic are checked).
fn read_head(batch: &[u8]) -> Result<BatchHead, DecodeError> {
    let mut cursor = Cursor::new(batch);
    cursor.take(CRC_AT, "batch header")?;
    let crc = u32::from_be_bytes(cursor.fixed("crc")?);
    let attributes = i16::from_be_bytes(cursor.fixed("attributes")?);
    let last_offset_delta = i32::from_be_bytes(cursor.fixed("last offset delta")?);
    let base_timestamp = i64::from_be_bytes(cursor.fixed("base timestamp")?);
    cursor.take(8, "max timestamp")?;
    Ok(BatchHead {
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        producer_id: i64::from_be_bytes(cursor.fixed("producer id")?),
        producer_epoch: i16::from_be_bytes(cursor.fixed("producer epoch")?),
        base_sequence: i32::from_be_bytes(cursor.fixed("base sequence")?),
        record_count: i32::from_be_bytes(cursor.fixed("record count")?),
    })
}

/// Checks and translates one whole batch.
fn decode_batch(batch: &[u8], inflater: &mut Inflater) -> Result<KafkaBatch, DecodeError> {
    let head = read_head(batch)?;
    let covered = batch.get(CRC_FROM..).ok_or(DecodeError::Truncated {
        field: "attributes",
    })?;
    if crc32c::crc32c(covered) != head.crc {
        return Err(DecodeError::invalid("crc", "does not match the batch"));
    }
    if head.attributes & TRANSACTIONAL != 0 {
        return Err(DecodeError::invalid(
            "attributes",
            "transactional batches are not served",
        ));
    }
    if head.attributes & CONTROL != 0 {
        return Err(DecodeError::invalid(
            "attributes",
            "control batches are not taken from producers",
        ));
    }
    let count = usize::try_from(head.record_count)
        .map_err(|_| DecodeError::invalid("record count", "negative"))?;
    if count == 0 {
        return Err(DecodeError::invalid(
            "record count",
            "a batch without records",
        ));
    }
    if i64::from(head.last_offset_delta) != i64::from(head.record_count) - 1 {
        return Err(DecodeError::invalid(
            "last offset delta",
            "does not match the record count",
        ));
    }
    let body = batch
        .get(HEAD_SIZE..)
        .ok_or(DecodeError::Truncated { field: "records" })?;
    let records = inflater.records(head.attributes & COMPRESSION_MASK, body)?;
    // Every record takes at least one byte: a count beyond the bytes is a
    // lie, refused before anything is reserved for it.
    if count > records.len() {
        return Err(DecodeError::invalid(
            "record count",
            "more records than the bytes hold",
        ));
    }
    Ok(KafkaBatch {
        batch: build_strand(records, count, head.base_timestamp)?,
        producer_id: head.producer_id,
        producer_epoch: head.producer_epoch,
        base_sequence: head.base_sequence,
    })
}

/// One Kafka record's fields, borrowed from the batch (headers aside).
struct KafkaRecord<'a> {
    timestamp_delta: i64,
    key: &'a [u8],
    value: &'a [u8],
}

/// Builds the Strand batch from the `count` records in `records`, checking
/// each against what a Strand batch can hold before pushing it.
fn build_strand(
    records: &[u8],
    count: usize,
    base_timestamp: i64,
) -> Result<RecordBatch, DecodeError> {
    let capacity = records
        .len()
        .saturating_add(BATCH_HEADER_SIZE)
        .min(PRODUCE_BATCH_BYTES_MAX);
    let mut builder = BatchBuilder::with_capacity(capacity);
    let mut headers = Vec::new();
    let mut cursor = Cursor::new(records);
    for index in 0..count {
        let record = read_record(&mut cursor, index, &mut headers)?;
        let timestamp_us = timestamp_us(base_timestamp, record.timestamp_delta)?;
        let size = BatchBuilder::record_size(record.key, record.value, &headers);
        if size > PRODUCE_BATCH_BYTES_MAX.saturating_sub(builder.size()) {
            return Err(DecodeError::TooLarge {
                max: PRODUCE_BATCH_BYTES_MAX,
            });
        }
        builder.push(timestamp_us, record.key, record.value, &headers);
    }
    if !cursor.is_empty() {
        return Err(DecodeError::invalid(
            "records",
            "bytes after the last record",
        ));
    }
    Ok(builder.finish())
}

/// A record's timestamp in Strand's microseconds, from the batch's base
/// and the record's delta in milliseconds.
fn timestamp_us(base_ms: i64, delta_ms: i64) -> Result<u64, DecodeError> {
    let overflow = DecodeError::invalid("timestamp", "overflows");
    let ms = base_ms.checked_add(delta_ms).ok_or(overflow.clone())?;
    if ms == NO_TIMESTAMP {
        return Ok(0);
    }
    if ms < 0 {
        return Err(DecodeError::invalid("timestamp", "before 1970"));
    }
    let us = ms.checked_mul(1000).ok_or(overflow)?;
    Ok(us as u64)
}

/// Reads one record (the `index`th of its batch); its headers go to
/// `headers`, cleared first.
fn read_record<'a>(
    cursor: &mut Cursor<'a>,
    index: usize,
    headers: &mut Vec<(&'a str, &'a [u8])>,
) -> Result<KafkaRecord<'a>, DecodeError> {
    let length = cursor.varint("record length")?;
    let length =
        usize::try_from(length).map_err(|_| DecodeError::invalid("record length", "negative"))?;
    let mut body = Cursor::new(cursor.take(length, "record")?);
    body.take(1, "record attributes")?;
    let timestamp_delta = body.varlong("timestamp delta")?;
    let offset_delta = body.varint("offset delta")?;
    // Strand numbers records by position; a producer that numbered them
    // otherwise would have its offsets silently changed.
    if usize::try_from(offset_delta).ok() != Some(index) {
        return Err(DecodeError::invalid(
            "offset delta",
            "not the record's position in its batch",
        ));
    }
    let key = body.nullable_bytes("key")?.unwrap_or_default();
    let value = body.nullable_bytes("value")?.unwrap_or_default();
    read_headers(&mut body, headers)?;
    if !body.is_empty() {
        return Err(DecodeError::invalid(
            "record length",
            "does not match the record's fields",
        ));
    }
    Ok(KafkaRecord {
        timestamp_delta,
        key,
        value,
    })
}

/// Reads a record's headers into `headers` (cleared first), within what a
/// Strand record can hold: at most 65535 of them, names of at most 65535
/// bytes.
fn read_headers<'a>(
    body: &mut Cursor<'a>,
    headers: &mut Vec<(&'a str, &'a [u8])>,
) -> Result<(), DecodeError> {
    headers.clear();
    let count = body.varint("header count")?;
    let count =
        usize::try_from(count).map_err(|_| DecodeError::invalid("header count", "negative"))?;
    if count > usize::from(u16::MAX) {
        return Err(DecodeError::invalid("header count", "more than 65535"));
    }
    // Every header takes at least two bytes.
    if count > body.remaining() {
        return Err(DecodeError::Truncated { field: "headers" });
    }
    for _ in 0..count {
        let name = body
            .nullable_bytes("header key")?
            .ok_or(DecodeError::invalid("header key", "null"))?;
        if name.len() > usize::from(u16::MAX) {
            return Err(DecodeError::invalid(
                "header key",
                "longer than 65535 bytes",
            ));
        }
        let name = std::str::from_utf8(name)
            .map_err(|_| DecodeError::invalid("header key", "not UTF-8"))?;
        let value = body.nullable_bytes("header value")?.unwrap_or_default();
        headers.push((name, value));
    }
    Ok(())
}

/// Reads record-level fields from a slice. Unlike [`crate::codec::Reader`]
/// it hands out borrowed sub-slices (the records may sit in a decompression
/// buffer) and reads zigzag varint lengths, as records use.
struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes }
    }

    fn remaining(&self) -> usize {
        self.bytes.len()
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn take(&mut self, count: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let (head, tail) = self
            .bytes
            .split_at_checked(count)
            .ok_or(DecodeError::Truncated { field })?;
        self.bytes = tail;
        Ok(head)
    }

    fn fixed<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        <[u8; N]>::try_from(self.take(N, field)?).map_err(|_| DecodeError::Truncated { field })
    }

    /// An unsigned varint of at most `bytes_max` bytes and 64 bits.
    fn unsigned(&mut self, field: &'static str, bytes_max: u32) -> Result<u64, DecodeError> {
        let mut value: u64 = 0;
        for index in 0..bytes_max {
            let [byte] = self.fixed::<1>(field)?;
            let bits = u64::from(byte & 0x7f);
            if index == 9 && bits > 1 {
                return Err(DecodeError::invalid(field, "varlong longer than 64 bits"));
            }
            value |= bits << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::invalid(field, "varint too long"))
    }

    /// A zigzag `VARINT`.
    fn varint(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        let raw = u32::try_from(self.unsigned(field, 5)?)
            .map_err(|_| DecodeError::invalid(field, "varint longer than 32 bits"))?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// A zigzag `VARLONG`.
    fn varlong(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        let raw = self.unsigned(field, 10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// A varint length (-1: null), then that many bytes.
    fn nullable_bytes(&mut self, field: &'static str) -> Result<Option<&'a [u8]>, DecodeError> {
        match self.varint(field)? {
            -1 => Ok(None),
            length if length < 0 => Err(DecodeError::invalid(field, "negative length")),
            length => self.take(length as usize, field).map(Some),
        }
    }
}

/// Why a compressed record set was not inflated.
enum Fault {
    /// It inflates past the budget.
    TooLarge,
    /// It does not decode.
    Corrupt,
}

/// Inflates the records of one batch after another into one reused buffer,
/// charging every byte produced to the call's budget.
struct Inflater {
    bytes_max: usize,
    budget: usize,
    buffer: Vec<u8>,
}

impl Inflater {
    /// The records of a batch whose compression codec is `codec` and whose
    /// record bytes on the wire are `input`.
    fn records<'a>(&'a mut self, codec: i16, input: &'a [u8]) -> Result<&'a [u8], DecodeError> {
        let (name, result) = {
            let out = &mut self.buffer;
            out.clear();
            let limit = self.budget;
            match codec {
                0 => return Ok(input),
                1 => ("gzip", read_bounded(MultiGzDecoder::new(input), out, limit)),
                2 => ("snappy", snappy(input, out, limit)),
                3 => {
                    let decoder = lz4_flex::frame::FrameDecoder::new(input);
                    ("lz4", read_bounded(decoder, out, limit))
                }
                4 => ("zstd", zstd(input, out, limit)),
                _ => {
                    return Err(DecodeError::invalid(
                        "attributes",
                        "unknown compression codec",
                    ));
                }
            }
        };
        match result {
            Ok(()) => {}
            Err(Fault::TooLarge) => {
                return Err(DecodeError::TooLarge {
                    max: self.bytes_max,
                });
            }
            Err(Fault::Corrupt) => {
                return Err(DecodeError::Invalid {
                    field: name,
                    reason: "compressed records do not decode",
                });
            }
        }
        self.budget = self.budget.saturating_sub(self.buffer.len());
        Ok(&self.buffer)
    }
}

/// Makes room in `out` for `extra` more bytes, doubling as a `Vec` does but
/// never reserving past `limit` bytes in all.
fn reserve_within(out: &mut Vec<u8>, extra: usize, limit: usize) {
    let needed = out.len().saturating_add(extra);
    if needed <= out.capacity() {
        return;
    }
    let target = out
        .capacity()
        .saturating_mul(2)
        .max(CHUNK_SIZE)
        .min(limit)
        .max(needed);
    out.reserve_exact(target - out.len());
}

/// Reads `source` to its end into `out`, which may not grow past `limit`
/// bytes: one byte more is [`Fault::TooLarge`], before it is stored.
fn read_bounded(mut source: impl Read, out: &mut Vec<u8>, limit: usize) -> Result<(), Fault> {
    let mut chunk = [0u8; CHUNK_SIZE];
    loop {
        let read = match source.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(read) => read,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Err(Fault::Corrupt),
        };
        let bytes = chunk.get(..read).ok_or(Fault::Corrupt)?;
        if bytes.len() > limit.saturating_sub(out.len()) {
            return Err(Fault::TooLarge);
        }
        reserve_within(out, bytes.len(), limit);
        out.extend_from_slice(bytes);
    }
}

/// Inflates snappy records: snappy-java's framing (what the Java client
/// writes: a 16-byte header, then blocks each prefixed with its length as
/// an i32), or a single raw snappy block (what some other clients write).
fn snappy(input: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), Fault> {
    if !input.starts_with(XERIAL_MAGIC) {
        return snappy_block(input, out, limit);
    }
    let mut rest = input;
    while !rest.is_empty() {
        // The header starts the stream, and again each concatenated stream.
        if rest.starts_with(XERIAL_MAGIC) {
            rest = rest.get(XERIAL_HEADER_SIZE..).ok_or(Fault::Corrupt)?;
            continue;
        }
        let (length, after) = rest.split_first_chunk::<4>().ok_or(Fault::Corrupt)?;
        let length = usize::try_from(i32::from_be_bytes(*length)).map_err(|_| Fault::Corrupt)?;
        let (block, after) = after.split_at_checked(length).ok_or(Fault::Corrupt)?;
        snappy_block(block, out, limit)?;
        rest = after;
    }
    Ok(())
}

/// Inflates one raw snappy block onto `out`, its declared length checked
/// against the budget before anything is reserved.
fn snappy_block(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), Fault> {
    let length = snap::raw::decompress_len(block).map_err(|_| Fault::Corrupt)?;
    if length > limit.saturating_sub(out.len()) {
        return Err(Fault::TooLarge);
    }
    let start = out.len();
    reserve_within(out, length, limit);
    out.resize(start + length, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|_| Fault::Corrupt)?;
    if written != length {
        return Err(Fault::Corrupt);
    }
    Ok(())
}

/// Inflates zstd records: one frame or more back to back. A frame's window
/// is reserved by the decoder before any output, so a window beyond both
/// the budget and [`ZSTD_WINDOW_FLOOR`] is refused from the frame header.
fn zstd(mut input: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), Fault> {
    let window_max = limit.max(ZSTD_WINDOW_FLOOR) as u64;
    while !input.is_empty() {
        if zstd_window(input).is_some_and(|window| window > window_max) {
            return Err(Fault::TooLarge);
        }
        let mut decoder = StreamingDecoder::new(&mut input).map_err(|_| Fault::Corrupt)?;
        read_bounded(&mut decoder, out, limit)?;
        let frame = &decoder.decoder;
        let expected = frame.get_checksum_from_data();
        if expected.is_some() && expected != frame.get_calculated_checksum() {
            return Err(Fault::Corrupt);
        }
    }
    Ok(())
}

/// The window the zstd frame at the start of `input` declares, if its
/// header is there to read (the decoder reports a header that is not).
fn zstd_window(input: &[u8]) -> Option<u64> {
    if input.get(..4)? != ZSTD_MAGIC {
        return None;
    }
    let descriptor = *input.get(4)?;
    let single_segment = descriptor & 0x20 != 0;
    if !single_segment {
        let window = *input.get(5)?;
        let base = 1u64 << (10 + u32::from(window >> 3));
        return Some(base + base / 8 * u64::from(window & 0x07));
    }
    // A single segment: the window is the content size.
    let dictionary_bytes = [0, 1, 2, 4][usize::from(descriptor & 0x03)];
    let size_bytes = [1, 2, 4, 8][usize::from(descriptor >> 6)];
    let start = 5 + dictionary_bytes;
    let size = input.get(start..start + size_bytes)?;
    let mut raw = [0u8; 8];
    raw.get_mut(..size_bytes)?.copy_from_slice(size);
    let size = u64::from_le_bytes(raw);
    Some(if size_bytes == 2 { size + 256 } else { size })
}

#[cfg(test)]
mod tests;
