//! The simulator's own judgement: a fixed batch of seeds holds every checker,
//! a seed replays bit for bit, and the checkers have teeth.

use strand_sim::{Overrides, run_seed};

/// Seeds CI runs on every build (`STRAND_SIM_SEEDS` overrides the count).
const CI_SEEDS: u64 = 2_000;

fn seed_count() -> u64 {
    std::env::var("STRAND_SIM_SEEDS")
        .ok()
        .and_then(|count| count.parse().ok())
        .unwrap_or(CI_SEEDS)
}

#[test]
fn a_fixed_batch_of_seeds_holds_every_checker() {
    let overrides = Overrides::default();
    let mut failures = Vec::new();
    for seed in 0..seed_count() {
        let (outcome, _) = run_seed(seed, &overrides, 0);
        if let Some(violation) = outcome.violation {
            failures.push(format!(
                "seed {seed}: {violation} (replay: strand-sim --seed {seed} --trace)"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Seeds that once broke a checker, each with what it found; they must
/// hold every checker for good.
const FOUND_BY_SIM: [(u64, &str); 5] = [
    (
        44_837,
        "linear history: an adoption trusted own ops below a gap an earlier adoption left",
    ),
    (
        48_248,
        "liveness: the view-4 primary lost its log; waits for the operator's accept-loss",
    ),
    (
        74_111,
        "liveness: the primary at the history start was damaged; accept-loss unsticks it",
    ),
    (
        91_283,
        "simulated disk: a crash during an in-place repair dropped later durable entries",
    ),
    (
        91_300,
        "liveness: the merge skipped an op whose header the chosen log could not read",
    ),
];

#[test]
fn seeds_found_by_the_simulator_stay_fixed() {
    let overrides = Overrides::default();
    for (seed, found) in FOUND_BY_SIM {
        let (outcome, _) = run_seed(seed, &overrides, 0);
        assert!(
            outcome.violation.is_none(),
            "seed {seed} ({found}): {:?} (replay: strand-sim --seed {seed} --trace)",
            outcome.violation
        );
    }
}

#[test]
fn one_seed_run_twice_gives_the_same_trace_hash() {
    let overrides = Overrides::default();
    for seed in [7, 1_234, 98_765] {
        let (first, _) = run_seed(seed, &overrides, 0);
        let (second, _) = run_seed(seed, &overrides, 0);
        assert_eq!(first.trace_hash, second.trace_hash, "seed {seed}");
        assert_eq!(first.ticks, second.ticks, "seed {seed}");
        assert_ne!(first.trace_hash, 0);
    }
    let (a, _) = run_seed(1, &overrides, 0);
    let (b, _) = run_seed(2, &overrides, 0);
    assert_ne!(
        a.trace_hash, b.trace_hash,
        "different seeds, different runs"
    );
}

#[cfg(feature = "mutations")]
#[test]
fn without_the_trusted_gate_a_batch_finds_a_lost_acknowledged_op() {
    let overrides = Overrides {
        mutation_untrusted_gate: true,
        ..Overrides::default()
    };
    let found = (0..2_000u64).find_map(|seed| {
        let (outcome, _) = run_seed(seed, &overrides, 0);
        outcome
            .violation
            .filter(|violation| violation.checker == "2 acked stays")
            .map(|violation| (seed, violation))
    });
    let (seed, violation) =
        found.expect("within 2,000 seeds the gate-off mutation loses an acked op");
    eprintln!("gate off: seed {seed} lost an acknowledged op: {violation}");
}
