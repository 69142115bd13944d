//! Placeholder replaced by the decode benchmark.
fn main() {}
