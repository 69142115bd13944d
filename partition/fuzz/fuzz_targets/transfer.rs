//! Fuzzes state transfer's decoders: the manifest (chunk 0) as given and
//! with a valid crc, and a content chunk. Nothing may panic; a manifest that
//! decodes round-trips and locates its chunks inside its files, a chunk that
//! decodes re-encodes to its bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strand_partition::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::check_manifest(data);
    fuzzing::check_manifest(&fuzzing::seal_crc(data));
    let word = |at: usize| {
        data.get(at..at + 4).map_or(0, |bytes| {
            u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
        })
    };
    fuzzing::check_chunk(word(0), data);
    // The chunk with its data length and crc made right.
    if let Some(data_bytes) = data.get(24..) {
        let offset = u64::from(word(8)) | u64::from(word(12)) << 32;
        let body = fuzzing::encode_chunk(word(0), word(4), offset, data_bytes);
        assert!(fuzzing::check_chunk(word(0), &body).is_some());
        assert!(fuzzing::check_chunk(word(0).wrapping_add(1), &body).is_none());
    }
});
