//! Damage a stopped node's files the way failing disks do, to try what
//! recovery makes of it: a flipped byte in a frame's header or payload, a
//! zeroed 4 KiB block, a file cut short inside a frame or exactly at one. Real-process tests use it, and so
//! can an operator who wants to see their own disks' faults handled (the
//! `strand-disk-fault` binary). Never run it on a running node's files.
//!
//! Every file Strand writes through its WAL (record-log segments, the cursor
//! event log, superblock copies, the metadata plane's log) is a sequence of
//! frames; [`frames`] finds them, and the faults aim at the `nth` newest one
//! (0: the last). Index files are not framed: their faults aim at a byte.

use std::path::{Path, PathBuf};

use strand_wal::{FrameSpan, scan};

/// One way a disk damages a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// One bit of a frame's header flipped (its length and checksum).
    FlipHeader,
    /// One bit of a frame's payload flipped (its middle byte).
    FlipPayload,
    /// Zeros over a frame's start, to the end of the 4 KiB-aligned block
    /// holding its first payload byte (what a lost or misdirected write of
    /// that block leaves, sparing the frames before it).
    ZeroBlock,
    /// The file cut short a few bytes into a frame's payload (everything
    /// after it goes too).
    Truncate,
    /// The file cut exactly at a frame's start: the frame and everything
    /// after it gone without a trace (what a lost write of a tail block
    /// that held nothing else leaves: the file reads as ending earlier).
    CutAtFrame,
}

impl Fault {
    /// Every fault, in the order a campaign tries them.
    pub const ALL: [Fault; 5] = [
        Fault::FlipHeader,
        Fault::FlipPayload,
        Fault::ZeroBlock,
        Fault::Truncate,
        Fault::CutAtFrame,
    ];

    /// The fault's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Fault::FlipHeader => "flip-header",
            Fault::FlipPayload => "flip-payload",
            Fault::ZeroBlock => "zero-block",
            Fault::Truncate => "truncate",
            Fault::CutAtFrame => "cut-at-frame",
        }
    }

    /// The fault named `name` on the command line.
    pub fn parse(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|fault| fault.name() == name)
    }
}

/// Why a fault could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// The file holds fewer valid frames than asked for.
    #[error("{path} holds {found} valid frames; the {nth}th newest was asked for")]
    NoSuchFrame {
        /// The file.
        path: PathBuf,
        /// Valid frames found.
        found: usize,
        /// The frame asked for (0: the newest).
        nth: usize,
    },
}

/// What a fault changed, for the caller's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The frame aimed at.
    pub frame: FrameSpan,
    /// The bytes changed (or, for a truncation, cut): `start..end`.
    pub bytes: std::ops::Range<u64>,
}

/// The valid frames at the start of `bytes`, in file order (a file damaged
/// already shows those before its first damage).
pub fn frames(bytes: &[u8]) -> Vec<FrameSpan> {
    scan(bytes).frames
}

/// Applies `fault` to the `nth` newest valid frame of the framed file at
/// `path` and writes the file back.
pub fn damage_frame(path: &Path, nth: usize, fault: Fault) -> Result<Damage, FaultError> {
    let io = |source| FaultError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes = std::fs::read(path).map_err(io)?;
    let spans = frames(&bytes);
    let Some(&frame) = spans.iter().rev().nth(nth) else {
        return Err(FaultError::NoSuchFrame {
            path: path.to_path_buf(),
            found: spans.len(),
            nth,
        });
    };
    let payload = frame.payload_offset();
    let damage = match fault {
        Fault::FlipHeader => flip(&mut bytes, frame.offset + 5),
        Fault::FlipPayload => flip(&mut bytes, payload + u64::from(frame.payload_len) / 2),
        Fault::ZeroBlock => {
            let start = frame.offset;
            let end = (payload / 4096 * 4096 + 4096).min(bytes.len() as u64);
            bytes[start as usize..end as usize].fill(0);
            start..end
        }
        Fault::Truncate => {
            let keep = (payload + 3).min(frame.end() - 1);
            let cut = keep..bytes.len() as u64;
            bytes.truncate(keep as usize);
            cut
        }
        Fault::CutAtFrame => {
            let cut = frame.offset..bytes.len() as u64;
            bytes.truncate(frame.offset as usize);
            cut
        }
    };
    std::fs::write(path, &bytes).map_err(io)?;
    Ok(Damage {
        frame,
        bytes: damage,
    })
}

/// Flips one bit of the byte at `at` of an unframed file (an index).
pub fn flip_byte(path: &Path, at: u64) -> Result<(), FaultError> {
    let io = |source| FaultError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes = std::fs::read(path).map_err(io)?;
    if bytes.is_empty() {
        return Err(FaultError::NoSuchFrame {
            path: path.to_path_buf(),
            found: 0,
            nth: 0,
        });
    }
    let at = at.min(bytes.len() as u64 - 1);
    flip(&mut bytes, at);
    std::fs::write(path, &bytes).map_err(io)
}

fn flip(bytes: &mut [u8], at: u64) -> std::ops::Range<u64> {
    bytes[at as usize] ^= 0x10;
    at..at + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(payloads: &[&[u8]]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for payload in payloads {
            strand_wal::encode_frame_into(payload, &mut bytes).expect("encode");
        }
        bytes
    }

    #[test]
    fn each_fault_leaves_the_frames_before_its_target_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("file");
        for fault in Fault::ALL {
            std::fs::write(&path, framed(&[&[1; 5000], &[2; 300], &[3; 300]])).expect("write");
            let damage = damage_frame(&path, 1, fault).expect("damage");
            let bytes = std::fs::read(&path).expect("read");
            let left = frames(&bytes);
            assert_eq!(damage.frame.offset, 5008, "{fault:?}");
            assert!(!left.iter().any(|frame| frame.offset == 5008), "{fault:?}");
            assert_eq!(left[0].offset, 0, "{fault:?}: the first frame is whole");
            assert_eq!(Fault::parse(fault.name()), Some(fault));
        }
        let error = damage_frame(&path, 7, Fault::FlipPayload).expect_err("no 8th frame");
        assert!(matches!(error, FaultError::NoSuchFrame { .. }));
    }
}
