//! `strand stream create/list` and `strand topic create/list/describe`.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;
use strand_wire::ConfirmPolicy;

use super::args::{TopicCreateArgs, TopicPath};
use super::errors::CliError;
use super::print_json;
use super::table::{Table, bytes_human};
use crate::{Client, ClientError, ClusterStatus, GroupStatus, TopicInfo, TopicSpec};

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
    /// Bytes per record-log segment (0: the node's default).
    segment_bytes: u64,
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
    /// The earliest record offset the partition still holds; absent when
    /// no replica's status was at hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    log_start_offset: Option<u64>,
    /// One past its last committed record offset; absent when no replica's
    /// status was at hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    high_watermark: Option<u64>,
}

/// A partition's retained records, `log_start_offset..high_watermark`, as
/// one replica reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PartitionOffsets {
    /// The earliest record offset still held (retention drops older ones).
    pub(crate) log_start_offset: u64,
    /// One past the last committed record offset.
    pub(crate) high_watermark: u64,
}

/// Each partition's offsets by group; a group missing is unknown.
pub(crate) type Offsets = BTreeMap<u64, PartitionOffsets>;

/// The offsets of `info`'s partitions in the replicas' answers: the leading
/// replica's (normal status, its own primary; the newest such) when one
/// answered, else the answer with the highest high watermark. Partitions
/// no node reported are left out.
pub(crate) fn partition_offsets(info: &TopicInfo, status: &ClusterStatus) -> Offsets {
    let mut reports: BTreeMap<u64, Vec<&GroupStatus>> = info
        .partitions
        .iter()
        .map(|partition| (partition.group, Vec::new()))
        .collect();
    for (_, report) in status.groups() {
        if let Some(group) = reports.get_mut(&report.group) {
            group.push(report);
        }
    }
    reports
        .into_iter()
        .filter_map(|(group, reports)| {
            let leading = reports
                .iter()
                .filter(|report| report.status == "normal" && report.primary == report.replica)
                .max_by_key(|report| (report.epoch, report.view));
            let chosen =
                leading.or_else(|| reports.iter().max_by_key(|report| report.high_watermark))?;
            Some((
                group,
                PartitionOffsets {
                    log_start_offset: chosen.log_start_offset,
                    high_watermark: chosen.high_watermark,
                },
            ))
        })
        .collect()
}

impl TopicJson {
    /// The topic, with the partition offsets known in `offsets`.
    fn from_info(info: &TopicInfo, offsets: &Offsets) -> TopicJson {
        TopicJson {
            stream: info.stream.clone(),
            topic: info.topic.clone(),
            durability: info.durability.name(),
            confirm: confirm_name(info.confirm),
            consumer_offset_durability: info.consumer_offset_durability.name(),
            retention_bytes: info.retention_bytes,
            retention_ms: info.retention_ms,
            segment_bytes: info.segment_bytes,
            partitions: info
                .partitions
                .iter()
                .map(|partition| {
                    let known = offsets.get(&partition.group);
                    PartitionJson {
                        partition: partition.partition,
                        group: partition.group,
                        epoch: partition.epoch,
                        view: partition.view,
                        replicas: partition.replicas.clone(),
                        primary_node: primary_node(&partition.replicas, partition.view),
                        log_start_offset: known.map(|offsets| offsets.log_start_offset),
                        high_watermark: known.map(|offsets| offsets.high_watermark),
                    }
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

/// The record-log segment size, as `describe` shows it.
fn segment_size(info: &TopicInfo) -> String {
    match info.segment_bytes {
        0 => "node default".to_owned(),
        bytes => bytes_human(bytes),
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
        segment_bytes: args.segment_bytes,
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
            "description": info.as_ref().map(|info| TopicJson::from_info(info, &Offsets::new())),
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
        write!(out, "{}", describe_text(&info, &Offsets::new()))?;
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
        let topics: Vec<TopicJson> = metadata
            .topics
            .iter()
            .map(|info| TopicJson::from_info(info, &Offsets::new()))
            .collect();
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

/// `strand topic describe STREAM/TOPIC`: the catalog's view, with each
/// partition's offsets from the replicas' status (left out, without an
/// error, when the cluster status cannot be had).
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
    let offsets = match client.cluster_status().await {
        Ok(status) => partition_offsets(&info, &status),
        Err(_) => Offsets::new(),
    };
    if json {
        return print_json(out, &TopicJson::from_info(&info, &offsets));
    }
    write!(out, "{}", describe_text(&info, &offsets))?;
    Ok(())
}

/// The `topic describe` text: policies, then one row per partition; with
/// `EARLIEST` and `END` columns when `offsets` knows any partition's.
pub(crate) fn describe_text(info: &TopicInfo, offsets: &Offsets) -> String {
    let mut policies = Table::new(&["TOPIC", &format!("{}/{}", info.stream, info.topic)]);
    policies.row(vec!["durability".into(), info.durability.name().into()]);
    policies.row(vec!["confirm".into(), confirm_name(info.confirm)]);
    policies.row(vec![
        "cursors".into(),
        info.consumer_offset_durability.name().into(),
    ]);
    policies.row(vec!["retention".into(), retention(info)]);
    policies.row(vec!["segments".into(), segment_size(info)]);
    let with_offsets = info
        .partitions
        .iter()
        .any(|partition| offsets.contains_key(&partition.group));
    let mut header = vec!["PARTITION", "GROUP", "EPOCH", "VIEW", "PRIMARY", "REPLICAS"];
    if with_offsets {
        header.extend(["EARLIEST", "END"]);
    }
    let mut partitions = Table::new(&header);
    for partition in &info.partitions {
        let replicas: Vec<String> = partition.replicas.iter().map(u32::to_string).collect();
        let primary = primary_node(&partition.replicas, partition.view)
            .map_or_else(|| "-".to_owned(), |node| format!("node {node}"));
        let mut row = vec![
            partition.partition.to_string(),
            partition.group.to_string(),
            partition.epoch.to_string(),
            partition.view.to_string(),
            primary,
            format!("nodes {}", replicas.join(",")),
        ];
        if with_offsets {
            let known = offsets.get(&partition.group);
            let or_dash = |offset: Option<u64>| {
                offset.map_or_else(|| "-".to_owned(), |offset| offset.to_string())
            };
            row.push(or_dash(known.map(|offsets| offsets.log_start_offset)));
            row.push(or_dash(known.map(|offsets| offsets.high_watermark)));
        }
        partitions.row(row);
    }
    format!("{}\n{}", policies.render(), partitions.render())
}

#[cfg(test)]
mod tests {
    use strand_wire::Durability;

    use super::*;
    use crate::{ClusterStatusReply, NodeAnswer, PartitionInfo};

    fn info() -> TopicInfo {
        TopicInfo {
            stream: "shop".into(),
            topic: "orders".into(),
            confirm: ConfirmPolicy::MajorityDurable,
            durability: Durability::Persisted,
            consumer_offset_durability: Durability::Persisted,
            retention_bytes: 2048,
            retention_ms: 0,
            segment_bytes: 0,
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
        let text = describe_text(&info(), &Offsets::new());
        assert_eq!(
            text,
            "TOPIC       shop/orders\n\
             durability  persisted\n\
             confirm     majority\n\
             cursors     persisted\n\
             retention   2.0 KiB\n\
             segments    node default\n\
             \n\
             PARTITION  GROUP  EPOCH  VIEW  PRIMARY  REPLICAS\n\
             0          7      0      1     node 2   nodes 1,2,3\n\
             1          8      0      2     node 3   nodes 1,2,3\n"
        );
    }

    #[test]
    fn describe_shows_the_segment_size() {
        let sized = TopicInfo {
            segment_bytes: 1 << 20,
            ..info()
        };
        let text = describe_text(&sized, &Offsets::new());
        assert!(text.contains("segments    1.0 MiB\n"), "{text}");
        let json = serde_json::to_value(TopicJson::from_info(&sized, &Offsets::new()))
            .expect("serializes");
        assert_eq!(json["segment_bytes"], 1 << 20);
        assert_eq!(json["retention_bytes"], 2048);
        let json = serde_json::to_value(TopicJson::from_info(&info(), &Offsets::new()))
            .expect("serializes");
        assert_eq!(json["segment_bytes"], 0, "0: the node's default");
    }

    /// Replica `replica` of `group` as its node reports it: `primary` leads
    /// view 1, and the log holds `start..end`.
    fn report(group: u64, replica: u8, primary: u8, start: u64, end: u64) -> GroupStatus {
        GroupStatus {
            group,
            stream: "shop".into(),
            topic: "orders".into(),
            partition: 0,
            epoch: 0,
            confirm: ConfirmPolicy::MajorityDurable,
            durability: Durability::Persisted,
            write_quorum: 2,
            view_change_quorum: 2,
            replica,
            view: 1,
            log_view: 1,
            status: "normal".into(),
            primary,
            op: 0,
            commit_op: 0,
            log_start_offset: start,
            high_watermark: end,
            untrusted_log: false,
            replicas: Vec::new(),
        }
    }

    /// Nodes 1 to 3 answering with these groups each.
    fn cluster(answers: Vec<Vec<GroupStatus>>) -> ClusterStatus {
        ClusterStatus {
            nodes: answers
                .into_iter()
                .zip(1..)
                .map(|(groups, node)| NodeAnswer {
                    node,
                    address: format!("h:{node}"),
                    result: Ok(ClusterStatusReply {
                        node,
                        nodes: Vec::new(),
                        groups,
                    }),
                })
                .collect(),
        }
    }

    #[test]
    fn the_leading_replica_gives_the_offsets() {
        // Group 7: replica 1 leads; a backup that retained less long and a
        // backup that is further along in its own log do not count.
        let status = cluster(vec![
            vec![report(7, 0, 1, 100, 900), report(99, 0, 0, 5, 6)],
            vec![report(7, 1, 1, 120, 800)],
            vec![report(7, 2, 1, 150, 950)],
        ]);
        let offsets = partition_offsets(&info(), &status);
        assert_eq!(
            offsets,
            Offsets::from([(
                7,
                PartitionOffsets {
                    log_start_offset: 120,
                    high_watermark: 800,
                }
            )]),
            "group 8 unreported, group 99 not this topic's"
        );
    }

    #[test]
    fn without_a_leader_the_highest_end_gives_the_offsets() {
        let mut changing = report(8, 1, 1, 40, 500);
        changing.status = "view_change".into();
        let status = cluster(vec![
            vec![report(8, 0, 1, 30, 600)],
            vec![changing],
            vec![report(8, 2, 1, 50, 550)],
        ]);
        let offsets = partition_offsets(&info(), &status);
        assert_eq!(
            offsets.get(&8),
            Some(&PartitionOffsets {
                log_start_offset: 30,
                high_watermark: 600,
            })
        );
        // The newest of two replicas that each think they lead.
        let mut stale = report(8, 0, 0, 10, 400);
        stale.view = 0;
        let mut current = report(8, 1, 1, 20, 300);
        current.view = 1;
        let offsets = partition_offsets(&info(), &cluster(vec![vec![stale], vec![current]]));
        assert_eq!(
            offsets.get(&8).map(|offsets| offsets.high_watermark),
            Some(300)
        );
    }

    #[test]
    fn describe_shows_each_partitions_earliest_offset_and_end() {
        let offsets = Offsets::from([(
            7,
            PartitionOffsets {
                log_start_offset: 1_500,
                high_watermark: 20_000,
            },
        )]);
        let text = describe_text(&info(), &offsets);
        assert!(
            text.ends_with(
                "PARTITION  GROUP  EPOCH  VIEW  PRIMARY  REPLICAS     EARLIEST  END\n\
                 0          7      0      1     node 2   nodes 1,2,3  1500      20000\n\
                 1          8      0      2     node 3   nodes 1,2,3  -         -\n"
            ),
            "{text}"
        );
        let json =
            serde_json::to_value(TopicJson::from_info(&info(), &offsets)).expect("serializes");
        assert_eq!(json["partitions"][0]["log_start_offset"], 1_500);
        assert_eq!(json["partitions"][0]["high_watermark"], 20_000);
        let unknown = &json["partitions"][1];
        assert!(unknown.get("log_start_offset").is_none(), "{unknown}");
        assert!(unknown.get("high_watermark").is_none(), "{unknown}");
    }

    #[test]
    fn describe_without_any_status_keeps_the_catalog_columns() {
        // The cluster status failed, or no node reported the partitions.
        let offsets = partition_offsets(&info(), &cluster(vec![Vec::new()]));
        assert!(offsets.is_empty());
        let text = describe_text(&info(), &offsets);
        assert!(text.contains("PRIMARY  REPLICAS\n"), "{text}");
        assert!(!text.contains("EARLIEST"), "{text}");
        let json =
            serde_json::to_value(TopicJson::from_info(&info(), &offsets)).expect("serializes");
        assert!(json["partitions"][0].get("high_watermark").is_none());
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
