//! Builders of valid prepares and hash chains, for tests, benches and the
//! simulator: what a primary would hand storage, without a replica.

use bytes::Bytes;
use strand_wire::{BatchBuilder, CommandHeader, Msg, Operation, PrepareHeader, ViewId};

/// Cluster id the fixtures stamp on prepares.
pub const FIXTURE_CLUSTER: u64 = 7;
/// Group id the fixtures stamp on prepares.
pub const FIXTURE_GROUP: u64 = 11;

/// A produce prepare for op `op` chaining to `parent`, carrying one record
/// batch of `record_count` records of `record_bytes` value bytes each, whose
/// first record offset is `offset_base`.
pub fn produce(
    op: u64,
    parent: u32,
    offset_base: u64,
    record_count: u32,
    record_bytes: usize,
) -> Msg<PrepareHeader> {
    assert!(op >= 1, "ops count from 1");
    let mut batch = BatchBuilder::with_capacity(record_count as usize * (record_bytes + 32) + 64);
    let value = vec![(op % 251) as u8; record_bytes];
    let timestamp_us = op * 1_000;
    for index in 0..record_count {
        let key = (offset_base + u64::from(index)).to_le_bytes();
        batch.push(timestamp_us, &key, &value, &[]);
    }
    let body = batch.finish().bytes().clone();
    prepare_with_body(op, parent, offset_base, record_count, body)
}

/// A produce prepare with a caller-built body (concatenated record batches
/// holding `record_count` records in all).
pub fn prepare_with_body(
    op: u64,
    parent: u32,
    offset_base: u64,
    record_count: u32,
    body: Bytes,
) -> Msg<PrepareHeader> {
    let mut header = PrepareHeader::new(FIXTURE_CLUSTER, FIXTURE_GROUP, ViewId::new(0, 1), 0);
    header.op.set(op);
    header.parent.set(if op == 1 { 0 } else { parent });
    header.commit.set(op - 1);
    header.client.set(1);
    header.request.set(op);
    header.timestamp_ns.set(op * 1_000_000);
    header.offset_base.set(offset_base);
    header.record_count.set(record_count);
    header.operation = Operation::Produce as u8;
    Msg::new(header, body)
}

/// `count` chained produce prepares from `first_op` (whose parent is
/// `parent`), each with `records_each` records of 100 bytes.
pub fn chain_from(
    first_op: u64,
    parent: u32,
    first_offset: u64,
    count: u64,
    records_each: u32,
) -> Vec<Msg<PrepareHeader>> {
    let mut prepares: Vec<Msg<PrepareHeader>> = Vec::with_capacity(count as usize);
    let mut parent = parent;
    let mut offset = first_offset;
    for op in first_op..first_op + count {
        let prepare = produce(op, parent, offset, records_each, 100);
        parent = prepare.header().checksum();
        offset += u64::from(records_each);
        prepares.push(prepare);
    }
    prepares
}

/// The bytes of a segment file holding `prepares` as frames.
pub fn segment_bytes(prepares: &[Msg<PrepareHeader>]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for prepare in prepares {
        strand_wal::encode_frame_into(&prepare.to_bytes(), &mut bytes)
            .expect("fixture prepares fit a frame");
    }
    bytes
}
