//! Consumer groups in the catalog: members, generations and the sticky
//! assignment of a topic's partitions among the members.
//!
//! A group is created by its first `JoinConsumerGroup` and reads one topic. Every
//! change of members (a join, a leave, a removal after a session timeout)
//! and every change of the topic's partition count raises the generation
//! and reassigns: members keep the partitions they had as far as the even
//! split allows, and only the rest move ([`assign`]). Everything here is
//! applied in metadata op order on every node, so every catalog agrees;
//! heartbeats and session deadlines are the coordinator's, not the
//! catalog's (they are not replicated).
//!
//! Bounds: [`CONSUMER_GROUPS_MAX`] groups (a join creating one more is refused),
//! [`CONSUMER_GROUP_MEMBERS_MAX`] members per group (a join past it is refused).
//! Deleting a topic forgets the groups that read it.

use std::collections::BTreeMap;

use bytes::Bytes;
use strand_wire::ops::{
    CONSUMER_GROUP_MEMBERS_MAX, CONSUMER_GROUPS_MAX, ConsumerGroupAssignment, ConsumerGroupFence,
    ConsumerGroupInfo, DescribeConsumerGroupsReply, ErrorBody, JoinConsumerGroup,
    LeaveConsumerGroup, MemberInfo,
};
use strand_wire::{Body, ResultCode};

use crate::catalog::Catalog;

/// One member as the catalog keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// How long the coordinator waits for its heartbeat.
    pub session_timeout_ms: u32,
}

/// One consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroup {
    /// Its topic's stream.
    pub stream: String,
    /// Its topic.
    pub topic: String,
    /// Raised by every change of members or partitions.
    pub generation: u64,
    /// Members by id.
    pub members: BTreeMap<u128, GroupMember>,
    /// Each partition's member (by partition index); `None` while the group
    /// has no members.
    pub owners: Vec<Option<u128>>,
}

impl ConsumerGroup {
    /// The partitions `member` reads, ascending.
    pub fn partitions_of(&self, member: u128) -> Vec<u32> {
        (0..self.owners.len() as u32)
            .filter(|partition| self.owners[*partition as usize] == Some(member))
            .collect()
    }

    /// `member`'s part of the group now.
    pub fn assignment_of(&self, member: u128) -> ConsumerGroupAssignment {
        ConsumerGroupAssignment {
            generation: self.generation,
            partitions: self.partitions_of(member),
            member_count: self.members.len() as u32,
        }
    }

    /// Whether a store of this group's cursor on `partition` under `fence`
    /// may go on: `Ok` when the member owns the partition in the fence's
    /// generation; `StaleGeneration` when that generation is over or the
    /// partition is another's; `NotReady` when the fence names a generation
    /// this catalog has not reached yet (the node lags the metadata plane).
    pub fn check_fence(&self, partition: u32, fence: &ConsumerGroupFence) -> Result<(), ErrorBody> {
        if fence.generation > self.generation {
            return Err(ErrorBody::message(
                ResultCode::NotReady,
                format!(
                    "this node knows generation {} of the group, the member works in {}: retry",
                    self.generation, fence.generation
                ),
            ));
        }
        let owner = self.owners.get(partition as usize).copied().flatten();
        if fence.generation < self.generation || owner != Some(fence.member) {
            return Err(ErrorBody::message(
                ResultCode::StaleGeneration,
                format!(
                    "generation {} of the group gives partition {partition} to another member \
                     (the member stored for generation {}): heartbeat for the new assignment",
                    self.generation, fence.generation
                ),
            ));
        }
        Ok(())
    }

    /// Raises the generation and reassigns over `partition_count` partitions.
    fn rebalance(&mut self, partition_count: usize) {
        self.generation += 1;
        self.owners = assign(&self.owners, &self.members, partition_count);
        self.assert_invariants();
    }

    /// Every partition has an owner exactly while the group has members;
    /// every owner is a member; shares differ by at most one.
    pub fn assert_invariants(&self) {
        if let Some(fault) = self.fault() {
            panic!("{fault}: {self:?}");
        }
    }

    /// The first invariant of [`Self::assert_invariants`] this group
    /// breaks, if any (a decoded catalog image is held to the same rules).
    pub(crate) fn fault(&self) -> Option<&'static str> {
        if self.members.len() > CONSUMER_GROUP_MEMBERS_MAX {
            return Some("a group holds at most CONSUMER_GROUP_MEMBERS_MAX members");
        }
        let mut counts: BTreeMap<u128, usize> =
            self.members.keys().map(|member| (*member, 0)).collect();
        for owner in &self.owners {
            match owner.map(|member| counts.get_mut(&member)) {
                Some(Some(count)) => *count += 1,
                Some(None) => return Some("every owner is a member"),
                None if !self.members.is_empty() => {
                    return Some("every partition has an owner while the group has members");
                }
                None => {}
            }
        }
        let (low, high) = (counts.values().min(), counts.values().max());
        match (low, high) {
            (Some(low), Some(high)) if high - low > 1 => Some("shares differ by at most one"),
            _ => None,
        }
    }
}

/// The sticky assignment of `partition_count` partitions among `members`:
/// shares differ by at most one; a member keeps the partitions it had
/// (lowest first) up to its share, and the members that had the most keep
/// the larger shares; partitions left over go, ascending, to the members
/// below their share, in id order. Deterministic.
pub fn assign(
    previous: &[Option<u128>],
    members: &BTreeMap<u128, GroupMember>,
    partition_count: usize,
) -> Vec<Option<u128>> {
    if members.is_empty() {
        return vec![None; partition_count];
    }
    let mut kept: BTreeMap<u128, Vec<usize>> =
        members.keys().map(|member| (*member, Vec::new())).collect();
    for (partition, owner) in previous.iter().enumerate().take(partition_count) {
        if let Some(partitions) = owner.and_then(|owner| kept.get_mut(&owner)) {
            partitions.push(partition);
        }
    }
    let base = partition_count / members.len();
    let mut larger = partition_count % members.len();
    // Who gets the larger shares: the members that keep the most.
    let mut by_kept: Vec<(usize, u128)> = kept
        .iter()
        .map(|(member, partitions)| (partitions.len(), *member))
        .collect();
    by_kept.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut share: BTreeMap<u128, usize> = BTreeMap::new();
    for (_, member) in by_kept {
        let extra = usize::from(larger > 0);
        larger -= extra;
        share.insert(member, base + extra);
    }
    assert_eq!(
        share.values().sum::<usize>(),
        partition_count,
        "the members' shares do not add up to the partitions"
    );
    let mut owners = vec![None; partition_count];
    for (member, partitions) in &kept {
        for partition in partitions.iter().take(share[member]) {
            owners[*partition] = Some(*member);
        }
    }
    let free: Vec<usize> = (0..partition_count)
        .filter(|partition| owners[*partition].is_none())
        .collect();
    let mut free = free.into_iter();
    for (member, want) in &share {
        let have = owners
            .iter()
            .filter(|owner| **owner == Some(*member))
            .count();
        for _ in have..*want {
            let partition = free.next().expect("shares add up to the partitions");
            owners[partition] = Some(*member);
        }
    }
    owners
}

fn unknown_group(group: &str) -> ErrorBody {
    ErrorBody::message(
        ResultCode::UnknownMember,
        format!("consumer group {group} does not exist (or no longer holds the member): join it"),
    )
}

impl Catalog {
    /// Applies a `JoinConsumerGroup`.
    pub(crate) fn join_group(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let join = JoinConsumerGroup::from_bytes(body).map_err(crate::catalog::invalid)?;
        let partition_count = self.topic_entry(&join.stream, &join.topic)?.groups.len();
        if !self.consumer_groups.contains_key(&join.group)
            && self.consumer_groups.len() >= CONSUMER_GROUPS_MAX
        {
            return Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!(
                    "the cluster holds {CONSUMER_GROUPS_MAX} consumer groups, the most it keeps"
                ),
            ));
        }
        let group = self
            .consumer_groups
            .entry(join.group.clone())
            .or_insert_with(|| ConsumerGroup {
                stream: join.stream.clone(),
                topic: join.topic.clone(),
                generation: 0,
                members: BTreeMap::new(),
                owners: vec![None; partition_count],
            });
        if (group.stream.as_str(), group.topic.as_str()) != (&join.stream, &join.topic) {
            return Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!(
                    "consumer group {} reads {}/{}, not {}/{}",
                    join.group, group.stream, group.topic, join.stream, join.topic
                ),
            ));
        }
        let member = GroupMember {
            session_timeout_ms: join.session_timeout_ms,
        };
        match group.members.get(&join.member) {
            Some(known) if *known == member => {} // joined again: nothing changes
            Some(_) => {
                group.members.insert(join.member, member);
            }
            None if group.members.len() >= CONSUMER_GROUP_MEMBERS_MAX => {
                return Err(ErrorBody::message(
                    ResultCode::InvalidRequest,
                    format!(
                        "consumer group {} has {CONSUMER_GROUP_MEMBERS_MAX} members, the most it holds",
                        join.group
                    ),
                ));
            }
            None => {
                group.members.insert(join.member, member);
                group.rebalance(partition_count);
            }
        }
        Ok(Bytes::from(group.assignment_of(join.member).to_vec()))
    }

    /// Applies a `LeaveConsumerGroup`.
    pub(crate) fn leave_group(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let leave = LeaveConsumerGroup::from_bytes(body).map_err(crate::catalog::invalid)?;
        let Some(group) = self.consumer_groups.get(&leave.group) else {
            return Ok(Bytes::new());
        };
        let partition_count = group.owners.len();
        let group = self
            .consumer_groups
            .get_mut(&leave.group)
            .expect("looked up above");
        if group.members.remove(&leave.member).is_some() {
            group.rebalance(partition_count);
        }
        Ok(Bytes::new())
    }

    /// The topic `stream/topic` now has `partition_count` partitions: its
    /// groups reassign.
    pub(crate) fn consumer_groups_grew(
        &mut self,
        stream: &str,
        topic: &str,
        partition_count: usize,
    ) {
        for group in self.consumer_groups.values_mut() {
            if (group.stream.as_str(), group.topic.as_str()) == (stream, topic) {
                assert!(
                    partition_count >= group.owners.len(),
                    "topic {stream}/{topic} shrank from {} partitions to {partition_count}",
                    group.owners.len()
                );
                group.rebalance(partition_count);
            }
        }
    }

    /// The topic `stream/topic` was deleted: its groups are forgotten.
    pub(crate) fn forget_consumer_groups(&mut self, stream: &str, topic: &str) {
        self.consumer_groups
            .retain(|_, group| (group.stream.as_str(), group.topic.as_str()) != (stream, topic));
    }

    /// `member`'s part of `group` now; `UnknownMember` when the group does
    /// not hold it.
    pub fn member_assignment(
        &self,
        group: &str,
        member: u128,
    ) -> Result<ConsumerGroupAssignment, ErrorBody> {
        self.consumer_groups
            .get(group)
            .filter(|found| found.members.contains_key(&member))
            .map(|found| found.assignment_of(member))
            .ok_or_else(|| unknown_group(group))
    }

    /// The answer to a `DescribeConsumerGroups` for `group` (empty: every group).
    pub fn describe_groups(&self, group: &str) -> DescribeConsumerGroupsReply {
        let groups = self
            .consumer_groups
            .iter()
            .filter(|(name, _)| group.is_empty() || name.as_str() == group)
            .map(|(name, found)| ConsumerGroupInfo {
                group: name.clone(),
                stream: found.stream.clone(),
                topic: found.topic.clone(),
                generation: found.generation,
                members: found
                    .members
                    .iter()
                    .map(|(member, info)| MemberInfo {
                        member: *member,
                        session_timeout_ms: info.session_timeout_ms,
                        partitions: found.partitions_of(*member),
                    })
                    .collect(),
                partition_groups: self
                    .streams
                    .get(&found.stream)
                    .and_then(|topics| topics.get(&found.topic))
                    .map(|entry| entry.groups.clone())
                    .unwrap_or_default(),
            })
            .collect();
        DescribeConsumerGroupsReply {
            applied_op: self.applied_op,
            groups,
        }
    }

    /// The consumer group named `name`, if any.
    pub fn consumer_group(&self, name: &str) -> Option<&ConsumerGroup> {
        self.consumer_groups.get(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(ids: &[u128]) -> BTreeMap<u128, GroupMember> {
        ids.iter()
            .map(|id| {
                (
                    *id,
                    GroupMember {
                        session_timeout_ms: 1000,
                    },
                )
            })
            .collect()
    }

    fn counts(owners: &[Option<u128>]) -> BTreeMap<u128, usize> {
        let mut counts = BTreeMap::new();
        for owner in owners.iter().flatten() {
            *counts.entry(*owner).or_default() += 1;
        }
        counts
    }

    fn moved(before: &[Option<u128>], after: &[Option<u128>]) -> usize {
        before
            .iter()
            .zip(after)
            .filter(|(before, after)| before.is_some() && before != after)
            .count()
    }

    #[test]
    fn shares_are_even_and_a_rebalance_moves_only_what_it_must() {
        let three = assign(&[], &members(&[1, 2, 3]), 12);
        assert_eq!(
            counts(&three).values().copied().collect::<Vec<_>>(),
            [4, 4, 4]
        );
        let four = assign(&three, &members(&[1, 2, 3, 4]), 12);
        assert_eq!(
            counts(&four).values().copied().collect::<Vec<_>>(),
            [3, 3, 3, 3]
        );
        assert_eq!(moved(&three, &four), 3, "one partition from each of three");
        let without_two = assign(&four, &members(&[1, 3, 4]), 12);
        assert_eq!(moved(&four, &without_two), 3, "only member 2's move");
        let odd = assign(&without_two, &members(&[1, 3, 4, 9, 10]), 12);
        let shares = counts(&odd);
        assert!(shares.values().all(|share| (2..=3).contains(share)));
        assert_eq!(assign(&odd, &BTreeMap::new(), 12), vec![None; 12]);
        let grown = assign(&four, &members(&[1, 2, 3, 4]), 16);
        assert_eq!(moved(&four, &grown), 0, "new partitions go to everyone");
        assert!(counts(&grown).values().all(|share| *share == 4));
    }

    #[test]
    fn fences_admit_only_the_owner_in_the_current_generation() {
        let mut group = ConsumerGroup {
            stream: "s".to_owned(),
            topic: "t".to_owned(),
            generation: 0,
            members: members(&[1, 2]),
            owners: Vec::new(),
        };
        group.rebalance(4);
        let owner = group.owners[0].expect("owned");
        let other = if owner == 1 { 2 } else { 1 };
        let fence = |member, generation| ConsumerGroupFence { member, generation };
        assert!(group.check_fence(0, &fence(owner, 1)).is_ok());
        let code = |result: Result<(), ErrorBody>| result.map_err(|error| error.code());
        assert_eq!(
            code(group.check_fence(0, &fence(other, 1))),
            Err(ResultCode::StaleGeneration)
        );
        assert_eq!(
            code(group.check_fence(0, &fence(owner, 2))),
            Err(ResultCode::NotReady)
        );
        group.members.remove(&other);
        group.rebalance(4);
        assert_eq!(
            code(group.check_fence(0, &fence(owner, 1))),
            Err(ResultCode::StaleGeneration),
            "a zombie of generation 1"
        );
        assert!(group.check_fence(3, &fence(owner, 2)).is_ok());
    }
}
