//! The network and the clock: frames delivered one by one (or dropped on
//! a cut link), ticks, and the node-level liveness signal a driver gives
//! its replicas.

use strand_consensus::*;

use super::{Cluster, LIVENESS_SUSPECT_TICKS};

impl Cluster {
    /// Delivers one queued message (if its link is up).
    pub fn deliver_one(&mut self) -> bool {
        let Some((from, to, message)) = self.network.pop_front() else {
            return false;
        };
        if self.cut.contains(&(from, to)) || !self.up(to) || !self.up(from) {
            return true;
        }
        let mut effects = Effects::new();
        self.replicas[usize::from(to)]
            .as_mut()
            .expect("up")
            .on_message(message, &mut effects);
        self.execute(to, effects);
        true
    }

    /// Delivers until the network is quiet (bounded).
    pub fn deliver_all(&mut self) {
        for _ in 0..100_000 {
            if !self.deliver_one() {
                return;
            }
        }
        panic!("the network never went quiet");
    }

    /// Ticks every live replica `ticks` times, delivering messages after each.
    pub fn tick(&mut self, ticks: u64) {
        for _ in 0..ticks {
            for index in 0..self.count() {
                if let Some(replica) = self.replicas[usize::from(index)].as_mut() {
                    let mut effects = Effects::new();
                    replica.on_tick(&mut effects);
                    self.execute(index, effects);
                }
            }
            self.watch_liveness();
            self.deliver_all();
        }
    }

    /// Ticks replica `index` alone `ticks` times, delivering nothing: time
    /// passes for it while its messages wait in the network.
    pub fn tick_only(&mut self, index: u8, ticks: u64) {
        for _ in 0..ticks {
            self.act(index, |replica, effects| replica.on_tick(effects));
        }
    }

    /// Room in the liveness table for every replica slot there is.
    pub(super) fn grow_liveness(&mut self) {
        let count = self.replicas.len();
        let now = self.now;
        self.liveness.resize(count, Vec::new());
        for row in &mut self.liveness {
            row.resize(count, (now, true));
        }
    }

    /// The node-level liveness signal: each live replica hears of every
    /// live peer whose link to it is up; one silent for
    /// [`LIVENESS_SUSPECT_TICKS`] is suspected, and the replica is told of
    /// every change.
    pub fn watch_liveness(&mut self) {
        self.now += 1;
        self.grow_liveness();
        for observer in 0..self.count() {
            if !self.up(observer) {
                continue;
            }
            for peer in (0..self.count()).filter(|peer| *peer != observer) {
                let heard = self.up(peer) && !self.cut.contains(&(peer, observer));
                let entry = &mut self.liveness[usize::from(observer)][usize::from(peer)];
                if heard {
                    entry.0 = self.now;
                }
                let alive = self.now - entry.0 <= LIVENESS_SUSPECT_TICKS;
                if alive == entry.1 {
                    continue;
                }
                entry.1 = alive;
                self.act(observer, |replica, effects| {
                    replica.on_peer_liveness(peer, alive, effects)
                });
            }
        }
    }

    /// Tells `observer` directly that the node-level liveness of `peer`
    /// changed, as a driver whose signal lags would.
    pub fn signal_liveness(&mut self, observer: u8, peer: u8, alive: bool) {
        self.act(observer, |replica, effects| {
            replica.on_peer_liveness(peer, alive, effects)
        });
        self.deliver_all();
    }

    /// Crashes `index` and runs until the node-level liveness suspects it
    /// and another replica serves as primary; returns that primary.
    pub fn fail_over_from(&mut self, index: u8) -> u8 {
        self.crash(index);
        self.tick(LIVENESS_SUSPECT_TICKS + 200);
        let primary = self.primary().expect("a new primary");
        assert_ne!(primary, index, "the crashed replica does not serve");
        primary
    }

    /// Cuts every link to and from `index`.
    pub fn isolate(&mut self, index: u8) {
        for other in 0..self.count() {
            if other != index {
                self.cut.insert((index, other));
                self.cut.insert((other, index));
            }
        }
    }

    /// Restores every link to and from `index`.
    pub fn heal(&mut self, index: u8) {
        self.cut.retain(|(from, to)| *from != index && *to != index);
    }

    /// The replica serving as primary in the highest view, if any.
    pub fn primary(&self) -> Option<u8> {
        (0..self.count())
            .filter(|index| self.up(*index) && self.replica(*index).is_serving_primary())
            .max_by_key(|index| self.replica(*index).view())
    }
}
