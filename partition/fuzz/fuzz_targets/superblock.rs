//! Fuzzes the superblock: a copy's payload and a copy's whole file as open
//! reads it, as given and with valid checksums. Nothing may panic; a valid
//! copy re-encodes to one that decodes the same.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strand_partition::fuzzing;

fuzz_target!(|data: &[u8]| {
    let copy = data.first().map_or(0, |byte| byte & 1);
    fuzzing::check_superblock_payload(data);
    fuzzing::check_superblock_file(data, copy);
    let sealed = fuzzing::seal_crc(data);
    fuzzing::check_superblock_payload(&sealed);
    fuzzing::check_superblock_file(&fuzzing::frame(&sealed), copy);
});
