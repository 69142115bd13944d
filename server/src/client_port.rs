//! The client port: accepts client connections, decodes request frames,
//! answers what the node knows itself (routing, status, attention), and hands
//! everything else to the group it names.
//!
//! With TLS ([`crate::tls`]) every connection runs the handshake first; a
//! connection that presents a node certificate of the cluster is that node,
//! and only such a connection may send node-internal operations
//! (`EpochStarted`, a `LeaveGroup` marked expired): anyone else gets
//! `PermissionDenied`.
//!
//! Replies are routed by client id to the connection the client last used,
//! through a bounded queue per connection ([`CONNECTION_QUEUE_CAPACITY`]
//! frames; a reply that finds it full is dropped and the client retries with
//! the same request number). A malformed frame (or a connection closed in the
//! middle of one) closes its connection: the typed error is logged and
//! counted, and answered with an error reply when the frame's request header
//! is intact (a request too large, a bad body checksum, a truncated body),
//! since only then is there a client and request number to answer; other
//! connections are unaffected. A
//! request the node cannot take (a full group inbox, shutdown) is answered
//! `Busy` or `Unavailable`, never dropped silently.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use strand_wire::message::check_header;
use strand_wire::ops::{
    AcceptLoss, AttentionEntry, AttentionReason, AttentionReply, ClusterStatusReply,
    DescribeGroups, ErrorBody, MetadataReply, MetadataRequest, NodeInfo,
};
use strand_wire::{
    Body, CommandHeader, FrameDecoder, FrameError, HEADER_SIZE, Message, Msg, Operation,
    RequestHeader, ResultCode,
};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use zerocopy::FromBytes;

use crate::bus::{gather, write_frames};
use crate::group::Input;
use crate::metrics;
use crate::replies::{error_frame, reply_frame, reply_frame_as_of};
use crate::shared::{CatalogFreshness, ConnectionSender, Refused, Shared};
use crate::tls::{NodeTls, ReadStream, WriteStream, split_plain};

/// How long a new connection may take over its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Who is at the other end of a client connection, as far as the node knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    /// A node of this cluster (it presented its node certificate).
    Node(u32),
    /// Someone without a node certificate, on a TLS port.
    Client,
    /// Anyone: the port is plaintext (loopback or `insecure`), so nothing
    /// tells a node from a client.
    Unverified,
}

impl Caller {
    /// Whether this caller may send node-internal operations.
    fn is_node(self) -> bool {
        matches!(self, Caller::Node(_) | Caller::Unverified)
    }

    /// How the audit log names it.
    fn identity(self) -> String {
        match self {
            Caller::Node(node) => format!("node {node}"),
            Caller::Client => "anonymous".to_owned(),
            Caller::Unverified => "unverified".to_owned(),
        }
    }
}

/// One client connection as the node knows it.
struct Peer {
    caller: Caller,
    /// The user its certificate names, and the certificate's SHA-256
    /// fingerprint (signed in from the start, unless it is revoked).
    certificate_user: Option<(String, String)>,
    /// Its address, for the audit log.
    source: String,
    /// Its IP address, for the failed sign-in limits.
    ip: std::net::IpAddr,
    /// Its admin requests awaiting replies (see [`crate::audit`]).
    audit: crate::audit::Pending,
}

/// How often a produce held for bus room looks again.
const ADMIT_POLL: Duration = Duration::from_millis(1);

/// How long a produce is held for room at most.
const ADMIT_WAIT_MAX: Duration = Duration::from_secs(1);

/// The retry hint of a produce that found no room in time.
const BUSY_RETRY_AFTER_MS: u32 = 50;

/// Reply frames queued to one connection at most.
pub const CONNECTION_QUEUE_CAPACITY: usize = 8192;

/// Largest request frame accepted (header + body).
pub const CLIENT_FRAME_SIZE_MAX: u32 = 8 * 1024 * 1024;

/// Accepts client connections forever.
pub async fn run(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, address)) => {
                let _ = stream.set_nodelay(true);
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    let (read, write, caller, certificate_user) = match open(&shared, stream).await
                    {
                        Ok(opened) => opened,
                        Err(reason) => {
                            metrics::client_frame_rejected();
                            tracing::warn!(%address, reason, "client: refused a connection");
                            return;
                        }
                    };
                    let (sender, receiver) = mpsc::channel(CONNECTION_QUEUE_CAPACITY);
                    let peer = Peer {
                        caller,
                        certificate_user,
                        source: address.to_string(),
                        ip: address.ip().to_canonical(),
                        audit: crate::audit::Pending::default(),
                    };
                    let audit = shared.audit.clone().map(|log| (log, peer.audit.clone()));
                    tokio::spawn(write_replies(write, receiver, audit));
                    if let Err(reason) = read_requests(&shared, read, &sender, &peer).await {
                        metrics::client_frame_rejected();
                        tracing::warn!(%address, reason, "client: closing the connection");
                    }
                    shared.forget_connection(&sender);
                });
            }
            Err(error) => {
                tracing::warn!(%error, "client: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
}

/// Signs the connection in (or refuses, audits the refusal, and closes
/// the connection after [`crate::auth::SIGN_IN_FAILURES_MAX`] refusals).
async fn sign_in(
    shared: &Arc<Shared>,
    request: &Msg<RequestHeader>,
    sender: &ConnectionSender,
    peer: &Peer,
    signed_in: &mut Option<crate::auth::Identity>,
    failures: &mut u32,
) -> Result<(), String> {
    let header = request.header();
    let (attempt, result) = crate::auth::sign_in::sign_in(shared, request.body(), peer.ip).await;
    let refused = match result {
        Ok(identity) => {
            tracing::debug!(user = identity.user, proof = ?identity.proof, "client: signed in");
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
        let entry = crate::audit::sign_in_failure(
            &attempt.audit_name(),
            &peer.source,
            target,
            error.code(),
        );
        log.record(entry).await;
    }
    let _ = sender.try_send(error_frame(header, &error));
    if *failures >= crate::auth::SIGN_IN_FAILURES_MAX {
        return Err(format!("{failures} failed sign-ins"));
    }
    Ok(())
}

/// Why `request` is refused before it is handled, beyond its rights: its
/// client id belongs to another user (see [`crate::auth::client_ids`]), or
/// it would store a credential hash the node does not accept (see
/// [`crate::auth::hash_policy`]). A node is exempt from the first.
fn request_refusal(
    shared: &Shared,
    request: &Msg<RequestHeader>,
    caller: Caller,
    signed_in: Option<&crate::auth::Identity>,
) -> Option<ErrorBody> {
    if !matches!(caller, Caller::Node(_)) {
        let user = signed_in.map_or(crate::auth::client_ids::ANONYMOUS, |identity| {
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
    crate::auth::hash_policy::refusal_before_prepare(request)
}

/// Why `request` is refused to its caller under `[auth] required`, if it is:
/// not signed in, or without the right it needs. A node is exempt.
fn auth_refusal(
    shared: &Shared,
    request: &Msg<RequestHeader>,
    caller: Caller,
    signed_in: Option<&crate::auth::Identity>,
) -> Option<ErrorBody> {
    if !shared.config.auth.required || matches!(caller, Caller::Node(_)) {
        return None;
    }
    let need = crate::auth::needed(shared, request)?;
    let operation = request.header().operation();
    let Some(identity) = signed_in else {
        metrics::permission_denied(operation);
        return Some(ErrorBody::message(
            ResultCode::AuthenticationFailed,
            "this cluster requires signing in first",
        ));
    };
    let refused = crate::auth::check(shared, identity, &need).err()?;
    metrics::permission_denied(operation);
    Some(match refused {
        crate::auth::Refusal::Credentials(message) => {
            ErrorBody::message(ResultCode::AuthenticationFailed, message)
        }
        crate::auth::Refusal::Rights(message) => {
            ErrorBody::message(ResultCode::PermissionDenied, message)
        }
    })
}

/// Whether only a node may send `request`: a node-internal operation, or a
/// consumer group member's removal for an expired session (the
/// coordinator's, which a member must not forge against another).
fn is_node_internal(request: &Msg<RequestHeader>) -> bool {
    let operation = request.header().operation();
    operation.is_node_internal()
        || (operation == Operation::LeaveGroup
            && strand_wire::ops::LeaveGroup::from_bytes(request.body())
                .is_ok_and(|leave| leave.expired))
}

/// Runs the TLS handshake when the port has TLS, and tells who called:
/// a node, or a client, with the user its certificate names if it
/// presented a user certificate.
async fn open(
    shared: &Shared,
    stream: TcpStream,
) -> Result<(ReadStream, WriteStream, Caller, Option<(String, String)>), String> {
    let Some(tls) = &shared.tls else {
        let (read, write) = split_plain(stream);
        return Ok((read, write, Caller::Unverified, None));
    };
    let (read, write, certificate) =
        tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, tls.accept_client(stream))
            .await
            .map_err(|_| "no TLS handshake in time".to_owned())?
            .map_err(|error| format!("TLS handshake failed: {error}"))?;
    let nodes = shared.config.peers.iter().map(|peer| peer.id);
    let Some(certificate) = certificate else {
        return Ok((read, write, Caller::Client, None));
    };
    if let Some(node) = NodeTls::node_of(&certificate, nodes) {
        return Ok((read, write, Caller::Node(node), None));
    }
    let user = crate::tls::user_of(&certificate).map(|user| {
        let fingerprint = strand_wire::ops::certificate_fingerprint(certificate.as_ref());
        (user, fingerprint)
    });
    Ok((read, write, Caller::Client, user))
}

/// Writes a connection's replies; with an audit log, each reply that
/// answers an admin request closes its entry.
async fn write_replies(
    mut write: WriteStream,
    mut receiver: mpsc::Receiver<Bytes>,
    audit: Option<(crate::audit::AuditLog, crate::audit::Pending)>,
) {
    let mut frames = VecDeque::new();
    while let Some(frame) = receiver.recv().await {
        frames.push_back(frame);
        gather(&mut receiver, &mut frames);
        if let Some((log, pending)) = &audit {
            for frame in &frames {
                if let Some(entry) = pending.close(frame) {
                    log.record(entry).await;
                }
            }
        }
        if write_frames(&mut write, &mut frames).await.is_err() {
            break;
        }
    }
    if let Some((log, pending)) = &audit {
        for entry in pending.abandon() {
            log.record(entry).await;
        }
    }
}

/// Reads frames until the client closes (Ok) or sends something unusable
/// (Err with the reason).
async fn read_requests(
    shared: &Arc<Shared>,
    mut read: ReadStream,
    sender: &ConnectionSender,
    peer: &Peer,
) -> Result<(), String> {
    let decoder = FrameDecoder::new(CLIENT_FRAME_SIZE_MAX);
    // The user this connection signed in as, and its failed attempts.
    let mut signed_in =
        peer.certificate_user
            .clone()
            .map(|(user, fingerprint)| crate::auth::Identity {
                user,
                proof: crate::auth::Proof::Certificate(fingerprint),
            });
    let mut failures = 0u32;
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    // The header of the frame being decoded: a frame whose body fails is
    // already cut off the buffer, and its refusal needs the header.
    let mut front = [0u8; HEADER_SIZE];
    loop {
        loop {
            let header = match buffer.get(..HEADER_SIZE) {
                Some(bytes) => {
                    front.copy_from_slice(bytes);
                    &front[..]
                }
                None => &[],
            };
            let Some(message) = decoder
                .decode(&mut buffer)
                .map_err(|error| refuse(sender, header, &error))?
            else {
                break;
            };
            let Message::Request(request) = message else {
                return Err(format!(
                    "{:?} frames are not accepted on the client port",
                    message.command()
                ));
            };
            if wait_for_room(shared, &request).await.is_err() {
                let error = ErrorBody::Busy {
                    retry_after_ms: BUSY_RETRY_AFTER_MS,
                };
                let _ = sender.try_send(error_frame(request.header(), &error));
                continue;
            }
            if request.header().operation() == Operation::Authenticate {
                sign_in(
                    shared,
                    &request,
                    sender,
                    peer,
                    &mut signed_in,
                    &mut failures,
                )
                .await?;
                continue;
            }
            if let Some(log) = &shared.audit {
                let header = request.header();
                let identity = match &signed_in {
                    Some(identity) => identity.audit_name(),
                    None => peer.caller.identity(),
                };
                if let Some(evicted) =
                    peer.audit
                        .open(header, request.body(), &identity, &peer.source)
                {
                    log.record(evicted).await;
                }
            }
            let refusal = auth_refusal(shared, &request, peer.caller, signed_in.as_ref())
                .or_else(|| request_refusal(shared, &request, peer.caller, signed_in.as_ref()));
            if let Some(refusal) = refusal {
                let _ = sender.try_send(error_frame(request.header(), &refusal));
                continue;
            }
            handle(shared, request, sender, peer.caller);
        }
        if buffer.capacity() - buffer.len() < 16 * 1024 {
            buffer.reserve(64 * 1024);
        }
        match read.read_buf(&mut buffer).await {
            Ok(0) if buffer.is_empty() => return Ok(()),
            Ok(0) => {
                // Closed (or half-closed) in the middle of a frame.
                let needed = check_header(&buffer, CLIENT_FRAME_SIZE_MAX)
                    .map_or(HEADER_SIZE, |(_, size)| size);
                let error = FrameError::Truncated {
                    needed,
                    available: buffer.len(),
                };
                return Err(refuse(sender, &buffer, &error));
            }
            Ok(_) => {}
            // A TLS client gone without its close_notify, between frames:
            // as plain a close as a TCP FIN.
            Err(error)
                if error.kind() == std::io::ErrorKind::UnexpectedEof && buffer.is_empty() =>
            {
                return Ok(());
            }
            Err(error) => return Err(format!("read failed: {error}")),
        }
    }
}

/// Queues the error reply `error` deserves, if any (see [`refusal`]), and
/// returns the reason to log. `front` holds the rejected frame's first bytes.
fn refuse(sender: &ConnectionSender, front: &[u8], error: &FrameError) -> String {
    if let Some(frame) = refusal(front, error) {
        // The writer sends it before the connection closes.
        let _ = sender.try_send(frame);
    }
    format!("malformed frame: {error}")
}

/// The error reply to a rejected frame starting with `front`: only when
/// its header is an intact `Request` header (checksum, prefix and fields
/// valid), so the reply names a real client and request number. Random
/// bytes, a broken header checksum, an unknown command byte or another
/// command get no reply: there is no request to answer.
fn refusal(front: &[u8], error: &FrameError) -> Option<Bytes> {
    let bytes = front.get(..HEADER_SIZE)?;
    let header = RequestHeader::read_from_bytes(bytes).ok()?;
    header.validate_header().ok()?;
    let body = match error {
        FrameError::TooLarge { size, max } => ErrorBody::TooLarge {
            size: u64::from(*size),
            max: u64::from(*max),
        },
        other => ErrorBody::message(
            ResultCode::InvalidRequest,
            format!("malformed request frame: {other}"),
        ),
    };
    Some(error_frame(&header, &body))
}

/// Answers or routes one request.
/// Holds a produce (and with it the connection's reading) while its group's
/// shard already holds [`SHARD_REQUEST_BYTES_ADMIT`](crate::shard::SHARD_REQUEST_BYTES_ADMIT) of client requests, or
/// the bus queues to its group's backups are too full to take another
/// prepare (see [`Shared::produce_congested`]): the producer is slowed by
/// TCP instead of queueing seconds of work ahead of the peers' frames. Gives
/// up after [`ADMIT_WAIT_MAX`]; the produce is then answered `Busy`.
async fn wait_for_room(shared: &Shared, request: &Msg<RequestHeader>) -> Result<(), ()> {
    let header = request.header();
    if header.operation() != Operation::Produce {
        return Ok(());
    }
    let group = header.prefix.group.get();
    let started = tokio::time::Instant::now();
    while shared.requests_backed_up(group) || shared.produce_congested(group) {
        if started.elapsed() >= ADMIT_WAIT_MAX {
            return Err(());
        }
        tokio::time::sleep(ADMIT_POLL).await;
    }
    Ok(())
}

fn handle(
    shared: &Arc<Shared>,
    request: Msg<RequestHeader>,
    sender: &ConnectionSender,
    caller: Caller,
) {
    let header = *request.header();
    let answer = |frame: Bytes| {
        let _ = sender.try_send(frame);
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
    if is_node_internal(&request) && !caller.is_node() {
        metrics::permission_denied(operation);
        let message = format!("{operation:?} is accepted only from the cluster's nodes");
        let error = ErrorBody::message(ResultCode::PermissionDenied, message);
        return answer(error_frame(&header, &error));
    }
    shared.route_client(header.client.get(), sender);
    let group = header.prefix.group.get();
    let local = matches!(
        operation,
        Operation::Metadata
            | Operation::ClusterStatus
            | Operation::Attention
            | Operation::AcceptLoss
            | Operation::DescribeGroups
            | Operation::ListUsers
            | Operation::Authenticate
    );
    let coordinated = operation == Operation::Heartbeat;
    if (local || coordinated || operation.is_metadata()) != (group == 0) {
        let message = if group == 0 {
            format!("{operation:?} needs a partition's group id, not 0")
        } else {
            format!("{operation:?} goes to group 0 (the metadata plane)")
        };
        let error = ErrorBody::message(ResultCode::InvalidRequest, message);
        return answer(error_frame(&header, &error));
    }
    if let Some(check) = crate::guard::Check::of(&request) {
        return check_then_route(Arc::clone(shared), check, request, sender.clone());
    }
    match operation {
        Operation::Metadata => answer(metadata_reply(shared, &request)),
        Operation::DescribeGroups => answer(describe_groups_reply(shared, &request)),
        // Signed in by the connection's reader before it gets here.
        Operation::Authenticate => answer(reply_frame(&header, ResultCode::Ok, Bytes::new())),
        Operation::ListUsers => {
            let users = shared.catalog().user_list();
            answer(reply_frame(
                &header,
                ResultCode::Ok,
                Bytes::from(users.to_vec()),
            ));
        }
        Operation::ClusterStatus => {
            let reply = ClusterStatusReply {
                node: shared.config.node,
                nodes: nodes(shared),
                groups: shared.views().into_iter().map(|view| view.status).collect(),
            };
            answer(reply_frame(
                &header,
                ResultCode::Ok,
                Bytes::from(reply.to_vec()),
            ));
        }
        Operation::Attention => {
            let mut entries: Vec<AttentionEntry> = shared
                .views()
                .into_iter()
                .filter_map(|view| view.attention)
                .collect();
            entries.extend(disk_full_attention(shared));
            let reply = AttentionReply { entries };
            answer(reply_frame(
                &header,
                ResultCode::Ok,
                Bytes::from(reply.to_vec()),
            ));
        }
        Operation::AcceptLoss => match AcceptLoss::from_bytes(request.body()) {
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
        },
        _ => route(shared, group, Input::Request(request), &header, answer),
    }
}

/// The node's own attention entry while its data disk is full (group 0
/// stands for the node).
fn disk_full_attention(shared: &Shared) -> Option<AttentionEntry> {
    if !shared.disk.is_full() {
        return None;
    }
    let (free, reserve) = shared.disk.reading();
    Some(AttentionEntry {
        group: 0,
        stream: String::new(),
        topic: String::new(),
        partition: 0,
        view: 0,
        reason: AttentionReason::DiskFull,
        awaited: Vec::new(),
        detail: format!(
            "node {}: the data disk at {} has {free} bytes free, below the reserve of {reserve}; \
             produces are refused until space is freed",
            shared.config.node,
            shared.config.data_dir.display()
        ),
    })
}

/// Proposes a partition move once the node's safety check passes; answers
/// `Refused` (nothing proposed) when it does not. The check asks the
/// cluster, so it runs beside the connection's reading.
fn check_then_route(
    shared: Arc<Shared>,
    check: crate::guard::Check,
    request: Msg<RequestHeader>,
    sender: ConnectionSender,
) {
    tokio::spawn(async move {
        let header = *request.header();
        let answer = |frame: Bytes| {
            let _ = sender.try_send(frame);
        };
        match crate::guard::refusal(&shared, &check).await {
            Some(message) => {
                metrics::refused_unsafe(header.operation());
                tracing::warn!(?check, message, "guard: refused a partition move");
                let error = ErrorBody::message(ResultCode::Refused, message);
                answer(error_frame(&header, &error));
            }
            None => route(&shared, 0, Input::Request(request), &header, answer),
        }
    });
}

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

fn nodes(shared: &Shared) -> Vec<NodeInfo> {
    shared
        .config
        .peers
        .iter()
        .map(|peer| NodeInfo {
            id: peer.id,
            replica_address: peer.replica_address.clone(),
            client_address: peer.client_address.clone(),
            reachable: shared.reachable(peer.id),
        })
        .collect()
}

/// Answers Metadata from the catalog this node has applied, but only as far
/// as it is true: nothing while the metadata replica has not caught up since
/// the node started (`NotReady`: the client asks another node), and no
/// "unknown stream/topic" unless the catalog is current.
/// Consumer groups as this node's catalog holds them (refused while it loads).
fn describe_groups_reply(shared: &Shared, request: &Msg<RequestHeader>) -> Bytes {
    let header = request.header();
    let query = match DescribeGroups::from_bytes(request.body()) {
        Ok(query) => query,
        Err(error) => {
            let error = ErrorBody::message(ResultCode::InvalidRequest, error.to_string());
            return error_frame(header, &error);
        }
    };
    if shared.catalog_freshness() == CatalogFreshness::Loading {
        return error_frame(header, &not_ready(shared, "is still loading its catalog"));
    }
    let catalog = shared.catalog();
    let reply = catalog.describe_groups(&query.group);
    reply_frame_as_of(
        header,
        ResultCode::Ok,
        Bytes::from(reply.to_vec()),
        catalog.applied_op,
    )
}

fn metadata_reply(shared: &Shared, request: &Msg<RequestHeader>) -> Bytes {
    let header = request.header();
    let query = match MetadataRequest::from_bytes(request.body()) {
        Ok(query) => query,
        Err(error) => {
            let error = ErrorBody::message(ResultCode::InvalidRequest, error.to_string());
            return error_frame(header, &error);
        }
    };
    let freshness = shared.catalog_freshness();
    let catalog = shared.catalog();
    // Every answer says which metadata op it reflects, errors included.
    let as_of = catalog.applied_op;
    let error_frame = |header: &RequestHeader, error: &ErrorBody| {
        reply_frame_as_of(header, error.code(), Bytes::from(error.to_vec()), as_of)
    };
    if freshness == CatalogFreshness::Loading {
        return error_frame(header, &not_ready(shared, "is still loading its catalog"));
    }
    let views = |group: u64| shared.view_of(group).unwrap_or(0);
    let mut topics = Vec::new();
    for (stream, stream_topics) in &catalog.streams {
        if query.stream.as_ref().is_some_and(|wanted| wanted != stream) {
            continue;
        }
        for topic in stream_topics.keys() {
            if query.topic.as_ref().is_some_and(|wanted| wanted != topic) {
                continue;
            }
            if let Some(info) = catalog.topic_info(stream, topic, &views) {
                topics.push(info);
            }
        }
    }
    if let Some(stream) = &query.stream {
        let unknown = if !catalog.streams.contains_key(stream) {
            Some(ErrorBody::message(
                ResultCode::UnknownStream,
                format!("no stream named {stream}"),
            ))
        } else if let Some(topic) = &query.topic
            && topics.is_empty()
        {
            Some(ErrorBody::message(
                ResultCode::UnknownTopic,
                format!("no topic named {topic} in stream {stream}"),
            ))
        } else {
            None
        };
        if let Some(unknown) = unknown {
            if freshness != CatalogFreshness::Current {
                let why = "is not caught up with the metadata plane, so it cannot say a name \
                           does not exist";
                return error_frame(header, &not_ready(shared, why));
            }
            return error_frame(header, &unknown);
        }
    }
    let reply = MetadataReply {
        nodes: nodes(shared),
        streams: catalog.streams.keys().cloned().collect(),
        topics,
        failover_ms: failover_ms(shared),
    };
    reply_frame_as_of(header, ResultCode::Ok, Bytes::from(reply.to_vec()), as_of)
}

/// The `NotReady` answer: this node `why`; another node may know.
fn not_ready(shared: &Shared, why: &str) -> ErrorBody {
    let node = shared.config.node;
    ErrorBody::message(
        ResultCode::NotReady,
        format!("node {node} {why}: ask another node"),
    )
}

/// How long a silent primary takes to be replaced: its backups wait the
/// primary timeout, then the view change may take its own timeout.
fn failover_ms(shared: &Shared) -> u32 {
    let timeouts = strand_consensus::Timeouts::default();
    let ticks = timeouts.primary_ticks + timeouts.view_change_ticks;
    u32::try_from(ticks.saturating_mul(shared.config.tick_ms)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bytes::BytesMut;
    use strand_partition::ReadHandles;
    use strand_wire::{FrameDecoder, ViewId};

    use super::*;
    use crate::config::loopback_test_config;

    fn shared() -> Shared {
        let config = loopback_test_config(1);
        Shared::new(config, BTreeMap::new(), ReadHandles::new(16), 1)
    }

    /// Asks `shared` for metadata (of `stream`, if given); the answer's
    /// result code and body.
    fn ask(shared: &Shared, stream: Option<&str>) -> (ResultCode, Bytes) {
        let query = MetadataRequest {
            stream: stream.map(str::to_owned),
            topic: None,
        };
        let mut header = RequestHeader::new(0, 0, ViewId::ZERO, 0);
        header.client.set(5);
        header.request.set(1);
        header.operation = Operation::Metadata as u8;
        let request = Msg::new(header, Bytes::from(query.to_vec()));
        let mut frame = BytesMut::from(&metadata_reply(shared, &request)[..]);
        let decoded = FrameDecoder::new(CLIENT_FRAME_SIZE_MAX)
            .decode(&mut frame)
            .expect("a valid frame")
            .expect("a whole frame");
        let Message::Reply(reply) = decoded else {
            panic!("not a reply");
        };
        (reply.header().result(), reply.body().clone())
    }

    #[test]
    fn a_node_whose_catalog_never_caught_up_answers_not_ready() {
        let shared = shared();
        assert_eq!(ask(&shared, None).0, ResultCode::NotReady);
        assert_eq!(ask(&shared, Some("s")).0, ResultCode::NotReady);
        shared.set_catalog_current(false);
        assert_eq!(ask(&shared, None).0, ResultCode::NotReady, "still loading");
    }

    #[test]
    fn only_a_current_catalog_says_a_name_is_unknown() {
        let shared = shared();
        shared.set_catalog_current(true);
        assert_eq!(ask(&shared, Some("s")).0, ResultCode::UnknownStream);
        let (code, body) = ask(&shared, None);
        assert_eq!(code, ResultCode::Ok);
        let metadata = MetadataReply::from_bytes(&body).expect("a metadata reply");
        assert_eq!(metadata.failover_ms, 700, "(30 + 40 ticks) of 10 ms");

        shared.set_catalog_current(false);
        assert_eq!(shared.catalog_freshness(), CatalogFreshness::Behind);
        assert_eq!(ask(&shared, Some("s")).0, ResultCode::NotReady);
        assert_eq!(ask(&shared, None).0, ResultCode::Ok, "what it has is true");
    }
}
