//! # strand-prng: the one seeded generator
//!
//! Everything in Strand that draws a random number from a seed (a replica's
//! timeout jitter, the simulator's faults and schedule, the in-memory disk's
//! crashes, a client's retry jitter and client ids) draws it from [`Prng`]:
//! SplitMix64 from `rand_xoshiro`, plus the bounded draws the callers need.
//!
//! The invariant that matters: a seed's sequence never changes. The
//! simulator's pinned seeds replay exact traces and the crash tests replay
//! exact crash images, so the tests below pin the outputs for fixed seeds;
//! a dependency upgrade that moved one of them fails here first.
//!
//! No OS randomness: a generator's whole future is fixed by its seed.

use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};

/// A seeded SplitMix64 generator with bounded draws. Not for cryptography.
#[derive(Debug, Clone)]
pub struct Prng {
    generator: SplitMix64,
}

impl Prng {
    /// A generator whose whole future is fixed by `seed` (its state is
    /// `seed` itself, as in the reference SplitMix64).
    pub fn new(seed: u64) -> Prng {
        // `seed_from_u64` is SplitMix64's own: the state is the seed's
        // little-endian bytes read back, i.e. the seed (pinned by the tests).
        Prng {
            generator: SplitMix64::seed_from_u64(seed),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.generator.next_u64()
    }

    /// A value in `0..bound` (`bound > 0`), from one draw: the
    /// multiply-shift reduction without rejection (the bias, below `bound / 2^64`, is
    /// irrelevant for jitter and fault choices, and one draw per call keeps
    /// the sequences simple to replay).
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "empty range");
        let value = ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64;
        debug_assert!(value < bound);
        value
    }

    /// A value in `0..=max`, from one draw.
    pub fn up_to(&mut self, max: u64) -> u64 {
        if max == u64::MAX {
            return self.next_u64();
        }
        self.below(max + 1)
    }

    /// True with probability `numerator / denominator`, from one draw.
    pub fn chance(&mut self, numerator: u64, denominator: u64) -> bool {
        assert!(
            denominator > 0 && numerator <= denominator,
            "chance {numerator}/{denominator} is not a probability"
        );
        self.below(denominator) < numerator
    }
}

#[cfg(test)]
mod tests;
