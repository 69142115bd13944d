//! The Kafka group coordinator: the classic consumer group protocol's
//! memberships, generations and rebalances, kept in memory on the node
//! that leads the metadata plane (any other node answers
//! `NOT_COORDINATOR`, and members find it again). The members assign
//! partitions themselves; the coordinator gathers their joins into a
//! generation, hands the leader every member's metadata, and hands each
//! member the leader's assignment.
//!
//! Nothing here outlives the node: when the coordinator moves, members
//! rejoin at the new one, as they do when a Kafka coordinator moves. What
//! must outlive it, the group's offsets, are the partitions' cursors.
//!
//! Bounds: [`GROUPS_MAX`] groups, [`MEMBERS_MAX`] members a group, and
//! [`PENDING_MAX`] member ids handed out and not yet used, a group.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use strand_kafka::errors::code;
use strand_kafka::groups::{DescribedGroup, DescribedMember, JoinGroup, Joined, Listed};
use tokio::sync::oneshot;

/// Groups one coordinator keeps at most.
pub const GROUPS_MAX: usize = 10_000;
/// Members one group may have.
pub const MEMBERS_MAX: usize = 1_000;
/// Member ids handed out (`MEMBER_ID_REQUIRED`) and not yet joined with.
pub const PENDING_MAX: usize = 1_000;
/// Characters of a client's name a member id keeps.
pub const MEMBER_NAME_CHARS_MAX: usize = 64;
/// Shortest and longest session timeout taken.
pub const SESSION_TIMEOUT_MS: (i32, i32) = (1_000, 1_800_000);

/// Where a group's rebalance stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No members.
    Empty,
    /// Gathering joins until every member rejoined or the deadline.
    Joining { deadline: Instant },
    /// A generation formed; waiting for the leader's assignment.
    Syncing,
    /// Every member has its assignment.
    Stable,
}

impl Phase {
    /// The state's name as Kafka's group APIs say it.
    fn name(self) -> &'static str {
        match self {
            Phase::Empty => "Empty",
            Phase::Joining { .. } => "PreparingRebalance",
            Phase::Syncing => "CompletingRebalance",
            Phase::Stable => "Stable",
        }
    }
}

/// One member of a group.
#[derive(Debug)]
struct Member {
    instance: Option<String>,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    protocols: Vec<(String, Bytes)>,
    heard: Instant,
    joining: Option<oneshot::Sender<Joined>>,
    syncing: Option<oneshot::Sender<(i16, Bytes)>>,
    assignment: Bytes,
}

/// One group.
#[derive(Debug)]
struct Group {
    phase: Phase,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    pending: BTreeMap<String, Instant>,
    next_member: u64,
}

/// What a join or sync gets: an answer now, or one to wait for.
pub enum Outcome<T> {
    /// Answered now.
    Now(T),
    /// Answered when the rebalance gets there.
    Later(oneshot::Receiver<T>),
}

/// Every group this node coordinates.
#[derive(Debug, Default)]
pub struct Coordinator {
    groups: BTreeMap<String, Group>,
}

impl Group {
    fn new() -> Group {
        Group {
            phase: Phase::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: BTreeMap::new(),
            next_member: 0,
        }
    }

    /// A new member id, unique in the group.
    fn new_member_id(&mut self, client_id: &str) -> String {
        self.next_member += 1;
        let salt: u64 = rand::random();
        // The client's name, cut short: a member id is echoed in every
        // answer to the group, and a client picks its own name.
        let name: String = client_id.chars().take(MEMBER_NAME_CHARS_MAX).collect();
        format!("{name}-{}-{salt:016x}", self.next_member)
    }

    /// Starts (or keeps) gathering joins; the deadline is the longest
    /// rebalance timeout of the members.
    fn start_rebalance(&mut self, now: Instant) {
        if matches!(self.phase, Phase::Joining { .. }) {
            return;
        }
        for member in self.members.values_mut() {
            if let Some(syncing) = member.syncing.take() {
                let _ = syncing.send((code::REBALANCE_IN_PROGRESS, Bytes::new()));
            }
        }
        let timeout = self
            .members
            .values()
            .map(|member| member.rebalance_timeout)
            .max()
            .unwrap_or_default();
        self.phase = Phase::Joining {
            deadline: now + timeout,
        };
    }

    /// Forms the next generation once every member rejoined or the
    /// deadline passed (members that did not rejoin are removed).
    fn try_complete_join(&mut self, now: Instant) {
        let Phase::Joining { deadline } = self.phase else {
            return;
        };
        let all_joined = self.members.values().all(|member| member.joining.is_some());
        if !all_joined && now < deadline {
            return;
        }
        self.members.retain(|_, member| member.joining.is_some());
        self.generation = self.generation.wrapping_add(1).max(1);
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            self.leader = None;
            self.protocol = None;
            return;
        }
        self.protocol = self.choose_protocol();
        if self
            .leader
            .as_ref()
            .is_none_or(|leader| !self.members.contains_key(leader))
        {
            self.leader = self.members.keys().next().cloned();
        }
        self.phase = Phase::Syncing;
        self.answer_joins();
    }

    /// The first of the leader's protocols that every member speaks.
    fn choose_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        first
            .protocols
            .iter()
            .map(|(name, _)| name)
            .find(|name| {
                self.members
                    .values()
                    .all(|member| member.protocols.iter().any(|(other, _)| other == *name))
            })
            .cloned()
    }

    /// Answers every waiting join with the new generation; the leader's
    /// answer lists the members.
    fn answer_joins(&mut self) {
        let protocol = self.protocol.clone();
        let listed: Vec<(String, Option<String>, Bytes)> = self
            .members
            .iter()
            .map(|(id, member)| {
                let metadata = member
                    .protocols
                    .iter()
                    .find(|(name, _)| Some(name) == protocol.as_ref())
                    .map(|(_, metadata)| metadata.clone())
                    .unwrap_or_default();
                (id.clone(), member.instance.clone(), metadata)
            })
            .collect();
        let leader = self.leader.clone().unwrap_or_default();
        for (id, member) in &mut self.members {
            let Some(joining) = member.joining.take() else {
                continue;
            };
            let members = match *id == leader {
                true => listed.clone(),
                false => Vec::new(),
            };
            let _ = joining.send(Joined {
                error_code: code::NONE,
                generation_id: self.generation,
                protocol_type: self.protocol_type.clone(),
                protocol_name: protocol.clone(),
                leader: leader.clone(),
                member_id: id.clone(),
                members,
            });
        }
    }

    /// Removes `member`, answering what it waits for, and rebalances the
    /// rest.
    fn remove(&mut self, member: &str, now: Instant) {
        let Some(mut gone) = self.members.remove(member) else {
            return;
        };
        if let Some(joining) = gone.joining.take() {
            let _ = joining.send(failed_join(code::UNKNOWN_MEMBER_ID, member));
        }
        if let Some(syncing) = gone.syncing.take() {
            let _ = syncing.send((code::UNKNOWN_MEMBER_ID, Bytes::new()));
        }
        match self.members.is_empty() {
            true => {
                self.phase = Phase::Empty;
                self.leader = None;
            }
            false => {
                self.start_rebalance(now);
                self.try_complete_join(now);
            }
        }
    }
}

/// A join that failed with `error_code`.
pub fn failed_join(error_code: i16, member_id: &str) -> Joined {
    Joined {
        error_code,
        generation_id: -1,
        member_id: member_id.to_owned(),
        ..Joined::default()
    }
}

impl Coordinator {
    /// A JoinGroup from client `client_id` at request version `version`.
    pub fn join(
        &mut self,
        join: JoinGroup,
        client_id: &str,
        version: i16,
        now: Instant,
    ) -> Outcome<Joined> {
        let member_id = join.member_id.clone();
        let (min, max) = SESSION_TIMEOUT_MS;
        if !(min..=max).contains(&join.session_timeout_ms) {
            return Outcome::Now(failed_join(code::INVALID_SESSION_TIMEOUT, &member_id));
        }
        if !self.groups.contains_key(&join.group_id) && self.groups.len() >= GROUPS_MAX {
            return Outcome::Now(failed_join(code::GROUP_MAX_SIZE_REACHED, &member_id));
        }
        let group = self
            .groups
            .entry(join.group_id.clone())
            .or_insert_with(Group::new);
        if let Some(refusal) = refusal(group, &join) {
            return Outcome::Now(refusal);
        }
        let member_id = match admitted_id(group, &join, client_id, version, now) {
            Ok(member_id) => member_id,
            Err((error_code, member_id)) => {
                return Outcome::Now(failed_join(error_code, &member_id));
            }
        };
        group.pending.remove(&member_id);
        if group.protocol_type.is_none() {
            group.protocol_type = Some(join.protocol_type.clone());
        }
        let (sender, receiver) = oneshot::channel();
        let member = group.members.entry(member_id).or_insert_with(|| Member {
            instance: join.group_instance_id.clone(),
            session_timeout: Duration::ZERO,
            rebalance_timeout: Duration::ZERO,
            protocols: Vec::new(),
            heard: now,
            joining: None,
            syncing: None,
            assignment: Bytes::new(),
        });
        member.session_timeout = Duration::from_millis(join.session_timeout_ms as u64);
        member.rebalance_timeout = Duration::from_millis(join.rebalance_timeout_ms.max(0) as u64);
        member.protocols = join.protocols;
        member.heard = now;
        if let Some(previous) = member.joining.replace(sender) {
            let _ = previous.send(failed_join(code::REBALANCE_IN_PROGRESS, &join.member_id));
        }
        group.start_rebalance(now);
        group.try_complete_join(now);
        Outcome::Later(receiver)
    }

    /// A SyncGroup: the member's assignment, now or once the leader sends
    /// it.
    pub fn sync(
        &mut self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        assignments: Vec<(String, Bytes)>,
        now: Instant,
    ) -> Outcome<(i16, Bytes)> {
        let Some(group) = self.groups.get_mut(group_id) else {
            return Outcome::Now((code::UNKNOWN_MEMBER_ID, Bytes::new()));
        };
        let Some(member) = group.members.get_mut(member_id) else {
            return Outcome::Now((code::UNKNOWN_MEMBER_ID, Bytes::new()));
        };
        member.heard = now;
        if generation != group.generation {
            return Outcome::Now((code::ILLEGAL_GENERATION, Bytes::new()));
        }
        match group.phase {
            Phase::Empty | Phase::Joining { .. } => {
                Outcome::Now((code::REBALANCE_IN_PROGRESS, Bytes::new()))
            }
            Phase::Stable => Outcome::Now((code::NONE, member.assignment.clone())),
            Phase::Syncing if group.leader.as_deref() == Some(member_id) => {
                assign(group, assignments);
                let own = group
                    .members
                    .get(member_id)
                    .map(|member| member.assignment.clone());
                Outcome::Now((code::NONE, own.unwrap_or_default()))
            }
            Phase::Syncing => {
                let (sender, receiver) = oneshot::channel();
                member.syncing = Some(sender);
                Outcome::Later(receiver)
            }
        }
    }

    /// A Heartbeat: the error code to answer.
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        now: Instant,
    ) -> i16 {
        let Some(group) = self.groups.get_mut(group_id) else {
            return code::UNKNOWN_MEMBER_ID;
        };
        let Some(member) = group.members.get_mut(member_id) else {
            return code::UNKNOWN_MEMBER_ID;
        };
        member.heard = now;
        match (generation == group.generation, group.phase) {
            (false, _) => code::ILLEGAL_GENERATION,
            (true, Phase::Joining { .. }) => code::REBALANCE_IN_PROGRESS,
            (true, _) => code::NONE,
        }
    }

    /// A LeaveGroup: each member's error code (by member id, or for a
    /// static member by its instance id).
    pub fn leave(
        &mut self,
        group_id: &str,
        leaving: &[(String, Option<String>)],
        now: Instant,
    ) -> Vec<i16> {
        let Some(group) = self.groups.get_mut(group_id) else {
            return vec![code::UNKNOWN_MEMBER_ID; leaving.len()];
        };
        leaving
            .iter()
            .map(|(member_id, instance)| {
                let found = match instance {
                    Some(instance) => group
                        .members
                        .iter()
                        .find(|(_, member)| member.instance.as_ref() == Some(instance))
                        .map(|(id, _)| id.clone()),
                    None => group
                        .members
                        .contains_key(member_id)
                        .then(|| member_id.clone()),
                };
                match found {
                    Some(id) => {
                        group.remove(&id, now);
                        code::NONE
                    }
                    None => code::UNKNOWN_MEMBER_ID,
                }
            })
            .collect()
    }

    /// Whether `member` of generation `generation` may commit offsets: a
    /// member of the current generation may, and a consumer outside any
    /// generation (generation -1) may while the group has no members.
    pub fn may_commit(&self, group_id: &str, generation: i32, member_id: &str) -> i16 {
        let Some(group) = self.groups.get(group_id) else {
            return match generation < 0 {
                true => code::NONE,
                false => code::ILLEGAL_GENERATION,
            };
        };
        if generation < 0 && member_id.is_empty() {
            return match group.members.is_empty() {
                true => code::NONE,
                false => code::REBALANCE_IN_PROGRESS,
            };
        }
        match (
            group.members.contains_key(member_id),
            generation == group.generation,
        ) {
            (false, _) => code::UNKNOWN_MEMBER_ID,
            (true, false) => code::ILLEGAL_GENERATION,
            (true, true) => code::NONE,
        }
    }

    /// Removes members whose session ran out, forms generations whose
    /// deadline passed, forgets member ids never used and groups left
    /// empty.
    pub fn sweep(&mut self, now: Instant) {
        for group in self.groups.values_mut() {
            let expired: Vec<String> = group
                .members
                .iter()
                .filter(|(_, member)| {
                    member.joining.is_none() && member.heard + member.session_timeout < now
                })
                .map(|(id, _)| id.clone())
                .collect();
            for member in expired {
                group.remove(&member, now);
            }
            group
                .pending
                .retain(|_, handed| now.duration_since(*handed) < Duration::from_secs(300));
            group.try_complete_join(now);
        }
        self.groups
            .retain(|_, group| !(group.phase == Phase::Empty && group.pending.is_empty()));
    }

    /// Every group coordinated here (in one of `states`, when given): id,
    /// protocol type, state.
    pub fn list(&self, states: &[String]) -> Vec<Listed> {
        self.groups
            .iter()
            .map(|(id, group)| {
                let protocol_type = group.protocol_type.clone().unwrap_or_default();
                (id.clone(), protocol_type, group.phase.name().to_owned())
            })
            .filter(|(_, _, state)| {
                states.is_empty() || states.iter().any(|wanted| wanted == state)
            })
            .collect()
    }

    /// One group: its state, protocol and members (`Dead` when unknown).
    pub fn describe(&self, group_id: &str) -> DescribedGroup {
        let Some(group) = self.groups.get(group_id) else {
            return DescribedGroup {
                group_id: group_id.to_owned(),
                state: "Dead".to_owned(),
                ..DescribedGroup::default()
            };
        };
        let protocol = group.protocol.clone().unwrap_or_default();
        let members = group
            .members
            .iter()
            .map(|(id, member)| DescribedMember {
                member_id: id.clone(),
                instance: member.instance.clone(),
                metadata: member
                    .protocols
                    .iter()
                    .find(|(name, _)| *name == protocol)
                    .map(|(_, metadata)| metadata.clone())
                    .unwrap_or_default(),
                assignment: member.assignment.clone(),
            })
            .collect();
        DescribedGroup {
            error_code: code::NONE,
            group_id: group_id.to_owned(),
            state: group.phase.name().to_owned(),
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            protocol,
            members,
        }
    }

    /// Deletes a group that has no members (`NON_EMPTY_GROUP` otherwise).
    /// Its offsets stay in the partitions' cursors.
    pub fn delete(&mut self, group_id: &str) -> i16 {
        match self.groups.get(group_id) {
            Some(group) if !group.members.is_empty() => code::NON_EMPTY_GROUP,
            _ => {
                self.groups.remove(group_id);
                code::NONE
            }
        }
    }

    /// How many groups are coordinated here.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether no group is coordinated here.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

/// Why a join is refused before it counts: another protocol type, or no
/// protocol in common with the group's members.
fn refusal(group: &Group, join: &JoinGroup) -> Option<Joined> {
    let inconsistent = || {
        Some(failed_join(
            code::INCONSISTENT_GROUP_PROTOCOL,
            &join.member_id,
        ))
    };
    if join.protocols.is_empty() {
        return inconsistent();
    }
    if !group.members.is_empty() && group.protocol_type.as_deref() != Some(&join.protocol_type) {
        return inconsistent();
    }
    let others = group
        .members
        .iter()
        .filter(|(id, _)| **id != join.member_id);
    let shares = |(_, member): (&String, &Member)| {
        member
            .protocols
            .iter()
            .any(|(name, _)| join.protocols.iter().any(|(other, _)| other == name))
    };
    if !others.clone().all(shares) {
        return inconsistent();
    }
    None
}

/// The member id a join takes part under: its own, its static instance's,
/// or a new one; a new dynamic member of a v4+ client is first told its id
/// (`MEMBER_ID_REQUIRED`) and joins again with it.
fn admitted_id(
    group: &mut Group,
    join: &JoinGroup,
    client_id: &str,
    version: i16,
    now: Instant,
) -> Result<String, (i16, String)> {
    if !join.member_id.is_empty() {
        let known = group.members.contains_key(&join.member_id)
            || group.pending.contains_key(&join.member_id);
        return match known {
            true => Ok(join.member_id.clone()),
            false => Err((code::UNKNOWN_MEMBER_ID, join.member_id.clone())),
        };
    }
    if let Some(instance) = &join.group_instance_id {
        let existing = group
            .members
            .iter()
            .find(|(_, member)| member.instance.as_ref() == Some(instance))
            .map(|(id, _)| id.clone());
        if let Some(existing) = existing {
            return Ok(existing);
        }
    }
    if group.members.len() >= MEMBERS_MAX || group.pending.len() >= PENDING_MAX {
        return Err((code::GROUP_MAX_SIZE_REACHED, String::new()));
    }
    let member_id = group.new_member_id(client_id);
    if version >= 4 && join.group_instance_id.is_none() {
        group.pending.insert(member_id.clone(), now);
        return Err((code::MEMBER_ID_REQUIRED, member_id));
    }
    Ok(member_id)
}

/// The leader's assignment, handed to every member: the group is stable.
fn assign(group: &mut Group, assignments: Vec<(String, Bytes)>) {
    let mut by_member: BTreeMap<String, Bytes> = assignments.into_iter().collect();
    for (id, member) in &mut group.members {
        member.assignment = by_member.remove(id).unwrap_or_default();
        if let Some(syncing) = member.syncing.take() {
            let _ = syncing.send((code::NONE, member.assignment.clone()));
        }
    }
    group.phase = Phase::Stable;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(member: &str, session_ms: i32) -> JoinGroup {
        JoinGroup {
            group_id: "g".to_owned(),
            session_timeout_ms: session_ms,
            rebalance_timeout_ms: 10_000,
            member_id: member.to_owned(),
            group_instance_id: None,
            protocol_type: "consumer".to_owned(),
            protocols: vec![("range".to_owned(), Bytes::from_static(b"meta"))],
        }
    }

    fn joined(outcome: Outcome<Joined>) -> Joined {
        match outcome {
            Outcome::Now(joined) => joined,
            Outcome::Later(mut answer) => answer.try_recv().expect("answered"),
        }
    }

    #[test]
    fn a_new_member_is_told_its_id_then_joins_with_it() {
        let mut coordinator = Coordinator::default();
        let now = Instant::now();
        let told = joined(coordinator.join(join("", 10_000), "c", 4, now));
        assert_eq!(told.error_code, code::MEMBER_ID_REQUIRED);
        let member = told.member_id;
        let first = joined(coordinator.join(join(&member, 10_000), "c", 4, now));
        assert_eq!((first.error_code, first.generation_id), (code::NONE, 1));
        assert_eq!(first.leader, member);
        assert_eq!(first.members.len(), 1, "the leader sees every member");
        let unknown = joined(coordinator.join(join("stranger", 10_000), "c", 4, now));
        assert_eq!(unknown.error_code, code::UNKNOWN_MEMBER_ID);
    }

    #[test]
    fn a_second_member_rebalances_the_group_and_gets_the_leaders_assignment() {
        let mut coordinator = Coordinator::default();
        let now = Instant::now();
        let first = joined(coordinator.join(join("", 10_000), "a", 3, now)).member_id;
        let Outcome::Later(mut second) = coordinator.join(join("", 10_000), "b", 3, now) else {
            panic!("the second member waits for the first to rejoin");
        };
        assert!(second.try_recv().is_err());
        assert_eq!(
            coordinator.heartbeat("g", 1, &first, now),
            code::REBALANCE_IN_PROGRESS
        );
        let leader = joined(coordinator.join(join(&first, 10_000), "a", 3, now));
        let follower = second.try_recv().expect("the generation formed");
        assert_eq!((leader.generation_id, follower.generation_id), (2, 2));
        assert_eq!(leader.members.len(), 2);
        assert!(follower.members.is_empty());
        let Outcome::Later(mut waiting) =
            coordinator.sync("g", 2, &follower.member_id, Vec::new(), now)
        else {
            panic!("a follower waits for the leader's assignment");
        };
        let assignments = vec![
            (first.clone(), Bytes::from_static(b"p0")),
            (follower.member_id.clone(), Bytes::from_static(b"p1")),
        ];
        let Outcome::Now(own) = coordinator.sync("g", 2, &first, assignments, now) else {
            panic!("the leader is answered at once");
        };
        assert_eq!(own, (code::NONE, Bytes::from_static(b"p0")));
        assert_eq!(
            waiting.try_recv().expect("handed out"),
            (code::NONE, Bytes::from_static(b"p1"))
        );
        assert_eq!(coordinator.heartbeat("g", 2, &first, now), code::NONE);
        assert_eq!(
            coordinator.heartbeat("g", 1, &first, now),
            code::ILLEGAL_GENERATION
        );
        assert_eq!(coordinator.may_commit("g", 2, &first), code::NONE);
        assert_eq!(
            coordinator.may_commit("g", 1, &first),
            code::ILLEGAL_GENERATION
        );
        assert_eq!(
            coordinator.may_commit("g", -1, ""),
            code::REBALANCE_IN_PROGRESS
        );
    }

    #[test]
    fn a_silent_member_is_removed_and_the_rest_form_a_new_generation() {
        let mut coordinator = Coordinator::default();
        let now = Instant::now();
        let first = joined(coordinator.join(join("", 10_000), "a", 3, now)).member_id;
        let Outcome::Later(mut second) = coordinator.join(join("", 2_000), "b", 3, now) else {
            panic!("waits");
        };
        let _ = joined(coordinator.join(join(&first, 10_000), "a", 3, now));
        let second = second.try_recv().expect("joined").member_id;
        let later = now + Duration::from_secs(3);
        assert_eq!(coordinator.heartbeat("g", 2, &first, later), code::NONE);
        coordinator.sweep(later);
        assert_eq!(
            coordinator.heartbeat("g", 2, &second, later),
            code::UNKNOWN_MEMBER_ID
        );
        assert_eq!(
            coordinator.heartbeat("g", 2, &first, later),
            code::REBALANCE_IN_PROGRESS
        );
        let rejoined = joined(coordinator.join(join(&first, 10_000), "a", 3, later));
        assert_eq!((rejoined.generation_id, rejoined.members.len()), (3, 1));
        assert_eq!(
            coordinator.leave("g", &[(first, None)], later),
            vec![code::NONE]
        );
        coordinator.sweep(later);
        assert!(coordinator.is_empty(), "an empty group is forgotten");
    }
}
