//! Exporting a partition at a frontier op.

use bytes::Bytes;
use strand_wire::{PrepareHeader, STATE_TRANSFER_CHUNK_SIZE_MAX};

use super::manifest::{CLIENT_TABLE_BYTES_MAX, Manifest, ManifestFile, ManifestFileKind};
use super::{CHUNK_DATA_BYTES_MAX, encode_chunk};
use crate::cursor_snapshot::encode_snapshot;
use crate::disk::Disk;
use crate::error::PartitionError;
use crate::layout::segment_path;
use crate::partition::Partition;

/// How an export cuts its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportConfig {
    /// Data bytes per content chunk (at most [`CHUNK_DATA_BYTES_MAX`]).
    pub chunk_data_bytes_max: usize,
}

impl Default for ExportConfig {
    fn default() -> ExportConfig {
        ExportConfig {
            chunk_data_bytes_max: CHUNK_DATA_BYTES_MAX,
        }
    }
}

/// One export: fixed at creation, so chunk `i` is the same bytes however
/// often it is asked for. The server keeps it while a transfer is served.
#[derive(Debug, Clone)]
pub struct Export {
    manifest: Manifest,
    manifest_bytes: Bytes,
    snapshot_bytes: Bytes,
    client_table: Bytes,
    machine_snapshot: Bytes,
}

impl Export {
    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Chunks in the stream, the manifest included.
    pub fn chunk_count(&self) -> u32 {
        self.manifest.chunk_count
    }
}

impl<D: Disk> Partition<D> {
    /// Exports this partition at `frontier_op`: every retained op up to it
    /// (which must be durable and undamaged), the cursor snapshot, the
    /// superblock fields, and `client_table`: consensus's client table
    /// through at least the frontier (empty: none is sent), which the log
    /// alone cannot rebuild once retention has dropped its oldest ops.
    pub fn export(
        &mut self,
        frontier_op: u64,
        config: ExportConfig,
        client_table: Bytes,
    ) -> Result<Export, PartitionError> {
        assert!(
            config.chunk_data_bytes_max > 0 && config.chunk_data_bytes_max <= CHUNK_DATA_BYTES_MAX,
            "chunk data size {} out of range",
            config.chunk_data_bytes_max
        );
        self.check_exportable(frontier_op)?;
        let (frontier_header, frontier_offset) = self.frontier_of(frontier_op)?;
        let mut map = self.cursors.map.clone();
        for offset in map.values_mut() {
            *offset = (*offset).min(frontier_offset);
        }
        let snapshot_bytes = Bytes::from(encode_snapshot(self.cursors.tail, &map)?);
        if client_table.len() as u64 > CLIENT_TABLE_BYTES_MAX {
            return Err(PartitionError::ExportUnavailable {
                frontier_op,
                reason: format!("the client table takes {} bytes", client_table.len()),
            });
        }
        let machine_snapshot = Bytes::from(self.machine_snapshot_to_export(frontier_op)?);
        let (files, chunk_count) = self.layout_files(
            frontier_op,
            &config,
            snapshot_bytes.len(),
            [client_table.len(), machine_snapshot.len()],
        );
        let mut durable = self.superblock.durable.clone();
        durable.commit = durable.commit.min(frontier_op);
        let manifest = Manifest {
            frontier_op,
            frontier_offset,
            frontier_header,
            durable,
            durability: self.superblock.durability,
            confirm: self.superblock.confirm,
            head_op: self.log.head_op,
            head_offset: self.log.head_offset,
            head_parent_checksum: self.log.head_parent_checksum,
            cursor_tail: self.cursors.tail,
            chunk_data_bytes_max: config.chunk_data_bytes_max as u32,
            chunk_count,
            files,
        };
        let manifest_bytes = manifest_bytes_of(&manifest)?;
        tracing::info!(
            frontier_op,
            chunks = manifest.chunk_count,
            "partition: export taken"
        );
        Ok(Export {
            manifest,
            manifest_bytes,
            snapshot_bytes,
            client_table,
            machine_snapshot,
        })
    }

    /// The frontier op's header (none below the log's head: retention
    /// dropped it) and the record offset it ends at.
    fn frontier_of(
        &mut self,
        frontier_op: u64,
    ) -> Result<(Option<PrepareHeader>, u64), PartitionError> {
        let frontier_header = match frontier_op >= self.log.head_op {
            true => self
                .read_headers(frontier_op, frontier_op)?
                .first()
                .copied(),
            false => None,
        };
        let frontier_offset = match frontier_header {
            Some(_) => self
                .log
                .entry(frontier_op)
                .map_or(0, |(_, meta)| meta.offset_end),
            None => self.log.head_offset,
        };
        Ok((frontier_header, frontier_offset))
    }

    /// The machine snapshot the export ships (empty for a partition that
    /// keeps none): one the importer can rebuild its state machine from,
    /// replaying the exported log after it.
    fn machine_snapshot_to_export(&mut self, frontier_op: u64) -> Result<Vec<u8>, PartitionError> {
        if self.machine_snapshot_ops == [None, None] {
            return Ok(Vec::new());
        }
        self.machine_snapshot_for_export(frontier_op)?
            .ok_or_else(|| PartitionError::ExportUnavailable {
                frontier_op,
                reason: format!(
                    "no readable machine snapshot at or below the frontier that the log, from op \
                     {}, reaches back to",
                    self.log.head_op
                ),
            })
    }

    /// The frontier must be retained, durable and undamaged.
    fn check_exportable(&self, frontier_op: u64) -> Result<(), PartitionError> {
        let unavailable = |reason: String| PartitionError::ExportUnavailable {
            frontier_op,
            reason,
        };
        if frontier_op + 1 < self.log.head_op || frontier_op > self.log.op {
            return Err(unavailable(format!(
                "the log holds ops {}..={}",
                self.log.head_op, self.log.op
            )));
        }
        if frontier_op > self.log.durable_op {
            return Err(unavailable(format!(
                "only ops up to {} are durable",
                self.log.durable_op
            )));
        }
        if let Some(op) = self.log.faulty.range(..=frontier_op).next() {
            return Err(unavailable(format!("op {op} is damaged")));
        }
        Ok(())
    }

    /// The files of an export at `frontier_op` (segments cut at the frontier,
    /// then the snapshot, then the client table and the machine snapshot
    /// unless empty) and the chunks each spans; returns them with the
    /// stream's chunk count.
    fn layout_files(
        &self,
        frontier_op: u64,
        config: &ExportConfig,
        snapshot_len: usize,
        [client_table_len, machine_snapshot_len]: [usize; 2],
    ) -> (Vec<ManifestFile>, u32) {
        let step = config.chunk_data_bytes_max as u64;
        let mut files = Vec::new();
        let mut next_chunk = 1u32;
        let mut add = |kind, len_bytes: u64| {
            let chunk_count = len_bytes.div_ceil(step) as u32;
            files.push(ManifestFile {
                kind,
                len_bytes,
                first_chunk: next_chunk,
                chunk_count,
            });
            next_chunk += chunk_count;
        };
        let exported = self
            .log
            .segments
            .iter()
            .filter(|segment| segment.first_op <= frontier_op);
        for segment in exported {
            let last_op = segment.last_op().min(frontier_op);
            let meta = segment.entry(last_op).expect("the segment holds its ops");
            let kind = ManifestFileKind::Segment {
                first_offset: segment.first_offset,
                first_op: segment.first_op,
                last_op,
                last_checksum: meta.checksum,
            };
            add(kind, meta.end());
        }
        add(ManifestFileKind::CursorSnapshot, snapshot_len as u64);
        if client_table_len > 0 {
            add(ManifestFileKind::ClientTable, client_table_len as u64);
        }
        if machine_snapshot_len > 0 {
            add(
                ManifestFileKind::MachineSnapshot,
                machine_snapshot_len as u64,
            );
        }
        (files, next_chunk)
    }

    /// Chunk `chunk` of `export`: the manifest for 0, else a piece of a file
    /// read from disk (each a body for a `StateTransferChunk` frame).
    pub fn export_chunk(&mut self, export: &Export, chunk: u32) -> Result<Bytes, PartitionError> {
        if chunk == 0 {
            return Ok(export.manifest_bytes.clone());
        }
        let (file, offset, len) =
            export
                .manifest
                .locate(chunk)
                .ok_or(PartitionError::ChunkInvalid {
                    chunk,
                    reason: "past the export's last chunk".to_owned(),
                })?;
        let data = match export.manifest.files[file as usize].kind {
            ManifestFileKind::Segment { first_offset, .. } => {
                let path = segment_path(&self.dir, first_offset);
                self.io
                    .disk
                    .read_at(&path, offset, len as usize)
                    .map_err(|error| {
                        PartitionError::io(&path, "read a segment for export", &error)
                    })?
            }
            ManifestFileKind::CursorSnapshot => export
                .snapshot_bytes
                .slice(offset as usize..(offset + len) as usize),
            ManifestFileKind::ClientTable => export
                .client_table
                .slice(offset as usize..(offset + len) as usize),
            ManifestFileKind::MachineSnapshot => export
                .machine_snapshot
                .slice(offset as usize..(offset + len) as usize),
        };
        Ok(Bytes::from(encode_chunk(chunk, file, offset, &data)))
    }
}

/// The manifest encoded, as long as it fits in one chunk (the importer
/// reads it first, whole).
fn manifest_bytes_of(manifest: &Manifest) -> Result<Bytes, PartitionError> {
    let manifest_bytes = Bytes::from(manifest.encode());
    if manifest_bytes.len() > STATE_TRANSFER_CHUNK_SIZE_MAX {
        return Err(PartitionError::ExportUnavailable {
            frontier_op: manifest.frontier_op,
            reason: format!(
                "the manifest takes {} bytes, more than a chunk",
                manifest_bytes.len()
            ),
        });
    }
    Ok(manifest_bytes)
}
