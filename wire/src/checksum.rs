//! crc32c checksums, hardware accelerated where the CPU has them.
//!
//! Every frame carries two: one over the header after its own checksum field,
//! one over the body. A prepare's header checksum is also its identity in the
//! hash chain (`parent`).

/// Checksum of one contiguous byte slice.
#[inline]
pub fn checksum(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// Checksum of the concatenation of `parts`, without concatenating them.
///
/// Exists so that a reply assembled from several buffers (a fetch reply made of
/// segment slices) can be sealed without copying it into one buffer.
#[inline]
pub fn checksum_parts(parts: &[&[u8]]) -> u32 {
    parts
        .iter()
        .fold(0, |crc, part| crc32c::crc32c_append(crc, part))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_equal_whole() {
        let whole: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let (a, rest) = whole.split_at(17);
        let (b, c) = rest.split_at(4_000);
        assert_eq!(checksum_parts(&[a, b, c]), checksum(&whole));
        assert_eq!(checksum_parts(&[]), checksum(&[]));
    }

    #[test]
    fn known_vector() {
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(checksum(&[0u8; 32]), 0x8a91_36aa);
    }
}
