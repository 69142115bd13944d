//! The scripted data plane: produced batches given offsets, fetches from an
//! offset, consumer cursors stored, read and deleted.

use std::time::Duration;

use bytes::Bytes;
use strand_wire::ops::{
    DeleteCursor, Empty, ErrorBody, FetchReply, FetchRequest, GetCursor, GetCursorReply,
    ProduceReply, StoreCursor,
};
use strand_wire::{Body, RecordBatch, RequestHeader};

use super::requests::{invalid, reply, with_offset_base};
use super::{Outcome, State};

impl State {
    pub(super) fn apply_produce(&mut self, group: u64, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let batch = RecordBatch::from_bytes(body.clone()).map_err(invalid)?;
        let partition = self.partitions.get_mut(&group).expect("checked above");
        let offset_base = partition.high_watermark;
        let record_count = batch.record_count();
        partition.high_watermark += u64::from(record_count);
        partition.batches.push((offset_base, batch));
        let reply = ProduceReply {
            offset_base,
            record_count,
        };
        Ok(Bytes::from(reply.to_vec()))
    }

    pub(super) fn fetch(&self, header: &RequestHeader, body: &Bytes) -> Outcome {
        let group = header.prefix.group.get();
        let request = match FetchRequest::from_bytes(body) {
            Ok(request) => request,
            Err(error) => return Outcome::Reply(reply(header, 0, Err(invalid(error)))),
        };
        let partition = &self.partitions[&group];
        if request.offset > partition.high_watermark {
            let error = ErrorBody::OffsetOutOfRange {
                requested: request.offset,
                log_start_offset: 0,
                high_watermark: partition.high_watermark,
            };
            return Outcome::Reply(reply(header, 0, Err(error)));
        }
        let batches: Vec<RecordBatch> = partition
            .batches
            .iter()
            .filter(|(base, batch)| base + u64::from(batch.record_count()) > request.offset)
            .take(if request.max_bytes <= 1 {
                1
            } else {
                usize::MAX
            })
            .map(|(base, batch)| with_offset_base(batch, *base))
            .collect();
        let fetch = FetchReply {
            high_watermark: partition.high_watermark,
            log_start_offset: 0,
            batches,
        };
        let ready = reply(header, 0, Ok(Bytes::from(fetch.to_vec())));
        if !fetch.batches.is_empty() || request.wait_ms == 0 {
            return Outcome::Reply(ready);
        }
        // Long poll: this scripted cluster only waits, it never wakes early.
        let wait = Duration::from_millis(u64::from(request.wait_ms).min(200));
        Outcome::Later(tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            ready
        }))
    }

    pub(super) fn get_cursor(&self, group: u64, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = GetCursor::from_bytes(body).map_err(invalid)?;
        let offset = self.partitions[&group]
            .cursors
            .get(&request.consumer)
            .copied();
        Ok(Bytes::from(GetCursorReply { offset }.to_vec()))
    }

    pub(super) fn store_cursor(&mut self, group: u64, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = StoreCursor::from_bytes(body).map_err(invalid)?;
        let partition = self.partitions.get_mut(&group).expect("routed");
        partition.cursors.insert(request.consumer, request.offset);
        Ok(Bytes::from(Empty.to_vec()))
    }

    pub(super) fn delete_cursor(&mut self, group: u64, body: &Bytes) -> Result<Bytes, ErrorBody> {
        let request = DeleteCursor::from_bytes(body).map_err(invalid)?;
        let partition = self.partitions.get_mut(&group).expect("routed");
        partition.cursors.remove(&request.consumer);
        Ok(Bytes::from(Empty.to_vec()))
    }
}
