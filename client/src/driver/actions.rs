//! Carrying out what the pure cores decided: a session's or query's actions
//! (answers to callers, redirects, routing refreshes, suspect connections
//! closed), a finished query's outcome (metadata learnt), routing refreshes
//! started.

use bytes::Bytes;
use strand_wire::ops::{MetadataReply, MetadataRequest};
use strand_wire::{Body, Operation};

use crate::error::ClientError;
use crate::frames::ConnectionId;
use crate::query::{Query, QueryAction, QueryTarget};
use crate::session::{Action, Token};

use super::{Driver, REFRESH_INTERVAL_MIN_MS};

impl Driver {
    pub(super) fn apply_session_actions(&mut self, group: u64, actions: Vec<Action>) {
        let mut suspects = Vec::new();
        for action in actions {
            match action {
                Action::Complete { token, outcome } => {
                    if let Some(waiter) = self.waiters.remove(&token) {
                        let _ = waiter.send(outcome); // the caller may have stopped waiting
                    }
                }
                Action::Redirect {
                    view,
                    primary_replica,
                    primary_node,
                    address,
                } => {
                    tracing::debug!(group, view, primary_replica, %address, "redirected");
                    self.routing.on_not_primary(
                        group,
                        view,
                        primary_replica,
                        primary_node,
                        &address,
                    );
                }
                Action::RefreshRouting => self.refresh_wanted = true,
                Action::SuspectConnection { connection } => suspects.push(connection),
                Action::Transmit { .. } => unreachable!("transmits come from poll_transmit"),
            }
        }
        for connection in suspects {
            self.close_connection(connection, "no answer within request_timeout_ms");
        }
    }

    pub(super) fn apply_query_actions(&mut self, token: Token, actions: Vec<QueryAction>) {
        let mut suspects = Vec::new();
        for action in actions {
            match action {
                QueryAction::Finish(outcome) => self.finish_query(token, outcome),
                QueryAction::Redirect {
                    group,
                    view,
                    primary_replica,
                    primary_node,
                    address,
                } => self.routing.on_not_primary(
                    group,
                    view,
                    primary_replica,
                    primary_node,
                    &address,
                ),
                QueryAction::Silent(connection) => {
                    if let Some(address) = self.connections.address_of(connection) {
                        self.health.on_silent(address, self.now_ms());
                    }
                }
                QueryAction::RefreshRouting => self.refresh_wanted = true,
                QueryAction::NextNode => self.routing.next_any_node(),
                QueryAction::SuspectConnection(connection) => suspects.push(connection),
            }
        }
        for connection in suspects {
            // A query that waited behind a node's queue while the node kept
            // committing is asked again there: closing the connection would
            // resend every produce of every group on it.
            if self.committing(connection) {
                continue;
            }
            self.close_connection(connection, "no answer within request_timeout_ms");
        }
    }

    /// Whether the node behind `connection` committed a replicated request
    /// of ours within its attempt timeout (see
    /// [`Session::on_tick`](crate::session::Session::on_tick)).
    fn committing(&self, connection: ConnectionId) -> bool {
        let Some(address) = self.connections.address_of(connection) else {
            return false;
        };
        let timeout_ms = self.health.attempt_timeout_ms(address);
        self.connections
            .progress_ms(connection)
            .is_some_and(|committed| committed + timeout_ms > self.now_ms())
    }

    fn finish_query(&mut self, token: Token, mut outcome: Result<Bytes, ClientError>) {
        let Some(entry) = self.queries.remove(&token) else {
            return;
        };
        for request in &entry.requests {
            self.query_by_request.remove(request);
        }
        if entry.query.operation() == Operation::Metadata {
            if let Ok(body) = &outcome {
                match MetadataReply::from_bytes(body) {
                    Ok(metadata) => {
                        self.health.set_failover_ms(u64::from(metadata.failover_ms));
                        self.routing.apply_metadata(&metadata);
                        // Our own request: it decoded when it was built.
                        if let Ok(request) = MetadataRequest::from_bytes(entry.query.body()) {
                            self.shared.learn(&request, &metadata);
                        }
                    }
                    Err(error) => {
                        outcome = Err(ClientError::from_body_error("metadata reply", error))
                    }
                }
            }
        }
        match entry.reply {
            Some(reply) => {
                let _ = reply.send(outcome);
            }
            None => {
                self.refresh_in_flight = false;
                if let Err(error) = outcome {
                    tracing::debug!(%error, "routing refresh failed");
                }
            }
        }
    }

    /// Starts a routing refresh unless one runs or one ran very recently.
    pub(super) fn start_refresh(&mut self, now_ms: u64) -> Option<Token> {
        if self.refresh_in_flight || now_ms < self.refresh_not_before_ms {
            return None;
        }
        self.refresh_wanted = false;
        self.refresh_in_flight = true;
        self.refresh_not_before_ms = now_ms + REFRESH_INTERVAL_MIN_MS;
        let body = Bytes::from(MetadataRequest::default().to_vec());
        let query = Query::new(
            Operation::Metadata,
            body,
            QueryTarget::AnyNode,
            now_ms,
            self.config.request_timeout_ms,
            0,
        );
        let query = self.read_your_writes(query);
        Some(self.add_query(query, None))
    }

    /// A metadata query must see every metadata op this client has seen.
    pub(super) fn read_your_writes(&self, query: Query) -> Query {
        match query.operation() {
            Operation::Metadata => query.with_commit_min(self.metadata_seen),
            _ => query,
        }
    }
}
