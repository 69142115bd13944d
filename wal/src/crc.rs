//! crc32c of a concatenation from the checksums of its parts.
//!
//! A frame's checksum covers its length field, its head and its body. When
//! the caller already holds the body's crc32c (a prepare's header carries
//! it), reading the body again is wasted: the checksum of `a ++ b` follows
//! from `crc32c(a)`, `crc32c(b)` and the length of `b`, by multiplying
//! `crc32c(a)` by `x^(8 len(b))` modulo the polynomial and adding
//! `crc32c(b)`. Powers `x^(2^k)` are tabled at compile time, so a combine
//! costs one short multiplication per set bit of the length: well under a
//! microsecond, where the matrix-squaring method costs several.

/// The crc32c polynomial, bit-reflected.
const POLYNOMIAL: u32 = 0x82F6_3B78;

/// `x^0` (the multiplicative identity) in the reflected representation.
const ONE: u32 = 1 << 31;

/// `a * b` modulo the polynomial, both reflected.
const fn multiply(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    let mut bit = ONE;
    while bit != 0 {
        if a & bit != 0 {
            product ^= b;
        }
        bit >>= 1;
        b = if b & 1 != 0 {
            (b >> 1) ^ POLYNOMIAL
        } else {
            b >> 1
        };
    }
    product
}

/// `X_POWERS[k]` is `x^(2^k)` modulo the polynomial, for every `k` a byte
/// count of up to 64 bits needs (`k = 3` is one byte).
const X_POWERS: [u32; 67] = {
    let mut powers = [0u32; 67];
    let mut power = ONE >> 1; // x^1
    let mut k = 0;
    while k < powers.len() {
        powers[k] = power;
        power = multiply(power, power);
        k += 1;
    }
    powers
};

/// `x^(8 bytes)` modulo the polynomial: the factor that appends `bytes`
/// zero bytes to a checksum.
fn x_to_bytes(bytes: u64) -> u32 {
    let mut bits = bytes;
    let mut k = 3; // 8 bits a byte: start from x^(2^3)
    let mut power = ONE;
    while bits != 0 {
        if bits & 1 != 0 {
            power = multiply(X_POWERS[k], power);
        }
        bits >>= 1;
        k += 1;
    }
    power
}

/// `crc32c(a ++ b)` from `crc32c(a)`, `crc32c(b)` and `b`'s length.
pub fn crc32c_combine(crc_a: u32, crc_b: u32, len_b: usize) -> u32 {
    multiply(x_to_bytes(len_b as u64), crc_a) ^ crc_b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_equals_the_checksum_of_the_whole() {
        let whole: Vec<u8> = (0..=255u8).cycle().take(200_000).collect();
        for at in [0, 1, 7, 8, 16, 4_096, 12_345, 199_999, 200_000] {
            let (a, b) = whole.split_at(at);
            let combined = crc32c_combine(crc32c::crc32c(a), crc32c::crc32c(b), b.len());
            assert_eq!(combined, crc32c::crc32c(&whole), "split at {at}");
        }
    }

    #[test]
    fn combined_agrees_with_the_crates_own_combine() {
        // (Length 0 is left out: only crc32c(b) = 0 is consistent with it,
        // and the crate then answers `crc_a` whatever `crc_b` says.)
        for len in [1usize, 3, 255, 256, 65_536, 1 << 30, usize::MAX >> 1] {
            let (a, b) = (0x1234_5678, 0x9abc_def0);
            assert_eq!(
                crc32c_combine(a, b, len),
                crc32c::crc32c_combine(a, b, len),
                "len {len}"
            );
        }
    }
}
