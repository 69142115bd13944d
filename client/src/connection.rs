//! One TCP connection to one node's client port: a task that connects (and
//! runs the TLS handshake when the client is configured for TLS), then
//! writes the frames the driver hands it and reads reply frames back. It
//! reports to the driver through events and holds no protocol state.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use strand_wire::{FrameDecoder, Message, Msg, ReplyHeader};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::frames::ConnectionId;
use crate::tls::Connector;

/// The reading side of a connection, plaintext or TLS.
type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// The writing side of a connection, plaintext or TLS.
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// How a connection closed by a refused sign-in says so (the driver keeps
/// what follows, for `ClientError::AuthenticationFailed`).
pub(crate) const SIGN_IN_REFUSED: &str = "sign-in refused: ";

/// Times a sign-in answered `Busy` (the node's password checks all
/// taken) is sent again on the same connection before it counts as
/// refused (a node closes a connection at its third refused sign-in).
const SIGN_IN_BUSY_RETRIES_MAX: u32 = 2;

/// Read buffer size reserved per read call.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Bytes of queued chunks gathered for one round of vectored writes at most.
const WRITE_GATHER_BYTES_MAX: usize = 1024 * 1024;

/// Slices handed to one vectored write at most (within the kernel's
/// `IOV_MAX`).
const WRITE_SLICES_MAX: usize = 64;

/// What a connection task tells the driver.
#[derive(Debug)]
pub(crate) enum ConnectionEvent {
    /// Connected: chunks sent to `writer` go out on the socket, in order
    /// (a frame may be several chunks).
    Connected {
        connection: ConnectionId,
        writer: mpsc::UnboundedSender<Bytes>,
    },
    /// A reply frame arrived (validated by the decoder).
    Reply {
        connection: ConnectionId,
        reply: Msg<ReplyHeader>,
    },
    /// The connection failed or closed; nothing more comes from it.
    Closed {
        connection: ConnectionId,
        reason: String,
    },
}

/// Starts a connection task to `address`. Abort it through the handle to
/// close the connection (no `Closed` event follows an abort).
pub(crate) fn spawn(
    connection: ConnectionId,
    address: String,
    connect_timeout: Duration,
    frame_size_max: u32,
    tls: Option<Connector>,
    sign_in: Option<Bytes>,
    events: mpsc::UnboundedSender<ConnectionEvent>,
) -> AbortHandle {
    let task = tokio::spawn(async move {
        let reason = match run(
            connection,
            &address,
            (connect_timeout, frame_size_max),
            tls.as_ref(),
            sign_in.as_ref(),
            &events,
        )
        .await
        {
            Ok(()) => "closed by the server".to_owned(),
            Err(reason) => reason,
        };
        tracing::debug!(connection, %address, %reason, "connection closed");
        // The driver may be gone already; nothing to do then.
        let _ = events.send(ConnectionEvent::Closed { connection, reason });
    });
    task.abort_handle()
}

async fn run(
    connection: ConnectionId,
    address: &str,
    (connect_timeout, frame_size_max): (Duration, u32),
    tls: Option<&Connector>,
    sign_in: Option<&Bytes>,
    events: &mpsc::UnboundedSender<ConnectionEvent>,
) -> Result<(), String> {
    let opening = async {
        let (mut reader, mut writer) = open(address, tls).await?;
        let mut buffer = BytesMut::with_capacity(READ_CHUNK_BYTES);
        if let Some(frame) = sign_in {
            sign_in_first(&mut reader, &mut writer, frame, frame_size_max, &mut buffer).await?;
        }
        Ok::<_, String>((reader, writer, buffer))
    };
    let (reader, writer, buffer) = tokio::time::timeout(connect_timeout, opening)
        .await
        .map_err(|_| {
            format!(
                "connecting timed out after {} ms",
                connect_timeout.as_millis()
            )
        })??;
    let (frames_sender, frames) = mpsc::unbounded_channel();
    events
        .send(ConnectionEvent::Connected {
            connection,
            writer: frames_sender,
        })
        .map_err(|_| "the client shut down".to_owned())?;
    tokio::select! {
        result = read_replies(connection, reader, buffer, frame_size_max, events) => result,
        result = write_frames(writer, frames) => result,
    }
}

/// Connects to `address`, with the TLS handshake when `tls` is set.
async fn open(address: &str, tls: Option<&Connector>) -> Result<(Reader, Writer), String> {
    let stream = TcpStream::connect(address)
        .await
        .map_err(|error| format!("connect failed: {error}"))?;
    stream
        .set_nodelay(true)
        .map_err(|error| format!("setting TCP_NODELAY failed: {error}"))?;
    let Some(tls) = tls else {
        let (reader, writer) = stream.into_split();
        return Ok((Box::new(reader), Box::new(writer)));
    };
    let stream = tls
        .connect(address, None, stream)
        .await
        .map_err(|error| format!("TLS handshake failed: {error}"))?;
    let (reader, writer) = tokio::io::split(stream);
    Ok((Box::new(reader), Box::new(writer)))
}

/// Sends the sign-in `frame` and waits for its answer; bytes read past it
/// stay in `buffer`.
async fn sign_in_first(
    reader: &mut Reader,
    writer: &mut Writer,
    frame: &Bytes,
    frame_size_max: u32,
    buffer: &mut BytesMut,
) -> Result<(), String> {
    write_frame(writer, frame).await?;
    flush(writer).await?;
    let decoder = FrameDecoder::new(frame_size_max);
    let mut busy_retries = 0;
    loop {
        if let Some(message) = decoder
            .decode(buffer)
            .map_err(|error| format!("undecodable frame from the server: {error}"))?
        {
            let Message::Reply(reply) = message else {
                return Err("the server answered a sign-in with a non-reply".to_owned());
            };
            let result = reply.header().result();
            if result == strand_wire::ResultCode::Ok {
                return Ok(());
            }
            let error = strand_wire::ops::ErrorBody::from_bytes(result, reply.body());
            if let Ok(strand_wire::ops::ErrorBody::Busy { retry_after_ms }) = error
                && busy_retries < SIGN_IN_BUSY_RETRIES_MAX
            {
                // The node's password checks are all taken: wait as it
                // says and ask again (within the connect timeout).
                busy_retries += 1;
                tokio::time::sleep(Duration::from_millis(u64::from(retry_after_ms))).await;
                write_frame(writer, frame).await?;
                flush(writer).await?;
                continue;
            }
            let message = match error {
                Ok(strand_wire::ops::ErrorBody::Message { message, .. }) => message,
                Ok(other) => other.to_string(),
                Err(error) => error.to_string(),
            };
            return Err(format!("{SIGN_IN_REFUSED}{message}"));
        }
        buffer.reserve(READ_CHUNK_BYTES);
        if reader
            .read_buf(buffer)
            .await
            .map_err(|error| format!("read failed: {error}"))?
            == 0
        {
            return Err("closed by the server during sign-in".to_owned());
        }
    }
}

async fn read_replies(
    connection: ConnectionId,
    mut reader: Reader,
    mut buffer: BytesMut,
    frame_size_max: u32,
    events: &mpsc::UnboundedSender<ConnectionEvent>,
) -> Result<(), String> {
    let decoder = FrameDecoder::new(frame_size_max);
    loop {
        while let Some(message) = decoder
            .decode(&mut buffer)
            .map_err(|error| format!("undecodable frame from the server: {error}"))?
        {
            match message {
                Message::Reply(reply) => events
                    .send(ConnectionEvent::Reply { connection, reply })
                    .map_err(|_| "the client shut down".to_owned())?,
                other => {
                    return Err(format!(
                        "the server sent a {:?} frame on the client port",
                        other.command()
                    ));
                }
            }
        }
        buffer.reserve(READ_CHUNK_BYTES);
        let read = reader
            .read_buf(&mut buffer)
            .await
            .map_err(|error| format!("read failed: {error}"))?;
        if read == 0 {
            return Ok(());
        }
    }
}

async fn write_frames(
    mut writer: Writer,
    mut chunks: mpsc::UnboundedReceiver<Bytes>,
) -> Result<(), String> {
    let mut pending: VecDeque<Bytes> = VecDeque::new();
    while let Some(chunk) = chunks.recv().await {
        pending.push_back(chunk);
        // What is already queued goes out with it, in vectored writes.
        gather(&mut chunks, &mut pending);
        write_chunks(&mut writer, &mut pending).await?;
        flush(&mut writer).await?;
    }
    // The driver dropped the sender: it closed this connection on purpose.
    std::future::pending::<()>().await;
    Ok(())
}

/// Moves chunks already queued into `pending`, up to [`WRITE_GATHER_BYTES_MAX`].
fn gather(chunks: &mut mpsc::UnboundedReceiver<Bytes>, pending: &mut VecDeque<Bytes>) {
    let mut bytes: usize = pending.iter().map(Bytes::len).sum();
    while bytes < WRITE_GATHER_BYTES_MAX {
        let Ok(chunk) = chunks.try_recv() else {
            break;
        };
        bytes += chunk.len();
        pending.push_back(chunk);
    }
}

/// Writes every pending chunk, [`WRITE_SLICES_MAX`] slices per vectored
/// write, handling partial writes.
async fn write_chunks(writer: &mut Writer, pending: &mut VecDeque<Bytes>) -> Result<(), String> {
    while !pending.is_empty() {
        let slices: Vec<IoSlice<'_>> = pending
            .iter()
            .take(WRITE_SLICES_MAX)
            .map(|chunk| IoSlice::new(chunk))
            .collect();
        let mut written = writer
            .write_vectored(&slices)
            .await
            .map_err(|error| format!("write failed: {error}"))?;
        if written == 0 {
            return Err("write failed: the socket took nothing".to_owned());
        }
        while written > 0 {
            let front = pending
                .front_mut()
                .expect("written bytes come from pending chunks");
            if written >= front.len() {
                written -= front.len();
                pending.pop_front();
            } else {
                front.advance(written);
                written = 0;
            }
        }
    }
    Ok(())
}

async fn write_frame(writer: &mut (impl AsyncWrite + Unpin), frame: &[u8]) -> Result<(), String> {
    writer
        .write_all(frame)
        .await
        .map_err(|error| format!("write failed: {error}"))
}

async fn flush(writer: &mut (impl AsyncWrite + Unpin)) -> Result<(), String> {
    writer
        .flush()
        .await
        .map_err(|error| format!("write failed: {error}"))
}
