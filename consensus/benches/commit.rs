//! Ops committed per second through three in-memory replicas (no I/O): the
//! consensus core's own cost, to show it is never the bottleneck.
//!
//! `cargo bench -p strand-consensus`. Each round the primary prepares a full
//! pipeline of produce requests; messages go straight to their replica and
//! storage completes every write at once. Beside it, in the same run, the
//! cost of just building and validating the same prepares (the floor any
//! replication pays). Set `STRAND_BENCH_SECONDS` to measure longer.

mod common;

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{replicas, request, run};
use strand_consensus::*;
use strand_wire::{CommandHeader, Message, Msg, Operation, PrepareHeader};

fn seconds() -> f64 {
    std::env::var("STRAND_BENCH_SECONDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(2.0)
}

fn main() {
    let budget = Duration::from_secs_f64(seconds());
    let body = Bytes::from(vec![7u8; 100]);
    let mut replicas = replicas(1);
    let mut queue = VecDeque::new();
    let mut next_request = 0u64;
    let mut committed = 0u64;
    let start = Instant::now();
    while start.elapsed() < budget {
        let mut effects = Effects::new();
        for _ in 0..PIPELINE_PREPARES_MAX {
            next_request += 1;
            replicas[0].on_request(request(1, 1, next_request, &body), &mut effects);
        }
        committed += run(&mut replicas, (0, effects), &mut queue);
    }
    let elapsed = start.elapsed().as_secs_f64();
    assert_eq!(committed, next_request, "every request committed");
    let ops_per_second = committed as f64 / elapsed;

    // Baseline: just building and validating the same prepares once per replica.
    let start = Instant::now();
    let mut built = 0u64;
    while start.elapsed() < budget {
        for _ in 0..3 {
            let mut header = PrepareHeader::new(1, 1, strand_wire::ViewId::new(0, 0), 0);
            header.op.set(built + 1);
            header.commit.set(built);
            header.operation = Operation::Produce as u8;
            header.record_count.set(1);
            let prepare = Msg::new(header, body.clone());
            black_box(Message::Prepare(prepare));
        }
        built += 1;
    }
    let floor = built as f64 / start.elapsed().as_secs_f64();
    println!("3 replicas, persisted, 64-deep pipeline, 100-byte bodies:");
    println!("  committed ops/s (full VSR round)  {ops_per_second:>12.0}");
    println!("  prepares built+sealed ×3 per s    {floor:>12.0}");
    println!(
        "  ratio                              {:>11.1}%",
        100.0 * ops_per_second / floor
    );
    println!(
        "  target: ≥ 500,000 ops/s — {}",
        if ops_per_second >= 500_000.0 {
            "met"
        } else {
            "MISSED"
        }
    );
}
