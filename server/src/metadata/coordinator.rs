//! The consumer-group coordinator: the node whose metadata replica serves
//! as primary answers members' heartbeats (the group actor of group 0 does,
//! from its own catalog) and removes a member that has not been heard for
//! its session timeout, by a replicated `LeaveConsumerGroup { expired }`.
//!
//! Session deadlines live here, in memory, and only on the coordinator:
//! heartbeats are not replicated. A node that becomes the coordinator (the
//! metadata plane failed over to it) starts every member's deadline afresh,
//! so a failover removes nobody who keeps heartbeating; the group keeps its
//! assignment. Work per sweep is one look per member of every group, on
//! the coordinator only. This is the pure table; the node's task that
//! sweeps it and proposes removals is `session_sweep`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use strand_host::catalog::Catalog;
use strand_wire::ops::ConsumerHeartbeat;
use strand_wire::{Body, ResultCode};

/// How often the coordinator looks for expired members.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(200);

/// How long an expired member's removal, once proposed, is not proposed
/// again (it is retried after this if the member is still in the catalog).
const PROPOSAL_RETRY: Duration = Duration::from_secs(2);

/// One member of one consumer group.
type MemberKey = (String, u128);

/// Deadlines and proposals of the coordinator. See the module docs.
#[derive(Debug, Default)]
pub struct Coordinator {
    /// When each member must be heard from again.
    deadlines: BTreeMap<MemberKey, Instant>,
    /// Expired members whose removal was proposed, and when.
    proposed: BTreeMap<MemberKey, Instant>,
    /// Whether this node coordinated at the last sweep.
    leading: bool,
}

impl Coordinator {
    /// A heartbeat from `member` of `group` arrived (the member is in the
    /// coordinator's catalog): its deadline moves to `now + session`.
    pub fn heard(&mut self, group: &str, member: u128, session: Duration, now: Instant) {
        if self.leading {
            self.deadlines
                .insert((group.to_owned(), member), now + session);
        }
    }

    /// Looks at every member of `catalog`'s groups: returns the members
    /// whose deadline passed (each once per `PROPOSAL_RETRY`). A member
    /// not seen before gets a full session from `now`; deadlines of members
    /// the catalog no longer holds are forgotten. While this node does not
    /// coordinate (`leading` false) it keeps nothing.
    pub fn sweep(&mut self, catalog: &Catalog, leading: bool, now: Instant) -> Vec<MemberKey> {
        if !leading {
            self.deadlines.clear();
            self.proposed.clear();
            self.leading = false;
            return Vec::new();
        }
        self.leading = true;
        let mut expired = Vec::new();
        let mut present = BTreeSet::new();
        let described = catalog.describe_groups("");
        for group in &described.groups {
            for member in &group.members {
                let key = (group.group.clone(), member.member);
                let session = Duration::from_millis(u64::from(member.session_timeout_ms));
                let deadline = *self.deadlines.entry(key.clone()).or_insert(now + session);
                let recently_proposed = self
                    .proposed
                    .get(&key)
                    .is_some_and(|at| now.duration_since(*at) < PROPOSAL_RETRY);
                if deadline <= now && !recently_proposed {
                    self.proposed.insert(key.clone(), now);
                    expired.push(key.clone());
                }
                present.insert(key);
            }
        }
        self.deadlines.retain(|key, _| present.contains(key));
        self.proposed.retain(|key, _| present.contains(key));
        expired
    }
}

/// The answer to a member's heartbeat at the metadata plane's primary (the
/// coordinator), from its replica's `catalog`: the member's part of its
/// group, or why it has none (`UnknownMember`: join again). A member the
/// catalog holds has its deadline moved to `now` plus its session.
pub fn answer_heartbeat(
    coordinator: &Mutex<Coordinator>,
    catalog: &Catalog,
    heartbeat: &ConsumerHeartbeat,
    now: Instant,
) -> (ResultCode, Bytes) {
    let session = catalog
        .consumer_group(&heartbeat.group)
        .and_then(|group| group.members.get(&heartbeat.member))
        .map(|member| Duration::from_millis(u64::from(member.session_timeout_ms)));
    match catalog.member_assignment(&heartbeat.group, heartbeat.member) {
        Ok(assignment) => {
            if let Some(session) = session {
                coordinator.lock().expect("coordinator lock").heard(
                    &heartbeat.group,
                    heartbeat.member,
                    session,
                    now,
                );
            }
            (ResultCode::Ok, Bytes::from(assignment.to_vec()))
        }
        Err(error) => (error.code(), Bytes::from(error.to_vec())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use strand_consensus::StateMachine;
    use strand_wire::ops::{CreateStream, CreateTopic, JoinConsumerGroup};
    use strand_wire::{Body, CommandHeader, Operation, PrepareHeader, ViewId};

    fn apply(catalog: &mut Catalog, op: u64, operation: Operation, body: Vec<u8>) {
        let mut header = PrepareHeader::new(1, 0, ViewId::new(0, 0), 0);
        header.op.set(op);
        header.operation = operation as u8;
        let (result, reply) = catalog.commit(&header, Some(&Bytes::from(body)));
        assert_eq!(result, strand_wire::ResultCode::Ok, "{reply:?}");
    }

    fn catalog_with_member(member: u128) -> Catalog {
        let mut catalog = Catalog::new(vec![1, 2, 3]);
        let stream = CreateStream {
            name: "s".to_owned(),
        };
        apply(&mut catalog, 1, Operation::CreateStream, stream.to_vec());
        let topic = CreateTopic {
            stream: "s".into(),
            topic: "t".into(),
            partition_count: 2,
            replica_count: 3,
            confirm: None,
            durability: None,
            consumer_offset_durability: None,
            retention_bytes: 0,
            retention_ms: 0,
            segment_bytes: None,
        };
        apply(&mut catalog, 2, Operation::CreateTopic, topic.to_vec());
        let join = JoinConsumerGroup {
            group: "g".to_owned(),
            member,
            stream: "s".to_owned(),
            topic: "t".to_owned(),
            session_timeout_ms: 1000,
        };
        apply(&mut catalog, 3, Operation::JoinConsumerGroup, join.to_vec());
        catalog
    }

    #[test]
    fn a_member_not_heard_for_its_session_is_proposed_once_per_retry() {
        let catalog = catalog_with_member(7);
        let mut coordinator = Coordinator::default();
        let start = Instant::now();
        assert!(coordinator.sweep(&catalog, true, start).is_empty());
        coordinator.heard(
            "g",
            7,
            Duration::from_millis(1000),
            start + Duration::from_millis(900),
        );
        let at = |ms| start + Duration::from_millis(ms);
        assert!(
            coordinator.sweep(&catalog, true, at(1800)).is_empty(),
            "heard at 900"
        );
        assert_eq!(
            coordinator.sweep(&catalog, true, at(1900)),
            vec![("g".to_owned(), 7)]
        );
        assert!(
            coordinator.sweep(&catalog, true, at(2000)).is_empty(),
            "proposed already"
        );
        assert_eq!(
            coordinator.sweep(&catalog, true, at(3900)).len(),
            1,
            "retried"
        );
    }

    #[test]
    fn a_new_coordinator_gives_every_member_a_full_session() {
        let catalog = catalog_with_member(7);
        let mut coordinator = Coordinator::default();
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        coordinator.sweep(&catalog, true, start);
        assert!(coordinator.sweep(&catalog, false, at(500)).is_empty());
        coordinator.heard("g", 7, Duration::from_millis(1000), at(600));
        assert!(
            coordinator.sweep(&catalog, true, at(5000)).is_empty(),
            "a fresh session"
        );
        assert_eq!(coordinator.sweep(&catalog, true, at(6000)).len(), 1);
    }
}
