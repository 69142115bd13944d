//! Reading the record log: prepares by op (to serve repairs), headers by op
//! range, and record batches by offset (fetch), zero copy: every batch is a
//! slice of one read buffer per run of entries. Everything read is checked
//! against its checksums; a mismatch marks the op damaged.

use bytes::Bytes;
use strand_wal::FRAME_HEADER_BYTES;
use strand_wire::batch::BATCH_HEADER_SIZE;
use strand_wire::{BatchHeader, CommandHeader, HEADER_SIZE, Msg, PrepareHeader};
use zerocopy::FromBytes;

use crate::disk::Disk;
use crate::entry::{EntryMeta, carries_batches, prepare_of_payload};
use crate::error::PartitionError;
use crate::io::Io;
use crate::record_log::RecordLog;

/// One record batch read back for a fetch: its stored bytes (whose header has
/// `offset_base` 0, as the producer sent it) and the offset of its first
/// record. Zero copy: `bytes` is a slice of a read buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedBatch {
    /// Offset of the batch's first record.
    pub offset_base: u64,
    /// The batch as stored (64-byte header, then records).
    pub bytes: Bytes,
}

impl FetchedBatch {
    /// A copy of the batch header with `offset_base` patched in: what a fetch
    /// reply sends in front of [`FetchedBatch::records`].
    pub fn patched_header(&self) -> BatchHeader {
        let (header, _) = BatchHeader::read_from_prefix(&self.bytes)
            .expect("fetched batches were checked to hold a header");
        header.with_offset_base(self.offset_base)
    }

    /// The bytes after the 64-byte batch header.
    pub fn records(&self) -> Bytes {
        self.bytes.slice(BATCH_HEADER_SIZE..)
    }

    /// Number of records in the batch.
    pub fn record_count(&self) -> u32 {
        self.patched_header().record_count.get()
    }
}

/// Splits a produce's body into its record batches, with their offsets.
fn split_prepare_batches(prepare: &Msg<PrepareHeader>) -> Result<Vec<FetchedBatch>, String> {
    let header = prepare.header();
    let mut batches = Vec::new();
    if !carries_batches(header) {
        return Ok(batches);
    }
    let body = prepare.body();
    let mut at = 0usize;
    let mut offset_base = header.offset_base.get();
    while at < body.len() {
        let (batch_header, _) = BatchHeader::read_from_prefix(&body[at..])
            .map_err(|_| "a batch header is cut short".to_owned())?;
        let length = batch_header.length.get() as usize;
        if length < BATCH_HEADER_SIZE || at + length > body.len() {
            return Err("a batch length runs past the body".to_owned());
        }
        let record_count = batch_header.record_count.get();
        batches.push(FetchedBatch {
            offset_base,
            bytes: body.slice(at..at + length),
        });
        offset_base += u64::from(record_count);
        at += length;
    }
    if offset_base != header.offset_end() {
        return Err("batch record counts disagree with the prepare".to_owned());
    }
    Ok(batches)
}

impl RecordLog {
    /// Reads op `op`'s prepare, validated. `None` when the log does not hold a
    /// good copy (outside the log, or known damaged).
    pub fn read_prepare<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        op: u64,
    ) -> Result<Option<Msg<PrepareHeader>>, PartitionError> {
        if let Some(prepare) = self.in_flight_prepare(op) {
            return Ok(Some(prepare.clone()));
        }
        let Some((segment, meta)) = self.entry(op) else {
            return Ok(None);
        };
        if meta.damaged {
            return Ok(None);
        }
        let (meta, path) = (*meta, self.path_of(segment));
        let payload_offset = meta.position + FRAME_HEADER_BYTES as u64;
        let payload_len = (meta.frame_len - FRAME_HEADER_BYTES as u64) as usize;
        let payload = io
            .disk
            .read_at(&path, payload_offset, payload_len)
            .map_err(|error| PartitionError::io(&path, "read a prepare", &error))?;
        match prepare_of_payload(payload) {
            Ok(prepare)
                if prepare.header().op.get() == op && prepare.checksum() == meta.checksum =>
            {
                Ok(Some(prepare))
            }
            Ok(_) => Err(self.damaged(op, "a different prepare is stored there".to_owned())),
            Err(reason) => Err(self.damaged(op, reason)),
        }
    }

    fn damaged(&mut self, op: u64, reason: String) -> PartitionError {
        self.mark_damaged(op);
        PartitionError::EntryDamaged { op, reason }
    }

    fn in_flight_prepare(&self, op: u64) -> Option<&Msg<PrepareHeader>> {
        let first = self.in_flight.front()?.header().op.get();
        let prepare = self
            .in_flight
            .get(usize::try_from(op.checked_sub(first)?).ok()?)?;
        assert_eq!(
            prepare.header().op.get(),
            op,
            "in-flight prepares are consecutive"
        );
        Some(prepare)
    }

    /// Reads the headers of the readable ops in `op_min..=op_max`.
    pub fn read_headers<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        op_min: u64,
        op_max: u64,
    ) -> Result<Vec<PrepareHeader>, PartitionError> {
        let mut headers = Vec::new();
        for op in op_min.max(self.head_op)..=op_max.min(self.op) {
            if let Some(prepare) = self.in_flight_prepare(op) {
                headers.push(*prepare.header());
                continue;
            }
            let Some((segment, meta)) = self.entry(op) else {
                continue;
            };
            if meta.damaged {
                continue;
            }
            let (meta, path) = (*meta, self.path_of(segment));
            let bytes = io
                .disk
                .read_at(
                    &path,
                    meta.position + FRAME_HEADER_BYTES as u64,
                    HEADER_SIZE,
                )
                .map_err(|error| PartitionError::io(&path, "read a prepare header", &error))?;
            let header = PrepareHeader::read_from_bytes(&bytes).map_err(|_| {
                PartitionError::EntryDamaged {
                    op,
                    reason: "short header".to_owned(),
                }
            })?;
            if header.validate_header().is_err() || header.checksum() != meta.checksum {
                return Err(self.damaged(op, "header checksum".to_owned()));
            }
            headers.push(header);
        }
        Ok(headers)
    }

    /// Reads record batches from `offset` on: the first one available
    /// whatever its size, then more while their bytes stay within
    /// `max_bytes`. Bounds by the commit point are the caller's.
    pub fn fetch<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        offset: u64,
        max_bytes: u64,
    ) -> Result<Vec<FetchedBatch>, PartitionError> {
        if offset < self.head_offset || offset > self.offset_end {
            return Err(PartitionError::OffsetOutOfRange {
                offset,
                head_offset: self.head_offset,
                offset_end: self.offset_end,
            });
        }
        let mut batches = Vec::new();
        let mut bytes_in = 0u64;
        let mut op = self.first_op_holding(offset);
        while op <= self.op && (batches.is_empty() || bytes_in < max_bytes) {
            // Damage ends the reply; it fails it only when nothing came before.
            let run = match self.read_run(io, op, max_bytes.saturating_sub(bytes_in)) {
                Ok(run) => run,
                Err(_) if !batches.is_empty() => break,
                Err(error) => return Err(error),
            };
            if run.is_empty() {
                break;
            }
            for prepare in &run {
                op = prepare.header().op.get() + 1;
                let split = match split_prepare_batches(prepare) {
                    Ok(split) => split,
                    Err(_) if !batches.is_empty() => return Ok(batches),
                    Err(reason) => return Err(self.damaged(op - 1, reason)),
                };
                for batch in split {
                    let end = batch.offset_base + u64::from(batch.record_count());
                    if end <= offset && batch.record_count() > 0 {
                        continue;
                    }
                    let size = batch.bytes.len() as u64;
                    if !batches.is_empty() && bytes_in + size > max_bytes {
                        return Ok(batches);
                    }
                    bytes_in += size;
                    batches.push(batch);
                }
            }
        }
        Ok(batches)
    }

    /// The first op whose records reach past `offset` (or the op after the head).
    fn first_op_holding(&self, offset: u64) -> u64 {
        let after = self
            .segments
            .partition_point(|segment| segment.first_offset <= offset);
        let segment = &self.segments[after.saturating_sub(1)];
        let slot = segment
            .entries
            .partition_point(|meta| meta.offset_end <= offset);
        segment.first_op + slot as u64
    }

    /// Reads consecutive prepares from `op` in one segment with one read,
    /// about `want_bytes` of them (at least one).
    fn read_run<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        op: u64,
        want_bytes: u64,
    ) -> Result<Vec<Msg<PrepareHeader>>, PartitionError> {
        if let Some(prepare) = self.in_flight_prepare(op) {
            return Ok(vec![prepare.clone()]);
        }
        let Some(index) = self.segment_of(op) else {
            return Ok(Vec::new());
        };
        let segment = &self.segments[index];
        let first = *segment.entry(op).expect("segment_of checked it");
        if first.damaged {
            return Err(PartitionError::EntryDamaged {
                op,
                reason: "awaiting repair".to_owned(),
            });
        }
        let durable_end = self.durable_op.min(segment.last_op());
        let mut last = op;
        while last < durable_end {
            let next = segment.entry(last + 1).expect("within the segment");
            if next.damaged || next.end() - first.position > want_bytes.max(first.frame_len) {
                break;
            }
            last += 1;
        }
        let end = segment.entry(last).expect("within the segment").end();
        let path = self.path_of(segment);
        let buffer = io
            .disk
            .read_at(&path, first.position, (end - first.position) as usize)
            .map_err(|error| PartitionError::io(&path, "read records", &error))?;
        let metas: Vec<EntryMeta> = (op..=last)
            .map(|at| *segment.entry(at).expect("within the segment"))
            .collect();
        let mut run = Vec::with_capacity(metas.len());
        for (at, meta) in (op..=last).zip(metas) {
            let start = (meta.position - first.position) as usize + FRAME_HEADER_BYTES;
            let payload = buffer.slice(start..(meta.end() - first.position) as usize);
            match prepare_of_payload(payload) {
                Ok(prepare) if prepare.checksum() == meta.checksum => run.push(prepare),
                Ok(_) => {
                    return Err(self.damaged(at, "a different prepare is stored there".to_owned()));
                }
                Err(reason) => return Err(self.damaged(at, reason)),
            }
        }
        Ok(run)
    }

    /// The newest timestamp-indexed offset at or after `timestamp_ns`.
    pub fn offset_for_timestamp(&self, timestamp_ns: u64) -> Option<u64> {
        for segment in &self.segments {
            if segment.timestamp_max_ns() < timestamp_ns {
                continue;
            }
            let start = segment
                .index
                .partition_point(|entry| entry.timestamp_ns < timestamp_ns)
                .saturating_sub(1);
            let from_op = segment
                .index
                .get(start)
                .map_or(segment.first_op, |entry| entry.op);
            let from = (from_op - segment.first_op) as usize;
            let found = segment.entries[from..].iter().find(|meta| {
                !meta.damaged && meta.timestamp_ns >= timestamp_ns && meta.has_records()
            });
            if let Some(meta) = found {
                return Some(meta.offset_base);
            }
        }
        None
    }
}
