//! State the API reads without asking the driver: the topics the last
//! metadata described (learnt from each answer, forgotten on deletion), and
//! why a node refused this client's sign-in.

use std::collections::HashMap;
use std::sync::Mutex;

use strand_wire::ops::{MetadataReply, MetadataRequest, TopicInfo};

/// State the API reads without asking the driver: topics by name.
#[derive(Debug, Default)]
pub(crate) struct SharedRouting {
    topics: Mutex<HashMap<(String, String), TopicInfo>>,
    /// Why the last sign-in a node refused was refused (the cluster
    /// requires signing in and the credentials do not hold).
    pub(super) sign_in_refused: Mutex<Option<String>>,
}

impl SharedRouting {
    /// Why a node refused this client's sign-in, if one did.
    pub(crate) fn sign_in_refused(&self) -> Option<String> {
        self.sign_in_refused
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The topic as the last metadata described it.
    pub(crate) fn topic(&self, stream: &str, topic: &str) -> Option<TopicInfo> {
        self.lock()
            .get(&(stream.to_owned(), topic.to_owned()))
            .cloned()
    }

    /// Takes in the answer to `request`: every topic the request asked
    /// about is replaced by what the answer says, so a topic deleted since
    /// (absent from the answer) is forgotten too.
    pub(super) fn learn(&self, request: &MetadataRequest, reply: &MetadataReply) {
        let mut topics = self.lock();
        topics.retain(|(stream, topic), _| !asked_about(request, stream, topic));
        for topic in &reply.topics {
            topics.insert((topic.stream.clone(), topic.topic.clone()), topic.clone());
        }
    }

    /// Forgets a topic (deleted, or its partitions changed): the next call
    /// that needs it looks it up again.
    pub(crate) fn forget_topic(&self, stream: &str, topic: &str) {
        self.lock().remove(&(stream.to_owned(), topic.to_owned()));
    }

    /// Forgets every topic of a deleted stream.
    pub(crate) fn forget_stream(&self, stream: &str) {
        self.lock().retain(|(known, _), _| known != stream);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), TopicInfo>> {
        self.topics
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Whether a Metadata `request` covers `stream/topic` (its answer lists the
/// topic if, and only if, the topic exists).
fn asked_about(request: &MetadataRequest, stream: &str, topic: &str) -> bool {
    request
        .stream
        .as_deref()
        .is_none_or(|asked| asked == stream)
        && request.topic.as_deref().is_none_or(|asked| asked == topic)
}

#[cfg(test)]
mod tests {
    use strand_wire::ops::PartitionInfo;

    use super::*;

    fn topic(stream: &str, topic: &str, group: u64) -> TopicInfo {
        TopicInfo {
            stream: stream.into(),
            topic: topic.into(),
            confirm: Default::default(),
            durability: Default::default(),
            consumer_offset_durability: Default::default(),
            retention_bytes: 0,
            retention_ms: 0,
            segment_bytes: 0,
            partitions: vec![PartitionInfo {
                partition: 0,
                group,
                epoch: 1,
                replicas: vec![1],
                view: 0,
            }],
        }
    }

    fn answer(topics: Vec<TopicInfo>) -> MetadataReply {
        MetadataReply {
            nodes: Vec::new(),
            streams: Vec::new(),
            topics,
            failover_ms: 0,
        }
    }

    fn asking(stream: Option<&str>, topic: Option<&str>) -> MetadataRequest {
        MetadataRequest {
            stream: stream.map(str::to_owned),
            topic: topic.map(str::to_owned),
        }
    }

    #[test]
    fn an_answer_without_a_topic_it_was_asked_about_forgets_it() {
        let shared = SharedRouting::default();
        let everything = asking(None, None);
        shared.learn(
            &everything,
            &answer(vec![
                topic("s", "a", 1),
                topic("s", "b", 2),
                topic("t", "c", 3),
            ]),
        );
        // Asked about s/a only, which is gone: s/b and t/c stay.
        shared.learn(&asking(Some("s"), Some("a")), &answer(Vec::new()));
        assert_eq!(shared.topic("s", "a"), None);
        assert!(shared.topic("s", "b").is_some() && shared.topic("t", "c").is_some());
        // A whole-cluster answer is the whole truth.
        shared.learn(&everything, &answer(vec![topic("t", "c", 3)]));
        assert_eq!(shared.topic("s", "b"), None);
        // Created again: the new groups replace the old.
        shared.learn(&asking(Some("s"), None), &answer(vec![topic("s", "a", 9)]));
        let groups: Vec<u64> = shared
            .topic("s", "a")
            .iter()
            .flat_map(|info| info.partitions.iter().map(|partition| partition.group))
            .collect();
        assert_eq!(groups, vec![9]);
    }

    #[test]
    fn a_deleted_topic_or_stream_is_forgotten() {
        let shared = SharedRouting::default();
        shared.learn(
            &asking(None, None),
            &answer(vec![
                topic("s", "a", 1),
                topic("s", "b", 2),
                topic("t", "c", 3),
            ]),
        );
        shared.forget_topic("s", "a");
        assert_eq!(shared.topic("s", "a"), None);
        assert!(shared.topic("s", "b").is_some());
        shared.forget_stream("s");
        assert_eq!(shared.topic("s", "b"), None);
        assert!(shared.topic("t", "c").is_some());
    }
}
