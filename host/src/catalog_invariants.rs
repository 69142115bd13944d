//! The catalog's own rules, asserted after every op it applies: group ids
//! below the next one, every count within its cluster bound, every topic
//! holding its partitions' groups in order, every assignment and consumer
//! group within its rules. A decoded catalog image is held to the same
//! rules (`catalog_image` refuses one that breaks them); here a break is a
//! bug in the catalog's own code.

use strand_wire::ops::{
    CONSUMER_GROUPS_MAX, PARTITIONS_MAX, PARTITIONS_PER_TOPIC_MAX, STREAMS_MAX, TOPICS_MAX,
    USERS_MAX,
};

use crate::catalog::{Catalog, TopicEntry};

impl Catalog {
    /// Checks the catalog's rules (the full passes in debug builds only).
    pub(crate) fn assert_invariants(&self) {
        assert!(
            self.groups
                .last_key_value()
                .is_none_or(|(group, _)| *group < self.next_group),
            "a group at or past the next id {}",
            self.next_group
        );
        assert!(
            self.streams.len() <= STREAMS_MAX && self.groups.len() <= PARTITIONS_MAX,
            "{} streams, {} partitions",
            self.streams.len(),
            self.groups.len()
        );
        assert!(
            self.consumer_groups.len() <= CONSUMER_GROUPS_MAX
                && self.users.len() <= USERS_MAX
                && self.quotas.len() <= USERS_MAX,
            "{} consumer groups, {} users, {} quotas",
            self.consumer_groups.len(),
            self.users.len(),
            self.quotas.len()
        );
        self.assert_topic_invariants();
        self.assert_placement_invariants();
    }

    /// Every topic (within the bound on topics) holds one to
    /// `PARTITIONS_PER_TOPIC_MAX` groups, each present and naming the topic
    /// at its partition; no group lies outside a topic; every consumer
    /// group reads an existing topic, with an owner slot per partition.
    fn assert_topic_invariants(&self) {
        let topics = || {
            self.streams.iter().flat_map(|(stream, topics)| {
                topics
                    .iter()
                    .map(move |(topic, entry)| (stream, topic, entry))
            })
        };
        debug_assert!(topics().count() <= TOPICS_MAX, "too many topics");
        debug_assert!(
            topics().all(|(_, _, entry)| {
                (1..=PARTITIONS_PER_TOPIC_MAX as usize).contains(&entry.groups.len())
            }),
            "a topic without partitions, or with more than {PARTITIONS_PER_TOPIC_MAX}"
        );
        debug_assert!(
            topics().all(|(stream, topic, entry)| self.holds_groups_of(stream, topic, entry)),
            "a topic's group missing, or naming another topic or partition"
        );
        debug_assert_eq!(
            topics()
                .map(|(_, _, entry)| entry.groups.len())
                .sum::<usize>(),
            self.groups.len(),
            "a group outside every topic"
        );
        debug_assert!(
            self.consumer_groups.values().all(|group| {
                self.streams
                    .get(&group.stream)
                    .and_then(|topics| topics.get(&group.topic))
                    .is_some_and(|entry| entry.groups.len() == group.owners.len())
            }),
            "a consumer group of a missing topic, or of another partition count"
        );
    }

    /// Whether every group of `stream/topic` is held, naming the topic at
    /// its partition.
    fn holds_groups_of(&self, stream: &str, topic: &str, entry: &TopicEntry) -> bool {
        entry.groups.iter().enumerate().all(|(partition, group)| {
            self.groups.get(group).is_some_and(|assignment| {
                (assignment.stream.as_str(), assignment.topic.as_str()) == (stream, topic)
                    && assignment.partition as usize == partition
            })
        })
    }

    /// Every partition lives on cluster nodes (its members, the previous
    /// epoch's, its retired copies), every assignment and consumer group
    /// keeps its own rules, and no quota kept is unlimited.
    fn assert_placement_invariants(&self) {
        debug_assert!(
            self.groups.values().all(|assignment| {
                let previous = assignment
                    .previous
                    .iter()
                    .flat_map(|previous| &previous.slots);
                assignment
                    .slots
                    .iter()
                    .chain(previous)
                    .flatten()
                    .chain(&assignment.retired)
                    .all(|node| self.nodes.binary_search(node).is_ok())
            }),
            "a partition on a node outside the cluster"
        );
        debug_assert!(
            self.groups
                .values()
                .all(|assignment| assignment.fault().is_none()),
            "an assignment breaks its rules"
        );
        debug_assert!(
            self.consumer_groups
                .values()
                .all(|group| group.fault().is_none()),
            "a consumer group breaks its rules"
        );
        debug_assert!(
            self.quotas.values().all(|quota| !quota.is_unlimited()),
            "an unlimited quota kept"
        );
    }
}
