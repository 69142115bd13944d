//! The client port: accepts client connections, decodes request frames,
//! answers what the node knows itself (routing, status, attention), and hands
//! everything else to the group it names.
//!
//! With TLS ([`crate::net::tls`]) every connection runs the handshake first; a
//! connection that presents a node certificate of the cluster is that node,
//! and only such a connection may send node-internal operations
//! (`EpochStarted`, a `LeaveConsumerGroup` marked expired): anyone else gets
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
use strand_wire::ops::{AcceptLoss, ErrorBody};
use strand_wire::{
    Body, CommandHeader, FrameDecoder, FrameError, HEADER_SIZE, Message, Msg, Operation,
    RequestHeader, ResultCode, Route,
};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use zerocopy::FromBytes;

use crate::metrics;
use crate::net::bus::{gather, write_frames};
use crate::net::connection::ConnectionSender;
use crate::net::connection::{ConnectionReceiver, TooMany};
use crate::net::local_answers::local_answer;
use crate::net::replies::{error_frame, reply_frame};
use crate::net::tls::{NodeTls, ReadStream, WriteStream, split_plain};
use crate::refused::Refused;
use crate::runtime::input::Input;
use crate::shared::Shared;

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
    /// Whether this caller proved with a node certificate that it is a
    /// node of this cluster.
    fn is_node_cert(self) -> bool {
        matches!(self, Caller::Node(_))
    }

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
    /// Its admin requests awaiting replies (see [`crate::security::audit`]).
    audit: crate::security::audit::Pending,
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

/// Largest frame a connection may send before it signs in, where the
/// cluster requires signing in: a sign-in is small, and an anonymous
/// client must not make the node hold megabytes.
pub const SIGN_IN_FRAME_SIZE_MAX: u32 = 64 * 1024;

/// Accepts client connections forever, within the node's bounds on them.
pub async fn run(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, address)) => {
                let admitted = match shared.connections.admit(address.ip()) {
                    Ok(admitted) => admitted,
                    Err(too_many) => {
                        refuse_connection(&shared, address, too_many);
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    let _admitted = admitted;
                    let (read, write, caller, certificate_user) = match open(&shared, stream).await
                    {
                        Ok(opened) => opened,
                        Err(reason) => {
                            metrics::client_frame_rejected();
                            tracing::warn!(%address, reason, "client: refused a connection");
                            return;
                        }
                    };
                    let (sender, receiver) =
                        crate::net::connection::reply_queue(CONNECTION_QUEUE_CAPACITY);
                    let peer = Peer {
                        caller,
                        certificate_user,
                        source: address.to_string(),
                        ip: address.ip().to_canonical(),
                        audit: crate::security::audit::Pending::default(),
                    };
                    let audit = shared.audit.clone().map(|log| (log, peer.audit.clone()));
                    sender.set_user(peer.certificate_user.clone().map(|(user, _)| user));
                    tokio::spawn(write_replies(Arc::clone(&shared), write, receiver, audit));
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

/// Closes a connection over a bound at once (a warning at most once a
/// second per node, a metric always).
fn refuse_connection(shared: &Shared, address: std::net::SocketAddr, too_many: TooMany) {
    let reason = match too_many {
        TooMany::Node => "too_many_on_node",
        TooMany::Address => "too_many_from_address",
    };
    metrics::client_connection_refused(reason);
    static WARNED_AT_SECS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    if WARNED_AT_SECS.swap(now_secs, std::sync::atomic::Ordering::Relaxed) != now_secs {
        tracing::warn!(
            %address,
            reason,
            open = shared.connections.open(),
            "client: refused a connection over the node's bounds ([limits])"
        );
    }
}

/// Signs the connection in (or refuses, audits the refusal, and closes
/// the connection after [`crate::security::auth::SIGN_IN_FAILURES_MAX`] refusals).
async fn sign_in(
    shared: &Arc<Shared>,
    request: &Msg<RequestHeader>,
    sender: &ConnectionSender,
    peer: &Peer,
    signed_in: &mut Option<crate::security::auth::Identity>,
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
fn request_refusal(
    shared: &Shared,
    request: &Msg<RequestHeader>,
    caller: Caller,
    signed_in: Option<&crate::security::auth::Identity>,
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
fn auth_refusal(
    shared: &Shared,
    request: &Msg<RequestHeader>,
    caller: Caller,
    signed_in: Option<&crate::security::auth::Identity>,
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
fn is_node_only(request: &Msg<RequestHeader>) -> bool {
    let operation = request.header().operation();
    operation.info().node_only
        || (operation == Operation::LeaveConsumerGroup
            && strand_wire::ops::LeaveConsumerGroup::from_bytes(request.body())
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
    let user = crate::net::tls::user_of(&certificate).map(|user| {
        let fingerprint = strand_wire::ops::certificate_fingerprint(certificate.as_ref());
        (user, fingerprint)
    });
    Ok((read, write, Caller::Client, user))
}

/// Writes a connection's replies; with an audit log, each reply that
/// answers an admin request closes its entry.
async fn write_replies(
    shared: Arc<Shared>,
    mut write: WriteStream,
    mut receiver: ConnectionReceiver,
    audit: Option<(
        crate::security::audit::AuditLog,
        crate::security::audit::Pending,
    )>,
) {
    let mut frames = VecDeque::new();
    while let Some(frame) = receiver.frames().recv().await {
        frames.push_back(frame);
        gather(receiver.frames(), &mut frames);
        let bytes: usize = frames.iter().map(Bytes::len).sum();
        charge_fetch_replies(&shared, &receiver, &frames);
        frames = frames
            .into_iter()
            .flat_map(|frame| {
                let (head, rest) = receiver.stamped(frame);
                std::iter::once(head).chain(rest)
            })
            .collect();
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
        receiver.written(bytes as u64);
    }
    if let Some((log, pending)) = &audit {
        for entry in pending.abandon() {
            log.record(entry).await;
        }
    }
}

/// A connection's reading state: who it signed in as, its failed
/// sign-ins, and when it last sent a request.
struct Reading {
    signed_in: Option<crate::security::auth::Identity>,
    failures: u32,
    opened: tokio::time::Instant,
    last_request: tokio::time::Instant,
}

impl Reading {
    /// Whether the connection must still sign in (the cluster requires it,
    /// and no certificate or sign-in said who it is).
    fn must_sign_in(&self, shared: &Shared, peer: &Peer) -> bool {
        shared.config.auth.required && self.signed_in.is_none() && !peer.caller.is_node_cert()
    }

    /// The largest frame it may send now.
    fn frame_size_max(&self, shared: &Shared, peer: &Peer) -> u32 {
        match self.must_sign_in(shared, peer) {
            true => SIGN_IN_FRAME_SIZE_MAX,
            false => CLIENT_FRAME_SIZE_MAX,
        }
    }

    /// When the connection is closed unless it sends something (signs in,
    /// when it must), and the reason then.
    fn deadline(&self, shared: &Shared, peer: &Peer) -> (tokio::time::Instant, &'static str) {
        let limits = &shared.config.limits;
        match self.must_sign_in(shared, peer) {
            true => (
                self.opened + Duration::from_millis(limits.sign_in_timeout_ms),
                "no_sign_in_in_time",
            ),
            false => (
                self.last_request + Duration::from_millis(limits.client_idle_timeout_ms),
                "idle",
            ),
        }
    }
}

/// Charges the fetch replies among `frames` to the connection's user's
/// fetch quota, if it has one: its next request waits off any debt.
fn charge_fetch_replies(shared: &Shared, receiver: &ConnectionReceiver, frames: &VecDeque<Bytes>) {
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
fn quota_delay(shared: &Shared, user: &str, request: &Msg<RequestHeader>) -> Duration {
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

/// Reads frames until the client closes (Ok) or sends something unusable,
/// stays silent past its deadline, or stops reading its replies for that
/// long (Err with the reason).
async fn read_requests(
    shared: &Arc<Shared>,
    mut read: ReadStream,
    sender: &ConnectionSender,
    peer: &Peer,
) -> Result<(), String> {
    let now = tokio::time::Instant::now();
    let mut reading = Reading {
        signed_in: peer.certificate_user.clone().map(|(user, fingerprint)| {
            crate::security::auth::Identity {
                user,
                proof: crate::security::auth::Proof::Certificate(fingerprint),
            }
        }),
        failures: 0,
        opened: now,
        last_request: now,
    };
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
            let decoder = FrameDecoder::new(reading.frame_size_max(shared, peer));
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
            reading.last_request = tokio::time::Instant::now();
            // Back-pressure: no more requests while the replies wait unread
            // (no timer unless they do).
            if sender.queued_bytes() > crate::net::connection::REPLY_BYTES_PAUSE {
                let (deadline, _) = reading.deadline(shared, peer);
                if tokio::time::timeout_at(deadline, sender.room())
                    .await
                    .is_err()
                {
                    metrics::client_connection_refused("idle");
                    return Err("its replies went unread past the idle timeout".to_owned());
                }
            }
            take_request(shared, request, sender, peer, &mut reading).await?;
        }
        if buffer.capacity() - buffer.len() < 16 * 1024 {
            buffer.reserve(64 * 1024);
        }
        let (deadline, reason) = reading.deadline(shared, peer);
        let Ok(read_result) = tokio::time::timeout_at(deadline, read.read_buf(&mut buffer)).await
        else {
            metrics::client_connection_refused(reason);
            return Err(format!("closed: {reason}"));
        };
        match read_result {
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

/// Takes one decoded request: held for room, checked, signed in, audited,
/// authorized, then handled.
async fn take_request(
    shared: &Arc<Shared>,
    request: Msg<RequestHeader>,
    sender: &ConnectionSender,
    peer: &Peer,
    reading: &mut Reading,
) -> Result<(), String> {
    if wait_for_room(shared, &request).await.is_err() {
        let error = ErrorBody::Busy {
            retry_after_ms: BUSY_RETRY_AFTER_MS,
        };
        let _ = sender.try_send(error_frame(request.header(), &error));
        return Ok(());
    }
    let operation = request.header().operation();
    if let Err(error) = strand_wire::ops::check_request(operation, request.body()) {
        metrics::request_body_invalid(operation);
        let message = format!("the {operation:?} body does not decode: {error}");
        let error = ErrorBody::message(ResultCode::InvalidRequest, message);
        let _ = sender.try_send(error_frame(request.header(), &error));
        return Ok(());
    }
    if operation.info().route == Route::SignIn {
        let Reading {
            signed_in,
            failures,
            ..
        } = reading;
        return sign_in(shared, &request, sender, peer, signed_in, failures).await;
    }
    if let Some(log) = &shared.audit {
        let header = request.header();
        let identity = match &reading.signed_in {
            Some(identity) => identity.audit_name(),
            None => peer.caller.identity(),
        };
        if let Some(evicted) = peer
            .audit
            .open(header, request.body(), &identity, &peer.source)
        {
            log.record(evicted).await;
        }
    }
    let signed_in = reading.signed_in.as_ref();
    let refusal = auth_refusal(shared, &request, peer.caller, signed_in)
        .or_else(|| request_refusal(shared, &request, peer.caller, signed_in));
    if let Some(refusal) = refusal {
        let _ = sender.try_send(error_frame(request.header(), &refusal));
        return Ok(());
    }
    if let Some(identity) = &reading.signed_in {
        let delay = quota_delay(shared, &identity.user, &request);
        if delay > Duration::ZERO {
            let header = request.header();
            let throttle_ms = u32::try_from(delay.as_millis()).unwrap_or(u32::MAX);
            sender.note_throttle(header.client.get(), header.request.get(), throttle_ms);
            tokio::time::sleep(delay).await;
        }
    }
    handle(shared, request, sender, peer.caller);
    Ok(())
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

/// Holds a produce (and with it the connection's reading) while its group's
/// shard already holds [`SHARD_REQUEST_BYTES_ADMIT`](crate::runtime::inbox::SHARD_REQUEST_BYTES_ADMIT) of client requests, or
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
fn handle(
    shared: &Arc<Shared>,
    request: Msg<RequestHeader>,
    sender: &ConnectionSender,
    caller: Caller,
) {
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
    if is_node_only(&request) && !caller.is_node() {
        metrics::permission_denied(operation);
        let message = format!("{operation:?} is accepted only from the cluster's nodes");
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
/// `Refused` (nothing proposed) when it does not. The check asks the
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
        match crate::metadata::guard::refusal(&shared, &check).await {
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
