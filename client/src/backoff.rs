//! Bounded exponential backoff with jitter, and the seeded generator the pure
//! cores draw jitter and client ids from (so they stay deterministic in tests).

/// The client's seeded draws: the workspace's one generator
/// ([`strand_prng::Prng`]) plus the salt its client ids carry.
#[derive(Debug, Clone)]
pub struct Prng {
    generator: strand_prng::Prng,
    /// XORed into every client id, so ids carry 128 bits of entropy when the
    /// salt is random (the state alone has 64).
    client_id_salt: u128,
}

impl Prng {
    /// A generator seeded with `seed`; the same seed gives the same sequence.
    pub fn new(seed: u64) -> Prng {
        Prng {
            generator: strand_prng::Prng::new(seed),
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
        self.generator.next_u64()
    }

    /// A fresh client id, never 0 (the wire forbids it); distinct from every
    /// earlier one of this generator.
    pub fn client_id(&mut self) -> u128 {
        loop {
            let raw = (u128::from(self.next_u64()) << 64) | u128::from(self.next_u64());
            let id = raw ^ self.client_id_salt;
            // Never 0, and never a sequenced client's id, whose produces
            // the group numbers by record (`strand_wire::sequenced`).
            if id != 0 && !strand_wire::sequenced::is_sequenced_client(id) {
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
        // A value in `0..=full - half` by remainder, not the generator's
        // multiply-shift `up_to`: the jitter a seed gives stays what it was
        // (the remainder's bias is below `full / 2^64`).
        let delay = half + prng.next_u64() % (full - half + 1);
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

    /// Delays and ids as the client's own hand-written SplitMix64 gave them
    /// before it moved onto `strand_prng`: a seed's sequence is unchanged.
    #[test]
    fn delays_and_ids_match_the_replaced_generator() {
        let backoff = Backoff::new(10, 500);
        let expected_delays: [(u64, [u64; 8]); 3] = [
            (0, [6, 20, 36, 79, 102, 260, 373, 319]),
            (1, [10, 18, 35, 42, 155, 295, 499, 349]),
            (7, [8, 10, 20, 70, 123, 229, 319, 457]),
        ];
        for (seed, expected) in expected_delays {
            let mut prng = Prng::new(seed);
            let delays: Vec<u64> = (0..8)
                .map(|retry| backoff.delay_ms(retry, &mut prng))
                .collect();
            assert_eq!(delays, expected, "seed {seed}");
        }
        let mut prng = Prng::new(1);
        assert_eq!(prng.client_id(), 0x910a2dec89025cc1beeb8da1658eec67);
        assert_eq!(prng.client_id(), 0xf893a2eefb32555e71c18690ee42c90b);
        let mut salted =
            Prng::new(7).with_client_id_salt(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210);
        assert_eq!(salted.client_id(), 0x62e8a483d099c038fa90864f8268540c);
        assert_eq!(salted.client_id(), 0xe7bb05e7331ae7ed6be651e8116a1bdb);
    }

    #[test]
    fn client_ids_are_never_zero_and_do_not_repeat() {
        let mut prng = Prng::new(0);
        let ids: std::collections::BTreeSet<u128> = (0..1000).map(|_| prng.client_id()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(!ids.contains(&0));
    }
}
