//! Consumers as members of one consumer group (`--group`): the cluster
//! shares the topic's partitions among them, where tailing consumers
//! ([`load::consume`]) each read fixed partitions. A member measures what a
//! tailing consumer does ([`ConsumerOutcome`]) and drains alike ([`Drain`]).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use strand_client::{
    Client, ClientError, ConsumerGroupMember, ConsumerGroupMemberConfig, StartFrom,
};
use tokio::time::Instant;

use crate::load::{
    self, CONSUMER_WAIT_MS, ConsumerOutcome, Drain, FETCH_BYTES_MAX, Live, Load, POLL_RETRY_PAUSE,
};

/// A bench member's SDK settings: fetches as large as a tailing consumer's,
/// and the earliest offset for a partition the group has no offset for (the
/// topic is new and producers start with the members, so a member that
/// joins late still reads every record). Heartbeats, session and
/// auto-commit keep the SDK's defaults.
pub fn member_config() -> ConsumerGroupMemberConfig {
    ConsumerGroupMemberConfig {
        start_from: StartFrom::Earliest,
        max_bytes: FETCH_BYTES_MAX,
        wait_ms: CONSUMER_WAIT_MS,
        ..ConsumerGroupMemberConfig::default()
    }
}

/// Joins consumer group `group` on the benched topic as bench consumer
/// `member`, reads until drained (see [`read_until_drained`]), then leaves
/// the group so its partitions pass to the members still reading at once.
pub async fn consume_as_member(
    client: Client,
    load: Arc<Load>,
    group: Arc<str>,
    member: u32,
    start: Instant,
    live: Arc<Live>,
    done: Arc<AtomicBool>,
) -> ConsumerOutcome {
    let mut outcome = ConsumerOutcome::empty();
    let name = format!("member {member} of group {group}");
    let joined = client
        .consumer_group_member(&group, &load.stream, &load.topic, member_config())
        .await;
    let mut consumer = match joined {
        Ok(consumer) => consumer,
        Err(error) => {
            outcome.first_error = Some(format!("{name}: join: {error}"));
            return outcome;
        }
    };
    read_until_drained(&mut consumer, &mut outcome, &name, start, &live, &done).await;
    if let Err(error) = consumer.leave().await {
        outcome
            .first_error
            .get_or_insert_with(|| format!("{name}: leave: {error}"));
    }
    outcome
}

/// Polls every partition the group gives this member until `done` is set
/// and a poll begun after it returns nothing from any of them (the member
/// has caught up, judged without fetching offsets), or [`load::CONSUMER_DRAIN`]
/// has passed since `done`. A rebalance or removal the SDK surfaces is not
/// an error: it has taken the new assignment, so the member polls on.
async fn read_until_drained(
    consumer: &mut ConsumerGroupMember,
    outcome: &mut ConsumerOutcome,
    name: &str,
    start: Instant,
    live: &Live,
    done: &AtomicBool,
) {
    let mut drain = Drain::default();
    loop {
        let draining = drain.started(done);
        if draining && drain.expired() {
            return;
        }
        match consumer.poll().await {
            Ok(polled) => {
                let now_us = load::now_us();
                for partition in &polled {
                    outcome.count_read(&partition.records, now_us, start, live);
                }
                if draining && polled.is_empty() {
                    return;
                }
            }
            Err(ClientError::StaleGeneration { .. } | ClientError::UnknownMember { .. }) => {}
            Err(error) => {
                outcome
                    .first_error
                    .get_or_insert_with(|| format!("{name}: poll: {error}"));
                tokio::time::sleep(POLL_RETRY_PAUSE).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_read_every_record_in_large_fetches() {
        let config = member_config();
        assert_eq!(config.start_from, StartFrom::Earliest);
        assert_eq!(config.max_bytes, FETCH_BYTES_MAX);
        assert_eq!(config.wait_ms, CONSUMER_WAIT_MS);
        assert!(
            config.auto_commit,
            "offsets are stored, so a rebalance re-reads little"
        );
        assert!(config.heartbeat_interval_ms < config.session_timeout_ms);
    }
}
