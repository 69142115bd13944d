//! Per-node health as this client sees it: which nodes lately did not
//! answer (they are tried last until they answer again or a while passes),
//! and each node's reply latency, smoothed the way TCP's retransmission
//! timer smooths round trips (RFC 6298). From both comes how long one
//! attempt may go unanswered before the next candidate is tried. Pure: the
//! clock is passed in.
//!
//! The attempt timeout is the cluster's failover time (how long a silent
//! primary takes to be replaced, from the metadata), raised to the node's
//! own retransmission timeout when it is slower than that, and capped by
//! the configured ceiling. A request that waits longer than a failover on a
//! node that does not answer gains nothing: by then another replica serves.
//! It is not shorter either, so that a backup which still names the silent
//! node as primary, once an attempt gave up, is one that still hears it (the
//! backups' own primary timeout is shorter): such a redirect is followed.

use std::collections::BTreeMap;

/// The attempt timeout before the cluster's failover time is known.
pub const BOOTSTRAP_ATTEMPT_MS: u64 = 1_000;

/// The shortest attempt timeout ever used.
pub const ATTEMPT_MS_MIN: u64 = 50;

/// How long a query that any node can answer waits for one node before it
/// also asks the next, when that node's latency is not known yet.
pub const HEDGE_MS_DEFAULT: u64 = 200;

/// The shortest wait before a query that any node can answer asks the next.
pub const HEDGE_MS_MIN: u64 = 50;

/// A node that did not answer is tried last for this many failover times
/// (at least [`SUSPECT_MS_MIN`]), unless it answers sooner.
const SUSPECT_FAILOVERS: u64 = 3;

/// The shortest time a node that did not answer is tried last.
pub const SUSPECT_MS_MIN: u64 = 1_000;

/// Nodes tracked at most; beyond it the one heard from longest ago is
/// forgotten (a cluster has far fewer nodes; addresses come from metadata).
pub const NODES_TRACKED_MAX: usize = 1_024;

/// Round-trip estimate of one node, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Latency {
    smoothed_us: u64,
    variation_us: u64,
}

impl Latency {
    fn first(sample_us: u64) -> Latency {
        Latency {
            smoothed_us: sample_us,
            variation_us: sample_us / 2,
        }
    }

    /// RFC 6298: variation = 3/4 variation + 1/4 |smoothed - sample|, then
    /// smoothed = 7/8 smoothed + 1/8 sample.
    fn update(&mut self, sample_us: u64) {
        let deviation = self.smoothed_us.abs_diff(sample_us);
        self.variation_us = (3 * self.variation_us + deviation) / 4;
        self.smoothed_us = (7 * self.smoothed_us + sample_us) / 8;
    }

    fn retransmit_ms(&self) -> u64 {
        (self.smoothed_us + 4 * self.variation_us).div_ceil(1_000)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct NodeHealth {
    latency: Option<Latency>,
    /// Tried last until then (0: not suspected).
    suspect_until_ms: u64,
    /// When it was last heard from or suspected (for forgetting).
    touched_ms: u64,
}

/// Every node's health, and the cluster's failover time.
#[derive(Debug, Clone)]
pub struct Health {
    nodes: BTreeMap<String, NodeHealth>,
    /// From the metadata (0: not known yet).
    failover_ms: u64,
    /// The longest one attempt may wait (the client's `request_timeout_ms`).
    ceiling_ms: u64,
}

impl Health {
    /// No node known yet; attempts wait at most `ceiling_ms`.
    pub fn new(ceiling_ms: u64) -> Health {
        assert!(ceiling_ms >= 1, "an attempt ceiling of 0 ms");
        Health {
            nodes: BTreeMap::new(),
            failover_ms: 0,
            ceiling_ms,
        }
    }

    /// Takes the cluster's failover time from a metadata reply (0: the
    /// node did not say; the last known value stays).
    pub fn set_failover_ms(&mut self, failover_ms: u64) {
        if failover_ms > 0 {
            self.failover_ms = failover_ms;
        }
    }

    /// How long an attempt to `address` may go unanswered before the next
    /// candidate is tried.
    pub fn attempt_timeout_ms(&self, address: &str) -> u64 {
        let base = if self.failover_ms == 0 {
            BOOTSTRAP_ATTEMPT_MS
        } else {
            self.failover_ms
        };
        let own = self.retransmit_ms(address).unwrap_or(0);
        base.max(own)
            .max(ATTEMPT_MS_MIN)
            .min(self.ceiling_ms.max(ATTEMPT_MS_MIN))
    }

    /// How long a question any node can answer waits for `address` before
    /// it is asked of the next node too.
    pub fn hedge_ms(&self, address: &str) -> u64 {
        let own = self.retransmit_ms(address).unwrap_or(HEDGE_MS_DEFAULT);
        own.max(HEDGE_MS_MIN).min(self.attempt_timeout_ms(address))
    }

    fn retransmit_ms(&self, address: &str) -> Option<u64> {
        let latency = self.nodes.get(address)?.latency?;
        Some(latency.retransmit_ms())
    }

    /// `address` answered an attempt after `round_trip_us`: it is healthy.
    pub fn on_answer(&mut self, address: &str, round_trip_us: u64, now_ms: u64) {
        let node = self.entry(address, now_ms);
        node.suspect_until_ms = 0;
        match &mut node.latency {
            Some(latency) => latency.update(round_trip_us),
            None => node.latency = Some(Latency::first(round_trip_us)),
        }
    }

    /// `address` answered something (its latency unknown): it is healthy.
    pub fn on_alive(&mut self, address: &str, now_ms: u64) {
        self.entry(address, now_ms).suspect_until_ms = 0;
    }

    /// `address` did not answer in time, or its connection failed: it is
    /// tried last for a while.
    pub fn on_silent(&mut self, address: &str, now_ms: u64) {
        let suspect_ms = (self.failover_ms * SUSPECT_FAILOVERS).max(SUSPECT_MS_MIN);
        self.entry(address, now_ms).suspect_until_ms = now_ms + suspect_ms;
    }

    /// True while `address` is tried last.
    pub fn is_suspect(&self, address: &str, now_ms: u64) -> bool {
        self.nodes
            .get(address)
            .is_some_and(|node| node.suspect_until_ms > now_ms)
    }

    /// The node's entry, made on first sight (the only allocation: a reply
    /// from a known node allocates nothing).
    fn entry(&mut self, address: &str, now_ms: u64) -> &mut NodeHealth {
        if self.nodes.contains_key(address) {
            let node = self.nodes.get_mut(address).expect("checked above");
            node.touched_ms = now_ms;
            return node;
        }
        if self.nodes.len() >= NODES_TRACKED_MAX {
            let oldest = self
                .nodes
                .iter()
                .min_by_key(|(_, node)| node.touched_ms)
                .map(|(address, _)| address.clone());
            if let Some(oldest) = oldest {
                self.nodes.remove(&oldest);
            }
        }
        let node = self.nodes.entry(address.to_owned()).or_default();
        node.touched_ms = now_ms;
        node
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_the_metadata_an_attempt_waits_the_bootstrap_time_under_the_ceiling() {
        assert_eq!(Health::new(5_000).attempt_timeout_ms("a"), 1_000);
        assert_eq!(Health::new(300).attempt_timeout_ms("a"), 300);
        assert_eq!(Health::new(1).attempt_timeout_ms("a"), ATTEMPT_MS_MIN);
    }

    #[test]
    fn an_attempt_waits_a_failover_unless_the_node_is_slower() {
        let mut health = Health::new(5_000);
        health.set_failover_ms(700);
        health.set_failover_ms(0); // a node that did not say changes nothing
        assert_eq!(health.attempt_timeout_ms("a"), 700);
        for _ in 0..20 {
            health.on_answer("a", 2_000, 0); // 2 ms round trips
        }
        assert_eq!(
            health.attempt_timeout_ms("a"),
            700,
            "fast: the failover time"
        );
        for _ in 0..40 {
            health.on_answer("slow", 900_000, 0); // 900 ms round trips
        }
        let slow = health.attempt_timeout_ms("slow");
        assert!((900..=1_000).contains(&slow), "{slow}");
        for _ in 0..40 {
            health.on_answer("slower", 9_000_000, 0);
        }
        assert_eq!(health.attempt_timeout_ms("slower"), 5_000, "capped");
    }

    #[test]
    fn a_varying_latency_raises_the_timeout_above_the_mean() {
        let mut health = Health::new(60_000);
        health.set_failover_ms(100);
        for round in 0..50 {
            let sample_us = if round % 2 == 0 { 100_000 } else { 900_000 };
            health.on_answer("a", sample_us, 0);
        }
        let timeout = health.attempt_timeout_ms("a");
        assert!(timeout > 900, "mean 500 ms, swings of 400: {timeout}");
    }

    #[test]
    fn hedges_wait_a_round_trip_estimate_within_bounds() {
        let mut health = Health::new(5_000);
        health.set_failover_ms(700);
        assert_eq!(health.hedge_ms("new"), HEDGE_MS_DEFAULT);
        health.on_answer("fast", 100, 0);
        assert_eq!(health.hedge_ms("fast"), HEDGE_MS_MIN);
        for _ in 0..40 {
            health.on_answer("slow", 3_000_000, 0);
        }
        assert_eq!(health.hedge_ms("slow"), health.attempt_timeout_ms("slow"));
    }

    #[test]
    fn a_silent_node_is_suspect_until_it_answers_or_the_time_passes() {
        let mut health = Health::new(5_000);
        health.set_failover_ms(700);
        health.on_silent("a", 1_000);
        assert!(health.is_suspect("a", 1_000));
        assert!(health.is_suspect("a", 3_099));
        assert!(!health.is_suspect("a", 3_100), "three failovers later");
        assert!(!health.is_suspect("b", 1_000));
        health.on_silent("a", 5_000);
        health.on_alive("a", 5_001);
        assert!(!health.is_suspect("a", 5_002));
        health.on_silent("a", 6_000);
        health.on_answer("a", 1_000, 6_001);
        assert!(!health.is_suspect("a", 6_002));
    }

    #[test]
    fn the_table_is_bounded() {
        let mut health = Health::new(5_000);
        for node in 0..NODES_TRACKED_MAX as u64 + 10 {
            health.on_silent(&format!("node-{node}"), node);
        }
        assert_eq!(health.nodes.len(), NODES_TRACKED_MAX);
        assert!(
            !health.nodes.contains_key("node-0"),
            "the oldest went first"
        );
    }
}
