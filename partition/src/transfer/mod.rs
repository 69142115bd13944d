//! State transfer: a partition exported at a frontier op as a stream of
//! checksummed chunks, imported into a staging directory, and swapped in.
//!
//! The stream: chunk 0 is the [`Manifest`] (frontier, the frontier op's
//! header, the superblock fields, the retained head, and the files with the
//! chunks each spans); every other chunk carries one piece of one file
//! (segments cut at the frontier, then the cursor snapshot). A chunk body is
//! at most [`strand_wire::STATE_TRANSFER_CHUNK_SIZE_MAX`] bytes:
//!
//! ```text
//! chunk u32 | file u32 | file_offset u64 | data_len u32 | crc32c u32 | data
//! ```
//!
//! with the crc32c over the 20 bytes before it and the data.
//!
//! Installing (see [`Partition::install`](crate::Partition::install)) never leaves a half-installed partition: the
//! staging directory is complete and verified before an install marker is
//! written, and the swap (partition → `.replaced`, staging → partition) is
//! finished by the next open if a crash interrupts it.

mod export;
mod import;
mod manifest;

pub use export::{Export, ExportConfig};
pub use import::{Import, finish_interrupted_install};
pub use manifest::{Manifest, ManifestFile, ManifestFileKind};

/// Bytes of a content chunk's header.
pub const CHUNK_HEADER_BYTES: usize = 24;

/// Largest data a content chunk can carry.
pub const CHUNK_DATA_BYTES_MAX: usize =
    strand_wire::STATE_TRANSFER_CHUNK_SIZE_MAX - CHUNK_HEADER_BYTES;

/// A content chunk's header, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkHeader {
    pub chunk: u32,
    pub file: u32,
    pub file_offset: u64,
    pub data_len: u32,
    pub crc: u32,
}

/// Encodes a content chunk.
pub(crate) fn encode_chunk(chunk: u32, file: u32, file_offset: u64, data: &[u8]) -> Vec<u8> {
    let data_len = u32::try_from(data.len()).expect("chunk data fits u32");
    assert!(
        data.len() <= CHUNK_DATA_BYTES_MAX,
        "chunk data above the bound"
    );
    let mut body = Vec::with_capacity(CHUNK_HEADER_BYTES + data.len());
    body.extend_from_slice(&chunk.to_le_bytes());
    body.extend_from_slice(&file.to_le_bytes());
    body.extend_from_slice(&file_offset.to_le_bytes());
    body.extend_from_slice(&data_len.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&body), data);
    body.extend_from_slice(&crc.to_le_bytes());
    body.extend_from_slice(data);
    body
}

/// Parses a content chunk, checking its crc32c.
pub(crate) fn decode_chunk(
    index: u32,
    body: &[u8],
) -> Result<(ChunkHeader, &[u8]), crate::PartitionError> {
    let invalid = |reason: &str| crate::PartitionError::ChunkInvalid {
        chunk: index,
        reason: reason.to_owned(),
    };
    let head = body
        .get(..CHUNK_HEADER_BYTES)
        .ok_or_else(|| invalid("shorter than its header"))?;
    let word = |at: usize| u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let mut offset = [0u8; 8];
    offset.copy_from_slice(&head[8..16]);
    let header = ChunkHeader {
        chunk: word(0),
        file: word(4),
        file_offset: u64::from_le_bytes(offset),
        data_len: word(16),
        crc: word(20),
    };
    let data = &body[CHUNK_HEADER_BYTES..];
    let actual = crc32c::crc32c_append(crc32c::crc32c(&head[..20]), data);
    if actual != header.crc {
        return Err(crate::PartitionError::ChunkChecksum {
            chunk: index,
            expected: header.crc,
            actual,
        });
    }
    if header.data_len as usize != data.len() {
        return Err(invalid("data length disagrees with the body"));
    }
    if data.len() > CHUNK_DATA_BYTES_MAX {
        return Err(invalid("data above the bound"));
    }
    if header.chunk != index {
        return Err(invalid("carries another chunk's index"));
    }
    Ok((header, data))
}
