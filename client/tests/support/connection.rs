//! The scripted nodes' network side: a listener per node, and each
//! connection's loop (frames in, faults applied, replies out, or the
//! connection dropped or left silent).

use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use strand_wire::{FrameDecoder, Message, Msg, ReplyHeader, RequestHeader};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::requests::reply;
use super::{FaultAction, Outcome, Seen, State, lock};

static NEXT_CONNECTION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub(super) async fn serve(node: u32, listener: TcpListener, state: Arc<Mutex<State>>) {
    let mut connections = Vec::new();
    while let Ok((stream, _)) = listener.accept().await {
        let connection = NEXT_CONNECTION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        connections.push(tokio::spawn(connection_loop(
            node,
            connection,
            stream,
            Arc::clone(&state),
        )));
    }
}

async fn connection_loop(node: u32, connection: u64, stream: TcpStream, state: Arc<Mutex<State>>) {
    let (mut reader, mut writer) = stream.into_split();
    let (replies, mut outgoing) = mpsc::unbounded_channel::<Msg<ReplyHeader>>();
    let writer_task = tokio::spawn(async move {
        while let Some(reply) = outgoing.recv().await {
            if writer.write_all(&reply.to_bytes()).await.is_err() {
                return;
            }
        }
    });
    let decoder = FrameDecoder::default();
    let mut buffer = BytesMut::new();
    'connection: loop {
        while let Ok(Some(message)) = decoder.decode(&mut buffer) {
            let Message::Request(request) = message else {
                break 'connection;
            };
            let outcome = lock(&state).handle(node, connection, &request);
            match outcome {
                Outcome::Reply(reply) => drop(replies.send(reply)),
                Outcome::Later(task) => {
                    let replies = replies.clone();
                    tokio::spawn(async move {
                        if let Ok(reply) = task.await {
                            let _ = replies.send(reply);
                        }
                    });
                }
                Outcome::Silent => {}
                Outcome::Drop | Outcome::AppliedThenDrop => break 'connection,
            }
        }
        match reader.read_buf(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    writer_task.abort();
}

impl State {
    pub(super) fn handle(
        &mut self,
        node: u32,
        connection: u64,
        request: &Msg<RequestHeader>,
    ) -> Outcome {
        let header = request.header();
        let operation = header.operation();
        let group = header.prefix.group.get();
        self.seen.push(Seen {
            node,
            connection,
            group,
            client: header.client.get(),
            request: header.request.get(),
            operation,
        });
        let count = self.counts.entry(operation).or_default();
        *count += 1;
        let nth = *count;
        let fault = self
            .faults
            .iter()
            .position(|fault| fault.operation == operation && fault.nth == nth)
            .map(|index| self.faults.remove(index).action);
        match fault {
            Some(FaultAction::Reply(error)) => return Outcome::Reply(reply(header, 0, Err(error))),
            Some(FaultAction::DropConnection) => return Outcome::Drop,
            Some(FaultAction::Ignore) => return Outcome::Silent,
            Some(FaultAction::EvictClients) => self
                .tables
                .retain(|(table_group, _), _| *table_group != group),
            Some(FaultAction::ApplyThenDrop) => {
                let _ = self.handle_request(node, request);
                return Outcome::AppliedThenDrop;
            }
            None => {}
        }
        self.handle_request(node, request)
    }
}
