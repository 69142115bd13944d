//! The driver's connections: at most one per node address, opened on
//! demand, with a growing pause before reconnecting to an address that keeps
//! failing (so a dead node costs a few attempts a second, not a hot loop).

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::backoff::{Backoff, Prng};
use crate::connection::{self, ConnectionEvent};
use crate::frames::{ConnectionId, FrameParts};
use crate::tls::Connector;

/// Pause before reconnecting after the first failure; doubles per failure.
const RECONNECT_BACKOFF_MIN_MS: u64 = 10;
/// Longest pause before reconnecting.
const RECONNECT_BACKOFF_MAX_MS: u64 = 1_000;

#[derive(Debug)]
struct Connection {
    id: ConnectionId,
    /// `None` until connected; frames wait in `queued` meanwhile.
    writer: Option<mpsc::UnboundedSender<Bytes>>,
    queued: Vec<Bytes>,
    task: AbortHandle,
    /// When it last carried a successful answer to a replicated request
    /// (driver clock, ms).
    progress_ms: Option<u64>,
}

#[derive(Debug, Default)]
struct AddressHealth {
    failures: u32,
    not_before_ms: u64,
    last_failure: String,
}

/// Every connection the driver holds.
#[derive(Debug)]
pub(crate) struct Connections {
    connect_timeout: Duration,
    frame_size_max: u32,
    tls: Option<Connector>,
    /// The sign-in frame each connection sends first, if any.
    sign_in: Option<Bytes>,
    events: mpsc::UnboundedSender<ConnectionEvent>,
    by_address: HashMap<String, Connection>,
    address_of: HashMap<ConnectionId, String>,
    health: HashMap<String, AddressHealth>,
    next_id: ConnectionId,
    backoff: Backoff,
    prng: Prng,
}

impl Connections {
    pub(crate) fn new(
        connect_timeout: Duration,
        frame_size_max: u32,
        tls: Option<Connector>,
        sign_in: Option<Bytes>,
        events: mpsc::UnboundedSender<ConnectionEvent>,
    ) -> Connections {
        Connections {
            connect_timeout,
            frame_size_max,
            tls,
            sign_in,
            events,
            by_address: HashMap::new(),
            address_of: HashMap::new(),
            health: HashMap::new(),
            next_id: 1,
            backoff: Backoff::new(RECONNECT_BACKOFF_MIN_MS, RECONNECT_BACKOFF_MAX_MS),
            prng: Prng::new(rand::random()),
        }
    }

    /// The connection to `address`, opening one unless the address is
    /// pausing after failures (`None` then).
    pub(crate) fn ensure(&mut self, address: &str, now_ms: u64) -> Option<ConnectionId> {
        if let Some(connection) = self.by_address.get(address) {
            return Some(connection.id);
        }
        let pausing = self
            .health
            .get(address)
            .is_some_and(|health| health.not_before_ms > now_ms);
        if pausing {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        let task = connection::spawn(
            id,
            address.to_owned(),
            self.connect_timeout,
            self.frame_size_max,
            self.tls.clone(),
            self.sign_in.clone(),
            self.events.clone(),
        );
        self.by_address.insert(
            address.to_owned(),
            Connection {
                id,
                writer: None,
                queued: Vec::new(),
                task,
                progress_ms: None,
            },
        );
        self.address_of.insert(id, address.to_owned());
        Some(id)
    }

    /// Queues `frame` on `connection`, its header and body as two chunks
    /// of the connection's byte stream (dropped if the connection is gone:
    /// its requests are resent by whoever tracks them).
    pub(crate) fn send(&mut self, connection: ConnectionId, frame: FrameParts) {
        let Some(address) = self.address_of.get(&connection) else {
            return;
        };
        let Some(open) = self.by_address.get_mut(address) else {
            return;
        };
        let chunks = [frame.header, frame.body];
        for chunk in chunks.into_iter().filter(|chunk| !chunk.is_empty()) {
            match &open.writer {
                // A failed send means the task is ending; its Closed event follows.
                Some(writer) => drop(writer.send(chunk)),
                None => open.queued.push(chunk),
            }
        }
    }

    pub(crate) fn on_connected(
        &mut self,
        connection: ConnectionId,
        writer: mpsc::UnboundedSender<Bytes>,
    ) {
        let Some(address) = self.address_of.get(&connection) else {
            return; // closed meanwhile
        };
        let Some(open) = self.by_address.get_mut(address) else {
            return;
        };
        for frame in open.queued.drain(..) {
            let _ = writer.send(frame);
        }
        open.writer = Some(writer);
    }

    /// A reply arrived: the address works.
    pub(crate) fn on_reply(&mut self, connection: ConnectionId) {
        if let Some(address) = self.address_of.get(&connection) {
            self.health.remove(address);
        }
    }

    /// The node behind `connection` committed a replicated request of ours
    /// (any group's): it is alive and reaches a quorum of its peers.
    pub(crate) fn on_progress(&mut self, connection: ConnectionId, now_ms: u64) {
        let Some(address) = self.address_of.get(&connection) else {
            return;
        };
        if let Some(open) = self.by_address.get_mut(address) {
            open.progress_ms = Some(now_ms);
        }
    }

    /// When `connection` last carried a committed answer, if it is open and
    /// ever did: a request waiting on a node that commits others' waits its
    /// turn behind them. Answers to reads do not count: a primary cut off
    /// from its peers still serves them, and commits nothing.
    pub(crate) fn progress_ms(&self, connection: ConnectionId) -> Option<u64> {
        let address = self.address_of.get(&connection)?;
        let open = self.by_address.get(address)?;
        open.progress_ms.filter(|_| open.id == connection)
    }

    /// The task reported the connection closed; returns its address if it
    /// was still ours.
    pub(crate) fn on_closed(
        &mut self,
        connection: ConnectionId,
        now_ms: u64,
        reason: &str,
    ) -> Option<String> {
        let address = self.address_of.remove(&connection)?;
        self.by_address.remove(&address);
        self.note_failure(&address, now_ms, reason);
        Some(address)
    }

    /// Closes `connection` on purpose; returns its address if it was open.
    pub(crate) fn close(
        &mut self,
        connection: ConnectionId,
        now_ms: u64,
        reason: &str,
    ) -> Option<String> {
        let address = self.address_of.remove(&connection)?;
        if let Some(open) = self.by_address.remove(&address) {
            open.task.abort();
        }
        self.note_failure(&address, now_ms, reason);
        Some(address)
    }

    fn note_failure(&mut self, address: &str, now_ms: u64, reason: &str) {
        let health = self.health.entry(address.to_owned()).or_default();
        let delay_ms = self.backoff.delay_ms(health.failures, &mut self.prng);
        health.failures += 1;
        health.not_before_ms = now_ms + delay_ms;
        health.last_failure = reason.to_owned();
    }

    /// The address `connection` goes to, while it is open.
    pub(crate) fn address_of(&self, connection: ConnectionId) -> Option<&str> {
        self.address_of.get(&connection).map(String::as_str)
    }

    /// Why `address` last failed.
    pub(crate) fn last_failure(&self, address: &str) -> String {
        self.health.get(address).map_or_else(
            || "not connected".to_owned(),
            |health| health.last_failure.clone(),
        )
    }

    /// When the next address still pausing at `now_ms` may be tried again.
    pub(crate) fn next_retry_ms(&self, now_ms: u64) -> Option<u64> {
        self.health
            .iter()
            .filter(|(address, health)| {
                health.not_before_ms > now_ms && !self.by_address.contains_key(*address)
            })
            .map(|(_, health)| health.not_before_ms)
            .min()
    }

    pub(crate) fn close_all(&mut self) {
        for (_, open) in self.by_address.drain() {
            open.task.abort();
        }
        self.address_of.clear();
    }
}
