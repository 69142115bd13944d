//! Changing what exists: `strand topic alter` (retention, confirm policy),
//! `strand topic add-partitions`, and the deletes, `strand topic delete`
//! and `strand stream delete`. A delete needs `--yes`; without it the
//! refusal says what would go (read from the cluster's metadata when it
//! answers), and nothing is deleted.

use std::io::Write;

use serde::Serialize;

use super::args::{
    AddPartitionsArgs, StreamDeleteArgs, TopicAlterArgs, TopicDeleteArgs, TopicPath,
};
use super::errors::CliError;
use super::print_json;
use super::table::bytes_human;
use super::topic::confirm_name;
use crate::{Client, TopicChange, TopicInfo};

/// Most topics a `stream delete` refusal names one by one; the rest are
/// counted.
const REFUSAL_TOPICS_LISTED_MAX: usize = 20;

/// The refusal printed when `topic delete` runs without `--yes`; `info` is
/// the topic as the cluster lists it, when it could be read.
pub(crate) fn topic_delete_refusal(path: &TopicPath, info: Option<&TopicInfo>) -> CliError {
    let what = match info {
        Some(info) => format!(
            "its {} partition(s) (groups {})",
            info.partitions.len(),
            groups_text(info.partitions.iter().map(|partition| partition.group))
        ),
        None => "every partition of it".to_owned(),
    };
    CliError::Usage(format!(
        "topic delete deletes topic {path}: {what}, with every record and cursor in them, on \
         every node; nothing was done. Re-run with --yes"
    ))
}

/// The refusal printed when `stream delete` runs without `--yes`; `topics`
/// are the stream's topics as the cluster lists them, when they could be
/// read.
pub(crate) fn stream_delete_refusal(name: &str, topics: Option<&[TopicInfo]>) -> CliError {
    let what = match topics {
        None => "every topic in it".to_owned(),
        Some([]) => "it has no topics".to_owned(),
        Some(topics) => {
            let mut named: Vec<String> = topics
                .iter()
                .take(REFUSAL_TOPICS_LISTED_MAX)
                .map(|info| {
                    format!(
                        "{}/{} ({} partition(s))",
                        info.stream,
                        info.topic,
                        info.partitions.len()
                    )
                })
                .collect();
            if topics.len() > REFUSAL_TOPICS_LISTED_MAX {
                named.push(format!(
                    "and {} more",
                    topics.len() - REFUSAL_TOPICS_LISTED_MAX
                ));
            }
            format!(
                "its {} topic(s) {}, with every record and cursor in them, on every node",
                topics.len(),
                named.join(", ")
            )
        }
    };
    CliError::Usage(format!(
        "stream delete deletes stream {name}: {what}; nothing was done. Re-run with --yes"
    ))
}

/// The refusal of a delete without `--yes`, naming what would go as far
/// as `client` (if it connected) can tell.
pub(crate) async fn topic_refusal(client: Option<&Client>, args: &TopicDeleteArgs) -> CliError {
    let path = &args.topic;
    let info = match client {
        Some(client) => client.topic(&path.stream, &path.topic).await.ok(),
        None => None,
    };
    topic_delete_refusal(path, info.as_ref())
}

/// Like [`topic_refusal`], for `stream delete`.
pub(crate) async fn stream_refusal(client: Option<&Client>, args: &StreamDeleteArgs) -> CliError {
    let topics = match client {
        Some(client) => client.metadata().await.ok().map(|metadata| {
            metadata
                .topics
                .into_iter()
                .filter(|info| info.stream == args.name)
                .collect::<Vec<_>>()
        }),
        None => None,
    };
    stream_delete_refusal(&args.name, topics.as_deref())
}

/// `strand topic delete STREAM/TOPIC --yes`.
pub(crate) async fn topic_delete(
    client: &Client,
    args: TopicDeleteArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if !args.yes {
        return Err(topic_delete_refusal(&args.topic, None));
    }
    let path = &args.topic;
    let groups = client
        .delete_topic(&path.stream, &path.topic)
        .await
        .map_err(|error| CliError::client(format!("delete topic {path}"), error))?;
    if json {
        return print_json(out, &deleted_json(&path.stream, Some(&path.topic), &groups));
    }
    writeln!(out, "{}", deleted_text(&format!("topic {path}"), &groups))?;
    Ok(())
}

/// `strand stream delete NAME --yes`.
pub(crate) async fn stream_delete(
    client: &Client,
    args: StreamDeleteArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if !args.yes {
        return Err(stream_delete_refusal(&args.name, None));
    }
    let name = &args.name;
    let groups = client
        .delete_stream(name)
        .await
        .map_err(|error| CliError::client(format!("delete stream {name}"), error))?;
    if json {
        return print_json(out, &deleted_json(name, None, &groups));
    }
    writeln!(out, "{}", deleted_text(&format!("stream {name}"), &groups))?;
    Ok(())
}

/// What a delete prints with `--json`: the stream, the topic (for `topic
/// delete`) and the deleted partitions' groups.
fn deleted_json(stream: &str, topic: Option<&str>, groups: &[u64]) -> serde_json::Value {
    let mut value = serde_json::json!({ "stream": stream, "deleted_groups": groups });
    if let Some(topic) = topic {
        value["topic"] = serde_json::json!(topic);
    }
    value
}

/// `deleted topic s/t: 2 partition(s), groups 7,8`.
fn deleted_text(what: &str, groups: &[u64]) -> String {
    if groups.is_empty() {
        return format!("deleted {what} (it had no partitions)");
    }
    format!(
        "deleted {what}: {} partition(s), groups {}",
        groups.len(),
        groups_text(groups.iter().copied())
    )
}

fn groups_text(groups: impl Iterator<Item = u64>) -> String {
    let groups: Vec<String> = groups.map(|group| group.to_string()).collect();
    groups.join(",")
}

/// What `topic alter` changed, as `--json` prints it (unchanged policies
/// are left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct AlteredView {
    stream: String,
    topic: String,
    altered: AlteredPolicies,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct AlteredPolicies {
    #[serde(skip_serializing_if = "Option::is_none")]
    retention_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retention_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    confirm: Option<String>,
}

impl AlteredView {
    /// The view of `change`, applied to `path`.
    pub(crate) fn new(path: &TopicPath, change: &TopicChange) -> AlteredView {
        AlteredView {
            stream: path.stream.clone(),
            topic: path.topic.clone(),
            altered: AlteredPolicies {
                retention_bytes: change.retention_bytes,
                retention_ms: change.retention_ms,
                confirm: change.confirm.map(confirm_name),
            },
        }
    }

    /// `altered topic s/t: retention bytes 1.0 MiB, confirm majority`.
    pub(crate) fn text(&self) -> String {
        let altered = &self.altered;
        let limit = |limit: u64, shown: String| match limit {
            0 => "none".to_owned(),
            _ => shown,
        };
        let mut changes = Vec::new();
        if let Some(bytes) = altered.retention_bytes {
            changes.push(format!(
                "retention bytes {}",
                limit(bytes, bytes_human(bytes))
            ));
        }
        if let Some(ms) = altered.retention_ms {
            changes.push(format!("retention {}", limit(ms, format!("{ms} ms"))));
        }
        if let Some(confirm) = &altered.confirm {
            changes.push(format!("confirm {confirm}"));
        }
        format!(
            "altered topic {}/{}: {}",
            self.stream,
            self.topic,
            changes.join(", ")
        )
    }
}

/// `strand topic alter STREAM/TOPIC [--retention-bytes B] [--retention-ms MS] [--confirm P]`.
pub(crate) async fn topic_alter(
    client: &Client,
    args: TopicAlterArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let path = &args.topic;
    let change = TopicChange {
        retention_bytes: args.retention_bytes,
        retention_ms: args.retention_ms,
        confirm: args.confirm,
    };
    client
        .alter_topic(&path.stream, &path.topic, change.clone())
        .await
        .map_err(|error| CliError::client(format!("alter topic {path}"), error))?;
    let view = AlteredView::new(path, &change);
    if json {
        return print_json(out, &view);
    }
    writeln!(out, "{}", view.text())?;
    Ok(())
}

/// `strand topic add-partitions STREAM/TOPIC --count N`.
pub(crate) async fn add_partitions(
    client: &Client,
    args: AddPartitionsArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let path = &args.topic;
    let added = client
        .add_partitions(&path.stream, &path.topic, args.count)
        .await
        .map_err(|error| CliError::client(format!("add partitions to {path}"), error))?;
    if json {
        let value = serde_json::json!({
            "stream": path.stream,
            "topic": path.topic,
            "partition_count": args.count,
            "added_groups": added,
        });
        return print_json(out, &value);
    }
    writeln!(out, "{}", added_text(path, args.count, &added))?;
    Ok(())
}

/// `s/t now has 4 partitions: added 2 (groups 9,10)`.
fn added_text(path: &TopicPath, partition_count: u32, added: &[u64]) -> String {
    format!(
        "{path} now has {partition_count} partitions: added {} (groups {})",
        added.len(),
        groups_text(added.iter().copied())
    )
}

#[cfg(test)]
mod tests {
    use strand_wire::{ConfirmPolicy, Durability};

    use super::*;
    use crate::PartitionInfo;

    fn shop_orders() -> TopicPath {
        TopicPath {
            stream: "shop".into(),
            topic: "orders".into(),
        }
    }

    fn info(topic: &str, groups: &[u64]) -> TopicInfo {
        TopicInfo {
            stream: "shop".into(),
            topic: topic.into(),
            confirm: ConfirmPolicy::MajorityDurable,
            durability: Durability::Persisted,
            consumer_offset_durability: Durability::Persisted,
            retention_bytes: 0,
            retention_ms: 0,
            segment_bytes: 0,
            partitions: groups
                .iter()
                .zip(0..)
                .map(|(group, partition)| PartitionInfo {
                    partition,
                    group: *group,
                    epoch: 1,
                    replicas: vec![1, 2, 3],
                    view: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn a_topic_delete_refusal_says_what_would_go() {
        let refusal = topic_delete_refusal(&shop_orders(), Some(&info("orders", &[7, 8])));
        let message = refusal.message();
        assert!(
            message.contains("deletes topic shop/orders: its 2 partition(s) (groups 7,8)"),
            "{message}"
        );
        assert!(message.contains("every record and cursor"), "{message}");
        assert!(message.contains("--yes"), "{message}");
        assert_eq!(refusal.outcome(), super::super::Outcome::Usage);
        let unread = topic_delete_refusal(&shop_orders(), None).message();
        assert!(unread.contains("every partition of it"), "{unread}");
    }

    #[test]
    fn a_stream_delete_refusal_lists_the_topics_it_would_take() {
        let topics = [info("orders", &[7, 8]), info("payments", &[9])];
        let message = stream_delete_refusal("shop", Some(&topics)).message();
        assert_eq!(
            message,
            "error: stream delete deletes stream shop: its 2 topic(s) shop/orders (2 \
             partition(s)), shop/payments (1 partition(s)), with every record and cursor in \
             them, on every node; nothing was done. Re-run with --yes\n"
        );
        let many: Vec<TopicInfo> = (0..25)
            .map(|index| info(&format!("t{index}"), &[index]))
            .collect();
        let message = stream_delete_refusal("shop", Some(&many)).message();
        assert!(
            message.contains("shop/t19 (1 partition(s)), and 5 more"),
            "{message}"
        );
        assert!(!message.contains("shop/t20"), "{message}");
        let empty = stream_delete_refusal("shop", Some(&[])).message();
        assert!(empty.contains("it has no topics"), "{empty}");
        let unread = stream_delete_refusal("shop", None).message();
        assert!(unread.contains("every topic in it"), "{unread}");
    }

    #[test]
    fn deletes_print_the_groups_they_took() {
        assert_eq!(
            deleted_text("topic shop/orders", &[7, 8]),
            "deleted topic shop/orders: 2 partition(s), groups 7,8"
        );
        assert_eq!(
            deleted_text("stream empty", &[]),
            "deleted stream empty (it had no partitions)"
        );
        assert_eq!(
            deleted_json("shop", Some("orders"), &[7, 8]),
            serde_json::json!({ "stream": "shop", "topic": "orders", "deleted_groups": [7, 8] })
        );
        assert_eq!(
            deleted_json("shop", None, &[]),
            serde_json::json!({ "stream": "shop", "deleted_groups": [] })
        );
    }

    #[test]
    fn alter_prints_only_what_changed() {
        let change = TopicChange {
            retention_bytes: Some(1 << 20),
            retention_ms: Some(0),
            confirm: None,
        };
        let view = AlteredView::new(&shop_orders(), &change);
        assert_eq!(
            view.text(),
            "altered topic shop/orders: retention bytes 1.0 MiB, retention none"
        );
        let json = serde_json::to_value(&view).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({
                "stream": "shop",
                "topic": "orders",
                "altered": { "retention_bytes": 1048576, "retention_ms": 0 },
            })
        );
        let confirm = TopicChange {
            confirm: Some(ConfirmPolicy::Count(2)),
            ..TopicChange::default()
        };
        let view = AlteredView::new(&shop_orders(), &confirm);
        assert_eq!(view.text(), "altered topic shop/orders: confirm 2");
        let json = serde_json::to_value(&view).expect("serializes");
        assert_eq!(json["altered"], serde_json::json!({ "confirm": "2" }));
    }

    #[test]
    fn add_partitions_prints_the_new_total_and_groups() {
        assert_eq!(
            added_text(&shop_orders(), 4, &[9, 10]),
            "shop/orders now has 4 partitions: added 2 (groups 9,10)"
        );
    }
}
