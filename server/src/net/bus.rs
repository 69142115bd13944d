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
//! groups' frames to a peer once per turn ([`crate::net::outbox`]), and a batch
//! that finds the queue full is dropped whole (consensus retransmits). A writer task drains the queue with vectored
//! writes of many frames at once; a reader task decodes frames and hands
//! each to its group's actor, after checking that the frame's replica index
//! is the connected node's place in that group (a peer cannot speak for
//! another; a prepare, relayed verbatim in repair, names its author and only
//! needs a sender in the group). Any malformed frame, or a close in the middle of a frame,
//! closes the connection and is counted; the bus has no error reply.

use std::collections::{BTreeMap, VecDeque};
use std::io::IoSlice;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes, BytesMut};
use strand_wire::{CommandHeader, FrameDecoder, Message, Msg, PingHeader};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use crate::metrics;
use crate::net::peer_queue::PeerReceiver;
use crate::net::replies::frame_of;
use crate::net::tls::{NodeTls, ReadStream, WriteStream, certificate_names_node, split_plain};
use crate::refused::Refused;
use crate::runtime::inbox::LivenessNotifier;
use crate::runtime::input::Input;
use crate::shared::{GroupHandle, Shared};
use strand_consensus::Timeouts;

/// Largest frame accepted on the bus (a prepare of the largest batch, a
/// state-transfer chunk).
pub const BUS_FRAME_SIZE_MAX: u32 = 16 * 1024 * 1024;

/// Bytes gathered into one vectored write at most.
const WRITE_GATHER_BYTES_MAX: usize = 1024 * 1024;

/// Frames gathered into one vectored write at most.
const WRITE_GATHER_FRAMES_MAX: usize = 512;

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

/// Moves more ready batches of a peer's queue into `frames`, up to the
/// gather bounds (a batch is taken whole).
fn gather_from_peer_queue(queue: &mut PeerReceiver, frames: &mut VecDeque<Bytes>) {
    gather_while(frames, || queue.try_recv());
}

/// Moves more ready frames into `frames`, up to the gather bounds.
pub fn gather(queue: &mut mpsc::Receiver<Bytes>, frames: &mut VecDeque<Bytes>) {
    gather_while(frames, || queue.try_recv().ok().map(std::iter::once));
}

/// Appends the slices `next` hands out to `frames` until it has none ready
/// or the gather bounds are reached.
fn gather_while<Chunks: IntoIterator<Item = Bytes>>(
    frames: &mut VecDeque<Bytes>,
    mut next: impl FnMut() -> Option<Chunks>,
) {
    let mut bytes: usize = frames.iter().map(Bytes::len).sum();
    while frames.len() < WRITE_GATHER_FRAMES_MAX && bytes < WRITE_GATHER_BYTES_MAX {
        let Some(chunks) = next() else { break };
        for chunk in chunks {
            bytes += chunk.len();
            frames.push_back(chunk);
        }
    }
}

/// Writes every frame with vectored writes, handling partial writes, and
/// flushes.
pub async fn write_frames(
    write: &mut WriteStream,
    frames: &mut VecDeque<Bytes>,
) -> std::io::Result<()> {
    while !frames.is_empty() {
        let slices: Vec<IoSlice<'_>> = frames
            .iter()
            .take(64)
            .map(|frame| IoSlice::new(frame))
            .collect();
        let mut written = write.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let front = frames.front_mut().expect("written bytes come from frames");
            if written >= front.len() {
                written -= front.len();
                frames.pop_front();
            } else {
                front.advance(written);
                written = 0;
            }
        }
    }
    // TLS holds the last records until flushed; a plain socket has nothing to flush.
    write.flush().await?;
    Ok(())
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

/// Hands one frame to its group's actor. An error closes the connection:
/// a frame that cannot be right from this peer (another cluster, a client
/// command, a replica index that belongs to another node). A frame from a
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
        Message::Request(_) | Message::Reply(_) => {
            return Err(format!("{command:?} frames belong on the client port"));
        }
        _ => {}
    }
    let prefix = *message.prefix();
    if prefix.cluster.get() != shared.config.cluster {
        return Err(format!("frame of cluster {}", prefix.cluster.get()));
    }
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

/// Node-level liveness, one signal per peer for all groups: a `Ping` to
/// every peer each heartbeat interval (so a peer hears this node even when
/// every group is quiet), and a peer silent for longer than its
/// [`SilenceLimit`] (any frame counts) is suspected; the shards hear of
/// every change. Quiet groups rely on it to notice a dead primary.
pub async fn watch_liveness(shared: Arc<Shared>, shards: LivenessNotifier) {
    let timeouts = Timeouts::default();
    let tick_ms = shared.config.tick_ms;
    let ping_ms = timeouts.heartbeat_ticks * tick_ms;
    let suspect_ms = timeouts.primary_ticks * tick_ms;
    let peers: Vec<u32> = shared
        .config
        .peers
        .iter()
        .map(|peer| peer.id)
        .filter(|peer| *peer != shared.config.node)
        .collect();
    let mut interval = tokio::time::interval(Duration::from_millis(tick_ms));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_ping_ms = 0u64;
    let started = std::time::Instant::now();
    let mut stalls = StallGuard::new(suspect_ms / 2, 2 * tick_ms);
    let mut limits: BTreeMap<u32, SilenceLimit> = peers
        .iter()
        .map(|peer| (*peer, SilenceLimit::new(suspect_ms, SILENCE_LIMIT_MAX_MS)))
        .collect();
    loop {
        interval.tick().await;
        if shared.stopping() {
            return;
        }
        let now_ms = started.elapsed().as_millis() as u64;
        let may_suspect = stalls.may_suspect(now_ms);
        if now_ms >= last_ping_ms + ping_ms {
            last_ping_ms = now_ms;
            let ping = ping_frame(&shared);
            for peer in &peers {
                // A full queue carries frames anyway: the peer hears those.
                let _ = shared.send_to_node(*peer, ping.clone());
            }
        }
        for peer in &peers {
            metrics::bus_queued_bytes(*peer, shared.queued_bytes_to(*peer));
            let silent_ms = shared.silent_ms(*peer);
            let limit = limits.get_mut(peer).expect("a limit per peer");
            let limit_before_ms = limit.limit_ms(now_ms);
            let limit_ms = limit.observe(now_ms, silent_ms);
            if limit_ms != limit_before_ms {
                metrics::peer_silence_limit(*peer, limit_ms);
            }
            let suspected = silent_ms > limit_ms;
            if suspected && !may_suspect {
                continue;
            }
            if shared.set_suspected(*peer, suspected) {
                tracing::info!(
                    peer,
                    suspected,
                    silent_ms,
                    limit_ms,
                    "bus: peer liveness changed"
                );
                metrics::peer_suspected(*peer, suspected);
                shards.liveness(*peer, !suspected);
            }
        }
    }
}

/// The longest a peer may be silent before it is suspected, however long
/// the silences it ended lately.
pub const SILENCE_LIMIT_MAX_MS: u64 = 1_000;

/// How long a silence a peer ended is remembered (between one and two of
/// these).
const SILENCE_WINDOW_MS: u64 = 30_000;

/// How long one peer may be silent before it is suspected: the primary
/// timeout, raised to twice the longest silence the peer ended within the
/// last [`SILENCE_WINDOW_MS`] or so, up to [`SILENCE_LIMIT_MAX_MS`].
///
/// On a machine whose cores are oversubscribed a live node's process can
/// go unscheduled for hundreds of milliseconds (over 1,000 partitions on 2
/// cores every thread waited for a core 5 to 10 times as long as it ran, and
/// the watcher was woken up to 412 ms late). A fixed limit then suspected
/// a live peer for a moment, and every quiet backup of that peer's groups
/// voted to leave its view (about 600 view changes in one run). Silences a
/// peer ended show how long it goes quiet while alive; a dead peer's
/// silence never ends, so it never raises its own limit. A peer that kept
/// its silences short is suspected after the primary timeout, as before.
#[derive(Debug)]
struct SilenceLimit {
    base_ms: u64,
    max_ms: u64,
    /// The silence the last check found (a smaller one since: heard again).
    last_silence_ms: u64,
    window_start_ms: u64,
    /// The longest silence ended in this window, and in the one before.
    window_max_ms: u64,
    previous_max_ms: u64,
}

impl SilenceLimit {
    fn new(base_ms: u64, max_ms: u64) -> SilenceLimit {
        assert!(
            0 < base_ms && base_ms <= max_ms,
            "a limit of {base_ms}..={max_ms} ms"
        );
        SilenceLimit {
            base_ms,
            max_ms,
            last_silence_ms: 0,
            window_start_ms: 0,
            window_max_ms: 0,
            previous_max_ms: 0,
        }
    }

    /// A check at `now_ms` found the peer silent for `silence_ms`: learns
    /// from a silence that ended, and returns the limit now.
    fn observe(&mut self, now_ms: u64, silence_ms: u64) -> u64 {
        self.roll(now_ms);
        if silence_ms < self.last_silence_ms {
            self.window_max_ms = self.window_max_ms.max(self.last_silence_ms);
        }
        self.last_silence_ms = silence_ms;
        self.limit_ms(now_ms)
    }

    /// The limit at `now_ms`.
    fn limit_ms(&mut self, now_ms: u64) -> u64 {
        self.roll(now_ms);
        let longest = self.window_max_ms.max(self.previous_max_ms);
        longest.saturating_mul(2).clamp(self.base_ms, self.max_ms)
    }

    fn roll(&mut self, now_ms: u64) {
        let elapsed = now_ms.saturating_sub(self.window_start_ms);
        if elapsed < SILENCE_WINDOW_MS {
            return;
        }
        self.previous_max_ms = match elapsed < 2 * SILENCE_WINDOW_MS {
            true => self.window_max_ms,
            false => 0,
        };
        self.window_max_ms = 0;
        self.window_start_ms = now_ms;
    }
}

/// Keeps the liveness watcher from blaming peers for its own process's
/// stall: when the watcher itself ran late (its threads waited for a core,
/// as on an overloaded machine), the readers have not yet taken the bytes
/// the peers sent meanwhile, so their silence is this node's, not theirs.
/// No new suspicion is raised on such a late check, nor for a short grace
/// after it, while the readers catch up. A dead peer is still suspected one
/// grace later.
#[derive(Debug)]
struct StallGuard {
    /// A gap between checks above this is a stall of this process.
    stall_ms: u64,
    /// How long after a stall no suspicion is raised.
    grace_ms: u64,
    last_check_ms: u64,
    grace_until_ms: u64,
}

impl StallGuard {
    fn new(stall_ms: u64, grace_ms: u64) -> StallGuard {
        assert!(stall_ms > 0, "a stall of no time");
        StallGuard {
            stall_ms,
            grace_ms,
            last_check_ms: 0,
            grace_until_ms: 0,
        }
    }

    /// A check at `now_ms`: whether it may raise a suspicion.
    fn may_suspect(&mut self, now_ms: u64) -> bool {
        assert!(now_ms >= self.last_check_ms, "the clock went back");
        if now_ms - self.last_check_ms > self.stall_ms {
            self.grace_until_ms = now_ms + self.grace_ms;
        }
        self.last_check_ms = now_ms;
        now_ms > self.grace_until_ms
    }
}

fn ping_frame(shared: &Shared) -> Bytes {
    let mut header = PingHeader::new(shared.config.cluster, 0, strand_wire::ViewId::ZERO, 0);
    header.node.set(shared.config.node);
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    header.ping_timestamp_ns.set(now_ns);
    let body = strand_wire::ping_body(&shared.vouching.mine());
    frame_of(&Message::Ping(Msg::new(header, Bytes::from(body))))
}

/// Peer `node`'s ping listed the groups of `body` as not vouched for: each
/// group hosted here whose listing changed is told, through its shard's
/// control queue (no full inbox loses it).
fn take_vouching(shared: &Shared, node: u32, body: &[u8]) {
    let change = shared
        .vouching
        .peer_says(node, &strand_wire::ping_groups(body));
    let told = change
        .withdrawn
        .iter()
        .map(|group| (*group, false))
        .chain(change.restored.iter().map(|group| (*group, true)));
    for (group, vouches) in told {
        tracing::warn!(
            node,
            group,
            vouches,
            "bus: a peer's vouching for a group changed"
        );
        shared.with_group(group, |handle| {
            handle
                .inbox
                .send_control(Input::PeerVouch { node, vouches })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer that ended silences of 250 ms lately is given 500 ms; one
    /// that never went quiet, or went quiet long ago, the primary timeout;
    /// a peer that dies never raises its own limit.
    #[test]
    fn a_peer_is_given_twice_the_silences_it_ended_lately() {
        let mut limit = SilenceLimit::new(300, 1_000);
        assert_eq!(limit.observe(10, 0), 300);
        for now in (20..=250).step_by(10) {
            assert_eq!(
                limit.observe(now, now - 10),
                300,
                "silent, still within 300 ms"
            );
        }
        assert_eq!(limit.observe(260, 0), 480, "heard after 240 ms of silence");
        // It dies: its silence grows past the limit and stays the measure.
        let mut dead = 480;
        for now in (270..=2_000).step_by(10) {
            dead = limit.observe(now, now - 260);
        }
        assert_eq!(dead, 480, "a silence that has not ended teaches nothing");
        // Long silences are remembered a window or two, then forgotten.
        let mut limit = SilenceLimit::new(300, 1_000);
        limit.observe(1_000, 700);
        assert_eq!(limit.observe(1_010, 0), 1_000, "capped");
        assert_eq!(limit.limit_ms(1_010 + SILENCE_WINDOW_MS), 1_000);
        assert_eq!(limit.limit_ms(1_010 + 3 * SILENCE_WINDOW_MS), 300);
    }

    #[test]
    fn a_late_check_raises_no_suspicion_until_its_grace_ends() {
        let mut guard = StallGuard::new(150, 20);
        assert!(guard.may_suspect(10));
        assert!(guard.may_suspect(20));
        assert!(!guard.may_suspect(400), "a check 380 ms late is a stall");
        assert!(!guard.may_suspect(410));
        assert!(!guard.may_suspect(420));
        assert!(guard.may_suspect(430));
        assert!(guard.may_suspect(440));
    }
}
