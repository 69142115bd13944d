//! The cursor snapshot file (`cursors.snapshot`): the cursor map as of the
//! events below its boundary (`covers`), written in bounded pieces.
//!
//! The map can hold as many consumers as the partition's bound allows (and
//! more, if that bound was lowered), so it is never one frame: a WAL frame
//! holds at most 64 MiB and one frame per map made the size of a partition's
//! snapshot a client's choice. The file is one or more WAL frames, each a
//! piece of at most [`SNAPSHOT_PIECE_BYTES_MAX`] payload bytes:
//!
//! ```text
//! magic u32 ("STS2") | covers u64 | piece u32 | piece_count u32 | CursorEvents body
//! ```
//!
//! Consumers ascend across the pieces. A snapshot is read whole or not at
//! all: a missing, damaged, reordered or extra piece (or bytes after the
//! last) rejects the file, and the open falls back as for any damaged
//! snapshot (the map restarts from the events the log still holds; readers
//! may see records again, never skip one). A file of the first format (one
//! frame, magic "STSP", no piece fields) still reads.

use std::collections::BTreeMap;
use std::path::Path;

use strand_wal::{FRAME_HEADER_BYTES, encode_frame_into, scan};
use strand_wire::Body;
use strand_wire::ops::{CursorEvent, CursorEvents};

use crate::disk::Disk;
use crate::error::PartitionError;
use crate::io::Io;
use crate::layout::{cursors_snapshot_path, cursors_snapshot_tmp_path};

/// A decoded snapshot: the events it covers and the cursor map as of them.
pub(crate) type Snapshot = (u64, BTreeMap<String, u64>);

/// Most payload bytes one piece of a snapshot takes: small enough that no
/// map, however many consumers it holds, needs a frame near the WAL's
/// limit, and large enough that a map at the default bound on consumer
/// names (10,000 names of up to 255 bytes: about 2.6 MiB) takes a few.
pub const SNAPSHOT_PIECE_BYTES_MAX: usize = 1 << 20;

/// The first format's magic: one frame holding the whole map.
const SNAPSHOT_MAGIC_SINGLE: u32 = 0x5053_5453; // "STSP"
/// The magic of a piece.
const SNAPSHOT_MAGIC_PIECE: u32 = 0x3253_5453; // "STS2"
/// Bytes before a piece's events: magic, covers, piece, piece count.
const PIECE_PREFIX_BYTES: usize = 4 + 8 + 4 + 4;
/// Bytes of a `CursorEvents` body's count.
const EVENTS_COUNT_BYTES: usize = 4;
/// The largest event: a consumer name of the longest length the wire allows.
const EVENT_BYTES_MAX: usize = 2 + strand_wire::codec::NAME_LENGTH_MAX + 8;

const _: () =
    assert!(PIECE_PREFIX_BYTES + EVENTS_COUNT_BYTES + EVENT_BYTES_MAX <= SNAPSHOT_PIECE_BYTES_MAX);
const _: () = assert!(SNAPSHOT_PIECE_BYTES_MAX <= strand_wal::FRAME_PAYLOAD_BYTES_MAX);

/// Applies one cursor event to a map: a store sets the consumer's cursor,
/// a tombstone removes it.
pub(crate) fn apply_event(map: &mut BTreeMap<String, u64>, event: CursorEvent) {
    if event.is_tombstone() {
        map.remove(&event.consumer);
    } else {
        map.insert(event.consumer, event.offset);
    }
}

/// The map cut into pieces of at most [`SNAPSHOT_PIECE_BYTES_MAX`] payload
/// bytes each, in consumer order; an empty map is one empty piece.
fn pieces_of(map: &BTreeMap<String, u64>) -> Vec<Vec<CursorEvent>> {
    let events_bytes_max = SNAPSHOT_PIECE_BYTES_MAX - PIECE_PREFIX_BYTES - EVENTS_COUNT_BYTES;
    let mut pieces = vec![Vec::new()];
    let mut piece_bytes = 0;
    for (consumer, offset) in map {
        let event = CursorEvent {
            consumer: consumer.clone(),
            offset: *offset,
        };
        let event_bytes = event.encoded_bytes();
        assert!(event_bytes <= events_bytes_max, "an event fits a piece");
        if piece_bytes + event_bytes > events_bytes_max {
            pieces.push(Vec::new());
            piece_bytes = 0;
        }
        piece_bytes += event_bytes;
        pieces.last_mut().expect("one piece at least").push(event);
    }
    pieces
}

/// The bytes of a snapshot file of `map` as of `covers` events.
pub(crate) fn encode_snapshot(
    covers: u64,
    map: &BTreeMap<String, u64>,
) -> Result<Vec<u8>, PartitionError> {
    let pieces = pieces_of(map);
    let piece_count =
        u32::try_from(pieces.len()).map_err(|_| PartitionError::CursorEventsInvalid {
            reason: format!("{} snapshot pieces", pieces.len()),
        })?;
    let mut bytes = Vec::new();
    for (piece, events) in pieces.into_iter().enumerate() {
        let mut payload = SNAPSHOT_MAGIC_PIECE.to_le_bytes().to_vec();
        payload.extend_from_slice(&covers.to_le_bytes());
        payload.extend_from_slice(&(piece as u32).to_le_bytes());
        payload.extend_from_slice(&piece_count.to_le_bytes());
        payload.extend_from_slice(&CursorEvents { events }.to_vec());
        assert!(
            payload.len() <= SNAPSHOT_PIECE_BYTES_MAX,
            "piece {piece} takes {} bytes",
            payload.len()
        );
        bytes.reserve(FRAME_HEADER_BYTES + payload.len());
        encode_frame_into(&payload, &mut bytes).map_err(|error| {
            PartitionError::CursorEventsInvalid {
                reason: format!("snapshot piece {piece}: {error}"),
            }
        })?;
    }
    Ok(bytes)
}

/// Decodes a snapshot file, whole or not at all (see the module docs).
pub(crate) fn decode_snapshot(bytes: &[u8]) -> Result<Snapshot, String> {
    let report = scan(bytes);
    if !report.is_clean() {
        return Err("a damaged or torn piece".to_owned());
    }
    let Some(first) = report.frames.first() else {
        return Err("no piece".to_owned());
    };
    let first = first.payload(bytes);
    if first.get(..4) == Some(&SNAPSHOT_MAGIC_SINGLE.to_le_bytes()[..]) {
        if report.frames.len() != 1 {
            return Err("a single-frame snapshot with more frames".to_owned());
        }
        return decode_single(first);
    }
    let mut expected: Option<(u64, u32)> = None;
    let mut map = BTreeMap::new();
    for (index, span) in report.frames.iter().enumerate() {
        let (covers, piece, piece_count, events) = decode_piece(span.payload(bytes))?;
        let (want_covers, want_count) = *expected.get_or_insert((covers, piece_count));
        if covers != want_covers || piece_count != want_count || piece as usize != index {
            return Err(format!(
                "piece {index} reads as piece {piece} of {piece_count} covering {covers}"
            ));
        }
        for event in events {
            if event.is_tombstone() {
                return Err(format!("a tombstone for {} in a snapshot", event.consumer));
            }
            if map
                .last_key_value()
                .is_some_and(|(last, _)| *last >= event.consumer)
            {
                return Err(format!("consumer {} out of order", event.consumer));
            }
            map.insert(event.consumer, event.offset);
        }
    }
    let (covers, piece_count) = expected.expect("one piece at least");
    if report.frames.len() != piece_count as usize {
        return Err(format!("{} pieces of {piece_count}", report.frames.len()));
    }
    Ok((covers, map))
}

/// One piece's covers, index, count and events.
fn decode_piece(payload: &[u8]) -> Result<(u64, u32, u32, Vec<CursorEvent>), String> {
    let prefix = payload
        .get(..PIECE_PREFIX_BYTES)
        .ok_or_else(|| "a short piece".to_owned())?;
    let word = |at: usize| {
        u32::from_le_bytes([prefix[at], prefix[at + 1], prefix[at + 2], prefix[at + 3]])
    };
    if word(0) != SNAPSHOT_MAGIC_PIECE {
        return Err("bad magic".to_owned());
    }
    let mut covers = [0; 8];
    covers.copy_from_slice(&prefix[4..12]);
    let events = CursorEvents::from_bytes(&payload[PIECE_PREFIX_BYTES..])
        .map_err(|error| error.to_string())?
        .events;
    Ok((u64::from_le_bytes(covers), word(12), word(16), events))
}

/// A snapshot of the first format: one frame, `magic u32, covers u64`, the
/// map as a `CursorEvents` body.
fn decode_single(payload: &[u8]) -> Result<Snapshot, String> {
    let covers = payload
        .get(4..12)
        .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
        .ok_or_else(|| "short".to_owned())?;
    let events = CursorEvents::from_bytes(&payload[12..])
        .map_err(|error| error.to_string())?
        .events;
    let mut map = BTreeMap::new();
    for event in events {
        apply_event(&mut map, event);
    }
    Ok((u64::from_le_bytes(covers), map))
}

/// Reads the snapshot: `Ok(Ok(..))` when valid or absent (empty),
/// `Ok(Err(reason))` when present but unreadable.
pub(crate) fn read_snapshot<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
) -> Result<Result<Snapshot, String>, PartitionError> {
    let path = cursors_snapshot_path(dir);
    let Some(bytes) = io
        .disk
        .read_file(&path)
        .map_err(|error| PartitionError::io(&path, "read the cursor snapshot", &error))?
    else {
        return Ok(Ok((0, BTreeMap::new())));
    };
    Ok(decode_snapshot(&bytes))
}

/// Writes a snapshot atomically (temp file synced, renamed, directory synced).
pub(crate) fn write_snapshot<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    covers: u64,
    map: &BTreeMap<String, u64>,
) -> Result<(), PartitionError> {
    let path = cursors_snapshot_path(dir);
    let tmp = cursors_snapshot_tmp_path(dir);
    let bytes = encode_snapshot(covers, map)?;
    io.disk
        .remove_file(&tmp)
        .and_then(|()| io.disk.write_at(&tmp, 0, &bytes))
        .and_then(|()| io.disk.rename(&tmp, &path))
        .map_err(|error| PartitionError::io(&path, "write the cursor snapshot", &error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_of(count: usize, name_bytes: usize) -> BTreeMap<String, u64> {
        (0..count)
            .map(|index| {
                let name = format!("{index:0>name_bytes$}");
                (name, index as u64)
            })
            .collect()
    }

    #[test]
    fn a_map_larger_than_a_piece_round_trips_in_several_pieces() {
        let map = map_of(20_000, 200);
        let bytes = encode_snapshot(77, &map).expect("encodes");
        let pieces = scan(&bytes).frames.len();
        assert!(pieces >= 4, "{pieces} pieces");
        for span in &scan(&bytes).frames {
            assert!(span.payload(&bytes).len() <= SNAPSHOT_PIECE_BYTES_MAX);
        }
        assert_eq!(decode_snapshot(&bytes), Ok((77, map)));
    }

    #[test]
    fn an_empty_map_is_one_piece() {
        let bytes = encode_snapshot(3, &BTreeMap::new()).expect("encodes");
        assert_eq!(scan(&bytes).frames.len(), 1);
        assert_eq!(decode_snapshot(&bytes), Ok((3, BTreeMap::new())));
    }

    #[test]
    fn a_snapshot_missing_a_piece_or_with_a_damaged_one_is_rejected_whole() {
        let map = map_of(12_000, 250);
        let bytes = encode_snapshot(9, &map).expect("encodes");
        let frames = scan(&bytes).frames;
        assert!(frames.len() >= 3);
        // The last piece missing.
        let last = &frames[frames.len() - 1];
        assert!(decode_snapshot(&bytes[..last.offset as usize]).is_err());
        // A middle piece missing.
        let middle = &frames[1];
        let mut without = bytes[..middle.offset as usize].to_vec();
        without.extend_from_slice(&bytes[middle.end() as usize..]);
        assert!(decode_snapshot(&without).is_err());
        // A damaged byte in a middle piece.
        let mut damaged = bytes.clone();
        damaged[middle.offset as usize + 100] ^= 0x40;
        assert!(decode_snapshot(&damaged).is_err());
        // Two pieces swapped.
        let first = &frames[0];
        let mut swapped = bytes[middle.offset as usize..middle.end() as usize].to_vec();
        swapped.extend_from_slice(&bytes[first.offset as usize..first.end() as usize]);
        swapped.extend_from_slice(&bytes[middle.end() as usize..]);
        assert!(decode_snapshot(&swapped).is_err());
        // A piece repeated at the end.
        let mut repeated = bytes.clone();
        repeated.extend_from_slice(&bytes[last.offset as usize..last.end() as usize]);
        assert!(decode_snapshot(&repeated).is_err());
        // Garbage instead of the file.
        assert!(decode_snapshot(&[0xAB; 64]).is_err());
        assert!(decode_snapshot(&[]).is_err());
    }

    #[test]
    fn a_snapshot_of_the_first_format_still_reads() {
        let map = map_of(10, 8);
        let events = map
            .iter()
            .map(|(consumer, offset)| CursorEvent {
                consumer: consumer.clone(),
                offset: *offset,
            })
            .collect();
        let mut payload = SNAPSHOT_MAGIC_SINGLE.to_le_bytes().to_vec();
        payload.extend_from_slice(&5u64.to_le_bytes());
        payload.extend_from_slice(&CursorEvents { events }.to_vec());
        let mut bytes = Vec::new();
        encode_frame_into(&payload, &mut bytes).expect("small");
        assert_eq!(decode_snapshot(&bytes), Ok((5, map)));
    }

    #[test]
    fn a_tombstone_removes_a_cursor() {
        let mut map = map_of(2, 1);
        apply_event(&mut map, CursorEvent::tombstone("0".to_owned()));
        apply_event(&mut map, CursorEvent::tombstone("never".to_owned()));
        assert_eq!(map.keys().collect::<Vec<_>>(), ["1"]);
    }
}
