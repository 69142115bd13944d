//! The record conversions' tests: round trips, every codec, and every
//! refusal.

use std::io::Write;

use super::*;

/// A record as a Kafka producer would send it.
struct TestRecord {
    timestamp_delta: i64,
    key: Option<&'static [u8]>,
    value: Option<&'static [u8]>,
    headers: Vec<(&'static [u8], Option<&'static [u8]>)>,
}

fn record(key: &'static [u8], value: &'static [u8]) -> TestRecord {
    TestRecord {
        timestamp_delta: 0,
        key: Some(key),
        value: Some(value),
        headers: Vec::new(),
    }
}

#[derive(Clone, Copy, Debug)]
enum Codec {
    None,
    Gzip,
    SnappyXerial,
    SnappyRaw,
    Lz4,
    Zstd,
}

impl Codec {
    fn attributes(self) -> i16 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::SnappyXerial | Codec::SnappyRaw => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
        }
    }
}

fn put_nullable(out: &mut BytesMut, bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => put_bytes(out, bytes),
        None => put_varint(out, -1),
    }
}

/// The records of a batch, uncompressed, with offset deltas 0, 1, ….
fn raw_records(records: &[TestRecord]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for (index, record) in records.iter().enumerate() {
        let mut body = BytesMut::new();
        body.put_i8(0);
        put_varint(&mut body, record.timestamp_delta);
        put_varint(&mut body, index as i64);
        put_nullable(&mut body, record.key);
        put_nullable(&mut body, record.value);
        put_varint(&mut body, record.headers.len() as i64);
        for (name, value) in &record.headers {
            put_bytes(&mut body, name);
            put_nullable(&mut body, *value);
        }
        put_bytes(&mut out, &body);
    }
    out.to_vec()
}

fn gzip(raw: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(raw).expect("gzip into a Vec");
    encoder.finish().expect("gzip into a Vec")
}

fn compress(codec: Codec, raw: &[u8]) -> Vec<u8> {
    match codec {
        Codec::None => raw.to_vec(),
        Codec::Gzip => gzip(raw),
        Codec::SnappyXerial => {
            let mut out = XERIAL_MAGIC.to_vec();
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            // Two blocks, as snappy-java cuts a long stream.
            let (a, b) = raw.split_at(raw.len() / 2);
            for part in [a, b] {
                let block = snap::raw::Encoder::new()
                    .compress_vec(part)
                    .expect("snappy");
                out.extend_from_slice(&(block.len() as i32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            out
        }
        Codec::SnappyRaw => snap::raw::Encoder::new().compress_vec(raw).expect("snappy"),
        Codec::Lz4 => {
            let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
            encoder.write_all(raw).expect("lz4 into a Vec");
            encoder.finish().expect("lz4 into a Vec")
        }
        Codec::Zstd => {
            ruzstd::encoding::compress_to_vec(raw, ruzstd::encoding::CompressionLevel::Fastest)
        }
    }
}

/// A v2 batch around `body` (records as they go on the wire), its CRC
/// computed.
fn batch_bytes(attributes: i16, count: i32, base_timestamp: i64, body: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i64(0);
    out.put_i32((HEAD_SIZE - LENGTH_END + body.len()) as i32);
    out.put_i32(0);
    out.put_u8(MAGIC_V2);
    out.put_u32(0);
    out.put_i16(attributes);
    out.put_i32(count - 1);
    out.put_i64(base_timestamp);
    out.put_i64(base_timestamp);
    out.put_i64(77);
    out.put_i16(3);
    out.put_i32(500);
    out.put_i32(count);
    out.put_slice(body);
    let mut out = out.to_vec();
    reseal(&mut out);
    out
}

/// Recomputes the CRC of a batch after a test changed it.
fn reseal(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[CRC_FROM..]);
    batch[CRC_AT..CRC_FROM].copy_from_slice(&crc.to_be_bytes());
}

fn kafka_batch(codec: Codec, base_timestamp: i64, records: &[TestRecord]) -> Vec<u8> {
    let body = compress(codec, &raw_records(records));
    batch_bytes(
        codec.attributes(),
        records.len() as i32,
        base_timestamp,
        &body,
    )
}

fn sample_records() -> Vec<TestRecord> {
    vec![
        TestRecord {
            timestamp_delta: 0,
            key: Some(b"k1"),
            value: Some(b"value one"),
            headers: vec![(b"trace", Some(b"abc")), (b"empty", None)],
        },
        TestRecord {
            timestamp_delta: -5,
            key: None,
            value: None,
            headers: Vec::new(),
        },
        TestRecord {
            timestamp_delta: 250,
            key: Some(b""),
            value: Some(&[7u8; 3000]),
            headers: vec![(b"a", Some(b""))],
        },
    ]
}

fn check_sample(batch: &KafkaBatch, base_ms: u64) {
    assert_eq!(batch.producer_id, 77);
    assert_eq!(batch.producer_epoch, 3);
    assert_eq!(batch.base_sequence, 500);
    let records: Vec<_> = batch.batch.records().collect();
    assert_eq!(records.len(), 3);
    assert_eq!(records[0].key, b"k1");
    assert_eq!(records[0].value, b"value one");
    let headers: Vec<_> = records[0].headers().collect();
    assert_eq!(headers, vec![("trace", &b"abc"[..]), ("empty", &b""[..])]);
    assert_eq!(records[0].timestamp_us, base_ms * 1000);
    assert_eq!(records[1].key, b"");
    assert_eq!(records[1].value, b"");
    assert_eq!(records[1].timestamp_us, (base_ms - 5) * 1000);
    assert_eq!(records[2].value, &[7u8; 3000][..]);
    assert_eq!(records[2].timestamp_us, (base_ms + 250) * 1000);
    let headers: Vec<_> = records[2].headers().collect();
    assert_eq!(headers, vec![("a", &b""[..])]);
}

fn decode_one(bytes: &[u8]) -> Result<KafkaBatch, DecodeError> {
    let mut batches = to_strand(bytes, 1 << 20)?;
    assert_eq!(batches.len(), 1);
    batches
        .pop()
        .ok_or(DecodeError::invalid("test", "no batch"))
}

fn invalid_field(result: Result<Vec<KafkaBatch>, DecodeError>) -> &'static str {
    match result {
        Err(DecodeError::Invalid { field, .. }) => field,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn every_codec_decodes() {
    let base_ms = 1_700_000_000_000;
    for codec in [
        Codec::None,
        Codec::Gzip,
        Codec::SnappyXerial,
        Codec::SnappyRaw,
        Codec::Lz4,
        Codec::Zstd,
    ] {
        let bytes = kafka_batch(codec, base_ms as i64, &sample_records());
        let batch = decode_one(&bytes).unwrap_or_else(|error| panic!("{codec:?}: {error}"));
        check_sample(&batch, base_ms);
    }
}

#[test]
fn batches_back_to_back_decode_in_order() {
    let mut bytes = kafka_batch(Codec::Gzip, 1_000, &[record(b"a", b"1")]);
    bytes.extend(kafka_batch(Codec::None, 2_000, &[record(b"b", b"2")]));
    let batches = to_strand(&bytes, 1 << 20).expect("two batches");
    assert_eq!(batches.len(), 2);
    let first = batches[0].batch.records().next().expect("a record");
    let second = batches[1].batch.records().next().expect("a record");
    assert_eq!((first.key, first.timestamp_us), (&b"a"[..], 1_000_000));
    assert_eq!((second.key, second.timestamp_us), (&b"b"[..], 2_000_000));
}

fn strand_sample() -> RecordBatch {
    let mut builder = BatchBuilder::default();
    builder.push(1_700_000_000_123_456, b"k1", b"v1", &[("trace", b"abc")]);
    builder.push(
        1_700_000_000_100_000,
        b"",
        b"",
        &[("a", b""), ("b", b"xyz")],
    );
    builder.push(1_700_000_001_000_999, b"k3", &[9u8; 500], &[]);
    builder.finish()
}

#[test]
fn strand_to_kafka_to_strand_keeps_the_records() {
    let original = strand_sample();
    let mut out = BytesMut::new();
    to_kafka(&original, 7, &mut out);
    let decoded = decode_one(&out).expect("decodes");
    assert_eq!(decoded.batch.record_count(), original.record_count());
    assert_eq!(decoded.producer_id, -1);
    for (before, after) in original.records().zip(decoded.batch.records()) {
        assert_eq!(after.key, before.key);
        assert_eq!(after.value, before.value);
        assert!(after.headers().eq(before.headers()));
        assert_eq!(after.timestamp_us, before.timestamp_us / 1000 * 1000);
    }
}

/// Each record's offset: `baseOffset` plus its `offsetDelta`.
fn offsets(kafka: &[u8]) -> Vec<i64> {
    let base = i64::from_be_bytes(kafka[..8].try_into().expect("8 bytes"));
    let mut cursor = Cursor::new(&kafka[HEAD_SIZE..]);
    let mut offsets = Vec::new();
    while !cursor.is_empty() {
        let length = cursor.varint("length").expect("record length") as usize;
        let mut body = Cursor::new(cursor.take(length, "record").expect("record"));
        body.take(1, "attributes").expect("attributes");
        body.varlong("timestamp delta").expect("timestamp delta");
        let delta = body.varint("offset delta").expect("offset delta");
        offsets.push(base + i64::from(delta));
    }
    offsets
}

#[test]
fn to_kafka_carries_the_fetch_offsets_and_header() {
    let batch = strand_sample();
    let mut bytes = batch.bytes().to_vec();
    bytes[..8].copy_from_slice(&1000u64.to_le_bytes());
    let batch = RecordBatch::from_bytes(bytes.into()).expect("offset_base is unchecked");
    let mut out = BytesMut::from(&b"prefix"[..]);
    to_kafka(&batch, 42, &mut out);
    let kafka = &out[6..];
    assert_eq!(&kafka[..8], &1000i64.to_be_bytes());
    let length = i32::from_be_bytes(kafka[8..12].try_into().expect("4 bytes"));
    assert_eq!(length as usize, kafka.len() - LENGTH_END);
    assert_eq!(&kafka[12..16], &42i32.to_be_bytes());
    assert_eq!(kafka[MAGIC_AT], MAGIC_V2);
    assert_eq!(&kafka[23..27], &2i32.to_be_bytes()); // lastOffsetDelta
    assert_eq!(&kafka[27..35], &1_700_000_000_123i64.to_be_bytes());
    assert_eq!(&kafka[35..43], &1_700_000_001_000i64.to_be_bytes());
    assert_eq!(&kafka[57..61], &3i32.to_be_bytes());
    assert_eq!(offsets(kafka), vec![1000, 1001, 1002]);
    assert_eq!(decode_one(kafka).expect("decodes").batch.record_count(), 3);
}

#[test]
fn an_empty_strand_batch_appends_nothing() {
    let mut out = BytesMut::new();
    to_kafka(&BatchBuilder::default().finish(), 0, &mut out);
    assert!(out.is_empty());
}

#[test]
fn a_bad_crc_is_refused() {
    let good = kafka_batch(Codec::None, 1_000, &sample_records());
    for index in [CRC_AT, CRC_FROM, HEAD_SIZE + 3, good.len() - 1] {
        let mut bytes = good.clone();
        bytes[index] ^= 0x20;
        assert_eq!(invalid_field(to_strand(&bytes, 1 << 20)), "crc");
    }
}

#[test]
fn a_record_count_beyond_the_bytes_is_refused() {
    let body = raw_records(&[record(b"k", b"v")]);
    let bytes = batch_bytes(0, i32::MAX, 1_000, &body);
    assert_eq!(invalid_field(to_strand(&bytes, 1 << 20)), "record count");
    let bytes = batch_bytes(0, 2, 1_000, &body);
    assert!(to_strand(&bytes, 1 << 20).is_err());
    let bytes = batch_bytes(0, 0, 1_000, &[]);
    assert_eq!(invalid_field(to_strand(&bytes, 1 << 20)), "record count");
    let mut bytes = batch_bytes(0, 1, 1_000, &body);
    bytes[23..27].copy_from_slice(&5i32.to_be_bytes());
    reseal(&mut bytes);
    assert_eq!(
        invalid_field(to_strand(&bytes, 1 << 20)),
        "last offset delta"
    );
}

#[test]
fn a_gzip_bomb_stops_at_the_bound() {
    // 64 gzip members of 1 MiB of zeros each: 64 MiB inflated.
    let member = gzip(&vec![0u8; 1 << 20]);
    let body: Vec<u8> = std::iter::repeat_n(member.as_slice(), 64)
        .flatten()
        .copied()
        .collect();
    let bytes = batch_bytes(Codec::Gzip.attributes(), 1, 0, &body);
    assert_eq!(
        to_strand(&bytes, 1 << 20),
        Err(DecodeError::TooLarge { max: 1 << 20 })
    );
}

#[test]
fn the_bound_covers_the_whole_call() {
    let value: &'static [u8] = Box::leak(vec![1u8; 600 << 10].into_boxed_slice());
    let one = kafka_batch(Codec::Lz4, 0, &[record(b"k", value)]);
    assert!(to_strand(&one, 1 << 20).is_ok());
    let two = [one.as_slice(), one.as_slice()].concat();
    assert_eq!(
        to_strand(&two, 1 << 20),
        Err(DecodeError::TooLarge { max: 1 << 20 })
    );
}

#[test]
fn snappy_and_zstd_bombs_are_refused_from_their_headers() {
    // A raw snappy block declaring 2^31 bytes.
    let body = [0x80, 0x80, 0x80, 0x80, 0x08, 0x00];
    let bytes = batch_bytes(Codec::SnappyRaw.attributes(), 1, 0, &body);
    assert_eq!(
        to_strand(&bytes, 1 << 20),
        Err(DecodeError::TooLarge { max: 1 << 20 })
    );
    // A zstd frame asking for a 64 MiB window, then one empty raw block.
    let mut body = ZSTD_MAGIC.to_vec();
    body.extend_from_slice(&[0x00, 16 << 3, 0x01, 0x00, 0x00]);
    let bytes = batch_bytes(Codec::Zstd.attributes(), 1, 0, &body);
    assert_eq!(
        to_strand(&bytes, 1 << 20),
        Err(DecodeError::TooLarge { max: 1 << 20 })
    );
}

#[test]
fn corrupt_compressed_records_are_refused() {
    for codec in [Codec::Gzip, Codec::SnappyXerial, Codec::Lz4, Codec::Zstd] {
        let mut body = compress(codec, &raw_records(&sample_records()));
        let middle = body.len() / 2;
        body.truncate(middle);
        let bytes = batch_bytes(codec.attributes(), 3, 0, &body);
        assert!(to_strand(&bytes, 1 << 20).is_err(), "{codec:?}");
    }
    let bytes = batch_bytes(5, 1, 0, &raw_records(&[record(b"k", b"v")]));
    assert_eq!(invalid_field(to_strand(&bytes, 1 << 20)), "attributes");
}

#[test]
fn truncated_batches_are_refused() {
    let bytes = kafka_batch(Codec::None, 1_000, &sample_records());
    for length in 0..bytes.len() {
        assert!(to_strand(&bytes[..length], 1 << 20).is_err(), "{length}");
    }
    let mut bytes = bytes;
    bytes.extend_from_slice(&[0; 5]);
    assert!(to_strand(&bytes, 1 << 20).is_err());
}

#[test]
fn old_magics_are_refused() {
    for magic in [0, 1] {
        let mut bytes = kafka_batch(Codec::None, 1_000, &sample_records());
        bytes[MAGIC_AT] = magic;
        assert_eq!(invalid_field(to_strand(&bytes, 1 << 20)), "magic");
    }
}

#[test]
fn transactional_and_control_batches_are_refused() {
    let body = raw_records(&[record(b"k", b"v")]);
    for attributes in [TRANSACTIONAL, CONTROL, TRANSACTIONAL | CONTROL] {
        let bytes = batch_bytes(attributes, 1, 0, &body);
        assert_eq!(invalid_field(to_strand(&bytes, 1 << 20)), "attributes");
    }
}

#[test]
fn timestamps_map_to_microseconds_within_range() {
    let one = |base: i64, delta: i64| {
        let mut test_record = record(b"k", b"v");
        test_record.timestamp_delta = delta;
        let bytes = kafka_batch(Codec::None, base, &[test_record]);
        to_strand(&bytes, 1 << 20).map(|batches| {
            let record = batches[0].batch.records().next().map(|r| r.timestamp_us);
            record.expect("one record")
        })
    };
    assert_eq!(one(-1, 0), Ok(0));
    assert_eq!(one(5, -6), Ok(0));
    assert_eq!(one(0, 0), Ok(0));
    assert_eq!(one(12, 3), Ok(15_000));
    assert!(one(-2, 0).is_err());
    assert!(one(i64::MAX, 1).is_err());
    assert!(one(i64::MAX / 1000 + 1, 0).is_err());
    assert!(one(i64::MIN, -1).is_err());
}

#[test]
fn malformed_records_are_refused() {
    // The record's length disagrees with its fields.
    let mut body = raw_records(&[record(b"k", b"v")]);
    body[0] += 2;
    body.extend_from_slice(&[0, 0]);
    assert_eq!(
        invalid_field(to_strand(&batch_bytes(0, 1, 0, &body), 1 << 20)),
        "record length"
    );
    // A header key that is not UTF-8, or null.
    for name in [&[0xff, 0xfe][..], &[][..]] {
        let mut test_record = record(b"k", b"v");
        let name: &'static [u8] = Box::leak(name.to_vec().into_boxed_slice());
        test_record.headers.push((name, None));
        let mut body = raw_records(&[test_record]);
        if name.is_empty() {
            // Turn the empty key's length (0) into null (-1): the byte
            // before the header value's -1.
            let at = body.len() - 2;
            body[at] = 0x01;
        }
        let bytes = batch_bytes(0, 1, 0, &body);
        assert_eq!(invalid_field(to_strand(&bytes, 1 << 20)), "header key");
    }
    // Offset deltas out of order.
    let mut body = raw_records(&[record(b"k", b"v")]);
    body[3] = 2; // offsetDelta 1
    let bytes = batch_bytes(0, 1, 0, &body);
    assert_eq!(invalid_field(to_strand(&bytes, 1 << 20)), "offset delta");
    assert_eq!(invalid_field(to_strand(&[], 1 << 20)), "records");
}

#[test]
fn a_batch_too_large_for_strand_is_refused() {
    let value: &'static [u8] = Box::leak(vec![3u8; PRODUCE_BATCH_BYTES_MAX].into_boxed_slice());
    let bytes = kafka_batch(Codec::None, 0, &[record(b"k", value)]);
    assert_eq!(
        to_strand(&bytes, 1 << 20),
        Err(DecodeError::TooLarge {
            max: PRODUCE_BATCH_BYTES_MAX
        })
    );
}

#[test]
fn varint_sizes_match_the_encoding() {
    for value in [
        0,
        1,
        -1,
        63,
        -64,
        64,
        8191,
        -8193,
        i64::from(i32::MAX),
        i64::MIN,
        i64::MAX,
    ] {
        let mut out = BytesMut::new();
        put_varint(&mut out, value);
        assert_eq!(out.len(), varint_size(value), "{value}");
        assert_eq!(Cursor::new(&out).varlong("v"), Ok(value));
    }
}
