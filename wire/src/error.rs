//! Typed errors for everything that arrives from a socket or a file.
//!
//! Decoding never panics: every way a frame, a body or a record batch can be
//! wrong has a variant here, so the caller can close the connection, count the
//! fault, or ask a peer for a good copy.

use crate::command::Command;

/// Why a frame (header + body) was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the frame needs; a stream decoder waits for more, a
    /// whole-buffer decoder reports this.
    #[error("truncated frame: need {needed} bytes, have {available}")]
    Truncated {
        /// Bytes the frame needs (the header, or header + body once the size is known).
        needed: usize,
        /// Bytes that were available.
        available: usize,
    },
    /// The header checksum does not match the header bytes.
    #[error("header checksum mismatch: header says {expected:#010x}, bytes give {actual:#010x}")]
    HeaderChecksum {
        /// Value stored in the header.
        expected: u32,
        /// Value computed over the received bytes.
        actual: u32,
    },
    /// The body checksum does not match the body bytes.
    #[error("body checksum mismatch: header says {expected:#010x}, bytes give {actual:#010x}")]
    BodyChecksum {
        /// Value stored in the header.
        expected: u32,
        /// Value computed over the received bytes.
        actual: u32,
    },
    /// The peer speaks a protocol version this build does not.
    #[error("unsupported protocol version {version} (this build speaks {supported})")]
    UnsupportedProtocol {
        /// Version in the header.
        version: u16,
        /// Version this build speaks.
        supported: u16,
    },
    /// The command byte names no command.
    #[error("unknown command {command}")]
    UnknownCommand {
        /// The raw command byte.
        command: u8,
    },
    /// The size field is smaller than a header, or disagrees with the bytes given.
    #[error("bad frame size {size}: {reason}")]
    BadSize {
        /// The size field.
        size: u32,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The frame is larger than the receiver accepts.
    #[error("frame of {size} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// The size field.
        size: u32,
        /// The receiver's limit.
        max: u32,
    },
    /// A flags field has bits this build does not know.
    #[error("{command:?}: unknown bits {bits:#x} in {field}")]
    UnknownFlags {
        /// Command whose header holds the field.
        command: Command,
        /// Field name.
        field: &'static str,
        /// The unknown bits.
        bits: u64,
    },
    /// Bytes that must be zero are not.
    #[error("{command:?}: reserved bytes not zero")]
    ReservedNotZero {
        /// Command whose header holds the bytes.
        command: Command,
    },
    /// A field breaks an invariant of the protocol (for example `commit > op`).
    #[error("{command:?}: invalid header: {reason}")]
    Invalid {
        /// Command whose header is invalid.
        command: Command,
        /// The broken invariant.
        reason: &'static str,
    },
}

/// Why a message body (a client operation, a reply, a record batch) was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// The body ends in the middle of a field.
    #[error("body truncated at byte {at} reading {field}")]
    Truncated {
        /// Byte position where the read started.
        at: usize,
        /// What was being read.
        field: &'static str,
    },
    /// Bytes are left after the last field.
    #[error("{count} unexpected trailing bytes after the body")]
    TrailingBytes {
        /// How many bytes are left.
        count: usize,
    },
    /// A string field is not UTF-8.
    #[error("{field} is not valid UTF-8")]
    Utf8 {
        /// The field.
        field: &'static str,
    },
    /// A name (stream, topic, consumer) breaks the naming rules.
    #[error("invalid {field} name {name:?}: {reason}")]
    BadName {
        /// Which name.
        field: &'static str,
        /// The offending name (lossy).
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// An enumerated field has a value this build does not know.
    #[error("unknown {field} value {value}")]
    UnknownValue {
        /// The field.
        field: &'static str,
        /// Its raw value.
        value: u64,
    },
    /// Bits this build does not know are set in a flags field.
    #[error("unknown bits {bits:#x} in {field}")]
    UnknownFlags {
        /// The field.
        field: &'static str,
        /// The unknown bits.
        bits: u64,
    },
    /// Bytes that must be zero are not.
    #[error("reserved bytes in {field} not zero")]
    ReservedNotZero {
        /// The structure holding them.
        field: &'static str,
    },
    /// A field is outside its allowed range or breaks an invariant.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// The broken rule.
        reason: &'static str,
    },
    /// A record batch's checksum does not match its bytes.
    #[error(
        "record batch checksum mismatch: batch says {expected:#010x}, bytes give {actual:#010x}"
    )]
    BatchChecksum {
        /// Value stored in the batch header.
        expected: u32,
        /// Value computed over the bytes.
        actual: u32,
    },
}
