//! Fuzzes the rewrite-intent file (`rewrites.intent`): as given, as frames
//! with valid checksums, and as intents with one byte flipped. Nothing may
//! panic; what is read re-encodes to itself.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strand_partition::fuzzing;

fuzz_target!(|data: &[u8]| {
    let _ = fuzzing::check_rewrite_intents(data);
    let _ = fuzzing::check_rewrite_intents(&fuzzing::frames_from(data));
    let _ = fuzzing::check_rewrite_intents(&fuzzing::intents_from(data));
});
