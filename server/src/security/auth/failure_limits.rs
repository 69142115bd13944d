//! Failed sign-ins limited per client address and per user name.
//!
//! Each address and each user name has a bucket of failures: a failed
//! sign-in adds one, and one drains away every refill interval. While a
//! bucket is full, a sign-in from that address or for that user is refused
//! at once (`Throttled`, with how long to wait), before any hash is
//! computed: an address may fail [`ADDRESS_FAILURES_MAX`] times in a row,
//! then once per [`ADDRESS_REFILL`]; a user name [`USER_FAILURES_MAX`]
//! times, then once per [`USER_REFILL`]. The per-connection limit
//! (`SIGN_IN_FAILURES_MAX`) still closes a connection on top.
//!
//! An IPv6 address counts as its /64 network ([`address_key`]). The
//! tables are bounded ([`ADDRESSES_TRACKED_MAX`],
//! [`USERS_TRACKED_MAX`]); a new entry past the bound evicts the one
//! touched longest ago. Time is passed in, so the rules are tested without
//! a clock.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures an address may make in a row before it is throttled.
pub const ADDRESS_FAILURES_MAX: u32 = 10;

/// How often a throttled address may try again (6 s: ten a minute).
pub const ADDRESS_REFILL: Duration = Duration::from_secs(6);

/// Failures a user name may take in a row before it is throttled.
pub const USER_FAILURES_MAX: u32 = 5;

/// How often a throttled user name may be tried again (12 s: five a minute).
pub const USER_REFILL: Duration = Duration::from_secs(12);

/// Addresses tracked at most.
pub const ADDRESSES_TRACKED_MAX: usize = 16_384;

/// User names tracked at most.
pub const USERS_TRACKED_MAX: usize = 16_384;

/// The key an address is limited under: an IPv4 address itself, an IPv6
/// address's /64 network (one host commonly holds a whole /64, so single
/// IPv6 addresses would cost an attacker nothing).
pub fn address_key(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V6(v6) => {
            let network = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(std::net::Ipv6Addr::from(network))
        }
        v4 => v4,
    }
}

/// A sign-in refused unchecked: too many failures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("too many failed sign-ins {what}: retry in {} ms", retry_after.as_millis())]
pub struct Throttled {
    /// `from address 10.0.0.7` or `for user alice`.
    pub what: String,
    /// When the next attempt is allowed.
    pub retry_after: Duration,
}

/// One key's failures: `level` of them not yet drained as of `drained_at`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    level: u32,
    drained_at: Instant,
    /// Its place in the eviction order.
    touched: u64,
}

/// A bounded table of buckets, evicting the one touched longest ago.
#[derive(Debug)]
struct Buckets<K> {
    entries: HashMap<K, Bucket>,
    order: BTreeMap<u64, K>,
    next_touch: u64,
    entries_max: usize,
    failures_max: u32,
    refill: Duration,
}

impl<K: Hash + Eq + Clone> Buckets<K> {
    fn new(entries_max: usize, failures_max: u32, refill: Duration) -> Buckets<K> {
        assert!(entries_max > 0 && failures_max > 0 && !refill.is_zero());
        Buckets {
            entries: HashMap::new(),
            order: BTreeMap::new(),
            next_touch: 0,
            entries_max,
            failures_max,
            refill,
        }
    }

    /// Drains what time has drained from `bucket`.
    fn drain(&self, bucket: &mut Bucket, now: Instant) {
        let elapsed = now.saturating_duration_since(bucket.drained_at);
        let drained = elapsed.as_nanos() / self.refill.as_nanos();
        let drained = u32::try_from(drained).unwrap_or(u32::MAX);
        if drained >= bucket.level {
            bucket.level = 0;
            bucket.drained_at = now;
        } else {
            bucket.level -= drained;
            bucket.drained_at += self.refill * drained;
        }
    }

    /// How long until `key` may try again, if it is throttled now.
    fn wait(&mut self, key: &K, now: Instant) -> Option<Duration> {
        let mut bucket = *self.entries.get(key)?;
        self.drain(&mut bucket, now);
        let wait = (bucket.level >= self.failures_max).then(|| {
            self.refill
                .saturating_sub(now.saturating_duration_since(bucket.drained_at))
        });
        if let Some(entry) = self.entries.get_mut(key) {
            entry.level = bucket.level;
            entry.drained_at = bucket.drained_at;
        }
        wait
    }

    /// Counts one failure of `key`.
    fn fail(&mut self, key: K, now: Instant) {
        let touched = self.next_touch;
        self.next_touch += 1;
        let mut bucket = match self.entries.remove(&key) {
            Some(bucket) => {
                self.order.remove(&bucket.touched);
                bucket
            }
            None => Bucket {
                level: 0,
                drained_at: now,
                touched,
            },
        };
        self.drain(&mut bucket, now);
        bucket.level = bucket.level.saturating_add(1).min(self.failures_max);
        bucket.touched = touched;
        while self.entries.len() >= self.entries_max {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
        self.order.insert(touched, key.clone());
        self.entries.insert(key, bucket);
        assert_eq!(self.entries.len(), self.order.len(), "one order entry each");
        assert!(self.entries.len() <= self.entries_max);
    }
}

/// The node's failed sign-ins, by address and by user name.
#[derive(Debug)]
pub struct FailureLimits {
    tables: Mutex<(Buckets<IpAddr>, Buckets<String>)>,
}

impl Default for FailureLimits {
    fn default() -> FailureLimits {
        FailureLimits::new(ADDRESSES_TRACKED_MAX, USERS_TRACKED_MAX)
    }
}

impl FailureLimits {
    /// Limits tracking at most `addresses_max` addresses and `users_max`
    /// user names, with the default rates.
    pub fn new(addresses_max: usize, users_max: usize) -> FailureLimits {
        FailureLimits {
            tables: Mutex::new((
                Buckets::new(addresses_max, ADDRESS_FAILURES_MAX, ADDRESS_REFILL),
                Buckets::new(users_max, USER_FAILURES_MAX, USER_REFILL),
            )),
        }
    }

    /// Why a sign-in from `address` (for `user`, when named) is refused
    /// unchecked now, if it is.
    pub fn refusal(&self, address: IpAddr, user: Option<&str>, now: Instant) -> Option<Throttled> {
        let address = address_key(address);
        let mut tables = self.tables.lock().expect("failure limits lock");
        let (addresses, users) = &mut *tables;
        if let Some(retry_after) = addresses.wait(&address, now) {
            return Some(Throttled {
                what: format!("from address {address}"),
                retry_after,
            });
        }
        let user = user?;
        let retry_after = users.wait(&user.to_owned(), now)?;
        Some(Throttled {
            what: format!("for user {user}"),
            retry_after,
        })
    }

    /// Counts a failed sign-in from `address` (for `user`, when named).
    pub fn record_failure(&self, address: IpAddr, user: Option<&str>, now: Instant) {
        let address = address_key(address);
        let mut tables = self.tables.lock().expect("failure limits lock");
        let (addresses, users) = &mut *tables;
        addresses.fail(address, now);
        if let Some(user) = user {
            users.fail(user.to_owned(), now);
        }
    }

    /// Addresses and user names tracked now.
    pub fn tracked(&self) -> (usize, usize) {
        let tables = self.tables.lock().expect("failure limits lock");
        (tables.0.entries.len(), tables.1.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn address(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    #[test]
    fn an_address_is_throttled_after_its_failures_and_cools_down() {
        let limits = FailureLimits::default();
        let start = Instant::now();
        for _ in 0..ADDRESS_FAILURES_MAX {
            assert_eq!(limits.refusal(address(1), None, start), None);
            limits.record_failure(address(1), None, start);
        }
        let throttled = limits.refusal(address(1), None, start).expect("throttled");
        assert_eq!(throttled.retry_after, ADDRESS_REFILL);
        assert!(throttled.to_string().contains("from address 10.0.0.1"));
        assert_eq!(limits.refusal(address(2), None, start), None, "others not");
        let later = start + ADDRESS_REFILL;
        assert_eq!(limits.refusal(address(1), None, later), None, "one more");
        limits.record_failure(address(1), None, later);
        assert!(limits.refusal(address(1), None, later).is_some());
        let cooled = later + ADDRESS_REFILL * ADDRESS_FAILURES_MAX;
        limits.record_failure(address(1), None, cooled);
        assert_eq!(limits.refusal(address(1), None, cooled), None, "drained");
    }

    #[test]
    fn a_user_name_is_throttled_whatever_the_address() {
        let limits = FailureLimits::default();
        let now = Instant::now();
        for index in 0..USER_FAILURES_MAX {
            assert_eq!(
                limits.refusal(address(index as u8), Some("alice"), now),
                None
            );
            limits.record_failure(address(index as u8), Some("alice"), now);
        }
        let throttled = limits.refusal(address(99), Some("alice"), now);
        assert!(
            throttled.is_some_and(|refusal| refusal.what == "for user alice"),
            "a fresh address does not help"
        );
        assert_eq!(limits.refusal(address(99), Some("bob"), now), None);
        assert_eq!(limits.refusal(address(99), None, now), None);
    }

    #[test]
    fn the_tables_are_bounded_and_evict_the_oldest() {
        let limits = FailureLimits::new(4, 2);
        let now = Instant::now();
        for _ in 0..ADDRESS_FAILURES_MAX {
            limits.record_failure(address(0), Some("first"), now);
        }
        for index in 1..=10u8 {
            limits.record_failure(address(index), Some(&format!("user{index}")), now);
            let (addresses, users) = limits.tracked();
            assert!(addresses <= 4 && users <= 2, "{addresses} {users}");
        }
        assert_eq!(
            limits.refusal(address(0), Some("first"), now),
            None,
            "evicted: forgotten"
        );
    }

    #[test]
    fn an_ipv6_network_counts_as_one_address() {
        let limits = FailureLimits::default();
        let now = Instant::now();
        let host =
            |last: u16| IpAddr::V6(std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 7, 0, 0, 0, last));
        for index in 0..ADDRESS_FAILURES_MAX {
            limits.record_failure(host(index as u16), None, now);
        }
        let throttled = limits.refusal(host(999), None, now).expect("same /64");
        assert!(
            throttled.what.contains("2001:db8:0:7::"),
            "{}",
            throttled.what
        );
        let other = IpAddr::V6(std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 8, 0, 0, 0, 1));
        assert_eq!(limits.refusal(other, None, now), None);
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        assert_eq!(address_key(mapped), address(1));
    }
}
