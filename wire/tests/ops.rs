//! Operation bodies and record batches: every one round-trips, and no
//! truncated or random body panics the decoder.

use bytes::Bytes;
use proptest::prelude::*;
use strand_wire::ops::*;
use strand_wire::*;

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_-][a-zA-Z0-9._-]{0,20}"
}

fn confirm() -> impl Strategy<Value = ConfirmPolicy> {
    prop_oneof![
        Just(ConfirmPolicy::MajorityDurable),
        Just(ConfirmPolicy::LocalDurable),
        (1..=u8::MAX).prop_map(ConfirmPolicy::Count),
    ]
}

fn durability() -> impl Strategy<Value = Durability> {
    prop_oneof![Just(Durability::Persisted), Just(Durability::Replicated)]
}

fn node() -> impl Strategy<Value = NodeInfo> {
    (any::<u32>(), ".{0,20}", ".{0,20}", any::<bool>()).prop_map(
        |(id, replica_address, client_address, reachable)| NodeInfo {
            id,
            replica_address,
            client_address,
            reachable,
        },
    )
}

fn group_status() -> impl Strategy<Value = GroupStatus> {
    (
        (
            any::<u64>(),
            ".{0,10}",
            ".{0,10}",
            any::<u32>(),
            any::<u32>(),
            confirm(),
            durability(),
        ),
        (
            any::<u8>(),
            any::<u8>(),
            any::<u8>(),
            any::<u32>(),
            any::<u32>(),
            "[a-z_]{0,24}",
        ),
        (any::<u8>(), any::<u64>(), any::<u64>(), any::<bool>()),
        (any::<u64>(), any::<u64>()),
        proptest::collection::vec(
            (any::<u8>(), any::<u32>(), any::<u64>(), any::<bool>()),
            0..6,
        ),
    )
        .prop_map(|(a, b, c, offsets, replicas)| GroupStatus {
            group: a.0,
            stream: a.1,
            topic: a.2,
            partition: a.3,
            epoch: a.4,
            confirm: a.5,
            durability: a.6,
            write_quorum: b.0,
            view_change_quorum: b.1,
            replica: b.2,
            view: b.3,
            log_view: b.4,
            status: b.5,
            primary: c.0,
            op: c.1,
            commit_op: c.2,
            log_start_offset: offsets.0,
            high_watermark: offsets.1,
            untrusted_log: c.3,
            replicas: replicas
                .into_iter()
                .map(|(replica, node, op, caught_up)| ReplicaStatus {
                    replica,
                    node,
                    op,
                    caught_up,
                })
                .collect(),
        })
}

/// `(slot, node)` members: 1 to 15 distinct slots below 16, ascending.
fn attention_start() -> impl Strategy<Value = AttentionStart> {
    (
        any::<u32>(),
        any::<u64>(),
        proptest::option::of(any::<u64>()),
        any::<u8>(),
        proptest::option::of(any::<u32>()),
    )
        .prop_map(|(view, op, offset_end, replica, node)| AttentionStart {
            view,
            op,
            offset_end,
            replica,
            node,
        })
}

fn members() -> impl Strategy<Value = Vec<(u8, u32)>> {
    proptest::collection::btree_map(0..REPLICAS_MAX, any::<u32>(), 1..REPLICAS_MAX as usize)
        .prop_map(|members| members.into_iter().collect())
}

fn reassigned() -> impl Strategy<Value = Reassigned> {
    (
        (
            1..u64::MAX,
            1..u32::MAX,
            any::<bool>(),
            members(),
            confirm(),
        ),
        (members(), confirm()),
        (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()),
        proptest::collection::vec(any::<u32>(), 0..5),
        proptest::collection::vec(any::<u32>(), 0..5),
    )
        .prop_map(|(new, old, quorums, joining, leaving)| {
            let (group, epoch, in_place, members, confirm) = new;
            let (previous_members, previous_confirm) = old;
            // Any quorum from 1 to the member count.
            let fit = |quorum: u8, count: usize| quorum % count as u8 + 1;
            Reassigned {
                group,
                epoch,
                in_place,
                write_quorum: fit(quorums.0, members.len()),
                view_change_quorum: fit(quorums.1, members.len()),
                members,
                confirm,
                previous_epoch: epoch - 1,
                previous_write_quorum: fit(quorums.2, previous_members.len()),
                previous_view_change_quorum: fit(quorums.3, previous_members.len()),
                previous_members,
                previous_confirm,
                joining,
                leaving,
            }
        })
}

fn batch() -> impl Strategy<Value = RecordBatch> {
    proptest::collection::vec(
        (
            0..u64::MAX / 2,
            proptest::collection::vec(any::<u8>(), 0..16),
            proptest::collection::vec(any::<u8>(), 0..256),
            proptest::collection::vec(
                (".{0,8}", proptest::collection::vec(any::<u8>(), 0..8)),
                0..3,
            ),
        ),
        0..12,
    )
    .prop_map(|records| {
        let mut builder = BatchBuilder::default();
        for (timestamp, key, value, headers) in &records {
            let headers: Vec<(&str, &[u8])> = headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_slice()))
                .collect();
            builder.push(*timestamp, key, value, &headers);
        }
        builder.finish()
    })
}

fn round_trip<T: Body + PartialEq + std::fmt::Debug>(value: &T) -> Result<(), TestCaseError> {
    let bytes = value.to_vec();
    prop_assert_eq!(&T::from_bytes(&bytes).expect("decodes"), value);
    for length in 0..bytes.len() {
        prop_assert!(
            T::from_bytes(&bytes[..length]).is_err(),
            "prefix of {} bytes decoded",
            length
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    prop_assert!(T::from_bytes(&longer).is_err());
    Ok(())
}

/// Bytes of the list of history starts after an attention reply's entries.
fn attention_starts_len(reply: &AttentionReply) -> usize {
    let start = |entry: &AttentionEntry| match entry.history_start {
        Some(_) => 1 + 4 + 8 + 9 + 1 + 9,
        None => 1,
    };
    4 + reply.entries.iter().map(start).sum::<usize>()
}

/// [`round_trip`] for an attention reply, whose list of history starts is
/// optional: without it (a reply from a node before it), the entries
/// decode without starts; any other prefix is refused.
fn attention_round_trip(reply: &AttentionReply) -> Result<(), TestCaseError> {
    let bytes = reply.to_vec();
    prop_assert_eq!(&AttentionReply::from_bytes(&bytes).expect("decodes"), reply);
    let older = bytes.len() - attention_starts_len(reply);
    for length in 0..bytes.len() {
        let decoded = AttentionReply::from_bytes(&bytes[..length]);
        if length == older {
            let entries = reply
                .entries
                .iter()
                .map(|entry| AttentionEntry {
                    history_start: None,
                    ..entry.clone()
                })
                .collect();
            prop_assert_eq!(decoded, Ok(AttentionReply { entries }));
        } else {
            prop_assert!(decoded.is_err(), "prefix of {} bytes decoded", length);
        }
    }
    let mut longer = bytes.clone();
    longer.push(0);
    prop_assert!(AttentionReply::from_bytes(&longer).is_err());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn create_stream(name in name()) {
        round_trip(&CreateStream { name })?;
    }

    #[test]
    fn create_topic(
        stream in name(), topic in name(), partition_count in 1..=4096u32, replica_count in 1..REPLICAS_MAX,
        confirm in proptest::option::of(confirm()), durability in proptest::option::of(durability()),
        cursor in proptest::option::of(durability()),
        retention_bytes in any::<u64>(), retention_ms in any::<u64>(),
        segment_bytes in proptest::option::of(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX),
    ) {
        round_trip(&CreateTopic {
            stream, topic, partition_count, replica_count, confirm, durability,
            consumer_offset_durability: cursor, retention_bytes, retention_ms, segment_bytes,
        })?;
    }

    #[test]
    fn topic_created(groups in proptest::collection::vec(any::<u64>(), 0..20)) {
        round_trip(&TopicCreated { groups })?;
    }

    #[test]
    fn topic_lifecycle(
        stream in name(), topic in name(), partition_count in 1..=4096u32,
        retention_bytes in proptest::option::of(any::<u64>()),
        retention_ms in proptest::option::of(any::<u64>()),
        groups in proptest::collection::vec(any::<u64>(), 0..20),
    ) {
        round_trip(&DeleteTopic { stream: stream.clone(), topic: topic.clone() })?;
        round_trip(&DeleteStream { name: stream.clone() })?;
        round_trip(&TopicsDeleted { groups })?;
        round_trip(&AddPartitions { stream: stream.clone(), topic: topic.clone(), partition_count })?;
        let alter = AlterTopic { stream, topic, retention_bytes, retention_ms };
        if retention_bytes.is_some() || retention_ms.is_some() {
            round_trip(&alter)?;
        } else {
            prop_assert!(AlterTopic::from_bytes(&alter.to_vec()).is_err(), "an alter that changes nothing is refused");
        }
    }

    #[test]
    fn offset_for_time(timestamp_ns in any::<u64>(), offset in any::<u64>()) {
        round_trip(&OffsetForTime { timestamp_ns })?;
        round_trip(&OffsetForTimeReply { offset })?;
    }

    #[test]
    fn accept_loss(group in 1..u64::MAX, view in any::<u32>(), op in any::<u64>()) {
        round_trip(&AcceptLoss { group })?;
        round_trip(&AcceptLossReply { view, op })?;
    }

    #[test]
    fn reassignment(group in 1..u64::MAX, nodes in proptest::collection::vec(any::<u32>(), 1..15),
                    confirm in proptest::option::of(confirm()), reply in reassigned(),
                    epoch in 1..u32::MAX, node in any::<u32>(), force in any::<bool>(),
                    dry_run in any::<bool>()) {
        round_trip(&ReassignPartition { group, nodes, confirm, force, dry_run })?;
        round_trip(&reply)?;
        round_trip(&EpochStarted { group, epoch })?;
        round_trip(&DropReplica { group, node, force, dry_run })?;
    }

    #[test]
    fn produce_reply(offset_base in 0..u64::MAX / 2, record_count in any::<u32>()) {
        round_trip(&ProduceReply { offset_base, record_count })?;
    }

    #[test]
    fn fetch_request(offset in any::<u64>(), max_bytes in 1..u32::MAX, wait_ms in 0..=60_000u32) {
        round_trip(&FetchRequest { offset, max_bytes, wait_ms })?;
    }

    #[test]
    fn cursors(consumer in name(), offset in any::<u64>(), stored in proptest::option::of(any::<u64>()),
               events in proptest::collection::vec((name(), any::<u64>()), 0..10)) {
        round_trip(&StoreCursor { consumer: consumer.clone(), offset, fence: None })?;
        // The fence is optional at the end: the body without it is a prefix
        // of the body with it; any other cut of the fenced body is refused.
        let fenced = StoreCursor {
            consumer: consumer.clone(),
            offset,
            fence: Some(ConsumerGroupFence { member: u128::from(offset) + 1, generation: offset }),
        };
        let bytes = fenced.to_vec();
        prop_assert_eq!(&StoreCursor::from_bytes(&bytes).expect("decodes"), &fenced);
        let unfenced_len = StoreCursor { fence: None, ..fenced.clone() }.to_vec().len();
        for length in unfenced_len + 1..bytes.len() {
            prop_assert!(StoreCursor::from_bytes(&bytes[..length]).is_err());
        }
        round_trip(&DeleteCursor { consumer: consumer.clone() })?;
        let tombstone = CursorEvent::tombstone(consumer.clone());
        prop_assert!(tombstone.is_tombstone());
        prop_assert_eq!(tombstone.encoded_bytes(), CursorEvents { events: vec![tombstone.clone()] }.to_vec().len() - 4);
        round_trip(&GetCursor { consumer })?;
        round_trip(&GetCursorReply { offset: stored })?;
        let events = events.into_iter().map(|(consumer, offset)| CursorEvent { consumer, offset }).collect();
        round_trip(&CursorEvents { events })?;
    }

    #[test]
    fn cluster_status(node in any::<u32>(), nodes in proptest::collection::vec(node(), 0..5),
                      groups in proptest::collection::vec(group_status(), 0..5)) {
        round_trip(&GroupStatusRequest { group: u64::from(node) })?;
        round_trip(&GroupStatusReply { status: groups.first().cloned() })?;
        round_trip(&ClusterStatusReply { node, nodes, groups })?;
    }

    #[test]
    fn attention(entries in proptest::collection::vec(
        (any::<u64>(), ".{0,10}", ".{0,10}", any::<u32>(), any::<u32>(), 1..=7u8,
         proptest::collection::vec(any::<u8>(), 0..5), ".{0,40}",
         proptest::option::of(attention_start())), 0..5)) {
        let entries = entries.into_iter().map(|(group, stream, topic, partition, view, reason, awaited, detail, history_start)| {
            let reason = match reason {
                1 => AttentionReason::FewerTrustedThanQuorum,
                2 => AttentionReason::BelowHistoryStart,
                3 => AttentionReason::AwaitingStateTransfer,
                4 => AttentionReason::MissingPrepare,
                5 => AttentionReason::StorageFailed,
                6 => AttentionReason::DiskFull,
                _ => AttentionReason::GroupFailed,
            };
            AttentionEntry { group, stream, topic, partition, view, reason, awaited, detail, history_start }
        }).collect();
        attention_round_trip(&AttentionReply { entries })?;
    }

    #[test]
    fn metadata(stream in proptest::option::of(name()), topic in name(), with_topic in any::<bool>(),
                nodes in proptest::collection::vec(node(), 0..4),
                streams in proptest::collection::vec(name(), 0..4),
                topics in proptest::collection::vec(
                    (name(), name(), confirm(), durability(), durability(), any::<u64>(), any::<u64>(),
                     any::<u64>(),
                     proptest::collection::vec((any::<u32>(), any::<u64>(), any::<u32>(),
                        proptest::collection::vec(any::<u32>(), 0..5), any::<u32>()), 0..4)), 0..4)) {
        let topic = if with_topic && stream.is_some() { Some(topic) } else { None };
        round_trip(&MetadataRequest { stream, topic })?;
        let topics = topics.into_iter().map(|(stream, topic, confirm, durability, cursor, rb, rm, sb, partitions)| TopicInfo {
            stream, topic, confirm, durability, consumer_offset_durability: cursor,
            retention_bytes: rb, retention_ms: rm, segment_bytes: sb,
            partitions: partitions.into_iter().map(|(partition, group, epoch, replicas, view)|
                PartitionInfo { partition, group, epoch, replicas, view }).collect(),
        }).collect();
        round_trip(&MetadataReply {
            nodes,
            streams,
            topics,
            failover_ms: 700,
        })?;
    }

    #[test]
    fn error_bodies(view in any::<u32>(), replica in any::<u8>(), node in any::<u32>(), address in ".{0,30}",
                    a in any::<u64>(), b in any::<u64>(), c in any::<u64>(), message in ".{0,60}") {
        let bodies = [
            ErrorBody::NotPrimary { view, primary_replica: replica, primary_node: node, address },
            ErrorBody::Busy { retry_after_ms: view },
            ErrorBody::TooLarge { size: a, max: b },
            ErrorBody::OffsetOutOfRange { requested: a, log_start_offset: b, high_watermark: c },
            ErrorBody::OutOfOrder { expected: a },
            ErrorBody::message(ResultCode::UnknownTopic, message.clone()),
            ErrorBody::message(ResultCode::StorageError, message),
        ];
        for body in bodies {
            let bytes = body.to_vec();
            prop_assert_eq!(ErrorBody::from_bytes(body.code(), &bytes), Ok(body.clone()));
            for length in 0..bytes.len() {
                prop_assert!(ErrorBody::from_bytes(body.code(), &bytes[..length]).is_err());
            }
        }
    }

    #[test]
    fn record_batches(batch in batch(), base in 0..u64::MAX / 4) {
        let decoded = RecordBatch::from_bytes(batch.bytes().clone()).expect("valid");
        prop_assert_eq!(&decoded, &batch);
        let records: Vec<_> = decoded.records_from(base).collect();
        prop_assert_eq!(records.len() as u32, batch.record_count());
        for (index, record) in records.iter().enumerate() {
            prop_assert_eq!(record.offset, base + index as u64);
            prop_assert!(record.timestamp_us <= batch.header().max_timestamp_us.get());
        }
    }

    #[test]
    fn fetch_replies(batches in proptest::collection::vec(batch(), 0..4), start in 0..1000u64, slack in 0..10u64) {
        let mut next = start;
        let batches: Vec<RecordBatch> = batches.into_iter().map(|batch| {
            let mut bytes = batch.bytes().to_vec();
            bytes[..BATCH_HEADER_SIZE_FOR_TEST].copy_from_slice(
                zerocopy::IntoBytes::as_bytes(&batch.header().with_offset_base(next)));
            next += u64::from(batch.record_count());
            RecordBatch::from_bytes(Bytes::from(bytes)).expect("patched batch stays valid")
        }).collect();
        let reply = FetchReply { high_watermark: next + slack, log_start_offset: start, batches };
        let bytes = reply.to_vec();
        prop_assert_eq!(FetchReply::from_bytes(Bytes::from(bytes.clone())), Ok(reply));
        for length in 0..bytes.len() {
            let _ = FetchReply::from_bytes(Bytes::copy_from_slice(&bytes[..length]));
        }
    }

    #[test]
    fn random_bodies_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = CreateTopic::from_bytes(&bytes);
        let _ = ClusterStatusReply::from_bytes(&bytes);
        let _ = GroupStatusReply::from_bytes(&bytes);
        let _ = MetadataReply::from_bytes(&bytes);
        let _ = AttentionReply::from_bytes(&bytes);
        let _ = CursorEvents::from_bytes(&bytes);
        let _ = ReassignPartition::from_bytes(&bytes);
        let _ = Reassigned::from_bytes(&bytes);
        let _ = EpochStarted::from_bytes(&bytes);
        let _ = DropReplica::from_bytes(&bytes);
        let _ = strand_wire::ops::Authenticate::from_bytes(&bytes);
        let _ = strand_wire::ops::CreateToken::from_bytes(&bytes);
        let _ = strand_wire::ops::RevokeToken::from_bytes(&bytes);
        let _ = strand_wire::ops::UserList::from_bytes(&bytes);
        let _ = strand_wire::ops::CreateUser::from_bytes(&bytes);
        let _ = strand_wire::ops::ChangePermission::from_bytes(&bytes);
        let _ = FetchReply::from_bytes(Bytes::from(bytes.clone()));
        let _ = RecordBatch::from_bytes(Bytes::from(bytes.clone()));
        for code in ResultCode::ALL {
            let _ = ErrorBody::from_bytes(code, &bytes);
        }
    }
}

const BATCH_HEADER_SIZE_FOR_TEST: usize = strand_wire::batch::BATCH_HEADER_SIZE;

#[test]
fn fetch_reply_rejects_gaps_and_batches_past_the_high_watermark() {
    let mut builder = BatchBuilder::default();
    builder.push(1, b"k", b"v", &[]);
    let batch = builder.finish();
    let reply = FetchReply {
        high_watermark: 0,
        log_start_offset: 0,
        batches: vec![batch.clone()],
    };
    assert!(FetchReply::from_bytes(Bytes::from(reply.to_vec())).is_err());
    let reply = FetchReply {
        high_watermark: 5,
        log_start_offset: 0,
        batches: vec![batch.clone(), batch],
    };
    assert!(
        FetchReply::from_bytes(Bytes::from(reply.to_vec())).is_err(),
        "two batches at offset 0"
    );
}

#[test]
fn create_topic_rejects_out_of_range_fields() {
    let good = CreateTopic {
        stream: "s".into(),
        topic: "t".into(),
        partition_count: 3,
        replica_count: 3,
        confirm: Some(ConfirmPolicy::MajorityDurable),
        durability: Some(Durability::Persisted),
        consumer_offset_durability: None,
        retention_bytes: 0,
        retention_ms: 0,
        segment_bytes: None,
    };
    assert!(CreateTopic::from_bytes(&good.to_vec()).is_ok());
    let mut unknown_bit = good.to_vec();
    // Two one-byte names with u16 lengths, the partition and replica counts.
    let present_at = (2 + 1) * 2 + 4 + 1;
    assert_eq!(unknown_bit[present_at], 0b011, "the presence byte");
    unknown_bit[present_at] |= 0x80;
    assert!(
        CreateTopic::from_bytes(&unknown_bit).is_err(),
        "unknown presence bits are refused"
    );
    for bad in [
        CreateTopic {
            partition_count: 0,
            ..good.clone()
        },
        CreateTopic {
            partition_count: 5000,
            ..good.clone()
        },
        CreateTopic {
            replica_count: 0,
            ..good.clone()
        },
        CreateTopic {
            replica_count: REPLICAS_MAX,
            ..good.clone()
        },
        CreateTopic {
            topic: "bad/name".into(),
            ..good.clone()
        },
    ] {
        assert!(CreateTopic::from_bytes(&bad.to_vec()).is_err(), "{bad:?}");
    }
}

#[test]
fn create_topic_segment_bytes_must_be_in_range() {
    let with = |segment_bytes| CreateTopic {
        stream: "s".into(),
        topic: "t".into(),
        partition_count: 1,
        replica_count: 1,
        confirm: None,
        durability: None,
        consumer_offset_durability: None,
        retention_bytes: 0,
        retention_ms: 0,
        segment_bytes: Some(segment_bytes),
    };
    for good in [SEGMENT_BYTES_MIN, 1 << 20, SEGMENT_BYTES_MAX] {
        let request = with(good);
        assert_eq!(
            CreateTopic::from_bytes(&request.to_vec()),
            Ok(request),
            "{good}"
        );
    }
    for bad in [0, 1, SEGMENT_BYTES_MIN - 1, SEGMENT_BYTES_MAX + 1, u64::MAX] {
        assert_eq!(
            CreateTopic::from_bytes(&with(bad).to_vec()),
            Err(BodyError::Invalid {
                field: "segment bytes",
                reason: "not in 64 KiB..=1 GiB",
            }),
            "{bad}"
        );
    }
}

/// The CreateTopic layout from before segment sizes: presence bits 1, 2, 4
/// at most, and nothing after `retention_ms`.
fn create_topic_without_segment_bytes(present: u8) -> Vec<u8> {
    let mut writer = strand_wire::codec::BodyWriter::default();
    writer.str("s");
    writer.str("t");
    writer.u32(2);
    writer.u8(3);
    writer.u8(present);
    if present & 2 != 0 {
        writer.u8(Durability::Replicated as u8);
    }
    writer.u64(4096);
    writer.u64(60_000);
    writer.into_vec()
}

#[test]
fn create_topic_written_before_segment_bytes_still_decodes() {
    let old = create_topic_without_segment_bytes(2);
    assert_eq!(
        CreateTopic::from_bytes(&old),
        Ok(CreateTopic {
            stream: "s".into(),
            topic: "t".into(),
            partition_count: 2,
            replica_count: 3,
            confirm: None,
            durability: Some(Durability::Replicated),
            consumer_offset_durability: None,
            retention_bytes: 4096,
            retention_ms: 60_000,
            segment_bytes: None,
        })
    );
    // A request without a segment size is still written the old way.
    let decoded = CreateTopic::from_bytes(&old).expect("decodes");
    assert_eq!(decoded.to_vec(), old);
    // The bit set without the size after `retention_ms` is a truncated body.
    let bit_without_size = create_topic_without_segment_bytes(2 | 8);
    assert!(matches!(
        CreateTopic::from_bytes(&bit_without_size),
        Err(BodyError::Truncated {
            field: "segment bytes",
            ..
        })
    ));
}

/// A group's status with empty names, the given offsets and no replicas.
fn status_with_offsets(log_start_offset: u64, high_watermark: u64) -> GroupStatus {
    GroupStatus {
        group: 7,
        stream: String::new(),
        topic: String::new(),
        partition: 1,
        epoch: 2,
        confirm: ConfirmPolicy::MajorityDurable,
        durability: Durability::Persisted,
        write_quorum: 2,
        view_change_quorum: 2,
        replica: 0,
        view: 3,
        log_view: 3,
        status: String::new(),
        primary: 0,
        op: 40,
        commit_op: 39,
        log_start_offset,
        high_watermark,
        untrusted_log: false,
        replicas: Vec::new(),
    }
}

#[test]
fn group_status_carries_the_offsets_right_after_the_commit_number() {
    let status = status_with_offsets(1_000, 5_000);
    let bytes = status.to_vec();
    // group 8, stream 2, topic 2, partition 4, epoch 4, confirm 2,
    // durability, quorums, replica 4 x 1, view 4, log view 4, status 2,
    // primary 1, op 8: the commit number follows.
    let commit_at = 8 + 2 + 2 + 4 + 4 + 2 + 4 + 4 + 4 + 2 + 1 + 8;
    let word = |at: usize| {
        let mut array = [0u8; 8];
        array.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(array)
    };
    assert_eq!(word(commit_at), 39);
    assert_eq!(word(commit_at + 8), 1_000, "log start offset");
    assert_eq!(word(commit_at + 16), 5_000, "high watermark");
    assert_eq!(GroupStatus::from_bytes(&bytes), Ok(status));
    let reply = ClusterStatusReply {
        node: 1,
        nodes: Vec::new(),
        groups: vec![status_with_offsets(0, 0), status_with_offsets(12, u64::MAX)],
    };
    assert_eq!(ClusterStatusReply::from_bytes(&reply.to_vec()), Ok(reply));
}

/// An attention entry waiting below a history start, as a node that names
/// the start writes it.
fn below_start_entry() -> AttentionEntry {
    AttentionEntry {
        group: 9,
        stream: "s".to_owned(),
        topic: "t".to_owned(),
        partition: 0,
        view: 7,
        reason: AttentionReason::BelowHistoryStart,
        awaited: vec![1],
        detail: "waiting for nodes [2]".to_owned(),
        history_start: Some(AttentionStart {
            view: 5,
            op: 40,
            offset_end: Some(1_200),
            replica: 1,
            node: Some(2),
        }),
    }
}

#[test]
fn an_attention_entry_names_its_history_start_by_record_offset_and_node() {
    let reply = AttentionReply {
        entries: vec![below_start_entry()],
    };
    let decoded = AttentionReply::from_bytes(&reply.to_vec()).expect("decodes");
    let start = decoded.entries[0].history_start.expect("the start");
    assert_eq!((start.offset_end, start.node), (Some(1_200), Some(2)));
}

#[test]
fn an_attention_reply_from_before_history_starts_still_decodes() {
    let mut entry = below_start_entry();
    let reply = AttentionReply {
        entries: vec![entry.clone()],
    };
    // What a node from before wrote: the entries, nothing after them.
    let bytes = reply.to_vec();
    let older = &bytes[..bytes.len() - attention_starts_len(&reply)];
    entry.history_start = None;
    assert_eq!(
        AttentionReply::from_bytes(older),
        Ok(AttentionReply {
            entries: vec![entry]
        })
    );
    // A trailing list that is not one start per entry is refused.
    let mut short = older.to_vec();
    short.extend_from_slice(&0u32.to_le_bytes());
    assert!(AttentionReply::from_bytes(&short).is_err());
}
