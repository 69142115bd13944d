//! The superblock's own tests: the body round trip, the choice between
//! the two copies, old layouts read.

use super::*;

fn sample() -> Superblock {
    let mut superblock = Superblock::fresh(2, Durability::Replicated, ConfirmPolicy::Count(2));
    superblock.sequence = 7;
    superblock.durable = DurableFields {
        view: ViewId::new(2, 9),
        log_view: ViewId::new(2, 8),
        commit: 1234,
        history_starts: vec![
            HistoryStart {
                view: ViewId::new(1, 3),
                op: 100,
                cursor_tail: 5,
                replica: 0,
                accepted_loss: false,
                offset_end: Some(300),
                checksum: Some(0x5eed_0001),
            },
            HistoryStart {
                view: ViewId::new(2, 8),
                op: 1200,
                cursor_tail: 44,
                replica: 2,
                accepted_loss: true,
                offset_end: None,
                checksum: None,
            },
        ],
        view_headers: crate::fixtures::chain_from(1230, 0, 0, 3, 2)
            .iter()
            .map(|prepare| *prepare.header())
            .collect(),
        maybe_acked_op: 1233,
        log_unsettled: true,
        client_table: Bytes::from_static(b"a client table"),
    };
    superblock.clean_shutdown = true;
    superblock.stopped_in_view = true;
    superblock.retired_epoch = 3;
    superblock.op_checkpoint = 1300;
    superblock.sealed_segments = vec![SealedSegment {
        first_op: 1,
        last_op: 40,
        first_offset: 0,
        len_bytes: 4096,
    }];
    superblock
}

#[test]
fn encodes_and_decodes_every_field() {
    let superblock = sample();
    assert_eq!(Superblock::decode(&superblock.encode()), Ok(superblock));
}

/// The payload a version 2 superblock (views without epochs) had.
fn encode_version_2(superblock: &Superblock) -> Vec<u8> {
    let mut writer = BodyWriter::default();
    writer.u32(MAGIC);
    writer.u16(VERSION_WITHOUT_EPOCHS);
    writer.u64(superblock.sequence);
    writer.u32(superblock.durable.view.view);
    writer.u32(superblock.durable.log_view.view);
    writer.u64(superblock.durable.commit);
    writer.u8(superblock.replica);
    writer.u8(superblock.durability as u8);
    let confirm = superblock.confirm.to_bytes();
    writer.u8(confirm[0]);
    writer.u8(confirm[1]);
    writer.u8(superblock.flags());
    writer.u64(superblock.op_checkpoint);
    writer.u64(superblock.cursor_checkpoint);
    writer.u64(superblock.head_op);
    writer.u64(superblock.head_offset);
    writer.u32(superblock.head_parent_checksum);
    writer.list(&superblock.durable.history_starts, |writer, start| {
        writer.u32(start.view.view);
        writer.u64(start.op);
        writer.u64(start.cursor_tail);
        writer.u8(start.replica);
        writer.bool(start.accepted_loss);
    });
    writer.list(&superblock.sealed_segments, |writer, segment| {
        writer.u64(segment.first_op);
        writer.u64(segment.first_offset);
        writer.u64(segment.len_bytes);
    });
    writer.bytes(superblock.durable.view_headers.as_bytes());
    writer.u64(superblock.durable.maybe_acked_op);
    let mut bytes = writer.into_vec();
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

#[test]
fn a_version_2_superblock_reads_as_epoch_0_and_a_member() {
    let mut expected = sample();
    expected.retired_epoch = 0;
    for segment in &mut expected.sealed_segments {
        segment.last_op = 0;
    }
    expected.durable.view.epoch = 0;
    expected.durable.log_view.epoch = 0;
    expected.durable.client_table = Bytes::new();
    for start in &mut expected.durable.history_starts {
        start.view.epoch = 0;
        start.offset_end = None;
        start.checksum = None;
    }
    let decoded = Superblock::decode(&encode_version_2(&sample()));
    assert_eq!(decoded, Ok(expected));
}

#[test]
fn a_version_7_superblock_reads_with_its_starts_record_offsets_unknown() {
    let mut expected = sample();
    let decoded = Superblock::decode(&expected.encode_as(VERSION_WITHOUT_START_OFFSETS));
    for start in &mut expected.durable.history_starts {
        start.offset_end = None;
        start.checksum = None;
    }
    assert_eq!(decoded, Ok(expected));
}

#[test]
fn a_version_8_superblock_reads_with_its_starts_head_checksums_unknown() {
    let mut expected = sample();
    let decoded = Superblock::decode(&expected.encode_as(VERSION_WITHOUT_START_CHECKSUMS));
    for start in &mut expected.durable.history_starts {
        start.checksum = None;
    }
    assert_eq!(decoded, Ok(expected));
}

#[test]
fn views_order_epoch_first_in_the_checks() {
    // A later epoch's view is higher whatever its number.
    let mut superblock = sample();
    superblock.durable.view = ViewId::new(3, 1);
    superblock.durable.log_view = ViewId::new(2, 8);
    assert!(Superblock::decode(&superblock.encode()).is_ok());
    superblock.durable.view = ViewId::new(1, 50);
    let refused = std::panic::catch_unwind(|| superblock.encode());
    assert!(refused.is_err(), "log_view above view must not be written");
}

#[test]
fn a_copy_is_padded_to_whole_steps_so_a_view_change_keeps_its_length() {
    let before = sample();
    let frame_len = encode_file(&before).len();
    assert_eq!(frame_len % FRAME_BYTES_STEP, 0);
    // What a view change adds: a new view, a history start, more view
    // headers; the next write goes to the other copy.
    let mut after = before.clone();
    after.sequence += 1;
    after.durable.view = ViewId::new(2, 10);
    after.durable.log_view = ViewId::new(2, 10);
    after.durable.history_starts.push(HistoryStart {
        view: ViewId::new(2, 10),
        op: 1240,
        cursor_tail: 50,
        replica: 1,
        accepted_loss: false,
        offset_end: Some(2480),
        checksum: Some(7),
    });
    after.durable.view_headers = crate::fixtures::chain_from(1230, 0, 0, 10, 2)
        .iter()
        .map(|prepare| *prepare.header())
        .collect();
    assert_eq!(
        encode_file(&after).len(),
        frame_len,
        "rewritten in place, no truncate"
    );
    assert_eq!(Superblock::decode(&after.encode()), Ok(after));
}

#[test]
fn padding_that_is_not_zeros_is_refused() {
    let mut bytes = sample().encode();
    let body_len = bytes.len() - 4;
    bytes[body_len - 1] = 1; // the last padding byte
    let crc = crc32c::crc32c(&bytes[..body_len]);
    bytes[body_len..].copy_from_slice(&crc.to_le_bytes());
    assert!(Superblock::decode(&bytes).is_err());
}

#[test]
fn every_flipped_byte_and_every_truncation_is_refused() {
    let bytes = sample().encode();
    for index in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[index] ^= 0x10;
        assert!(Superblock::decode(&damaged).is_err(), "flip at {index}");
    }
    for len in 0..bytes.len() {
        assert!(Superblock::decode(&bytes[..len]).is_err(), "cut at {len}");
    }
}

#[test]
fn the_highest_valid_sequence_wins() {
    let dir = Path::new("/p");
    let mut older = sample();
    older.sequence = 6;
    let newer = sample();
    let chosen = choose(
        dir,
        [
            CopyRead::Valid(older.clone()),
            CopyRead::Valid(newer.clone()),
        ],
    );
    assert_eq!(chosen, Ok(Some(newer)));
    let chosen = choose(
        dir,
        [
            CopyRead::Valid(older.clone()),
            CopyRead::Invalid("torn".into()),
        ],
    );
    assert_eq!(chosen, Ok(Some(older)));
    assert_eq!(choose(dir, [CopyRead::Absent, CopyRead::Absent]), Ok(None));
    assert!(matches!(
        choose(dir, [CopyRead::Invalid("a".into()), CopyRead::Absent]),
        Err(PartitionError::SuperblockUnreadable { .. })
    ));
}
