//! Writing queued frames to a socket, for the bus's writers and the
//! client port's: ready frames are gathered (up to a bound in frames and
//! bytes) into vectored writes, partial writes resumed, then flushed.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::net::peer_queue::PeerReceiver;
use crate::net::tls::WriteStream;

/// Bytes gathered into one vectored write at most.
const WRITE_GATHER_BYTES_MAX: usize = 1024 * 1024;

/// Frames gathered into one vectored write at most.
const WRITE_GATHER_FRAMES_MAX: usize = 512;

/// Moves more ready batches of a peer's queue into `frames`, up to the
/// gather bounds (a batch is taken whole).
pub(crate) fn gather_from_peer_queue(queue: &mut PeerReceiver, frames: &mut VecDeque<Bytes>) {
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
