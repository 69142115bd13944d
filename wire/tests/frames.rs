//! Frames: every command round-trips, every decode error path is reachable and
//! typed, no corruption goes unnoticed, and no input panics the decoder.

mod common;

use std::collections::BTreeSet;

use bytes::{Bytes, BytesMut};
use common::{message, prepare, reseal};
use proptest::prelude::*;
use strand_wire::*;

const MAX: u32 = FRAME_SIZE_MAX_DEFAULT;

fn encode(message: &Message) -> Vec<u8> {
    let mut out = BytesMut::new();
    message.encode_into(&mut out);
    out.to_vec()
}

fn ping() -> Message {
    let mut header = PingHeader::new(7, 0, ViewId::new(0, 3), 1);
    header.node.set(9);
    Message::from(Msg::new(header, Bytes::new()))
}

fn commit(commit: u64, op: u64) -> Vec<u8> {
    let mut header = CommitHeader::new(7, 5, ViewId::new(0, 3), 1);
    header.commit.set(0);
    header.op.set(op);
    let mut frame = encode(&Message::from(Msg::new(header, Bytes::new())));
    frame[72..80].copy_from_slice(&commit.to_le_bytes());
    reseal(&mut frame);
    frame
}

fn sample_prepare() -> Vec<u8> {
    let mut header = PrepareHeader::new(7, 5, ViewId::new(0, 3), 1);
    header.op.set(10);
    header.commit.set(9);
    header.operation = Operation::Produce as u8;
    header.record_count.set(2);
    encode(&Message::from(Msg::new(
        header,
        Bytes::from_static(b"two records, say"),
    )))
}

fn decode(frame: Vec<u8>) -> Result<Message, FrameError> {
    Message::decode(Bytes::from(frame), MAX)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_command_round_trips(message in message()) {
        let decoded = decode(encode(&message)).expect("a sealed frame decodes");
        prop_assert_eq!(decoded, message);
    }

    #[test]
    fn stream_decoder_reassembles_frames_split_anywhere(
        messages in proptest::collection::vec(message(), 1..8),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..16),
    ) {
        let stream: Vec<u8> = messages.iter().flat_map(encode).collect();
        let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut.index(stream.len())).collect();
        cuts.push(stream.len());
        cuts.sort_unstable();
        let decoder = FrameDecoder::default();
        let mut buffer = BytesMut::new();
        let mut decoded = Vec::new();
        let mut start = 0;
        for cut in cuts {
            buffer.extend_from_slice(&stream[start..cut]);
            start = cut;
            while let Some(message) = decoder.decode(&mut buffer).expect("valid stream") {
                decoded.push(message);
            }
        }
        prop_assert!(buffer.is_empty());
        prop_assert_eq!(decoded, messages);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = Message::decode(Bytes::from(bytes.clone()), MAX);
        let mut buffer = BytesMut::from(&bytes[..]);
        let _ = FrameDecoder::new(1024).decode(&mut buffer);
    }

    #[test]
    fn resealed_random_headers_never_panic(
        message in message(),
        edits in proptest::collection::vec((4..HEADER_SIZE, any::<u8>()), 1..8),
    ) {
        let mut frame = encode(&message);
        for (index, value) in edits {
            frame[index] = value;
        }
        reseal(&mut frame);
        if let Ok(decoded) = decode(frame.clone()) {
            // Whatever still decodes is valid and re-encodes to the same bytes.
            prop_assert_eq!(encode(&decoded), frame);
        }
    }

    #[test]
    fn prepare_checksum_is_its_identity(a in prepare(), b in prepare()) {
        if a != b {
            prop_assert_ne!(a.checksum(), b.checksum());
        }
        prop_assert_eq!(a.checksum(), a.header().checksum());
    }
}

#[test]
fn flipping_any_byte_of_a_frame_is_always_an_error() {
    let frames = [sample_prepare(), encode(&ping()), commit(3, 9)];
    for frame in frames {
        for index in 0..frame.len() {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut corrupt = frame.clone();
                corrupt[index] ^= mask;
                let result = decode(corrupt);
                assert!(
                    result.is_err(),
                    "flipping byte {index} by {mask:#x} went unnoticed"
                );
            }
        }
    }
}

#[test]
fn truncated_frames_are_reported_and_streamed_frames_wait() {
    let frame = sample_prepare();
    for length in 0..frame.len() {
        let error = decode(frame[..length].to_vec()).expect_err("truncated");
        assert!(
            matches!(error, FrameError::Truncated { .. }),
            "length {length}: {error:?}"
        );
        let mut buffer = BytesMut::from(&frame[..length]);
        assert_eq!(FrameDecoder::default().decode(&mut buffer), Ok(None));
    }
}

#[test]
fn trailing_bytes_after_a_whole_frame_are_bad_size() {
    let mut frame = encode(&ping());
    frame.push(0);
    assert!(matches!(decode(frame), Err(FrameError::BadSize { .. })));
}

#[test]
fn header_checksum_mismatch() {
    let mut frame = encode(&ping());
    frame[40] ^= 1;
    assert!(matches!(
        decode(frame),
        Err(FrameError::HeaderChecksum { .. })
    ));
}

#[test]
fn body_checksum_mismatch() {
    let mut frame = sample_prepare();
    let last = frame.len() - 1;
    frame[last] ^= 1;
    assert!(matches!(
        decode(frame),
        Err(FrameError::BodyChecksum { .. })
    ));
}

#[test]
fn unsupported_protocol_version() {
    let mut frame = encode(&ping());
    frame[34..36].copy_from_slice(&(PROTOCOL_VERSION + 1).to_le_bytes());
    reseal(&mut frame);
    assert_eq!(
        decode(frame),
        Err(FrameError::UnsupportedProtocol {
            version: PROTOCOL_VERSION + 1,
            supported: PROTOCOL_VERSION
        })
    );
}

#[test]
fn unknown_command() {
    for command in [0u8, 19, 255] {
        let mut frame = encode(&ping());
        frame[32] = command;
        reseal(&mut frame);
        assert_eq!(decode(frame), Err(FrameError::UnknownCommand { command }));
    }
}

#[test]
fn size_smaller_than_a_header() {
    let mut frame = encode(&ping());
    frame[16..20].copy_from_slice(&100u32.to_le_bytes());
    reseal(&mut frame);
    assert!(matches!(
        decode(frame),
        Err(FrameError::BadSize { size: 100, .. })
    ));
}

#[test]
fn frame_too_large_is_refused_before_its_body_arrives() {
    let mut frame = encode(&ping());
    frame[16..20].copy_from_slice(&(64 * 1024 * 1024u32).to_le_bytes());
    reseal(&mut frame);
    let mut buffer = BytesMut::from(&frame[..]);
    assert_eq!(
        FrameDecoder::default().decode(&mut buffer),
        Err(FrameError::TooLarge {
            size: 64 * 1024 * 1024,
            max: MAX
        })
    );
    let small = sample_prepare();
    let limit = small.len() as u32 - 1;
    assert!(matches!(
        Message::decode(Bytes::from(small), limit),
        Err(FrameError::TooLarge { .. })
    ));
}

#[test]
fn unknown_do_view_change_flag_bits() {
    let mut header = DoViewChangeHeader::new(7, 5, ViewId::new(0, 4), 2);
    header.log_view.set(3);
    let mut frame = encode(&Message::from(Msg::new(header, Bytes::new())));
    frame[156] = 0x80 | FLAG_UNTRUSTED_LOG;
    reseal(&mut frame);
    assert!(matches!(
        decode(frame),
        Err(FrameError::UnknownFlags {
            command: Command::DoViewChange,
            field: "flags",
            bits: 0x80
        })
    ));
}

#[test]
fn history_start_record_offsets_ride_in_reserved_bytes_whose_zeros_read_as_unknown() {
    let mut header = DoViewChangeHeader::new(7, 5, ViewId::new(0, 4), 2);
    header.log_view.set(3);
    assert_eq!(
        header.history_start_offset_end(),
        None,
        "zeros: not recorded"
    );
    for offset_end in [Some(0), Some(1_234), None] {
        header.set_history_start_offset_end(offset_end);
        let frame = encode(&Message::from(Msg::new(header, Bytes::new())));
        let Ok(Message::DoViewChange(message)) = decode(frame) else {
            panic!("a valid do-view-change");
        };
        assert_eq!(message.header().history_start_offset_end(), offset_end);
    }
    header.set_history_start_offset_end(Some(7));
    let frame = encode(&Message::from(Msg::new(header, Bytes::new())));
    assert_eq!(
        frame[165..173],
        8u64.to_le_bytes(),
        "bytes 165..173, plus one"
    );

    let frame = start_view_frame(&mut [own_start()], |_| {});
    let Ok(Message::StartView(message)) = decode(frame) else {
        panic!("a valid start-view");
    };
    assert_eq!(message.header().start_offset_end(), None);
    let frame = start_view_frame(&mut [own_start()], |header| {
        header.set_start_offset_end(Some(0));
    });
    let Ok(Message::StartView(message)) = decode(frame) else {
        panic!("a valid start-view");
    };
    assert_eq!(message.header().start_offset_end(), Some(0));
}

#[test]
fn history_start_head_checksums_ride_in_reserved_bytes_whose_zeros_read_as_unknown() {
    let mut header = DoViewChangeHeader::new(7, 5, ViewId::new(0, 4), 2);
    header.log_view.set(3);
    assert_eq!(header.history_start_checksum(), None, "zeros: not recorded");
    for checksum in [Some(0), Some(u32::MAX), None] {
        header.set_history_start_checksum(checksum);
        let frame = encode(&Message::from(Msg::new(header, Bytes::new())));
        let Ok(Message::DoViewChange(message)) = decode(frame) else {
            panic!("a valid do-view-change");
        };
        assert_eq!(message.header().history_start_checksum(), checksum);
    }
    header.set_history_start_checksum(Some(9));
    let mut frame = encode(&Message::from(Msg::new(header, Bytes::new())));
    assert_eq!(
        frame[173..181],
        10u64.to_le_bytes(),
        "bytes 173..181, plus one"
    );
    // An encoding no sender writes is refused, not truncated.
    frame[173..181].copy_from_slice(&(u64::from(u32::MAX) + 2).to_le_bytes());
    reseal(&mut frame);
    assert!(decode(frame).is_err(), "a checksum past u32 is refused");

    let frame = start_view_frame(&mut [own_start()], |_| {});
    let Ok(Message::StartView(message)) = decode(frame) else {
        panic!("a valid start-view");
    };
    assert_eq!(message.header().start_checksum(), None);
    let frame = start_view_frame(&mut [own_start()], |header| {
        header.set_start_checksum(Some(0xdead_beef));
    });
    let Ok(Message::StartView(message)) = decode(frame) else {
        panic!("a valid start-view");
    };
    assert_eq!(message.header().start_checksum(), Some(0xdead_beef));
}

/// A StartView of view 0.4 by replica 1 with `starts` after its (empty)
/// suffix, each of them as `edit` leaves it.
fn start_view_frame(
    starts: &mut [HistoryStartRecord],
    edit: impl Fn(&mut StartViewHeader),
) -> Vec<u8> {
    let mut header = StartViewHeader::new(7, 5, ViewId::new(0, 4), 1);
    header.cursor_tail.set(9);
    header.history_start_count = starts.len() as u8;
    edit(&mut header);
    let body = zerocopy::IntoBytes::as_bytes(&*starts).to_vec();
    // Sealed by hand: `Msg::new` refuses to build an invalid frame.
    header.seal(&[&body]);
    let mut frame = zerocopy::IntoBytes::as_bytes(&header).to_vec();
    frame.extend_from_slice(&body);
    frame
}

fn own_start() -> HistoryStartRecord {
    let mut start = HistoryStartRecord::default();
    start.set_view_id(ViewId::new(0, 4));
    start.cursor_tail.set(9);
    start.replica = 1;
    start
}

#[test]
fn start_view_history_starts_round_trip() {
    let mut earlier = HistoryStartRecord::default();
    earlier.set_view_id(ViewId::new(0, 2));
    earlier.cursor_tail.set(3);
    earlier.flags = HistoryStartFlags::ACCEPTED_LOSS.bits();
    let mut starts = [earlier, own_start()];
    let frame = start_view_frame(&mut starts, |_| {});
    let Ok(Message::StartView(message)) = decode(frame) else {
        panic!("a valid start-view");
    };
    let (headers, decoded) = message.header().parts(message.body()).expect("parts");
    assert!(headers.is_empty());
    assert_eq!(decoded, &starts[..]);
    assert!(
        decoded[0]
            .flags()
            .contains(HistoryStartFlags::ACCEPTED_LOSS)
    );
}

#[test]
fn start_view_history_starts_are_checked() {
    let invalid = |frame: Vec<u8>, expected: &str| match decode(frame) {
        Err(FrameError::Invalid { reason, .. }) => assert_eq!(reason, expected),
        other => panic!("{expected}: {other:?}"),
    };
    invalid(
        start_view_frame(&mut [], |_| {}),
        "start-view without its history start",
    );
    let mut earlier = own_start();
    earlier.set_view_id(ViewId::new(0, 3));
    invalid(
        start_view_frame(&mut [earlier], |_| {}),
        "start-view without its own start",
    );
    invalid(
        start_view_frame(&mut [own_start(), own_start()], |_| {}),
        "history starts do not ascend by view",
    );
    let mut later = own_start();
    later.set_view_id(ViewId::new(0, 5));
    invalid(
        start_view_frame(&mut [own_start(), later], |_| {}),
        "history start after the view",
    );
    invalid(
        start_view_frame(&mut [own_start()], |header| header.cursor_tail.set(8)),
        "the view's start differs from the header's",
    );
    invalid(
        start_view_frame(&mut [own_start()], |header| header.history_start_count = 2),
        "body shorter than its history starts",
    );
    invalid(
        start_view_frame(&mut [own_start()], |header| header.history_start_count = 17),
        "too many history starts",
    );
    let mut reserved = own_start();
    reserved.reserved[5] = 1;
    invalid(
        start_view_frame(&mut [reserved], |_| {}),
        "history start reserved bytes not zero",
    );
    let mut flagged = own_start();
    flagged.flags = 0x80;
    assert!(matches!(
        decode(start_view_frame(&mut [flagged], |_| {})),
        Err(FrameError::UnknownFlags {
            command: Command::StartView,
            field: "history start flags",
            bits: 0x80
        })
    ));
}

#[test]
fn reserved_bytes_not_zero() {
    // In the shared prefix, in the command's trailing reserved bytes, and in
    // the DoViewChange's inner reserved run.
    for index in [40usize, 200, 255] {
        let mut frame = encode(&ping());
        frame[index] = 1;
        reseal(&mut frame);
        assert!(
            matches!(decode(frame), Err(FrameError::ReservedNotZero { .. })),
            "byte {index}"
        );
    }
    let mut header = DoViewChangeHeader::new(7, 5, ViewId::new(0, 4), 2);
    header.log_view.set(3);
    let mut frame = encode(&Message::from(Msg::new(header, Bytes::new())));
    frame[150] = 1;
    reseal(&mut frame);
    assert!(matches!(decode(frame), Err(FrameError::Invalid { .. })));
}

#[test]
fn field_invariants_broken() {
    assert!(matches!(
        decode(commit(10, 9)),
        Err(FrameError::Invalid {
            command: Command::Commit,
            reason: "commit > op"
        })
    ));
    let mut header = DoViewChangeHeader::new(7, 5, ViewId::new(0, 4), 2);
    header.log_view.set(3);
    let mut frame = encode(&Message::from(Msg::new(header, Bytes::new())));
    frame[152..156].copy_from_slice(&9u32.to_le_bytes());
    reseal(&mut frame);
    assert!(matches!(
        decode(frame),
        Err(FrameError::Invalid {
            command: Command::DoViewChange,
            reason: "log_view >= view"
        })
    ));
    // A log settled in a later epoch than the view is refused however low
    // its view number, and an earlier epoch's is fine however high.
    let mut header = DoViewChangeHeader::new(7, 5, ViewId::new(2, 4), 2);
    header.set_log_view_id(ViewId::new(1, 1));
    let mut frame = encode(&Message::from(Msg::new(header, Bytes::new())));
    frame[157..161].copy_from_slice(&3u32.to_le_bytes()); // log_view_epoch
    reseal(&mut frame);
    assert!(matches!(
        decode(frame),
        Err(FrameError::Invalid {
            command: Command::DoViewChange,
            reason: "log_view >= view"
        })
    ));
    let mut header = DoViewChangeHeader::new(7, 5, ViewId::new(2, 4), 2);
    header.set_log_view_id(ViewId::new(1, 90));
    let frame = encode(&Message::from(Msg::new(header, Bytes::new())));
    assert!(decode(frame).is_ok());
    let mut frame = sample_prepare();
    frame[80..88].copy_from_slice(&10u64.to_le_bytes());
    reseal(&mut frame);
    assert!(matches!(
        decode(frame),
        Err(FrameError::Invalid {
            reason: "commit >= op",
            ..
        })
    ));
    let mut frame = encode(&ping());
    frame[33] = REPLICAS_MAX;
    reseal(&mut frame);
    assert!(matches!(decode(frame), Err(FrameError::Invalid { .. })));
}

#[test]
fn do_view_change_bitsets_must_describe_carried_headers() {
    let mut header = DoViewChangeHeader::new(7, 5, ViewId::new(0, 4), 2);
    header.log_view.set(3);
    header.op.set(0);
    let mut frame = encode(&Message::from(Msg::new(header, Bytes::new())));
    frame[104..120].copy_from_slice(&1u128.to_le_bytes());
    reseal(&mut frame);
    assert!(matches!(
        decode(frame),
        Err(FrameError::Invalid {
            reason: "bitset bit beyond the headers carried",
            ..
        })
    ));
}

#[test]
fn embedded_headers_are_checked() {
    let mut inner = PrepareHeader::new(7, 5, ViewId::new(0, 3), 1);
    inner.op.set(4);
    inner.commit.set(3);
    inner.operation = Operation::Produce as u8;
    inner.seal(&[b"x"]);
    let mut header = StartViewHeader::new(7, 5, ViewId::new(0, 4), 1);
    header.op.set(4);
    header.cursor_tail.set(9);
    header.history_start_count = 1;
    let mut body = zerocopy::IntoBytes::as_bytes(&inner).to_vec();
    body.extend_from_slice(zerocopy::IntoBytes::as_bytes(&own_start()));
    let good = encode(&Message::from(Msg::new(header, Bytes::from(body))));
    assert!(decode(good.clone()).is_ok());
    // Corrupt the embedded header, then fix up the outer body checksum so only
    // the inner header is wrong.
    let mut forged = good;
    forged[HEADER_SIZE + 100] ^= 1;
    let body_checksum = strand_wire::checksum::checksum(&forged[HEADER_SIZE..]);
    forged[4..8].copy_from_slice(&body_checksum.to_le_bytes());
    reseal(&mut forged);
    assert!(matches!(
        decode(forged),
        Err(FrameError::Invalid {
            reason: "embedded prepare header is invalid",
            ..
        })
    ));
}

#[test]
fn garbage_stream_is_an_error_not_a_hang() {
    let mut buffer = BytesMut::from(&[0xabu8; 1024][..]);
    assert!(FrameDecoder::default().decode(&mut buffer).is_err());
}

#[test]
fn every_command_is_covered_by_the_round_trip_strategy() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen = BTreeSet::new();
    for _ in 0..2_000 {
        let message = message().new_tree(&mut runner).expect("tree").current();
        seen.insert(message.command());
    }
    assert_eq!(seen, Command::ALL.into_iter().collect());
}

/// Writes one valid frame of every command into `$STRAND_FUZZ_CORPUS` (the
/// fuzzer's seed corpus): `cargo test -p strand-wire --test frames -- --ignored`.
#[test]
#[ignore = "writes the fuzz seed corpus when asked"]
fn write_fuzz_seed_corpus() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let Ok(directory) = std::env::var("STRAND_FUZZ_CORPUS") else {
        return;
    };
    std::fs::create_dir_all(&directory).expect("corpus directory");
    let mut runner = TestRunner::deterministic();
    for index in 0..200 {
        let message = message().new_tree(&mut runner).expect("tree").current();
        let path = format!("{directory}/seed-{index:03}-{:?}", message.command());
        std::fs::write(path, encode(&message)).expect("write seed");
    }
}

#[test]
fn view_ids_order_epoch_first() {
    assert!(ViewId::new(1, 0) > ViewId::new(0, u32::MAX));
    assert!(ViewId::new(1, 5) < ViewId::new(1, 6));
    assert_eq!(ViewId::new(3, 7).next(), ViewId::new(3, 8));
    assert!(ViewId::new(1, 0).packed() > ViewId::new(0, u32::MAX).packed());
    assert_eq!(
        ViewId::new(0, 9).packed(),
        9,
        "epoch 0 packs as the bare view"
    );
    assert_eq!(ViewId::new(2, 3).to_string(), "2.3");
    let mut header = CommitHeader::new(7, 5, ViewId::new(4, 11), 1);
    assert_eq!(header.prefix.view_id(), ViewId::new(4, 11));
    header.prefix.set_view_id(ViewId::new(5, 0));
    assert_eq!(
        (header.prefix.epoch.get(), header.prefix.view.get()),
        (5, 0)
    );
}

#[test]
fn a_reconfigure_prepare_names_the_next_membership_and_nothing_else_may() {
    let mut header = PrepareHeader::new(7, 5, ViewId::new(2, 3), 1);
    header.op.set(10);
    header.commit.set(9);
    header.membership_epoch.set(2);
    header.set_next_membership(3, 0b1011, ConfirmPolicy::MajorityDurable);
    let frame = encode(&Message::from(Msg::new(header, Bytes::new())));
    let Ok(Message::Prepare(decoded)) = decode(frame.clone()) else {
        panic!("a valid reconfigure is refused");
    };
    assert_eq!(
        decoded.header().next_membership(),
        Some((3, 0b1011, ConfirmPolicy::MajorityDurable))
    );
    let refused = |offset: usize, bytes: &[u8], reason: &str| {
        let mut frame = frame.clone();
        frame[offset..offset + bytes.len()].copy_from_slice(bytes);
        reseal(&mut frame);
        match decode(frame) {
            Err(FrameError::Invalid { reason: got, .. }) => assert_eq!(got, reason),
            other => panic!("{reason}: {other:?}"),
        }
    };
    // Fields after `operation` (128): membership_epoch 129, next_epoch 133,
    // next_slots 137, next_confirm 139.
    refused(
        133,
        &5u32.to_le_bytes(),
        "reconfigure does not move to the next epoch",
    );
    refused(137, &0u16.to_le_bytes(), "reconfigure to no members");
    refused(139, &[9, 9], "reconfigure to an unknown confirm policy");
    refused(
        128,
        &[Operation::Produce as u8],
        "next membership outside a reconfigure",
    );
    // A client may not carry one.
    refused(84, &1u128.to_le_bytes(), "reconfigure from a client");
    assert_eq!(
        PrepareHeader::new(7, 5, ViewId::ZERO, 1).next_membership(),
        None
    );
}

#[test]
fn a_prepare_sealed_over_a_requests_body_is_the_prepare_sealed_over_the_bytes() {
    let body = Bytes::from_static(b"a batch the request carried");
    let mut request = RequestHeader::new(7, 5, ViewId::new(0, 3), 0);
    request.operation = Operation::Produce as u8;
    request.client.set(11);
    request.request.set(1);
    let request = Msg::new(request, body.clone());
    let mut header = PrepareHeader::new(7, 5, ViewId::new(0, 3), 1);
    header.op.set(10);
    header.commit.set(9);
    header.operation = Operation::Produce as u8;
    header.record_count.set(2);
    let reused = Msg::with_body_of(header, request);
    let computed = Msg::new(header, body);
    assert_eq!(reused, computed);
    let frame = encode(&Message::from(reused));
    assert!(decode(frame).is_ok(), "the carried checksum is the body's");
}
