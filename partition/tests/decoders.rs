//! Every decoder of on-disk data, over arbitrary and damaged bytes: none may
//! panic, none may read past damage as if it were whole, and valid values
//! round-trip. The same checks the fuzz targets (`partition/fuzz/`) run for
//! hours, run here for a few seconds in every test build.

use proptest::prelude::*;
use strand_partition::fixtures::{chain_from, produce, segment_bytes};
use strand_partition::fuzzing::{self, CursorLogPrefix};
use strand_partition::index::{IndexDamage, IndexEntry};
use strand_partition::superblock::{HISTORY_STARTS_MAX, SealedSegment, Superblock};
use strand_partition::transfer::{CHUNK_DATA_BYTES_MAX, ManifestFile, ManifestFileKind};
use strand_partition::{HistoryStart, Manifest};
use strand_wire::{ConfirmPolicy, Durability, ViewId};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Runs every decoder over `bytes` as they are.
fn decode_everything(bytes: &[u8], copy: u8, chunk: u32) {
    fuzzing::check_superblock_payload(bytes);
    fuzzing::check_superblock_file(bytes, copy);
    fuzzing::check_manifest(bytes);
    fuzzing::check_chunk(chunk, bytes);
    let _ = fuzzing::check_index(bytes);
    fuzzing::check_cursor_log(bytes);
    fuzzing::check_cursor_frame(bytes);
    fuzzing::check_cursor_snapshot(bytes);
    fuzzing::check_segment(bytes);
    fuzzing::check_durable_mark(bytes);
    fuzzing::check_rewrite_intents(bytes);
}

/// Runs every decoder over `data` given valid checksums where its format
/// has them, so the checks behind them see arbitrary fields.
fn decode_everything_sealed(data: &[u8], copy: u8) {
    let sealed = fuzzing::seal_crc(data);
    fuzzing::check_superblock_payload(&sealed);
    fuzzing::check_superblock_file(&fuzzing::frame(&sealed), copy);
    fuzzing::check_manifest(&sealed);
    if data.len() >= 24 {
        let index = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        let file = u32::from_le_bytes([data[4], data[5], data[6], data[7]]);
        let offset = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes"));
        let chunk = fuzzing::encode_chunk(index, file, offset, &data[24..]);
        assert!(fuzzing::check_chunk(index, &chunk).is_some());
    }
    let framed = fuzzing::frames_from(data);
    let _ = fuzzing::check_index(&framed);
    fuzzing::check_cursor_log(&framed);
    fuzzing::check_cursor_snapshot(&framed);
    fuzzing::check_segment(&framed);
    fuzzing::check_durable_mark(&framed);
    fuzzing::check_durable_mark(&fuzzing::marks_from(data));
    fuzzing::check_rewrite_intents(&framed);
    fuzzing::check_rewrite_intents(&fuzzing::intents_from(data));
}

fn arb_view() -> impl Strategy<Value = ViewId> {
    (0u32..4, any::<u32>()).prop_map(|(epoch, view)| ViewId::new(epoch, view))
}

fn arb_history_starts() -> impl Strategy<Value = Vec<HistoryStart>> {
    let start = (
        arb_view(),
        any::<u64>(),
        any::<u64>(),
        0u8..16,
        any::<bool>(),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u32>()),
    )
        .prop_map(
            |(view, op, cursor_tail, replica, accepted_loss, offset_end, checksum)| HistoryStart {
                view,
                op,
                cursor_tail,
                replica,
                accepted_loss,
                offset_end,
                checksum,
            },
        );
    prop::collection::vec(start, 0..=HISTORY_STARTS_MAX).prop_map(|mut starts| {
        starts.sort_by_key(|start| start.view);
        starts.dedup_by_key(|start| start.view);
        starts
    })
}

fn arb_policies() -> impl Strategy<Value = (Durability, ConfirmPolicy)> {
    let durability = prop_oneof![Just(Durability::Persisted), Just(Durability::Replicated)];
    let confirm = prop_oneof![
        Just(ConfirmPolicy::MajorityDurable),
        Just(ConfirmPolicy::LocalDurable),
        (1u8..=5).prop_map(ConfirmPolicy::Count),
    ];
    (durability, confirm)
}

fn arb_sealed_segments() -> impl Strategy<Value = Vec<SealedSegment>> {
    prop::collection::vec((1u64..1000, 0u64..1000, 1u64..5000, any::<u64>()), 0..6).prop_map(
        |steps| {
            let (mut first_op, mut first_offset) = (0u64, 0u64);
            let mut segments = Vec::new();
            for (op_step, ops, offset_step, len_bytes) in steps {
                first_op += op_step;
                first_offset += offset_step;
                let last_op = if ops == 0 { 0 } else { first_op + ops };
                segments.push(SealedSegment {
                    first_op,
                    last_op,
                    first_offset,
                    len_bytes,
                });
            }
            segments
        },
    )
}

prop_compose! {
    fn arb_superblock()(
        (replica, sequence, (durability, confirm)) in (0u8..16, any::<u64>(), arb_policies()),
        (view, below) in (arb_view(), any::<bool>()),
        history_starts in arb_history_starts(),
        (headers_from, header_count) in (1u64..1 << 40, 0u64..4),
        words in prop::array::uniform8(any::<u64>()),
        flags in prop::array::uniform4(any::<bool>()),
        (retired_epoch, head_parent_checksum) in (any::<u32>(), any::<u32>()),
        sealed_segments in arb_sealed_segments(),
        client_table in prop::collection::vec(any::<u8>(), 0..64),
    ) -> Superblock {
        let mut superblock = Superblock::fresh(replica, durability, confirm);
        superblock.sequence = sequence;
        superblock.durable.view = view;
        superblock.durable.log_view = if below { ViewId::new(0, 0) } else { view };
        superblock.durable.commit = words[0];
        superblock.durable.history_starts = history_starts;
        superblock.durable.view_headers = chain_from(headers_from, 0, 0, header_count, 1)
            .iter()
            .map(|prepare| *prepare.header())
            .collect();
        superblock.durable.maybe_acked_op = words[1];
        superblock.durable.log_unsettled = flags[0];
        superblock.durable.client_table = client_table.into();
        superblock.clean_shutdown = flags[1];
        superblock.stopped_in_view = flags[2];
        superblock.clean_boot = words[2];
        superblock.awaiting_state_transfer = flags[3];
        superblock.retired_epoch = retired_epoch;
        superblock.op_checkpoint = words[3];
        superblock.cursor_checkpoint = words[4];
        superblock.head_op = words[5].max(1);
        superblock.head_offset = words[6];
        superblock.head_parent_checksum = head_parent_checksum;
        superblock.sealed_segments = sealed_segments;
        superblock
    }
}

/// Files that tile the chunks after the manifest, cut at `step` bytes.
fn tile_files(
    step: u32,
    files: Vec<(u8, u64, [u64; 3], u32)>,
    client_table: Option<u64>,
) -> Vec<ManifestFile> {
    let mut next_chunk = 1u32;
    let mut tiled = Vec::new();
    let kinds = files.into_iter().map(|(kind, len_bytes, words, checksum)| {
        let kind = if kind % 2 == 0 {
            ManifestFileKind::CursorSnapshot
        } else {
            ManifestFileKind::Segment {
                first_offset: words[0],
                first_op: words[1],
                last_op: words[2],
                last_checksum: checksum,
            }
        };
        (kind, len_bytes)
    });
    let table = client_table.map(|len| (ManifestFileKind::ClientTable, len));
    for (kind, len_bytes) in kinds.chain(table) {
        let chunk_count = len_bytes.div_ceil(u64::from(step)) as u32;
        tiled.push(ManifestFile {
            kind,
            len_bytes,
            first_chunk: next_chunk,
            chunk_count,
        });
        next_chunk += chunk_count;
    }
    tiled
}

prop_compose! {
    fn arb_manifest()(
        (frontier_op, with_header) in (1u64..1 << 40, any::<bool>()),
        (view, commit, history_starts) in (arb_view(), any::<u64>(), arb_history_starts()),
        (durability, confirm) in arb_policies(),
        words in prop::array::uniform3(any::<u64>()),
        head_parent_checksum in any::<u32>(),
        step in prop_oneof![1u32..64, Just(CHUNK_DATA_BYTES_MAX as u32)],
        files in prop::collection::vec(
            (any::<u8>(), 0u64..4096, prop::array::uniform3(any::<u64>()), any::<u32>()),
            0..5,
        ),
        client_table in prop::option::of(0u64..1 << 16),
    ) -> Manifest {
        let durable = strand_partition::DurableFields {
            view,
            log_view: view,
            commit,
            history_starts,
            ..Default::default()
        };
        let files = tile_files(step, files, client_table);
        let chunk_count = files.last().map_or(1, |file| file.first_chunk + file.chunk_count);
        Manifest {
            frontier_op,
            frontier_offset: words[0],
            frontier_header: with_header
                .then(|| *produce(frontier_op, 0, 0, 1, 1).header()),
            durable,
            durability,
            confirm,
            head_op: if with_header { words[1].max(1) } else { frontier_op + 1 },
            head_offset: words[2],
            head_parent_checksum,
            cursor_tail: commit,
            chunk_data_bytes_max: step,
            chunk_count,
            files,
        }
    }
}

fn arb_cursor_log() -> impl Strategy<Value = CursorLogPrefix> {
    let event = ("[a-z][a-z0-9._-]{0,12}", any::<u64>());
    let frames = prop::collection::vec(prop::collection::vec(event, 1..4), 0..6);
    (0u64..1 << 50, frames).prop_map(|(first, frames)| {
        let mut prefix = CursorLogPrefix {
            frames: Vec::new(),
            events: Vec::new(),
            valid_len: 0,
        };
        let mut sequence = first;
        for events in frames {
            prefix.frames.push((sequence, events.len() as u32));
            for (consumer, offset) in events {
                prefix.events.push((sequence, consumer, offset));
                sequence += 1;
            }
        }
        prefix
    })
}

fn arb_index() -> impl Strategy<Value = Vec<IndexEntry>> {
    let entry = prop::array::uniform4(any::<u64>()).prop_map(|words| IndexEntry {
        op: words[0],
        offset: words[1],
        position: words[2],
        timestamp_ns: words[3],
    });
    prop::collection::vec(entry, 0..8)
}

fn flipped(bytes: &[u8], at: prop::sample::Index, xor: u8) -> Vec<u8> {
    let mut damaged = bytes.to_vec();
    let at = at.index(damaged.len());
    damaged[at] ^= xor;
    damaged
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bytes_never_panic_a_decoder(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        copy in 0u8..2,
        chunk in any::<u32>(),
    ) {
        decode_everything(&bytes, copy, chunk);
    }

    #[test]
    fn bytes_with_valid_checksums_never_panic_a_decoder(
        data in prop::collection::vec(any::<u8>(), 0..600),
        copy in 0u8..2,
    ) {
        decode_everything_sealed(&data, copy);
    }
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn superblocks_round_trip(superblock in arb_superblock()) {
        let payload = superblock.encode();
        prop_assert_eq!(fuzzing::check_superblock_payload(&payload), Some(superblock.clone()));
        let file = strand_partition::superblock::encode_file(&superblock);
        let read = fuzzing::check_superblock_file(&file, superblock.copy());
        prop_assert_eq!(read, Some(superblock.clone()));
        prop_assert_eq!(fuzzing::check_superblock_file(&file, 1 - superblock.copy()), None);
    }

    #[test]
    fn a_damaged_superblock_is_refused(
        superblock in arb_superblock(),
        at in any::<prop::sample::Index>(),
        xor in 1u8..,
        cut in any::<prop::sample::Index>(),
    ) {
        let file = strand_partition::superblock::encode_file(&superblock);
        let copy = superblock.copy();
        prop_assert_eq!(fuzzing::check_superblock_file(&flipped(&file, at, xor), copy), None);
        prop_assert_eq!(fuzzing::check_superblock_file(&file[..cut.index(file.len())], copy), None);
        let payload = superblock.encode();
        prop_assert_eq!(fuzzing::check_superblock_payload(&flipped(&payload, at, xor)), None);
        prop_assert_eq!(fuzzing::check_superblock_payload(&payload[..cut.index(payload.len())]), None);
    }

    #[test]
    fn manifests_round_trip(manifest in arb_manifest()) {
        prop_assert_eq!(fuzzing::check_manifest(&manifest.encode()), Some(manifest));
    }

    #[test]
    fn a_damaged_manifest_is_refused(
        manifest in arb_manifest(),
        at in any::<prop::sample::Index>(),
        xor in 1u8..,
        cut in any::<prop::sample::Index>(),
    ) {
        let body = manifest.encode();
        prop_assert_eq!(fuzzing::check_manifest(&flipped(&body, at, xor)), None);
        prop_assert_eq!(fuzzing::check_manifest(&body[..cut.index(body.len())]), None);
    }

    #[test]
    fn chunks_round_trip_and_damaged_ones_are_refused(
        (index, file, file_offset) in (any::<u32>(), any::<u32>(), any::<u64>()),
        data in prop::collection::vec(any::<u8>(), 0..256),
        at in any::<prop::sample::Index>(),
        xor in 1u8..,
        cut in any::<prop::sample::Index>(),
    ) {
        let body = fuzzing::encode_chunk(index, file, file_offset, &data);
        prop_assert_eq!(fuzzing::check_chunk(index, &body), Some((file, file_offset, data)));
        prop_assert_eq!(fuzzing::check_chunk(index.wrapping_add(1), &body), None);
        prop_assert_eq!(fuzzing::check_chunk(index, &flipped(&body, at, xor)), None);
        prop_assert_eq!(fuzzing::check_chunk(index, &body[..cut.index(body.len())]), None);
    }

    #[test]
    fn index_files_round_trip(entries in arb_index()) {
        let bytes = fuzzing::encode_index(&entries);
        prop_assert_eq!(fuzzing::check_index(&bytes), Ok(entries));
    }

    #[test]
    fn a_damaged_index_is_refused_and_a_cut_one_keeps_only_whole_entries(
        entries in arb_index().prop_filter("some entries", |entries| !entries.is_empty()),
        at in any::<prop::sample::Index>(),
        xor in 1u8..,
        cut in any::<prop::sample::Index>(),
    ) {
        let bytes = fuzzing::encode_index(&entries);
        let damaged = fuzzing::check_index(&flipped(&bytes, at, xor));
        prop_assert!(
            matches!(damaged, Err(IndexDamage::Corrupt { .. } | IndexDamage::Torn)),
            "{:?}", damaged
        );
        let cut = cut.index(bytes.len());
        let frame = strand_partition::index::INDEX_FRAME_BYTES as usize;
        let expected = if cut % frame == 0 {
            Ok(entries[..cut / frame].to_vec())
        } else {
            Err(IndexDamage::Torn)
        };
        prop_assert_eq!(fuzzing::check_index(&bytes[..cut]), expected);
    }

    #[test]
    fn cursor_logs_round_trip(log in arb_cursor_log()) {
        let bytes = fuzzing::encode_cursor_log(&log);
        let decoded = fuzzing::check_cursor_log(&bytes);
        prop_assert_eq!(decoded, CursorLogPrefix { valid_len: bytes.len() as u64, ..log });
    }

    #[test]
    fn a_damaged_cursor_log_keeps_the_frames_before_the_damage(
        log in arb_cursor_log().prop_filter("some frames", |log| !log.frames.is_empty()),
        at in any::<prop::sample::Index>(),
        xor in 1u8..,
        cut in any::<prop::sample::Index>(),
    ) {
        let bytes = fuzzing::encode_cursor_log(&log);
        let ends = frame_ends(&log);
        let at = at.index(bytes.len());
        let mut damaged = bytes.clone();
        damaged[at] ^= xor;
        let kept = ends.iter().filter(|&&end| end <= at as u64).count();
        prop_assert_eq!(fuzzing::check_cursor_log(&damaged), log_prefix(&log, &ends, kept));
        let cut = cut.index(bytes.len());
        let kept = ends.iter().filter(|&&end| end <= cut as u64).count();
        prop_assert_eq!(fuzzing::check_cursor_log(&bytes[..cut]), log_prefix(&log, &ends, kept));
    }

    #[test]
    fn cursor_snapshots_round_trip_and_damaged_ones_are_refused(
        covers in any::<u64>(),
        map in prop::collection::btree_map("[a-z][a-z0-9._-]{0,12}", any::<u64>(), 0..6),
        at in any::<prop::sample::Index>(),
        xor in 1u8..,
        cut in any::<prop::sample::Index>(),
    ) {
        let bytes = fuzzing::encode_cursor_snapshot(covers, &map);
        prop_assert_eq!(fuzzing::check_cursor_snapshot(&bytes), Some((covers, map)));
        prop_assert_eq!(fuzzing::check_cursor_snapshot(&flipped(&bytes, at, xor)), None);
        prop_assert_eq!(fuzzing::check_cursor_snapshot(&bytes[..cut.index(bytes.len())]), None);
    }
}

/// Where each frame of an encoded cursor log ends.
fn frame_ends(log: &CursorLogPrefix) -> Vec<u64> {
    let mut ends = Vec::new();
    let mut events = 0;
    for (index, &(_, count)) in log.frames.iter().enumerate() {
        events += count as usize;
        let prefix = CursorLogPrefix {
            frames: log.frames[..=index].to_vec(),
            events: log.events[..events].to_vec(),
            valid_len: 0,
        };
        ends.push(fuzzing::encode_cursor_log(&prefix).len() as u64);
    }
    ends
}

/// The first `kept` frames of `log`.
fn log_prefix(log: &CursorLogPrefix, ends: &[u64], kept: usize) -> CursorLogPrefix {
    let events: usize = log.frames[..kept]
        .iter()
        .map(|&(_, count)| count as usize)
        .sum();
    CursorLogPrefix {
        frames: log.frames[..kept].to_vec(),
        events: log.events[..events].to_vec(),
        valid_len: if kept == 0 { 0 } else { ends[kept - 1] },
    }
}

/// A segment of `count` chained prepares and where each entry sits.
fn segment(count: u64, records_each: u32) -> (Vec<u8>, Vec<(u64, u64, u64)>) {
    let prepares = chain_from(1, 0, 0, count, records_each);
    let bytes = segment_bytes(&prepares);
    let mut entries = Vec::new();
    let mut position = 0;
    for prepare in &prepares {
        let frame_len = (strand_wal::FRAME_HEADER_BYTES + prepare.frame_size()) as u64;
        entries.push((position, prepare.header().op.get(), frame_len));
        position += frame_len;
    }
    (bytes, entries)
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn a_whole_segment_scans_as_its_entries(count in 0u64..6, records_each in 1u32..4) {
        let (bytes, entries) = segment(count, records_each);
        let found = fuzzing::check_segment(&bytes);
        prop_assert_eq!(found.entries, entries);
        prop_assert!(found.faults.is_empty());
        prop_assert_eq!(found.torn_from, None);
    }

    #[test]
    fn a_flipped_byte_in_a_segment_loses_exactly_its_entry(
        count in 1u64..6,
        records_each in 1u32..4,
        at in any::<prop::sample::Index>(),
        xor in 1u8..,
    ) {
        let (bytes, entries) = segment(count, records_each);
        let at = at.index(bytes.len()) as u64;
        let mut damaged = bytes.clone();
        damaged[at as usize] ^= xor;
        let found = fuzzing::check_segment(&damaged);
        let hit = entries
            .iter()
            .position(|&(position, _, len)| position <= at && at < position + len)
            .expect("every byte belongs to an entry");
        let mut expected = entries.clone();
        let (start, _, len) = expected.remove(hit);
        prop_assert_eq!(found.entries, expected);
        if hit + 1 == entries.len() {
            prop_assert_eq!(found.torn_from, Some(start));
            prop_assert!(found.faults.is_empty());
        } else {
            prop_assert_eq!(found.faults, vec![(start, start + len)]);
            prop_assert_eq!(found.torn_from, None);
        }
    }

    #[test]
    fn a_cut_segment_keeps_its_whole_entries_and_a_torn_tail(
        count in 1u64..6,
        records_each in 1u32..4,
        cut in any::<prop::sample::Index>(),
    ) {
        let (bytes, entries) = segment(count, records_each);
        let cut = cut.index(bytes.len()) as u64;
        let found = fuzzing::check_segment(&bytes[..cut as usize]);
        let whole: Vec<_> = entries
            .iter()
            .copied()
            .filter(|&(position, _, len)| position + len <= cut)
            .collect();
        let boundary = whole.last().map_or(0, |&(position, _, len)| position + len);
        prop_assert_eq!(found.entries, whole);
        prop_assert!(found.faults.is_empty());
        prop_assert_eq!(found.torn_from, (boundary < cut).then_some(boundary));
    }
}

/// Found by the `cursors` fuzz target: a frame whose events are numbered
/// from `u64::MAX`, so its end overflows; the log refuses it as damage.
#[test]
fn a_cursor_frame_numbered_past_the_last_sequence_is_refused() {
    let crash: &[u8] = &[
        0xc3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00,
        0x00, 0x00, 0x04, 0x00, 0x49, 0x5f, 0x49, 0x49, 0x49, 0x49, 0x49, 0x49, 0x49, 0x49, 0x49,
        0xfa,
    ];
    let log = fuzzing::frames_from(crash);
    assert_eq!(fuzzing::check_cursor_log(&log).frames, Vec::new());
    let payload = &log[strand_wal::FRAME_HEADER_BYTES..];
    assert_eq!(fuzzing::check_cursor_frame(payload), None);
    let mut at_the_end = payload.to_vec();
    at_the_end[..8].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
    assert_eq!(
        fuzzing::check_cursor_frame(&at_the_end),
        Some((u64::MAX - 1, 1, 1))
    );
}

/// Found by reading the manifest's checks: an empty export at the last op
/// there is names a head op past it; refused, never an overflow.
#[test]
fn a_manifest_without_a_frontier_header_at_the_last_op_is_refused() {
    let manifest = Manifest {
        frontier_op: u64::MAX,
        frontier_offset: 0,
        frontier_header: None,
        durable: strand_partition::DurableFields::default(),
        durability: Durability::Persisted,
        confirm: ConfirmPolicy::MajorityDurable,
        head_op: 1,
        head_offset: 0,
        head_parent_checksum: 0,
        cursor_tail: 0,
        chunk_data_bytes_max: 64,
        chunk_count: 1,
        files: Vec::new(),
    };
    assert_eq!(fuzzing::check_manifest(&manifest.encode()), None);
}
