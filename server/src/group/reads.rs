//! A partition's reads on its primary: fetches (answered at once, or
//! parked as long polls until records commit or their wait ends), a
//! consumer's stored cursor, and the offset for a time.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use strand_wire::ops::{
    ErrorBody, FETCH_WAIT_MS_MAX, FetchReply, FetchRequest, GetCursor, GetCursorReply,
    OffsetForTime, OffsetForTimeReply, PRODUCE_BATCH_BYTES_MAX,
};
use strand_wire::{Body, Msg, RequestHeader, ResultCode};
use zerocopy::IntoBytes;

use super::Actor;
use crate::net::replies::error_frame;

/// Most batch bytes a fetch reply carries past its first batch: what fits
/// a frame of the size a client takes by default, with the reply's header
/// and head.
pub const FETCH_BYTES_MAX: u64 = PRODUCE_BATCH_BYTES_MAX as u64;

impl Actor {
    /// A fetch: answered now, or parked as a long poll at the high
    /// watermark.
    pub(super) fn on_fetch(&mut self, request: &Msg<RequestHeader>) {
        let header = *request.header();
        if !self.serving_or_redirect(&header) {
            return;
        }
        let fetch = match FetchRequest::from_bytes(request.body()) {
            Ok(fetch) => fetch,
            Err(error) => {
                return self.refuse(&header, ResultCode::InvalidRequest, error.to_string());
            }
        };
        let bounds = self.host.read_bounds();
        let high_watermark = bounds.high_watermark;
        if bounds.out_of_range(fetch.offset) {
            let error = ErrorBody::OffsetOutOfRange {
                requested: fetch.offset,
                log_start_offset: bounds.log_start,
                high_watermark,
            };
            let _ = self
                .shared
                .reply(header.client.get(), error_frame(&header, &error));
            return;
        }
        // At the high watermark, or past it within the log (records the
        // previous primary committed, which this one commits once a backup
        // acks its view): a long poll waits for them.
        if fetch.offset >= high_watermark && fetch.wait_ms > 0 && self.parked.has_room() {
            let wait = Duration::from_millis(u64::from(fetch.wait_ms.min(FETCH_WAIT_MS_MAX)));
            self.parked.park(header, fetch, Instant::now() + wait);
            return;
        }
        self.serve_fetch(&header, &fetch);
    }

    /// Answers a fetch with the committed batches from its offset, up to its
    /// byte bound.
    pub(super) fn serve_fetch(&mut self, request: &RequestHeader, fetch: &FetchRequest) {
        let bounds = self.host.read_bounds();
        let (high_watermark, log_start) = (bounds.high_watermark, bounds.log_start);
        let max_bytes = u64::from(fetch.max_bytes).clamp(1, FETCH_BYTES_MAX);
        let committed = match self.host.fetch_committed(fetch.offset, max_bytes) {
            Ok(batches) => batches,
            Err(error) => {
                tracing::error!(%error, offset = fetch.offset, "group: fetch failed");
                return self.refuse(request, ResultCode::StorageError, error.to_string());
            }
        };
        let size = strand_wire::ops::FETCH_REPLY_HEAD_SIZE
            + committed
                .iter()
                .map(|batch| batch.bytes.len())
                .sum::<usize>();
        let mut body = BytesMut::with_capacity(size);
        body.extend_from_slice(&FetchReply::head(high_watermark, log_start));
        for batch in &committed {
            body.extend_from_slice(batch.patched_header().as_bytes());
            body.extend_from_slice(&batch.records());
        }
        self.send_reply(request, ResultCode::Ok, body.freeze());
    }

    /// Answers the long polls that newly committed records answer.
    pub(super) fn serve_parked(&mut self) {
        if self.parked.is_empty() {
            return;
        }
        let high_watermark = self.host.high_watermark();
        for parked in self.parked.take_answerable(high_watermark) {
            self.serve_fetch(&parked.request, &parked.fetch);
        }
    }

    /// Answers, with what there is, the long polls whose wait is over (all
    /// of them once this replica no longer serves as primary).
    pub(super) fn expire_parked(&mut self) {
        let serving = self.host.is_serving_primary();
        for parked in self.parked.take_due(Instant::now(), serving) {
            self.serve_fetch(&parked.request, &parked.fetch);
        }
    }

    /// A consumer's stored cursor.
    pub(super) fn on_get_cursor(&mut self, request: &Msg<RequestHeader>) {
        let header = *request.header();
        if !self.serving_or_redirect(&header) {
            return;
        }
        match GetCursor::from_bytes(request.body()) {
            Ok(query) => {
                let offset = self.host.cursor(&query.consumer);
                let body = Bytes::from(GetCursorReply { offset }.to_vec());
                self.send_reply(&header, ResultCode::Ok, body);
            }
            Err(error) => self.refuse(&header, ResultCode::InvalidRequest, error.to_string()),
        }
    }

    /// The first committed offset appended at or after a time (the high
    /// watermark when every committed record is older).
    pub(super) fn on_offset_for_time(&mut self, request: &Msg<RequestHeader>) {
        let header = *request.header();
        if !self.serving_or_redirect(&header) {
            return;
        }
        match OffsetForTime::from_bytes(request.body()) {
            Ok(query) => {
                let offset = self.host.offset_for_time(query.timestamp_ns);
                let body = Bytes::from(OffsetForTimeReply { offset }.to_vec());
                self.send_reply(&header, ResultCode::Ok, body);
            }
            Err(error) => self.refuse(&header, ResultCode::InvalidRequest, error.to_string()),
        }
    }
}
