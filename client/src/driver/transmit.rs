//! Sending: every session and query that may transmit now goes to the node
//! its route names, over a connection made if need be, with the attempt
//! timeout the node's health gives.

use crate::error::ClientError;
use crate::frames;
use crate::query::{QueryAction, QueryTarget};
use crate::session::{Action, Session, Token};

use super::Driver;

impl Driver {
    /// Sends everything that can go now.
    pub(super) fn pump(&mut self, now_ms: u64) {
        for group in std::mem::take(&mut self.ready) {
            self.pump_session(group, now_ms);
        }
        if self.refresh_wanted {
            self.start_refresh(now_ms);
        }
        let tokens: Vec<Token> = self
            .queries
            .iter()
            .filter(|(_, entry)| entry.query.wants_transmit())
            .map(|(token, _)| *token)
            .collect();
        for token in tokens {
            self.pump_query(token, now_ms);
        }
        // A route was missing above: ask for one now rather than at the next wakeup.
        if self.refresh_wanted {
            if let Some(token) = self.start_refresh(now_ms) {
                self.pump_query(token, now_ms);
            }
        }
    }

    /// Transmits what the group's session may send now. Without a route or
    /// a connection the group stays ready for the next turn.
    fn pump_session(&mut self, group: u64, now_ms: u64) {
        if !self
            .sessions
            .get(&group)
            .is_some_and(Session::wants_transmit)
        {
            return;
        }
        let Some(address) = self.routing.primary_address(group) else {
            self.refresh_wanted = true; // no route yet (a new topic's group)
            self.ready.insert(group);
            return;
        };
        let Some(connection) = self.connections.ensure(&address, now_ms) else {
            self.ready.insert(group);
            return; // reconnecting later; the wakeup covers it
        };
        let attempt_timeout_ms = self.health.attempt_timeout_ms(&address);
        let mut actions = Vec::new();
        if let Some(session) = self.sessions.get_mut(&group) {
            session.poll_transmit(now_ms, connection, attempt_timeout_ms, &mut actions);
        }
        self.touched_after_transmit(group);
        for action in actions {
            let Action::Transmit {
                client,
                request,
                operation,
                body,
                ..
            } = action
            else {
                unreachable!("poll_transmit only transmits");
            };
            let frame = frames::request_frame(
                self.config.cluster,
                group,
                client,
                request,
                operation,
                &body,
            );
            self.connections.send(connection, frame);
        }
    }

    fn pump_query(&mut self, token: Token, now_ms: u64) {
        let Some(entry) = self.queries.get(&token) else {
            return;
        };
        let target = entry.query.target().clone();
        let health = &self.health;
        let address = match &target {
            QueryTarget::AnyNode => self
                .routing
                .any_address_where(|address| !health.is_suspect(address, now_ms)),
            QueryTarget::Group(group) => self.routing.primary_address(*group),
            QueryTarget::Node(address) => Some(address.clone()),
        };
        let Some(address) = address else {
            self.refresh_wanted |= matches!(target, QueryTarget::Group(_));
            return;
        };
        let Some(connection) = self.connections.ensure(&address, now_ms) else {
            if let QueryTarget::Node(address) = target {
                let reason = self.connections.last_failure(&address);
                let error = ClientError::Unreachable { address, reason };
                self.apply_query_actions(token, vec![QueryAction::Finish(Err(error))]);
            }
            return;
        };
        let group = match target {
            QueryTarget::Group(group) => group,
            QueryTarget::AnyNode | QueryTarget::Node(_) => crate::routing::METADATA_GROUP,
        };
        let request = self.next_query_request;
        self.next_query_request += 1;
        let Some(entry) = self.queries.get_mut(&token) else {
            return;
        };
        // A question any node can answer moves on soon; so does one for a
        // node that lately did not answer (it gets a round trip's chance).
        let short = entry.query.is_hedged()
            || (matches!(target, QueryTarget::Node(_)) && self.health.is_suspect(&address, now_ms));
        let attempt_timeout_ms = if short {
            self.health.hedge_ms(&address)
        } else {
            self.health.attempt_timeout_ms(&address)
        };
        let frame = frames::request_frame(
            self.config.cluster,
            group,
            self.query_client,
            request,
            entry.query.operation(),
            entry.query.body(),
        );
        entry
            .query
            .transmitted(connection, request, now_ms, attempt_timeout_ms);
        entry.requests.push(request);
        self.query_by_request.insert(request, token);
        self.connections.send(connection, frame);
    }

    /// Files the session's new deadline after a transmit; what it could not
    /// send (a full window) waits for a reply, which marks it ready again.
    fn touched_after_transmit(&mut self, group: u64) {
        let ready_before = self.ready.contains(&group);
        self.touched(group);
        if !ready_before {
            self.ready.remove(&group);
        }
    }
}
