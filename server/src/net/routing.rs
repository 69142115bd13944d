//! Where each client request goes, by its operation's row of
//! `strand_wire::operation_table`: answered by the node itself, handed to
//! this node's replica of a group, proposed to the metadata plane (after
//! the node's partition-move check, when it needs one), or refused.

use std::sync::Arc;

use bytes::Bytes;
use strand_wire::ops::{AcceptLoss, ErrorBody};
use strand_wire::{Body, Msg, Operation, RequestHeader, ResultCode, Route};

use crate::metrics;
use crate::net::connection::ConnectionSender;
use crate::net::local_answers::local_answer;
use crate::net::replies::{error_frame, reply_frame};
use crate::refused::Refused;
use crate::runtime::input::Input;
use crate::security::request_checks::is_node_only;
use crate::shared::Shared;

/// `frame`, or `LimitExceeded` in its place when it is larger than the
/// frame a client takes: a node's own answer (status, metadata, lists)
/// grows with the cluster, and a client must never be sent what it cannot
/// read.
fn within_a_client_frame(header: &RequestHeader, frame: Bytes) -> Bytes {
    let max = strand_wire::FRAME_SIZE_MAX_DEFAULT as usize;
    if frame.len() <= max {
        return frame;
    }
    let message = format!(
        "the answer would take {} bytes, more than the {max} a client reads: ask for less \
         (one stream or topic)",
        frame.len()
    );
    error_frame(
        header,
        &ErrorBody::message(ResultCode::LimitExceeded, message),
    )
}

/// Answers or routes one request, by its operation's route (see
/// [`strand_wire::operation_table`]).
pub(crate) fn handle(shared: &Arc<Shared>, request: Msg<RequestHeader>, sender: &ConnectionSender) {
    let header = *request.header();
    let answer = |frame: Bytes| {
        let _ = sender.try_send(within_a_client_frame(&header, frame));
    };
    if header.prefix.cluster.get() != shared.config.cluster {
        let message = format!(
            "this node belongs to cluster {}, the request names cluster {}",
            shared.config.cluster,
            header.prefix.cluster.get()
        );
        let error = ErrorBody::message(ResultCode::InvalidRequest, message);
        return answer(error_frame(&header, &error));
    }
    if shared.stopping() {
        let error = ErrorBody::message(
            ResultCode::Unavailable,
            "this node is shutting down: retry at another node",
        );
        return answer(error_frame(&header, &error));
    }
    let operation = header.operation();
    let info = operation.info();
    // Nodes send these to each other on the replica bus
    // (`crate::net::node_calls`); on the client port they are refused to
    // everyone, a node certificate included.
    if is_node_only(&request) {
        metrics::permission_denied(operation);
        let message = format!("{operation:?} is sent only by the cluster's nodes, to each other");
        let error = ErrorBody::message(ResultCode::PermissionDenied, message);
        return answer(error_frame(&header, &error));
    }
    shared.route_client(header.client.get(), sender);
    let group = header.prefix.group.get();
    if info.route.names_group_zero() != (group == 0) {
        let message = if group == 0 {
            format!("{operation:?} needs a partition's group id, not 0")
        } else {
            format!("{operation:?} goes to group 0 (the metadata plane)")
        };
        let error = ErrorBody::message(ResultCode::InvalidRequest, message);
        return answer(error_frame(&header, &error));
    }
    if let Some(check) = crate::metadata::guard::Check::of(&request) {
        return check_then_route(Arc::clone(shared), check, request, sender.clone());
    }
    match info.route {
        Route::Local => answer(local_answer(shared, &request)),
        // Signed in by the connection's reader before it gets here.
        Route::SignIn => answer(reply_frame(&header, ResultCode::Ok, Bytes::new())),
        Route::LocalReplica => to_local_replica(shared, request, answer),
        // Refused at the door (`check_request`) before it gets here.
        Route::Internal => {
            let message = format!("{operation:?} is a group's own operation, not a request");
            let error = ErrorBody::message(ResultCode::InvalidRequest, message);
            answer(error_frame(&header, &error));
        }
        Route::MetadataReplicated
        | Route::MetadataPrimary
        | Route::PartitionReplicated
        | Route::PartitionGroup => route(shared, group, Input::Request(request), &header, answer),
    }
}

/// Hands a request whose route is [`Route::LocalReplica`] (accepting a
/// loss) to this node's replica of the group its body names.
fn to_local_replica(shared: &Shared, request: Msg<RequestHeader>, answer: impl Fn(Bytes)) {
    let header = *request.header();
    assert_eq!(header.operation(), Operation::AcceptLoss);
    match AcceptLoss::from_bytes(request.body()) {
        Ok(accept) => route(
            shared,
            accept.group,
            Input::AcceptLoss(request),
            &header,
            answer,
        ),
        Err(error) => {
            let error = ErrorBody::message(ResultCode::InvalidRequest, error.to_string());
            answer(error_frame(&header, &error));
        }
    }
}

/// Proposes a partition move once the node's safety check passes; answers
/// `Refused` (nothing proposed) when it does not, and a dry run with the
/// plan the node's catalog gives. The check asks the
/// cluster, so it runs beside the connection's reading.
fn check_then_route(
    shared: Arc<Shared>,
    check: crate::metadata::guard::Check,
    request: Msg<RequestHeader>,
    sender: ConnectionSender,
) {
    tokio::spawn(async move {
        let header = *request.header();
        let answer = |frame: Bytes| {
            let _ = sender.try_send(frame);
        };
        if let Some(message) = crate::metadata::guard::refusal(&shared, &check).await {
            metrics::refused_unsafe(header.operation());
            tracing::warn!(?check, message, "guard: refused a partition move");
            let error = ErrorBody::message(ResultCode::Refused, message);
            return answer(error_frame(&header, &error));
        }
        if !check.dry_run() {
            return route(&shared, 0, Input::Request(request), &header, answer);
        }
        match crate::metadata::guard::preview(&shared, &check) {
            Ok(body) => answer(reply_frame(&header, ResultCode::Ok, body)),
            Err(error) => answer(error_frame(&header, &error)),
        }
    });
}

/// Hands `input` to `group`'s actor; answers `Busy`, `Deleted` or
/// `UnknownGroup` when it cannot take it.
fn route(
    shared: &Shared,
    group: u64,
    input: Input,
    header: &RequestHeader,
    answer: impl Fn(Bytes),
) {
    let error = match shared.send_to_group(group, input) {
        Ok(()) => return,
        Err(Refused::Full) => ErrorBody::Busy { retry_after_ms: 5 },
        Err(Refused::Gone) if shared.catalog().is_deleted(group) => ErrorBody::message(
            ResultCode::Deleted,
            format!("group {group}'s topic was deleted"),
        ),
        Err(Refused::Gone) => ErrorBody::message(
            ResultCode::UnknownGroup,
            format!(
                "group {group} is not hosted on node {}: refresh metadata",
                shared.config.node
            ),
        ),
    };
    answer(error_frame(header, &error));
}
