//! The catalog's rules, op by op: placement at topic creation, and a
//! reassignment's life (planned, started, retired, dropped) with its refusals.

use super::*;
use strand_wire::CommandHeader;

fn header(op: u64, operation: Operation) -> PrepareHeader {
    let mut header = PrepareHeader::new(1, 0, strand_wire::ViewId::new(0, 0), 0);
    header.op.set(op);
    header.commit.set(op - 1);
    header.operation = operation as u8;
    header.client.set(1);
    header.request.set(op);
    header
}

fn topic(stream: &str, topic: &str, partitions: u32, replicas: u8) -> Bytes {
    Bytes::from(
        CreateTopic {
            stream: stream.into(),
            topic: topic.into(),
            partition_count: partitions,
            replica_count: replicas,
            confirm: Some(ConfirmPolicy::MajorityDurable),
            durability: Some(Durability::Persisted),
            consumer_offset_durability: None,
            retention_bytes: 0,
            retention_ms: 0,
            segment_bytes: None,
        }
        .to_vec(),
    )
}

/// A catalog over nodes 1..=3 with stream `s` created (op 1).
fn catalog_with_stream_s() -> Catalog {
    let mut catalog = Catalog::new(vec![1, 2, 3]);
    let stream = Bytes::from(CreateStream { name: "s".into() }.to_vec());
    assert_eq!(
        catalog
            .commit(&header(1, Operation::CreateStream), Some(&stream))
            .0,
        ResultCode::Ok
    );
    catalog
}

#[test]
fn topics_get_groups_placed_round_robin() {
    let mut catalog = catalog_with_stream_s();
    let stream = Bytes::from(CreateStream { name: "s".into() }.to_vec());
    assert_eq!(
        catalog
            .commit(&header(2, Operation::CreateStream), Some(&stream))
            .0,
        ResultCode::AlreadyExists
    );
    let (result, body) = catalog.commit(
        &header(3, Operation::CreateTopic),
        Some(&topic("s", "t", 3, 3)),
    );
    assert_eq!(result, ResultCode::Ok);
    assert_eq!(
        TopicCreated::from_bytes(&body).expect("reply").groups,
        vec![1, 2, 3]
    );
    assert_eq!(catalog.groups[&1].nodes(), vec![1, 2, 3]);
    assert_eq!(catalog.groups[&2].nodes(), vec![2, 3, 1]);
    assert_eq!(catalog.groups[&2].slot_of(1), Some(2), "dense slots 0..E");
    assert!(catalog.groups[&2].active && catalog.groups[&2].epoch == 0);
    assert_eq!(catalog.hosted_on(2).count(), 3);
    let (result, _) = catalog.commit(
        &header(4, Operation::CreateTopic),
        Some(&topic("nope", "t", 1, 1)),
    );
    assert_eq!(result, ResultCode::UnknownStream);
    let (result, _) = catalog.commit(
        &header(5, Operation::CreateTopic),
        Some(&topic("s", "u", 1, 4)),
    );
    assert_eq!(result, ResultCode::InvalidRequest);
}

#[test]
fn a_topics_assignments_carry_its_segment_size() {
    let mut catalog = catalog_with_stream_s();
    let sized = Bytes::from(
        CreateTopic {
            stream: "s".into(),
            topic: "small".into(),
            partition_count: 2,
            replica_count: 3,
            confirm: None,
            durability: None,
            consumer_offset_durability: None,
            retention_bytes: 1 << 20,
            retention_ms: 0,
            segment_bytes: Some(128 * 1024),
        }
        .to_vec(),
    );
    let (result, body) = catalog.commit(&header(2, Operation::CreateTopic), Some(&sized));
    assert_eq!(result, ResultCode::Ok);
    let groups = TopicCreated::from_bytes(&body).expect("reply").groups;
    assert_eq!(groups.len(), 2);
    for group in &groups {
        assert_eq!(catalog.groups[group].segment_bytes, 128 * 1024);
    }
    let info = catalog
        .topic_info("s", "small", &|_| 0)
        .expect("the topic exists");
    assert_eq!(info.segment_bytes, 128 * 1024);
    // Without a size, the node's default (0).
    let (result, body) = catalog.commit(
        &header(3, Operation::CreateTopic),
        Some(&topic("s", "default", 1, 3)),
    );
    assert_eq!(result, ResultCode::Ok);
    let group = TopicCreated::from_bytes(&body).expect("reply").groups[0];
    assert_eq!(catalog.groups[&group].segment_bytes, 0);
    let info = catalog
        .topic_info("s", "default", &|_| 0)
        .expect("the topic exists");
    assert_eq!(info.segment_bytes, 0);
}

#[test]
fn the_groups_a_node_prefers_fail_over_to_different_nodes() {
    for count in 1..=7_u32 {
        let nodes: Vec<u32> = (1..=count).collect();
        for replicas in 1..=count as usize {
            let mut preferred = std::collections::BTreeMap::new();
            let mut next = std::collections::BTreeMap::<(u32, u32), u32>::new();
            for group in 1..=u64::from(count) * 12 {
                let placed = placement(&nodes, group, replicas);
                let distinct: std::collections::BTreeSet<u32> = placed.iter().copied().collect();
                assert_eq!(distinct.len(), replicas, "{placed:?}: one node per slot");
                *preferred.entry(placed[0]).or_insert(0) += 1;
                if replicas > 1 {
                    *next.entry((placed[0], placed[1])).or_default() += 1;
                }
            }
            assert!(
                preferred.values().all(|groups| *groups == 12),
                "{count} nodes: preferred primaries spread evenly: {preferred:?}"
            );
            if replicas > 1 && count == 3 {
                // Node n's groups fail over half to each of the two others.
                for node in 1..=3 {
                    let to: Vec<u32> = (1..=3)
                        .filter(|other| *other != node)
                        .map(|other| next.get(&(node, other)).copied().unwrap_or(0))
                        .collect();
                    assert_eq!(to, [6, 6], "node {node}'s groups: {next:?}");
                }
            }
        }
    }
}

// ----- reassignment ------------------------------------------------------------

/// A catalog of nodes 1..=5 with stream `s` and topic `t`: one partition,
/// group 1, on nodes 1, 2, 3 in slots 0, 1, 2, majority confirms.
fn cluster_of_five() -> Catalog {
    let mut catalog = Catalog::new(vec![1, 2, 3, 4, 5]);
    let stream = Bytes::from(CreateStream { name: "s".into() }.to_vec());
    assert_eq!(
        apply(&mut catalog, Operation::CreateStream, stream).0,
        ResultCode::Ok
    );
    let created = apply(&mut catalog, Operation::CreateTopic, topic("s", "t", 1, 3));
    assert_eq!(created.0, ResultCode::Ok);
    assert_eq!(catalog.groups[&1].nodes(), [1, 2, 3]);
    catalog
}

/// Commits `body` as the next metadata op.
pub(crate) fn apply(
    catalog: &mut Catalog,
    operation: Operation,
    body: Bytes,
) -> (ResultCode, Bytes) {
    let op = catalog.applied_op + 1;
    catalog.commit(&header(op, operation), Some(&body))
}

/// The error a refused op answered with.
fn refusal(result: (ResultCode, Bytes)) -> (ResultCode, String) {
    let (code, body) = result;
    assert_ne!(code, ResultCode::Ok, "refused");
    match ErrorBody::from_bytes(code, &body).expect("an error body") {
        ErrorBody::Message { code, message } => (code, message),
        other => panic!("unexpected error body {other:?}"),
    }
}

fn reassign(
    catalog: &mut Catalog,
    group: u64,
    nodes: &[u32],
    confirm: Option<ConfirmPolicy>,
) -> (ResultCode, Bytes) {
    let request = ReassignPartition {
        group,
        nodes: nodes.to_vec(),
        confirm,
        force: false,
        dry_run: false,
    };
    apply(
        catalog,
        Operation::ReassignPartition,
        Bytes::from(request.to_vec()),
    )
}

fn reassigned_ok(result: (ResultCode, Bytes)) -> Reassigned {
    let (code, body) = result;
    assert_eq!(
        code,
        ResultCode::Ok,
        "{:?}",
        ErrorBody::from_bytes(code, &body)
    );
    Reassigned::from_bytes(&body).expect("a Reassigned reply")
}

fn epoch_started(catalog: &mut Catalog, group: u64, epoch: u32) -> ResultCode {
    let body = Bytes::from(EpochStarted { group, epoch }.to_vec());
    let (code, reply) = apply(catalog, Operation::EpochStarted, body);
    assert!(
        reply.is_empty() || code != ResultCode::Ok,
        "an empty Ok reply"
    );
    code
}

fn drop_replica(catalog: &mut Catalog, group: u64, node: u32) -> (ResultCode, Bytes) {
    let body = Bytes::from(
        DropReplica {
            group,
            node,
            force: false,
            dry_run: false,
        }
        .to_vec(),
    );
    apply(catalog, Operation::DropReplica, body)
}

/// Group 1 after node 2 was replaced by node 4 and epoch 1 started.
fn with_node_2_retired() -> Catalog {
    let mut catalog = cluster_of_five();
    reassigned_ok(reassign(&mut catalog, 1, &[1, 3, 4], None));
    assert_eq!(epoch_started(&mut catalog, 1, 1), ResultCode::Ok);
    assert_eq!(catalog.groups[&1].retired, [2]);
    catalog
}

#[test]
fn a_replacement_keeps_every_retained_slot() {
    let mut catalog = cluster_of_five();
    let reply = reassigned_ok(reassign(&mut catalog, 1, &[4, 1, 3], None));
    assert_eq!((reply.group, reply.previous_epoch, reply.epoch), (1, 0, 1));
    assert_eq!(reply.previous_members, [(0, 1), (1, 2), (2, 3)]);
    assert_eq!(
        reply.members,
        [(0, 1), (2, 3), (3, 4)],
        "4 takes slot 3, free in both"
    );
    assert!(!reply.in_place, "a member leaves: a view change");
    assert_eq!((reply.joining, reply.leaving), (vec![4], vec![2]));
    assert_eq!(
        (
            reply.previous_write_quorum,
            reply.previous_view_change_quorum
        ),
        (2, 2)
    );
    assert_eq!((reply.write_quorum, reply.view_change_quorum), (2, 2));
    assert_eq!(reply.confirm, ConfirmPolicy::MajorityDurable);
    let assignment = &catalog.groups[&1];
    assert_eq!(assignment.slots, [Some(1), None, Some(3), Some(4)]);
    assert_eq!(assignment.nodes(), [1, 3, 4]);
    assert_eq!(
        (assignment.slot_of(1), assignment.slot_of(3)),
        (Some(0), Some(2))
    );
    assert_eq!(assignment.slot_of(2), None);
    assert_eq!(assignment.epoch, 1);
    assert!(
        !assignment.active,
        "epoch 1 has not started in the partition"
    );
    let previous = assignment.previous.as_ref().expect("epoch 0 kept");
    assert_eq!(
        previous,
        &SlotAssignment::dense(0, &[1, 2, 3], ConfirmPolicy::MajorityDurable)
    );
    assert_eq!(assignment.membership().slots.bits(), 0b1101);
    for node in [1, 2, 3, 4] {
        assert_eq!(assignment.role_of(node), Some(Role::Member), "node {node}");
        assert_eq!(catalog.hosted_on(node).count(), 1, "node {node}");
    }
    assert_eq!(assignment.role_of(5), None);
    let info = catalog.topic_info("s", "t", &|_| 0).expect("topic");
    assert_eq!(
        (info.partitions[0].epoch, &info.partitions[0].replicas[..]),
        (1, &[1, 3, 4][..])
    );
}

#[test]
fn an_in_place_change_still_waits_for_its_epoch_to_start() {
    let mut catalog = cluster_of_five();
    let reply = reassigned_ok(reassign(
        &mut catalog,
        1,
        &[1, 2, 3, 5],
        Some(ConfirmPolicy::Count(2)),
    ));
    assert!(reply.in_place, "everyone stays and W stays 2");
    assert_eq!(reply.members, [(0, 1), (1, 2), (2, 3), (3, 5)]);
    assert_eq!((reply.write_quorum, reply.view_change_quorum), (2, 3));
    assert_eq!(reply.confirm, ConfirmPolicy::Count(2));
    assert!(!catalog.groups[&1].active);
    assert_eq!(epoch_started(&mut catalog, 1, 1), ResultCode::Ok);
    let assignment = &catalog.groups[&1];
    assert!(assignment.active && assignment.previous.is_none());
    assert!(assignment.retired.is_empty(), "nobody left");
}

#[test]
fn a_second_reassign_waits_for_the_first() {
    let mut catalog = cluster_of_five();
    reassigned_ok(reassign(&mut catalog, 1, &[1, 2, 3, 4], None));
    let before = catalog.groups.clone();
    let (code, message) = refusal(reassign(&mut catalog, 1, &[1, 2, 3, 4, 5], None));
    assert_eq!(
        code,
        ResultCode::Unavailable,
        "retried later, not a bad request"
    );
    assert!(
        message.contains("still in progress (epoch 1 has not started)"),
        "{message}"
    );
    assert_eq!(catalog.groups, before, "a refusal changes nothing");
    assert_eq!(epoch_started(&mut catalog, 1, 1), ResultCode::Ok);
    let reply = reassigned_ok(reassign(&mut catalog, 1, &[1, 2, 3, 4, 5], None));
    assert_eq!((reply.previous_epoch, reply.epoch), (1, 2));
    let pending = catalog.groups.clone();
    assert_eq!(epoch_started(&mut catalog, 1, 1), ResultCode::Ok);
    assert_eq!(
        catalog.groups, pending,
        "a late report of epoch 1 starts nothing"
    );
}

#[test]
fn epoch_started_retires_the_nodes_that_left() {
    let mut catalog = cluster_of_five();
    reassigned_ok(reassign(&mut catalog, 1, &[1, 3, 4], None));
    let in_progress = catalog.groups.clone();
    assert_eq!(
        epoch_started(&mut catalog, 1, 0),
        ResultCode::InvalidRequest,
        "epoch 0 starts with the partition: never reported"
    );
    for stale in [(1, 2), (99, 1)] {
        assert_eq!(
            epoch_started(&mut catalog, stale.0, stale.1),
            ResultCode::Ok
        );
        assert_eq!(catalog.groups, in_progress, "{stale:?} changes nothing");
    }
    assert_eq!(epoch_started(&mut catalog, 1, 1), ResultCode::Ok);
    let started = catalog.groups.clone();
    let assignment = &started[&1];
    assert!(assignment.active);
    assert_eq!(assignment.previous, None);
    assert_eq!(assignment.retired, [2]);
    assert_eq!(assignment.role_of(2), Some(Role::Retired));
    assert_eq!(catalog.hosted_on(2).count(), 1, "its copy is still on disk");
    assert_eq!(epoch_started(&mut catalog, 1, 1), ResultCode::Ok);
    assert_eq!(catalog.groups, started, "a repeated report changes nothing");
}

#[test]
fn a_retired_node_cannot_be_added_back_until_dropped() {
    let mut catalog = with_node_2_retired();
    let (code, message) = refusal(reassign(&mut catalog, 1, &[1, 2, 3, 4], None));
    assert_eq!(code, ResultCode::InvalidRequest);
    assert!(
        message.contains("node 2 still holds a retired copy"),
        "{message}"
    );
    assert!(message.contains("drop-replica"), "{message}");
    assert_eq!(drop_replica(&mut catalog, 1, 2).0, ResultCode::Ok);
    assert_eq!(catalog.groups[&1].role_of(2), None);
    assert_eq!(catalog.hosted_on(2).count(), 0);
    let reply = reassigned_ok(reassign(&mut catalog, 1, &[1, 2, 3, 4], None));
    assert_eq!(
        reply.members,
        [(0, 1), (1, 2), (2, 3), (3, 4)],
        "slot 1 is free again"
    );
    assert!(!reply.in_place, "W grows from 2 to 3");
}

#[test]
fn drop_replica_refuses_a_node_without_a_retired_copy() {
    let mut catalog = cluster_of_five();
    reassigned_ok(reassign(&mut catalog, 1, &[1, 3, 4], None));
    for (node, why) in [
        (1, "a member"),
        (2, "leaving, not retired yet"),
        (5, "never held it"),
    ] {
        let (code, message) = refusal(drop_replica(&mut catalog, 1, node));
        assert_eq!(code, ResultCode::InvalidRequest, "node {node}: {why}");
        assert_eq!(
            message,
            format!("node {node} holds no retired copy of group 1")
        );
    }
    assert_eq!(
        refusal(drop_replica(&mut catalog, 7, 2)).0,
        ResultCode::UnknownGroup
    );
    assert_eq!(
        catalog.groups[&1].previous.as_ref().map(|p| p.epoch),
        Some(0)
    );
    assert_eq!(epoch_started(&mut catalog, 1, 1), ResultCode::Ok);
    assert_eq!(drop_replica(&mut catalog, 1, 2).0, ResultCode::Ok);
    assert_eq!(
        refusal(drop_replica(&mut catalog, 1, 2)).0,
        ResultCode::InvalidRequest,
        "once"
    );
}

#[test]
fn reassignments_are_refused_with_their_reason() {
    let mut catalog = cluster_of_five();
    let before = catalog.groups.clone();
    let invalid = ResultCode::InvalidRequest;
    let cases: [(u64, &[u32], ResultCode, &str); 6] = [
        (
            7,
            &[1, 2],
            ResultCode::UnknownGroup,
            "no partition has group 7",
        ),
        (0, &[1, 2], invalid, "metadata plane"),
        (1, &[1, 2, 9], invalid, "node 9 is not a node"),
        (1, &[1, 1, 2], invalid, "named twice"),
        (1, &[3, 2, 1], invalid, "already has exactly"),
        (1, &[4, 5], invalid, "keeps none of the current"),
    ];
    for (group, nodes, expected, says) in cases {
        let (code, message) = refusal(reassign(&mut catalog, group, nodes, None));
        assert_eq!(code, expected, "{group} {nodes:?}: {message}");
        assert!(message.contains(says), "{group} {nodes:?}: {message}");
    }
    let same_policy = Some(ConfirmPolicy::MajorityDurable);
    let (code, _) = refusal(reassign(&mut catalog, 1, &[1, 2, 3], same_policy));
    assert_eq!(code, invalid, "the same set and policy change nothing");
    assert_eq!(catalog.groups, before, "refusals change nothing");
}

#[test]
fn the_same_ops_build_the_same_catalog_on_every_node() {
    let build = || {
        let mut catalog = with_node_2_retired();
        reassigned_ok(reassign(
            &mut catalog,
            1,
            &[1, 3, 4, 5],
            Some(ConfirmPolicy::LocalDurable),
        ));
        catalog
    };
    assert_eq!(build(), build());
}

fn commit(
    catalog: &mut Catalog,
    op: u64,
    operation: Operation,
    body: Vec<u8>,
) -> (ResultCode, Bytes) {
    catalog.commit(&header(op, operation), Some(&Bytes::from(body)))
}

#[test]
fn a_deleted_topic_frees_its_name_and_never_reuses_its_groups() {
    let mut catalog = catalog_with_stream_s();
    assert_eq!(
        commit(
            &mut catalog,
            2,
            Operation::CreateTopic,
            topic("s", "t", 2, 3).to_vec()
        )
        .0,
        ResultCode::Ok
    );
    let delete = DeleteTopic {
        stream: "s".into(),
        topic: "t".into(),
    }
    .to_vec();
    let (result, body) = commit(&mut catalog, 3, Operation::DeleteTopic, delete.clone());
    assert_eq!(result, ResultCode::Ok);
    assert_eq!(
        TopicsDeleted::from_bytes(&body).expect("reply").groups,
        vec![1, 2]
    );
    assert!(catalog.groups.is_empty() && catalog.hosted_on(1).count() == 0);
    assert!(catalog.is_deleted(1) && catalog.is_deleted(2));
    assert!(
        !catalog.is_deleted(0) && !catalog.is_deleted(3),
        "group 3 is not made yet"
    );
    assert!(catalog.topic_info("s", "t", &|_| 0).is_none());
    assert_eq!(
        commit(&mut catalog, 4, Operation::DeleteTopic, delete).0,
        ResultCode::UnknownTopic
    );

    let (result, body) = commit(
        &mut catalog,
        5,
        Operation::CreateTopic,
        topic("s", "t", 1, 3).to_vec(),
    );
    assert_eq!(result, ResultCode::Ok);
    assert_eq!(
        TopicCreated::from_bytes(&body).expect("reply").groups,
        vec![3],
        "a new group, never 1 again"
    );
    assert!(!catalog.is_deleted(3) && catalog.is_deleted(1));
}

#[test]
fn a_deleted_stream_takes_its_topics_and_retired_copies() {
    let mut catalog = catalog_with_stream_s();
    commit(
        &mut catalog,
        2,
        Operation::CreateTopic,
        topic("s", "a", 1, 2).to_vec(),
    );
    commit(
        &mut catalog,
        3,
        Operation::CreateTopic,
        topic("s", "b", 2, 1).to_vec(),
    );
    let move_a = ReassignPartition {
        group: 1,
        nodes: vec![1, 3],
        confirm: None,
        force: false,
        dry_run: false,
    }
    .to_vec();
    assert_eq!(
        commit(&mut catalog, 4, Operation::ReassignPartition, move_a).0,
        ResultCode::Ok
    );
    let (result, body) = commit(
        &mut catalog,
        5,
        Operation::DeleteStream,
        DeleteStream { name: "s".into() }.to_vec(),
    );
    assert_eq!(result, ResultCode::Ok);
    assert_eq!(
        TopicsDeleted::from_bytes(&body).expect("reply").groups,
        vec![1, 2, 3]
    );
    assert!(catalog.streams.is_empty() && catalog.groups.is_empty());
    for node in [1, 2, 3] {
        assert_eq!(
            catalog.hosted_on(node).count(),
            0,
            "node {node} drops every copy"
        );
    }
    let again = DeleteStream { name: "s".into() }.to_vec();
    assert_eq!(
        commit(&mut catalog, 6, Operation::DeleteStream, again).0,
        ResultCode::UnknownStream
    );
    let stream = CreateStream { name: "s".into() }.to_vec();
    assert_eq!(
        commit(&mut catalog, 7, Operation::CreateStream, stream).0,
        ResultCode::Ok
    );
}

#[test]
fn alter_changes_only_the_limits_it_names() {
    let mut catalog = catalog_with_stream_s();
    commit(
        &mut catalog,
        2,
        Operation::CreateTopic,
        topic("s", "t", 2, 3).to_vec(),
    );
    let alter = AlterTopic {
        stream: "s".into(),
        topic: "t".into(),
        retention_bytes: Some(1 << 20),
        retention_ms: None,
    };
    assert_eq!(
        commit(&mut catalog, 3, Operation::AlterTopic, alter.to_vec()).0,
        ResultCode::Ok
    );
    for assignment in catalog.groups.values() {
        assert_eq!(
            (assignment.retention_bytes, assignment.retention_ms),
            (1 << 20, 0)
        );
    }
    let alter = AlterTopic {
        stream: "s".into(),
        topic: "t".into(),
        retention_bytes: Some(0),
        retention_ms: Some(60_000),
    };
    commit(&mut catalog, 4, Operation::AlterTopic, alter.to_vec());
    let info = catalog.topic_info("s", "t", &|_| 0).expect("topic");
    assert_eq!((info.retention_bytes, info.retention_ms), (0, 60_000));
    let unknown = AlterTopic {
        stream: "s".into(),
        topic: "u".into(),
        retention_bytes: Some(1),
        retention_ms: None,
    };
    assert_eq!(
        commit(&mut catalog, 5, Operation::AlterTopic, unknown.to_vec()).0,
        ResultCode::UnknownTopic
    );
}

#[test]
fn added_partitions_take_the_topics_policies_and_new_groups() {
    let mut catalog = catalog_with_stream_s();
    commit(
        &mut catalog,
        2,
        Operation::CreateTopic,
        topic("s", "t", 2, 2).to_vec(),
    );
    commit(
        &mut catalog,
        3,
        Operation::CreateTopic,
        topic("s", "u", 1, 3).to_vec(),
    );
    let add = |count| {
        AddPartitions {
            stream: "s".into(),
            topic: "t".into(),
            partition_count: count,
        }
        .to_vec()
    };
    assert_eq!(
        commit(&mut catalog, 4, Operation::AddPartitions, add(2)).0,
        ResultCode::InvalidRequest
    );
    let (result, body) = commit(&mut catalog, 5, Operation::AddPartitions, add(4));
    assert_eq!(result, ResultCode::Ok);
    assert_eq!(
        TopicCreated::from_bytes(&body).expect("reply").groups,
        vec![4, 5]
    );
    let info = catalog.topic_info("s", "t", &|_| 0).expect("topic");
    let partitions: Vec<(u32, u64, usize)> = info
        .partitions
        .iter()
        .map(|partition| {
            (
                partition.partition,
                partition.group,
                partition.replicas.len(),
            )
        })
        .collect();
    assert_eq!(partitions, vec![(0, 1, 2), (1, 2, 2), (2, 4, 2), (3, 5, 2)]);
    assert_eq!(catalog.groups[&5].confirm, catalog.groups[&1].confirm);
}

#[test]
fn consumer_groups_join_rebalance_leave_and_follow_their_topic() {
    use strand_wire::ops::{ConsumerGroupAssignment, JoinConsumerGroup, LeaveConsumerGroup};
    let mut catalog = catalog_with_stream_s();
    let (result, _) = catalog.commit(
        &header(2, Operation::CreateTopic),
        Some(&topic("s", "t", 4, 3)),
    );
    assert_eq!(result, ResultCode::Ok);
    let join = |member: u128, topic: &str| {
        Bytes::from(
            JoinConsumerGroup {
                group: "g".into(),
                member,
                stream: "s".into(),
                topic: topic.into(),
                session_timeout_ms: 1000,
            }
            .to_vec(),
        )
    };
    let (result, reply) = catalog.commit(
        &header(3, Operation::JoinConsumerGroup),
        Some(&join(7, "t")),
    );
    assert_eq!(result, ResultCode::Ok);
    let first = ConsumerGroupAssignment::from_bytes(&reply).expect("assignment");
    assert_eq!((first.generation, first.partitions.len()), (1, 4));
    // Joining again changes nothing; a second member takes half.
    let (_, reply) = catalog.commit(
        &header(4, Operation::JoinConsumerGroup),
        Some(&join(7, "t")),
    );
    assert_eq!(
        ConsumerGroupAssignment::from_bytes(&reply).expect("assignment"),
        first
    );
    let (_, reply) = catalog.commit(
        &header(5, Operation::JoinConsumerGroup),
        Some(&join(9, "t")),
    );
    let second = ConsumerGroupAssignment::from_bytes(&reply).expect("assignment");
    assert_eq!((second.generation, second.partitions.len()), (2, 2));
    assert_eq!(
        catalog
            .member_assignment("g", 7)
            .expect("member")
            .partitions
            .len(),
        2
    );
    // A group reads one topic.
    let (result, _) = catalog.commit(
        &header(6, Operation::JoinConsumerGroup),
        Some(&join(11, "u")),
    );
    assert_ne!(result, ResultCode::Ok);
    // More partitions: a rebalance over all of them.
    let grow = Bytes::from(
        AddPartitions {
            stream: "s".into(),
            topic: "t".into(),
            partition_count: 6,
        }
        .to_vec(),
    );
    let (result, _) = catalog.commit(&header(7, Operation::AddPartitions), Some(&grow));
    assert_eq!(result, ResultCode::Ok);
    let group = catalog.consumer_group("g").expect("group");
    assert_eq!((group.generation, group.owners.len()), (3, 6));
    let leave = Bytes::from(
        LeaveConsumerGroup {
            group: "g".into(),
            member: 9,
            expired: true,
        }
        .to_vec(),
    );
    let (result, _) = catalog.commit(&header(8, Operation::LeaveConsumerGroup), Some(&leave));
    assert_eq!(result, ResultCode::Ok);
    assert_eq!(
        catalog
            .member_assignment("g", 7)
            .expect("member")
            .partitions,
        vec![0, 1, 2, 3, 4, 5]
    );
    assert_eq!(
        catalog
            .member_assignment("g", 9)
            .map_err(|error| error.code()),
        Err(ResultCode::UnknownMember)
    );
    // Deleting the topic forgets its groups.
    let delete = Bytes::from(
        DeleteTopic {
            stream: "s".into(),
            topic: "t".into(),
        }
        .to_vec(),
    );
    let (result, _) = catalog.commit(&header(9, Operation::DeleteTopic), Some(&delete));
    assert_eq!(result, ResultCode::Ok);
    assert!(catalog.consumer_group("g").is_none());
}

#[test]
fn a_preview_is_the_plan_the_move_gets_and_a_dry_run_is_never_applied() {
    let mut catalog = cluster_of_five();
    let wish = ReassignPartition {
        group: 1,
        nodes: vec![1, 3, 4],
        confirm: None,
        force: false,
        dry_run: true,
    };
    let previewed = catalog.preview_reassignment(&wish).expect("a plan");
    // A dry run that reached a log anyway changes nothing, on every replica.
    let (code, _) = apply(
        &mut catalog,
        Operation::ReassignPartition,
        Bytes::from(wish.to_vec()),
    );
    assert_eq!(code, ResultCode::InvalidRequest);
    assert!(catalog.groups[&1].active, "no reassignment began");
    let moved = reassigned_ok(reassign(&mut catalog, 1, &[1, 3, 4], None));
    assert_eq!(previewed, moved);
    // Now the next move waits for epoch 1 to start, and its preview says so.
    let refused = catalog
        .preview_reassignment(&wish)
        .expect_err("in progress");
    assert_eq!(refused.code(), ResultCode::Unavailable);

    let mut retired = with_node_2_retired();
    let drop = |node| DropReplica {
        group: 1,
        node,
        force: false,
        dry_run: true,
    };
    assert_eq!(retired.preview_drop(&drop(2)), Ok(()));
    assert!(
        retired.preview_drop(&drop(3)).is_err(),
        "a member, not retired"
    );
    let (code, _) = apply(
        &mut retired,
        Operation::DropReplica,
        Bytes::from(drop(2).to_vec()),
    );
    assert_eq!(code, ResultCode::InvalidRequest);
    assert_eq!(
        retired.groups[&1].retired,
        [2],
        "the dry run dropped nothing"
    );
}
