//! Repairs in place: a rewrite of a damaged op must be the op the log's
//! neighbours say belongs there.

mod common;

use std::path::Path;

use common::*;
use strand_partition::fixtures::{prepare_with_body, produce};
use strand_partition::layout::fence_request_path;
use strand_partition::{MemoryDisk, Partition, PartitionError, REWRITE_DOES_NOT_FIT};
use strand_wal::FRAME_HEADER_BYTES;
use strand_wire::{Msg, PrepareHeader};

/// A damaged op whose header the open could not read (its checksum is
/// unknown) is offered another op 3: the same size, chaining to op 2, its
/// records where op 3's were, but other records, so op 4 does not chain to
/// it (another history's op 3). Written, it would leave a log whose chain
/// breaks at op 4; it is refused, and the copy is marked to be fenced and
/// rebuilt. The op 3 that belongs there is written.
/// A partition of six ops whose op 3 has a damaged header (its checksum
/// unknown at open), and the prepares written.
fn with_op_3_header_damaged(seed: u64) -> (Partition<MemoryDisk>, Vec<Msg<PrepareHeader>>) {
    let (mut partition, _) = open_memory(MemoryDisk::new(seed), small_config());
    let written = append_durable(&mut partition, 6, 1, 50);
    let location = partition.entry_location(3).expect("readable");
    let mut disk = partition.close().expect("close");
    let in_header = location.position + FRAME_HEADER_BYTES as u64 + 20;
    disk.storage_mut()
        .flip_bit(&location.path, in_header, 0)
        .expect("flip");
    let (partition, recovery) = open_memory(disk, small_config());
    assert_eq!(recovery.faulty, vec![3]);
    assert!(
        !recovery.headers.iter().any(|header| header.op.get() == 3),
        "op 3's header is unreadable"
    );
    (partition, written)
}

#[test]
fn a_rewrite_that_the_next_op_does_not_chain_to_fences_the_copy() {
    let (mut partition, written) = with_op_3_header_damaged(9);
    let original = written[2].header();
    let other_records = produce(4, 0, original.offset_base.get(), 1, 50)
        .body()
        .clone();
    let other = prepare_with_body(
        3,
        original.parent.get(),
        original.offset_base.get(),
        1,
        other_records,
    );
    assert_eq!(other.frame_size(), written[2].frame_size());
    assert_ne!(other.checksum(), written[2].checksum());
    let refused = partition.write_prepare(other);
    assert!(
        matches!(
            refused,
            Err(PartitionError::RewriteMismatch { op: 3, reason }) if reason == REWRITE_DOES_NOT_FIT
        ),
        "{refused:?}"
    );
    assert!(
        partition
            .disk()
            .storage()
            .contents(&fence_request_path(Path::new(MEMORY_DIR)))
            .is_some(),
        "the copy is fenced at its next open"
    );

    let (mut partition, written) = with_op_3_header_damaged(10);
    let accepted = partition
        .write_prepare(written[2].clone())
        .expect("the op that belongs there");
    assert_eq!(accepted.op, 3);
    assert!(partition.faulty().is_empty());
}
