//! Consumer groups: members join a named group on one topic, the metadata
//! plane assigns the topic's partitions among them (a generation number per
//! assignment), members heartbeat to the plane's primary (the coordinator)
//! and leave; a member that stops heartbeating is removed. A group's offsets
//! are the cursors named after it in its partitions' cursor logs; a member
//! stores them with a [`ConsumerGroupFence`], refused once its generation is over.

use crate::codec::{Body, BodyReader, BodyWriter};
use crate::error::BodyError;

/// Most members one group holds; a join past it is refused.
pub const CONSUMER_GROUP_MEMBERS_MAX: usize = 256;

/// Most consumer groups the cluster keeps; a join creating one more is refused.
pub const CONSUMER_GROUPS_MAX: usize = 4096;

/// Shortest session timeout a member may ask for.
pub const SESSION_TIMEOUT_MS_MIN: u32 = 500;

/// Longest session timeout a member may ask for.
pub const SESSION_TIMEOUT_MS_MAX: u32 = 300_000;

fn read_member(reader: &mut BodyReader<'_>) -> Result<u128, BodyError> {
    let member = reader.u128("member")?;
    if member == 0 {
        return Err(BodyError::Invalid {
            field: "member",
            reason: "zero is no member id",
        });
    }
    Ok(member)
}

/// Join `group` (created by its first join) as `member`, reading `stream/topic`.
/// Metadata plane; idempotent: a member that joins again keeps its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinConsumerGroup {
    /// The group's name.
    pub group: String,
    /// The member's id, chosen by the member (random, never 0).
    pub member: u128,
    /// The stream of the group's topic.
    pub stream: String,
    /// The group's topic: every member of a group reads the same one.
    pub topic: String,
    /// How long the coordinator waits without a heartbeat before it removes
    /// the member (between [`SESSION_TIMEOUT_MS_MIN`] and
    /// [`SESSION_TIMEOUT_MS_MAX`]).
    pub session_timeout_ms: u32,
}

impl Body for JoinConsumerGroup {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.group);
        writer.u128(self.member);
        writer.str(&self.stream);
        writer.str(&self.topic);
        writer.u32(self.session_timeout_ms);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<JoinConsumerGroup, BodyError> {
        let join = JoinConsumerGroup {
            group: reader.name("group")?,
            member: read_member(reader)?,
            stream: reader.name("stream")?,
            topic: reader.name("topic")?,
            session_timeout_ms: reader.u32("session timeout")?,
        };
        if !(SESSION_TIMEOUT_MS_MIN..=SESSION_TIMEOUT_MS_MAX).contains(&join.session_timeout_ms) {
            return Err(BodyError::Invalid {
                field: "session timeout",
                reason: "outside 500 ms ..= 300 s",
            });
        }
        Ok(join)
    }
}

/// A member's part of its group now: the reply to [`JoinConsumerGroup`] and
/// [`ConsumerHeartbeat`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupAssignment {
    /// The assignment's generation: raised by every change of members.
    pub generation: u64,
    /// The partitions this member reads, ascending.
    pub partitions: Vec<u32>,
    /// The group's members.
    pub member_count: u32,
}

impl Body for ConsumerGroupAssignment {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u64(self.generation);
        writer.list(&self.partitions, |writer, partition| writer.u32(*partition));
        writer.u32(self.member_count);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<ConsumerGroupAssignment, BodyError> {
        Ok(ConsumerGroupAssignment {
            generation: reader.u64("generation")?,
            partitions: reader.list("partitions", 4, |reader| reader.u32("partition"))?,
            member_count: reader.u32("member count")?,
        })
    }
}

/// A member is alive; the answer is its part of the group now (a new
/// generation means its partitions changed). Sent to the metadata plane's
/// primary, not replicated. `UnknownMember` when the group no longer holds
/// the member: it must join again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHeartbeat {
    /// The group's name.
    pub group: String,
    /// The member.
    pub member: u128,
    /// The generation the member works in.
    pub generation: u64,
}

impl Body for ConsumerHeartbeat {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.group);
        writer.u128(self.member);
        writer.u64(self.generation);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<ConsumerHeartbeat, BodyError> {
        Ok(ConsumerHeartbeat {
            group: reader.name("group")?,
            member: read_member(reader)?,
            generation: reader.u64("generation")?,
        })
    }
}

/// `member` leaves `group` (or the coordinator removes it, `expired`: it
/// stopped heartbeating). Metadata plane; leaving twice is no error. A
/// group without members keeps its offsets and is forgotten only with its
/// topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveConsumerGroup {
    /// The group's name.
    pub group: String,
    /// The member.
    pub member: u128,
    /// True when the coordinator removes a member whose session expired.
    pub expired: bool,
}

impl Body for LeaveConsumerGroup {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.group);
        writer.u128(self.member);
        writer.bool(self.expired);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<LeaveConsumerGroup, BodyError> {
        Ok(LeaveConsumerGroup {
            group: reader.name("group")?,
            member: read_member(reader)?,
            expired: reader.bool("expired")?,
        })
    }
}

/// Describe one group, or every group when `group` is empty. Answered by
/// any node from its catalog (at least as new as `commit_min`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribeConsumerGroups {
    /// The group's name; empty for all.
    pub group: String,
}

impl Body for DescribeConsumerGroups {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.group);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<DescribeConsumerGroups, BodyError> {
        let group = reader.str("group")?.to_owned();
        if !group.is_empty() {
            crate::codec::validate_name("group", &group)?;
        }
        Ok(DescribeConsumerGroups { group })
    }
}

/// One member of a described group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    /// The member's id.
    pub member: u128,
    /// Its session timeout.
    pub session_timeout_ms: u32,
    /// The partitions it reads, ascending.
    pub partitions: Vec<u32>,
}

/// One consumer group as the catalog holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupInfo {
    /// The group's name (and the name of its cursors).
    pub group: String,
    /// Its topic's stream.
    pub stream: String,
    /// Its topic.
    pub topic: String,
    /// The current generation.
    pub generation: u64,
    /// Members by id.
    pub members: Vec<MemberInfo>,
    /// Each partition's group id (the partition index is the position), so
    /// a caller can read the group's cursors.
    pub partition_groups: Vec<u64>,
}

/// The reply to [`DescribeConsumerGroups`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribeConsumerGroupsReply {
    /// The catalog op the answer reflects.
    pub applied_op: u64,
    /// The groups, by name.
    pub groups: Vec<ConsumerGroupInfo>,
}

impl Body for DescribeConsumerGroupsReply {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.u64(self.applied_op);
        writer.list(&self.groups, |writer, group| {
            writer.str(&group.group);
            writer.str(&group.stream);
            writer.str(&group.topic);
            writer.u64(group.generation);
            writer.list(&group.members, |writer, member| {
                writer.u128(member.member);
                writer.u32(member.session_timeout_ms);
                writer.list(&member.partitions, |writer, partition| {
                    writer.u32(*partition)
                });
            });
            writer.list(&group.partition_groups, |writer, group| writer.u64(*group));
        });
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<DescribeConsumerGroupsReply, BodyError> {
        let applied_op = reader.u64("applied op")?;
        let groups = reader.list("groups", 16, |reader| {
            Ok(ConsumerGroupInfo {
                group: reader.name("group")?,
                stream: reader.name("stream")?,
                topic: reader.name("topic")?,
                generation: reader.u64("generation")?,
                members: reader.list("members", 24, |reader| {
                    Ok(MemberInfo {
                        member: read_member(reader)?,
                        session_timeout_ms: reader.u32("session timeout")?,
                        partitions: reader
                            .list("partitions", 4, |reader| reader.u32("partition"))?,
                    })
                })?,
                partition_groups: reader.list("partition groups", 8, |reader| {
                    reader.u64("partition group")
                })?,
            })
        })?;
        Ok(DescribeConsumerGroupsReply { applied_op, groups })
    }
}

/// Who stores a group's cursor: the member and the generation it works in.
/// The partition's node refuses the store (`StaleGeneration`) unless its
/// catalog gives the partition to this member in this generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerGroupFence {
    /// The member.
    pub member: u128,
    /// Its generation.
    pub generation: u64,
}

impl ConsumerGroupFence {
    pub(crate) fn encode(&self, writer: &mut BodyWriter) {
        writer.u128(self.member);
        writer.u64(self.generation);
    }

    pub(crate) fn decode(reader: &mut BodyReader<'_>) -> Result<ConsumerGroupFence, BodyError> {
        Ok(ConsumerGroupFence {
            member: read_member(reader)?,
            generation: reader.u64("generation")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Body + PartialEq + std::fmt::Debug>(value: T) {
        let bytes = value.to_vec();
        assert_eq!(T::from_bytes(&bytes), Ok(value));
        for len in 0..bytes.len() {
            assert!(T::from_bytes(&bytes[..len]).is_err(), "cut at {len}");
        }
    }

    #[test]
    fn group_bodies_round_trip_and_refuse_what_is_cut() {
        round_trip(JoinConsumerGroup {
            group: "billing".to_owned(),
            member: u128::MAX - 5,
            stream: "shop".to_owned(),
            topic: "orders".to_owned(),
            session_timeout_ms: 10_000,
        });
        round_trip(ConsumerGroupAssignment {
            generation: 7,
            partitions: vec![0, 3, 9],
            member_count: 3,
        });
        round_trip(ConsumerHeartbeat {
            group: "billing".to_owned(),
            member: 42,
            generation: 7,
        });
        round_trip(LeaveConsumerGroup {
            group: "billing".to_owned(),
            member: 42,
            expired: true,
        });
        round_trip(DescribeConsumerGroupsReply {
            applied_op: 12,
            groups: vec![ConsumerGroupInfo {
                group: "billing".to_owned(),
                stream: "shop".to_owned(),
                topic: "orders".to_owned(),
                generation: 3,
                members: vec![MemberInfo {
                    member: 42,
                    session_timeout_ms: 10_000,
                    partitions: vec![0, 1],
                }],
                partition_groups: vec![5, 6],
            }],
        });
    }

    #[test]
    fn bad_members_and_timeouts_are_refused() {
        let join = JoinConsumerGroup {
            group: "billing".to_owned(),
            member: 0,
            stream: "shop".to_owned(),
            topic: "orders".to_owned(),
            session_timeout_ms: 10_000,
        };
        assert!(
            JoinConsumerGroup::from_bytes(&join.to_vec()).is_err(),
            "member 0"
        );
        let join = JoinConsumerGroup {
            member: 1,
            session_timeout_ms: 10,
            ..join
        };
        assert!(
            JoinConsumerGroup::from_bytes(&join.to_vec()).is_err(),
            "10 ms"
        );
    }
}
