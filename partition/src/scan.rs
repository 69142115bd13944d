//! Scanning a whole segment for recovery: every valid entry, every damaged
//! region between valid entries, and a torn tail — the WAL's [`strand_wal::scan`]
//! run again past each fault, so damage in the middle never hides what follows.
//!
//! Pure: bytes in, [`SegmentScan`] out. Which ops a damaged region held is
//! decided by the caller, from the ops around it.

use strand_wal::{FRAME_HEADER_BYTES, Tail, scan};
use strand_wire::{HEADER_SIZE, PrepareHeader};

use crate::entry::header_of_payload;

/// One valid entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScannedEntry {
    /// Where its frame starts.
    pub position: u64,
    /// Its prepare header.
    pub header: PrepareHeader,
}

/// Bytes between valid entries that hold no valid entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fault {
    /// First damaged byte.
    pub start: u64,
    /// One past the last (where the next valid entry starts).
    pub end: u64,
    /// Prepare headers still readable inside the region (their checksum
    /// holds, only their body is damaged), with their frame positions.
    pub readable: Vec<ScannedEntry>,
}

/// One thing found in a segment, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    /// A valid entry.
    Entry(ScannedEntry),
    /// A damaged region with valid entries after it.
    Fault(Fault),
}

/// The verdict on one segment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SegmentScan {
    /// Entries and damaged regions, in file order.
    pub items: Vec<Item>,
    /// Where a torn tail starts (nothing valid after it), if there is one.
    pub torn_from: Option<u64>,
    /// Prepare headers readable inside the torn tail (a complete frame whose
    /// body is damaged looks torn when nothing follows it).
    pub torn_readable: Vec<ScannedEntry>,
    /// The torn tail holds a byte other than zero: the remains of a write,
    /// or a damaged last entry, which bytes alone cannot tell apart. Zeros
    /// alone are room never written (or written with zeros ahead).
    pub torn_has_data: bool,
    /// Length of the scanned bytes.
    pub total_len: u64,
}

impl SegmentScan {
    /// End of the last valid entry or damaged region (where a torn tail starts).
    pub fn valid_end(&self) -> u64 {
        self.torn_from.unwrap_or(self.total_len)
    }

    /// True when a damaged region sits between valid entries.
    pub fn has_faults(&self) -> bool {
        self.items.iter().any(|item| matches!(item, Item::Fault(_)))
    }

    /// True when nothing at all was found.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.torn_readable.is_empty()
    }
}

/// The payloads of every valid frame in `bytes`, in file order, damaged or
/// torn frames skipped and the scan run on past them: for the small files
/// of independent frames (the durable mark, the rewrite intents), where a
/// damaged frame says nothing about the next.
pub(crate) fn frame_payloads_past_damage(bytes: &[u8]) -> Vec<&[u8]> {
    let mut payloads = Vec::new();
    let mut rest = bytes;
    loop {
        let report = scan(rest);
        payloads.extend(report.frames.iter().map(|frame| frame.payload(rest)));
        match report.tail {
            Tail::Corrupt {
                next_valid_offset, ..
            } => rest = &rest[next_valid_offset as usize..],
            _ => return payloads,
        }
    }
}

/// Scans a segment's bytes. See the module docs.
pub(crate) fn scan_segment(bytes: &[u8]) -> SegmentScan {
    let mut items = Vec::new();
    let mut base = 0usize;
    let mut torn_from = None;
    loop {
        let report = scan(&bytes[base..]);
        for span in &report.frames {
            let position = (base as u64) + span.offset;
            let payload = span.payload(&bytes[base..]);
            match header_of_payload(payload) {
                Ok(header) => items.push(Item::Entry(ScannedEntry { position, header })),
                Err(_) => push_fault(
                    &mut items,
                    bytes,
                    position,
                    position + span.end() - span.offset,
                ),
            }
        }
        match report.tail {
            Tail::Clean => break,
            Tail::Torn { .. } => {
                torn_from = Some(base as u64 + report.valid_len);
                break;
            }
            Tail::Corrupt {
                fault_offset,
                next_valid_offset,
            } => {
                let start = base as u64 + fault_offset;
                let end = base as u64 + next_valid_offset;
                push_fault(&mut items, bytes, start, end);
                base = end as usize;
            }
        }
    }
    let torn_readable = torn_from.map_or_else(Vec::new, |start| {
        readable_headers(bytes, start, bytes.len() as u64)
    });
    let torn_has_data =
        torn_from.is_some_and(|start| bytes[start as usize..].iter().any(|&byte| byte != 0));
    let result = SegmentScan {
        items,
        torn_from,
        torn_readable,
        torn_has_data,
        total_len: bytes.len() as u64,
    };
    assert!(result.valid_end() <= result.total_len);
    result
}

/// Adds a damaged region, merging it with a region that ends where it starts.
fn push_fault(items: &mut Vec<Item>, bytes: &[u8], start: u64, end: u64) {
    assert!(start < end, "a damaged region holds at least one byte");
    if let Some(Item::Fault(previous)) = items.last_mut() {
        if previous.end == start {
            previous.end = end;
            previous.readable = readable_headers(bytes, previous.start, end);
            return;
        }
    }
    items.push(Item::Fault(Fault {
        start,
        end,
        readable: readable_headers(bytes, start, end),
    }));
}

/// Walks frames from `start` while their prepare headers are readable and
/// their lengths agree with them, staying inside `start..end`.
fn readable_headers(bytes: &[u8], start: u64, end: u64) -> Vec<ScannedEntry> {
    let mut found = Vec::new();
    let mut position = start as usize;
    let end = (end as usize).min(bytes.len());
    while position + FRAME_HEADER_BYTES + HEADER_SIZE <= end {
        let len_field = &bytes[position..position + 4];
        let payload_len =
            u32::from_le_bytes([len_field[0], len_field[1], len_field[2], len_field[3]]);
        let payload_start = position + FRAME_HEADER_BYTES;
        let Some(frame_end) = payload_start.checked_add(payload_len as usize) else {
            break;
        };
        let header_bytes = &bytes[payload_start..payload_start + HEADER_SIZE];
        let Ok(header) = header_of_frame_start(header_bytes, payload_len) else {
            break;
        };
        found.push(ScannedEntry {
            position: position as u64,
            header,
        });
        if frame_end > end {
            break;
        }
        position = frame_end;
    }
    found
}

/// A prepare header whose checksum holds and whose size matches the frame's
/// length field.
fn header_of_frame_start(header_bytes: &[u8], payload_len: u32) -> Result<PrepareHeader, ()> {
    use strand_wire::CommandHeader;
    use zerocopy::FromBytes;
    let header = PrepareHeader::read_from_bytes(header_bytes).map_err(|_| ())?;
    header.validate_header().map_err(|_| ())?;
    if header.prefix.size.get() != payload_len {
        return Err(());
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{chain_from, segment_bytes};

    #[test]
    fn a_clean_segment_is_all_entries() {
        let prepares = chain_from(1, 0, 0, 4, 3);
        let bytes = segment_bytes(&prepares);
        let result = scan_segment(&bytes);
        assert_eq!(result.items.len(), 4);
        assert_eq!(result.torn_from, None);
        assert!(!result.has_faults());
    }

    #[test]
    fn a_damaged_body_in_the_middle_is_a_fault_with_its_header_readable() {
        let prepares = chain_from(1, 0, 0, 4, 3);
        let mut bytes = segment_bytes(&prepares);
        let second = FRAME_HEADER_BYTES + prepares[0].frame_size();
        let flip = second + FRAME_HEADER_BYTES + HEADER_SIZE + 10;
        bytes[flip] ^= 1;
        let result = scan_segment(&bytes);
        assert_eq!(result.items.len(), 4);
        let Item::Fault(fault) = &result.items[1] else {
            panic!("expected a fault: {:?}", result.items[1]);
        };
        assert_eq!(fault.start, second as u64);
        assert_eq!(fault.readable.len(), 1);
        assert_eq!(fault.readable[0].header.op.get(), 2);
        assert_eq!(result.torn_from, None);
    }

    #[test]
    fn a_cut_last_frame_is_torn() {
        let prepares = chain_from(1, 0, 0, 3, 3);
        let bytes = segment_bytes(&prepares);
        let result = scan_segment(&bytes[..bytes.len() - 5]);
        assert_eq!(result.items.len(), 2);
        assert!(result.torn_from.is_some());
        assert!(result.torn_has_data);
        assert_eq!(result.torn_readable.len(), 1);
        assert_eq!(result.torn_readable[0].header.op.get(), 3);
    }

    #[test]
    fn zeros_after_the_last_entry_are_room_not_data() {
        let prepares = chain_from(1, 0, 0, 3, 3);
        let mut bytes = segment_bytes(&prepares);
        bytes.resize(bytes.len() + 4096, 0);
        let result = scan_segment(&bytes);
        assert_eq!(result.items.len(), 3);
        assert!(result.torn_from.is_some());
        assert!(!result.torn_has_data, "zero-filled room is no write");
    }
}
