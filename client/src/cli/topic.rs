//! `strand stream create/list` and `strand topic create/list/describe`.

use std::io::Write;

use serde::Serialize;
use strand_wire::ConfirmPolicy;

use super::args::{TopicCreateArgs, TopicPath};
use super::errors::CliError;
use super::print_json;
use super::table::{Table, bytes_human};
use crate::{Client, ClientError, TopicInfo, TopicSpec};

/// A topic as `--json` prints it.
#[derive(Debug, Serialize)]
pub(crate) struct TopicJson {
    stream: String,
    topic: String,
    durability: &'static str,
    confirm: String,
    consumer_offset_durability: &'static str,
    retention_bytes: u64,
    retention_ms: u64,
    partitions: Vec<PartitionJson>,
}

#[derive(Debug, Serialize)]
struct PartitionJson {
    partition: u32,
    group: u64,
    epoch: u32,
    view: u32,
    replicas: Vec<u32>,
    primary_node: Option<u32>,
}

impl TopicJson {
    fn from_info(info: &TopicInfo) -> TopicJson {
        TopicJson {
            stream: info.stream.clone(),
            topic: info.topic.clone(),
            durability: info.durability.name(),
            confirm: confirm_name(info.confirm),
            consumer_offset_durability: info.consumer_offset_durability.name(),
            retention_bytes: info.retention_bytes,
            retention_ms: info.retention_ms,
            partitions: info
                .partitions
                .iter()
                .map(|partition| PartitionJson {
                    partition: partition.partition,
                    group: partition.group,
                    epoch: partition.epoch,
                    view: partition.view,
                    replicas: partition.replicas.clone(),
                    primary_node: primary_node(&partition.replicas, partition.view),
                })
                .collect(),
        }
    }
}

/// The node of the primary of `view`: `replicas[view % E]`.
pub(crate) fn primary_node(replicas: &[u32], view: u32) -> Option<u32> {
    if replicas.is_empty() {
        return None;
    }
    replicas.get(view as usize % replicas.len()).copied()
}

/// A confirm policy as the `--confirm` flag spells it.
pub(crate) fn confirm_name(confirm: ConfirmPolicy) -> String {
    match confirm {
        ConfirmPolicy::MajorityDurable => "majority".to_owned(),
        ConfirmPolicy::LocalDurable => "local".to_owned(),
        ConfirmPolicy::Count(count) => count.to_string(),
    }
}

fn retention(info: &TopicInfo) -> String {
    let mut limits = Vec::new();
    if info.retention_bytes > 0 {
        limits.push(bytes_human(info.retention_bytes));
    }
    if info.retention_ms > 0 {
        limits.push(format!("{} ms", info.retention_ms));
    }
    if limits.is_empty() {
        "none".to_owned()
    } else {
        limits.join(", ")
    }
}

/// `strand stream create NAME`.
pub(crate) async fn stream_create(
    client: &Client,
    name: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    client
        .create_stream(name)
        .await
        .map_err(|error| CliError::client(format!("create stream {name}"), error))?;
    if json {
        print_json(out, &serde_json::json!({ "stream": name, "created": true }))
    } else {
        writeln!(out, "created stream {name}")?;
        Ok(())
    }
}

/// `strand stream list`.
pub(crate) async fn stream_list(
    client: &Client,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let metadata = client
        .metadata()
        .await
        .map_err(|error| CliError::client("list streams", error))?;
    let topic_count = |stream: &str| {
        metadata
            .topics
            .iter()
            .filter(|info| info.stream == stream)
            .count()
    };
    if json {
        let streams: Vec<_> = metadata
            .streams
            .iter()
            .map(|stream| serde_json::json!({ "stream": stream, "topics": topic_count(stream) }))
            .collect();
        return print_json(out, &streams);
    }
    let mut table = Table::new(&["STREAM", "TOPICS"]);
    for stream in &metadata.streams {
        table.row(vec![stream.clone(), topic_count(stream).to_string()]);
    }
    write!(out, "{}", table.render())?;
    Ok(())
}

/// `strand topic create STREAM/TOPIC ...`: creates the stream first when it
/// is missing, then prints the topic as the cluster stored it (with the
/// policies the cluster's defaults filled in).
pub(crate) async fn topic_create(
    client: &Client,
    args: TopicCreateArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let path = args.topic.clone();
    let doing = || format!("create topic {path}");
    match client.create_stream(&path.stream).await {
        Ok(()) | Err(ClientError::AlreadyExists { .. }) => {}
        Err(error) => return Err(CliError::client(doing(), error)),
    }
    let spec = TopicSpec {
        partition_count: args.partitions,
        replica_count: args.replicas,
        durability: args.durability.map(Into::into),
        confirm: args.confirm,
        retention_bytes: args.retention_bytes,
        retention_ms: args.retention_ms,
        ..TopicSpec::new(&path.stream, &path.topic)
    };
    let groups = client
        .create_topic(spec)
        .await
        .map_err(|error| CliError::client(doing(), error))?;
    // This client saw the create commit, so its metadata answer includes it.
    let info = client.topic(&path.stream, &path.topic).await.ok();
    if json {
        let value = serde_json::json!({
            "created": true,
            "stream": path.stream,
            "topic": path.topic,
            "groups": groups,
            "description": info.as_ref().map(TopicJson::from_info),
        });
        return print_json(out, &value);
    }
    let groups: Vec<String> = groups.iter().map(u64::to_string).collect();
    writeln!(
        out,
        "created topic {path}: {} partition(s), groups {}",
        groups.len(),
        groups.join(",")
    )?;
    if let Some(info) = info {
        writeln!(out)?;
        write!(out, "{}", describe_text(&info))?;
    }
    Ok(())
}

/// `strand topic list`.
pub(crate) async fn topic_list(
    client: &Client,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let metadata = client
        .metadata()
        .await
        .map_err(|error| CliError::client("list topics", error))?;
    if json {
        let topics: Vec<TopicJson> = metadata.topics.iter().map(TopicJson::from_info).collect();
        return print_json(out, &topics);
    }
    write!(out, "{}", list_text(&metadata.topics))?;
    Ok(())
}

/// The `topic list` table.
pub(crate) fn list_text(topics: &[TopicInfo]) -> String {
    let mut table = Table::new(&[
        "TOPIC",
        "PARTITIONS",
        "REPLICAS",
        "DURABILITY",
        "CONFIRM",
        "CURSORS",
        "RETENTION",
    ]);
    for info in topics {
        let replicas = info
            .partitions
            .first()
            .map_or(0, |partition| partition.replicas.len());
        table.row(vec![
            format!("{}/{}", info.stream, info.topic),
            info.partitions.len().to_string(),
            replicas.to_string(),
            info.durability.name().to_owned(),
            confirm_name(info.confirm),
            info.consumer_offset_durability.name().to_owned(),
            retention(info),
        ]);
    }
    table.render()
}

/// `strand topic describe STREAM/TOPIC`.
pub(crate) async fn topic_describe(
    client: &Client,
    path: &TopicPath,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let info = client
        .topic(&path.stream, &path.topic)
        .await
        .map_err(|error| CliError::client(format!("describe topic {path}"), error))?;
    if json {
        return print_json(out, &TopicJson::from_info(&info));
    }
    write!(out, "{}", describe_text(&info))?;
    Ok(())
}

/// The `topic describe` text: policies, then one row per partition.
pub(crate) fn describe_text(info: &TopicInfo) -> String {
    let mut policies = Table::new(&["TOPIC", &format!("{}/{}", info.stream, info.topic)]);
    policies.row(vec!["durability".into(), info.durability.name().into()]);
    policies.row(vec!["confirm".into(), confirm_name(info.confirm)]);
    policies.row(vec![
        "cursors".into(),
        info.consumer_offset_durability.name().into(),
    ]);
    policies.row(vec!["retention".into(), retention(info)]);
    let mut partitions =
        Table::new(&["PARTITION", "GROUP", "EPOCH", "VIEW", "PRIMARY", "REPLICAS"]);
    for partition in &info.partitions {
        let replicas: Vec<String> = partition.replicas.iter().map(u32::to_string).collect();
        let primary = primary_node(&partition.replicas, partition.view)
            .map_or_else(|| "-".to_owned(), |node| format!("node {node}"));
        partitions.row(vec![
            partition.partition.to_string(),
            partition.group.to_string(),
            partition.epoch.to_string(),
            partition.view.to_string(),
            primary,
            format!("nodes {}", replicas.join(",")),
        ]);
    }
    format!("{}\n{}", policies.render(), partitions.render())
}

#[cfg(test)]
mod tests {
    use strand_wire::Durability;

    use super::*;
    use crate::PartitionInfo;

    fn info() -> TopicInfo {
        TopicInfo {
            stream: "shop".into(),
            topic: "orders".into(),
            confirm: ConfirmPolicy::MajorityDurable,
            durability: Durability::Persisted,
            consumer_offset_durability: Durability::Persisted,
            retention_bytes: 2048,
            retention_ms: 0,
            partitions: (0..2)
                .map(|partition| PartitionInfo {
                    partition,
                    group: u64::from(partition) + 7,
                    epoch: 0,
                    replicas: vec![1, 2, 3],
                    view: partition + 1,
                })
                .collect(),
        }
    }

    #[test]
    fn describe_names_the_primary_of_each_view() {
        let text = describe_text(&info());
        assert_eq!(
            text,
            "TOPIC       shop/orders\n\
             durability  persisted\n\
             confirm     majority\n\
             cursors     persisted\n\
             retention   2.0 KiB\n\
             \n\
             PARTITION  GROUP  EPOCH  VIEW  PRIMARY  REPLICAS\n\
             0          7      0      1     node 2   nodes 1,2,3\n\
             1          8      0      2     node 3   nodes 1,2,3\n"
        );
    }

    #[test]
    fn list_has_a_row_per_topic() {
        let text = list_text(&[info()]);
        assert_eq!(
            text,
            "TOPIC        PARTITIONS  REPLICAS  DURABILITY  CONFIRM   CURSORS    RETENTION\n\
             shop/orders  2           3         persisted   majority  persisted  2.0 KiB\n"
        );
    }

    #[test]
    fn primary_is_view_modulo_replica_count() {
        assert_eq!(primary_node(&[4, 5, 6], 4), Some(5));
        assert_eq!(primary_node(&[], 4), None);
        assert_eq!(confirm_name(ConfirmPolicy::Count(2)), "2");
    }
}
