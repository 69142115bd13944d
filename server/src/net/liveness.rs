//! Node-level liveness: one signal per peer node for all groups. A `Ping`
//! goes to every peer each heartbeat interval, so a peer hears this node
//! even when every group is quiet; a peer silent past its
//! `SilenceLimit` is suspected, and every shard hears of each change.
//! Quiet groups rely on it to notice a dead primary. The watcher never
//! blames a peer for this node's own stall (`StallGuard`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use strand_consensus::Timeouts;

use crate::metrics;
use crate::net::ping::ping_frame;
use crate::runtime::inbox::LivenessNotifier;
use crate::shared::Shared;

/// Node-level liveness, one signal per peer for all groups: a `Ping` to
/// every peer each heartbeat interval (so a peer hears this node even when
/// every group is quiet), and a peer silent for longer than its
/// `SilenceLimit` (any frame counts) is suspected; the shards hear of
/// every change. Quiet groups rely on it to notice a dead primary.
pub async fn watch_liveness(shared: Arc<Shared>, shards: LivenessNotifier) {
    let timeouts = Timeouts::default();
    let tick_ms = shared.config.tick_ms;
    let ping_ms = timeouts.heartbeat_ticks * tick_ms;
    let suspect_ms = timeouts.primary_ticks * tick_ms;
    let peers: Vec<u32> = shared
        .config
        .peers
        .iter()
        .map(|peer| peer.id)
        .filter(|peer| *peer != shared.config.node)
        .collect();
    let mut interval = tokio::time::interval(Duration::from_millis(tick_ms));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_ping_ms = 0u64;
    let started = std::time::Instant::now();
    let mut stalls = StallGuard::new(suspect_ms / 2, 2 * tick_ms);
    let mut limits: BTreeMap<u32, SilenceLimit> = peers
        .iter()
        .map(|peer| (*peer, SilenceLimit::new(suspect_ms, SILENCE_LIMIT_MAX_MS)))
        .collect();
    loop {
        interval.tick().await;
        if shared.stopping() {
            return;
        }
        let now_ms = started.elapsed().as_millis() as u64;
        let may_suspect = stalls.may_suspect(now_ms);
        if now_ms >= last_ping_ms + ping_ms {
            last_ping_ms = now_ms;
            let ping = ping_frame(&shared);
            for peer in &peers {
                // A full queue carries frames anyway: the peer hears those.
                let _ = shared.send_to_node(*peer, ping.clone());
            }
        }
        for peer in &peers {
            metrics::bus_queued_bytes(*peer, shared.queued_bytes_to(*peer));
            let silent_ms = shared.silent_ms(*peer);
            let limit = limits.get_mut(peer).expect("a limit per peer");
            let limit_before_ms = limit.limit_ms(now_ms);
            let limit_ms = limit.observe(now_ms, silent_ms);
            if limit_ms != limit_before_ms {
                metrics::peer_silence_limit(*peer, limit_ms);
            }
            let suspected = silent_ms > limit_ms;
            if suspected && !may_suspect {
                continue;
            }
            if shared.set_suspected(*peer, suspected) {
                tracing::info!(
                    peer,
                    suspected,
                    silent_ms,
                    limit_ms,
                    "bus: peer liveness changed"
                );
                metrics::peer_suspected(*peer, suspected);
                shards.liveness(*peer, !suspected);
            }
        }
    }
}

/// The longest a peer may be silent before it is suspected, however long
/// the silences it ended lately.
pub const SILENCE_LIMIT_MAX_MS: u64 = 1_000;

/// How long a silence a peer ended is remembered (between one and two of
/// these).
const SILENCE_WINDOW_MS: u64 = 30_000;

/// How long one peer may be silent before it is suspected: the primary
/// timeout, raised to twice the longest silence the peer ended within the
/// last [`SILENCE_WINDOW_MS`] or so, up to [`SILENCE_LIMIT_MAX_MS`].
///
/// On a machine whose cores are oversubscribed a live node's process can
/// go unscheduled for hundreds of milliseconds (over 1,000 partitions on 2
/// cores every thread waited for a core 5 to 10 times as long as it ran, and
/// the watcher was woken up to 412 ms late). A fixed limit then suspected
/// a live peer for a moment, and every quiet backup of that peer's groups
/// voted to leave its view (about 600 view changes in one run). Silences a
/// peer ended show how long it goes quiet while alive; a dead peer's
/// silence never ends, so it never raises its own limit. A peer that kept
/// its silences short is suspected after the primary timeout, as before.
#[derive(Debug)]
struct SilenceLimit {
    base_ms: u64,
    max_ms: u64,
    /// The silence the last check found (a smaller one since: heard again).
    last_silence_ms: u64,
    window_start_ms: u64,
    /// The longest silence ended in this window, and in the one before.
    window_max_ms: u64,
    previous_max_ms: u64,
}

impl SilenceLimit {
    fn new(base_ms: u64, max_ms: u64) -> SilenceLimit {
        assert!(
            0 < base_ms && base_ms <= max_ms,
            "a limit of {base_ms}..={max_ms} ms"
        );
        SilenceLimit {
            base_ms,
            max_ms,
            last_silence_ms: 0,
            window_start_ms: 0,
            window_max_ms: 0,
            previous_max_ms: 0,
        }
    }

    /// A check at `now_ms` found the peer silent for `silence_ms`: learns
    /// from a silence that ended, and returns the limit now.
    fn observe(&mut self, now_ms: u64, silence_ms: u64) -> u64 {
        self.roll(now_ms);
        if silence_ms < self.last_silence_ms {
            self.window_max_ms = self.window_max_ms.max(self.last_silence_ms);
        }
        self.last_silence_ms = silence_ms;
        self.limit_ms(now_ms)
    }

    /// The limit at `now_ms`.
    fn limit_ms(&mut self, now_ms: u64) -> u64 {
        self.roll(now_ms);
        let longest = self.window_max_ms.max(self.previous_max_ms);
        longest.saturating_mul(2).clamp(self.base_ms, self.max_ms)
    }

    fn roll(&mut self, now_ms: u64) {
        let elapsed = now_ms.saturating_sub(self.window_start_ms);
        if elapsed < SILENCE_WINDOW_MS {
            return;
        }
        self.previous_max_ms = match elapsed < 2 * SILENCE_WINDOW_MS {
            true => self.window_max_ms,
            false => 0,
        };
        self.window_max_ms = 0;
        self.window_start_ms = now_ms;
    }
}

/// Keeps the liveness watcher from blaming peers for its own process's
/// stall: when the watcher itself ran late (its threads waited for a core,
/// as on an overloaded machine), the readers have not yet taken the bytes
/// the peers sent meanwhile, so their silence is this node's, not theirs.
/// No new suspicion is raised on such a late check, nor for a short grace
/// after it, while the readers catch up. A dead peer is still suspected one
/// grace later.
#[derive(Debug)]
struct StallGuard {
    /// A gap between checks above this is a stall of this process.
    stall_ms: u64,
    /// How long after a stall no suspicion is raised.
    grace_ms: u64,
    last_check_ms: u64,
    grace_until_ms: u64,
}

impl StallGuard {
    fn new(stall_ms: u64, grace_ms: u64) -> StallGuard {
        assert!(stall_ms > 0, "a stall of no time");
        StallGuard {
            stall_ms,
            grace_ms,
            last_check_ms: 0,
            grace_until_ms: 0,
        }
    }

    /// A check at `now_ms`: whether it may raise a suspicion.
    fn may_suspect(&mut self, now_ms: u64) -> bool {
        assert!(now_ms >= self.last_check_ms, "the clock went back");
        if now_ms - self.last_check_ms > self.stall_ms {
            self.grace_until_ms = now_ms + self.grace_ms;
        }
        self.last_check_ms = now_ms;
        now_ms > self.grace_until_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer that ended silences of 250 ms lately is given 500 ms; one
    /// that never went quiet, or went quiet long ago, the primary timeout;
    /// a peer that dies never raises its own limit.
    #[test]
    fn a_peer_is_given_twice_the_silences_it_ended_lately() {
        let mut limit = SilenceLimit::new(300, 1_000);
        assert_eq!(limit.observe(10, 0), 300);
        for now in (20..=250).step_by(10) {
            assert_eq!(
                limit.observe(now, now - 10),
                300,
                "silent, still within 300 ms"
            );
        }
        assert_eq!(limit.observe(260, 0), 480, "heard after 240 ms of silence");
        // It dies: its silence grows past the limit and stays the measure.
        let mut dead = 480;
        for now in (270..=2_000).step_by(10) {
            dead = limit.observe(now, now - 260);
        }
        assert_eq!(dead, 480, "a silence that has not ended teaches nothing");
        // Long silences are remembered a window or two, then forgotten.
        let mut limit = SilenceLimit::new(300, 1_000);
        limit.observe(1_000, 700);
        assert_eq!(limit.observe(1_010, 0), 1_000, "capped");
        assert_eq!(limit.limit_ms(1_010 + SILENCE_WINDOW_MS), 1_000);
        assert_eq!(limit.limit_ms(1_010 + 3 * SILENCE_WINDOW_MS), 300);
    }

    #[test]
    fn a_late_check_raises_no_suspicion_until_its_grace_ends() {
        let mut guard = StallGuard::new(150, 20);
        assert!(guard.may_suspect(10));
        assert!(guard.may_suspect(20));
        assert!(!guard.may_suspect(400), "a check 380 ms late is a stall");
        assert!(!guard.may_suspect(410));
        assert!(!guard.may_suspect(420));
        assert!(guard.may_suspect(430));
        assert!(guard.may_suspect(440));
    }
}
