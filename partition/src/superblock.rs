//! The superblock: what one partition replica must know after a restart that
//! its log alone cannot tell — the consensus fields (view, log_view, commit,
//! history starts), its identity and policies, the clean-shutdown mark, and
//! what the log looked like when it was written (the durable head
//! `op_checkpoint` and the sealed segments with their lengths), so that open
//! can *detect* a log cut below what was durable instead of losing it quietly.
//!
//! On disk: two copies, `superblock.0` and `superblock.1`; the write with
//! sequence `s` goes to copy `s % 2`, and starts only once the write before
//! it (the other copy) is durable, so a torn write can only damage the copy
//! being replaced, and the other still holds the previous state. The
//! asynchronous writes of a running replica (`PersistState`) rewrite the copy
//! in place through the WAL (see `writes::SuperblockWriter`); the rare
//! synchronous ones ([`write_now`]: create, close, retire) replace it by a
//! temp file, fsync, rename, fsync dir. Each copy is one WAL frame (crc32c) whose payload
//! also ends in its own crc32c. Open takes the valid copy with the highest
//! sequence.

use std::path::Path;

use bytes::Bytes;

use strand_wire::codec::{BodyReader, BodyWriter};
use strand_wire::error::BodyError;
use strand_wire::{ConfirmPolicy, Durability, PrepareHeader, REPLICAS_MAX, ViewId};
use zerocopy::IntoBytes;

use crate::disk::Disk;
use crate::error::PartitionError;
use crate::layout::{superblock_path, superblock_tmp_path};
use crate::start_codec::{
    StartLayout, decode_start_list, decode_start_list_without_epochs, encode_start_as,
};

/// Most history starts kept; older ones are dropped first (as consensus does).
pub const HISTORY_STARTS_MAX: usize = 16;

/// Most view headers kept (consensus's bound, the DoViewChange suffix).
pub const VIEW_HEADERS_MAX: usize = strand_wire::DVC_SUFFIX_HEADERS_MAX;

/// A copy's frame (header, payload) is padded with zeros to a multiple of
/// this, so that consecutive superblocks are almost always the same length:
/// a `PersistState` then rewrites its copy in place (no truncate, no size
/// change, and its sync can be shared with the node's other files). A view
/// change grows the view headers and history starts by a few hundred bytes
/// at most, well within one step.
pub const FRAME_BYTES_STEP: usize = 4096;

/// Most sealed segments listed. With more, only the newest are listed, and a
/// truncation of an older unlisted segment is found by the op sequence alone.
pub const SEALED_SEGMENTS_LISTED_MAX: usize = 1024;

const MAGIC: u32 = 0x4253_5453; // "STSB"
/// Version 9 records each history start's head checksum; version 8 its
/// record offset; version 7
/// consensus's client table; version 6 pads each copy's frame to a multiple of [`FRAME_BYTES_STEP`];
/// version 5 names the boot of the node its clean-shutdown mark was written
/// in; version 4 listed each sealed segment's last op; version 3 named every
/// view with its assignment epoch and recorded the epoch a replica was
/// retired in; the older ones are still read (a mark without its boot as
/// boot 0, version 2's views as epoch 0, their sealed segments' last ops
/// unknown, starts before version 8 without their record offsets, before
/// version 9 without their head checksums).
const VERSION: u16 = 9;
const VERSION_WITHOUT_START_CHECKSUMS: u16 = 8;
const VERSION_WITHOUT_START_OFFSETS: u16 = 7;
const VERSION_WITHOUT_CLIENT_TABLE: u16 = 6;
const VERSION_WITHOUT_PADDING: u16 = 5;
const VERSION_WITHOUT_CLEAN_BOOT: u16 = 4;
const VERSION_WITHOUT_LAST_OPS: u16 = 3;
const VERSION_WITHOUT_EPOCHS: u16 = 2;
const FLAG_CLEAN_SHUTDOWN: u8 = 1;
const FLAG_AWAITING_STATE_TRANSFER: u8 = 2;
const FLAG_LOG_UNSETTLED: u8 = 4;
const FLAG_STOPPED_IN_VIEW: u8 = 8;

/// The zeros padding comes from.
static PADDING: [u8; FRAME_BYTES_STEP] = [0; FRAME_BYTES_STEP];

/// Where the history of one view began (consensus's `HistoryStart`, field for
/// field): the primary `replica` of `view` started it with its log at `op`
/// and its cursor event log at `cursor_tail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct HistoryStart {
    /// The view that started here.
    pub view: ViewId,
    /// The canonical log's head op when the view started.
    pub op: u64,
    /// The new primary's cursor event log length when the view started.
    pub cursor_tail: u64,
    /// The replica that started the view.
    pub replica: u8,
    /// True when an operator's accept-loss started the view.
    pub accepted_loss: bool,
    /// One past the last record offset of the op the view started with
    /// (`None`: not recorded, a start written before version 8).
    pub offset_end: Option<u64>,
    /// The checksum of the prepare at `op` the view started on (`None`: not
    /// recorded, a start at op 0 or written before version 9).
    pub checksum: Option<u32>,
}

/// A sealed segment as the superblock remembers it: open checks the file is
/// still at least this long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SealedSegment {
    /// First op the segment holds.
    pub first_op: u64,
    /// Last op it holds (0: unknown, read from a superblock older than
    /// version 4). Lets open count the ops of a sealed segment cut short even
    /// when the segment after it has no readable first entry.
    pub last_op: u64,
    /// First record offset (the file name).
    pub first_offset: u64,
    /// Its length when it was sealed.
    pub len_bytes: u64,
}

/// The consensus fields a `PersistState` effect carries (consensus's
/// `DurableState`, field for field).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DurableFields {
    /// The highest view entered.
    pub view: ViewId,
    /// The view in which the log was last settled.
    pub log_view: ViewId,
    /// The commit number.
    pub commit: u64,
    /// History starts, oldest first.
    pub history_starts: Vec<HistoryStart>,
    /// The headers of the log adopted in `log_view` (its suffix, ascending,
    /// at most [`VIEW_HEADERS_MAX`]), so a restart never mistakes a log settled
    /// in a higher view for a shorter one.
    pub view_headers: Vec<PrepareHeader>,
    /// The highest op this replica may have acked that its log might lack.
    pub maybe_acked_op: u64,
    /// The log is not the one settled in `log_view`: a state transfer
    /// installed it (or one is awaited) and no view was adopted since, so it
    /// stays untrusted across restarts until one is.
    pub log_unsettled: bool,
    /// Consensus's client table, encoded by consensus (opaque here); empty
    /// when none was recorded.
    pub client_table: Bytes,
}

/// One superblock. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    /// Increases with every write; the copy written is `sequence % 2`.
    pub sequence: u64,
    /// Consensus fields.
    pub durable: DurableFields,
    /// This replica's index in the group.
    pub replica: u8,
    /// The partition's durability policy.
    pub durability: Durability,
    /// The partition's confirm policy.
    pub confirm: ConfirmPolicy,
    /// Set only by the shutdown write, after every file was synced and closed.
    pub clean_shutdown: bool,
    /// Set only with `clean_shutdown`, when the replica stopped serving in
    /// its view (normal status, every prepare it held written): it may
    /// resume there without a view change.
    pub stopped_in_view: bool,
    /// The node's boot the clean-shutdown mark was written in (0 without a
    /// boot count): the mark speaks only for the boot right after it, so a
    /// node that opens it need not write anything to clear it.
    pub clean_boot: u64,
    /// Set after a quarantine: the log is a bare prefix until a state transfer
    /// installs the rest.
    pub awaiting_state_transfer: bool,
    /// The assignment epoch that removed this replica from its group (0: a
    /// member). A retired replica keeps its data for operators but never
    /// serves the group again.
    pub retired_epoch: u32,
    /// The log's durable head op when this was written.
    pub op_checkpoint: u64,
    /// The cursor log's durable tail when this was written.
    pub cursor_checkpoint: u64,
    /// The first op the log retains.
    pub head_op: u64,
    /// The first record offset the log retains.
    pub head_offset: u64,
    /// Checksum of op `head_op - 1` (0 when unknown or `head_op` is 1), so the
    /// first retained op's parent can still be checked.
    pub head_parent_checksum: u32,
    /// Sealed segments, oldest first (at most [`SEALED_SEGMENTS_LISTED_MAX`]).
    pub sealed_segments: Vec<SealedSegment>,
}

impl Superblock {
    /// The first superblock of a brand-new partition.
    pub fn fresh(replica: u8, durability: Durability, confirm: ConfirmPolicy) -> Superblock {
        assert!(
            replica < REPLICAS_MAX,
            "replica index {replica} out of range"
        );
        Superblock {
            sequence: 0,
            durable: DurableFields::default(),
            replica,
            durability,
            confirm,
            clean_shutdown: false,
            stopped_in_view: false,
            clean_boot: 0,
            awaiting_state_transfer: false,
            retired_epoch: 0,
            op_checkpoint: 0,
            cursor_checkpoint: 0,
            head_op: 1,
            head_offset: 0,
            head_parent_checksum: 0,
            sealed_segments: Vec::new(),
        }
    }

    /// Which copy this superblock is written to.
    pub fn copy(&self) -> u8 {
        (self.sequence % 2) as u8
    }

    /// The payload of the superblock's frame.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_as(VERSION)
    }

    /// The payload in the layout of `version`: the current one, or one
    /// before starts carried their head checksums or record offsets (what
    /// an older node wrote, which tests read back).
    fn encode_as(&self, version: u16) -> Vec<u8> {
        assert!(
            version == VERSION
                || version == VERSION_WITHOUT_START_CHECKSUMS
                || version == VERSION_WITHOUT_START_OFFSETS
        );
        self.assert_invariants();
        let mut writer = BodyWriter::default();
        writer.u32(MAGIC);
        writer.u16(version);
        writer.u64(self.sequence);
        encode_view(&mut writer, self.durable.view);
        encode_view(&mut writer, self.durable.log_view);
        writer.u64(self.durable.commit);
        writer.u8(self.replica);
        writer.u8(self.durability as u8);
        let confirm = self.confirm.to_bytes();
        writer.u8(confirm[0]);
        writer.u8(confirm[1]);
        writer.u8(self.flags());
        writer.u64(self.op_checkpoint);
        writer.u64(self.cursor_checkpoint);
        writer.u64(self.head_op);
        writer.u64(self.head_offset);
        writer.u32(self.head_parent_checksum);
        let layout = start_layout(version);
        writer.list(&self.durable.history_starts, |writer, start| {
            encode_start_as(writer, start, layout);
        });
        writer.list(&self.sealed_segments, |writer, segment| {
            writer.u64(segment.first_op);
            writer.u64(segment.last_op);
            writer.u64(segment.first_offset);
            writer.u64(segment.len_bytes);
        });
        writer.bytes(self.durable.view_headers.as_bytes());
        writer.u64(self.durable.maybe_acked_op);
        writer.u32(self.retired_epoch);
        writer.u64(self.clean_boot);
        writer.bytes(&self.durable.client_table);
        // The padding's length prefix, the padding and the crc make the
        // frame a whole number of steps.
        let unpadded = strand_wal::FRAME_HEADER_BYTES + writer.len() + 4 + 4;
        let padding = unpadded.next_multiple_of(FRAME_BYTES_STEP) - unpadded;
        writer.bytes(&PADDING[..padding]);
        let mut bytes = writer.into_vec();
        let crc = crc32c::crc32c(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// Parses and checks a superblock frame payload.
    pub fn decode(payload: &[u8]) -> Result<Superblock, PartitionError> {
        let invalid = |reason: String| PartitionError::SuperblockInvalid { reason };
        let Some(body_len) = payload.len().checked_sub(4) else {
            return Err(invalid(format!("{} bytes is too short", payload.len())));
        };
        let (body, crc_bytes) = payload.split_at(body_len);
        let stored = u32::from_le_bytes([crc_bytes[0], crc_bytes[1], crc_bytes[2], crc_bytes[3]]);
        let actual = crc32c::crc32c(body);
        if stored != actual {
            return Err(invalid(format!(
                "checksum {stored:#010x}, bytes give {actual:#010x}"
            )));
        }
        let superblock = decode_body(body).map_err(|error| invalid(error.to_string()))?;
        superblock
            .validate()
            .map_err(|reason| invalid(reason.to_owned()))?;
        Ok(superblock)
    }

    fn flags(&self) -> u8 {
        let mut flags = 0;
        if self.clean_shutdown {
            flags |= FLAG_CLEAN_SHUTDOWN;
        }
        if self.stopped_in_view {
            flags |= FLAG_STOPPED_IN_VIEW;
        }
        if self.awaiting_state_transfer {
            flags |= FLAG_AWAITING_STATE_TRANSFER;
        }
        if self.durable.log_unsettled {
            flags |= FLAG_LOG_UNSETTLED;
        }
        flags
    }

    /// Checks what a decoded superblock must satisfy (input: typed refusal).
    fn validate(&self) -> Result<(), &'static str> {
        let ensure = |ok: bool, reason| if ok { Ok(()) } else { Err(reason) };
        ensure(self.replica < REPLICAS_MAX, "replica index out of range")?;
        ensure(
            self.durable.log_view <= self.durable.view,
            "log_view above view",
        )?;
        ensure(self.head_op >= 1, "head op is zero")?;
        ensure(
            self.durable.history_starts.len() <= HISTORY_STARTS_MAX,
            "too many history starts",
        )?;
        ensure(
            self.durable
                .history_starts
                .windows(2)
                .all(|pair| pair[0].view < pair[1].view),
            "history starts not ascending by view",
        )?;
        ensure(
            self.durable.view_headers.len() <= VIEW_HEADERS_MAX,
            "too many view headers",
        )?;
        ensure(
            self.sealed_segments.len() <= SEALED_SEGMENTS_LISTED_MAX,
            "too many sealed segments",
        )?;
        ensure(
            self.sealed_segments.windows(2).all(|pair| {
                pair[0].first_op < pair[1].first_op && pair[0].first_offset < pair[1].first_offset
            }),
            "sealed segments not ascending",
        )?;
        ensure(
            self.sealed_segments
                .iter()
                .all(|segment| segment.last_op == 0 || segment.last_op >= segment.first_op),
            "a sealed segment ends before it starts",
        )
    }

    /// Our own invariants, before writing.
    fn assert_invariants(&self) {
        if let Err(reason) = self.validate() {
            panic!("writing an invalid superblock ({reason}): {self:?}");
        }
    }
}

/// Writes a view as its epoch, then its number.
pub(crate) fn encode_view(writer: &mut BodyWriter, view: ViewId) {
    writer.u32(view.epoch);
    writer.u32(view.view);
}

/// Reads a view written by [`encode_view`].
pub(crate) fn decode_view(
    reader: &mut BodyReader<'_>,
    field: &'static str,
) -> Result<ViewId, BodyError> {
    let epoch = reader.u32(field)?;
    Ok(ViewId::new(epoch, reader.u32(field)?))
}

/// The fields `version` (3 or later) wrote of each history start.
fn start_layout(version: u16) -> StartLayout {
    assert!(version >= VERSION_WITHOUT_LAST_OPS);
    match version {
        VERSION => StartLayout::WithChecksum,
        VERSION_WITHOUT_START_CHECKSUMS => StartLayout::WithOffset,
        _ => StartLayout::WithoutOffset,
    }
}

/// The history starts as `version` wrote them.
fn decode_starts(
    reader: &mut BodyReader<'_>,
    version: u16,
) -> Result<Vec<HistoryStart>, BodyError> {
    if version >= VERSION_WITHOUT_LAST_OPS {
        decode_start_list(reader, start_layout(version))
    } else {
        decode_start_list_without_epochs(reader)
    }
}

fn decode_body(body: &[u8]) -> Result<Superblock, BodyError> {
    let mut reader = BodyReader::new(body);
    let version = decode_version(&mut reader)?;
    let with_epochs = version >= VERSION_WITHOUT_LAST_OPS;
    let sequence = reader.u64("sequence")?;
    let (view, log_view) = decode_views(&mut reader, with_epochs)?;
    let commit = reader.u64("commit")?;
    let replica = reader.u8("replica")?;
    let durability = Durability::from_u8(reader.u8("durability")?)?;
    let confirm = ConfirmPolicy::from_bytes([reader.u8("confirm")?, reader.u8("confirm")?])?;
    let flags = decode_flags(&mut reader)?;
    let op_checkpoint = reader.u64("op checkpoint")?;
    let cursor_checkpoint = reader.u64("cursor checkpoint")?;
    let head_op = reader.u64("head op")?;
    let head_offset = reader.u64("head offset")?;
    let head_parent_checksum = reader.u32("head parent checksum")?;
    let history_starts = decode_starts(&mut reader, version)?;
    let sealed_segments = decode_sealed(&mut reader, version >= VERSION_WITHOUT_CLEAN_BOOT)?;
    let view_headers = strand_wire::prepare_headers(reader.bytes("view headers")?)
        .map_err(|_| BodyError::Invalid {
            field: "view headers",
            reason: "not a run of valid, ascending prepare headers",
        })?
        .to_vec();
    let tail = decode_tail(&mut reader, version)?;
    reader.finish()?;
    Ok(Superblock {
        sequence,
        durable: DurableFields {
            view,
            log_view,
            commit,
            history_starts,
            view_headers,
            maybe_acked_op: tail.maybe_acked_op,
            log_unsettled: flags & FLAG_LOG_UNSETTLED != 0,
            client_table: tail.client_table,
        },
        replica,
        durability,
        confirm,
        clean_shutdown: flags & FLAG_CLEAN_SHUTDOWN != 0,
        stopped_in_view: flags & FLAG_STOPPED_IN_VIEW != 0,
        clean_boot: tail.clean_boot,
        awaiting_state_transfer: flags & FLAG_AWAITING_STATE_TRANSFER != 0,
        retired_epoch: tail.retired_epoch,
        op_checkpoint,
        cursor_checkpoint,
        head_op,
        head_offset,
        head_parent_checksum,
        sealed_segments,
    })
}

/// The body's magic and layout version: one this build reads, or an error.
fn decode_version(reader: &mut BodyReader<'_>) -> Result<u16, BodyError> {
    let magic = reader.u32("magic")?;
    if magic != MAGIC {
        return Err(BodyError::UnknownValue {
            field: "superblock magic",
            value: u64::from(magic),
        });
    }
    let version = reader.u16("version")?;
    let known = [
        VERSION,
        VERSION_WITHOUT_START_CHECKSUMS,
        VERSION_WITHOUT_START_OFFSETS,
        VERSION_WITHOUT_CLIENT_TABLE,
        VERSION_WITHOUT_PADDING,
        VERSION_WITHOUT_CLEAN_BOOT,
        VERSION_WITHOUT_LAST_OPS,
        VERSION_WITHOUT_EPOCHS,
    ];
    if !known.contains(&version) {
        return Err(BodyError::UnknownValue {
            field: "superblock version",
            value: u64::from(version),
        });
    }
    Ok(version)
}

/// The view and log view: with their epochs, or (older layouts) plain
/// view numbers of epoch 0.
fn decode_views(
    reader: &mut BodyReader<'_>,
    with_epochs: bool,
) -> Result<(ViewId, ViewId), BodyError> {
    if with_epochs {
        return Ok((
            decode_view(reader, "view")?,
            decode_view(reader, "log view")?,
        ));
    }
    Ok((
        ViewId::new(0, reader.u32("view")?),
        ViewId::new(0, reader.u32("log view")?),
    ))
}

/// The flags byte, none but the known ones set.
fn decode_flags(reader: &mut BodyReader<'_>) -> Result<u8, BodyError> {
    let flags = reader.u8("flags")?;
    let known = FLAG_CLEAN_SHUTDOWN
        | FLAG_AWAITING_STATE_TRANSFER
        | FLAG_LOG_UNSETTLED
        | FLAG_STOPPED_IN_VIEW;
    if flags & !known != 0 {
        return Err(BodyError::UnknownFlags {
            field: "superblock flags",
            bits: u64::from(flags),
        });
    }
    Ok(flags)
}

/// The sealed segments (with their last ops, from the layout that added
/// them).
fn decode_sealed(
    reader: &mut BodyReader<'_>,
    with_last_ops: bool,
) -> Result<Vec<SealedSegment>, BodyError> {
    let sealed_bytes = if with_last_ops { 32 } else { 24 };
    reader.list("sealed segments", sealed_bytes, |reader| {
        let first_op = reader.u64("segment first op")?;
        let last_op = if with_last_ops {
            reader.u64("segment last op")?
        } else {
            0
        };
        Ok(SealedSegment {
            first_op,
            last_op,
            first_offset: reader.u64("segment first offset")?,
            len_bytes: reader.u64("segment length")?,
        })
    })
}

/// The fields after the view headers, each from the layout that added it.
struct BodyTail {
    maybe_acked_op: u64,
    retired_epoch: u32,
    clean_boot: u64,
    client_table: Bytes,
}

/// The fields after the view headers, then the zero padding.
fn decode_tail(reader: &mut BodyReader<'_>, version: u16) -> Result<BodyTail, BodyError> {
    let maybe_acked_op = reader.u64("maybe acked op")?;
    let retired_epoch = if version >= VERSION_WITHOUT_LAST_OPS {
        reader.u32("retired epoch")?
    } else {
        0
    };
    let clean_boot = if version >= VERSION_WITHOUT_PADDING {
        reader.u64("clean boot")?
    } else {
        0
    };
    let client_table = if version >= VERSION_WITHOUT_START_OFFSETS {
        Bytes::copy_from_slice(reader.bytes("client table")?)
    } else {
        Bytes::new()
    };
    if version >= VERSION_WITHOUT_CLIENT_TABLE {
        let padding = reader.bytes("padding")?;
        if padding.iter().any(|&byte| byte != 0) {
            return Err(BodyError::Invalid {
                field: "padding",
                reason: "not zeros",
            });
        }
    }
    Ok(BodyTail {
        maybe_acked_op,
        retired_epoch,
        clean_boot,
        client_table,
    })
}

/// What one copy held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyRead {
    /// No file.
    Absent,
    /// A file that is not a valid superblock (torn, truncated, damaged).
    Invalid(String),
    /// A valid superblock.
    Valid(Superblock),
}

/// Reads one superblock copy: the file must be exactly one valid frame.
pub fn read_copy<D: Disk>(disk: &mut D, dir: &Path, copy: u8) -> Result<CopyRead, PartitionError> {
    let path = superblock_path(dir, copy);
    let bytes = match disk.read_file(&path) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(CopyRead::Absent),
        Err(error) => return Err(PartitionError::io(&path, "read superblock", &error)),
    };
    Ok(decode_copy(&bytes, copy))
}

/// What the bytes of copy `copy`'s file hold: pure, so the fuzz targets and
/// proptests reach the same checks open makes.
pub(crate) fn decode_copy(bytes: &[u8], copy: u8) -> CopyRead {
    let report = strand_wal::scan(bytes);
    let [frame] = report.frames[..] else {
        return CopyRead::Invalid(format!(
            "{} bytes hold {} valid frames, want exactly one",
            bytes.len(),
            report.frames.len()
        ));
    };
    if !report.is_clean() {
        return CopyRead::Invalid("bytes after the frame".to_owned());
    }
    match Superblock::decode(frame.payload(bytes)) {
        Ok(superblock) if superblock.copy() == copy => CopyRead::Valid(superblock),
        Ok(_) => CopyRead::Invalid("sequence belongs to the other copy".to_owned()),
        Err(error) => CopyRead::Invalid(error.to_string()),
    }
}

/// Picks the valid copy with the highest sequence: `Ok(None)` when neither
/// copy exists, an error when copies exist but none is valid.
pub fn choose(dir: &Path, copies: [CopyRead; 2]) -> Result<Option<Superblock>, PartitionError> {
    let [copy0, copy1] = copies;
    match (copy0, copy1) {
        (CopyRead::Absent, CopyRead::Absent) => Ok(None),
        (CopyRead::Valid(a), CopyRead::Valid(b)) => {
            Ok(Some(if a.sequence > b.sequence { a } else { b }))
        }
        (CopyRead::Valid(superblock), _) | (_, CopyRead::Valid(superblock)) => Ok(Some(superblock)),
        (copy0, copy1) => Err(PartitionError::SuperblockUnreadable {
            dir: dir.to_path_buf(),
            copy0: describe(&copy0),
            copy1: describe(&copy1),
        }),
    }
}

fn describe(copy: &CopyRead) -> String {
    match copy {
        CopyRead::Absent => "absent".to_owned(),
        CopyRead::Invalid(reason) => reason.clone(),
        CopyRead::Valid(superblock) => format!("valid, sequence {}", superblock.sequence),
    }
}

/// The bytes of a superblock copy's file: one WAL frame.
pub fn encode_file(superblock: &Superblock) -> Vec<u8> {
    let mut bytes = Vec::new();
    strand_wal::encode_frame_into(&superblock.encode(), &mut bytes)
        .expect("a superblock fits a frame");
    bytes
}

/// Writes a superblock copy now, durably and atomically: temp file (synced),
/// rename over the copy, directory synced.
pub(crate) fn write_now<D: Disk>(
    disk: &mut D,
    dir: &Path,
    superblock: &Superblock,
) -> Result<(), PartitionError> {
    let copy = superblock.copy();
    let tmp = superblock_tmp_path(dir, copy);
    let path = superblock_path(dir, copy);
    let bytes = encode_file(superblock);
    disk.remove_file(&tmp)
        .and_then(|()| disk.write_at(&tmp, 0, &bytes))
        .and_then(|()| disk.rename(&tmp, &path))
        .map_err(|error| PartitionError::io(&path, "write the superblock", &error))
}

#[cfg(test)]
mod tests;
