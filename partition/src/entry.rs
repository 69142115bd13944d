//! One log entry: a whole prepare (256-byte header + body, exactly the
//! `Msg<PrepareHeader>` bytes) in one WAL frame, and what the log keeps in
//! memory about it ([`EntryMeta`]).

use bytes::Bytes;
use strand_wal::{FRAME_HEADER_BYTES, Frame, WalError};
use strand_wire::{CommandHeader, HEADER_SIZE, Msg, Operation, PrepareHeader};
use zerocopy::{FromBytes, IntoBytes};

/// What the log remembers about one op without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryMeta {
    /// Byte position of the frame in its segment (for a damaged op: where its
    /// frame starts, when known, else where its gap starts).
    pub position: u64,
    /// Frame bytes (8-byte frame header + payload); 0 when unknown.
    pub frame_len: u64,
    /// The prepare's header checksum; 0 when unknown.
    pub checksum: u32,
    /// First record offset.
    pub offset_base: u64,
    /// One past the last record offset.
    pub offset_end: u64,
    /// The prepare's timestamp.
    pub timestamp_ns: u64,
    /// The entry's bytes are damaged or missing; it awaits a rewrite.
    pub damaged: bool,
}

impl EntryMeta {
    /// The metadata of a readable prepare whose frame starts at `position`;
    /// `offset_at` is where the log's records end before it (a prepare
    /// without records sits there, whatever its header's offset field says).
    pub fn of(header: &PrepareHeader, position: u64, offset_at: u64) -> EntryMeta {
        let (offset_base, offset_end) = if carries_records(header) {
            (record_offset_base(header), record_offset_end(header))
        } else {
            (offset_at, offset_at)
        };
        EntryMeta {
            position,
            frame_len: frame_len_of(header),
            checksum: header.checksum(),
            offset_base,
            offset_end,
            timestamp_ns: header.timestamp_ns.get(),
            damaged: false,
        }
    }

    /// One past the frame's last byte.
    pub fn end(&self) -> u64 {
        self.position + self.frame_len
    }

    /// True when the entry carries records.
    pub fn has_records(&self) -> bool {
        self.offset_end > self.offset_base
    }
}

/// Frame bytes of the entry holding a prepare with this header.
pub(crate) fn frame_len_of(header: &PrepareHeader) -> u64 {
    FRAME_HEADER_BYTES as u64 + u64::from(header.prefix.size.get())
}

/// Where a prepare's offsets start.
pub(crate) fn record_offset_base(header: &PrepareHeader) -> u64 {
    header.offset_base.get()
}

/// One past a prepare's last offset.
pub(crate) fn record_offset_end(header: &PrepareHeader) -> u64 {
    header.offset_end()
}

/// True when the prepare takes offsets in the log: a produce's records, or
/// a metadata op's one entry (see `strand_wire::OffsetsTaken`).
pub(crate) fn carries_records(header: &PrepareHeader) -> bool {
    header.record_count.get() > 0
}

/// True when the prepare's body is record batches a fetch reads.
pub(crate) fn carries_batches(header: &PrepareHeader) -> bool {
    header.operation() == Operation::Produce && carries_records(header)
}

/// The WAL frame for `prepare`: its header then its body, checksummed as one
/// payload; the body is shared, not copied (only the 256-byte header is), and
/// not read either (its checksum is combined from the header's).
pub(crate) fn frame_prepare(prepare: &Msg<PrepareHeader>) -> Result<Frame, WalError> {
    // A `Msg` is sealed or checked: its header's body checksum is the body's.
    let body_checksum = prepare.header().prefix.checksum_body.get();
    Frame::from_parts_with_body_checksum(
        prepare.header().as_bytes(),
        prepare.body().clone(),
        body_checksum,
    )
}

/// Reads and checks the prepare header at the front of a frame payload: its
/// checksum, its fields, and that its size is the payload's length. The body
/// checksum is not checked (the frame's crc32c covered it).
pub(crate) fn header_of_payload(payload: &[u8]) -> Result<PrepareHeader, &'static str> {
    let bytes = payload
        .get(..HEADER_SIZE)
        .ok_or("shorter than a prepare header")?;
    let header = PrepareHeader::read_from_bytes(bytes).map_err(|_| "unreadable header")?;
    header
        .validate_header()
        .map_err(|_| "prepare header invalid")?;
    if header.prefix.frame_size() != payload.len() {
        return Err("prepare size disagrees with the frame");
    }
    Ok(header)
}

/// Turns a frame payload read back from disk into a validated prepare (both
/// checksums). Zero copy: the body is a slice of `payload`.
pub(crate) fn prepare_of_payload(payload: Bytes) -> Result<Msg<PrepareHeader>, String> {
    let header = header_of_payload(&payload).map_err(str::to_owned)?;
    let body = payload.slice(HEADER_SIZE..);
    Msg::from_parts(header, body).map_err(|error| error.to_string())
}
