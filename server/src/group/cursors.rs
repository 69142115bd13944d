//! A partition's cursor requests on its actor: stores and deletes go
//! through the host's door (`GroupHost::store_cursor`, `delete_cursor`),
//! where the primary applies the bound on consumer names; what only this
//! node's catalog knows (a consumer group's fence) is checked first. The
//! expiry of idle cursors runs here too, with the node's clock.

use bytes::Bytes;
use strand_consensus::CursorOutcome;
use strand_wire::ops::{DeleteCursor, ErrorBody, StoreCursor};
use strand_wire::{Body, Msg, RequestHeader, ResultCode};

use super::Actor;
use crate::metrics;

impl Actor {
    /// A consumer stores its cursor.
    pub(super) fn on_store_cursor(&mut self, request: &Msg<RequestHeader>) {
        let header = *request.header();
        let cursor = match StoreCursor::from_bytes(request.body()) {
            Ok(cursor) => cursor,
            Err(error) => {
                return self.refuse(&header, ResultCode::InvalidRequest, error.to_string());
            }
        };
        if let Some(refusal) = self
            .cursor_fence_refusal(&cursor.consumer, cursor.fence.is_some())
            .or_else(|| self.group_fence_refusal(&cursor))
        {
            let body = Bytes::from(refusal.to_vec());
            return self.send_reply(&header, refusal.code(), body);
        }
        let outcome = self.host.store_cursor(request, cursor, now_ns());
        if outcome == CursorOutcome::Refused(ResultCode::LimitExceeded) {
            metrics::cursor_store_refused_limit();
        }
    }

    /// A consumer's cursor is deleted. A consumer group's cursor is deleted
    /// only while the group has no members (as Kafka refuses to delete the
    /// offsets of a group that still reads the topic).
    pub(super) fn on_delete_cursor(&mut self, request: &Msg<RequestHeader>) {
        let header = *request.header();
        let delete = match DeleteCursor::from_bytes(request.body()) {
            Ok(delete) => delete,
            Err(error) => {
                return self.refuse(&header, ResultCode::InvalidRequest, error.to_string());
            }
        };
        if let Some(refusal) = self.cursor_fence_refusal(&delete.consumer, false) {
            let body = Bytes::from(refusal.to_vec());
            return self.send_reply(&header, refusal.code(), body);
        }
        self.host.delete_cursor(request, delete);
    }

    /// As primary, deletes the cursors no consumer stored for the node's
    /// `cursor_retention_ms` (a consumer group's only once it has no
    /// members, as Kafka expires a group's offsets once it is empty); the
    /// shard's periodic storage check calls it.
    pub(super) fn expire_cursors(&mut self) {
        let Some(retention_ms) = self.shared.config.cursor_retention_ms else {
            return;
        };
        let catalog = self.shared.catalog();
        let (stream, topic) = (&self.spec.stream, &self.spec.topic);
        let keep = |consumer: &str| {
            catalog.consumer_group(consumer).is_some_and(|group| {
                (&group.stream, &group.topic) == (stream, topic) && !group.members.is_empty()
            })
        };
        let retention_ns = retention_ms.saturating_mul(1_000_000);
        let expired = self.host.expire_cursors(now_ns(), retention_ns, &keep);
        if expired > 0 {
            metrics::cursors_expired(expired);
            tracing::info!(
                group = self.spec.group,
                expired,
                retention_ms,
                "group: idle cursors expired"
            );
        }
    }

    /// Why a change of `consumer`'s cursor without a member's fence must be
    /// refused, if it must: a consumer group's cursor is changed by the
    /// member that reads the partition in the group's current generation,
    /// and by nobody else while the group has members. `fenced`: the
    /// request carries a member's fence (checked by
    /// [`Actor::group_fence_refusal`]).
    fn cursor_fence_refusal(&self, consumer: &str, fenced: bool) -> Option<ErrorBody> {
        if fenced {
            return None;
        }
        let catalog = self.shared.catalog();
        let group = catalog.consumer_group(consumer).filter(|group| {
            (group.stream.as_str(), group.topic.as_str()) == (&self.spec.stream, &self.spec.topic)
        })?;
        (!group.members.is_empty()).then(|| {
            ErrorBody::message(
                ResultCode::InvalidRequest,
                format!(
                    "cursor {consumer} is consumer group {consumer}'s, which has {} members: \
                     only they store it (reset or delete it once the group is empty)",
                    group.members.len()
                ),
            )
        })
    }

    /// Why a member's fenced store of `cursor` must be refused, if it must:
    /// the member must own the partition in the group's current generation
    /// (this node's catalog says which).
    fn group_fence_refusal(&self, cursor: &StoreCursor) -> Option<ErrorBody> {
        let fence = cursor.fence.as_ref()?;
        let catalog = self.shared.catalog();
        let group = catalog.consumer_group(&cursor.consumer).filter(|group| {
            (group.stream.as_str(), group.topic.as_str()) == (&self.spec.stream, &self.spec.topic)
        });
        match group {
            Some(group) => group.check_fence(self.spec.partition, fence).err(),
            // Only the coordinator says a member is unknown: this node's
            // catalog may not have applied the group's first join yet.
            None => Some(ErrorBody::message(
                ResultCode::NotReady,
                format!(
                    "this node does not know consumer group {} yet: retry (its heartbeat says \
                     whether the member still belongs)",
                    cursor.consumer
                ),
            )),
        }
    }
}

/// The node's clock, ns since the Unix epoch (0 before it).
fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
        })
}
