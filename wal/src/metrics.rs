//! Metric names and the few places that record them (`metrics` crate macros;
//! without an installed recorder they cost next to nothing).

use std::time::Duration;

/// Counter: frame bytes handed to the writer (the "queued" ack).
pub const QUEUED_BYTES_TOTAL: &str = "wal_queued_bytes_total";
/// Counter: bytes made durable by a completed fdatasync.
pub const DURABLE_BYTES_TOTAL: &str = "wal_durable_bytes_total";
/// Counter: fdatasyncs completed successfully.
pub const FSYNCS_TOTAL: &str = "wal_fsyncs_total";
/// Histogram: seconds from the start of a file's group-commit writes to the
/// completion of the fdatasync after them.
pub const FSYNC_LATENCY_SECONDS: &str = "wal_fsync_latency_seconds";
/// Counter: shared syncs issued (one `syncfs` for the bare syncs of many
/// files; each file it covers also counts in `wal_fsyncs_total`).
pub const SHARED_SYNCS_TOTAL: &str = "wal_shared_syncs_total";
/// Histogram: files covered by one shared sync.
pub const SHARED_SYNC_FILES: &str = "wal_shared_sync_files";
/// Counter: zero bytes written as room ahead of appends (see `preallocate`):
/// the extra write bandwidth paid for cheaper fsyncs of small appends.
pub const ZERO_FILL_BYTES_TOTAL: &str = "wal_zero_fill_bytes_total";
/// Counter: error completions delivered, labelled `kind`
/// (`no_space`, `io`, `sync_failed`, `poisoned`, `corrupt`, `open`, `other`).
pub const ERRORS_TOTAL: &str = "wal_errors_total";
/// Gauge: descriptors the writer holds open (files open minus those whose
/// descriptor was released to stay within the node's descriptor budget).
pub const DESCRIPTORS_HELD: &str = "wal_descriptors_held";
/// Counter: descriptors released from idle, durable files to stay within
/// the budget (each costs one reopen when the file is next written).
pub const DESCRIPTORS_RELEASED_TOTAL: &str = "wal_descriptors_released_total";

/// Registers descriptions and units with the installed recorder. Call once after
/// installing the exporter; recording works without it.
pub fn describe_metrics() {
    metrics::describe_counter!(
        QUEUED_BYTES_TOTAL,
        metrics::Unit::Bytes,
        "Frame bytes handed to the WAL writer"
    );
    metrics::describe_counter!(
        DURABLE_BYTES_TOTAL,
        metrics::Unit::Bytes,
        "Bytes made durable by a completed fdatasync"
    );
    metrics::describe_counter!(FSYNCS_TOTAL, "fdatasyncs completed by the WAL writer");
    metrics::describe_histogram!(
        FSYNC_LATENCY_SECONDS,
        metrics::Unit::Seconds,
        "Group-commit writes plus fdatasync, per file"
    );
    metrics::describe_counter!(
        SHARED_SYNCS_TOTAL,
        "Shared syncs (one syncfs covering many files) issued by the WAL writer"
    );
    metrics::describe_histogram!(SHARED_SYNC_FILES, "Files covered by one shared sync");
    metrics::describe_counter!(ERRORS_TOTAL, "WAL error completions by kind");
    metrics::describe_gauge!(DESCRIPTORS_HELD, "Descriptors the WAL writer holds open");
    metrics::describe_counter!(
        DESCRIPTORS_RELEASED_TOTAL,
        "Descriptors of idle, durable WAL files closed to stay within the budget"
    );
    metrics::describe_counter!(
        ZERO_FILL_BYTES_TOTAL,
        metrics::Unit::Bytes,
        "Zero bytes written ahead of small appends so that their fsyncs skip the size commit"
    );
}

pub(crate) fn record_queued(bytes: u64) {
    if bytes > 0 {
        metrics::counter!(QUEUED_BYTES_TOTAL).increment(bytes);
    }
}

pub(crate) fn record_sync(durable_bytes: u64, latency: Option<Duration>) {
    metrics::counter!(FSYNCS_TOTAL).increment(1);
    metrics::counter!(DURABLE_BYTES_TOTAL).increment(durable_bytes);
    if let Some(latency) = latency {
        metrics::histogram!(FSYNC_LATENCY_SECONDS).record(latency.as_secs_f64());
    }
}

pub(crate) fn record_shared_sync(files: usize) {
    metrics::counter!(SHARED_SYNCS_TOTAL).increment(1);
    metrics::histogram!(SHARED_SYNC_FILES).record(files as f64);
}

pub(crate) fn record_error(kind: &'static str) {
    metrics::counter!(ERRORS_TOTAL, "kind" => kind).increment(1);
}

pub(crate) fn record_zero_fill(bytes: u64) {
    metrics::counter!(ZERO_FILL_BYTES_TOTAL).increment(bytes);
}

pub(crate) fn record_descriptors(held: usize, released: usize) {
    metrics::gauge!(DESCRIPTORS_HELD).set(held as f64);
    if released > 0 {
        metrics::counter!(DESCRIPTORS_RELEASED_TOTAL).increment(released as u64);
    }
}
