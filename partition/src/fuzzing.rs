//! The on-disk decoders, reachable from outside the crate for the fuzz
//! targets (`partition/fuzz/`) and the decoder proptests
//! (`tests/decoders.rs`) only: built with the `fuzzing` feature, never by a
//! node. Several decoders are private to the crate; these wrappers reach them
//! without widening the real API.
//!
//! Each `check_*` function runs one decoder over arbitrary bytes, evaluates
//! whatever it accepts in full, and asserts what the decoder promises of it
//! (a round trip, spans inside the input, the prefix it keeps). Those
//! assertions are on the decoder's own promises, not on the input: a panic
//! here is a decoder's bug. The `encode_*` and `seal_*` functions build the
//! valid inputs the round trips start from, and give arbitrary bytes valid
//! checksums so a fuzzer reaches the checks behind them.

use std::collections::BTreeMap;

use strand_wal::{FRAME_HEADER_BYTES, Tail};
use strand_wire::{HEADER_SIZE, PrepareHeader};

use crate::durable_mark::{self, MarkSlot, SEQUENCE_LIMIT};
use crate::index::{self, INDEX_ENTRY_BYTES, INDEX_FRAME_BYTES, IndexDamage, IndexEntry};
use crate::scan::{self, Item, ScannedEntry};
use crate::superblock::{self, CopyRead, FRAME_BYTES_STEP, Superblock};
use crate::transfer::{self, CHUNK_DATA_BYTES_MAX, CHUNK_HEADER_BYTES, Manifest};
use crate::{cursor_snapshot, cursors, unsynced};

/// Appends the crc32c a superblock payload or a manifest ends in.
pub fn seal_crc(body: &[u8]) -> Vec<u8> {
    let mut bytes = body.to_vec();
    bytes.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
    bytes
}

/// One WAL frame holding `payload` (at most a frame's bound).
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(FRAME_HEADER_BYTES + payload.len());
    strand_wal::encode_frame_into(payload, &mut bytes).expect("a fuzz input fits a frame");
    bytes
}

/// Turns arbitrary bytes into a file of mostly valid WAL frames: each step
/// reads a length byte `n`, then frames the next `n` bytes, except `n = 255`,
/// which copies the next byte's worth of bytes unframed (damage).
pub fn frames_from(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let (raw, len) = match len {
            255 => match tail.split_first() {
                Some((&len, tail)) => {
                    rest = tail;
                    (true, usize::from(len))
                }
                None => break,
            },
            len => {
                rest = tail;
                (false, usize::from(len))
            }
        };
        let (piece, tail) = rest.split_at(len.min(rest.len()));
        rest = tail;
        if raw {
            out.extend_from_slice(piece);
        } else {
            out.extend_from_slice(&frame(piece));
        }
    }
    out
}

/// Decodes a superblock payload; what decodes re-encodes (as the current
/// version, padded to whole steps) to a payload that decodes to the same.
pub fn check_superblock_payload(payload: &[u8]) -> Option<Superblock> {
    let superblock = Superblock::decode(payload).ok()?;
    let again = superblock.encode();
    assert_eq!(Superblock::decode(&again).as_ref(), Ok(&superblock));
    let file = superblock::encode_file(&superblock);
    assert_eq!(file.len() % FRAME_BYTES_STEP, 0, "a copy is whole steps");
    Some(superblock)
}

/// Decodes a superblock copy's file as open does; a valid copy belongs to
/// `copy` and its file, written again, reads back the same.
pub fn check_superblock_file(bytes: &[u8], copy: u8) -> Option<Superblock> {
    match superblock::decode_copy(bytes, copy) {
        CopyRead::Valid(superblock) => {
            assert_eq!(superblock.copy(), copy, "a copy holds its own sequences");
            let again = superblock::encode_file(&superblock);
            assert_eq!(
                superblock::decode_copy(&again, copy),
                CopyRead::Valid(superblock.clone())
            );
            Some(superblock)
        }
        CopyRead::Invalid(reason) => {
            assert!(!reason.is_empty(), "a refusal says why");
            None
        }
        CopyRead::Absent => panic!("bytes are never an absent copy"),
    }
}

/// Decodes a manifest; what decodes round-trips, and every file's first and
/// last chunk locate inside the file and the chunk size.
pub fn check_manifest(body: &[u8]) -> Option<Manifest> {
    let manifest = Manifest::decode(body).ok()?;
    assert_eq!(Manifest::decode(&manifest.encode()).as_ref(), Ok(&manifest));
    let step = u64::from(manifest.chunk_data_bytes_max);
    for (index, file) in manifest.files.iter().enumerate() {
        if file.chunk_count == 0 {
            assert_eq!(file.len_bytes, 0, "only an empty file spans no chunk");
            continue;
        }
        let last = file.first_chunk + (file.chunk_count - 1);
        for chunk in [file.first_chunk, last] {
            let (at, offset, len) = manifest.locate(chunk).expect("a listed chunk locates");
            assert_eq!(at as usize, index, "chunk {chunk} locates in its own file");
            assert!(
                len >= 1 && len <= step,
                "chunk {chunk} holds 1..=step bytes"
            );
            assert!(
                offset + len <= file.len_bytes,
                "chunk {chunk} inside its file"
            );
        }
    }
    assert_eq!(manifest.locate(0), None, "chunk 0 is the manifest");
    assert_eq!(manifest.locate(manifest.chunk_count), None);
    Some(manifest)
}

/// A content chunk, parsed: `(file, file_offset, data)`.
pub type Chunk = (u32, u64, Vec<u8>);

/// Decodes content chunk `index`; what decodes is the chunk it claims to be
/// and re-encodes to the same bytes.
pub fn check_chunk(index: u32, body: &[u8]) -> Option<Chunk> {
    let (header, data) = transfer::decode_chunk(index, body).ok()?;
    assert_eq!(header.chunk, index);
    assert_eq!(header.data_len as usize, data.len());
    assert!(data.len() <= CHUNK_DATA_BYTES_MAX);
    assert_eq!(data, &body[CHUNK_HEADER_BYTES..]);
    let again = transfer::encode_chunk(index, header.file, header.file_offset, data);
    assert_eq!(again, body, "a decoded chunk re-encodes to its bytes");
    Some((header.file, header.file_offset, data.to_vec()))
}

/// The bytes of content chunk `index`.
pub fn encode_chunk(index: u32, file: u32, file_offset: u64, data: &[u8]) -> Vec<u8> {
    transfer::encode_chunk(index, file, file_offset, data)
}

/// Decodes an index file; whole files re-encode to their bytes, and a
/// refusal points inside the input.
pub fn check_index(bytes: &[u8]) -> Result<Vec<IndexEntry>, IndexDamage> {
    let decoded = index::decode_index(bytes);
    match &decoded {
        Ok(entries) => {
            assert_eq!(entries.len() as u64 * INDEX_FRAME_BYTES, bytes.len() as u64);
            assert_eq!(index::encode_index(entries), bytes);
        }
        Err(IndexDamage::Corrupt { fault_offset }) => {
            assert!((*fault_offset as usize) < bytes.len());
        }
        Err(IndexDamage::Torn | IndexDamage::Stale) => assert!(!bytes.is_empty()),
        Err(IndexDamage::Missing) => panic!("bytes are never a missing file"),
    }
    for piece in bytes.chunks(INDEX_ENTRY_BYTES) {
        match IndexEntry::decode(piece) {
            Some(entry) => assert_eq!(entry.encode(), piece),
            None => assert_ne!(piece.len(), INDEX_ENTRY_BYTES),
        }
    }
    decoded
}

/// Decodes a durable-mark file: whatever it takes is a mark that can be
/// written (its sequence below the limit) and round-trips, and a mark
/// appended after a whole file of marks is the one found.
pub fn check_durable_mark(bytes: &[u8]) -> Option<MarkSlot> {
    let found = durable_mark::decode_file(bytes);
    if let Some(mark) = found {
        assert!(mark.sequence < SEQUENCE_LIMIT);
        assert_eq!(
            durable_mark::decode_file(&durable_mark::encode_mark(mark)),
            Some(mark)
        );
        if strand_wal::scan(bytes).is_clean() && mark.sequence + 1 < SEQUENCE_LIMIT {
            let newer = MarkSlot {
                sequence: mark.sequence + 1,
                op: mark.op,
            };
            let mut appended = bytes.to_vec();
            appended.extend_from_slice(&durable_mark::encode_mark(newer));
            assert_eq!(durable_mark::decode_file(&appended), Some(newer));
        }
    }
    found
}

/// A durable-mark file built from `data`: each 16 bytes a mark (sequence
/// and op, the sequence folded below the limit), so a fuzzer reaches the
/// checks behind the magic; the last byte of `data`, if any is left over,
/// names a byte of the file to flip.
pub fn marks_from(data: &[u8]) -> Vec<u8> {
    file_of_records(data, 16, |words| {
        durable_mark::encode_mark(MarkSlot {
            sequence: words[0] % SEQUENCE_LIMIT,
            op: words[1],
        })
    })
}

/// A file of records, each encoded from `width` bytes of `data` read as
/// little-endian words; the last byte left over, if any, names a byte of
/// the file to flip.
fn file_of_records(data: &[u8], width: usize, encode: impl Fn(&[u64]) -> Vec<u8>) -> Vec<u8> {
    let mut file = Vec::new();
    let pieces = data.chunks_exact(width);
    let rest = pieces.remainder();
    for piece in pieces {
        let words: Vec<u64> = piece
            .chunks_exact(8)
            .map(|word| u64::from_le_bytes(word.try_into().expect("8 bytes")))
            .collect();
        file.extend_from_slice(&encode(&words));
    }
    if let (Some(&flip), false) = (rest.last(), file.is_empty()) {
        let at = usize::from(flip) * 7 % file.len();
        file[at] ^= 0x5A;
    }
    file
}

/// The rewrite intents read from `bytes` (a `rewrites.intent` file): each
/// re-encodes to itself, and one appended after a clean file is read last.
pub fn check_rewrite_intents(bytes: &[u8]) -> Vec<(u64, u64, u64)> {
    let found = unsynced::decode_intents(bytes);
    for intent in &found {
        assert_eq!(
            unsynced::decode_intents(&unsynced::encode_intent(*intent)),
            vec![*intent]
        );
    }
    if strand_wal::scan(bytes).is_clean() {
        let newer = (1, 2, 3);
        let mut appended = bytes.to_vec();
        appended.extend_from_slice(&unsynced::encode_intent(newer));
        let mut expected = found.clone();
        expected.push(newer);
        assert_eq!(unsynced::decode_intents(&appended), expected);
    }
    found
}

/// A rewrite-intent file built from `data`: each 24 bytes an intent, so a
/// fuzzer reaches the words behind the checksums; the last byte of `data`,
/// if any is left over, names a byte of the file to flip.
pub fn intents_from(data: &[u8]) -> Vec<u8> {
    file_of_records(data, 24, |words| {
        unsynced::encode_intent((words[0], words[1], words[2]))
    })
}

/// The bytes of an index file holding `entries`.
pub fn encode_index(entries: &[IndexEntry]) -> Vec<u8> {
    index::encode_index(entries)
}

/// The valid prefix of a cursor log: its frames as `(base, count)`, its
/// events as `(sequence, consumer, offset)`, its length in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorLogPrefix {
    /// Each frame's first event and event count, in file order.
    pub frames: Vec<(u64, u32)>,
    /// Every event with its sequence number.
    pub events: Vec<(u64, String, u64)>,
    /// Bytes the prefix takes.
    pub valid_len: u64,
}

/// Decodes a cursor log's valid prefix; it is contiguous (frames tile it
/// from byte 0, events number on without gaps), decoding the prefix alone
/// gives it again, and it re-encodes to a log that decodes the same.
pub fn check_cursor_log(bytes: &[u8]) -> CursorLogPrefix {
    let prefix = cursor_log_prefix(bytes);
    assert!(prefix.valid_len <= bytes.len() as u64);
    let mut next_sequence = prefix.frames.first().map(|&(base, _)| base);
    let mut events = prefix.events.iter();
    for &(base, count) in &prefix.frames {
        assert!(count > 0, "a frame holds events");
        assert_eq!(Some(base), next_sequence, "frames follow on");
        let end = base
            .checked_add(u64::from(count))
            .expect("no sequence overflows");
        for sequence in base..end {
            let event = events.next().expect("a frame's events are all there");
            assert_eq!(event.0, sequence);
        }
        next_sequence = Some(end);
    }
    assert!(events.next().is_none(), "every event belongs to a frame");
    let kept = &bytes[..prefix.valid_len as usize];
    assert_eq!(cursor_log_prefix(kept), prefix, "the prefix decodes alone");
    let again = encode_cursor_log(&prefix);
    assert_eq!(
        cursor_log_prefix(&again),
        CursorLogPrefix {
            valid_len: again.len() as u64,
            ..prefix.clone()
        }
    );
    prefix
}

fn cursor_log_prefix(bytes: &[u8]) -> CursorLogPrefix {
    let (frames, events, valid_len) = cursors::decode_log(bytes);
    let mut position = 0;
    for frame in &frames {
        assert_eq!(frame.position, position, "frames tile the prefix");
        position += frame.frame_len;
    }
    assert_eq!(position, valid_len);
    CursorLogPrefix {
        frames: frames
            .iter()
            .map(|frame| (frame.base, frame.count))
            .collect(),
        events: events
            .into_iter()
            .map(|(sequence, event)| (sequence, event.consumer, event.offset))
            .collect(),
        valid_len,
    }
}

/// The bytes of a cursor log holding `prefix`'s frames and events (its
/// `valid_len` is not used).
pub fn encode_cursor_log(prefix: &CursorLogPrefix) -> Vec<u8> {
    use strand_wire::Body;
    use strand_wire::ops::{CursorEvent, CursorEvents};
    let mut events = prefix.events.iter();
    let mut bytes = Vec::new();
    for &(base, count) in &prefix.frames {
        let frame_events = events
            .by_ref()
            .take(count as usize)
            .map(|(_, consumer, offset)| CursorEvent {
                consumer: consumer.clone(),
                offset: *offset,
            })
            .collect();
        let body = CursorEvents {
            events: frame_events,
        }
        .to_vec();
        bytes.extend_from_slice(&frame(&cursors::frame_payload(base, count, &body)));
    }
    bytes
}

/// Decodes one cursor log frame's payload: `(base, count, events)`.
pub fn check_cursor_frame(payload: &[u8]) -> Option<(u64, u32, usize)> {
    let (base, count, events) = cursors::decode_frame(payload)?;
    assert_eq!(events.len() as u64, u64::from(count));
    assert!(base.checked_add(u64::from(count)).is_some());
    Some((base, count, events.len()))
}

/// A decoded cursor snapshot: the events it covers and the map.
pub type CursorSnapshot = (u64, BTreeMap<String, u64>);

/// Decodes a cursor snapshot file; what decodes re-encodes to a file that
/// decodes the same.
pub fn check_cursor_snapshot(bytes: &[u8]) -> Option<CursorSnapshot> {
    let snapshot = cursor_snapshot::decode_snapshot(bytes).ok()?;
    let again =
        cursor_snapshot::encode_snapshot(snapshot.0, &snapshot.1).expect("a decoded map encodes");
    assert_eq!(
        cursor_snapshot::decode_snapshot(&again).as_ref(),
        Ok(&snapshot)
    );
    Some(snapshot)
}

/// The bytes of a cursor snapshot file.
pub fn encode_cursor_snapshot(covers: u64, map: &BTreeMap<String, u64>) -> Vec<u8> {
    cursor_snapshot::encode_snapshot(covers, map).expect("a map of valid names encodes")
}

/// What a segment scan found, by position.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegmentFound {
    /// Valid entries: `(position, op, frame length)`.
    pub entries: Vec<(u64, u64, u64)>,
    /// Damaged regions between valid entries: `start..end`.
    pub faults: Vec<(u64, u64)>,
    /// Where a torn tail starts.
    pub torn_from: Option<u64>,
}

/// Scans a segment's bytes (and runs the WAL scan under it); entries and
/// damaged regions tile the bytes up to the torn tail, every valid entry's
/// frame is whole and its header checks, and headers said readable inside
/// damage lie inside it.
pub fn check_segment(bytes: &[u8]) -> SegmentFound {
    check_wal_scan(bytes);
    let result = scan::scan_segment(bytes);
    assert_eq!(result.total_len, bytes.len() as u64);
    let mut found = SegmentFound {
        torn_from: result.torn_from,
        ..SegmentFound::default()
    };
    let mut at = 0u64;
    for item in &result.items {
        match item {
            Item::Entry(entry) => {
                assert_eq!(entry.position, at, "items tile the segment");
                let frame_len = crate::entry::frame_len_of(&entry.header);
                check_entry_frame(bytes, entry.position, frame_len, &entry.header);
                found
                    .entries
                    .push((entry.position, entry.header.op.get(), frame_len));
                at += frame_len;
            }
            Item::Fault(fault) => {
                assert_eq!(fault.start, at, "items tile the segment");
                assert!(fault.start < fault.end, "a fault holds bytes");
                check_readable(&fault.readable, fault.start, fault.end);
                found.faults.push((fault.start, fault.end));
                at = fault.end;
            }
        }
    }
    assert_eq!(
        at,
        result.valid_end(),
        "items end where the torn tail starts"
    );
    assert!(result.valid_end() <= result.total_len);
    match result.torn_from {
        None => assert!(result.torn_readable.is_empty()),
        Some(start) => {
            assert!(start < result.total_len, "a torn tail holds bytes");
            check_readable(&result.torn_readable, start, result.total_len);
            let data = bytes[start as usize..].iter().any(|&byte| byte != 0);
            assert_eq!(result.torn_has_data, data);
        }
    }
    found
}

/// A valid entry's frame lies inside the bytes and holds the header found.
fn check_entry_frame(bytes: &[u8], position: u64, frame_len: u64, header: &PrepareHeader) {
    let end = position + frame_len;
    assert!(end <= bytes.len() as u64, "an entry's frame is whole");
    let payload = &bytes[position as usize + FRAME_HEADER_BYTES..end as usize];
    assert_eq!(
        crate::entry::header_of_payload(payload).as_ref(),
        Ok(header)
    );
}

fn check_readable(readable: &[ScannedEntry], start: u64, end: u64) {
    let mut after = start;
    for entry in readable {
        assert!(entry.position >= after, "readable headers in file order");
        let header_end = entry.position + (FRAME_HEADER_BYTES + HEADER_SIZE) as u64;
        assert!(
            header_end <= end,
            "a readable header lies inside its region"
        );
        after = header_end;
    }
}

/// The WAL scan's report: frames tile the valid prefix from byte 0, and its
/// tail says what follows, inside the input.
pub fn check_wal_scan(bytes: &[u8]) -> strand_wal::ScanReport {
    let report = strand_wal::scan(bytes);
    let len = bytes.len() as u64;
    assert_eq!(report.total_len, len);
    let mut at = 0;
    for span in &report.frames {
        assert_eq!(span.offset, at, "frames follow on");
        at = span.end();
    }
    assert_eq!(at, report.valid_len);
    assert!(report.valid_len <= len);
    match report.tail {
        Tail::Clean => assert_eq!(report.valid_len, len),
        Tail::Torn { torn_bytes } => {
            assert!(torn_bytes > 0);
            assert_eq!(report.valid_len + torn_bytes, len);
        }
        Tail::Corrupt {
            fault_offset,
            next_valid_offset,
        } => {
            assert_eq!(fault_offset, report.valid_len);
            assert!(fault_offset < next_valid_offset && next_valid_offset < len);
            let next = strand_wal::scan(&bytes[next_valid_offset as usize..]);
            assert!(
                !next.frames.is_empty(),
                "a frame starts where the scan said"
            );
        }
    }
    report
}
