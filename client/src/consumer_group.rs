//! Consumer groups: the calls ([`Client::join_consumer_group`], heartbeat, leave,
//! describe) and [`ConsumerGroupMember`], which reads every partition the group
//! gives it and stores the group's offsets.
//!
//! The cluster keeps the group: its members, a generation raised by every
//! change, and which member reads which partition (sticky: a change moves
//! only what it must). The member heartbeats to the metadata plane's
//! primary (the coordinator); one that stops for its session timeout is
//! removed and its partitions go to the others. A group's offsets are the
//! cursors named after it on its partitions; a member stores them fenced by
//! its generation, so a member the group removed (a zombie) stores nothing.
//!
//! Delivery is at least once: after a rebalance or a failover a record may
//! be read again (by the new owner, from the group's stored offset), never
//! skipped: a member stores only offsets past records it handed out.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use strand_wire::ops::{
    ConsumerGroupAssignment, ConsumerGroupFence, ConsumerHeartbeat, DescribeConsumerGroups,
    DescribeConsumerGroupsReply, Empty, JoinConsumerGroup, LeaveConsumerGroup,
    SESSION_TIMEOUT_MS_MAX, SESSION_TIMEOUT_MS_MIN, StoreCursor,
};
use strand_wire::{Body, Operation};

use crate::client::{Client, check_name, invalid};
use crate::config::StartFrom;
use crate::error::ClientError;
use crate::query::QueryTarget;
use crate::records::ConsumedRecord;
use crate::routing::METADATA_GROUP;

impl Client {
    /// Joins consumer group `group` (creating it) as `member`, reading
    /// `stream/topic`: returns the member's part of the group. Joining again
    /// with the same id keeps the member's place (safe to retry).
    pub async fn join_consumer_group(
        &self,
        group: &str,
        stream: &str,
        topic: &str,
        member: u128,
        session_timeout_ms: u32,
    ) -> Result<ConsumerGroupAssignment, ClientError> {
        check_name("group", group)?;
        check_name("stream", stream)?;
        check_name("topic", topic)?;
        if member == 0 {
            return Err(invalid("a member id is never 0"));
        }
        if !(SESSION_TIMEOUT_MS_MIN..=SESSION_TIMEOUT_MS_MAX).contains(&session_timeout_ms) {
            return Err(invalid("the session timeout must be 500 ms ..= 300 s"));
        }
        let join = JoinConsumerGroup {
            group: group.to_owned(),
            member,
            stream: stream.to_owned(),
            topic: topic.to_owned(),
            session_timeout_ms,
        };
        let reply = self
            .replicated(
                METADATA_GROUP,
                Operation::JoinConsumerGroup,
                Bytes::from(join.to_vec()),
            )
            .await?;
        ConsumerGroupAssignment::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("join group reply", error))
    }

    /// `member` of `group` is alive: returns its part of the group now
    /// (`UnknownMember` once the group no longer holds it).
    pub async fn consumer_heartbeat(
        &self,
        group: &str,
        member: u128,
        generation: u64,
    ) -> Result<ConsumerGroupAssignment, ClientError> {
        check_name("group", group)?;
        let body = ConsumerHeartbeat {
            group: group.to_owned(),
            member,
            generation,
        };
        let reply = self
            .query(
                QueryTarget::Group(METADATA_GROUP),
                Operation::ConsumerHeartbeat,
                Bytes::from(body.to_vec()),
                0,
            )
            .await?;
        ConsumerGroupAssignment::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("heartbeat reply", error))
    }

    /// `member` leaves `group`. Leaving twice is no error. (A member whose
    /// session ran out is removed by the cluster itself.)
    pub async fn leave_consumer_group(&self, group: &str, member: u128) -> Result<(), ClientError> {
        check_name("group", group)?;
        let leave = LeaveConsumerGroup {
            group: group.to_owned(),
            member,
            expired: false,
        };
        self.replicated(
            METADATA_GROUP,
            Operation::LeaveConsumerGroup,
            Bytes::from(leave.to_vec()),
        )
        .await?;
        Ok(())
    }

    /// Consumer group `group` (every group for `None`): members, generation,
    /// assignment, and each partition's group id, from any node's catalog.
    pub async fn describe_consumer_groups(
        &self,
        group: Option<&str>,
    ) -> Result<DescribeConsumerGroupsReply, ClientError> {
        if let Some(group) = group {
            check_name("group", group)?;
        }
        let body = DescribeConsumerGroups {
            group: group.unwrap_or_default().to_owned(),
        };
        let reply = self
            .query(
                QueryTarget::AnyNode,
                Operation::DescribeConsumerGroups,
                Bytes::from(body.to_vec()),
                0,
            )
            .await?;
        DescribeConsumerGroupsReply::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("describe groups reply", error))
    }

    /// Stores consumer group `group`'s offset on the partition of group id
    /// `partition_group`, as `fence`'s member in its generation.
    pub async fn store_consumer_group_offset(
        &self,
        partition_group: u64,
        group: &str,
        offset: u64,
        fence: ConsumerGroupFence,
    ) -> Result<(), ClientError> {
        let request = StoreCursor {
            consumer: group.to_owned(),
            offset,
            fence: Some(fence),
        };
        let reply = self
            .query(
                QueryTarget::Group(partition_group),
                Operation::StoreCursor,
                Bytes::from(request.to_vec()),
                0,
            )
            .await?;
        Empty::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("store cursor reply", error))?;
        Ok(())
    }

    /// Joins consumer group `group` on `stream/topic` and returns a
    /// consumer of the partitions it is given.
    pub async fn consumer_group_member(
        &self,
        group: &str,
        stream: &str,
        topic: &str,
        config: ConsumerGroupMemberConfig,
    ) -> Result<ConsumerGroupMember, ClientError> {
        ConsumerGroupMember::join(self.clone(), group, stream, topic, config).await
    }
}

/// How a [`ConsumerGroupMember`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupMemberConfig {
    /// How long the coordinator waits for a heartbeat before it removes the
    /// member and gives its partitions to the others.
    pub session_timeout_ms: u32,
    /// How often the member heartbeats (well below the session timeout).
    pub heartbeat_interval_ms: u32,
    /// Where a partition the group never stored an offset for starts
    /// (`Earliest` or `Latest`).
    pub start_from: StartFrom,
    /// Bytes per fetch.
    pub max_bytes: u32,
    /// How long a poll waits when no partition has records.
    pub wait_ms: u32,
    /// Store the offsets of what earlier polls returned at the start of a
    /// later one (records count as handled once the caller polls again).
    pub auto_commit: bool,
    /// With `auto_commit`: store at most this often (0: at every poll). A
    /// successor reads again at most about this much after a member dies.
    pub auto_commit_interval_ms: u32,
}

impl Default for ConsumerGroupMemberConfig {
    fn default() -> ConsumerGroupMemberConfig {
        ConsumerGroupMemberConfig {
            session_timeout_ms: 10_000,
            heartbeat_interval_ms: 1_000,
            start_from: StartFrom::Earliest,
            max_bytes: 1024 * 1024,
            wait_ms: 500,
            auto_commit: true,
            auto_commit_interval_ms: 1_000,
        }
    }
}

/// A change of the partitions a [`ConsumerGroupMember`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerGroupEvent {
    /// These partitions are now this member's (it reads them from the
    /// group's stored offsets).
    Assigned(Vec<u32>),
    /// These partitions are no longer this member's (another reads them).
    Revoked(Vec<u32>),
    /// The group removed this member (it missed heartbeats, or was paused
    /// past its session): it joined again as `member`.
    Rejoined {
        /// The new member id.
        member: u128,
    },
}

/// Records of one partition from a [`ConsumerGroupMember::poll`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupRecords {
    /// The partition.
    pub partition: u32,
    /// Its records, in offset order.
    pub records: Vec<ConsumedRecord>,
}

#[derive(Debug, Clone)]
struct Owned {
    /// The partition's group id.
    partition_group: u64,
    /// The next offset to read.
    position: u64,
    /// The offset last stored (or read from the group's cursor).
    stored: Option<u64>,
}

/// A member of a consumer group reading what the group gives it. See the
/// module docs.
#[derive(Debug)]
pub struct ConsumerGroupMember {
    client: Client,
    group: String,
    stream: String,
    topic: String,
    config: ConsumerGroupMemberConfig,
    member: u128,
    generation: u64,
    owned: BTreeMap<u32, Owned>,
    next_heartbeat: Instant,
    /// When auto-commit stores next.
    next_commit: Instant,
    /// The partition the next poll starts with (round robin).
    turn: u32,
    events: VecDeque<ConsumerGroupEvent>,
}

impl ConsumerGroupMember {
    async fn join(
        client: Client,
        group: &str,
        stream: &str,
        topic: &str,
        config: ConsumerGroupMemberConfig,
    ) -> Result<ConsumerGroupMember, ClientError> {
        if config.heartbeat_interval_ms == 0
            || config.heartbeat_interval_ms >= config.session_timeout_ms
        {
            return Err(invalid(
                "the heartbeat interval must be above 0 and below the session timeout",
            ));
        }
        if matches!(
            config.start_from,
            StartFrom::Offset(_) | StartFrom::StoredCursor
        ) {
            return Err(invalid(
                "a group consumer starts each partition at the group's offset, else Earliest or Latest",
            ));
        }
        let member = new_member_id();
        let assignment = client
            .join_consumer_group(group, stream, topic, member, config.session_timeout_ms)
            .await?;
        let mut consumer = ConsumerGroupMember {
            client,
            group: group.to_owned(),
            stream: stream.to_owned(),
            topic: topic.to_owned(),
            next_heartbeat: Instant::now() + consumer_interval(&config),
            next_commit: Instant::now(),
            config,
            member,
            generation: 0,
            owned: BTreeMap::new(),
            turn: 0,
            events: VecDeque::new(),
        };
        consumer.take_assignment(assignment).await?;
        Ok(consumer)
    }

    /// This member's id.
    pub fn member(&self) -> u128 {
        self.member
    }

    /// The generation this member works in.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The partitions this member reads, ascending.
    pub fn partitions(&self) -> Vec<u32> {
        self.owned.keys().copied().collect()
    }

    /// The next offset this member reads on `partition`, if it is its.
    pub fn position(&self, partition: u32) -> Option<u64> {
        self.owned.get(&partition).map(|owned| owned.position)
    }

    /// Assignment changes since the last call, oldest first.
    pub fn take_events(&mut self) -> Vec<ConsumerGroupEvent> {
        self.events.drain(..).collect()
    }

    /// Reads the next records from the partitions this member owns (a
    /// heartbeat first when one is due; with `auto_commit`, the offsets of
    /// what the last poll returned are stored first). Waits up to `wait_ms`
    /// when no partition has records; empty when none arrived.
    pub async fn poll(&mut self) -> Result<Vec<ConsumerGroupRecords>, ClientError> {
        if self.config.auto_commit && Instant::now() >= self.next_commit {
            self.next_commit = Instant::now()
                + Duration::from_millis(u64::from(self.config.auto_commit_interval_ms));
            self.commit_quietly().await?;
        }
        if Instant::now() >= self.next_heartbeat {
            self.heartbeat_now().await?;
        }
        if self.owned.is_empty() {
            tokio::time::sleep(Duration::from_millis(u64::from(self.config.wait_ms))).await;
            return Ok(Vec::new());
        }
        let partitions = self.rotation();
        let mut out = Vec::new();
        for partition in &partitions {
            let records = match self.fetch(*partition, 0).await {
                Ok(records) => records,
                // What was fetched already goes out (its positions moved);
                // the failed partition is asked again next time.
                Err(_) if !out.is_empty() => break,
                Err(error) => return Err(error),
            };
            if !records.is_empty() {
                out.push(ConsumerGroupRecords {
                    partition: *partition,
                    records,
                });
            }
        }
        if out.is_empty() {
            // Nothing anywhere: wait on the next partition in turn, up to
            // the heartbeat's deadline.
            let until_heartbeat = self
                .next_heartbeat
                .saturating_duration_since(Instant::now())
                .as_millis() as u32;
            let wait_ms = self.config.wait_ms.min(until_heartbeat);
            if let Some(partition) = partitions.first() {
                let records = self.fetch(*partition, wait_ms).await?;
                if !records.is_empty() {
                    out.push(ConsumerGroupRecords {
                        partition: *partition,
                        records,
                    });
                }
            }
        }
        self.turn = self.turn.wrapping_add(1);
        Ok(out)
    }

    /// Stores the group's offsets (this member's positions) on every
    /// partition that moved since the last store. `StaleGeneration` when the
    /// group was rebalanced (the member took the new assignment: go on
    /// polling); `UnknownMember` when it was removed (it joined again).
    pub async fn commit(&mut self) -> Result<(), ClientError> {
        let fence = ConsumerGroupFence {
            member: self.member,
            generation: self.generation,
        };
        let pending: Vec<(u32, u64, u64)> = self
            .owned
            .iter()
            .filter(|(_, owned)| owned.stored != Some(owned.position))
            .map(|(partition, owned)| (*partition, owned.partition_group, owned.position))
            .collect();
        for (partition, partition_group, offset) in pending {
            let stored = self
                .client
                .store_consumer_group_offset(partition_group, &self.group, offset, fence)
                .await;
            match stored {
                Ok(()) => {
                    if let Some(owned) = self.owned.get_mut(&partition) {
                        owned.stored = Some(offset);
                    }
                }
                Err(error @ ClientError::StaleGeneration { .. }) => {
                    self.heartbeat_now().await?;
                    return Err(error);
                }
                Err(error @ ClientError::UnknownMember { .. }) => {
                    // Only the coordinator's word counts: ask it.
                    self.heartbeat_now().await?;
                    return Err(error);
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// Stores the offsets and leaves the group: its partitions go to the
    /// other members at once (not after a session timeout).
    pub async fn leave(mut self) -> Result<(), ClientError> {
        let committed = match self.commit().await {
            // Its partitions are another's already: nothing of its to store.
            Err(ClientError::StaleGeneration { .. } | ClientError::UnknownMember { .. }) => Ok(()),
            other => other,
        };
        self.client
            .leave_consumer_group(&self.group, self.member)
            .await?;
        committed
    }

    /// Commits for `poll`: a rebalance or removal is handled (the new
    /// assignment taken) rather than returned, and a store the cluster
    /// cannot take yet is tried again at a later poll (reading goes on; a
    /// successor would read a little more again).
    async fn commit_quietly(&mut self) -> Result<(), ClientError> {
        match self.commit().await {
            Err(
                ClientError::StaleGeneration { .. }
                | ClientError::UnknownMember { .. }
                | ClientError::Unavailable { .. }
                | ClientError::Timeout { .. },
            ) => {
                self.next_commit = Instant::now();
                Ok(())
            }
            other => other,
        }
    }

    /// Heartbeats now: takes a new assignment, or joins again if removed.
    pub async fn heartbeat_now(&mut self) -> Result<(), ClientError> {
        self.next_heartbeat = Instant::now() + consumer_interval(&self.config);
        match self
            .client
            .consumer_heartbeat(&self.group, self.member, self.generation)
            .await
        {
            Ok(assignment) => self.take_assignment(assignment).await,
            Err(ClientError::UnknownMember { .. }) => self.rejoin().await,
            Err(error) => Err(error),
        }
    }

    /// The group removed this member: every partition is revoked, and it
    /// joins again under a new id.
    async fn rejoin(&mut self) -> Result<(), ClientError> {
        // Should the group still hold the old id after all, its partitions
        // must not wait for its session to run out.
        let _ = self
            .client
            .leave_consumer_group(&self.group, self.member)
            .await;
        let revoked = self.partitions();
        self.owned.clear();
        if !revoked.is_empty() {
            self.events.push_back(ConsumerGroupEvent::Revoked(revoked));
        }
        self.member = new_member_id();
        self.generation = 0;
        self.events.push_back(ConsumerGroupEvent::Rejoined {
            member: self.member,
        });
        let assignment = self
            .client
            .join_consumer_group(
                &self.group,
                &self.stream,
                &self.topic,
                self.member,
                self.config.session_timeout_ms,
            )
            .await?;
        self.take_assignment(assignment).await
    }

    /// Moves to `assignment`'s generation: drops the partitions no longer
    /// this member's, starts the new ones at the group's stored offsets.
    async fn take_assignment(
        &mut self,
        assignment: ConsumerGroupAssignment,
    ) -> Result<(), ClientError> {
        if assignment.generation == self.generation {
            return Ok(());
        }
        let revoked: Vec<u32> = self
            .owned
            .keys()
            .copied()
            .filter(|partition| !assignment.partitions.contains(partition))
            .collect();
        for partition in &revoked {
            self.owned.remove(partition);
        }
        if !revoked.is_empty() {
            self.events.push_back(ConsumerGroupEvent::Revoked(revoked));
        }
        self.generation = assignment.generation;
        let info = self.client.known_topic(&self.stream, &self.topic).await?;
        let mut assigned = Vec::new();
        for partition in assignment.partitions {
            if self.owned.contains_key(&partition) {
                continue;
            }
            let partition_group = match crate::client::partition_group_of(&info, partition) {
                Ok(group) => group,
                // Partitions added since the routing was read.
                Err(_) => {
                    self.client
                        .partition_group(&self.stream, &self.topic, partition)
                        .await?
                }
            };
            let stored = self
                .client
                .get_cursor_group(partition_group, &self.group)
                .await?;
            let position = match stored {
                Some(offset) => offset,
                None => self.start_offset(partition_group).await?,
            };
            self.owned.insert(
                partition,
                Owned {
                    partition_group,
                    position,
                    stored,
                },
            );
            assigned.push(partition);
        }
        if !assigned.is_empty() {
            self.events
                .push_back(ConsumerGroupEvent::Assigned(assigned));
        }
        Ok(())
    }

    /// Where a partition without a stored offset starts.
    async fn start_offset(&self, partition_group: u64) -> Result<u64, ClientError> {
        let (log_start, high_watermark) = self.client.partition_bounds(partition_group).await?;
        Ok(match self.config.start_from {
            StartFrom::Latest => high_watermark,
            _ => log_start,
        })
    }

    /// The owned partitions, starting at this poll's turn.
    fn rotation(&self) -> Vec<u32> {
        let partitions = self.partitions();
        let start = self.turn as usize % partitions.len().max(1);
        partitions[start..]
            .iter()
            .chain(&partitions[..start])
            .copied()
            .collect()
    }

    /// Fetches from `partition` at its position and moves the position;
    /// a position below what retention kept moves to the earliest offset.
    async fn fetch(
        &mut self,
        partition: u32,
        wait_ms: u32,
    ) -> Result<Vec<ConsumedRecord>, ClientError> {
        let Some(owned) = self.owned.get(&partition) else {
            return Ok(Vec::new());
        };
        let (partition_group, position) = (owned.partition_group, owned.position);
        let fetched = self
            .client
            .fetch_group(partition_group, position, self.config.max_bytes, wait_ms)
            .await;
        let fetched = match fetched {
            Ok(fetched) => fetched,
            Err(ClientError::OffsetOutOfRange {
                log_start_offset, ..
            }) if log_start_offset > position => {
                if let Some(owned) = self.owned.get_mut(&partition) {
                    owned.position = log_start_offset;
                }
                return Ok(Vec::new());
            }
            Err(error) => return Err(error),
        };
        if let Some(owned) = self.owned.get_mut(&partition) {
            owned.position = fetched.next_offset;
        }
        Ok(fetched.records)
    }
}

fn consumer_interval(config: &ConsumerGroupMemberConfig) -> Duration {
    Duration::from_millis(u64::from(config.heartbeat_interval_ms))
}

/// A random member id (never 0).
fn new_member_id() -> u128 {
    rand::random::<u128>().max(1)
}
