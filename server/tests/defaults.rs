//! A cluster's `[topic_defaults]` apply to topics created without explicit
//! policies, and explicit policies win over them.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use strand_client::{ConfirmPolicy, Durability, TopicSpec};

#[test]
fn topic_defaults_fill_in_the_policies_a_request_leaves_unset() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = common::configure_cluster(dir.path(), 3);
    for node in &mut nodes {
        let mut config = std::fs::OpenOptions::new()
            .append(true)
            .open(&node.config)
            .expect("open the node's config");
        writeln!(
            config,
            "\n[topic_defaults]\ndurability = \"replicated\"\nconfirm = \"local_durable\""
        )
        .expect("write topic defaults");
        node.start();
    }
    let runtime = common::runtime();
    runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = common::connect(common::bootstrap(&nodes), deadline).await;
        client.create_stream("s").await.expect("create stream");
        client
            .create_topic(TopicSpec::new("s", "defaults"))
            .await
            .expect("create a topic with the defaults");
        let mut explicit = TopicSpec::new("s", "explicit");
        explicit.durability = Some(Durability::Persisted);
        explicit.confirm = Some(ConfirmPolicy::MajorityDurable);
        client
            .create_topic(explicit)
            .await
            .expect("create a topic with explicit policies");

        let defaults = client.topic("s", "defaults").await.expect("describe");
        assert_eq!(defaults.durability, Durability::Replicated);
        assert_eq!(defaults.confirm, ConfirmPolicy::LocalDurable);
        assert_eq!(
            defaults.consumer_offset_durability,
            Durability::Replicated,
            "cursor durability follows the topic's"
        );
        let explicit = client.topic("s", "explicit").await.expect("describe");
        assert_eq!(explicit.durability, Durability::Persisted);
        assert_eq!(explicit.confirm, ConfirmPolicy::MajorityDurable);
        assert_eq!(explicit.consumer_offset_durability, Durability::Persisted);
    });
}
