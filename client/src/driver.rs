//! The driver: one task per [`crate::Client`] that owns every session, query,
//! connection, the routing table and the nodes' health. It turns commands
//! (from the API), connection events and time into calls on the pure cores,
//! and carries out the actions they push. It holds no retry or numbering
//! rule of its own: how long an attempt waits comes from [`Health`], where
//! it goes from [`Routing`] (a question any node can answer goes first to a
//! node that did not lately fail to answer).
//!
//! This file holds the driver's state, its loop and the inputs it takes
//! (commands, connection events, replies, time); `transmit` sends what the
//! sessions and queries may send, `actions` carries out what they decided,
//! and `shared_routing` is the state the API reads without asking.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strand_wire::{Msg, Operation, ReplyHeader};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::backoff::{Backoff, Prng};
use crate::config::ClientConfig;
use crate::connection::ConnectionEvent;
use crate::connections::Connections;
use crate::error::ClientError;
use crate::frames::{self, ConnectionId, ReplyBody};
use crate::health::Health;
use crate::query::{Query, QueryTarget};
use crate::routing::Routing;
use crate::session::{Session, SessionConfig, Submission, Token};
use crate::tls::Connector;

mod actions;
mod shared_routing;
mod transmit;

pub(crate) use shared_routing::SharedRouting;

/// Shortest time between two routing refreshes the driver starts itself.
const REFRESH_INTERVAL_MIN_MS: u64 = 50;

/// Longest the driver sleeps when nothing is scheduled.
const IDLE_SLEEP_MS: u64 = 60_000;

/// Where a call's outcome goes.
pub(crate) type ReplySender = oneshot::Sender<Result<Bytes, ClientError>>;

/// What the API asks of the driver.
#[derive(Debug)]
pub(crate) enum DriverCommand {
    /// A replicated request (Produce, CreateStream, CreateTopic) for `group`.
    Replicated {
        group: u64,
        operation: Operation,
        body: Bytes,
        reply: ReplySender,
    },
    /// A non-replicated request.
    Query {
        target: QueryTarget,
        operation: Operation,
        body: Bytes,
        /// Added to every attempt's timeout (a fetch's long poll).
        extra_wait_ms: u64,
        deadline_ms: u64,
        reply: ReplySender,
    },
    /// Every node id and client address the last metadata named.
    Nodes {
        reply: oneshot::Sender<Vec<(u32, String)>>,
    },
    /// The nodes hosting a group's replicas, if known.
    ReplicaNodes {
        group: u64,
        reply: oneshot::Sender<Option<Vec<(u32, String)>>>,
    },
}

/// The frame every connection signs in with: an `Authenticate` of the
/// configured credentials, from a client id of its own (request 1).
fn sign_in_frame(config: &ClientConfig) -> Option<Bytes> {
    let credentials = config.credentials.as_ref()?;
    let body = match credentials {
        crate::Credentials::Password { user, password } => {
            strand_wire::ops::Authenticate::Password {
                user: user.clone(),
                password: password.clone(),
            }
        }
        crate::Credentials::Token(token) => strand_wire::ops::Authenticate::Token(token.clone()),
    };
    let client = rand::random::<u128>().max(1);
    Some(
        crate::frames::request_frame(
            config.cluster,
            0,
            client,
            1,
            Operation::Authenticate,
            &Bytes::from(strand_wire::Body::to_vec(&body)),
        )
        .to_bytes(),
    )
}

struct QueryEntry {
    query: Query,
    /// `None` for the driver's own routing refreshes.
    reply: Option<ReplySender>,
    /// Every request number this query was sent under.
    requests: Vec<u64>,
}

pub(crate) struct Driver {
    config: ClientConfig,
    epoch: Instant,
    commands: mpsc::UnboundedReceiver<DriverCommand>,
    events: mpsc::UnboundedReceiver<ConnectionEvent>,
    routing: Routing,
    health: Health,
    connections: Connections,
    shared: Arc<SharedRouting>,
    prng: Prng,
    backoff: Backoff,
    session_config: SessionConfig,
    sessions: HashMap<u64, Session>,
    /// Groups whose session may have something to transmit: marked when a
    /// session changes, cleared once it has sent what it can. A group left
    /// without a route or connection stays marked and is tried each turn.
    ready: BTreeSet<u64>,
    /// Each session's next deadline, as `(wake_ms, group)`, and the one filed
    /// for each group: a turn ticks only the sessions that are due, so an
    /// idle or waiting session costs nothing per message.
    timers: BTreeSet<(u64, u64)>,
    timer_of: HashMap<u64, u64>,
    waiters: HashMap<Token, ReplySender>,
    next_token: Token,
    queries: HashMap<Token, QueryEntry>,
    query_by_request: HashMap<u64, Token>,
    /// The client id of non-replicated requests (never a session's id).
    query_client: u128,
    /// The highest metadata op this client has seen committed or reflected:
    /// metadata answers older than it are stale and asked again.
    metadata_seen: u64,
    next_query_request: u64,
    refresh_in_flight: bool,
    refresh_wanted: bool,
    refresh_not_before_ms: u64,
}

impl Driver {
    /// Starts the driver task; returns the command sender and the shared routing.
    pub(crate) fn spawn(
        config: ClientConfig,
        tls: Option<Connector>,
    ) -> (mpsc::UnboundedSender<DriverCommand>, Arc<SharedRouting>) {
        let (command_sender, commands) = mpsc::unbounded_channel();
        let (event_sender, events) = mpsc::unbounded_channel();
        let shared = Arc::new(SharedRouting::default());
        let mut prng = Prng::new(rand::random()).with_client_id_salt(rand::random());
        let backoff = Backoff::new(config.retry_backoff_min_ms, config.retry_backoff_max_ms);
        let session_config = SessionConfig {
            window_max: config.in_flight_per_group_max,
            backoff,
        };
        let connect_timeout = Duration::from_millis(config.request_timeout_ms);
        let driver = Driver {
            routing: Routing::new(&config.bootstrap),
            health: Health::new(config.request_timeout_ms),
            connections: Connections::new(
                connect_timeout,
                config.frame_size_max,
                tls,
                sign_in_frame(&config),
                event_sender,
            ),
            epoch: Instant::now(),
            commands,
            events,
            shared: Arc::clone(&shared),
            query_client: prng.client_id(),
            metadata_seen: 0,
            prng,
            backoff,
            session_config,
            sessions: HashMap::new(),
            ready: BTreeSet::new(),
            timers: BTreeSet::new(),
            timer_of: HashMap::new(),
            waiters: HashMap::new(),
            next_token: 1,
            queries: HashMap::new(),
            query_by_request: HashMap::new(),
            next_query_request: 1,
            refresh_in_flight: false,
            refresh_wanted: false,
            refresh_not_before_ms: 0,
            config,
        };
        tokio::spawn(driver.run());
        (command_sender, shared)
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    async fn run(mut self) {
        loop {
            let now_ms = self.now_ms();
            self.tick(now_ms);
            self.pump(now_ms);
            let wake_ms = self.next_wakeup_ms(now_ms).min(now_ms + IDLE_SLEEP_MS);
            let wake = self.epoch + Duration::from_millis(wake_ms);
            tokio::select! {
                command = self.commands.recv() => match command {
                    Some(command) => self.on_command(command),
                    None => break, // every Client handle is gone
                },
                Some(event) = self.events.recv() => self.on_event(event),
                () = tokio::time::sleep_until(wake) => {}
            }
        }
        self.connections.close_all();
    }

    fn on_command(&mut self, command: DriverCommand) {
        let now_ms = self.now_ms();
        match command {
            DriverCommand::Replicated {
                group,
                operation,
                body,
                reply,
            } => {
                let token = self.take_token();
                self.waiters.insert(token, reply);
                if !self.sessions.contains_key(&group) {
                    let ids = Prng::new(self.prng.next_u64()).with_client_id_salt(rand::random());
                    let session = Session::new(group, self.session_config, ids);
                    self.sessions.insert(group, session);
                }
                let session = self.sessions.get_mut(&group).expect("inserted above");
                session.submit(Submission {
                    token,
                    operation,
                    body,
                    submitted_ms: now_ms,
                    deadline_ms: now_ms + self.config.deadline_ms,
                });
                self.touched(group);
            }
            DriverCommand::Query {
                target,
                operation,
                body,
                extra_wait_ms,
                deadline_ms,
                reply,
            } => {
                let query = Query::new(operation, body, target, now_ms, deadline_ms, extra_wait_ms);
                let query = self.read_your_writes(query);
                self.add_query(query, Some(reply));
            }
            DriverCommand::Nodes { reply } => {
                let _ = reply.send(self.routing.nodes());
            }
            DriverCommand::ReplicaNodes { group, reply } => {
                let _ = reply.send(self.routing.replica_addresses(group));
            }
        }
    }

    fn take_token(&mut self) -> Token {
        let token = self.next_token;
        self.next_token += 1;
        token
    }

    fn add_query(&mut self, query: Query, reply: Option<ReplySender>) -> Token {
        let token = self.take_token();
        let entry = QueryEntry {
            query,
            reply,
            requests: Vec::new(),
        };
        self.queries.insert(token, entry);
        token
    }

    fn on_event(&mut self, event: ConnectionEvent) {
        match event {
            ConnectionEvent::Connected { connection, writer } => {
                self.connections.on_connected(connection, writer);
            }
            ConnectionEvent::Reply { connection, reply } => self.on_reply(connection, &reply),
            ConnectionEvent::Closed { connection, reason } => {
                if let Some(refusal) = reason.strip_prefix(crate::connection::SIGN_IN_REFUSED) {
                    *self
                        .shared
                        .sign_in_refused
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner()) =
                        Some(refusal.to_owned());
                }
                if let Some(address) =
                    self.connections
                        .on_closed(connection, self.now_ms(), &reason)
                {
                    self.on_connection_lost(connection, &address, &reason);
                }
            }
        }
    }

    fn on_reply(&mut self, connection: ConnectionId, message: &Msg<ReplyHeader>) {
        let cluster = message.header().prefix.cluster.get();
        if cluster != self.config.cluster {
            tracing::warn!(
                cluster,
                expected = self.config.cluster,
                "reply from another cluster dropped: check the client's cluster id"
            );
            return;
        }
        self.connections.on_reply(connection);
        let reply = frames::parse_reply(connection, message);
        if reply.group == crate::routing::METADATA_GROUP {
            self.metadata_seen = self.metadata_seen.max(reply.op).max(reply.commit);
        }
        let now_ms = self.now_ms();
        if reply.client == self.query_client {
            let Some(token) = self.query_by_request.get(&reply.request).copied() else {
                self.note_answer(connection, None, now_ms);
                return; // answered already
            };
            let mut actions = Vec::new();
            let round_trip_ms = self.queries.get_mut(&token).and_then(|entry| {
                entry
                    .query
                    .on_reply(reply, now_ms, &self.backoff, &mut self.prng, &mut actions)
            });
            self.note_answer(connection, round_trip_ms, now_ms);
            self.apply_query_actions(token, actions);
            return;
        }
        let group = reply.group;
        let Some(session) = self.sessions.get_mut(&group) else {
            self.note_answer(connection, None, now_ms);
            return; // no session with that group: a stray reply
        };
        if matches!(reply.body, ReplyBody::Ok(_)) {
            self.connections.on_progress(connection, now_ms);
        }
        let mut actions = Vec::new();
        let round_trip_ms = session.on_reply(reply, now_ms, &mut actions);
        self.touched(group);
        self.note_answer(connection, round_trip_ms, now_ms);
        self.apply_session_actions(group, actions);
    }

    /// The node behind `connection` answered: it is healthy, and the
    /// round trip of the attempt it answered (if known) is a latency sample.
    fn note_answer(&mut self, connection: ConnectionId, round_trip_ms: Option<u64>, now_ms: u64) {
        let Some(address) = self.connections.address_of(connection) else {
            return;
        };
        match round_trip_ms {
            Some(round_trip_ms) => {
                self.health
                    .on_answer(address, round_trip_ms.saturating_mul(1_000), now_ms)
            }
            None => self.health.on_alive(address, now_ms),
        }
    }

    /// A connection is gone (closed by us or by the network).
    fn on_connection_lost(&mut self, connection: ConnectionId, address: &str, reason: &str) {
        tracing::debug!(connection, address, reason, "connection lost");
        self.health.on_silent(address, self.now_ms());
        self.routing.on_unreachable(address);
        let groups: Vec<u64> = self.sessions.keys().copied().collect();
        for group in groups {
            if let Some(session) = self.sessions.get_mut(&group) {
                session.on_connection_lost(connection);
            }
            self.touched(group);
        }
        let tokens: Vec<Token> = self.queries.keys().copied().collect();
        for token in tokens {
            let mut actions = Vec::new();
            if let Some(entry) = self.queries.get_mut(&token) {
                entry
                    .query
                    .on_connection_lost(connection, address, reason, &mut actions);
            }
            self.apply_query_actions(token, actions);
        }
    }

    fn close_connection(&mut self, connection: ConnectionId, reason: &str) {
        let now_ms = self.now_ms();
        if let Some(address) = self.connections.close(connection, now_ms, reason) {
            self.on_connection_lost(connection, &address, reason);
        }
    }

    /// A session changed: files its next deadline and marks it ready if it
    /// has something to transmit. Costs the one session, never all of them.
    fn touched(&mut self, group: u64) {
        let Some(session) = self.sessions.get(&group) else {
            return;
        };
        let wake_ms = session.next_wakeup_ms();
        if session.wants_transmit() {
            self.ready.insert(group);
        }
        if let Some(old) = self.timer_of.remove(&group) {
            self.timers.remove(&(old, group));
        }
        if let Some(wake_ms) = wake_ms {
            self.timers.insert((wake_ms, group));
            self.timer_of.insert(group, wake_ms);
        }
    }

    fn tick(&mut self, now_ms: u64) {
        while let Some(&(wake_ms, group)) = self.timers.first() {
            if wake_ms > now_ms {
                break;
            }
            self.timers.pop_first();
            self.timer_of.remove(&group);
            let mut actions = Vec::new();
            let connections = &self.connections;
            if let Some(session) = self.sessions.get_mut(&group) {
                session.on_tick(
                    now_ms,
                    |connection| connections.progress_ms(connection),
                    &mut actions,
                );
            }
            self.touched(group);
            self.apply_session_actions(group, actions);
        }
        let tokens: Vec<Token> = self.queries.keys().copied().collect();
        for token in tokens {
            let mut actions = Vec::new();
            if let Some(entry) = self.queries.get_mut(&token) {
                entry.query.on_tick(now_ms, &mut actions);
            }
            self.apply_query_actions(token, actions);
        }
        if self.refresh_wanted {
            self.start_refresh(now_ms);
        }
    }

    fn next_wakeup_ms(&self, now_ms: u64) -> u64 {
        let sessions = self.timers.first().map(|&(wake_ms, _)| wake_ms).into_iter();
        let queries = self
            .queries
            .values()
            .map(|entry| entry.query.next_wakeup_ms());
        let refresh_paused =
            self.refresh_wanted && !self.refresh_in_flight && self.refresh_not_before_ms > now_ms;
        let refresh = refresh_paused.then_some(self.refresh_not_before_ms);
        let reconnect = self.connections.next_retry_ms(now_ms);
        sessions
            .chain(queries)
            .chain(refresh)
            .chain(reconnect)
            .min()
            .unwrap_or(u64::MAX)
    }
}
