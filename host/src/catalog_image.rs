//! The catalog image: a whole [`Catalog`] as bytes, every field included
//! (private ones too), so that the metadata log can be compacted: the
//! catalog is snapshotted at an op, the log below it dropped, and a node
//! opens from the image and the log above it instead of replaying the log
//! from its start.
//!
//! Written in the body codec ([`strand_wire::codec`]): little-endian
//! integers, strings with a `u16` length, lists and maps with a `u32`
//! count. Maps and sets are written in key order, so [`encode`] is
//! deterministic (equal catalogs, equal bytes), and read back refusing a
//! key out of order or repeated. Where a value's byte form names its key
//! (an assignment its group, a user its name, a token its id, a quota its
//! user), the key is not written again, so key and value always agree.
//! Wire types go in their own byte forms, whose decoders check them: users
//! as `CreateUser` with their permissions as `ChangePermission` bodies,
//! tokens as `CreateToken`, quotas as a `QuotaList`, certificates as
//! `RevokeCertificate`, policies as their wire bytes.
//!
//! Format [`VERSION`] 1:
//!
//! ```text
//! magic u32 ("STCI"), version u16
//! nodes            list of u32
//! next_group u64, applied_op u64
//! streams          map name -> (map topic name -> list of group u64)
//! groups           map by group of assignments: group u64, stream, topic,
//!                  partition u32, slots, epoch u32, confirm [u8; 2],
//!                  durability u8, consumer_offset_durability u8,
//!                  retention_bytes u64, retention_ms u64, segment_bytes u64,
//!                  previous (bool; when true: epoch u32, slots, confirm),
//!                  active bool, retired list of u32
//!                  (slots: list of a bool and, when true, the node u32)
//! consumer groups  map name -> stream, topic, generation u64,
//!                  members (map id u128 -> session_timeout_ms u32),
//!                  owners list of u128 (0: none; no member id is 0)
//! users            map by name: CreateUser, list of ChangePermission
//! tokens           map by id: CreateToken
//! quotas           QuotaList
//! revoked certificates  set: RevokeCertificate
//! ```
//!
//! [`decode`] never panics, and a lying count costs an error, never memory.
//! Besides malformed bytes (a wrong magic, an unknown version, truncation,
//! trailing bytes), it refuses any catalog the catalog's own code would
//! not build, so that a decoded one is safe to use: cluster nodes sorted
//! and distinct; each assignment's rules ([`Assignment`]'s own, and slots
//! within `REPLICAS_MAX`, trimmed, distinct cluster nodes, retired nodes
//! cluster nodes out of both epochs); every topic's groups present, in
//! partition order, naming it, with its policies; no group outside a topic;
//! group ids below `next_group`; consumer groups on an existing topic with
//! one owner slot per partition and [`ConsumerGroup`]'s rules; tokens of
//! existing users; no unlimited quota; every count within its cluster
//! bound; and room left in every counter the catalog raises by one.

use std::collections::{BTreeMap, BTreeSet};

use strand_wire::codec::{Body, BodyReader, BodyWriter};
use strand_wire::ops::certificates::FINGERPRINT_LENGTH;
use strand_wire::ops::{
    CONSUMER_GROUPS_MAX, ChangePermission, CreateToken, CreateUser, PARTITIONS_MAX,
    PARTITIONS_PER_TOPIC_MAX, PERMISSIONS_PER_USER_MAX, QuotaList, REVOKED_CERTIFICATES_MAX,
    RevokeCertificate, SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN, SESSION_TIMEOUT_MS_MAX,
    SESSION_TIMEOUT_MS_MIN, STREAMS_MAX, TOKENS_MAX, TOKENS_PER_USER_MAX, TOPICS_MAX, USERS_MAX,
};
use strand_wire::{BodyError, ConfirmPolicy, Durability, REPLICAS_MAX};

use crate::catalog::{Assignment, Catalog, TopicEntry};
use crate::consumer_groups::{ConsumerGroup, GroupMember};
use crate::reassign::SlotAssignment;
use crate::users::{Token, User};

/// The image's first bytes ("STCI"): tells an image from other bytes.
pub const MAGIC: u32 = 0x4943_5453;

/// The format this build writes, and the only one it reads.
pub const VERSION: u16 = 1;

// Bytes each entry of a map takes at least: a count above what the bytes
// left can hold is refused before anything is read. A name takes 3 bytes
// at least, a count 4.

/// A stream: its name and its topics' count.
const STREAM_BYTES_MIN: usize = 3 + 4;
/// A topic: its name and its groups' count.
const TOPIC_BYTES_MIN: usize = 3 + 4;
/// An assignment: group, names, partition, slots' count, epoch, policies,
/// retention and segment size, flags, retired nodes' count.
const ASSIGNMENT_BYTES_MIN: usize = 8 + 3 + 3 + 4 + 4 + 4 + 2 + 1 + 1 + 3 * 8 + 1 + 1 + 4;
/// A consumer group: names, generation, members' and owners' counts.
const CONSUMER_GROUP_BYTES_MIN: usize = 3 + 3 + 3 + 8 + 4 + 4;
/// A member: its id and session timeout.
const MEMBER_BYTES_MIN: usize = 16 + 4;
/// A user: its name, its hash's length, its permissions' count.
const USER_BYTES_MIN: usize = 3 + 2 + 4;
/// A permission: the user's name, the right and the scope.
const PERMISSION_BYTES_MIN: usize = 3 + 1 + 1;
/// A token: id, user, hash and label lengths, expiry.
const TOKEN_BYTES_MIN: usize = 2 + 3 + 2 + 2 + 9;
/// A revoked certificate: its fingerprint.
const CERTIFICATE_BYTES_MIN: usize = 2 + FINGERPRINT_LENGTH;

/// Why bytes are not a catalog image this build can open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogImageError {
    /// The bytes do not start with [`MAGIC`]: not a catalog image.
    #[error("not a catalog image (magic {found:#010x})")]
    Magic {
        /// The first four bytes, as read.
        found: u32,
    },
    /// An image of a format this build does not read.
    #[error("catalog image format {found}; this build reads format {VERSION}")]
    Version {
        /// The image's version.
        found: u16,
    },
    /// Malformed bytes: truncated, trailing, or a field out of its range.
    #[error("malformed catalog image: {0}")]
    Body(#[from] BodyError),
    /// Well-formed bytes whose catalog breaks one of the catalog's rules.
    #[error("inconsistent catalog image: {reason}")]
    Inconsistent {
        /// The rule broken, and where.
        reason: String,
    },
}

fn inconsistent(reason: impl Into<String>) -> CatalogImageError {
    CatalogImageError::Inconsistent {
        reason: reason.into(),
    }
}

/// Encodes the whole catalog: every field, private ones included. Equal
/// catalogs give equal bytes, so replicas' images can be compared.
pub fn encode(catalog: &Catalog) -> Vec<u8> {
    let mut writer = BodyWriter::default();
    writer.u32(MAGIC);
    writer.u16(VERSION);
    writer.list(&catalog.nodes, |writer, node| writer.u32(*node));
    writer.u64(catalog.next_group);
    writer.u64(catalog.applied_op);
    write_map(&mut writer, &catalog.streams, |writer, name, topics| {
        writer.str(name);
        write_map(writer, topics, |writer, topic, entry| {
            writer.str(topic);
            writer.list(&entry.groups, |writer, group| writer.u64(*group));
        });
    });
    write_map(&mut writer, &catalog.groups, |writer, _, assignment| {
        write_assignment(writer, assignment);
    });
    write_map(
        &mut writer,
        &catalog.consumer_groups,
        |writer, name, group| {
            write_consumer_group(writer, name, group);
        },
    );
    write_map(&mut writer, &catalog.users, |writer, name, user| {
        write_user(writer, name, user);
    });
    write_map(&mut writer, &catalog.tokens, |writer, id, token| {
        token_body(id, token).encode(writer);
    });
    let quotas = QuotaList {
        quotas: catalog
            .quotas
            .iter()
            .map(|(user, quota)| (user.clone(), *quota))
            .collect(),
    };
    quotas.encode(&mut writer);
    write_count(&mut writer, catalog.revoked_certificates.len());
    for fingerprint in &catalog.revoked_certificates {
        let body = RevokeCertificate {
            fingerprint: fingerprint.clone(),
        };
        body.encode(&mut writer);
    }
    writer.into_vec()
}

/// Decodes bytes written by [`encode`] into the catalog they hold; never
/// panics on any input, and refuses bytes whose catalog breaks the
/// catalog's rules (see the module's doc), so the result is safe to use.
pub fn decode(bytes: &[u8]) -> Result<Catalog, CatalogImageError> {
    let mut reader = BodyReader::new(bytes);
    let magic = reader.u32("magic")?;
    if magic != MAGIC {
        return Err(CatalogImageError::Magic { found: magic });
    }
    let version = reader.u16("version")?;
    if version != VERSION {
        return Err(CatalogImageError::Version { found: version });
    }
    let nodes = reader.list("nodes", 4, |reader| reader.u32("node"))?;
    let next_group = reader.u64("next group")?;
    let applied_op = reader.u64("applied op")?;
    let streams = read_map(&mut reader, "streams", STREAM_BYTES_MIN, |reader| {
        let name = reader.name("stream")?;
        let topics = read_map(reader, "topics", TOPIC_BYTES_MIN, |reader| {
            let topic = reader.name("topic")?;
            let groups = reader.list("topic groups", 8, |reader| reader.u64("group"))?;
            Ok((topic, TopicEntry { groups }))
        })?;
        Ok((name, topics))
    })?;
    let groups = read_map(&mut reader, "groups", ASSIGNMENT_BYTES_MIN, |reader| {
        let assignment = read_assignment(reader)?;
        Ok((assignment.group, assignment))
    })?;
    let consumer_groups = read_map(
        &mut reader,
        "consumer groups",
        CONSUMER_GROUP_BYTES_MIN,
        read_consumer_group,
    )?;
    let users = read_map(&mut reader, "users", USER_BYTES_MIN, read_user)?;
    let tokens = read_map(&mut reader, "tokens", TOKEN_BYTES_MIN, read_token)?;
    let quotas = QuotaList::decode(&mut reader)?.quotas;
    let quotas = quotas
        .into_iter()
        .try_fold(BTreeMap::new(), |mut map, (user, quota)| {
            insert_ascending(&mut map, "quotas", user, quota).map(|()| map)
        })?;
    let revoked_certificates = read_set(
        &mut reader,
        "revoked certificates",
        CERTIFICATE_BYTES_MIN,
        |reader| Ok(RevokeCertificate::decode(reader)?.fingerprint),
    )?;
    reader.finish()?;
    let catalog = Catalog {
        streams,
        groups,
        next_group,
        applied_op,
        nodes,
        consumer_groups,
        users,
        tokens,
        quotas,
        revoked_certificates,
    };
    check(&catalog)?;
    Ok(catalog)
}

// ----- writing ---------------------------------------------------------------

fn write_count(writer: &mut BodyWriter, count: usize) {
    writer.u32(u32::try_from(count).expect("a catalog's counts are bounded far below 4G"));
}

/// A count, then each entry in key order.
fn write_map<K, V>(
    writer: &mut BodyWriter,
    map: &BTreeMap<K, V>,
    mut write: impl FnMut(&mut BodyWriter, &K, &V),
) {
    write_count(writer, map.len());
    for (key, value) in map {
        write(writer, key, value);
    }
}

fn write_slots(writer: &mut BodyWriter, slots: &[Option<u32>]) {
    writer.list(slots, |writer, slot| {
        writer.bool(slot.is_some());
        if let Some(node) = slot {
            writer.u32(*node);
        }
    });
}

fn write_confirm(writer: &mut BodyWriter, confirm: ConfirmPolicy) {
    let [kind, count] = confirm.to_bytes();
    writer.u8(kind);
    writer.u8(count);
}

fn write_assignment(writer: &mut BodyWriter, assignment: &Assignment) {
    writer.u64(assignment.group);
    writer.str(&assignment.stream);
    writer.str(&assignment.topic);
    writer.u32(assignment.partition);
    write_slots(writer, &assignment.slots);
    writer.u32(assignment.epoch);
    write_confirm(writer, assignment.confirm);
    writer.u8(assignment.durability as u8);
    writer.u8(assignment.consumer_offset_durability as u8);
    writer.u64(assignment.retention_bytes);
    writer.u64(assignment.retention_ms);
    writer.u64(assignment.segment_bytes);
    writer.bool(assignment.previous.is_some());
    if let Some(previous) = &assignment.previous {
        writer.u32(previous.epoch);
        write_slots(writer, &previous.slots);
        write_confirm(writer, previous.confirm);
    }
    writer.bool(assignment.active);
    writer.list(&assignment.retired, |writer, node| writer.u32(*node));
}

fn write_consumer_group(writer: &mut BodyWriter, name: &str, group: &ConsumerGroup) {
    writer.str(name);
    writer.str(&group.stream);
    writer.str(&group.topic);
    writer.u64(group.generation);
    write_map(writer, &group.members, |writer, member, info| {
        writer.u128(*member);
        writer.u32(info.session_timeout_ms);
    });
    writer.list(&group.owners, |writer, owner| {
        writer.u128(owner.unwrap_or(0))
    });
}

fn write_user(writer: &mut BodyWriter, name: &str, user: &User) {
    let created = CreateUser {
        name: name.to_owned(),
        password_hash: user.password_hash.clone(),
    };
    created.encode(writer);
    write_count(writer, user.permissions.len());
    for permission in &user.permissions {
        let change = ChangePermission {
            user: name.to_owned(),
            permission: permission.clone(),
        };
        change.encode(writer);
    }
}

fn token_body(id: &str, token: &Token) -> CreateToken {
    CreateToken {
        id: id.to_owned(),
        user: token.user.clone(),
        secret_hash: token.secret_hash.clone(),
        label: token.label.clone(),
        expires_at_ms: token.expires_at_ms,
    }
}

// ----- reading ---------------------------------------------------------------

/// A `u32` count of entries that each take at least `entry_bytes_min`
/// bytes, refused when the bytes left cannot hold them.
fn read_count(
    reader: &mut BodyReader<'_>,
    field: &'static str,
    entry_bytes_min: usize,
) -> Result<usize, BodyError> {
    assert!(entry_bytes_min > 0, "{field}: an entry takes some bytes");
    let count = reader.u32(field)? as usize;
    if count > reader.remaining() / entry_bytes_min {
        return Err(BodyError::Invalid {
            field,
            reason: "more entries than the bytes left can hold",
        });
    }
    Ok(count)
}

fn insert_ascending<K: Ord, V>(
    map: &mut BTreeMap<K, V>,
    field: &'static str,
    key: K,
    value: V,
) -> Result<(), CatalogImageError> {
    if map.last_key_value().is_some_and(|(last, _)| *last >= key) {
        return Err(inconsistent(format!(
            "{field}: keys out of order or repeated"
        )));
    }
    map.insert(key, value);
    Ok(())
}

/// A map written by `write_map`: keys strictly ascending.
fn read_map<'a, K: Ord, V>(
    reader: &mut BodyReader<'a>,
    field: &'static str,
    entry_bytes_min: usize,
    mut read: impl FnMut(&mut BodyReader<'a>) -> Result<(K, V), CatalogImageError>,
) -> Result<BTreeMap<K, V>, CatalogImageError> {
    let count = read_count(reader, field, entry_bytes_min)?;
    let mut map = BTreeMap::new();
    for _ in 0..count {
        let (key, value) = read(reader)?;
        insert_ascending(&mut map, field, key, value)?;
    }
    Ok(map)
}

/// A set: a map without values.
fn read_set<'a, K: Ord>(
    reader: &mut BodyReader<'a>,
    field: &'static str,
    entry_bytes_min: usize,
    mut read: impl FnMut(&mut BodyReader<'a>) -> Result<K, CatalogImageError>,
) -> Result<BTreeSet<K>, CatalogImageError> {
    let map = read_map(reader, field, entry_bytes_min, |reader| {
        Ok((read(reader)?, ()))
    })?;
    Ok(map.into_keys().collect())
}

fn read_slots(reader: &mut BodyReader<'_>) -> Result<Vec<Option<u32>>, BodyError> {
    reader.list("slots", 1, |reader| {
        Ok(match reader.bool("slot held")? {
            true => Some(reader.u32("slot node")?),
            false => None,
        })
    })
}

fn read_confirm(reader: &mut BodyReader<'_>) -> Result<ConfirmPolicy, BodyError> {
    let kind = reader.u8("confirm policy")?;
    let count = reader.u8("confirm policy")?;
    ConfirmPolicy::from_bytes([kind, count])
}

fn read_assignment(reader: &mut BodyReader<'_>) -> Result<Assignment, CatalogImageError> {
    let group = reader.u64("group")?;
    let stream = reader.name("stream")?;
    let topic = reader.name("topic")?;
    let partition = reader.u32("partition")?;
    let slots = read_slots(reader)?;
    let epoch = reader.u32("epoch")?;
    let confirm = read_confirm(reader)?;
    let durability = Durability::from_u8(reader.u8("durability")?)?;
    let consumer_offset_durability = Durability::from_u8(reader.u8("durability")?)?;
    let retention_bytes = reader.u64("retention bytes")?;
    let retention_ms = reader.u64("retention ms")?;
    let segment_bytes = reader.u64("segment bytes")?;
    let previous = match reader.bool("previous")? {
        true => Some(SlotAssignment {
            epoch: reader.u32("previous epoch")?,
            slots: read_slots(reader)?,
            confirm: read_confirm(reader)?,
        }),
        false => None,
    };
    let active = reader.bool("active")?;
    let retired = reader.list("retired", 4, |reader| reader.u32("retired node"))?;
    Ok(Assignment {
        group,
        stream,
        topic,
        partition,
        slots,
        epoch,
        confirm,
        durability,
        consumer_offset_durability,
        retention_bytes,
        retention_ms,
        segment_bytes,
        previous,
        active,
        retired,
    })
}

fn read_consumer_group(
    reader: &mut BodyReader<'_>,
) -> Result<(String, ConsumerGroup), CatalogImageError> {
    let name = reader.name("consumer group")?;
    let stream = reader.name("stream")?;
    let topic = reader.name("topic")?;
    let generation = reader.u64("generation")?;
    let members = read_map(reader, "members", MEMBER_BYTES_MIN, |reader| {
        let member = reader.u128("member")?;
        let session_timeout_ms = reader.u32("session timeout")?;
        Ok((member, GroupMember { session_timeout_ms }))
    })?;
    let owners = reader.list("owners", 16, |reader| {
        let owner = reader.u128("owner")?;
        Ok((owner != 0).then_some(owner))
    })?;
    let group = ConsumerGroup {
        stream,
        topic,
        generation,
        members,
        owners,
    };
    Ok((name, group))
}

fn read_user(reader: &mut BodyReader<'_>) -> Result<(String, User), CatalogImageError> {
    let created = CreateUser::decode(reader)?;
    let permissions = read_set(reader, "permissions", PERMISSION_BYTES_MIN, |reader| {
        let change = ChangePermission::decode(reader)?;
        if change.user != created.name {
            return Err(inconsistent(format!(
                "user {}: a permission names user {}",
                created.name, change.user
            )));
        }
        Ok(change.permission)
    })?;
    let user = User {
        password_hash: created.password_hash,
        permissions,
    };
    Ok((created.name, user))
}

fn read_token(reader: &mut BodyReader<'_>) -> Result<(String, Token), CatalogImageError> {
    let created = CreateToken::decode(reader)?;
    let token = Token {
        user: created.user,
        secret_hash: created.secret_hash,
        label: created.label,
        expires_at_ms: created.expires_at_ms,
    };
    Ok((created.id, token))
}

// ----- the catalog's rules ---------------------------------------------------

/// Every rule a decoded catalog must hold before it is used.
fn check(catalog: &Catalog) -> Result<(), CatalogImageError> {
    check_bounds(catalog)?;
    check_nodes_and_counters(catalog)?;
    for assignment in catalog.groups.values() {
        check_assignment(catalog, assignment)
            .map_err(|fault| inconsistent(format!("group {}: {fault}", assignment.group)))?;
    }
    check_topics(catalog)?;
    for (name, group) in &catalog.consumer_groups {
        check_consumer_group(catalog, group)
            .map_err(|fault| inconsistent(format!("consumer group {name}: {fault}")))?;
    }
    check_users(catalog)
}

/// Every count within the bound the catalog keeps it to.
fn check_bounds(catalog: &Catalog) -> Result<(), CatalogImageError> {
    let topics: usize = catalog.streams.values().map(BTreeMap::len).sum();
    let bounds = [
        ("streams", catalog.streams.len(), STREAMS_MAX),
        ("topics", topics, TOPICS_MAX),
        ("partitions", catalog.groups.len(), PARTITIONS_MAX),
        (
            "consumer groups",
            catalog.consumer_groups.len(),
            CONSUMER_GROUPS_MAX,
        ),
        ("users", catalog.users.len(), USERS_MAX),
        ("tokens", catalog.tokens.len(), TOKENS_MAX),
        ("quotas", catalog.quotas.len(), USERS_MAX),
        (
            "revoked certificates",
            catalog.revoked_certificates.len(),
            REVOKED_CERTIFICATES_MAX,
        ),
    ];
    for (what, held, max) in bounds {
        if held > max {
            return Err(inconsistent(format!("{held} {what}; at most {max}")));
        }
    }
    Ok(())
}

fn check_nodes_and_counters(catalog: &Catalog) -> Result<(), CatalogImageError> {
    if catalog.nodes.is_empty() {
        return Err(inconsistent("a cluster has at least one node"));
    }
    if !catalog.nodes.windows(2).all(|pair| pair[0] < pair[1]) {
        return Err(inconsistent("cluster nodes are strictly ascending"));
    }
    if catalog.next_group == 0 || catalog.next_group == u64::MAX {
        return Err(inconsistent(format!(
            "next group {} is no next group id",
            catalog.next_group
        )));
    }
    Ok(())
}

/// An assignment's own rules, and those that need the cluster.
fn check_assignment(catalog: &Catalog, assignment: &Assignment) -> Result<(), String> {
    if assignment.group == 0 || assignment.group >= catalog.next_group {
        return Err(format!(
            "group ids run from 1 to below the next group id {}",
            catalog.next_group
        ));
    }
    if let Some(fault) = assignment.fault() {
        return Err(fault.to_owned());
    }
    check_slots(&catalog.nodes, &assignment.slots)?;
    if let Some(previous) = &assignment.previous {
        check_slots(&catalog.nodes, &previous.slots)
            .map_err(|fault| format!("previous {fault}"))?;
    }
    if assignment.epoch == u32::MAX {
        return Err("no epoch left for a reassignment".to_owned());
    }
    let segment = assignment.segment_bytes;
    if segment != 0 && !(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX).contains(&segment) {
        return Err(format!("segment size {segment} out of range"));
    }
    for node in &assignment.retired {
        if catalog.nodes.binary_search(node).is_err() {
            return Err(format!("retired node {node} is no cluster node"));
        }
        let leaving = assignment
            .previous
            .as_ref()
            .is_some_and(|previous| previous.slot_of(*node).is_some());
        if leaving {
            return Err(format!(
                "retired node {node} is a member of the previous epoch"
            ));
        }
    }
    Ok(())
}

/// One epoch's slots: at most `REPLICAS_MAX`, the last one held (free slots
/// at the end are trimmed), each node a cluster node, in one slot only.
fn check_slots(nodes: &[u32], slots: &[Option<u32>]) -> Result<(), String> {
    if slots.len() > usize::from(REPLICAS_MAX) {
        return Err(format!("slots: {} of at most {REPLICAS_MAX}", slots.len()));
    }
    if !matches!(slots.last(), Some(Some(_))) {
        return Err("slots: none, or a free one last".to_owned());
    }
    let mut seen = BTreeSet::new();
    for node in slots.iter().flatten() {
        if nodes.binary_search(node).is_err() {
            return Err(format!("slots: node {node} is no cluster node"));
        }
        if !seen.insert(*node) {
            return Err(format!("slots: node {node} in two slots"));
        }
    }
    Ok(())
}

/// The policies every partition of a topic carries (the confirm policy is
/// each partition's own: a reassignment changes it).
fn topic_policies(assignment: &Assignment) -> (Durability, Durability, u64, u64, u64) {
    (
        assignment.durability,
        assignment.consumer_offset_durability,
        assignment.retention_bytes,
        assignment.retention_ms,
        assignment.segment_bytes,
    )
}

/// Every topic's groups exist, in partition order, name it and carry its
/// policies; every group belongs to a topic (so to exactly one: a group
/// names one stream, topic and partition).
fn check_topics(catalog: &Catalog) -> Result<(), CatalogImageError> {
    let mut held = 0usize;
    for (stream, topics) in &catalog.streams {
        for (topic, entry) in topics {
            let fault = |reason: String| inconsistent(format!("topic {stream}/{topic}: {reason}"));
            let count = entry.groups.len();
            if count == 0 || count > PARTITIONS_PER_TOPIC_MAX as usize {
                return Err(fault(format!("{count} partitions")));
            }
            let mut policies = None;
            for (index, group) in entry.groups.iter().enumerate() {
                let Some(assignment) = catalog.groups.get(group) else {
                    return Err(fault(format!("group {group} does not exist")));
                };
                let names = (assignment.stream.as_str(), assignment.topic.as_str());
                if names != (stream.as_str(), topic.as_str())
                    || assignment.partition as usize != index
                {
                    return Err(fault(format!("group {group} is not its partition {index}")));
                }
                let own = topic_policies(assignment);
                if *policies.get_or_insert(own) != own {
                    return Err(fault(format!("group {group} differs in its policies")));
                }
            }
            held += count;
        }
    }
    if held != catalog.groups.len() {
        return Err(inconsistent(format!(
            "{} groups, {held} of them in topics",
            catalog.groups.len()
        )));
    }
    Ok(())
}

/// A consumer group reads an existing topic, keeps one owner per partition
/// of it, holds members a join could have added, and keeps its own rules.
fn check_consumer_group(catalog: &Catalog, group: &ConsumerGroup) -> Result<(), String> {
    let entry = catalog
        .streams
        .get(&group.stream)
        .and_then(|topics| topics.get(&group.topic))
        .ok_or_else(|| format!("topic {}/{} does not exist", group.stream, group.topic))?;
    if group.owners.len() != entry.groups.len() {
        return Err(format!(
            "{} owners for {} partitions",
            group.owners.len(),
            entry.groups.len()
        ));
    }
    for (member, info) in &group.members {
        let timeout = info.session_timeout_ms;
        if *member == 0 || !(SESSION_TIMEOUT_MS_MIN..=SESSION_TIMEOUT_MS_MAX).contains(&timeout) {
            return Err(format!("member {member} with session timeout {timeout} ms"));
        }
    }
    if group.generation == u64::MAX {
        return Err("no generation left for a rebalance".to_owned());
    }
    match group.fault() {
        Some(fault) => Err(fault.to_owned()),
        None => Ok(()),
    }
}

/// Users within their bound of permissions; tokens of existing users,
/// within the bound per user; quotas that limit something.
fn check_users(catalog: &Catalog) -> Result<(), CatalogImageError> {
    for (name, user) in &catalog.users {
        if user.permissions.len() > PERMISSIONS_PER_USER_MAX {
            return Err(inconsistent(format!(
                "user {name}: {} permissions; at most {PERMISSIONS_PER_USER_MAX}",
                user.permissions.len()
            )));
        }
    }
    let mut held: BTreeMap<&str, usize> = BTreeMap::new();
    for (id, token) in &catalog.tokens {
        if !catalog.users.contains_key(&token.user) {
            return Err(inconsistent(format!(
                "token {id} of missing user {}",
                token.user
            )));
        }
        let count = held.entry(token.user.as_str()).or_default();
        *count += 1;
        if *count > TOKENS_PER_USER_MAX {
            return Err(inconsistent(format!(
                "user {}: more than {TOKENS_PER_USER_MAX} tokens",
                token.user
            )));
        }
    }
    match catalog
        .quotas
        .iter()
        .find(|(_, quota)| quota.is_unlimited())
    {
        Some((user, _)) => Err(inconsistent(format!(
            "the quota of {user} limits nothing (it would have been removed)"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
#[path = "catalog_image_tests.rs"]
mod tests;
