//! `strand status`: every node (answering or not), then every group's
//! replicas side by side, each as its own node reports it: status, view,
//! the primary it follows, commit and lag behind the group's highest commit,
//! the earliest record offset it still holds and its end (high watermark),
//! whether its log is trusted. Replicas on nodes that did not answer show as
//! such. [`StatusView`] is built purely from the SDK's answers, then printed
//! as a table or as JSON.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use super::errors::{CliError, client_summary};
use super::print_json;
use super::table::Table;
use super::topic::confirm_name;
use crate::{Client, ClusterStatus, GroupStatus};

/// Everything `status` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct StatusView {
    nodes: Vec<NodeView>,
    partitions: Vec<PartitionView>,
    untrusted: Vec<UntrustedView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct NodeView {
    node: u32,
    address: String,
    answered: bool,
    error: Option<String>,
    groups: usize,
    /// Peers the node has no live connection to.
    unreachable_peers: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct PartitionView {
    group: u64,
    /// `STREAM/TOPIC/PARTITION`, or `(metadata)` for group 0.
    name: String,
    /// The highest assignment epoch any replica reported.
    epoch: u32,
    durability: &'static str,
    confirm: String,
    write_quorum: u8,
    view_change_quorum: u8,
    replicas: Vec<ReplicaView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct ReplicaView {
    replica: u8,
    node: u32,
    /// Whether its node answered with this group.
    answered: bool,
    status: Option<String>,
    view: Option<u32>,
    log_view: Option<u32>,
    primary_node: Option<u32>,
    op: Option<u64>,
    commit_op: Option<u64>,
    /// How far its commit is behind the group's highest reported commit.
    lag: Option<u64>,
    /// The earliest record offset it still holds (retention drops older
    /// ones); `None` when it did not answer, or for the metadata plane.
    log_start_offset: Option<u64>,
    /// One past the last record offset it committed; `None` when it did not
    /// answer, or for the metadata plane.
    high_watermark: Option<u64>,
    untrusted_log: Option<bool>,
    /// Whether it holds every committed op, as the primary sees it (`false`:
    /// still catching up, not counted toward confirms); `None` when no
    /// primary in normal status answered.
    caught_up: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct UntrustedView {
    group: u64,
    name: String,
    replica: u8,
    node: u32,
}

fn group_name(group: &GroupStatus) -> String {
    if group.group == crate::routing::METADATA_GROUP {
        "(metadata)".to_owned()
    } else {
        format!("{}/{}/{}", group.stream, group.topic, group.partition)
    }
}

impl StatusView {
    /// The view of every node's answer.
    pub(crate) fn from_status(status: &ClusterStatus) -> StatusView {
        let nodes = status
            .nodes
            .iter()
            .map(|answer| match &answer.result {
                Ok(reply) => NodeView {
                    node: answer.node,
                    address: answer.address.clone(),
                    answered: true,
                    error: None,
                    groups: reply.groups.len(),
                    unreachable_peers: reply
                        .nodes
                        .iter()
                        .filter(|peer| !peer.reachable && peer.id != answer.node)
                        .map(|peer| peer.id)
                        .collect(),
                },
                Err(error) => NodeView {
                    node: answer.node,
                    address: answer.address.clone(),
                    answered: false,
                    error: Some(client_summary(error)),
                    groups: 0,
                    unreachable_peers: Vec::new(),
                },
            })
            .collect();
        let mut groups: BTreeMap<u64, Vec<(u32, &GroupStatus)>> = BTreeMap::new();
        for (node, group) in status.groups() {
            groups.entry(group.group).or_default().push((node, group));
        }
        let partitions: Vec<PartitionView> =
            groups.values().map(|reports| partition(reports)).collect();
        let untrusted = partitions
            .iter()
            .flat_map(|partition| {
                partition
                    .replicas
                    .iter()
                    .filter(|replica| replica.untrusted_log == Some(true))
                    .map(|replica| UntrustedView {
                        group: partition.group,
                        name: partition.name.clone(),
                        replica: replica.replica,
                        node: replica.node,
                    })
            })
            .collect();
        StatusView {
            nodes,
            partitions,
            untrusted,
        }
    }

    /// The human tables.
    pub(crate) fn text(&self) -> String {
        let nodes = self.nodes_table();
        let replicas = self.replicas_table();
        let untrusted = self.untrusted_line();
        format!("{}\n{}\n{untrusted}", nodes.render(), replicas.render())
    }

    /// One row per node: its answer, its groups, the peers it cannot reach.
    fn nodes_table(&self) -> Table {
        let mut nodes = Table::new(&["NODE", "ADDRESS", "ANSWER", "GROUPS", "UNREACHABLE PEERS"]);
        for node in &self.nodes {
            let peers: Vec<String> = node.unreachable_peers.iter().map(u32::to_string).collect();
            nodes.row(vec![
                node.node.to_string(),
                node.address.clone(),
                node.error.clone().unwrap_or_else(|| "ok".to_owned()),
                if node.answered {
                    node.groups.to_string()
                } else {
                    "-".to_owned()
                },
                if peers.is_empty() {
                    "-".to_owned()
                } else {
                    peers.join(",")
                },
            ]);
        }
        nodes
    }

    /// One row per replica of every partition, side by side by partition.
    fn replicas_table(&self) -> Table {
        let mut replicas = Table::new(&[
            "PARTITION",
            "GROUP",
            "EPOCH",
            "POLICY",
            "REPLICA",
            "NODE",
            "STATUS",
            "VIEW",
            "PRIMARY",
            "COMMIT OP",
            "LAG",
            "EARLIEST",
            "END",
            "COPY",
            "LOG",
        ]);
        for partition in &self.partitions {
            let policy = format!(
                "{} W{}/R{}",
                partition.durability, partition.write_quorum, partition.view_change_quorum
            );
            for replica in &partition.replicas {
                replicas.row(replica_row(partition, &policy, replica));
            }
        }
        replicas
    }

    /// The line naming every untrusted log, or saying there is none.
    fn untrusted_line(&self) -> String {
        if self.untrusted.is_empty() {
            return "untrusted logs: none\n".to_owned();
        }
        let list: Vec<String> = self
            .untrusted
            .iter()
            .map(|entry| {
                format!(
                    "{} (group {}) replica {} on node {}",
                    entry.name, entry.group, entry.replica, entry.node
                )
            })
            .collect();
        format!("untrusted logs: {}\n", list.join("; "))
    }
}

/// One replica's row of the replicas table (`-` where it did not answer).
fn replica_row(partition: &PartitionView, policy: &str, replica: &ReplicaView) -> Vec<String> {
    let or_dash = |value: Option<String>| value.unwrap_or_else(|| "-".to_owned());
    vec![
        partition.name.clone(),
        partition.group.to_string(),
        partition.epoch.to_string(),
        policy.to_owned(),
        replica.replica.to_string(),
        replica.node.to_string(),
        replica
            .status
            .clone()
            .unwrap_or_else(|| "no answer".to_owned()),
        or_dash(replica.view.map(|view| view.to_string())),
        or_dash(replica.primary_node.map(|node| format!("node {node}"))),
        or_dash(replica.commit_op.map(|commit| commit.to_string())),
        or_dash(replica.lag.map(|lag| lag.to_string())),
        or_dash(replica.log_start_offset.map(|offset| offset.to_string())),
        or_dash(replica.high_watermark.map(|offset| offset.to_string())),
        or_dash(replica.caught_up.map(|caught_up| {
            if caught_up {
                "caught up"
            } else {
                "catching up"
            }
            .to_owned()
        })),
        or_dash(
            replica
                .untrusted_log
                .map(|untrusted| if untrusted { "UNTRUSTED" } else { "trusted" }.to_owned()),
        ),
    ]
}

/// One group from its replicas' reports (at least one).
fn partition(reports: &[(u32, &GroupStatus)]) -> PartitionView {
    let (_, first) = reports[0];
    let replica_nodes = replica_nodes(reports);
    // The metadata plane holds no records: it has no offsets to show.
    let records = first.group != crate::routing::METADATA_GROUP;
    let commit_max = reports
        .iter()
        .map(|(_, report)| report.commit_op)
        .max()
        .unwrap_or(0);
    let primary_report = primary_report(reports);
    let replicas = replica_nodes
        .iter()
        .map(|(&replica, &node)| {
            let report = reports
                .iter()
                .find(|(_, report)| report.replica == replica)
                .map(|(_, report)| *report);
            let caught_up = caught_up(primary_report, replica);
            match report {
                Some(report) => ReplicaView {
                    replica,
                    node,
                    answered: true,
                    status: Some(report.status.clone()),
                    view: Some(report.view),
                    log_view: Some(report.log_view),
                    primary_node: replica_nodes.get(&report.primary).copied(),
                    op: Some(report.op),
                    commit_op: Some(report.commit_op),
                    lag: Some(commit_max.saturating_sub(report.commit_op)),
                    log_start_offset: records.then_some(report.log_start_offset),
                    high_watermark: records.then_some(report.high_watermark),
                    untrusted_log: Some(report.untrusted_log),
                    caught_up,
                },
                None => unanswered(replica, node, caught_up),
            }
        })
        .collect();
    // The policy in effect: as the replica furthest into the newest epoch
    // reports it (a reassignment may be reaching the others).
    let newest = reports
        .iter()
        .map(|(_, report)| *report)
        .max_by_key(|report| (report.epoch, report.view))
        .unwrap_or(first);
    PartitionView {
        group: first.group,
        name: group_name(first),
        epoch: newest.epoch,
        durability: newest.durability.name(),
        confirm: confirm_name(newest.confirm),
        write_quorum: newest.write_quorum,
        view_change_quorum: newest.view_change_quorum,
        replicas,
    }
}

/// Every replica the reports name, by index, and the node it is on.
fn replica_nodes(reports: &[(u32, &GroupStatus)]) -> BTreeMap<u8, u32> {
    let mut replica_nodes: BTreeMap<u8, u32> = BTreeMap::new();
    for (node, report) in reports {
        replica_nodes.insert(report.replica, *node);
        for replica in &report.replicas {
            replica_nodes.entry(replica.replica).or_insert(replica.node);
        }
    }
    replica_nodes
}

/// The primary's report, whose view of each copy counts: only a primary in
/// normal status tracks which replicas hold every committed op.
fn primary_report<'a>(reports: &[(u32, &'a GroupStatus)]) -> Option<&'a GroupStatus> {
    reports
        .iter()
        .map(|(_, report)| *report)
        .filter(|report| report.replica == report.primary && report.status == "normal")
        .max_by_key(|report| report.view)
}

/// Whether `replica`'s copy holds every committed op, as the primary sees it.
fn caught_up(primary_report: Option<&GroupStatus>, replica: u8) -> Option<bool> {
    primary_report.and_then(|report| {
        report
            .replicas
            .iter()
            .find(|copy| copy.replica == replica)
            .map(|copy| copy.caught_up)
    })
}

/// A replica that did not answer: where it is, and what the primary says
/// of its copy.
fn unanswered(replica: u8, node: u32, caught_up: Option<bool>) -> ReplicaView {
    ReplicaView {
        replica,
        node,
        answered: false,
        status: None,
        view: None,
        log_view: None,
        primary_node: None,
        op: None,
        commit_op: None,
        lag: None,
        log_start_offset: None,
        high_watermark: None,
        untrusted_log: None,
        caught_up,
    }
}

/// Runs `strand status`.
pub(crate) async fn run(client: &Client, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let status = client
        .cluster_status()
        .await
        .map_err(|error| CliError::client("cluster status", error))?;
    let view = StatusView::from_status(&status);
    if json {
        return print_json(out, &view);
    }
    write!(out, "{}", view.text())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use strand_wire::{ConfirmPolicy, Durability};

    use super::*;
    use crate::{ClientError, ClusterStatusReply, NodeAnswer, NodeInfo, ReplicaStatus};

    /// Replica `replica` of group 4, whose log keeps offsets 20 up to ten
    /// records per committed op.
    fn group(replica: u8, commit_op: u64, untrusted_log: bool) -> GroupStatus {
        GroupStatus {
            group: 4,
            stream: "s".into(),
            topic: "t".into(),
            partition: 0,
            epoch: 0,
            confirm: ConfirmPolicy::MajorityDurable,
            durability: Durability::Replicated,
            write_quorum: 2,
            view_change_quorum: 2,
            replica,
            view: 1,
            log_view: 1,
            status: "normal".into(),
            primary: 1,
            op: commit_op,
            commit_op,
            log_start_offset: 20,
            high_watermark: commit_op * 10,
            untrusted_log,
            replicas: (0..3)
                .map(|index| ReplicaStatus {
                    replica: index,
                    node: u32::from(index) + 1,
                    op: 0,
                    caught_up: true,
                })
                .collect(),
        }
    }

    fn answer(node: u32, groups: Vec<GroupStatus>) -> NodeAnswer<ClusterStatusReply> {
        NodeAnswer {
            node,
            address: format!("h:{node}"),
            result: Ok(ClusterStatusReply {
                node,
                nodes: (1..=3)
                    .map(|id| NodeInfo {
                        id,
                        replica_address: String::new(),
                        client_address: String::new(),
                        reachable: id != 3,
                    })
                    .collect(),
                groups,
            }),
        }
    }

    fn three_nodes_one_down() -> ClusterStatus {
        ClusterStatus {
            nodes: vec![
                answer(1, vec![group(0, 7, false)]),
                answer(2, vec![group(1, 5, true)]),
                NodeAnswer {
                    node: 3,
                    address: "h:3".into(),
                    result: Err(ClientError::Unreachable {
                        address: "h:3".into(),
                        reason: "refused".into(),
                    }),
                },
            ],
        }
    }

    #[test]
    fn a_node_that_does_not_answer_still_has_its_rows() {
        let view = StatusView::from_status(&three_nodes_one_down());
        assert_eq!(
            view.text(),
            "NODE  ADDRESS  ANSWER                 GROUPS  UNREACHABLE PEERS\n\
             1     h:1      ok                     1       3\n\
             2     h:2      ok                     1       3\n\
             3     h:3      unreachable (refused)  -       -\n\
             \n\
             PARTITION  GROUP  EPOCH  POLICY            REPLICA  NODE  STATUS     VIEW  PRIMARY  COMMIT OP  LAG  EARLIEST  END  COPY       LOG\n\
             s/t/0      4      0      replicated W2/R2  0        1     normal     1     node 2   7          0    20        70   caught up  trusted\n\
             s/t/0      4      0      replicated W2/R2  1        2     normal     1     node 2   5          2    20        50   caught up  UNTRUSTED\n\
             s/t/0      4      0      replicated W2/R2  2        3     no answer  -     -        -          -    -         -    caught up  -\n\
             \n\
             untrusted logs: s/t/0 (group 4) replica 1 on node 2\n"
        );
    }

    #[test]
    fn the_primary_says_which_copies_are_still_catching_up() {
        let mut primary = group(1, 9, false);
        primary.epoch = 2;
        primary.replicas[2].caught_up = false;
        let mut backup = group(0, 9, false);
        backup.replicas[0].caught_up = false; // a backup's own list is not asked
        let status = ClusterStatus {
            nodes: vec![answer(1, vec![backup]), answer(2, vec![primary])],
        };
        let view = StatusView::from_status(&status);
        let partition = &view.partitions[0];
        assert_eq!(partition.epoch, 2, "the highest epoch reported");
        let copies: Vec<Option<bool>> = partition.replicas.iter().map(|r| r.caught_up).collect();
        assert_eq!(copies, [Some(true), Some(true), Some(false)]);
        assert!(view.text().contains("catching up"));
    }

    #[test]
    fn without_a_primary_in_normal_status_nobody_says_who_is_caught_up() {
        let mut changing = group(1, 9, false);
        changing.status = "view_change".into();
        let status = ClusterStatus {
            nodes: vec![answer(2, vec![changing])],
        };
        let view = StatusView::from_status(&status);
        assert!(
            view.partitions[0]
                .replicas
                .iter()
                .all(|r| r.caught_up.is_none())
        );
    }

    #[test]
    fn json_names_every_replica() {
        let view = StatusView::from_status(&three_nodes_one_down());
        let json = serde_json::to_value(&view).expect("serializes");
        assert_eq!(json["nodes"][2]["answered"], false);
        assert_eq!(json["partitions"][0]["replicas"][1]["lag"], 2);
        assert_eq!(json["partitions"][0]["replicas"][2]["answered"], false);
        assert_eq!(json["untrusted"][0]["node"], 2);
        let replica = &json["partitions"][0]["replicas"][1];
        assert_eq!(replica["log_start_offset"], 20);
        assert_eq!(replica["high_watermark"], 50);
        let silent = &json["partitions"][0]["replicas"][2];
        assert!(silent["log_start_offset"].is_null(), "{silent}");
        assert!(silent["high_watermark"].is_null(), "{silent}");
    }

    #[test]
    fn each_replica_shows_its_own_earliest_offset_and_end() {
        // Retention ran on the primary; the backup still holds older records
        // and has not applied the last commit.
        let mut primary = group(1, 9, false);
        primary.log_start_offset = 60;
        let mut backup = group(0, 8, false);
        backup.log_start_offset = 30;
        let status = ClusterStatus {
            nodes: vec![answer(1, vec![backup]), answer(2, vec![primary])],
        };
        let view = StatusView::from_status(&status);
        let offsets: Vec<(Option<u64>, Option<u64>)> = view.partitions[0]
            .replicas
            .iter()
            .map(|replica| (replica.log_start_offset, replica.high_watermark))
            .collect();
        assert_eq!(
            offsets,
            [(Some(30), Some(80)), (Some(60), Some(90)), (None, None)]
        );
        let text = view.text();
        assert!(text.contains("  LAG  EARLIEST  END  "), "{text}");
        assert!(text.contains("  1    30        80   "), "{text}");
        assert!(text.contains("  0    60        90   "), "{text}");
    }

    #[test]
    fn the_metadata_plane_has_no_offsets() {
        let mut metadata = group(1, 3, false);
        metadata.group = crate::routing::METADATA_GROUP;
        metadata.log_start_offset = 0;
        metadata.high_watermark = 0;
        let status = ClusterStatus {
            nodes: vec![answer(2, vec![metadata])],
        };
        let view = StatusView::from_status(&status);
        assert_eq!(view.partitions[0].name, "(metadata)");
        let answered = &view.partitions[0].replicas[1];
        assert_eq!(
            (answered.log_start_offset, answered.high_watermark),
            (None, None)
        );
        let json = serde_json::to_value(&view).expect("serializes");
        assert!(json["partitions"][0]["replicas"][1]["high_watermark"].is_null());
        let text = view.text();
        assert!(text.contains("  3          0    -         -    "), "{text}");
    }
}
