//! Tests of the catalog image: round trips of a catalog built through real
//! commits, and bad bytes refused without a panic.

use bytes::Bytes;
use strand_wire::ops::{
    AddPartitions, AlterTopic, CreateStream, CreateTopic, DeleteTopic, EpochStarted,
    JoinConsumerGroup, LeaveConsumerGroup, Permission, Quota, ReassignPartition, Right, Scope,
    SetQuota, certificate_fingerprint,
};
use strand_wire::{Operation, ResultCode};

use super::*;
use crate::catalog::tests::apply;

const HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA";

/// Commits `body` as the catalog's next op; it must be accepted.
fn commit(catalog: &mut Catalog, operation: Operation, body: &impl Body) {
    let (code, reply) = apply(catalog, operation, Bytes::from(body.to_vec()));
    assert_eq!(code, ResultCode::Ok, "{operation:?}: {reply:?}");
}

fn create_topic(catalog: &mut Catalog, stream: &str, topic: &str, partitions: u32) {
    let body = CreateTopic {
        stream: stream.to_owned(),
        topic: topic.to_owned(),
        partition_count: partitions,
        replica_count: 3,
        confirm: Some(ConfirmPolicy::Count(2)),
        durability: Some(Durability::Replicated),
        consumer_offset_durability: Some(Durability::Persisted),
        retention_bytes: 1 << 30,
        retention_ms: 86_400_000,
        segment_bytes: Some(128 * 1024),
    };
    commit(catalog, Operation::CreateTopic, &body);
}

fn reassign(catalog: &mut Catalog, group: u64, nodes: &[u32]) {
    let body = ReassignPartition {
        group,
        nodes: nodes.to_vec(),
        confirm: Some(ConfirmPolicy::MajorityDurable),
        force: false,
        dry_run: false,
    };
    commit(catalog, Operation::ReassignPartition, &body);
}

fn join(catalog: &mut Catalog, group: &str, member: u128, topic: &str) {
    let body = JoinConsumerGroup {
        group: group.to_owned(),
        member,
        stream: "shop".to_owned(),
        topic: topic.to_owned(),
        session_timeout_ms: 10_000 + member as u32,
    };
    commit(catalog, Operation::JoinConsumerGroup, &body);
}

/// Streams and topics, one deleted (its group is gone, below
/// `next_group`), an altered one, added partitions, a started
/// reassignment that retired node 2 and another in flight.
fn partitions(catalog: &mut Catalog) {
    for name in ["shop", "mail"] {
        let body = CreateStream {
            name: name.to_owned(),
        };
        commit(catalog, Operation::CreateStream, &body);
    }
    create_topic(catalog, "shop", "orders", 3);
    create_topic(catalog, "mail", "outbox", 1);
    create_topic(catalog, "shop", "gone", 1);
    let delete = DeleteTopic {
        stream: "shop".to_owned(),
        topic: "gone".to_owned(),
    };
    commit(catalog, Operation::DeleteTopic, &delete);
    let alter = AlterTopic {
        stream: "shop".to_owned(),
        topic: "orders".to_owned(),
        retention_bytes: Some(1 << 20),
        retention_ms: None,
    };
    commit(catalog, Operation::AlterTopic, &alter);
    let add = AddPartitions {
        stream: "shop".to_owned(),
        topic: "orders".to_owned(),
        partition_count: 4,
    };
    commit(catalog, Operation::AddPartitions, &add);
    assert_eq!(catalog.groups[&1].nodes(), [1, 2, 3]);
    reassign(catalog, 1, &[1, 3, 4]);
    let started = EpochStarted { group: 1, epoch: 1 };
    commit(catalog, Operation::EpochStarted, &started);
    reassign(catalog, 1, &[1, 3, 5]);
}

/// Consumer groups (one without members), users with permissions,
/// tokens, quotas (one of a user not created) and revoked certificates.
fn access(catalog: &mut Catalog) {
    join(catalog, "billing", 7, "orders");
    join(catalog, "billing", 9, "orders");
    join(catalog, "audit", 11, "orders");
    let leave = LeaveConsumerGroup {
        group: "audit".to_owned(),
        member: 11,
        expired: true,
    };
    commit(catalog, Operation::LeaveConsumerGroup, &leave);
    for name in ["reader", "operator"] {
        let body = CreateUser {
            name: name.to_owned(),
            password_hash: HASH.to_owned(),
        };
        commit(catalog, Operation::CreateUser, &body);
    }
    let grants = [
        (
            "reader",
            Right::Consume,
            Scope::Topic("shop".into(), "orders".into()),
        ),
        ("reader", Right::Manage, Scope::Stream("mail".into())),
        ("operator", Right::Admin, Scope::Cluster),
    ];
    for (user, right, scope) in grants {
        let body = ChangePermission {
            user: user.to_owned(),
            permission: Permission { right, scope },
        };
        commit(catalog, Operation::GrantPermission, &body);
    }
    for (id, user, expires_at_ms) in [
        ("00000000000000aa", "reader", Some(1_800_000_000_000)),
        ("00000000000000bb", "operator", None),
    ] {
        let body = CreateToken {
            id: id.to_owned(),
            user: user.to_owned(),
            secret_hash: HASH.to_owned(),
            label: format!("{user}'s"),
            expires_at_ms,
        };
        commit(catalog, Operation::CreateToken, &body);
    }
    for (user, requests_per_sec) in [("reader", 10), ("ghost", 20)] {
        let quota = Quota {
            produce_bytes_per_sec: 1_000,
            fetch_bytes_per_sec: 2_000,
            requests_per_sec,
        };
        let body = SetQuota {
            user: user.to_owned(),
            quota,
        };
        commit(catalog, Operation::SetQuota, &body);
    }
    for der in [&b"one certificate"[..], b"another"] {
        let body = RevokeCertificate {
            fingerprint: certificate_fingerprint(der),
        };
        commit(catalog, Operation::RevokeCertificate, &body);
    }
}

/// A catalog with every field away from its default, built through
/// the catalog's own commits.
fn rich() -> Catalog {
    let mut catalog = Catalog::new(vec![1, 2, 3, 4, 5]);
    partitions(&mut catalog);
    access(&mut catalog);
    let moving = &catalog.groups[&1];
    assert!(moving.previous.is_some() && !moving.active, "in flight");
    assert_eq!(moving.retired, [2]);
    assert!(catalog.is_deleted(5), "a deleted topic's group");
    assert_eq!(catalog.consumer_groups.len(), 2);
    assert!(catalog.consumer_groups["audit"].members.is_empty());
    assert!(catalog.applied_op > 20);
    assert!(catalog.users["reader"].permissions.len() == 2 && catalog.tokens.len() == 2);
    assert!(catalog.quotas.len() == 2 && catalog.revoked_certificates.len() == 2);
    catalog
}

#[test]
fn a_rich_catalog_round_trips_and_encodes_the_same_twice() {
    let catalog = rich();
    let bytes = encode(&catalog);
    assert_eq!(decode(&bytes), Ok(catalog.clone()));
    assert_eq!(encode(&catalog), bytes, "deterministic");
    assert_eq!(
        encode(&catalog.clone()),
        bytes,
        "equal catalogs, equal bytes"
    );
}

#[test]
fn an_empty_catalog_round_trips() {
    let catalog = Catalog::new(vec![1]);
    assert_eq!(decode(&encode(&catalog)), Ok(catalog));
}

#[test]
fn every_prefix_and_an_extra_byte_are_errors() {
    let bytes = encode(&rich());
    for length in 0..bytes.len() {
        assert!(decode(&bytes[..length]).is_err(), "prefix of {length}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(
        decode(&longer),
        Err(CatalogImageError::Body(BodyError::TrailingBytes {
            count: 1
        }))
    );
}

#[test]
fn a_wrong_magic_or_version_is_refused() {
    let mut bytes = encode(&rich());
    bytes[4] = 2;
    assert_eq!(decode(&bytes), Err(CatalogImageError::Version { found: 2 }));
    bytes[0] ^= 1;
    assert!(matches!(
        decode(&bytes),
        Err(CatalogImageError::Magic { .. })
    ));
}

#[test]
fn a_lying_count_is_an_error_not_an_allocation() {
    let mut writer = BodyWriter::default();
    writer.u32(MAGIC);
    writer.u16(VERSION);
    writer.u32(u32::MAX);
    assert!(matches!(
        decode(&writer.into_vec()),
        Err(CatalogImageError::Body(BodyError::Truncated { .. }))
    ));
    let mut bytes = encode(&Catalog::new(vec![1]));
    let streams = 4 + 2 + 4 + 4 + 8 + 8;
    bytes[streams..streams + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        decode(&bytes),
        Err(CatalogImageError::Body(BodyError::Invalid { .. }))
    ));
}

/// Runs ops that assert the catalog's rules over a decoded catalog.
fn use_everything(mut catalog: Catalog) {
    let nodes = catalog.nodes.clone();
    for assignment in catalog.groups.values() {
        assignment.membership();
        if let Some(previous) = &assignment.previous {
            previous.membership();
        }
    }
    for node in &nodes {
        catalog.hosted_on(*node).count();
    }
    catalog.describe_groups("");
    catalog.user_list();
    let groups: Vec<(u64, u32)> = catalog
        .groups
        .values()
        .map(|assignment| (assignment.group, assignment.epoch))
        .collect();
    for (group, epoch) in groups {
        apply(
            &mut catalog,
            Operation::EpochStarted,
            Bytes::from(EpochStarted { group, epoch }.to_vec()),
        );
        let wish = ReassignPartition {
            group,
            nodes: vec![nodes[0]],
            confirm: None,
            force: false,
            dry_run: false,
        };
        apply(
            &mut catalog,
            Operation::ReassignPartition,
            Bytes::from(wish.to_vec()),
        );
    }
    let topics: Vec<(String, String, u32)> = catalog
        .streams
        .iter()
        .flat_map(|(stream, topics)| {
            topics.iter().map(|(topic, entry)| {
                (stream.clone(), topic.clone(), entry.groups.len() as u32 + 1)
            })
        })
        .collect();
    for (stream, topic, partition_count) in topics {
        let add = AddPartitions {
            stream,
            topic,
            partition_count,
        };
        apply(
            &mut catalog,
            Operation::AddPartitions,
            Bytes::from(add.to_vec()),
        );
    }
}

#[test]
fn flipped_bytes_never_panic() {
    let bytes = encode(&rich());
    let mut accepted = 0;
    for index in 0..bytes.len() {
        for mask in [0x01, 0x10, 0x80, 0xff] {
            let mut flipped = bytes.clone();
            flipped[index] ^= mask;
            if let Ok(catalog) = decode(&flipped) {
                accepted += 1;
                assert_eq!(encode(&catalog), flipped, "one encoding per catalog");
                use_everything(catalog);
            }
        }
    }
    eprintln!("accepted {accepted} of {}", bytes.len() * 4);
    assert!(accepted > 0, "some flips (an op number) are still catalogs");
}

/// A change that breaks one of the catalog's rules.
type Change = Box<dyn FnOnce(&mut Catalog)>;

/// `decode` refuses the rich catalog after each change, naming the
/// rule it breaks.
fn refused(changes: Vec<(&str, Change)>) {
    for (rule, change) in changes {
        let mut catalog = rich();
        change(&mut catalog);
        match decode(&encode(&catalog)) {
            Err(CatalogImageError::Inconsistent { reason }) => {
                assert!(reason.contains(rule), "{reason:?} breaks {rule:?}");
            }
            other => panic!("{rule}: {other:?}"),
        }
    }
}

#[test]
fn assignments_that_break_their_rules_are_refused() {
    refused(vec![
        ("below the next group id 4", Box::new(|c| c.next_group = 4)),
        ("a retired node is not a member", retire(1, vec![1])),
        ("a member of the previous epoch", retire(1, vec![4])),
        (
            "retired nodes are strictly ascending",
            retire(2, vec![5, 4]),
        ),
        ("node 9 is no cluster node", slots(2, |s| s[0] = Some(9))),
        ("in two slots", slots(2, |s| s[1] = s[0])),
        ("a free one last", slots(2, |s| s.push(None))),
        ("at least one member", slots(2, Vec::clear)),
        ("17 of at most 16", slots(2, |s| s.resize(17, Some(1)))),
        ("kept exactly while", edit(1, |a| a.active = true)),
        ("the one before the current", edit(1, |a| a.epoch = 7)),
        (
            "segment size 1 out of range",
            edit(2, |a| a.segment_bytes = 1),
        ),
    ]);
}

#[test]
fn catalogs_whose_parts_disagree_are_refused() {
    refused(vec![
        (
            "cluster nodes are strictly ascending",
            Box::new(|c| c.nodes.swap(0, 1)),
        ),
        ("at least one node", Box::new(|c| c.nodes.clear())),
        (
            "group 2 is not its partition 1",
            edit(2, |a| a.partition = 0),
        ),
        (
            "group 2 is not its partition 1",
            edit(2, |a| a.topic = "gone".into()),
        ),
        (
            "group 2 differs in its policies",
            edit(2, |a| a.retention_ms = 1),
        ),
        ("6 groups, 5 of them in topics", Box::new(orphan)),
        (
            "group 3 does not exist",
            Box::new(|c| drop(c.groups.remove(&3))),
        ),
        (
            "3 owners for 4 partitions",
            billing(|g| {
                g.owners.pop();
            }),
        ),
        (
            "every owner is a member",
            billing(|g| g.owners[0] = Some(5)),
        ),
        (
            "of missing user operator",
            Box::new(|c| drop(c.users.remove("operator"))),
        ),
        (
            "limits nothing",
            Box::new(|c| {
                c.quotas.insert("x".into(), Quota::default());
            }),
        ),
    ]);
}

fn edit(group: u64, change: impl FnOnce(&mut Assignment) + 'static) -> Change {
    Box::new(move |catalog| change(catalog.groups.get_mut(&group).expect("group")))
}

fn retire(group: u64, nodes: Vec<u32>) -> Change {
    edit(group, |assignment| assignment.retired = nodes)
}

fn slots(group: u64, change: impl FnOnce(&mut Vec<Option<u32>>) + 'static) -> Change {
    edit(group, |assignment| change(&mut assignment.slots))
}

fn billing(change: impl FnOnce(&mut ConsumerGroup) + 'static) -> Change {
    Box::new(|catalog| change(catalog.consumer_groups.get_mut("billing").expect("group")))
}

/// Group 2 (`orders` partition 1) moved under a new id no topic lists.
fn orphan(catalog: &mut Catalog) {
    let mut assignment = catalog.groups[&2].clone();
    assignment.group = catalog.next_group;
    catalog.next_group += 1;
    catalog.groups.insert(assignment.group, assignment);
}
