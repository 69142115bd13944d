//! History starts as the superblock and the state-transfer manifest write
//! them, in every layout still read: with their record offsets (superblock
//! version 8, manifest version 5), without (the versions before), and with
//! views that had no epoch (superblock version 2).

use strand_wire::ViewId;
use strand_wire::codec::{BodyReader, BodyWriter};
use strand_wire::error::BodyError;

use crate::superblock::{HistoryStart, decode_view, encode_view};

/// Bytes of one encoded history start.
const START_BYTES: usize = 35;
/// Bytes of one history start before starts carried their record offset.
const START_BYTES_WITHOUT_OFFSET: usize = 26;
const START_BYTES_WITHOUT_EPOCHS: usize = 22;

/// A history start as the current versions write it.
pub(crate) fn encode_start(writer: &mut BodyWriter, start: &HistoryStart) {
    encode_start_without_offset(writer, start);
    writer.option_u64(start.offset_end);
}

/// A history start as versions before 8 wrote it.
pub(crate) fn encode_start_without_offset(writer: &mut BodyWriter, start: &HistoryStart) {
    encode_view(writer, start.view);
    writer.u64(start.op);
    writer.u64(start.cursor_tail);
    writer.u8(start.replica);
    writer.bool(start.accepted_loss);
}

fn decode_start(reader: &mut BodyReader<'_>) -> Result<HistoryStart, BodyError> {
    let start = decode_start_without_offset(reader)?;
    Ok(HistoryStart {
        offset_end: reader.option_u64("history start offset end")?,
        ..start
    })
}

/// A history start written before starts carried their record offset.
fn decode_start_without_offset(reader: &mut BodyReader<'_>) -> Result<HistoryStart, BodyError> {
    let view = decode_view(reader, "history start view")?;
    decode_start_fields(reader, view)
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
    })
}

/// A list of history starts with epochs, with their record offsets or
/// (written before starts carried them) without.
pub(crate) fn decode_start_list(
    reader: &mut BodyReader<'_>,
    with_offsets: bool,
) -> Result<Vec<HistoryStart>, BodyError> {
    if with_offsets {
        reader.list("history starts", START_BYTES, decode_start)
    } else {
        let size = START_BYTES_WITHOUT_OFFSET;
        reader.list("history starts", size, decode_start_without_offset)
    }
}

/// The history starts of a version 2 superblock.
pub(crate) fn decode_start_list_without_epochs(
    reader: &mut BodyReader<'_>,
) -> Result<Vec<HistoryStart>, BodyError> {
    let size = START_BYTES_WITHOUT_EPOCHS;
    reader.list("history starts", size, decode_start_without_epoch)
}
