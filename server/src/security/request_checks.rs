//! What the client port asks of security for each request, before it
//! handles it: the connection's sign-in (audited when refused), the right
//! the request needs under `[auth] required`, whether its client id is the
//! caller's, whether only a node may send it, and how long its user's
//! quotas hold it (a fetch reply's bytes charged as it is written).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strand_wire::ops::ErrorBody;
use strand_wire::{Body, Msg, Operation, RequestHeader, ResultCode};
use zerocopy::FromBytes;

use crate::metrics;
use crate::net::connection::{ConnectionReceiver, ConnectionSender};
use crate::net::replies::{error_frame, reply_frame};
use crate::security::auth::Identity;
use crate::security::caller::{Caller, Peer};
use crate::shared::Shared;

/// Signs the connection in (or refuses, audits the refusal, and closes
/// the connection after [`crate::security::auth::SIGN_IN_FAILURES_MAX`] refusals).
pub(crate) async fn sign_in(
    shared: &Arc<Shared>,
    request: &Msg<RequestHeader>,
    sender: &ConnectionSender,
    peer: &Peer,
    signed_in: &mut Option<Identity>,
    failures: &mut u32,
) -> Result<(), String> {
    let header = request.header();
    let (attempt, result) =
        crate::security::auth::sign_in::sign_in(shared, request.body(), peer.ip).await;
    let refused = match result {
        Ok(identity) => {
            tracing::debug!(user = identity.user, proof = ?identity.proof, "client: signed in");
            sender.set_user(Some(identity.user.clone()));
            *signed_in = Some(identity);
            let _ = sender.try_send(reply_frame(header, ResultCode::Ok, Bytes::new()));
            return Ok(());
        }
        Err(refused) => refused,
    };
    *failures += 1;
    let error = refused.error_body();
    if let Some(log) = &shared.audit {
        let target = attempt.user.as_deref().unwrap_or_default();
        let entry = crate::security::audit::sign_in_failure(
            &attempt.audit_name(),
            &peer.source,
            target,
            error.code(),
        );
        log.record(entry).await;
    }
    let _ = sender.try_send(error_frame(header, &error));
    if *failures >= crate::security::auth::SIGN_IN_FAILURES_MAX {
        return Err(format!("{failures} failed sign-ins"));
    }
    Ok(())
}

/// Why `request` is refused before it is handled, beyond its rights: its
/// client id belongs to another user (see [`crate::security::auth::client_ids`]), or
/// it would store a credential hash the node does not accept (see
/// [`crate::security::auth::hash_policy`]). A node is exempt from the first.
pub(crate) fn request_refusal(
    shared: &Shared,
    request: &Msg<RequestHeader>,
    caller: Caller,
    signed_in: Option<&Identity>,
) -> Option<ErrorBody> {
    if !matches!(caller, Caller::Node(_)) {
        let user = signed_in.map_or(crate::security::auth::client_ids::ANONYMOUS, |identity| {
            identity.user.as_str()
        });
        let client = request.header().client.get();
        if let Err(owner) = shared.client_owners.claim(client, user) {
            metrics::client_id_refused();
            let owner = if owner.is_empty() {
                "an anonymous caller"
            } else {
                "another user"
            };
            let message = format!(
                "client id {client:032x} belongs to {owner} on this node: use a client id of \
                 your own"
            );
            return Some(ErrorBody::message(ResultCode::PermissionDenied, message));
        }
    }
    crate::security::auth::hash_policy::refusal_before_prepare(request)
}

/// Why `request` is refused to its caller under `[auth] required`, if it is:
/// not signed in, or without the right it needs. A node is exempt.
pub(crate) fn auth_refusal(
    shared: &Shared,
    request: &Msg<RequestHeader>,
    caller: Caller,
    signed_in: Option<&Identity>,
) -> Option<ErrorBody> {
    if !shared.config.auth.required || matches!(caller, Caller::Node(_)) {
        return None;
    }
    let need = crate::security::auth::needed(shared, request)?;
    let operation = request.header().operation();
    let Some(identity) = signed_in else {
        metrics::permission_denied(operation);
        return Some(ErrorBody::message(
            ResultCode::AuthenticationFailed,
            "this cluster requires signing in first",
        ));
    };
    let refused = crate::security::auth::check(shared, identity, &need).err()?;
    metrics::permission_denied(operation);
    Some(match refused {
        crate::security::auth::Refusal::Credentials(message) => {
            ErrorBody::message(ResultCode::AuthenticationFailed, message)
        }
        crate::security::auth::Refusal::Rights(message) => {
            ErrorBody::message(ResultCode::PermissionDenied, message)
        }
    })
}

/// Whether only a node may send `request`: a node-only operation, or a
/// consumer group member's removal for an expired session (the
/// coordinator's, which a member must not forge against another).
pub(crate) fn is_node_only(request: &Msg<RequestHeader>) -> bool {
    let operation = request.header().operation();
    operation.info().node_only
        || (operation == Operation::LeaveConsumerGroup
            && strand_wire::ops::LeaveConsumerGroup::from_bytes(request.body())
                .is_ok_and(|leave| leave.expired))
}

/// Charges the fetch replies among `frames` to the connection's user's
/// fetch quota, if it has one: its next request waits off any debt.
pub(crate) fn charge_fetch_replies(
    shared: &Shared,
    receiver: &ConnectionReceiver,
    frames: &VecDeque<Bytes>,
) {
    let Some(user) = receiver.user() else {
        return;
    };
    let catalog = shared.catalog();
    let Some(quota) = catalog
        .quota(&user)
        .filter(|quota| quota.fetch_bytes_per_sec > 0)
    else {
        return;
    };
    let fetched: u64 = frames
        .iter()
        .filter(|frame| {
            strand_wire::ReplyHeader::read_from_prefix(frame).is_ok_and(|(reply, _)| {
                reply.operation == Operation::Fetch as u8
                    && reply.result.get() == ResultCode::Ok as u16
            })
        })
        .map(|frame| frame.len() as u64)
        .sum();
    if fetched > 0 {
        shared
            .quotas
            .charge(&user, quota, crate::security::quota::Rate::Fetch, fetched);
    }
}

/// How long `request` must wait for its user's quotas, if it has any: one
/// request, a produce's bytes, and any fetch debt.
pub(crate) fn quota_delay(shared: &Shared, user: &str, request: &Msg<RequestHeader>) -> Duration {
    use crate::security::quota::Rate;
    let catalog = shared.catalog();
    let Some(quota) = catalog.quota(user) else {
        return Duration::ZERO;
    };
    let quotas = &shared.quotas;
    let mut delay = quotas.charge(user, quota, Rate::Requests, 1);
    delay = delay.max(quotas.charge(user, quota, Rate::Fetch, 0));
    if request.header().operation() == Operation::Produce {
        let bytes = request.body().len() as u64;
        delay = delay.max(quotas.charge(user, quota, Rate::Produce, bytes));
    }
    delay
}
