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
    ChangePermission, CreateToken, CreateUser, GROUPS_MAX, PARTITIONS_MAX,
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
        ("consumer groups", catalog.consumer_groups.len(), GROUPS_MAX),
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
mod tests {
    use bytes::Bytes;
    use strand_wire::ops::{
        AddPartitions, AlterTopic, CreateStream, CreateTopic, DeleteTopic, EpochStarted, JoinGroup,
        LeaveGroup, Permission, Quota, ReassignPartition, Right, Scope, SetQuota,
        certificate_fingerprint,
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
        };
        commit(catalog, Operation::ReassignPartition, &body);
    }

    fn join(catalog: &mut Catalog, group: &str, member: u128, topic: &str) {
        let body = JoinGroup {
            group: group.to_owned(),
            member,
            stream: "shop".to_owned(),
            topic: topic.to_owned(),
            session_timeout_ms: 10_000 + member as u32,
        };
        commit(catalog, Operation::JoinGroup, &body);
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
        let leave = LeaveGroup {
            group: "audit".to_owned(),
            member: 11,
            expired: true,
        };
        commit(catalog, Operation::LeaveGroup, &leave);
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
}
