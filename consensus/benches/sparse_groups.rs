//! A backup's cost per op over many groups, each taking an op in turn (the
//! way a node sees a thousand sparse partitions): with the journal windows
//! almost empty, then full (the committed slots a replica keeps), in the
//! same run.
//!
//! `cargo bench -p strand-consensus --bench sparse_groups`. Every group is
//! three in-memory replicas; each round gives every group one produce
//! request and runs it to its commit (messages go straight to their replica,
//! storage completes every write at once), so no group's state is still in
//! the cache when its next op comes. The ratio of the two figures shows
//! whether anything per op walks the window: at 100 % nothing does. Set
//! `STRAND_BENCH_GROUPS` for another count.

mod common;

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;
use common::{replicas, request, run};
use strand_consensus::*;

type Group = Vec<Replica<RecordLog>>;

/// Gives every group `rounds` ops, one group after another; returns ops/s.
fn rounds(groups: &mut [Group], next_request: &mut u64, count: u64, body: &Bytes) -> f64 {
    let mut queue = VecDeque::new();
    let start = Instant::now();
    for _ in 0..count {
        *next_request += 1;
        for (id, group) in groups.iter_mut().enumerate() {
            let mut effects = Effects::new();
            let request = request(id as u64 + 1, 1, *next_request, body);
            group[0].on_request(request, &mut effects);
            run(group, (0, effects), &mut queue);
        }
    }
    (count * groups.len() as u64) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let count: usize = std::env::var("STRAND_BENCH_GROUPS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(1000);
    let body = Bytes::from(vec![7u8; 100]);
    let mut groups: Vec<Group> = (1..=count as u64).map(replicas).collect();
    let mut next_request = 0;
    let empty = rounds(&mut groups, &mut next_request, 8, &body);
    // Fill every window with the committed slots a replica keeps.
    rounds(
        &mut groups,
        &mut next_request,
        journal::JOURNAL_COMMITTED_KEEP,
        &body,
    );
    let full = rounds(&mut groups, &mut next_request, 8, &body);
    println!("{count} groups of 3 replicas, one op per group in turn, 100-byte bodies:");
    println!("  ops/s, windows almost empty   {empty:>12.0}");
    println!(
        "  ops/s, windows full ({} kept) {full:>12.0}",
        journal::JOURNAL_COMMITTED_KEEP
    );
    println!(
        "  full / empty                  {:>11.1}%",
        100.0 * full / empty
    );
}
