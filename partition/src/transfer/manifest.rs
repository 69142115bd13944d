//! The export manifest (chunk 0): what the stream holds and how it is laid out.

use bytes::Bytes;
use strand_wire::codec::{BodyReader, BodyWriter};
use strand_wire::error::BodyError;
use strand_wire::{CommandHeader, ConfirmPolicy, Durability, HEADER_SIZE, PrepareHeader};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use crate::error::PartitionError;
use crate::start_codec::{StartLayout, decode_start_list, encode_start};
use crate::superblock::{DurableFields, HISTORY_STARTS_MAX, decode_view, encode_view};

const MAGIC: u32 = 0x4d58_5453; // "STXM"
/// Version 6: history starts carry their head checksums; version 5: their
/// record offsets; version 4: a
/// machine snapshot file may be listed; version 3: a client
/// table file may be listed; version 2: views carry their assignment epochs
/// (all still read).
const VERSION: u16 = 6;
const VERSION_WITHOUT_START_CHECKSUMS: u16 = 5;
const VERSION_WITHOUT_CLIENT_TABLE: u16 = 2;

/// What a manifest file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestFileKind {
    /// A record log segment, cut at the frontier.
    Segment {
        /// Its first record offset (its name).
        first_offset: u64,
        /// Its first op.
        first_op: u64,
        /// Its last op in the export.
        last_op: u64,
        /// The checksum of that op's prepare.
        last_checksum: u32,
    },
    /// The cursor snapshot.
    CursorSnapshot,
    /// The source's client table (consensus's encoding), at most
    /// [`CLIENT_TABLE_BYTES_MAX`]; absent when the source had none to give.
    ClientTable,
    /// The state machine's snapshot (the metadata plane's catalog) the log
    /// reaches back to, as its file is on disk; absent for a partition.
    MachineSnapshot,
}

/// The largest machine snapshot file a manifest may list: the largest image
/// and its pieces' framing, so a peer cannot make a receiver stage more.
pub const MACHINE_SNAPSHOT_FILE_BYTES_MAX: u64 =
    crate::machine_snapshot::MACHINE_SNAPSHOT_BYTES_MAX as u64 + (1 << 20);

/// The largest client table a manifest may list: above consensus's bound on
/// an encoded table, so a peer cannot make a receiver stage an unbounded one.
pub const CLIENT_TABLE_BYTES_MAX: u64 = 8 << 20;

/// One file of the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestFile {
    /// What it is.
    pub kind: ManifestFileKind,
    /// Its length in the export.
    pub len_bytes: u64,
    /// The chunk holding its first bytes.
    pub first_chunk: u32,
    /// How many chunks it spans.
    pub chunk_count: u32,
}

/// Chunk 0 of an export. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The op the export is taken at.
    pub frontier_op: u64,
    /// One past the last record offset at the frontier.
    pub frontier_offset: u64,
    /// The frontier op's header (`None` for an empty export).
    pub frontier_header: Option<PrepareHeader>,
    /// The exporter's consensus fields, commit at most the frontier.
    pub durable: DurableFields,
    /// The partition's durability policy.
    pub durability: Durability,
    /// The partition's confirm policy.
    pub confirm: ConfirmPolicy,
    /// The first op exported.
    pub head_op: u64,
    /// The first record offset exported.
    pub head_offset: u64,
    /// The checksum of op `head_op - 1` (0 when unknown).
    pub head_parent_checksum: u32,
    /// The cursor tail the snapshot covers.
    pub cursor_tail: u64,
    /// The chunk data size the stream was cut with.
    pub chunk_data_bytes_max: u32,
    /// Chunks in the stream, the manifest included.
    pub chunk_count: u32,
    /// The files, in chunk order.
    pub files: Vec<ManifestFile>,
}

impl Manifest {
    /// Chunk 0's body.
    pub fn encode(&self) -> Vec<u8> {
        let mut writer = BodyWriter::default();
        writer.u32(MAGIC);
        writer.u16(VERSION);
        writer.u64(self.frontier_op);
        writer.u64(self.frontier_offset);
        writer.bool(self.frontier_header.is_some());
        let header = self
            .frontier_header
            .unwrap_or_else(PrepareHeader::new_zeroed);
        writer.bytes(header.as_bytes());
        encode_view(&mut writer, self.durable.view);
        encode_view(&mut writer, self.durable.log_view);
        writer.u64(self.durable.commit);
        writer.list(&self.durable.history_starts, encode_start);
        writer.u8(self.durability as u8);
        let confirm = self.confirm.to_bytes();
        writer.u8(confirm[0]);
        writer.u8(confirm[1]);
        writer.u64(self.head_op);
        writer.u64(self.head_offset);
        writer.u32(self.head_parent_checksum);
        writer.u64(self.cursor_tail);
        writer.u32(self.chunk_data_bytes_max);
        writer.u32(self.chunk_count);
        writer.list(&self.files, encode_file);
        let mut bytes = writer.into_vec();
        let crc = crc32c::crc32c(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// Parses and checks chunk 0's body.
    pub fn decode(body: &[u8]) -> Result<Manifest, PartitionError> {
        let invalid = |reason: String| PartitionError::ChunkInvalid { chunk: 0, reason };
        let Some(len) = body.len().checked_sub(4) else {
            return Err(invalid("manifest too short".to_owned()));
        };
        let (content, crc_bytes) = body.split_at(len);
        let stored = u32::from_le_bytes([crc_bytes[0], crc_bytes[1], crc_bytes[2], crc_bytes[3]]);
        let actual = crc32c::crc32c(content);
        if stored != actual {
            return Err(PartitionError::ChunkChecksum {
                chunk: 0,
                expected: stored,
                actual,
            });
        }
        let manifest = decode_content(content).map_err(|error| invalid(error.to_string()))?;
        manifest
            .validate()
            .map_err(|reason| invalid(reason.to_owned()))?;
        Ok(manifest)
    }

    /// The layout rules a manifest from a peer must satisfy.
    fn validate(&self) -> Result<(), &'static str> {
        let ensure = |ok: bool, reason| if ok { Ok(()) } else { Err(reason) };
        ensure(self.chunk_data_bytes_max > 0, "zero chunk size")?;
        ensure(
            self.chunk_data_bytes_max as usize <= super::CHUNK_DATA_BYTES_MAX,
            "chunk size above the bound",
        )?;
        ensure(self.head_op >= 1, "head op is zero")?;
        ensure(
            self.durable.log_view <= self.durable.view,
            "log_view above view",
        )?;
        let client_tables = self
            .files
            .iter()
            .filter(|file| file.kind == ManifestFileKind::ClientTable);
        for (index, file) in client_tables.enumerate() {
            ensure(index == 0, "more than one client table")?;
            ensure(
                file.len_bytes <= CLIENT_TABLE_BYTES_MAX,
                "client table above the bound",
            )?;
        }
        let machine_snapshots = self
            .files
            .iter()
            .filter(|file| file.kind == ManifestFileKind::MachineSnapshot);
        for (index, file) in machine_snapshots.enumerate() {
            ensure(index == 0, "more than one machine snapshot")?;
            ensure(
                file.len_bytes <= MACHINE_SNAPSHOT_FILE_BYTES_MAX,
                "machine snapshot above the bound",
            )?;
        }
        let mut next_chunk = 1u32;
        for file in &self.files {
            ensure(
                file.first_chunk == next_chunk,
                "files do not tile the chunks",
            )?;
            let want = file
                .len_bytes
                .div_ceil(u64::from(self.chunk_data_bytes_max));
            ensure(
                u64::from(file.chunk_count) == want,
                "a file's chunk count is wrong",
            )?;
            next_chunk = next_chunk
                .checked_add(file.chunk_count)
                .ok_or("chunk count overflows")?;
        }
        ensure(
            next_chunk == self.chunk_count,
            "chunk count disagrees with the files",
        )?;
        match &self.frontier_header {
            Some(header) => {
                ensure(header.validate_header().is_ok(), "frontier header invalid")?;
                ensure(
                    header.op.get() == self.frontier_op,
                    "frontier header is another op",
                )
            }
            None => ensure(
                self.frontier_op.checked_add(1) == Some(self.head_op),
                "no frontier header",
            ),
        }
    }

    /// The file and offset chunk `chunk` (≥ 1) carries, with its data length.
    pub(crate) fn locate(&self, chunk: u32) -> Option<(u32, u64, u64)> {
        let (index, file) = self.files.iter().enumerate().find(|(_, file)| {
            file.first_chunk <= chunk && chunk < file.first_chunk + file.chunk_count
        })?;
        let step = u64::from(self.chunk_data_bytes_max);
        let offset = u64::from(chunk - file.first_chunk) * step;
        let len = step.min(file.len_bytes - offset);
        Some((index as u32, offset, len))
    }
}

fn encode_file(writer: &mut BodyWriter, file: &ManifestFile) {
    match file.kind {
        ManifestFileKind::Segment {
            first_offset,
            first_op,
            last_op,
            last_checksum,
        } => {
            writer.u8(1);
            writer.u64(first_offset);
            writer.u64(first_op);
            writer.u64(last_op);
            writer.u32(last_checksum);
        }
        ManifestFileKind::CursorSnapshot
        | ManifestFileKind::ClientTable
        | ManifestFileKind::MachineSnapshot => {
            writer.u8(match file.kind {
                ManifestFileKind::CursorSnapshot => 2,
                ManifestFileKind::ClientTable => 3,
                _ => 4,
            });
            writer.u64(0);
            writer.u64(0);
            writer.u64(0);
            writer.u32(0);
        }
    }
    writer.u64(file.len_bytes);
    writer.u32(file.first_chunk);
    writer.u32(file.chunk_count);
}

fn decode_file(reader: &mut BodyReader<'_>) -> Result<ManifestFile, BodyError> {
    let kind = reader.u8("file kind")?;
    let first_offset = reader.u64("first offset")?;
    let first_op = reader.u64("first op")?;
    let last_op = reader.u64("last op")?;
    let last_checksum = reader.u32("last checksum")?;
    let kind = match kind {
        1 => ManifestFileKind::Segment {
            first_offset,
            first_op,
            last_op,
            last_checksum,
        },
        2 => ManifestFileKind::CursorSnapshot,
        3 => ManifestFileKind::ClientTable,
        4 => ManifestFileKind::MachineSnapshot,
        other => {
            return Err(BodyError::UnknownValue {
                field: "file kind",
                value: u64::from(other),
            });
        }
    };
    Ok(ManifestFile {
        kind,
        len_bytes: reader.u64("file length")?,
        first_chunk: reader.u32("first chunk")?,
        chunk_count: reader.u32("chunk count")?,
    })
}

/// The frontier op's header, if the manifest carries one (always 256
/// bytes on the wire, zeros when it does not).
fn decode_frontier_header(reader: &mut BodyReader<'_>) -> Result<Option<PrepareHeader>, BodyError> {
    let has_header = reader.bool("has header")?;
    let header_bytes = reader.bytes("frontier header")?;
    if header_bytes.len() != HEADER_SIZE {
        return Err(BodyError::Invalid {
            field: "frontier header",
            reason: "not 256 bytes",
        });
    }
    let header = PrepareHeader::read_from_bytes(header_bytes).map_err(|_| BodyError::Invalid {
        field: "frontier header",
        reason: "unreadable",
    })?;
    Ok(has_header.then_some(header))
}

fn decode_content(content: &[u8]) -> Result<Manifest, BodyError> {
    let mut reader = BodyReader::new(content);
    let magic = reader.u32("magic")?;
    let version = reader.u16("version")?;
    if magic != MAGIC || !(VERSION_WITHOUT_CLIENT_TABLE..=VERSION).contains(&version) {
        return Err(BodyError::UnknownValue {
            field: "manifest magic or version",
            value: u64::from(magic),
        });
    }
    let frontier_op = reader.u64("frontier op")?;
    let frontier_offset = reader.u64("frontier offset")?;
    let frontier_header = decode_frontier_header(&mut reader)?;
    let view = decode_view(&mut reader, "view")?;
    let log_view = decode_view(&mut reader, "log view")?;
    let commit = reader.u64("commit")?;
    let layout = match version {
        VERSION => StartLayout::WithChecksum,
        VERSION_WITHOUT_START_CHECKSUMS => StartLayout::WithOffset,
        _ => StartLayout::WithoutOffset,
    };
    let history_starts = decode_start_list(&mut reader, layout)?;
    if history_starts.len() > HISTORY_STARTS_MAX {
        return Err(BodyError::Invalid {
            field: "history starts",
            reason: "too many",
        });
    }
    let durability = Durability::from_u8(reader.u8("durability")?)?;
    let confirm = ConfirmPolicy::from_bytes([reader.u8("confirm")?, reader.u8("confirm")?])?;
    let manifest = Manifest {
        frontier_op,
        frontier_offset,
        frontier_header,
        durable: DurableFields {
            view,
            log_view,
            commit,
            history_starts,
            // The source's own adopted suffix and ack bound are not the
            // receiver's: the transfer installs a committed prefix.
            view_headers: Vec::new(),
            maybe_acked_op: 0,
            log_unsettled: false,
            // Carried as a file of its own (`ManifestFileKind::ClientTable`).
            client_table: Bytes::new(),
        },
        durability,
        confirm,
        head_op: reader.u64("head op")?,
        head_offset: reader.u64("head offset")?,
        head_parent_checksum: reader.u32("head parent checksum")?,
        cursor_tail: reader.u64("cursor tail")?,
        chunk_data_bytes_max: reader.u32("chunk size")?,
        chunk_count: reader.u32("chunk count")?,
        files: reader.list("files", 45, decode_file)?,
    };
    reader.finish()?;
    Ok(manifest)
}
