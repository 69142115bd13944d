//! # strand-sim: the deterministic cluster simulator
//!
//! Runs one group of the real `strand-consensus` replicas in one thread from
//! one seed: the network (latency, loss, duplication, reordering,
//! partitions), each replica's disk (fsync latency, crashes that lose what was
//! not durable, storage faults on a minority) and the clock are simulated;
//! clients produce with retries and store cursors. Checkers run after every
//! step; a failing seed replays bit for bit.
//!
//! Modules, in reading order:
//!
//! | module | owns |
//! |---|---|
//! | [`options`] | the swarm: every option drawn from the seed |
//! | [`network`] | packets, latency, loss, duplication, partitions |
//! | [`disk`] | one replica's disk: durability, crashes, faults |
//! | [`client`] | producing clients with retries and redirects |
//! | [`checkers`] | one module per property |
//! | [`world`] | the event loop tying it together |
//! | [`trace`] | the trace hash and readable trace |
//!
//! The property that matters most: nothing a client was told is ever lost.

pub mod checkers;
pub mod client;
pub mod disk;
pub mod network;
pub mod options;
pub mod trace;
pub mod world;

pub use options::{Options, Overrides};
pub use world::{Outcome, World};

/// Runs one seed. A panic inside the replicas (a broken assertion of their
/// own state) is reported as a violation of its own, with its message.
pub fn run_seed(seed: u64, overrides: &Overrides, trace_lines: usize) -> (Outcome, trace::Trace) {
    let options = Options::from_seed(seed, overrides);
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        World::new(options.clone(), trace_lines).run()
    }));
    match run {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_string()))
                .unwrap_or_else(|| "non-string panic".to_string());
            let outcome = Outcome {
                seed,
                trace_hash: 0,
                ticks: 0,
                violation: Some(checkers::Violation {
                    checker: "0 no panic",
                    detail: message,
                }),
                stats: world::Stats::default(),
                options,
            };
            (outcome, trace::Trace::new(0))
        }
    }
}
