//! Fuzzes the segment scan (and the WAL scan under it): arbitrary bytes, the
//! same as frames with valid checksums, and a valid segment damaged as the
//! input says (flips, cuts, zeroed runs, appended bytes). Nothing may panic;
//! entries and damaged regions tile the bytes up to the torn tail, and every
//! entry found is whole.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strand_partition::fixtures::{chain_from, segment_bytes};
use strand_partition::fuzzing;

/// A valid segment shaped by the first byte, damaged by each following
/// group of four bytes: `[what, position (u16), value]`.
fn damaged_segment(data: &[u8]) -> Option<Vec<u8>> {
    let (&shape, damage) = data.split_first()?;
    let count = u64::from(shape % 6) + 1;
    let records_each = u32::from(shape / 6 % 3) + 1;
    let mut bytes = segment_bytes(&chain_from(1, 0, 0, count, records_each));
    for step in damage.chunks_exact(4) {
        if bytes.is_empty() {
            break;
        }
        let at = usize::from(u16::from_le_bytes([step[1], step[2]])) % bytes.len();
        match step[0] % 4 {
            0 => bytes[at] ^= step[3].max(1),
            1 => bytes.truncate(at),
            2 => bytes[at..]
                .iter_mut()
                .take(usize::from(step[3]))
                .for_each(|byte| *byte = 0),
            _ => bytes.extend(std::iter::repeat_n(step[3], at % 64 + 1)),
        }
    }
    Some(bytes)
}

fuzz_target!(|data: &[u8]| {
    fuzzing::check_segment(data);
    fuzzing::check_segment(&fuzzing::frames_from(data));
    if let Some(bytes) = damaged_segment(data) {
        fuzzing::check_segment(&bytes);
    }
});
