//! The Kafka listener: accepts connections within the node's bounds (the
//! client port's: connections per node and per address, TLS), reads Kafka
//! frames within a size bound (small until the connection has signed in,
//! where signing in is required), and answers each request in the order it
//! came, as Kafka clients require, while several are served at once.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::kafka::coordinator::Coordinator;
use crate::kafka::link::Link;
use crate::kafka::serve::{Served, serve};
use crate::metrics;
use crate::net::client_port::{SIGN_IN_FRAME_SIZE_MAX, accept_within_bounds, open};
use crate::net::tls::{ReadStream, WriteStream};
use crate::security::auth::{Identity, Proof};
use crate::shared::Shared;

/// Largest Kafka request frame accepted once signed in: a produce of one
/// Strand batch per partition, with room for Kafka's framing.
pub const KAFKA_FRAME_SIZE_MAX: u32 = 16 * 1024 * 1024;

/// Responses one connection may have waiting to be written, in order; the
/// connection's reading waits while there are this many.
pub const RESPONSES_IN_FLIGHT_MAX: usize = 64;

/// A response in the connection's order: written now, or when its work is
/// done (`None`: nothing is written, as for a produce with `acks=0`).
pub enum Response {
    /// Ready to write.
    Ready(Bytes),
    /// Written when the task finishes.
    Later(JoinHandle<Option<Bytes>>),
}

/// How often the group coordinator expires sessions and closes rebalances.
const SWEEP_INTERVAL: Duration = Duration::from_millis(200);

/// Accepts Kafka connections forever, within the node's bounds on them.
pub async fn run(shared: Arc<Shared>, listener: TcpListener) {
    let coordinator = Arc::new(std::sync::Mutex::new(Coordinator::default()));
    tokio::spawn(sweep(Arc::clone(&coordinator)));
    loop {
        let (stream, address, admitted) = accept_within_bounds(&shared, &listener, "kafka").await;
        let shared = Arc::clone(&shared);
        let coordinator = Arc::clone(&coordinator);
        tokio::spawn(async move {
            let _admitted = admitted;
            if let Err(reason) = connection(shared, stream, coordinator).await {
                metrics::client_frame_rejected();
                tracing::warn!(%address, reason, "kafka: closing the connection");
            }
        });
    }
}

/// Serves one connection until the client closes it (Ok) or it must be
/// closed (Err with the reason).
async fn connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    coordinator: Arc<std::sync::Mutex<Coordinator>>,
) -> Result<(), String> {
    let address = stream.peer_addr().map_err(|error| error.to_string())?;
    let (read, write, caller, certificate_user) = open(&shared, stream).await?;
    let ip = address.ip().to_canonical();
    let link = Link::new(Arc::clone(&shared), caller, ip, coordinator);
    if let Some((user, fingerprint)) = certificate_user {
        link.signed_in(Identity {
            user,
            proof: Proof::Certificate(fingerprint),
        });
    }
    let (responses, queued) = mpsc::channel(RESPONSES_IN_FLIGHT_MAX);
    let writer = tokio::spawn(write_responses(write, queued));
    let result = read_requests(&link, read, &responses).await;
    drop(responses);
    let _ = writer.await;
    result
}

/// Expires group members' sessions and closes rebalances, forever.
async fn sweep(coordinator: Arc<std::sync::Mutex<Coordinator>>) {
    let mut interval = tokio::time::interval(SWEEP_INTERVAL);
    loop {
        interval.tick().await;
        let now = std::time::Instant::now();
        let groups = {
            let mut coordinator = coordinator.lock().expect("coordinator lock");
            coordinator.sweep(now);
            coordinator.len()
        };
        metrics::kafka_groups(groups);
    }
}

/// Reads and serves frames until the client closes or must be closed.
async fn read_requests(
    link: &Arc<Link>,
    mut read: ReadStream,
    responses: &mpsc::Sender<Response>,
) -> Result<(), String> {
    let shared = Arc::clone(link.shared());
    let opened = tokio::time::Instant::now();
    let mut state = crate::kafka::serve::ConnectionState::default();
    loop {
        let (deadline, reason, size_max) = match link.may_proceed() {
            true => (
                tokio::time::Instant::now()
                    + Duration::from_millis(shared.config.limits.client_idle_timeout_ms),
                "idle",
                KAFKA_FRAME_SIZE_MAX,
            ),
            false => (
                opened + Duration::from_millis(shared.config.limits.sign_in_timeout_ms),
                "no_sign_in_in_time",
                SIGN_IN_FRAME_SIZE_MAX,
            ),
        };
        let payload = match tokio::time::timeout_at(deadline, read_frame(&mut read, size_max)).await
        {
            Err(_) => {
                metrics::client_connection_refused(reason);
                return Err(format!("closed: {reason}"));
            }
            Ok(Ok(Some(payload))) => payload,
            Ok(Ok(None)) => return Ok(()),
            Ok(Err(reason)) => return Err(reason),
        };
        match serve(link, &mut state, payload).await? {
            Served::Respond(response) => {
                if responses.send(response).await.is_err() {
                    return Err("its responses could not be written".to_owned());
                }
            }
            Served::Silent => {}
        }
    }
}

/// Reads one frame's payload (after its size), `None` when the client
/// closed between frames.
async fn read_frame(read: &mut ReadStream, size_max: u32) -> Result<Option<Bytes>, String> {
    let mut size = [0u8; 4];
    match read.read_exact(&mut size).await {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(format!("read failed: {error}")),
    }
    let size = i32::from_be_bytes(size);
    let Ok(size) = u32::try_from(size) else {
        return Err(format!("a frame of negative size {size}"));
    };
    if size > size_max {
        return Err(format!(
            "a frame of {size} bytes, over the {size_max} allowed now"
        ));
    }
    let mut payload = BytesMut::zeroed(size as usize);
    read.read_exact(&mut payload)
        .await
        .map_err(|error| format!("closed in the middle of a frame: {error}"))?;
    Ok(Some(payload.freeze()))
}

/// Writes the responses in the order their requests came.
async fn write_responses(mut write: WriteStream, mut queued: mpsc::Receiver<Response>) {
    while let Some(response) = queued.recv().await {
        let frame = match response {
            Response::Ready(frame) => Some(frame),
            Response::Later(task) => match task.await {
                Ok(frame) => frame,
                Err(error) => {
                    tracing::error!(%error, "kafka: a request's task failed");
                    return;
                }
            },
        };
        let Some(frame) = frame else {
            continue;
        };
        if write.write_all(&frame).await.is_err() {
            return;
        }
        if queued.is_empty() && write.flush().await.is_err() {
            return;
        }
    }
    let _ = write.shutdown().await;
}
