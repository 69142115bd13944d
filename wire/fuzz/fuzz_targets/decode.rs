//! Fuzzes every decoder in strand-wire: whole frames, the stream decoder fed in
//! pieces, operation bodies, error bodies, fetch replies and record batches.
//! Nothing may panic; whatever decodes must re-encode to the same bytes.

#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use strand_wire::ops::*;
use strand_wire::{Body, FrameDecoder, Message, RecordBatch, ResultCode};

fn body_round_trip<T: Body + PartialEq + std::fmt::Debug>(data: &[u8]) {
    if let Ok(value) = T::from_bytes(data) {
        assert_eq!(T::from_bytes(&value.to_vec()).ok().as_ref(), Some(&value));
    }
}

/// Gives an input valid size and checksums, so the fuzzer reaches the checks
/// behind them instead of stopping at the header checksum.
fn seal_frame(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < strand_wire::HEADER_SIZE {
        return None;
    }
    let mut frame = data.to_vec();
    let size = frame.len() as u32;
    frame[16..20].copy_from_slice(&size.to_le_bytes());
    let body = strand_wire::checksum::checksum(&frame[strand_wire::HEADER_SIZE..]);
    frame[4..8].copy_from_slice(&body.to_le_bytes());
    let header = strand_wire::checksum::checksum(&frame[4..strand_wire::HEADER_SIZE]);
    frame[..4].copy_from_slice(&header.to_le_bytes());
    Some(frame)
}

/// Same for a record batch: correct length and crc.
fn seal_batch(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < strand_wire::batch::BATCH_HEADER_SIZE {
        return None;
    }
    let mut batch = data.to_vec();
    let length = batch.len() as u32;
    batch[8..12].copy_from_slice(&length.to_le_bytes());
    let crc = strand_wire::checksum::checksum(&batch[16..]);
    batch[12..16].copy_from_slice(&crc.to_le_bytes());
    Some(batch)
}

fn decode_frame(data: &[u8]) {
    let frame = Bytes::copy_from_slice(data);
    if let Ok(message) = Message::decode(frame, 1 << 20) {
        let mut out = BytesMut::new();
        message.encode_into(&mut out);
        assert_eq!(&out[..], data, "a decoded frame re-encodes to its bytes");
    }
}

fn decode_batch(data: &[u8]) {
    if let Ok(batch) = RecordBatch::from_bytes(Bytes::copy_from_slice(data)) {
        let count = batch.records().count();
        assert_eq!(count as u32, batch.record_count());
        for record in batch.records() {
            let _ = record.headers().count();
        }
    }
}

fuzz_target!(|data: &[u8]| {
    decode_frame(data);
    if let Some(sealed) = seal_frame(data) {
        decode_frame(&sealed);
    }
    decode_batch(data);
    if let Some(sealed) = seal_batch(data) {
        decode_batch(&sealed);
    }

    // The stream decoder, fed in pieces whose sizes come from the input.
    let decoder = FrameDecoder::new(1 << 16);
    let mut buffer = BytesMut::new();
    let step = usize::from(data.first().copied().unwrap_or(1)).max(1);
    for piece in data.chunks(step) {
        buffer.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buffer) {
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => break,
            }
        }
    }

    body_round_trip::<CreateStream>(data);
    body_round_trip::<CreateTopic>(data);
    body_round_trip::<TopicCreated>(data);
    body_round_trip::<DeleteTopic>(data);
    body_round_trip::<DeleteStream>(data);
    body_round_trip::<TopicsDeleted>(data);
    body_round_trip::<AlterTopic>(data);
    body_round_trip::<AddPartitions>(data);
    body_round_trip::<AcceptLoss>(data);
    body_round_trip::<ProduceReply>(data);
    body_round_trip::<FetchRequest>(data);
    body_round_trip::<OffsetForTime>(data);
    body_round_trip::<OffsetForTimeReply>(data);
    body_round_trip::<StoreCursor>(data);
    body_round_trip::<GetCursor>(data);
    body_round_trip::<DeleteCursor>(data);
    body_round_trip::<GetCursorReply>(data);
    body_round_trip::<CursorEvents>(data);
    body_round_trip::<ClusterStatusReply>(data);
    body_round_trip::<GroupStatusRequest>(data);
    body_round_trip::<GroupStatusReply>(data);
    body_round_trip::<AttentionReply>(data);
    body_round_trip::<MetadataRequest>(data);
    body_round_trip::<MetadataReply>(data);
    for code in ResultCode::ALL {
        let _ = ErrorBody::from_bytes(code, data);
    }
    let _ = FetchReply::from_bytes(Bytes::copy_from_slice(data));
});
