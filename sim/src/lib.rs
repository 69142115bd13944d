//! # strand-sim: the deterministic cluster simulator
//!
//! Runs one group in one thread from one seed. Each replica is the node's own
//! `strand_host::GroupHost`: the real `strand-consensus` replica over the
//! real `strand-partition` storage (segments, superblock, cursor log,
//! quarantine, state transfer over the network), on the WAL's in-memory
//! crash-modelling disk. The network (latency, loss, duplication,
//! reordering, partitions), the disks (fsync latency, process crashes that
//! leave what was not synced unsynced, power losses that keep a random,
//! possibly torn, part of it, crashes that strike between two storage
//! operations, a WAL turn's write and its sync included, storage faults on
//! a minority, the log's newest entry among them, I/O faults at running
//! replicas: failed fsyncs, full disks, failed reads, after which the group
//! is reopened in the same process as a node does) and the clock are
//! simulated; clients produce with retries and
//! store cursors. Half the seeds give the record log a size limit and tiny
//! segments, so retention drops segments as commits advance and replicas
//! that fall behind catch up by state transfer. Checkers run after every
//! step; a failing seed replays bit for bit (`STRAND_SIM_LOG=info` adds the
//! replicas' own logs).
//!
//! Modules, in reading order:
//!
//! | module | owns |
//! |---|---|
//! | [`options`] | the swarm: every option drawn from the seed |
//! | [`catalog`] | the group's memberships by epoch; reassignments planned by `strand_host::reassign` |
//! | [`network`] | packets, latency, loss, duplication, partitions |
//! | [`client`] | producing clients with retries and redirects |
//! | [`checkers`] | one module per property |
//! | [`world`] | the event loop tying it together |
//! | [`trace`] | the trace hash and readable trace |
//!
//! The property that matters most: nothing a client was told is ever lost.
//!
//! ## Reassignment (`--reassign`)
//!
//! Off by default (a seed without it runs exactly as before). With it, the
//! metadata plane's catalog ([`catalog`]) reassigns the group at random
//! while faults run, one change at a time (the next waits until a replica
//! reports the previous epoch started): a member replaced by a newcomer, a
//! member added or removed, the confirm policy changed; both in-place
//! changes and changes by a view change at the new epoch occur. Replicas
//! live at slots of a pool of [`catalog::SLOT_POOL`]; each hears of a new
//! membership after its own lag (`on_assignment`), a (re)start gets the
//! newest few in its `Config`; a newcomer starts empty at its slot and
//! catches up by state transfer; a removed replica is told to retire once
//! the epoch that removed it started and is dropped for good later (once
//! the membership is healthy). Checker 8 (`epoch_fence`) adds: no replica
//! prepares, starts a view or acks in a view of an epoch whose membership
//! leaves it out (an in-place change's newcomers ack in the view they
//! joined in), and a retired replica never acks. The durability promise
//! counts a newcomer as damaged until it has caught up, and uses the
//! smallest write quorum of the memberships in transition.
//!
//! `--features mutations --mutation new-quorum-only` makes a view change into
//! a new epoch hear only the new membership's quorum: with `--reassign` the
//! simulator then finds acknowledged records lost (checker 2).

pub mod catalog;
pub mod checkers;
pub mod client;
pub mod network;
pub mod options;
pub mod trace;
pub mod world;

pub use options::{Options, Overrides};
pub use world::{Outcome, World};

/// Runs one seed. A panic inside the replicas (a broken assertion of their
/// own state) is reported as a violation of its own, with its message and
/// the trace up to it.
pub fn run_seed(seed: u64, overrides: &Overrides, trace_lines: usize) -> (Outcome, trace::Trace) {
    let options = Options::from_seed(seed, overrides);
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        World::new(options.clone(), trace_lines)
    }));
    let mut world = match built {
        Ok(world) => world,
        Err(panic) => {
            let outcome = Outcome {
                seed,
                trace_hash: 0,
                ticks: 0,
                violation: Some(panicked(panic)),
                stats: world::Stats::default(),
                options,
            };
            return (outcome, trace::Trace::new(0));
        }
    };
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| world.run_phases()));
    let result = run.unwrap_or_else(|panic| Err(panicked(panic)));
    world.finish(result)
}

/// The violation a panic of the replicas (or of the simulator) amounts to.
fn panicked(panic: Box<dyn std::any::Any + Send>) -> checkers::Violation {
    let message = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_string()))
        .unwrap_or_else(|| "non-string panic".to_string());
    checkers::Violation {
        checker: "0 no panic",
        detail: message,
    }
}
