//! Fuzzes the cursor event log (whole files and single frames) and the
//! cursor snapshot, as given and as frames with valid checksums. Nothing may
//! panic; a log's valid prefix is contiguous, decodes alone and re-encodes;
//! a snapshot re-encodes to one that decodes the same.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strand_partition::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::check_cursor_log(data);
    fuzzing::check_cursor_frame(data);
    fuzzing::check_cursor_snapshot(data);
    let framed = fuzzing::frames_from(data);
    fuzzing::check_cursor_log(&framed);
    fuzzing::check_cursor_snapshot(&framed);
    fuzzing::check_cursor_snapshot(&fuzzing::frame(data));
});
