//! The client port: accepts client connections within the node's bounds,
//! decodes request frames, holds produces while their group is backed up,
//! has security check each request ([`crate::security::request_checks`]),
//! and routes it by its operation ([`crate::net::routing`]): answered by the
//! node itself, or handed to the group it names.
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
//! connections are unaffected. A request the node cannot take (a full group inbox, shutdown) is answered
//! `Busy` or `Unavailable`, never dropped silently.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use strand_wire::message::check_header;
use strand_wire::ops::ErrorBody;
use strand_wire::{
    CommandHeader, FrameDecoder, FrameError, HEADER_SIZE, Message, Msg, Operation, RequestHeader,
    ResultCode, Route,
};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use zerocopy::FromBytes;

use crate::metrics;
use crate::net::connection::{ConnectionReceiver, ConnectionSender, TooMany};
use crate::net::frame_writer::{gather, write_frames};
use crate::net::replies::error_frame;
use crate::net::routing::handle;
use crate::net::tls::{NodeTls, ReadStream, WriteStream, split_plain};
use crate::security::caller::{Caller, Peer};
use crate::security::request_checks::{
    auth_refusal, charge_fetch_replies, quota_delay, request_refusal, sign_in,
};
use crate::shared::Shared;

/// How long a new connection may take over its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// The next connection `listener` takes within the node's bounds on
/// connections (one over them is closed at once and counted), with its
/// place among them; Nagle off. An accept that fails is logged as `what`'s
/// and retried.
pub(crate) async fn accept_within_bounds(
    shared: &Shared,
    listener: &TcpListener,
    what: &'static str,
) -> (
    TcpStream,
    std::net::SocketAddr,
    crate::net::connection::Admitted,
) {
    loop {
        match listener.accept().await {
            Ok((stream, address)) => match shared.connections.admit(address.ip()) {
                Ok(admitted) => {
                    let _ = stream.set_nodelay(true);
                    return (stream, address, admitted);
                }
                Err(too_many) => refuse_connection(shared, address, too_many),
            },
            Err(error) => {
                tracing::warn!(%error, what, "accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Accepts client connections forever, within the node's bounds on them.
pub async fn run(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        let (stream, address, admitted) = accept_within_bounds(&shared, &listener, "client").await;
        tokio::spawn(serve_connection(
            Arc::clone(&shared),
            stream,
            address,
            admitted,
        ));
    }
}

/// One client connection, from its handshake to its close.
async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    address: std::net::SocketAddr,
    admitted: crate::net::connection::Admitted,
) {
    let _admitted = admitted;
    let (read, write, caller, certificate_user) = match open(&shared, stream).await {
        Ok(opened) => opened,
        Err(reason) => {
            metrics::client_frame_rejected();
            tracing::warn!(%address, reason, "client: refused a connection");
            return;
        }
    };
    let (sender, receiver) = crate::net::connection::reply_queue(CONNECTION_QUEUE_CAPACITY);
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
}

/// Closes a connection over a bound at once (a warning at most once a
/// second per node, a metric always).
pub(crate) fn refuse_connection(shared: &Shared, address: std::net::SocketAddr, too_many: TooMany) {
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

/// Runs the TLS handshake when the port has TLS, and tells who called:
/// a node, or a client, with the user its certificate names if it
/// presented a user certificate.
pub(crate) async fn open(
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
    /// A connection's reading state as it opens: signed in from the start
    /// as the user its certificate names, if it presented one.
    fn new(peer: &Peer) -> Reading {
        let now = tokio::time::Instant::now();
        Reading {
            signed_in: peer.certificate_user.clone().map(|(user, fingerprint)| {
                crate::security::auth::Identity {
                    user,
                    proof: crate::security::auth::Proof::Certificate(fingerprint),
                }
            }),
            failures: 0,
            opened: now,
            last_request: now,
        }
    }

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

/// Reads frames until the client closes (Ok) or sends something unusable,
/// stays silent past its deadline, or stops reading its replies for that
/// long (Err with the reason).
async fn read_requests(
    shared: &Arc<Shared>,
    mut read: ReadStream,
    sender: &ConnectionSender,
    peer: &Peer,
) -> Result<(), String> {
    let mut reading = Reading::new(peer);
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    loop {
        take_buffered(shared, &mut buffer, sender, peer, &mut reading).await?;
        if buffer.capacity() - buffer.len() < 16 * 1024 {
            buffer.reserve(64 * 1024);
        }
        if !read_more(shared, &mut read, &mut buffer, sender, peer, &reading).await? {
            return Ok(());
        }
    }
}

/// Takes every whole request frame in `buffer`, in order: decoded within
/// the frame size the connection may send now, held while its replies wait
/// unread, then taken.
async fn take_buffered(
    shared: &Arc<Shared>,
    buffer: &mut BytesMut,
    sender: &ConnectionSender,
    peer: &Peer,
    reading: &mut Reading,
) -> Result<(), String> {
    // The header of the frame being decoded: a frame whose body fails is
    // already cut off the buffer, and its refusal needs the header.
    let mut front = [0u8; HEADER_SIZE];
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
            .decode(buffer)
            .map_err(|error| refuse(sender, header, &error))?
        else {
            return Ok(());
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
        take_request(shared, request, sender, peer, reading).await?;
    }
}

/// Reads more bytes into `buffer` before the connection's deadline: true
/// when some came, false when the client closed between frames, the reason
/// to close otherwise (silence, a close in the middle of a frame, a failed
/// read).
async fn read_more(
    shared: &Shared,
    read: &mut ReadStream,
    buffer: &mut BytesMut,
    sender: &ConnectionSender,
    peer: &Peer,
    reading: &Reading,
) -> Result<bool, String> {
    let (deadline, reason) = reading.deadline(shared, peer);
    let Ok(read_result) = tokio::time::timeout_at(deadline, read.read_buf(buffer)).await else {
        metrics::client_connection_refused(reason);
        return Err(format!("closed: {reason}"));
    };
    match read_result {
        Ok(0) if buffer.is_empty() => Ok(false),
        Ok(0) => {
            // Closed (or half-closed) in the middle of a frame.
            let needed =
                check_header(buffer, CLIENT_FRAME_SIZE_MAX).map_or(HEADER_SIZE, |(_, size)| size);
            let error = FrameError::Truncated {
                needed,
                available: buffer.len(),
            };
            Err(refuse(sender, buffer, &error))
        }
        Ok(_) => Ok(true),
        // A TLS client gone without its close_notify, between frames:
        // as plain a close as a TCP FIN.
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof && buffer.is_empty() => {
            Ok(false)
        }
        Err(error) => Err(format!("read failed: {error}")),
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
    handle(shared, request, sender);
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
pub(crate) async fn wait_for_room(shared: &Shared, request: &Msg<RequestHeader>) -> Result<(), ()> {
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
