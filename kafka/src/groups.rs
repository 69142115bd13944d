//! The classic consumer group protocol: FindCoordinator, JoinGroup,
//! SyncGroup, Heartbeat and LeaveGroup, decoded and encoded. The members
//! assign partitions themselves (the leader's assignor, eager or
//! cooperative-sticky alike); the coordinator only gathers and hands out.

use bytes::{Bytes, BytesMut};

use crate::api::RequestHeader;
use crate::codec::{Reader, Writer};
use crate::error::DecodeError;

/// FindCoordinator's keys (one before v4, several from v4).
pub fn decode_find_coordinator(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<(i8, Vec<String>), DecodeError> {
    let version = header.version;
    let mut keys = Vec::new();
    if version <= 3 {
        keys.push(body.string("key")?);
    }
    let key_type = match version >= 1 {
        true => body.i8("key type")?,
        false => 0,
    };
    if version >= 4 {
        keys = body.array("coordinator keys", |key| key.string("key"))?;
    }
    body.tagged_fields()?;
    Ok((key_type, keys))
}

/// One coordinator found (or the error why not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinator {
    /// The key asked for.
    pub key: String,
    /// The coordinator's node id (-1 on error).
    pub node_id: i32,
    /// Its Kafka host.
    pub host: String,
    /// Its Kafka port.
    pub port: i32,
    /// Kafka error code (0: none).
    pub error_code: i16,
}

/// Encodes a FindCoordinator response body.
pub fn encode_find_coordinator(header: &RequestHeader, found: &[Coordinator]) -> BytesMut {
    let version = header.version;
    let mut writer = Writer::new(header.flexible());
    if version >= 1 {
        writer.i32(0);
    }
    if version <= 3 {
        let first = found.first().cloned().unwrap_or(Coordinator {
            key: String::new(),
            node_id: -1,
            host: String::new(),
            port: -1,
            error_code: crate::errors::code::INVALID_REQUEST,
        });
        writer.i16(first.error_code);
        if version >= 1 {
            writer.nullable_string(None);
        }
        writer.i32(first.node_id);
        writer.string(&first.host);
        writer.i32(first.port);
    } else {
        writer.array(found, |writer, coordinator| {
            writer.string(&coordinator.key);
            writer.i32(coordinator.node_id);
            writer.string(&coordinator.host);
            writer.i32(coordinator.port);
            writer.i16(coordinator.error_code);
            writer.nullable_string(None);
            writer.tagged_fields();
        });
    }
    writer.tagged_fields();
    writer.finish()
}

/// A JoinGroup request, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroup {
    /// The group.
    pub group_id: String,
    /// A member not heard from for this long is removed.
    pub session_timeout_ms: i32,
    /// How long the coordinator waits for members to rejoin.
    pub rebalance_timeout_ms: i32,
    /// The member's id ("" on its first join).
    pub member_id: String,
    /// The static member's instance id.
    pub group_instance_id: Option<String>,
    /// "consumer" for consumers.
    pub protocol_type: String,
    /// The assignors it supports, in preference order, with its metadata.
    pub protocols: Vec<(String, Bytes)>,
}

/// Reads a JoinGroup body.
pub fn decode_join_group(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<JoinGroup, DecodeError> {
    let version = header.version;
    let group_id = body.string("group id")?;
    let session_timeout_ms = body.i32("session timeout ms")?;
    let rebalance_timeout_ms = match version >= 1 {
        true => body.i32("rebalance timeout ms")?,
        false => session_timeout_ms,
    };
    let member_id = body.string("member id")?;
    let group_instance_id = match version >= 5 {
        true => body.nullable_string("group instance id")?,
        false => None,
    };
    let protocol_type = body.string("protocol type")?;
    let protocols = body.array("protocols", |protocol| {
        let name = protocol.string("protocol name")?;
        let metadata = protocol.bytes("protocol metadata")?;
        protocol.tagged_fields()?;
        Ok((name, metadata))
    })?;
    if version >= 8 {
        body.nullable_string("reason")?;
    }
    body.tagged_fields()?;
    Ok(JoinGroup {
        group_id,
        session_timeout_ms,
        rebalance_timeout_ms,
        member_id,
        group_instance_id,
        protocol_type,
        protocols,
    })
}

/// A JoinGroup answer, before encoding.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Joined {
    /// Kafka error code (0: none).
    pub error_code: i16,
    /// The generation the member joined.
    pub generation_id: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The assignor chosen.
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// The member's own id.
    pub member_id: String,
    /// Every member with its metadata (the leader's answer only).
    pub members: Vec<(String, Option<String>, Bytes)>,
}

/// Encodes a JoinGroup response body.
pub fn encode_join_group(header: &RequestHeader, joined: &Joined) -> BytesMut {
    let version = header.version;
    let mut writer = Writer::new(header.flexible());
    if version >= 2 {
        writer.i32(0);
    }
    writer.i16(joined.error_code);
    writer.i32(joined.generation_id);
    if version >= 7 {
        writer.nullable_string(joined.protocol_type.as_deref());
        writer.nullable_string(joined.protocol_name.as_deref());
    } else {
        writer.string(joined.protocol_name.as_deref().unwrap_or(""));
    }
    writer.string(&joined.leader);
    if version >= 9 {
        writer.bool(false);
    }
    writer.string(&joined.member_id);
    writer.array(
        &joined.members,
        |writer, (member_id, instance, metadata)| {
            writer.string(member_id);
            if version >= 5 {
                writer.nullable_string(instance.as_deref());
            }
            writer.bytes(metadata);
            writer.tagged_fields();
        },
    );
    writer.tagged_fields();
    writer.finish()
}

/// A SyncGroup request, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroup {
    /// The group.
    pub group_id: String,
    /// The generation the member is in.
    pub generation_id: i32,
    /// The member.
    pub member_id: String,
    /// The leader's assignment of every member (empty from the others).
    pub assignments: Vec<(String, Bytes)>,
}

/// Reads a SyncGroup body.
pub fn decode_sync_group(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<SyncGroup, DecodeError> {
    let version = header.version;
    let group_id = body.string("group id")?;
    let generation_id = body.i32("generation id")?;
    let member_id = body.string("member id")?;
    if version >= 3 {
        body.nullable_string("group instance id")?;
    }
    if version >= 5 {
        body.nullable_string("protocol type")?;
        body.nullable_string("protocol name")?;
    }
    let assignments = body.array("assignments", |assignment| {
        let member = assignment.string("member id")?;
        let bytes = assignment.bytes("assignment")?;
        assignment.tagged_fields()?;
        Ok((member, bytes))
    })?;
    body.tagged_fields()?;
    Ok(SyncGroup {
        group_id,
        generation_id,
        member_id,
        assignments,
    })
}

/// Encodes a SyncGroup response body.
pub fn encode_sync_group(
    header: &RequestHeader,
    error_code: i16,
    protocol: (Option<&str>, Option<&str>),
    assignment: &[u8],
) -> BytesMut {
    let version = header.version;
    let mut writer = Writer::new(header.flexible());
    if version >= 1 {
        writer.i32(0);
    }
    writer.i16(error_code);
    if version >= 5 {
        writer.nullable_string(protocol.0);
        writer.nullable_string(protocol.1);
    }
    writer.bytes(assignment);
    writer.tagged_fields();
    writer.finish()
}

/// Reads a Heartbeat body: group, generation, member.
pub fn decode_heartbeat(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<(String, i32, String), DecodeError> {
    let group_id = body.string("group id")?;
    let generation_id = body.i32("generation id")?;
    let member_id = body.string("member id")?;
    if header.version >= 3 {
        body.nullable_string("group instance id")?;
    }
    body.tagged_fields()?;
    Ok((group_id, generation_id, member_id))
}

/// Encodes a response body that is only a throttle time (from v1) and an
/// error code: Heartbeat's.
pub fn encode_error_only(header: &RequestHeader, error_code: i16) -> BytesMut {
    let mut writer = Writer::new(header.flexible());
    if header.version >= 1 {
        writer.i32(0);
    }
    writer.i16(error_code);
    writer.tagged_fields();
    writer.finish()
}

/// A member leaving: its member id, and its instance id if static.
pub type Leaving = (String, Option<String>);

/// Reads a LeaveGroup body: the group and its leaving members (member id,
/// instance id).
pub fn decode_leave_group(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<(String, Vec<Leaving>), DecodeError> {
    let group_id = body.string("group id")?;
    if header.version <= 2 {
        let member = body.string("member id")?;
        return Ok((group_id, vec![(member, None)]));
    }
    let members = body.array("members", |member| {
        let id = member.string("member id")?;
        let instance = member.nullable_string("group instance id")?;
        if header.version >= 5 {
            member.nullable_string("reason")?;
        }
        member.tagged_fields()?;
        Ok((id, instance))
    })?;
    body.tagged_fields()?;
    Ok((group_id, members))
}

/// Encodes a LeaveGroup response body: the group's error, and from v3
/// each member's.
pub fn encode_leave_group(
    header: &RequestHeader,
    error_code: i16,
    members: &[(String, Option<String>, i16)],
) -> BytesMut {
    let mut writer = Writer::new(header.flexible());
    if header.version >= 1 {
        writer.i32(0);
    }
    writer.i16(error_code);
    if header.version >= 3 {
        writer.array(members, |writer, (member, instance, error_code)| {
            writer.string(member);
            writer.nullable_string(instance.as_deref());
            writer.i16(*error_code);
            writer.tagged_fields();
        });
    }
    writer.tagged_fields();
    writer.finish()
}

/// Reads a ListGroups body: the states asked for (empty: every one).
pub fn decode_list_groups(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<Vec<String>, DecodeError> {
    let states = match header.version >= 4 {
        true => body.array("states filter", |state| state.string("state"))?,
        false => Vec::new(),
    };
    body.tagged_fields()?;
    Ok(states)
}

/// One group as ListGroups lists it: id, protocol type, state.
pub type Listed = (String, String, String);

/// Encodes a ListGroups response body.
pub fn encode_list_groups(header: &RequestHeader, groups: &[Listed]) -> BytesMut {
    let mut writer = Writer::new(header.flexible());
    if header.version >= 1 {
        writer.i32(0);
    }
    writer.i16(0);
    writer.array(groups, |writer, (group, protocol_type, state)| {
        writer.string(group);
        writer.string(protocol_type);
        if header.version >= 4 {
            writer.string(state);
        }
        writer.tagged_fields();
    });
    writer.tagged_fields();
    writer.finish()
}

/// Reads a DescribeGroups (or DeleteGroups) body: the group ids.
pub fn decode_group_names(
    header: &RequestHeader,
    body: &mut Reader,
    describe: bool,
) -> Result<Vec<String>, DecodeError> {
    let groups = body.array("groups", |group| group.string("group id"))?;
    if describe && header.version >= 3 {
        body.bool("include authorized operations")?;
    }
    body.tagged_fields()?;
    Ok(groups)
}

/// One member as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    /// Its member id.
    pub member_id: String,
    /// Its static instance id.
    pub instance: Option<String>,
    /// Its metadata for the group's protocol.
    pub metadata: Bytes,
    /// Its assignment.
    pub assignment: Bytes,
}

/// One group as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribedGroup {
    /// Kafka error code (0: none).
    pub error_code: i16,
    /// The group id.
    pub group_id: String,
    /// Its state (`Empty`, `PreparingRebalance`, `CompletingRebalance`,
    /// `Stable`, `Dead`).
    pub state: String,
    /// Its protocol type.
    pub protocol_type: String,
    /// The assignor chosen.
    pub protocol: String,
    /// Its members.
    pub members: Vec<DescribedMember>,
}

/// Encodes a DescribeGroups response body.
pub fn encode_describe_groups(header: &RequestHeader, groups: &[DescribedGroup]) -> BytesMut {
    let version = header.version;
    let mut writer = Writer::new(header.flexible());
    if version >= 1 {
        writer.i32(0);
    }
    writer.array(groups, |writer, group| {
        writer.i16(group.error_code);
        writer.string(&group.group_id);
        writer.string(&group.state);
        writer.string(&group.protocol_type);
        writer.string(&group.protocol);
        writer.array(&group.members, |writer, member| {
            writer.string(&member.member_id);
            if version >= 4 {
                writer.nullable_string(member.instance.as_deref());
            }
            writer.string("");
            writer.string("");
            writer.bytes(&member.metadata);
            writer.bytes(&member.assignment);
            writer.tagged_fields();
        });
        if version >= 3 {
            writer.i32(i32::MIN);
        }
        writer.tagged_fields();
    });
    writer.tagged_fields();
    writer.finish()
}

/// Encodes a DeleteGroups response body: each group's error.
pub fn encode_delete_groups(header: &RequestHeader, groups: &[(String, i16)]) -> BytesMut {
    let mut writer = Writer::new(header.flexible());
    writer.i32(0);
    writer.array(groups, |writer, (group, error_code)| {
        writer.string(group);
        writer.i16(*error_code);
        writer.tagged_fields();
    });
    writer.tagged_fields();
    writer.finish()
}
