//! WAL bench: durable-ack throughput and latency of group commit, beside the
//! two numbers that frame it, measured in the same run on the same disk:
//!
//! - **baseline**: one appender doing plain `pwrite` + `fdatasync` per append;
//! - **raw**: sequential 1 MiB `pwrite`s with one `fdatasync` at the end.
//!
//! Cases: 1 KiB, 64 KiB and 1 MiB appends; 1, 16 and 64 appenders; 1 and 16
//! files. An appender is a closed loop with exactly one append outstanding: it
//! appends, waits for the durable ack, appends again (appender `a`'s `k`-th
//! append goes to file `(a + k) % files`). Appenders are multiplexed over a few
//! driver threads, the way tasks share a runtime's workers.
//!
//! Files are kept until the end of the run: deleting them mid-run would make
//! the file system discard their blocks during the next case's fsyncs.
//!
//! Settings (environment):
//! - `WAL_BENCH_SECONDS` — seconds per case (default 1; the default run takes
//!   about a minute);
//! - `WAL_BENCH_BACKENDS` — `uring`, `std` or `uring,std` (default `uring`);
//! - `WAL_BENCH_DIR` — where the files go (default the system temp dir);
//! - `WAL_BENCH_SIZES` — append sizes in KiB, e.g. `1,64` (default `1,64,1024`);
//! - `WAL_BENCH_SYNC_BYTES` — the WAL's `sync_bytes_max` (default 1 MiB).

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use strand_wal::{
    BackendChoice, Completion, FileId, IoEvent, IoObserver, OpenMode, Wal, WalConfig,
};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
const SIZES: [usize; 3] = [KIB, 64 * KIB, MIB];
const APPENDERS: [usize; 3] = [1, 16, 64];
const FILES: [usize; 2] = [1, 16];
const DRIVER_THREADS_MAX: usize = 4;
const RAW_BYTES: usize = 1024 * MIB;

/// One measured case.
struct Measured {
    payload_bytes: u64,
    appends: u64,
    fsyncs: u64,
    elapsed: Duration,
    latency_us: Histogram<u64>,
}

impl Measured {
    fn mb_per_s(&self) -> f64 {
        self.payload_bytes as f64 / 1e6 / self.elapsed.as_secs_f64()
    }
    fn fsyncs_per_s(&self) -> f64 {
        self.fsyncs as f64 / self.elapsed.as_secs_f64()
    }
    fn appends_per_s(&self) -> f64 {
        self.appends as f64 / self.elapsed.as_secs_f64()
    }
}

#[derive(Default)]
struct SyncCounter(AtomicU64);

impl IoObserver for SyncCounter {
    fn on_event(&self, event: IoEvent) {
        if let IoEvent::Synced { .. } = event {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn main() {
    let seconds: f64 = std::env::var("WAL_BENCH_SECONDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(1.0);
    let case_time = Duration::from_secs_f64(seconds);
    let backends = std::env::var("WAL_BENCH_BACKENDS").unwrap_or_else(|_| "uring".into());
    let base = std::env::var("WAL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    let dir = tempfile::tempdir_in(base).expect("bench dir");
    println!(
        "strand-wal bench: {seconds} s per case, files in {}",
        dir.path().display()
    );

    let sizes: Vec<usize> = std::env::var("WAL_BENCH_SIZES")
        .ok()
        .map(|list| {
            list.split(',')
                .filter_map(|kib| kib.trim().parse::<usize>().ok())
                .map(|kib| kib * KIB)
                .collect()
        })
        .unwrap_or_else(|| SIZES.to_vec());
    let backends: Vec<&str> = backends.split(',').map(str::trim).collect();
    let mut targets = Vec::new();
    for &size in &sizes {
        // This disk's speed drifts over a run (host caches), so each size group
        // gets its own raw and baseline, measured right before its cases.
        let raw = raw_sequential(dir.path(), RAW_BYTES);
        let baseline = baseline(dir.path(), size, case_time);
        println!(
            "\n== {} appends ==\nraw sequential (1 MiB pwrite x {}, one fdatasync): {raw:.1} MB/s",
            size_name(size),
            RAW_BYTES / MIB
        );
        print_baseline(size, &baseline);
        for &backend in &backends {
            println!("backend {backend}:");
            print_header();
            for appenders in APPENDERS {
                for files in FILES {
                    let measured = wal_case(backend, dir.path(), size, appenders, files, case_time);
                    let baseline = baseline.mb_per_s();
                    print_row(size, appenders, files, &measured, baseline, raw);
                    let (x_baseline, of_raw) =
                        (measured.mb_per_s() / baseline, measured.mb_per_s() / raw);
                    targets.push((backend, size, appenders, files, x_baseline, of_raw));
                }
            }
        }
    }
    print_targets(&targets);
}

/// Sequential 1 MiB writes then one fdatasync; MB/s over the whole thing.
fn raw_sequential(dir: &Path, total: usize) -> f64 {
    let path = dir.join("raw.bin");
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .expect("raw file");
    let chunk = vec![0x5au8; MIB];
    let started = Instant::now();
    for index in 0..total / MIB {
        file.write_all_at(&chunk, (index * MIB) as u64)
            .expect("raw write");
    }
    file.sync_data().expect("raw sync");
    let elapsed = started.elapsed();
    drop(file);
    total as f64 / 1e6 / elapsed.as_secs_f64()
}

/// One appender, one file, `pwrite` + `fdatasync` per append.
fn baseline(dir: &Path, size: usize, case_time: Duration) -> Measured {
    let path = dir.join(format!("baseline-{size}.bin"));
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .expect("baseline file");
    let payload = vec![0xa5u8; size];
    let mut latency_us = histogram();
    let mut offset = 0u64;
    let started = Instant::now();
    while started.elapsed() < case_time {
        let append_started = Instant::now();
        file.write_all_at(&payload, offset).expect("baseline write");
        file.sync_data().expect("baseline sync");
        record(&mut latency_us, append_started.elapsed());
        offset += size as u64;
    }
    let elapsed = started.elapsed();
    drop(file);
    let appends = latency_us.len();
    Measured {
        payload_bytes: offset,
        appends,
        fsyncs: appends,
        elapsed,
        latency_us,
    }
}

/// One WAL case: `appenders` closed loops over `files` files.
fn wal_case(
    backend: &str,
    dir: &Path,
    size: usize,
    appenders: usize,
    files: usize,
    case_time: Duration,
) -> Measured {
    let counter = Arc::new(SyncCounter::default());
    let choice = match backend {
        "std" => BackendChoice::Std,
        _ => BackendChoice::Uring,
    };
    let sync_bytes_max = std::env::var("WAL_BENCH_SYNC_BYTES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(strand_wal::SYNC_BYTES_MAX_DEFAULT);
    let wal = Wal::start(WalConfig {
        backend: choice,
        observer: Some(counter.clone()),
        sync_bytes_max,
        ..WalConfig::default()
    })
    .expect("WAL started");
    let case_dir = dir.join(format!("{backend}-{size}-{appenders}-{files}"));
    std::fs::create_dir_all(&case_dir).expect("case dir");
    let drivers = appenders.min(DRIVER_THREADS_MAX);
    let (senders, receivers): (Vec<Sender<Completion>>, Vec<_>) =
        (0..drivers).map(|_| mpsc::channel()).unzip();
    let router = Arc::new(move |completion: Completion| {
        let driver = (completion.user_data >> 32) as usize;
        let _ = senders[driver].send(completion);
    });
    let file_ids: Vec<FileId> = (0..files)
        .map(|index| {
            let path = case_dir.join(format!("{index}.log"));
            wal.open(&path, OpenMode::CreateNew, router.clone())
                .expect("bench file")
                .file
        })
        .collect();
    let payload = Bytes::from(vec![0xa5u8; size]);
    let merged = Arc::new(Mutex::new(histogram()));
    let fsyncs_before = counter.0.load(Ordering::Relaxed);
    let started = Instant::now();
    let deadline = started + case_time;
    let handles: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(driver, receiver)| {
            let owned: Vec<usize> = (driver..appenders).step_by(drivers).collect();
            let (wal, file_ids, payload, merged) = (
                wal.clone(),
                file_ids.clone(),
                payload.clone(),
                merged.clone(),
            );
            thread::spawn(move || {
                let driver_state = Driver {
                    wal,
                    file_ids,
                    payload,
                    driver,
                    deadline,
                };
                let (histogram, appends) = driver_state.run(&owned, &receiver);
                merged
                    .lock()
                    .expect("histogram")
                    .add(&histogram)
                    .expect("same bounds");
                appends
            })
        })
        .collect();
    let appends: u64 = handles
        .into_iter()
        .map(|handle| handle.join().expect("driver"))
        .sum();
    let elapsed = started.elapsed();
    let fsyncs = counter.0.load(Ordering::Relaxed) - fsyncs_before;
    wal.shutdown().expect("clean shutdown");
    let latency_us = merged.lock().expect("histogram").clone();
    Measured {
        payload_bytes: appends * size as u64,
        appends,
        fsyncs,
        elapsed,
        latency_us,
    }
}

/// One driver thread and the appenders it runs.
struct Driver {
    wal: Wal,
    file_ids: Vec<FileId>,
    payload: Bytes,
    driver: usize,
    deadline: Instant,
}

impl Driver {
    /// Runs the closed loops until the deadline; returns latencies and appends.
    fn run(&self, owned: &[usize], receiver: &mpsc::Receiver<Completion>) -> (Histogram<u64>, u64) {
        let mut latency_us = histogram();
        let mut count = vec![0usize; owned.len()];
        let mut sent_at: Vec<Instant> = (0..owned.len())
            .map(|slot| self.append(owned, slot, 0))
            .collect();
        let mut outstanding = owned.len();
        let mut appends = 0;
        while outstanding > 0 {
            let completion = receiver.recv().expect("a completion");
            completion.result.expect("durable");
            let slot = (completion.user_data & 0xffff_ffff) as usize;
            let now = Instant::now();
            record(&mut latency_us, now - sent_at[slot]);
            appends += 1;
            count[slot] += 1;
            if now < self.deadline {
                sent_at[slot] = self.append(owned, slot, count[slot]);
            } else {
                outstanding -= 1;
            }
        }
        (latency_us, appends)
    }

    fn append(&self, owned: &[usize], slot: usize, sequence: usize) -> Instant {
        let appender = owned[slot];
        let file = self.file_ids[(appender + sequence) % self.file_ids.len()];
        let user_data = (self.driver as u64) << 32 | slot as u64;
        let sent_at = Instant::now();
        self.wal
            .append(file, self.payload.clone(), user_data)
            .expect("queued");
        sent_at
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

fn record(histogram: &mut Histogram<u64>, latency: Duration) {
    let micros = (latency.as_micros() as u64).clamp(1, 60_000_000);
    histogram.record(micros).expect("in bounds");
}

fn size_name(size: usize) -> String {
    if size >= MIB {
        format!("{} MiB", size / MIB)
    } else {
        format!("{} KiB", size / KIB)
    }
}

fn print_baseline(size: usize, measured: &Measured) {
    println!(
        "baseline pwrite+fdatasync per append, {:>6}: {:>8.1} MB/s {:>8.0} fsyncs/s  p50 {:>6} us  p99 {:>6} us",
        size_name(size),
        measured.mb_per_s(),
        measured.fsyncs_per_s(),
        measured.latency_us.value_at_quantile(0.5),
        measured.latency_us.value_at_quantile(0.99),
    );
}

fn print_header() {
    println!(
        "{:>7} {:>9} {:>5} {:>9} {:>10} {:>9} {:>8} {:>8} {:>10} {:>7}",
        "size",
        "appenders",
        "files",
        "MB/s",
        "appends/s",
        "fsyncs/s",
        "p50 us",
        "p99 us",
        "x baseline",
        "% raw"
    );
}

fn print_row(
    size: usize,
    appenders: usize,
    files: usize,
    measured: &Measured,
    baseline: f64,
    raw: f64,
) {
    println!(
        "{:>7} {:>9} {:>5} {:>9.1} {:>10.0} {:>9.0} {:>8} {:>8} {:>10.1} {:>6.0}%",
        size_name(size),
        appenders,
        files,
        measured.mb_per_s(),
        measured.appends_per_s(),
        measured.fsyncs_per_s(),
        measured.latency_us.value_at_quantile(0.5),
        measured.latency_us.value_at_quantile(0.99),
        measured.mb_per_s() / baseline,
        100.0 * measured.mb_per_s() / raw,
    );
}

fn print_targets(results: &[(&str, usize, usize, usize, f64, f64)]) {
    println!("\ntargets:");
    for &(backend, size, appenders, files, x_baseline, of_raw) in results {
        if appenders != 64 {
            continue;
        }
        if size == KIB {
            let verdict = if x_baseline >= 20.0 { "PASS" } else { "MISS" };
            println!(
                "  {backend:>5}: 64 appenders x 1 KiB, {files:>2} file(s): {x_baseline:>6.1}x baseline (target >= 20x)  {verdict}"
            );
        }
        if size == 64 * KIB {
            let verdict = if of_raw >= 0.8 { "PASS" } else { "MISS" };
            println!(
                "  {backend:>5}: 64 appenders x 64 KiB, {files:>2} file(s): {:>5.0}% of raw (target >= 80%)  {verdict}",
                100.0 * of_raw
            );
        }
    }
}
