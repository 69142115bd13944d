//! The simulated network: per-link latency, loss, duplication, reordering
//! (by random latency), and partitions that change over time.
//!
//! Endpoints are replicas (their slots, below `CLIENT_BASE`) and clients
//! (`CLIENT_BASE + index`). A frame goes to whichever replica occupies the
//! slot it names, so replicas that join at new slots are reached as soon as
//! they run.

use std::collections::{BTreeMap, BTreeSet};

use strand_prng::Prng;
use strand_wire::Message;

use crate::options::Options;

/// Endpoint numbers at and above this are clients.
pub const CLIENT_BASE: u16 = 100;

/// A message on its way.
#[derive(Debug, Clone)]
pub struct Packet {
    /// Sender endpoint.
    pub from: u16,
    /// Receiver endpoint.
    pub to: u16,
    /// The frame.
    pub message: Message,
}

/// The shape of the current partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionKind {
    /// Nothing blocked.
    Whole,
    /// One replica cut off both ways.
    Isolated,
    /// One replica can send but not receive (or the reverse).
    Asymmetric,
    /// The replicas split in two groups.
    Split,
}

/// The network between replicas and clients.
#[derive(Debug)]
pub struct Network {
    /// Packets by (delivery tick, sequence).
    in_flight: BTreeMap<(u64, u64), Packet>,
    sequence: u64,
    /// Blocked directed replica links.
    blocked: BTreeSet<(u16, u16)>,
    /// Current partition shape.
    pub partition: PartitionKind,
    latency_min_ticks: u64,
    latency_max_ticks: u64,
    loss_ppm: u64,
    duplicate_ppm: u64,
    /// Packets dropped so far.
    pub dropped: u64,
}

impl Network {
    /// An empty, whole network.
    pub fn new(options: &Options) -> Network {
        Network {
            in_flight: BTreeMap::new(),
            sequence: 0,
            blocked: BTreeSet::new(),
            partition: PartitionKind::Whole,
            latency_min_ticks: options.latency_min_ticks,
            latency_max_ticks: options.latency_max_ticks,
            loss_ppm: options.loss_ppm,
            duplicate_ppm: options.duplicate_ppm,
            dropped: 0,
        }
    }

    /// Sends a packet now; it arrives after a random latency, unless lost or blocked.
    pub fn send(&mut self, now: u64, packet: Packet, prng: &mut Prng, faulty: bool) {
        if self.blocked.contains(&(packet.from, packet.to)) {
            self.dropped += 1;
            return;
        }
        if faulty && prng.chance(self.loss_ppm, 1_000_000) {
            self.dropped += 1;
            return;
        }
        let copies = if faulty && prng.chance(self.duplicate_ppm, 1_000_000) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let spread = self.latency_max_ticks - self.latency_min_ticks;
            let latency = self.latency_min_ticks + prng.below(spread + 1);
            self.sequence += 1;
            self.in_flight
                .insert((now + latency.max(1), self.sequence), packet.clone());
        }
    }

    /// Takes every packet due at or before `now`, in delivery order.
    pub fn due(&mut self, now: u64) -> Vec<Packet> {
        let later = self.in_flight.split_off(&(now + 1, 0));
        let due = std::mem::replace(&mut self.in_flight, later);
        due.into_values()
            .filter(|packet| {
                let blocked = self.blocked.contains(&(packet.from, packet.to));
                if blocked {
                    self.dropped += 1;
                }
                !blocked
            })
            .collect()
    }

    /// Drops every packet to or from `endpoint` (a crash loses its sockets).
    pub fn forget(&mut self, endpoint: u16) {
        self.in_flight
            .retain(|_, packet| packet.from != endpoint && packet.to != endpoint);
    }

    /// Heals every partition.
    pub fn heal(&mut self) {
        self.blocked.clear();
        self.partition = PartitionKind::Whole;
    }

    /// Replaces the partition with a random one among the replicas at
    /// `slots` (ascending; those that exist right now).
    pub fn repartition(&mut self, prng: &mut Prng, slots: &[u16]) {
        self.heal();
        let count = slots.len();
        if count < 2 {
            return;
        }
        let victim = slots[prng.below(count as u64) as usize];
        let others = slots.iter().copied().filter(move |other| *other != victim);
        match prng.below(3) {
            0 => {
                self.partition = PartitionKind::Isolated;
                for other in others {
                    self.blocked.insert((victim, other));
                    self.blocked.insert((other, victim));
                }
            }
            1 => {
                self.partition = PartitionKind::Asymmetric;
                let outgoing = prng.chance(1, 2);
                for other in others {
                    if outgoing {
                        self.blocked.insert((victim, other));
                    } else {
                        self.blocked.insert((other, victim));
                    }
                }
            }
            _ => {
                self.partition = PartitionKind::Split;
                let side: Vec<bool> = slots.iter().map(|_| prng.chance(1, 2)).collect();
                for (a, side_a) in slots.iter().zip(&side) {
                    for (b, side_b) in slots.iter().zip(&side) {
                        if side_a != side_b {
                            self.blocked.insert((*a, *b));
                        }
                    }
                }
            }
        }
    }

    /// Packets still travelling.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}
