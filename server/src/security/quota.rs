//! Quotas, enforced on this node by delaying (see `strand_wire::ops::Quota`
//! for what an admin sets). Each user with a quota has a token bucket per
//! rate, filled at the rate up to one second's worth. A request takes one
//! request token and, for a produce, its batch's bytes; a fetch reply's
//! bytes are taken when it is sent. A bucket may go into debt: the user's
//! next request waits until the debt is paid back before it is handled, and
//! with it every later request of that connection (the connection is not
//! read meanwhile). The reply of a delayed request says how long it waited
//! (`throttle_ms` in its header), as Kafka's `throttle_time_ms` does.
//!
//! Each node enforces the rates on its own: a user whose requests spread
//! over several nodes gets the rate on each, as with Kafka's per-broker
//! quotas. Only signed-in users have quotas.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use strand_wire::ops::{Quota, USERS_MAX};

/// The longest one request is delayed: a debt larger than this (one huge
/// batch against a tiny rate) is forgiven past it, so no connection waits
/// for minutes.
pub const THROTTLE_MAX: Duration = Duration::from_secs(30);

/// Which of a user's rates a charge is against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rate {
    /// Bytes of produced batches.
    Produce,
    /// Bytes of fetch replies.
    Fetch,
    /// Requests.
    Requests,
}

impl Rate {
    /// Its name in metrics.
    pub fn name(self) -> &'static str {
        match self {
            Rate::Produce => "produce",
            Rate::Fetch => "fetch",
            Rate::Requests => "requests",
        }
    }

    /// Its limit per second in `quota` (0: none).
    fn per_sec(self, quota: &Quota) -> u64 {
        match self {
            Rate::Produce => quota.produce_bytes_per_sec,
            Rate::Fetch => quota.fetch_bytes_per_sec,
            Rate::Requests => u64::from(quota.requests_per_sec),
        }
    }
}

/// One rate's bucket: tokens (negative: a debt) as of `at`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// Takes `amount` at `per_sec` at `now`: how long until the bucket is
    /// out of debt again (zero when it is not in debt).
    fn take(&mut self, amount: u64, per_sec: u64, now: Instant) -> Duration {
        assert!(per_sec > 0, "a bucket for a limited rate");
        let rate = per_sec as f64;
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(rate);
        self.at = now;
        self.tokens -= amount as f64;
        let floor = -rate * THROTTLE_MAX.as_secs_f64();
        self.tokens = self.tokens.max(floor);
        assert!(
            self.tokens >= floor && self.tokens <= rate,
            "a bucket holds at most a second and owes at most the longest throttle"
        );
        match self.tokens < 0.0 {
            true => Duration::from_secs_f64(-self.tokens / rate),
            false => Duration::ZERO,
        }
    }
}

/// Every user's buckets on this node.
#[derive(Debug, Default)]
pub struct Quotas {
    buckets: Mutex<HashMap<(String, Rate), Bucket>>,
}

impl Quotas {
    /// Charges `amount` to `user`'s `rate` under `quota`: how long the
    /// user's next request must wait (zero: none, or no limit).
    pub fn charge(&self, user: &str, quota: &Quota, rate: Rate, amount: u64) -> Duration {
        let per_sec = rate.per_sec(quota);
        if per_sec == 0 {
            return Duration::ZERO;
        }
        let now = Instant::now();
        let mut buckets = self.buckets.lock().expect("quota lock");
        if buckets.len() >= 3 * USERS_MAX && !buckets.contains_key(&(user.to_owned(), rate)) {
            // Users deleted or unlimited since: start again.
            buckets.clear();
        }
        let bucket = buckets.entry((user.to_owned(), rate)).or_insert(Bucket {
            tokens: per_sec as f64,
            at: now,
        });
        let delay = bucket.take(amount, per_sec, now);
        assert!(delay <= THROTTLE_MAX, "a throttle never exceeds its bound");
        if delay > Duration::ZERO {
            crate::metrics::quota_throttled(user, rate.name(), delay);
        }
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_holds_a_second_and_a_debt_is_paid_back_at_the_rate() {
        let start = Instant::now();
        let mut bucket = Bucket {
            tokens: 1_000.0,
            at: start,
        };
        assert_eq!(bucket.take(1_000, 1_000, start), Duration::ZERO);
        assert_eq!(bucket.take(500, 1_000, start), Duration::from_millis(500));
        let later = start + Duration::from_millis(500);
        assert_eq!(bucket.take(0, 1_000, later), Duration::ZERO, "paid back");
        let much_later = later + Duration::from_secs(60);
        assert_eq!(bucket.take(0, 1_000, much_later), Duration::ZERO);
        assert_eq!(bucket.tokens, 1_000.0, "at most a second's worth");
        let huge = bucket.take(u64::MAX / 2, 1_000, much_later);
        assert_eq!(huge, THROTTLE_MAX, "a debt is bounded");
    }

    #[test]
    fn unlimited_rates_never_wait() {
        let quotas = Quotas::default();
        let quota = Quota {
            produce_bytes_per_sec: 100,
            ..Quota::default()
        };
        assert_eq!(
            quotas.charge("u", &quota, Rate::Fetch, 1 << 30),
            Duration::ZERO
        );
        assert_eq!(
            quotas.charge("u", &quota, Rate::Produce, 100),
            Duration::ZERO
        );
        // A second's worth in debt (less what refilled between the calls).
        let delay = quotas.charge("u", &quota, Rate::Produce, 100);
        assert!(delay > Duration::from_millis(500) && delay <= Duration::from_secs(1));
    }
}
