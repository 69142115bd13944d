//! A group's client requests: dispatch by operation (then by route),
//! produce admission, the primary check with its redirect, accept-loss, and
//! consumer heartbeats at the metadata plane's primary. Reads and cursors
//! have their own modules.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use strand_consensus::{ClientRequest, Status};
use strand_wire::ops::{AcceptLossReply, ConsumerHeartbeat, ErrorBody, PRODUCE_BATCH_BYTES_MAX};
use strand_wire::{Body, Msg, Operation, RecordBatch, RequestHeader, ResultCode, Route};

use super::{Actor, LATENCIES_TRACKED_MAX};
use crate::metadata::coordinator::answer_heartbeat;
use crate::metadata::plane::with_topic_defaults;
use crate::metrics;
use crate::net::replies::{error_frame, reply_frame};

impl Actor {
    /// One client request: handled by its operation (produce, reads,
    /// cursors, heartbeats), else by its route (a metadata op prepared as
    /// it came).
    pub(super) fn on_request(&mut self, request: Msg<RequestHeader>) {
        let header = *request.header();
        let operation = header.operation();
        match operation {
            Operation::Produce => return self.on_produce(request),
            Operation::CreateTopic => {
                return match with_topic_defaults(&self.shared.config, &request) {
                    Ok(request) => self.submit(request, 0),
                    Err(error) => {
                        self.refuse(&header, ResultCode::InvalidRequest, error.to_string())
                    }
                };
            }
            Operation::ConsumerHeartbeat => return self.on_heartbeat(&request),
            Operation::Fetch => return self.on_fetch(&request),
            Operation::StoreCursor => return self.on_store_cursor(&request),
            Operation::DeleteCursor => return self.on_delete_cursor(&request),
            Operation::GetCursor => return self.on_get_cursor(&request),
            Operation::OffsetForTime => return self.on_offset_for_time(&request),
            _ => {}
        }
        // Every other operation is handled by its route alone: a metadata
        // op is prepared as it came; the rest never reach a group's actor.
        match operation.info().route {
            Route::MetadataReplicated => self.submit(request, 0),
            Route::Internal => self.refuse(
                &header,
                ResultCode::InvalidRequest,
                format!("{operation:?} is a group's own operation, not a request"),
            ),
            route => self.refuse(
                &header,
                ResultCode::InvalidRequest,
                format!("{operation:?} ({route:?}) is not answered by a group's actor"),
            ),
        }
    }

    /// A produce: checked (size, one valid batch, storage, the disk's
    /// room), timed, and submitted.
    pub(super) fn on_produce(&mut self, request: Msg<RequestHeader>) {
        let header = *request.header();
        if self.spec.group == 0 {
            return self.refuse(
                &header,
                ResultCode::InvalidRequest,
                "group 0 holds no records",
            );
        }
        let body_size = request.body().len();
        if body_size > PRODUCE_BATCH_BYTES_MAX {
            let body = ErrorBody::TooLarge {
                size: body_size as u64,
                max: PRODUCE_BATCH_BYTES_MAX as u64,
            };
            let _ = self
                .shared
                .reply(header.client.get(), error_frame(&header, &body));
            return;
        }
        let record_count = match RecordBatch::from_bytes(request.body().clone()) {
            Ok(batch) => batch.record_count(),
            Err(error) => {
                return self.refuse(
                    &header,
                    ResultCode::InvalidRequest,
                    format!("the produce body is not one valid record batch: {error}"),
                );
            }
        };
        if record_count == 0 {
            return self.refuse(&header, ResultCode::InvalidRequest, "empty batch");
        }
        if self.host.storage_failed() {
            return self.refuse(
                &header,
                ResultCode::StorageError,
                "this replica's storage failed; the node needs attention",
            );
        }
        let body_bytes = request.body().len() as u64;
        if self.host.would_prepare(&header, record_count) && !self.shared.disk.admit(body_bytes) {
            metrics::produce_refused_disk_full();
            let (free, reserve) = self.shared.disk.reading();
            return self.refuse(
                &header,
                ResultCode::DiskFull,
                format!(
                    "node {}'s data disk has {free} bytes free, below its reserve of {reserve}",
                    self.shared.config.node
                ),
            );
        }
        if self.produce_started.len() >= LATENCIES_TRACKED_MAX {
            self.produce_started.pop_first();
        }
        self.produce_started
            .insert((header.client.get(), header.request.get()), Instant::now());
        self.submit(request, record_count);
    }

    /// Hands a request to the host, stamped with this node's clock.
    pub(super) fn submit(&mut self, request: Msg<RequestHeader>, record_count: u32) {
        let timestamp_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64);
        let request = ClientRequest {
            request,
            record_count,
            timestamp_ns,
        };
        self.host.submit(request);
    }

    /// Answers `request` with an error of `code`.
    pub(super) fn refuse(
        &self,
        request: &RequestHeader,
        code: ResultCode,
        message: impl Into<String>,
    ) {
        let body = ErrorBody::message(code, message);
        let _ = self
            .shared
            .reply(request.client.get(), error_frame(request, &body));
    }

    /// Answers `request` with `result` and `body`.
    pub(super) fn send_reply(&self, request: &RequestHeader, result: ResultCode, body: Bytes) {
        let _ = self
            .shared
            .reply(request.client.get(), reply_frame(request, result, body));
    }

    /// Answers `NotPrimary` (with the primary's address) unless this replica
    /// serves as primary; returns whether it does.
    pub(super) fn serving_or_redirect(&self, request: &RequestHeader) -> bool {
        if self.host.is_serving_primary() {
            return true;
        }
        let progress = self.host.progress();
        let error = if progress.status == Status::Normal || progress.status == Status::Recovering {
            let primary = progress.primary;
            let node = self.spec.node_at(primary).unwrap_or(0);
            ErrorBody::NotPrimary {
                view: progress.view.view,
                primary_replica: primary,
                primary_node: node,
                address: self.shared.client_address(node).unwrap_or_default(),
            }
        } else {
            ErrorBody::message(
                ResultCode::Unavailable,
                "view change in progress: retry soon",
            )
        };
        let _ = self
            .shared
            .reply(request.client.get(), error_frame(request, &error));
        false
    }

    /// A consumer group member's heartbeat, at the metadata plane's primary
    /// (the coordinator): answered from this replica's catalog by the
    /// coordinator's rule ([`answer_heartbeat`]).
    pub(super) fn on_heartbeat(&mut self, request: &Msg<RequestHeader>) {
        let header = *request.header();
        if !self.serving_or_redirect(&header) {
            return;
        }
        let heartbeat = match ConsumerHeartbeat::from_bytes(request.body()) {
            Ok(heartbeat) => heartbeat,
            Err(error) => {
                return self.refuse(&header, ResultCode::InvalidRequest, error.to_string());
            }
        };
        let Some(catalog) = self.host.catalog() else {
            return self.refuse(
                &header,
                ResultCode::InvalidRequest,
                "heartbeats go to group 0",
            );
        };
        let coordinator = &self.shared.coordinator;
        let (result, body) = answer_heartbeat(coordinator, catalog, &heartbeat, Instant::now());
        self.send_reply(&header, result, body);
    }

    /// An operator's accept-loss for this replica: a view that accepts the
    /// loss starts, or the refusal says why there is nothing to accept.
    pub(super) fn on_accept_loss(&mut self, request: &Msg<RequestHeader>) {
        let header = *request.header();
        if self.host.accept_loss() {
            let progress = self.host.progress();
            let body = AcceptLossReply {
                view: progress.view.view,
                op: progress.op,
            };
            tracing::warn!(view = body.view, "group: an operator accepted loss");
            self.send_reply(&header, ResultCode::Ok, Bytes::from(body.to_vec()));
        } else {
            self.refuse(
                &header,
                ResultCode::Unavailable,
                format!(
                    "group {} is not stuck on this node (status {}, view {}): nothing to accept",
                    self.spec.group,
                    self.host.progress().status.name(),
                    self.host.progress().view
                ),
            );
        }
    }
}
