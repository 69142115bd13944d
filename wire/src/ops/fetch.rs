//! Produce replies and fetches: reading a partition by offset, and finding
//! the offset a time reaches.

use bytes::Bytes;

use crate::batch::{RecordBatch, split_batches};
use crate::codec::{Body, BodyReader, BodyWriter};
use crate::error::BodyError;
use crate::header::HEADER_SIZE;
use crate::message::FRAME_SIZE_MAX_DEFAULT;

/// The reply to a produce: where the batch's records landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceReply {
    /// Offset of the batch's first record.
    pub offset_base: u64,
    /// Number of records appended (offsets `offset_base..offset_base + record_count`).
    pub record_count: u32,
}

impl Body for ProduceReply {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u64(self.offset_base);
        writer.u32(self.record_count);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<ProduceReply, BodyError> {
        let reply = ProduceReply {
            offset_base: reader.u64("offset base")?,
            record_count: reader.u32("record count")?,
        };
        if reply
            .offset_base
            .checked_add(u64::from(reply.record_count))
            .is_none()
        {
            return Err(BodyError::Invalid {
                field: "offset base",
                reason: "offsets overflow",
            });
        }
        Ok(reply)
    }
}

/// Read committed record batches from a partition, starting at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchRequest {
    /// First offset wanted; the reply starts with the batch holding it.
    pub offset: u64,
    /// The reply's batches take at most this many bytes, except that the
    /// first batch available is returned alone whatever its size (a produce
    /// never stores one larger than [`PRODUCE_BATCH_BYTES_MAX`]).
    pub max_bytes: u32,
    /// When nothing is available at `offset`, wait up to this long for records
    /// to commit before replying empty (long poll); 0 replies at once.
    pub wait_ms: u32,
}

/// Longest long poll a fetch may ask for.
pub const FETCH_WAIT_MS_MAX: u32 = 60_000;

impl Body for FetchRequest {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u64(self.offset);
        writer.u32(self.max_bytes);
        writer.u32(self.wait_ms);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<FetchRequest, BodyError> {
        let request = FetchRequest {
            offset: reader.u64("offset")?,
            max_bytes: reader.u32("max bytes")?,
            wait_ms: reader.u32("wait ms")?,
        };
        if request.max_bytes == 0 {
            return Err(BodyError::Invalid {
                field: "max bytes",
                reason: "zero",
            });
        }
        if request.wait_ms > FETCH_WAIT_MS_MAX {
            return Err(BodyError::Invalid {
                field: "wait ms",
                reason: "longer than 60 s",
            });
        }
        Ok(request)
    }
}

/// Size of the fixed part of a fetch reply, before its batches.
pub const FETCH_REPLY_HEAD_SIZE: usize = 16;

/// Largest record batch a produce may carry: one that a fetch reply holding
/// it alone still fits in a frame of [`FRAME_SIZE_MAX_DEFAULT`], the largest
/// a client takes by default. A larger batch could be written but never read
/// back by such a consumer, which would be stuck at its offset for good.
pub const PRODUCE_BATCH_BYTES_MAX: usize =
    FRAME_SIZE_MAX_DEFAULT as usize - HEADER_SIZE - FETCH_REPLY_HEAD_SIZE;

/// The batch bytes a fetch reply may carry in a frame of `frame_size_max`.
pub fn fetch_reply_batch_bytes_max(frame_size_max: u32) -> usize {
    (frame_size_max as usize).saturating_sub(HEADER_SIZE + FETCH_REPLY_HEAD_SIZE)
}

/// The reply to a fetch: the partition's bounds and the batches read.
///
/// On the wire: `high_watermark u64, log_start_offset u64`, then the batches
/// back to back, each with its `offset_base` filled in. The server writes the
/// head and the batches as separate slices, so record bytes are never copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchReply {
    /// One past the last committed offset: what a consumer can read up to.
    pub high_watermark: u64,
    /// The oldest offset still retained.
    pub log_start_offset: u64,
    /// The batches read, in offset order.
    pub batches: Vec<RecordBatch>,
}

impl FetchReply {
    /// The fixed head of a reply.
    pub fn head(high_watermark: u64, log_start_offset: u64) -> [u8; FETCH_REPLY_HEAD_SIZE] {
        let mut head = [0u8; FETCH_REPLY_HEAD_SIZE];
        head[..8].copy_from_slice(&high_watermark.to_le_bytes());
        head[8..].copy_from_slice(&log_start_offset.to_le_bytes());
        head
    }

    /// The whole reply body in one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let batch_bytes: usize = self.batches.iter().map(|batch| batch.bytes().len()).sum();
        let mut out = Vec::with_capacity(FETCH_REPLY_HEAD_SIZE + batch_bytes);
        out.extend_from_slice(&FetchReply::head(
            self.high_watermark,
            self.log_start_offset,
        ));
        for batch in &self.batches {
            out.extend_from_slice(batch.bytes());
        }
        out
    }

    /// Parses a reply body, validating every batch (checksums included).
    pub fn from_bytes(mut body: Bytes) -> Result<FetchReply, BodyError> {
        if body.len() < FETCH_REPLY_HEAD_SIZE {
            return Err(BodyError::Truncated {
                at: 0,
                field: "fetch reply head",
            });
        }
        let head = body.split_to(FETCH_REPLY_HEAD_SIZE);
        let mut reader = BodyReader::new(&head);
        let high_watermark = reader.u64("high watermark")?;
        let log_start_offset = reader.u64("log start offset")?;
        if log_start_offset > high_watermark {
            return Err(BodyError::Invalid {
                field: "log start offset",
                reason: "above the high watermark",
            });
        }
        let batches = split_batches(body)?;
        let mut next: Option<u64> = None;
        for batch in &batches {
            let base = batch.header().offset_base.get();
            let end = base.checked_add(u64::from(batch.record_count()));
            let in_order = next.is_none_or(|next| base == next);
            if !in_order || end.is_none_or(|end| end > high_watermark) {
                return Err(BodyError::Invalid {
                    field: "fetch reply",
                    reason: "batches not contiguous or past the high watermark",
                });
            }
            next = end;
        }
        Ok(FetchReply {
            high_watermark,
            log_start_offset,
            batches,
        })
    }
}

/// Where a partition's records reach a time: the first record appended at
/// or after `timestamp_ns`. The clock is the append time the partition's
/// primary stamped on each batch (ns since the Unix epoch), which never goes
/// back within a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetForTime {
    /// The time looked for.
    pub timestamp_ns: u64,
}

impl Body for OffsetForTime {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u64(self.timestamp_ns);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<OffsetForTime, BodyError> {
        Ok(OffsetForTime {
            timestamp_ns: reader.u64("timestamp ns")?,
        })
    }
}

/// The reply to OffsetForTime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetForTimeReply {
    /// The first offset whose batch was appended at or after the time; the
    /// high watermark when every committed record is older.
    pub offset: u64,
}

impl Body for OffsetForTimeReply {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u64(self.offset);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<OffsetForTimeReply, BodyError> {
        Ok(OffsetForTimeReply {
            offset: reader.u64("offset")?,
        })
    }
}
