//! The replica bus: one TCP connection per pair of nodes, carrying every
//! group's consensus frames both ways.
//!
//! The node with the lower id dials, with backoff, and opens with a `Ping`
//! naming itself; the higher id accepts and checks that ping (cluster, a
//! known lower node) before using the connection. With TLS
//! ([`crate::net::tls`]) both sides first present node certificates of the
//! cluster's CA: the dialer's must name the node its ping claims, the
//! acceptor's the node dialed. A connection that fails any check is closed
//! and counted; it never replaces the peer's current one. Each peer has one
//! outbound queue ([`crate::net::peer_queue`], bounded in entries and
//! bytes): a group's actor never waits on the network, a shard hands its
//! groups' frames to a peer once per turn ([`crate::net::outbox`]), and a
//! batch that finds the queue full is dropped whole (consensus
//! retransmits). A writer task drains the queue with vectored writes of
//! many frames at once ([`crate::net::frame_writer`]); a reader task decodes
//! frames and hands each to its group's actor, after checking that the
//! frame's replica index is the connected node's place in that group (a
//! peer cannot speak for another; a prepare, relayed verbatim in repair,
//! names its author and only needs a sender in the group). Any malformed
//! frame, or a close in the middle of a frame, closes the connection and is
//! counted; the bus has no error reply. Node-level liveness over the bus is
//! [`crate::net::liveness`]; the requests nodes make of each other, and
//! their answers, travel as `Request` and `Reply` frames
//! ([`crate::net::node_calls`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use strand_wire::{FrameDecoder, Message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use crate::metrics;
use crate::net::frame_writer::{gather_from_peer_queue, write_frames};
use crate::net::node_calls;
use crate::net::peer_queue::PeerReceiver;
use crate::net::ping::{ping_frame, take_vouching};
use crate::net::tls::{NodeTls, ReadStream, WriteStream, certificate_names_node, split_plain};
use crate::refused::Refused;
use crate::runtime::input::Input;
use crate::shared::{GroupHandle, Shared};

/// Largest frame accepted on the bus (a prepare of the largest batch, a
/// state-transfer chunk).
pub const BUS_FRAME_SIZE_MAX: u32 = 16 * 1024 * 1024;

/// How long a peer's reading is held for its group's shard at most, per
/// frame.
const PEER_BACKLOG_WAIT: Duration = Duration::from_millis(100);

/// How long an accepted connection may take to identify itself.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Reconnect backoff bounds.
const BACKOFF_MIN: Duration = Duration::from_millis(20);
const BACKOFF_MAX: Duration = Duration::from_millis(1000);

/// A connection that lived at least this long resets the backoff; one lost
/// sooner (a listener that accepts and closes: a wrong process on the port,
/// a peer that rejects us) counts as a failed dial, so a flapping link
/// redials at most once per [`BACKOFF_MAX`], not in a busy loop.
const STABLE_CONNECTION: Duration = Duration::from_secs(1);

/// A connection handed from the acceptor to a peer's writer.
struct Accepted {
    write: WriteStream,
    reader_done: oneshot::Receiver<()>,
}

/// Runs the bus: a writer per peer, and the acceptor.
pub async fn run(
    shared: Arc<Shared>,
    listener: TcpListener,
    receivers: BTreeMap<u32, PeerReceiver>,
) {
    let me = shared.config.node;
    let mut accepted_to = BTreeMap::new();
    for (peer, queue) in receivers {
        let (accepted_sender, accepted_receiver) = mpsc::channel(4);
        if peer > me {
            tokio::spawn(dial_and_write(Arc::clone(&shared), peer, queue));
        } else {
            accepted_to.insert(peer, accepted_sender);
            tokio::spawn(accept_and_write(
                Arc::clone(&shared),
                peer,
                queue,
                accepted_receiver,
            ));
        }
    }
    let accepted_to = Arc::new(accepted_to);
    loop {
        let (stream, address) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "bus: accept failed");
                tokio::time::sleep(BACKOFF_MIN).await;
                continue;
            }
        };
        let shared = Arc::clone(&shared);
        let accepted_to = Arc::clone(&accepted_to);
        tokio::spawn(async move {
            match handshake(&shared, stream).await {
                Ok((node, read, write, received)) => {
                    let Some(handoff) = accepted_to.get(&node) else {
                        tracing::warn!(node, %address, "bus: node {node} should not dial this node");
                        return;
                    };
                    let (done_sender, reader_done) = oneshot::channel();
                    tokio::spawn(read_frames(
                        Arc::clone(&shared),
                        node,
                        read,
                        received,
                        done_sender,
                    ));
                    let _ = handoff.send(Accepted { write, reader_done }).await;
                }
                Err(reason) => {
                    metrics::replica_frame_rejected();
                    tracing::warn!(%address, reason, "bus: refused a connection");
                }
            }
        });
    }
}

/// Runs the TLS handshake (when configured), then reads and checks the
/// opening ping of an accepted connection: the node it names must be a
/// lower peer, and the one the certificate names.
async fn handshake(
    shared: &Shared,
    stream: TcpStream,
) -> Result<(u32, ReadStream, WriteStream, BytesMut), String> {
    let _ = stream.set_nodelay(true);
    tokio::time::timeout(HANDSHAKE_TIMEOUT, identify(shared, stream))
        .await
        .map_err(|_| "did not identify itself in time".to_owned())?
}

async fn identify(
    shared: &Shared,
    stream: TcpStream,
) -> Result<(u32, ReadStream, WriteStream, BytesMut), String> {
    let (mut read, write, certificate) = match &shared.tls {
        Some(tls) => {
            let (read, write, certificate) = tls
                .accept_peer(stream)
                .await
                .map_err(|error| format!("TLS handshake failed: {error}"))?;
            (read, write, Some(certificate))
        }
        None => {
            let (read, write) = split_plain(stream);
            (read, write, None)
        }
    };
    let decoder = FrameDecoder::new(BUS_FRAME_SIZE_MAX);
    let mut buffer = BytesMut::with_capacity(4096);
    let first = async {
        loop {
            if let Some(message) = decoder
                .decode(&mut buffer)
                .map_err(|error| error.to_string())?
            {
                return Ok::<Message, String>(message);
            }
            let read_bytes = read
                .read_buf(&mut buffer)
                .await
                .map_err(|error| error.to_string())?;
            if read_bytes == 0 {
                return Err("closed before identifying itself".to_owned());
            }
        }
    }
    .await?;
    let Message::Ping(ping) = first else {
        return Err(format!("opened with {:?}, not a ping", first.command()));
    };
    let header = ping.header();
    if header.prefix.cluster.get() != shared.config.cluster {
        return Err(format!(
            "cluster {} is not this cluster ({})",
            header.prefix.cluster.get(),
            shared.config.cluster
        ));
    }
    let node = header.node.get();
    if node >= shared.config.node || shared.config.peer(node).is_none() {
        return Err(format!("node {node} is not a lower peer of this node"));
    }
    if let Some(certificate) = certificate
        && !certificate_names_node(&certificate, node)
    {
        let named = NodeTls::node_of(&certificate, shared.config.peers.iter().map(|peer| peer.id));
        return Err(format!(
            "claimed to be node {node} with a certificate of {}",
            named.map_or("no node".to_owned(), |named| format!("node {named}"))
        ));
    }
    // Frames the dialer sent right behind its ping are the peer's first
    // traffic: they go to the frame reader with the connection.
    Ok((node, read, write, buffer))
}

/// The dialing side: connect (with backoff), identify, drain the queue.
async fn dial_and_write(shared: Arc<Shared>, peer: u32, mut queue: PeerReceiver) {
    let Some(address) = shared
        .config
        .peer(peer)
        .map(|peer| peer.replica_address.clone())
    else {
        return;
    };
    let mut backoff = BACKOFF_MIN;
    loop {
        let stream = match TcpStream::connect(&address).await {
            Ok(stream) => stream,
            Err(error) => {
                tracing::debug!(peer, %error, "bus: dial failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (read, mut write) = match &shared.tls {
            Some(tls) => match tls.dial_peer(peer, &address, stream).await {
                Ok(halves) => halves,
                Err(error) => {
                    metrics::replica_frame_rejected();
                    tracing::warn!(peer, %address, %error, "bus: TLS handshake failed");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
            },
            None => split_plain(stream),
        };
        let ping = ping_frame(&shared);
        let greeted = async {
            write.write_all(&ping).await?;
            write.flush().await
        };
        if let Err(error) = greeted.await {
            tracing::debug!(peer, %error, "bus: handshake write failed");
            tokio::time::sleep(backoff).await;
            continue;
        }
        tracing::info!(peer, %address, "bus: connected");
        let connected_at = tokio::time::Instant::now();
        let (done_sender, mut reader_done) = oneshot::channel();
        tokio::spawn(read_frames(
            Arc::clone(&shared),
            peer,
            read,
            BytesMut::new(),
            done_sender,
        ));
        shared.set_reachable(peer, true);
        drain(&mut queue, &mut write, &mut reader_done, None).await;
        shared.set_reachable(peer, false);
        tracing::info!(peer, "bus: connection lost; redialing");
        if connected_at.elapsed() >= STABLE_CONNECTION {
            backoff = BACKOFF_MIN;
        } else {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }
}

/// The accepting side: wait for the peer to dial, drain the queue into the
/// newest connection.
async fn accept_and_write(
    shared: Arc<Shared>,
    peer: u32,
    mut queue: PeerReceiver,
    mut accepted: mpsc::Receiver<Accepted>,
) {
    let mut next = accepted.recv().await;
    while let Some(Accepted {
        mut write,
        mut reader_done,
    }) = next.take()
    {
        tracing::info!(peer, "bus: peer connected");
        shared.set_reachable(peer, true);
        next = drain(
            &mut queue,
            &mut write,
            &mut reader_done,
            Some(&mut accepted),
        )
        .await;
        shared.set_reachable(peer, false);
        if next.is_none() {
            next = accepted.recv().await;
        }
    }
}

/// Writes queued frames until the connection fails, its reader ends, or a
/// newer connection arrives (returned).
async fn drain(
    queue: &mut PeerReceiver,
    write: &mut WriteStream,
    reader_done: &mut oneshot::Receiver<()>,
    mut newer: Option<&mut mpsc::Receiver<Accepted>>,
) -> Option<Accepted> {
    let mut frames: VecDeque<Bytes> = VecDeque::new();
    loop {
        tokio::select! {
            chunks = queue.recv() => {
                frames.extend(chunks?);
                gather_from_peer_queue(queue, &mut frames);
                // A write that blocks (a peer that stopped reading) must
                // not keep this connection alive past its reader's end or a
                // newer connection: the abandoned stream may end mid-frame,
                // which the peer counts and redials from.
                tokio::select! {
                    written = write_frames(write, &mut frames) => {
                        if let Err(error) = written {
                            tracing::debug!(%error, "bus: write failed");
                            return None;
                        }
                    }
                    _ = &mut *reader_done => return None,
                    accepted = newer_connection(newer.as_deref_mut()) => return accepted,
                }
            }
            _ = &mut *reader_done => return None,
            accepted = newer_connection(newer.as_deref_mut()) => return accepted,
        }
    }
}

/// The next connection accepted for this peer; never, on the dialing side.
async fn newer_connection(newer: Option<&mut mpsc::Receiver<Accepted>>) -> Option<Accepted> {
    match newer {
        Some(newer) => newer.recv().await,
        None => std::future::pending().await,
    }
}

/// Decodes frames from a peer (first those in `buffer`, read behind its
/// handshake) and hands each to its group.
async fn read_frames(
    shared: Arc<Shared>,
    node: u32,
    mut read: ReadStream,
    mut buffer: BytesMut,
    done: oneshot::Sender<()>,
) {
    let decoder = FrameDecoder::new(BUS_FRAME_SIZE_MAX);
    buffer.reserve(256 * 1024);
    'connection: loop {
        loop {
            match decoder.decode(&mut buffer) {
                Ok(Some(message)) => {
                    let group = message.prefix().group.get();
                    match dispatch(&shared, node, message) {
                        Ok(Dispatched::ShardBackedUp) => wait_for_shard(&shared, node, group).await,
                        Ok(Dispatched::Taken) => {}
                        Err(reason) => {
                            metrics::replica_frame_rejected();
                            tracing::warn!(node, reason, "bus: closing the connection");
                            break 'connection;
                        }
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    metrics::replica_frame_rejected();
                    tracing::warn!(node, %error, "bus: malformed frame; closing the connection");
                    break 'connection;
                }
            }
        }
        if buffer.capacity() - buffer.len() < 64 * 1024 {
            buffer.reserve(256 * 1024);
        }
        match read.read_buf(&mut buffer).await {
            Ok(0) if buffer.is_empty() => break,
            Ok(0) => {
                metrics::replica_frame_rejected();
                tracing::warn!(
                    node,
                    buffered = buffer.len(),
                    "bus: connection closed in the middle of a frame"
                );
                break;
            }
            Ok(_) => shared.heard_from(node),
            Err(error) => {
                tracing::debug!(node, %error, "bus: read failed");
                break;
            }
        }
    }
    let _ = done.send(());
}

/// What became of a frame the bus handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dispatched {
    /// Queued, dropped or refused: read on.
    Taken,
    /// Queued to a shard that holds more peer frames than it should: hold
    /// the peer's reading ([`wait_for_shard`]).
    ShardBackedUp,
}

/// Hands one frame to its group's actor, or a node call's request or
/// answer to [`node_calls`]. An error closes the connection: a frame that
/// cannot be right from this peer (another cluster, a request nodes never
/// ask each other, a replica index that belongs to another node). A frame from a
/// node that is not a replica of the group here is dropped and counted
/// instead: peers' catalogs may differ for a moment (a group being placed or
/// changing its replicas), and the connection carries other groups' traffic.
/// The group is looked up once per frame, under the registry's read lock.
fn dispatch(shared: &Shared, node: u32, message: Message) -> Result<Dispatched, String> {
    let command = message.command();
    match message {
        Message::Ping(ping) => {
            take_vouching(shared, node, ping.body());
            return Ok(Dispatched::Taken);
        }
        Message::Pong(_) => return Ok(Dispatched::Taken),
        _ => {}
    }
    let prefix = *message.prefix();
    if prefix.cluster.get() != shared.config.cluster {
        return Err(format!("frame of cluster {}", prefix.cluster.get()));
    }
    let message = match message {
        Message::Request(request) => {
            return node_calls::serve(shared, node, request).map(|()| Dispatched::Taken);
        }
        Message::Reply(reply) => {
            shared.node_calls.answered(reply);
            return Ok(Dispatched::Taken);
        }
        message => message,
    };
    let group = prefix.group.get();
    // A prepare is relayed verbatim (repair: any replica holding it serves
    // it), so its replica index names its author, the primary that prepared
    // it; its checksum chain, not its sender, vouches for it. The sender must
    // still be one of the group's replicas. Every other frame speaks for its
    // sender.
    let speaks_for_sender = !matches!(message, Message::Prepare(_));
    let hand_on = |handle: &GroupHandle| {
        if !handle.has_node(node) {
            tracing::debug!(node, group, command = ?command,
                "bus: frame from a node that is not a replica of the group here; dropped");
            metrics::replica_frame_refused();
            return Ok(Dispatched::Taken);
        }
        let as_itself = handle.node_at(prefix.replica) == Some(node);
        if speaks_for_sender && !as_itself {
            return Err(format!(
                "node {node} spoke as replica {} of group {group}",
                prefix.replica
            ));
        }
        match handle.inbox.try_send(Input::Peer(message)) {
            Ok(()) | Err(Refused::Gone) => {}
            Err(Refused::Full) => metrics::bus_frame_dropped(),
        }
        Ok(match handle.inbox.peers_backed_up() {
            true => Dispatched::ShardBackedUp,
            false => Dispatched::Taken,
        })
    };
    // Not (yet) hosted here: the metadata commit that places it may not
    // have arrived. The sender retransmits.
    shared
        .with_group(group, hand_on)
        .unwrap_or(Ok(Dispatched::Taken))
}

/// Holds this peer's reading while the shard of the group it last sent to is
/// backed up with peer frames
/// ([`SHARD_PEER_BYTES_ADMIT`](crate::runtime::inbox::SHARD_PEER_BYTES_ADMIT)): TCP then pushes
/// back on the peer's writer, its bus queue to this node fills, and its
/// primaries stop admitting produces, instead of this shard's inbox growing
/// past what its backups' timers can wait for. Waits [`PEER_BACKLOG_WAIT`] at
/// most per frame; the peer counts as heard meanwhile (the silence is this
/// node's own).
async fn wait_for_shard(shared: &Shared, node: u32, group: u64) {
    let started = tokio::time::Instant::now();
    while shared.peer_frames_backed_up(group) && started.elapsed() < PEER_BACKLOG_WAIT {
        shared.heard_from(node);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
