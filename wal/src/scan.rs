//! Recovery scan: a pure function from a file's bytes to what is valid in it.
//!
//! [`scan`] walks frames from offset 0 and stops at the first one that is not
//! valid (short header, length above the bound, frame running past the end, or
//! checksum mismatch). What follows decides the verdict:
//!
//! - nothing valid anywhere after it: a **torn tail** ([`Tail::Torn`]). The bytes
//!   from `valid_len` on are the remains of writes that a crash cut short; the
//!   caller truncates them.
//! - a valid frame starting at some later byte: **corruption** ([`Tail::Corrupt`])
//!   with the fault's position. Valid entries lie beyond it, so truncating would
//!   destroy data: the scan never suggests it, and [`crate::WalCore::open`]
//!   refuses the file.
//!
//! Limits the caller must know:
//! - A torn tail cannot be told from media corruption of the last frame(s) by
//!   bytes alone. The caller checks the truncation against what it knows was
//!   acknowledged durable (e.g. the superblock's commit op) before trusting it.
//! - A crash that persisted later unsynced pages but not earlier ones leaves a
//!   hole followed by valid frames: that is reported as corruption, at or past the
//!   last offset that was ever acknowledged durable.
//! - The search for a valid frame after a fault tries every byte position
//!   (unless everything after the fault is zeros: zero-filled room, said at
//!   once); it runs only on the fault path and costs O(bytes after the fault × typical
//!   plausible frame length) in the worst case.

use crate::frame::{FRAME_HEADER_BYTES, FRAME_PAYLOAD_BYTES_MAX, frame_checksum};

/// Where one valid frame sits in the scanned bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSpan {
    /// Byte offset of the frame header.
    pub offset: u64,
    /// Length of the payload that follows the 8-byte header.
    pub payload_len: u32,
}

impl FrameSpan {
    /// Offset of the first payload byte.
    pub fn payload_offset(&self) -> u64 {
        self.offset + FRAME_HEADER_BYTES as u64
    }

    /// Offset one past the frame's last byte (where the next frame starts).
    pub fn end(&self) -> u64 {
        self.payload_offset() + u64::from(self.payload_len)
    }

    /// The payload inside `bytes`, the buffer this span was scanned from.
    pub fn payload<'a>(&self, bytes: &'a [u8]) -> &'a [u8] {
        &bytes[self.payload_offset() as usize..self.end() as usize]
    }
}

/// What follows the longest valid prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// The valid frames cover the whole input.
    Clean,
    /// `torn_bytes` bytes after the valid prefix hold no valid frame: the remains
    /// of a write cut short. Truncate the file to `valid_len`.
    Torn {
        /// Bytes between `valid_len` and the end of the input.
        torn_bytes: u64,
    },
    /// The frame at `fault_offset` is invalid but a valid frame starts at
    /// `next_valid_offset`: a fault in the middle of the file. Never truncate past
    /// it silently; repair the range or treat the file as lost.
    Corrupt {
        /// Offset of the first invalid frame (equal to `valid_len`).
        fault_offset: u64,
        /// Offset of the first valid frame found after the fault.
        next_valid_offset: u64,
    },
}

/// The verdict of [`scan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanReport {
    /// Every valid frame of the prefix, in file order.
    pub frames: Vec<FrameSpan>,
    /// Length of the longest valid prefix (end of the last valid frame, or 0).
    pub valid_len: u64,
    /// Length of the scanned input.
    pub total_len: u64,
    /// What follows the valid prefix.
    pub tail: Tail,
}

impl ScanReport {
    /// True when the whole input is valid frames.
    pub fn is_clean(&self) -> bool {
        self.tail == Tail::Clean
    }
}

/// Scans `bytes` (a whole WAL file) and returns its longest valid prefix and
/// what follows it. Pure: no I/O, deterministic, never panics on any input.
pub fn scan(bytes: &[u8]) -> ScanReport {
    let mut frames = Vec::new();
    let mut offset = 0usize;
    while let Some(span) = frame_at(bytes, offset) {
        frames.push(span);
        offset = span.end() as usize;
    }
    let tail = classify_tail(bytes, offset);
    let report = ScanReport {
        frames,
        valid_len: offset as u64,
        total_len: bytes.len() as u64,
        tail,
    };
    assert!(report.valid_len <= report.total_len);
    report
}

/// Decides what the bytes from `valid_len` on are.
fn classify_tail(bytes: &[u8], valid_len: usize) -> Tail {
    assert!(valid_len <= bytes.len());
    if valid_len == bytes.len() {
        return Tail::Clean;
    }
    let torn = Tail::Torn {
        torn_bytes: (bytes.len() - valid_len) as u64,
    };
    // Zero-filled room (or a crash's zeros): no frame can start inside it, as
    // a header of eight zero bytes never checks (crc32c of a zero length is
    // not zero). Said at once instead of trying every position.
    if bytes[valid_len..].iter().all(|&byte| byte == 0) {
        return torn;
    }
    match next_valid_frame(bytes, valid_len + 1) {
        Some(next) => Tail::Corrupt {
            fault_offset: valid_len as u64,
            next_valid_offset: next as u64,
        },
        None => torn,
    }
}

/// The first offset at or after `from` where a valid frame starts.
fn next_valid_frame(bytes: &[u8], from: usize) -> Option<usize> {
    let last_start = bytes.len().checked_sub(FRAME_HEADER_BYTES)?;
    (from..=last_start).find(|&offset| frame_at(bytes, offset).is_some())
}

/// The valid frame starting at `offset`, if there is one.
fn frame_at(bytes: &[u8], offset: usize) -> Option<FrameSpan> {
    let header = bytes.get(offset..offset.checked_add(FRAME_HEADER_BYTES)?)?;
    let len_bytes: [u8; 4] = header[..4].try_into().ok()?;
    let crc_stored = u32::from_le_bytes(header[4..].try_into().ok()?);
    let payload_len = u32::from_le_bytes(len_bytes);
    if payload_len as usize > FRAME_PAYLOAD_BYTES_MAX {
        return None;
    }
    let payload_start = offset + FRAME_HEADER_BYTES;
    let payload = bytes.get(payload_start..payload_start + payload_len as usize)?;
    if frame_checksum(len_bytes, payload) != crc_stored {
        return None;
    }
    Some(FrameSpan {
        offset: offset as u64,
        payload_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::encode_frame_into;

    fn file_of(payloads: &[&[u8]]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for payload in payloads {
            encode_frame_into(payload, &mut bytes).expect("small payload");
        }
        bytes
    }

    #[test]
    fn empty_input_is_clean() {
        let report = scan(&[]);
        assert_eq!(report.tail, Tail::Clean);
        assert_eq!(report.valid_len, 0);
        assert!(report.frames.is_empty());
    }

    #[test]
    fn whole_frames_are_clean_and_spans_point_at_payloads() {
        let bytes = file_of(&[b"one", b"", b"three"]);
        let report = scan(&bytes);
        assert!(report.is_clean());
        assert_eq!(report.frames.len(), 3);
        assert_eq!(report.frames[0].payload(&bytes), b"one");
        assert_eq!(report.frames[1].payload(&bytes), b"");
        assert_eq!(report.frames[2].payload(&bytes), b"three");
        assert_eq!(report.valid_len, bytes.len() as u64);
    }

    #[test]
    fn every_cut_inside_the_last_frame_is_a_torn_tail() {
        let bytes = file_of(&[b"first entry", b"second entry", b"last entry here"]);
        let last_start = scan(&bytes).frames[2].offset as usize;
        for cut in last_start + 1..bytes.len() {
            let report = scan(&bytes[..cut]);
            assert_eq!(report.frames.len(), 2, "cut at {cut}");
            assert_eq!(report.valid_len, last_start as u64, "cut at {cut}");
            assert_eq!(
                report.tail,
                Tail::Torn {
                    torn_bytes: (cut - last_start) as u64
                },
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn zero_filled_tail_is_torn() {
        let mut bytes = file_of(&[b"kept"]);
        let valid = bytes.len() as u64;
        bytes.extend_from_slice(&[0u8; 4096]);
        let report = scan(&bytes);
        assert_eq!(report.valid_len, valid);
        assert_eq!(report.tail, Tail::Torn { torn_bytes: 4096 });
    }

    #[test]
    fn a_flipped_byte_in_the_middle_is_corruption_at_its_frame() {
        let bytes = file_of(&[b"aaaa", b"bbbbbbbb", b"cccc", b"dddd"]);
        let spans = scan(&bytes).frames;
        for index in spans[1].offset as usize..spans[1].end() as usize {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x01;
            let report = scan(&damaged);
            assert_eq!(report.frames.len(), 1, "flip at {index}");
            assert_eq!(
                report.tail,
                Tail::Corrupt {
                    fault_offset: spans[1].offset,
                    next_valid_offset: spans[2].offset,
                },
                "flip at {index}"
            );
        }
    }

    #[test]
    fn a_length_above_the_bound_is_invalid() {
        let mut bytes = file_of(&[b"x"]);
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(&[0u8; 4]);
        let report = scan(&bytes);
        assert_eq!(report.frames.len(), 1);
        assert_eq!(report.tail, Tail::Torn { torn_bytes: 8 });
    }
}
