//! Tick-based timeouts with jittered exponential backoff.
//!
//! Time inside the replica is ticks: the driver ticks at a fixed rate (the
//! server every 10 ms, the simulator whenever its clock says so), or skips
//! ticks on which no timeout can fire and says how many it skipped
//! ([`Timeout::skip`]), which counts the same.

use strand_prng::Prng;

/// One timeout: fires `after_ticks` after it was started, then (if backoff
/// is used) later each time it is reset after firing.
#[derive(Debug, Clone)]
pub struct Timeout {
    name: &'static str,
    after_ticks: u64,
    ticking: bool,
    ticks: u64,
    attempts: u32,
    deadline_ticks: u64,
}

/// Longest a backed-off timeout waits, as a multiple of its base.
const BACKOFF_MULTIPLE_MAX: u64 = 8;

impl Timeout {
    /// A stopped timeout named `name` (for logs) of `after_ticks` ticks.
    pub fn new(name: &'static str, after_ticks: u64) -> Timeout {
        assert!(after_ticks > 0, "timeout {name} of zero ticks");
        Timeout {
            name,
            after_ticks,
            ticking: false,
            ticks: 0,
            attempts: 0,
            deadline_ticks: after_ticks,
        }
    }

    /// The timeout's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether it is running.
    pub fn ticking(&self) -> bool {
        self.ticking
    }

    /// Starts (or restarts) it from zero with no backoff.
    pub fn start(&mut self) {
        self.ticking = true;
        self.ticks = 0;
        self.attempts = 0;
        self.deadline_ticks = self.after_ticks;
    }

    /// Stops it.
    pub fn stop(&mut self) {
        self.ticking = false;
        self.ticks = 0;
        self.attempts = 0;
    }

    /// Restarts the count toward the current deadline without changing the
    /// backoff (used when the awaited peer shows signs of life).
    pub fn reset(&mut self) {
        assert!(self.ticking, "resetting stopped timeout {}", self.name);
        self.ticks = 0;
    }

    /// After firing: waits longer next time, `after * 2^attempts` capped at
    /// `BACKOFF_MULTIPLE_MAX * after`, plus up to one `after` of random jitter.
    pub fn backoff(&mut self, prng: &mut Prng) {
        assert!(self.ticking, "backing off stopped timeout {}", self.name);
        self.attempts = self.attempts.saturating_add(1);
        let multiple = 1u64 << self.attempts.min(3);
        let base = self.after_ticks * multiple.min(BACKOFF_MULTIPLE_MAX);
        self.deadline_ticks = base + prng.below(self.after_ticks);
        self.ticks = 0;
    }

    /// Starts it with a random extra delay of up to `after_ticks`, so that
    /// replicas that start together do not fire together.
    pub fn start_jittered(&mut self, prng: &mut Prng) {
        self.start();
        self.deadline_ticks = self.after_ticks + prng.below(self.after_ticks);
    }

    /// Advances one tick.
    pub fn tick(&mut self) {
        if self.ticking {
            self.ticks += 1;
        }
    }

    /// True once the deadline has passed (until reset, restarted or backed off).
    pub fn fired(&self) -> bool {
        self.ticking && self.ticks >= self.deadline_ticks
    }

    /// Ticks until it fires, counting the tick it fires on (0 once fired);
    /// `None` while stopped.
    pub fn ticks_left(&self) -> Option<u64> {
        self.ticking
            .then(|| self.deadline_ticks.saturating_sub(self.ticks))
    }

    /// A stopped timeout has counted nothing and backed off nothing; a
    /// deadline is never shorter than the timeout's length.
    pub fn assert_invariants(&self) {
        assert!(
            self.ticking || (self.ticks == 0 && self.attempts == 0),
            "stopped timeout {} still counts",
            self.name
        );
        assert!(
            self.deadline_ticks >= self.after_ticks,
            "timeout {} due before its length",
            self.name
        );
        assert!(
            self.deadline_ticks < self.after_ticks * (BACKOFF_MULTIPLE_MAX + 1),
            "timeout {} backed off past its cap",
            self.name
        );
    }

    /// Advances `ticks` ticks at once, none of which it may fire on (the
    /// driver skipped them because nothing was due).
    pub fn skip(&mut self, ticks: u64) {
        if !self.ticking {
            return;
        }
        assert!(
            self.ticks + ticks < self.deadline_ticks,
            "timeout {} would fire within {ticks} skipped ticks",
            self.name
        );
        self.ticks += ticks;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipping_ticks_is_ticking_without_firing() {
        let mut skipped = Timeout::new("test", 10);
        let mut ticked = skipped.clone();
        skipped.start();
        ticked.start();
        assert_eq!(skipped.ticks_left(), Some(10));
        skipped.skip(9);
        for _ in 0..9 {
            ticked.tick();
        }
        assert_eq!(skipped.ticks_left(), Some(1));
        skipped.tick();
        ticked.tick();
        assert!(skipped.fired() && ticked.fired());
        assert_eq!(skipped.ticks_left(), Some(0));
        skipped.stop();
        assert_eq!(skipped.ticks_left(), None);
        skipped.skip(1_000);
        assert!(!skipped.fired(), "a stopped timeout ignores skips");
    }

    #[test]
    #[should_panic(expected = "would fire")]
    fn skipping_past_a_deadline_is_a_bug() {
        let mut timeout = Timeout::new("test", 3);
        timeout.start();
        timeout.skip(3);
    }

    #[test]
    fn fires_after_its_ticks_and_backs_off() {
        let mut prng = Prng::new(1);
        let mut timeout = Timeout::new("test", 10);
        timeout.start();
        for _ in 0..9 {
            timeout.tick();
            assert!(!timeout.fired());
        }
        timeout.tick();
        assert!(timeout.fired());
        timeout.backoff(&mut prng);
        assert!(!timeout.fired());
        let mut ticks = 0;
        while !timeout.fired() {
            timeout.tick();
            ticks += 1;
        }
        assert!((20..30).contains(&ticks), "{ticks}");
        timeout.stop();
        timeout.tick();
        assert!(!timeout.fired());
    }
}
