//! Bounded exponential backoff with jitter, and the seeded generator the pure
//! cores draw jitter and client ids from (so they stay deterministic in tests).

/// A small seeded generator (splitmix64): jitter and client ids.
#[derive(Debug, Clone)]
pub struct Prng {
    state: u64,
    /// XORed into every client id, so ids carry 128 bits of entropy when the
    /// salt is random (the state alone has 64).
    client_id_salt: u128,
}

impl Prng {
    /// A generator seeded with `seed`; the same seed gives the same sequence.
    pub fn new(seed: u64) -> Prng {
        Prng {
            state: seed,
            client_id_salt: 0,
        }
    }

    /// The same generator, its client ids salted with `salt` (pass 128
    /// random bits outside tests: two clients sharing an id in one group
    /// would be answered each other's replies).
    pub fn with_client_id_salt(mut self, salt: u128) -> Prng {
        self.client_id_salt = salt;
        self
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..=bound`.
    pub fn up_to(&mut self, bound: u64) -> u64 {
        if bound == u64::MAX {
            return self.next_u64();
        }
        self.next_u64() % (bound + 1)
    }

    /// A fresh client id, never 0 (the wire forbids it); distinct from every
    /// earlier one of this generator.
    pub fn client_id(&mut self) -> u128 {
        loop {
            let raw = (u128::from(self.next_u64()) << 64) | u128::from(self.next_u64());
            let id = raw ^ self.client_id_salt;
            if id != 0 {
                return id;
            }
        }
    }
}

/// Bounded exponential backoff: `min_ms`, doubling per retry, capped at
/// `max_ms`, with the upper half jittered so clients do not retry in lockstep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay before the first retry.
    pub min_ms: u64,
    /// Longest delay.
    pub max_ms: u64,
}

/// Doublings past this add nothing (and keep the shift in range).
const DOUBLINGS_MAX: u32 = 32;

impl Backoff {
    /// A backoff from `min_ms` to `max_ms`.
    pub fn new(min_ms: u64, max_ms: u64) -> Backoff {
        assert!(min_ms >= 1, "backoff minimum must be at least 1 ms");
        assert!(
            max_ms >= min_ms,
            "backoff maximum {max_ms} below minimum {min_ms}"
        );
        Backoff { min_ms, max_ms }
    }

    /// The delay before retry number `retry` (0 for the first retry): in
    /// `[d/2, d]` where `d = min(min_ms * 2^retry, max_ms)`.
    pub fn delay_ms(&self, retry: u32, prng: &mut Prng) -> u64 {
        let factor = 1u64 << retry.min(DOUBLINGS_MAX);
        let full = self.min_ms.saturating_mul(factor).min(self.max_ms);
        let half = full / 2;
        let delay = half + prng.up_to(full - half);
        assert!(delay <= self.max_ms && delay >= self.min_ms / 2);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_stays_bounded() {
        let backoff = Backoff::new(10, 500);
        let mut prng = Prng::new(7);
        for retry in 0..100 {
            let full = (10u64 << retry.min(20)).min(500);
            let delay = backoff.delay_ms(retry, &mut prng);
            assert!(delay >= full / 2 && delay <= full, "retry {retry}: {delay}");
        }
    }

    #[test]
    fn client_ids_are_never_zero_and_do_not_repeat() {
        let mut prng = Prng::new(0);
        let ids: std::collections::BTreeSet<u128> = (0..1000).map(|_| prng.client_id()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(!ids.contains(&0));
    }
}
