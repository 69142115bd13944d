//! Node-level liveness, as the server's bus runs it: every replica pings
//! every other slot each [`PING_TICKS`] through the simulated network (so
//! partitions, loss and crashes silence it as they do the real thing), and
//! tells its host when a peer has been silent for [`SUSPECT_TICKS`] or is
//! heard again. Quiet groups rely on this signal alone to notice a dead
//! primary.

use bytes::Bytes;
use strand_wire::{CommandHeader, Message, Msg, PingHeader, ViewId};

use super::{CLUSTER, World};
use crate::checkers::Violation;

/// How often a replica pings its peers (the heartbeat interval).
pub const PING_TICKS: u64 = 5;

/// Silence after which a peer is suspected (a heartbeat timeout).
pub const SUSPECT_TICKS: u64 = 30;

/// What each replica heard of each slot, and what it told its host.
#[derive(Debug, Default)]
pub struct Liveness {
    /// `[observer][peer]`: the tick the observer last heard the peer.
    heard: Vec<Vec<u64>>,
    /// `[observer][peer]`: whether the observer's host was told it lives.
    told_alive: Vec<Vec<bool>>,
}

impl Liveness {
    /// A table for `slots` slots.
    pub fn new(slots: usize) -> Liveness {
        Liveness {
            heard: vec![vec![0; slots]; slots],
            told_alive: vec![vec![true; slots]; slots],
        }
    }

    /// A replica (re)started: it has heard everyone just now, as a node
    /// that has just connected to its peers assumes them alive.
    pub fn started(&mut self, observer: u8, now: u64) {
        let observer = usize::from(observer);
        self.heard[observer].fill(now);
        self.told_alive[observer].fill(true);
    }

    /// `observer` heard a ping from `peer`.
    pub fn heard(&mut self, observer: u8, peer: u8, now: u64) {
        if let Some(row) = self.heard.get_mut(usize::from(observer))
            && let Some(heard) = row.get_mut(usize::from(peer))
        {
            *heard = now;
        }
    }
}

impl World {
    /// Pings from every running replica, when due.
    pub(super) fn send_liveness_pings(&mut self) {
        if self.now % PING_TICKS != 0 {
            return;
        }
        for from in self.slots() {
            if self.hosts[usize::from(from)].is_none() {
                continue;
            }
            for to in self.slots().filter(|to| *to != from) {
                // A node-level ping names no group, and its node.
                let mut header = PingHeader::new(CLUSTER, 0, ViewId::ZERO, 0);
                header.node.set(u32::from(from));
                let ping = Message::Ping(Msg::new(header, Bytes::new()));
                self.post(u16::from(from), u16::from(to), ping);
            }
        }
    }

    /// Tells each running replica's host of every peer whose liveness
    /// changed since it was last told.
    pub(super) fn report_liveness(&mut self) -> Result<(), Violation> {
        for observer in self.slots() {
            if self.hosts[usize::from(observer)].is_none() {
                continue;
            }
            for peer in self.slots().filter(|peer| *peer != observer) {
                if self.hosts[usize::from(observer)].is_none() {
                    break; // it died at a power loss while told
                }
                let (o, p) = (usize::from(observer), usize::from(peer));
                let alive = self.now - self.liveness.heard[o][p] <= SUSPECT_TICKS;
                if alive == self.liveness.told_alive[o][p] {
                    continue;
                }
                self.liveness.told_alive[o][p] = alive;
                self.trace.record(
                    self.now,
                    u16::from(observer),
                    "liveness",
                    &[u64::from(peer), u64::from(alive)],
                );
                self.run_host(observer, |host, _| host.on_peer_liveness(peer, alive))?;
            }
        }
        Ok(())
    }
}
