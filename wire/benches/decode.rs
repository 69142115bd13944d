//! Frame decode + validation throughput beside raw crc32c over the same bytes.
//!
//! `cargo bench -p strand-wire` prints, for 1 KiB, 64 KiB and 1 MiB bodies,
//! GB/s for decoding and validating a whole prepare frame (header checksum,
//! prefix, body checksum, field invariants) and GB/s for crc32c alone over the
//! same frame bytes, in the same run, and their ratio. Set
//! `STRAND_BENCH_SECONDS` to measure longer than the default 0.5 s per case.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use strand_wire::{CommandHeader, FRAME_SIZE_MAX_DEFAULT, Message, Msg, Operation, PrepareHeader};

fn frame(body_size: usize) -> Bytes {
    let mut header = PrepareHeader::new(1, 2, strand_wire::ViewId::new(0, 3), 0);
    header.op.set(100);
    header.commit.set(99);
    header.operation = Operation::Produce as u8;
    header.record_count.set(1);
    let body: Vec<u8> = (0..body_size)
        .map(|index| (index * 31 % 251) as u8)
        .collect();
    Msg::new(header, Bytes::from(body)).to_bytes()
}

/// Runs `work` repeatedly for at least `budget` and returns bytes per second.
fn measure(bytes_per_call: usize, budget: Duration, mut work: impl FnMut()) -> f64 {
    for _ in 0..3 {
        work();
    }
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < budget {
        for _ in 0..16 {
            work();
        }
        calls += 16;
    }
    (calls as f64 * bytes_per_call as f64) / start.elapsed().as_secs_f64()
}

fn main() {
    let seconds: f64 = std::env::var("STRAND_BENCH_SECONDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(0.5);
    let budget = Duration::from_secs_f64(seconds);
    println!(
        "{:>10} {:>16} {:>14} {:>8}",
        "body", "decode GB/s", "crc32c GB/s", "ratio"
    );
    for (label, body_size) in [
        ("1 KiB", 1024),
        ("64 KiB", 64 * 1024),
        ("1 MiB", 1024 * 1024),
    ] {
        let frame = frame(body_size);
        let size = frame.len();
        let decode = measure(size, budget, || {
            let message = Message::decode(black_box(frame.clone()), FRAME_SIZE_MAX_DEFAULT)
                .expect("bench frame is valid");
            black_box(message);
        });
        let raw = measure(size, budget, || {
            black_box(strand_wire::checksum::checksum(black_box(&frame)));
        });
        println!(
            "{label:>10} {:>16.2} {:>14.2} {:>7.1}%",
            decode / 1e9,
            raw / 1e9,
            100.0 * decode / raw
        );
    }
}
