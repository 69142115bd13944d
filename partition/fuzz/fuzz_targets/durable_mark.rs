//! Fuzzes the durable-mark file: as given, as frames with valid checksums,
//! and as marks (magic in place) with one byte flipped. Nothing may panic;
//! what is taken is a mark that can be written, and round-trips.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strand_partition::fuzzing;

fuzz_target!(|data: &[u8]| {
    let _ = fuzzing::check_durable_mark(data);
    let _ = fuzzing::check_durable_mark(&fuzzing::frames_from(data));
    let _ = fuzzing::check_durable_mark(&fuzzing::marks_from(data));
});
