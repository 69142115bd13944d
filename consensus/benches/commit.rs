//! Ops committed per second through three in-memory replicas (no I/O): the
//! consensus core's own cost, to show it is never the bottleneck.
//!
//! `cargo bench -p strand-consensus`. Each round the primary prepares a full
//! pipeline of produce requests; messages go straight to their replica and
//! storage completes every write at once. Beside it, in the same run, the
//! cost of just building and validating the same prepares (the floor any
//! replication pays). Set `STRAND_BENCH_SECONDS` to measure longer.

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use strand_consensus::*;
use strand_wire::{
    CommandHeader, ConfirmPolicy, Durability, Message, Msg, Operation, PrepareHeader, RequestHeader,
};

fn replicas() -> Vec<Replica<RecordLog>> {
    (0..3u8)
        .map(|replica| {
            let config = Config {
                cluster: 1,
                group: 1,
                replica,
                memberships: vec![strand_consensus::epoch::Membership::initial(
                    3,
                    ConfirmPolicy::MajorityDurable,
                )],
                durability: Durability::Persisted,
                cursor_durability: Durability::Persisted,
                timeouts: Timeouts::default(),
                seed: u64::from(replica),
            };
            let mut replica = Replica::open(config, Recovered::fresh(), RecordLog::default());
            let mut effects = Effects::new();
            replica.start(&mut effects);
            replica
        })
        .collect()
}

/// Runs effects to quiescence; returns the number of commits seen on the primary.
fn run(
    replicas: &mut [Replica<RecordLog>],
    start: (u8, Effects),
    queue: &mut VecDeque<(u8, Effect)>,
) -> u64 {
    let mut commits = 0;
    let (origin, mut effects) = start;
    queue.extend(effects.drain().map(|effect| (origin, effect)));
    let mut scratch = Effects::new();
    while let Some((at, effect)) = queue.pop_front() {
        let replica = &mut replicas[usize::from(at)];
        match effect {
            Effect::Send { to, message } => {
                replicas[usize::from(to)].on_message(message, &mut scratch);
                queue.extend(scratch.drain().map(|effect| (to, effect)));
                continue;
            }
            Effect::WritePrepare { prepare } => {
                let (op, checksum) = (prepare.header().op.get(), prepare.checksum());
                replica.on_write(op, checksum, WriteStage::Queued, &mut scratch);
                replica.on_write(op, checksum, WriteStage::Durable, &mut scratch);
            }
            Effect::PersistState { sequence, .. } => {
                replica.on_state_persisted(sequence, &mut scratch)
            }
            Effect::Commit { .. } if at == 0 => commits += 1,
            _ => {}
        }
        queue.extend(scratch.drain().map(|effect| (at, effect)));
    }
    commits
}

fn request(client: u128, request: u64, body: &Bytes) -> ClientRequest {
    let mut header = RequestHeader::new(1, 1, strand_wire::ViewId::new(0, 0), 0);
    header.client.set(client);
    header.request.set(request);
    header.operation = Operation::Produce as u8;
    ClientRequest {
        request: Msg::new(header, body.clone()),
        record_count: 1,
        timestamp_ns: 0,
    }
}

fn seconds() -> f64 {
    std::env::var("STRAND_BENCH_SECONDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(2.0)
}

fn main() {
    let budget = Duration::from_secs_f64(seconds());
    let body = Bytes::from(vec![7u8; 100]);
    let mut replicas = replicas();
    let mut queue = VecDeque::new();
    let mut next_request = 0u64;
    let mut committed = 0u64;
    let start = Instant::now();
    while start.elapsed() < budget {
        let mut effects = Effects::new();
        for _ in 0..PIPELINE_PREPARES_MAX {
            next_request += 1;
            replicas[0].on_request(request(1, next_request, &body), &mut effects);
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
