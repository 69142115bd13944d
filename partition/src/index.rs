//! The sparse segment index (`records/<first-offset>.index`): one entry per
//! [`IndexConfig::interval_bytes`] of log, mapping a record offset and a
//! timestamp to a byte position, so a timestamp lookup reads a handful of
//! entries instead of the log.
//!
//! On disk: a sequence of WAL frames, each with one 32-byte entry
//! (`op`, `offset`, `position`, `timestamp_ns`, little-endian). Entries are
//! appended with the written (not durable) ack: the index is derived data.
//! Open compares the index with the one the log implies and rebuilds it from
//! the log when they differ (damaged, torn, or stale after a crash).

use strand_wal::{FRAME_HEADER_BYTES, Tail, encode_frame_into, scan};

use crate::entry::EntryMeta;

/// Bytes of one encoded entry.
pub const INDEX_ENTRY_BYTES: usize = 32;

/// Bytes one entry takes in the file (frame header included).
pub const INDEX_FRAME_BYTES: u64 = (FRAME_HEADER_BYTES + INDEX_ENTRY_BYTES) as u64;

/// How sparse the index is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexConfig {
    /// An entry is added when the log has grown this many bytes since the last.
    pub interval_bytes: u64,
}

impl Default for IndexConfig {
    fn default() -> IndexConfig {
        IndexConfig {
            interval_bytes: 64 * 1024,
        }
    }
}

/// One index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// The op of the indexed entry.
    pub op: u64,
    /// Its first record offset.
    pub offset: u64,
    /// Its frame's byte position in the segment.
    pub position: u64,
    /// Its prepare's timestamp.
    pub timestamp_ns: u64,
}

impl IndexEntry {
    /// The 32 bytes of the entry.
    pub fn encode(&self) -> [u8; INDEX_ENTRY_BYTES] {
        let mut bytes = [0u8; INDEX_ENTRY_BYTES];
        bytes[..8].copy_from_slice(&self.op.to_le_bytes());
        bytes[8..16].copy_from_slice(&self.offset.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.position.to_le_bytes());
        bytes[24..].copy_from_slice(&self.timestamp_ns.to_le_bytes());
        bytes
    }

    /// Reads an entry; `None` when the payload is not 32 bytes.
    pub fn decode(payload: &[u8]) -> Option<IndexEntry> {
        if payload.len() != INDEX_ENTRY_BYTES {
            return None;
        }
        let field = |at: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&payload[at..at + 8]);
            u64::from_le_bytes(word)
        };
        Some(IndexEntry {
            op: field(0),
            offset: field(8),
            position: field(16),
            timestamp_ns: field(24),
        })
    }

    /// The entry for an op of the log.
    pub(crate) fn of(op: u64, meta: &EntryMeta) -> IndexEntry {
        IndexEntry {
            op,
            offset: meta.offset_base,
            position: meta.position,
            timestamp_ns: meta.timestamp_ns,
        }
    }
}

/// Decides which entries are indexed: the first of a segment, then the first
/// at least `interval_bytes` past the last indexed one.
pub(crate) fn should_index(config: IndexConfig, last: Option<&IndexEntry>, position: u64) -> bool {
    match last {
        None => true,
        Some(last) => position >= last.position + config.interval_bytes,
    }
}

/// The index a segment's entries imply (damaged entries are skipped).
pub(crate) fn expected_index(
    config: IndexConfig,
    first_op: u64,
    entries: &[EntryMeta],
) -> Vec<IndexEntry> {
    let mut index: Vec<IndexEntry> = Vec::new();
    for (slot, meta) in entries.iter().enumerate() {
        if meta.damaged {
            continue;
        }
        if should_index(config, index.last(), meta.position) {
            index.push(IndexEntry::of(first_op + slot as u64, meta));
        }
    }
    index
}

/// Why an index file was not used as it stood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexDamage {
    /// The file is missing.
    Missing,
    /// A frame in it is damaged.
    Corrupt {
        /// Where.
        fault_offset: u64,
    },
    /// Its tail is torn (a crash before it was synced).
    Torn,
    /// It decodes but disagrees with the log (stale after a crash, or
    /// pointing at the wrong entries).
    Stale,
}

/// Decodes an index file's bytes, refusing anything but whole valid entries.
pub(crate) fn decode_index(bytes: &[u8]) -> Result<Vec<IndexEntry>, IndexDamage> {
    let report = scan(bytes);
    match report.tail {
        Tail::Clean => {}
        Tail::Torn { .. } => return Err(IndexDamage::Torn),
        Tail::Corrupt { fault_offset, .. } => return Err(IndexDamage::Corrupt { fault_offset }),
    }
    report
        .frames
        .iter()
        .map(|span| IndexEntry::decode(span.payload(bytes)).ok_or(IndexDamage::Stale))
        .collect()
}

/// The bytes of an index file holding `entries`.
pub(crate) fn encode_index(entries: &[IndexEntry]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(entries.len() * INDEX_FRAME_BYTES as usize);
    for entry in entries {
        encode_frame_into(&entry.encode(), &mut bytes).expect("32 bytes fit a frame");
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(position: u64, offset: u64) -> EntryMeta {
        EntryMeta {
            position,
            frame_len: 100,
            checksum: 1,
            offset_base: offset,
            offset_end: offset + 1,
            timestamp_ns: position * 10,
            damaged: false,
        }
    }

    #[test]
    fn entries_round_trip_and_files_decode() {
        let entries = vec![
            IndexEntry {
                op: 1,
                offset: 0,
                position: 0,
                timestamp_ns: 5,
            },
            IndexEntry {
                op: 9,
                offset: 80,
                position: 4096,
                timestamp_ns: 7,
            },
        ];
        let bytes = encode_index(&entries);
        assert_eq!(bytes.len() as u64, 2 * INDEX_FRAME_BYTES);
        assert_eq!(decode_index(&bytes), Ok(entries));
        assert_eq!(decode_index(&bytes[..50]), Err(IndexDamage::Torn));
        let mut damaged = bytes.clone();
        damaged[10] ^= 1;
        assert!(matches!(
            decode_index(&damaged),
            Err(IndexDamage::Corrupt { .. })
        ));
    }

    #[test]
    fn the_index_is_sparse_by_bytes() {
        let config = IndexConfig {
            interval_bytes: 250,
        };
        let entries: Vec<EntryMeta> = (0..10).map(|i| meta(i * 100, i)).collect();
        let index = expected_index(config, 1, &entries);
        let positions: Vec<u64> = index.iter().map(|entry| entry.position).collect();
        assert_eq!(positions, vec![0, 300, 600, 900]);
        assert_eq!(index[1].op, 4);
    }
}
