//! History starts as the superblock and the state-transfer manifest write
//! them, in every layout still read: with their head checksums and record
//! offsets (superblock version 9, manifest version 6), with their record
//! offsets only (superblock version 8, manifest version 5), with neither
//! (the versions before), and with views that had no epoch (superblock
//! version 2).

use strand_wire::ViewId;
use strand_wire::codec::{BodyReader, BodyWriter};
use strand_wire::error::BodyError;

use crate::superblock::{HistoryStart, decode_view, encode_view};

/// Which fields a version's history starts carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartLayout {
    /// Views with epochs, no record offset, no head checksum.
    WithoutOffset,
    /// And the record offset.
    WithOffset,
    /// And the head checksum: the current layout.
    WithChecksum,
}

impl StartLayout {
    /// Bytes of one encoded history start.
    fn start_bytes(self) -> usize {
        match self {
            StartLayout::WithoutOffset => 26,
            StartLayout::WithOffset => 35,
            StartLayout::WithChecksum => 40,
        }
    }
}

const START_BYTES_WITHOUT_EPOCHS: usize = 22;

/// A history start as the current versions write it.
pub(crate) fn encode_start(writer: &mut BodyWriter, start: &HistoryStart) {
    encode_start_as(writer, start, StartLayout::WithChecksum);
}

/// A history start in `layout` (older layouts leave fields out).
pub(crate) fn encode_start_as(writer: &mut BodyWriter, start: &HistoryStart, layout: StartLayout) {
    encode_view(writer, start.view);
    writer.u64(start.op);
    writer.u64(start.cursor_tail);
    writer.u8(start.replica);
    writer.bool(start.accepted_loss);
    if layout == StartLayout::WithoutOffset {
        return;
    }
    writer.option_u64(start.offset_end);
    if layout == StartLayout::WithChecksum {
        writer.bool(start.checksum.is_some());
        writer.u32(start.checksum.unwrap_or(0));
    }
}

fn decode_start(
    reader: &mut BodyReader<'_>,
    layout: StartLayout,
) -> Result<HistoryStart, BodyError> {
    let view = decode_view(reader, "history start view")?;
    let mut start = decode_start_fields(reader, view)?;
    if layout == StartLayout::WithoutOffset {
        return Ok(start);
    }
    start.offset_end = reader.option_u64("history start offset end")?;
    if layout == StartLayout::WithChecksum {
        let known = reader.bool("history start checksum known")?;
        let checksum = reader.u32("history start checksum")?;
        if !known && checksum != 0 {
            return Err(BodyError::Invalid {
                field: "history start checksum",
                reason: "set but not known",
            });
        }
        start.checksum = known.then_some(checksum);
    }
    Ok(start)
}

/// A history start of a version 2 superblock (its view has no epoch: 0).
fn decode_start_without_epoch(reader: &mut BodyReader<'_>) -> Result<HistoryStart, BodyError> {
    let view = ViewId::new(0, reader.u32("history start view")?);
    decode_start_fields(reader, view)
}

fn decode_start_fields(
    reader: &mut BodyReader<'_>,
    view: ViewId,
) -> Result<HistoryStart, BodyError> {
    Ok(HistoryStart {
        view,
        op: reader.u64("history start op")?,
        cursor_tail: reader.u64("history start cursor tail")?,
        replica: reader.u8("history start replica")?,
        accepted_loss: reader.bool("history start accepted loss")?,
        offset_end: None,
        checksum: None,
    })
}

/// A list of history starts with epochs, as `layout` wrote them.
pub(crate) fn decode_start_list(
    reader: &mut BodyReader<'_>,
    layout: StartLayout,
) -> Result<Vec<HistoryStart>, BodyError> {
    reader.list("history starts", layout.start_bytes(), |reader| {
        decode_start(reader, layout)
    })
}

/// The history starts of a version 2 superblock.
pub(crate) fn decode_start_list_without_epochs(
    reader: &mut BodyReader<'_>,
) -> Result<Vec<HistoryStart>, BodyError> {
    let size = START_BYTES_WITHOUT_EPOCHS;
    reader.list("history starts", size, decode_start_without_epoch)
}
