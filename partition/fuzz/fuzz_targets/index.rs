//! Fuzzes the sparse index file: as given, and as frames with valid
//! checksums. Nothing may panic; a whole file re-encodes to its bytes, and a
//! refusal points inside the input.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strand_partition::fuzzing;

fuzz_target!(|data: &[u8]| {
    let _ = fuzzing::check_index(data);
    let _ = fuzzing::check_index(&fuzzing::frames_from(data));
});
