//! Carrying out what the group's host puts out: frames to peer replicas
//! (through the shard's outbox), replies to clients, commits (followed
//! once per settle), events, write-stage latencies, quarantines and
//! transfers, the host's stop.

use std::time::Instant;

use strand_host::group_host::Output;
use strand_wire::{Message, Msg, ResultCode};

use super::{Actor, LATENCIES_TRACKED_MAX};
use crate::metrics;
use crate::net::replies::{frame_of, with_redirect};

impl Actor {
    /// Carries out what the host put out.
    pub(super) fn on_output(&mut self, output: Output) {
        match output {
            Output::Send { to, message } => self.send_to_replica(to, message),
            Output::Reply(reply) => {
                // A client told its op committed finds the catalog and the
                // reads it made possible already published.
                if std::mem::take(&mut self.committed_unhandled) {
                    self.on_commit();
                }
                self.reply(reply)
            }
            Output::Committed { .. } => self.committed_unhandled = true,
            Output::Event(event) => self.on_event(event),
            Output::WriteStage { op, durable: false } => {
                if self.write_queued.len() < LATENCIES_TRACKED_MAX {
                    self.write_queued.insert(op, Instant::now());
                }
            }
            Output::WriteStage { op, durable: true } => {
                if let Some(queued) = self.write_queued.remove(&op) {
                    metrics::write_durable(queued.elapsed());
                }
            }
            Output::Quarantined { agreed_op } => {
                let _span = self.span().entered();
                tracing::warn!(
                    agreed_op,
                    "group: partition quarantined; a transfer follows"
                );
            }
            Output::TransferInstalled { op } => {
                let _span = self.span().entered();
                tracing::info!(op, "group: state transfer installed");
                metrics::state_transfer_installed(&self.label);
                // The metadata plane's catalog was rebuilt from the transfer.
                self.committed_unhandled = true;
            }
            Output::Stop => self.stopping = true,
        }
    }

    /// Adds a frame to replica `to` to its node's batch of this turn.
    pub(super) fn send_to_replica(&mut self, to: u8, message: Message) {
        let Some(node) = self.spec.node_at(to) else {
            tracing::error!(to, "group: effect names a replica outside the group");
            return;
        };
        self.outbox
            .lock()
            .expect("outbox lock")
            .push(&self.shared, node, &message);
    }

    /// Sends a reply the host made to its client (with the primary's
    /// address on a redirect), timing a produce's latency.
    pub(super) fn reply(&mut self, reply: Msg<strand_wire::ReplyHeader>) {
        let header = *reply.header();
        let key = (header.client.get(), header.request.get());
        if let Some(started) = self.produce_started.remove(&key)
            && header.result.get() == ResultCode::Ok as u16
        {
            metrics::produce_latency(started.elapsed());
        }
        let shared = &self.shared;
        let reply = with_redirect(reply, &self.spec.slots, |node| shared.client_address(node));
        let frame = Message::Reply(reply);
        let _ = self.shared.reply(header.client.get(), frame_of(&frame));
    }

    /// What follows the commits of a settle, once: the metadata plane's
    /// duties on group 0, the long polls the new records answer on a
    /// partition.
    pub(super) fn on_commit(&mut self) {
        match &mut self.plane {
            Some(plane) => plane.after_commit(&self.shared, &self.host),
            None => self.serve_parked(),
        }
    }
}
