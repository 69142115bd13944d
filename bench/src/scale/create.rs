//! Creating the scale run's stream and topics. A fresh cluster refuses or
//! drops creates for a while (no metadata primary yet, timeouts), so each
//! create is retried with backoff up to a deadline; a create that finds its
//! topic already there (an earlier attempt went through, or `--data-dir`
//! holds an earlier run) takes the existing topic if it has the asked shape.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use strand_client::{Client, ClientError, TopicSpec};
use tokio::time::Instant;

use crate::error::BenchError;

/// The stream the scale run creates its topics in.
pub const STREAM: &str = "scale";

/// The first pause between two attempts of a create.
pub const CREATE_BACKOFF_MIN: Duration = Duration::from_millis(100);

/// The longest pause between two attempts (the pause doubles up to it).
pub const CREATE_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// One created topic and its partitions' groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicGroups {
    /// Its name.
    pub topic: String,
    /// The group of each partition: `groups[p]` is partition `p`'s.
    pub groups: Vec<u64>,
}

/// Every topic the run created, in creation order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The stream they are in.
    pub stream: String,
    /// The topics.
    pub topics: Vec<TopicGroups>,
}

impl Layout {
    /// Every partition group.
    pub fn groups(&self) -> BTreeSet<u64> {
        self.topics
            .iter()
            .flat_map(|topic| topic.groups.iter().copied())
            .collect()
    }

    /// `(topic, partition)` of each partition whose group is in `groups`.
    pub fn partitions_of(&self, groups: &BTreeSet<u64>) -> Vec<(String, u32)> {
        let mut partitions = Vec::new();
        for topic in &self.topics {
            for (partition, group) in (0..).zip(&topic.groups) {
                if groups.contains(group) {
                    partitions.push((topic.topic.clone(), partition));
                }
            }
        }
        partitions
    }
}

/// The name of topic number `index`.
pub fn topic_name(index: u32) -> String {
    format!("t{index}")
}

/// True for the failures of a create that a later attempt may not have:
/// no answer, a group not ready or busy, an unknown outcome (the retry is
/// idempotent, or finds the topic created).
pub fn is_transient(error: &ClientError) -> bool {
    matches!(
        error,
        ClientError::Timeout { .. }
            | ClientError::Unavailable { .. }
            | ClientError::OutcomeUnknown { .. }
            | ClientError::Unreachable { .. }
            | ClientError::Connect { .. }
    )
}

/// Creates stream [`STREAM`] and `topics` topics of `partitions`
/// partitions and `replicas` replicas each, giving up at `deadline`.
pub async fn create_all(
    client: &Client,
    topics: u32,
    partitions: u32,
    replicas: u8,
    deadline: Instant,
) -> Result<Layout, BenchError> {
    match retry(deadline, || client.create_stream(STREAM)).await {
        Ok(()) | Err(ClientError::AlreadyExists { .. }) => {}
        Err(error) => return Err(BenchError::client(format!("create stream {STREAM}"), error)),
    }
    let mut layout = Layout {
        stream: STREAM.to_owned(),
        topics: Vec::with_capacity(topics as usize),
    };
    for index in 0..topics {
        let mut spec = TopicSpec::new(STREAM, topic_name(index));
        spec.partition_count = partitions;
        spec.replica_count = replicas;
        let groups = create_topic(client, spec, deadline).await?;
        layout.topics.push(TopicGroups {
            topic: topic_name(index),
            groups,
        });
    }
    assert_eq!(layout.topics.len(), topics as usize);
    Ok(layout)
}

/// Creates one topic; its partitions' groups.
async fn create_topic(
    client: &Client,
    spec: TopicSpec,
    deadline: Instant,
) -> Result<Vec<u64>, BenchError> {
    let name = format!("{}/{}", spec.stream, spec.topic);
    let partitions = spec.partition_count;
    let created = retry(deadline, || client.create_topic(spec.clone())).await;
    let groups = match created {
        Ok(groups) => groups,
        Err(ClientError::AlreadyExists { .. }) => {
            existing_groups(client, &spec.stream, &spec.topic, deadline).await?
        }
        Err(error) => return Err(BenchError::client(format!("create topic {name}"), error)),
    };
    if groups.len() != partitions as usize {
        return Err(BenchError::Cluster(format!(
            "topic {name} has {} partitions, not the {partitions} asked for (a --data-dir of \
             another run?)",
            groups.len()
        )));
    }
    Ok(groups)
}

/// The groups of an existing topic, by partition.
async fn existing_groups(
    client: &Client,
    stream: &str,
    topic: &str,
    deadline: Instant,
) -> Result<Vec<u64>, BenchError> {
    let info = retry(deadline, || client.topic(stream, topic))
        .await
        .map_err(|error| BenchError::client(format!("read topic {stream}/{topic}"), error))?;
    let mut partitions = info.partitions;
    partitions.sort_by_key(|partition| partition.partition);
    Ok(partitions.iter().map(|partition| partition.group).collect())
}

/// `attempt`'s result, attempted again after transient failures (with a
/// doubling pause) until `deadline`; the last failure after that.
async fn retry<T, F, A>(deadline: Instant, mut attempt: A) -> Result<T, ClientError>
where
    A: FnMut() -> F,
    F: Future<Output = Result<T, ClientError>>,
{
    let mut pause = CREATE_BACKOFF_MIN;
    loop {
        match attempt().await {
            Err(error) if is_transient(&error) && Instant::now() + pause < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(CREATE_BACKOFF_MAX);
            }
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_found_by_group() {
        let layout = Layout {
            stream: STREAM.to_owned(),
            topics: vec![
                TopicGroups {
                    topic: topic_name(0),
                    groups: vec![11, 12],
                },
                TopicGroups {
                    topic: topic_name(1),
                    groups: vec![21, 22],
                },
            ],
        };
        assert_eq!(layout.groups(), BTreeSet::from([11, 12, 21, 22]));
        let wanted = BTreeSet::from([12, 21]);
        assert_eq!(
            layout.partitions_of(&wanted),
            vec![("t0".to_owned(), 1), ("t1".to_owned(), 0)]
        );
    }

    #[test]
    fn only_a_cluster_not_ready_yet_is_worth_another_attempt() {
        let unavailable = ClientError::Unavailable {
            message: "not ready".to_owned(),
        };
        assert!(is_transient(&unavailable));
        let exists = ClientError::AlreadyExists {
            message: "t0".to_owned(),
        };
        assert!(!is_transient(&exists));
        let invalid = ClientError::InvalidRequest {
            message: "bad".to_owned(),
        };
        assert!(!is_transient(&invalid));
    }
}
