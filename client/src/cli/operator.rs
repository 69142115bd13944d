//! The operator commands of DESIGN.md: `strand attention` (which partitions'
//! view changes wait, why, for which replicas) and `strand accept-loss`
//! (let one proceed with the logs at hand; it may lose confirmed records,
//! so it needs `--yes`).

use std::collections::HashMap;
use std::io::Write;

use serde::Serialize;

use super::Outcome;
use super::args::AcceptLossArgs;
use super::errors::{CliError, client_summary};
use super::print_json;
use super::table::Table;
use crate::{
    AttentionReason, AttentionReport, AttentionStart, Client, MetadataReply, PartitionTarget,
};

/// A waiting group as printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct EntryView {
    node: u32,
    group: u64,
    name: String,
    view: u32,
    reason: &'static str,
    awaited: Vec<AwaitedView>,
    detail: String,
    /// The latest history start its view change knows (the one a
    /// `below_history_start` wait is below).
    history_start: Option<StartView>,
}

/// A history start as printed: by record offset and the node that took
/// over there (reference A's attention entry).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct StartView {
    view: u32,
    op: u64,
    /// One past the last record offset at the start; `None`: not recorded.
    offset_end: Option<u64>,
    replica: u8,
    node: Option<u32>,
    /// The same, in words.
    text: String,
}

impl StartView {
    fn of(start: &AttentionStart) -> StartView {
        StartView {
            view: start.view,
            op: start.op,
            offset_end: start.offset_end,
            replica: start.replica,
            node: start.node,
            text: start.to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct AwaitedView {
    replica: u8,
    /// From the cluster's metadata; `None` when it could not be read.
    node: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct UnansweredView {
    node: u32,
    address: String,
    error: String,
}

/// Everything `attention` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct AttentionView {
    /// True when every node answered and no view change waits.
    clear: bool,
    entries: Vec<EntryView>,
    unanswered: Vec<UnansweredView>,
}

/// The name of a reason, as printed and in JSON.
pub(crate) fn reason_name(reason: AttentionReason) -> &'static str {
    match reason {
        AttentionReason::FewerTrustedThanQuorum => "fewer_trusted_than_quorum",
        AttentionReason::BelowHistoryStart => "below_history_start",
        AttentionReason::AwaitingStateTransfer => "awaiting_state_transfer",
        AttentionReason::MissingPrepare => "missing_prepare",
        AttentionReason::StorageFailed => "storage_failed",
        AttentionReason::DiskFull => "disk_full",
        AttentionReason::GroupFailed => "group_failed",
    }
}

impl AttentionView {
    /// The view of every node's answer; `metadata` maps replica indexes to nodes.
    pub(crate) fn from_report(
        report: &AttentionReport,
        metadata: Option<&MetadataReply>,
    ) -> AttentionView {
        let replica_nodes: HashMap<u64, &[u32]> = metadata
            .iter()
            .flat_map(|metadata| &metadata.topics)
            .flat_map(|topic| &topic.partitions)
            .map(|partition| (partition.group, partition.replicas.as_slice()))
            .collect();
        let entries = report
            .entries()
            .map(|(node, entry)| EntryView {
                node,
                group: entry.group,
                name: format!("{}/{}/{}", entry.stream, entry.topic, entry.partition),
                view: entry.view,
                reason: reason_name(entry.reason),
                awaited: entry
                    .awaited
                    .iter()
                    .map(|&replica| AwaitedView {
                        replica,
                        node: replica_nodes
                            .get(&entry.group)
                            .and_then(|nodes| nodes.get(usize::from(replica)))
                            .copied(),
                    })
                    .collect(),
                detail: entry.detail.clone(),
                history_start: entry.history_start.as_ref().map(StartView::of),
            })
            .collect();
        let unanswered = report
            .nodes
            .iter()
            .filter_map(|answer| {
                answer.result.as_ref().err().map(|error| UnansweredView {
                    node: answer.node,
                    address: answer.address.clone(),
                    error: client_summary(error),
                })
            })
            .collect();
        AttentionView {
            clear: report.is_clear(),
            entries,
            unanswered,
        }
    }

    /// The human report.
    pub(crate) fn text(&self) -> String {
        if self.clear {
            return "nothing needs attention: every node answered and no view change waits\n"
                .to_owned();
        }
        let mut text = String::new();
        if !self.entries.is_empty() {
            let mut table = Table::new(&[
                "PARTITION",
                "GROUP",
                "NODE",
                "VIEW",
                "REASON",
                "AWAITED",
                "DETAIL",
            ]);
            for entry in &self.entries {
                let awaited: Vec<String> = entry
                    .awaited
                    .iter()
                    .map(|awaited| match awaited.node {
                        Some(node) => format!("replica {} (node {node})", awaited.replica),
                        None => format!("replica {}", awaited.replica),
                    })
                    .collect();
                table.row(vec![
                    entry.name.clone(),
                    entry.group.to_string(),
                    entry.node.to_string(),
                    entry.view.to_string(),
                    entry.reason.to_owned(),
                    if awaited.is_empty() {
                        "-".to_owned()
                    } else {
                        awaited.join(", ")
                    },
                    entry.detail.clone(),
                ]);
            }
            text.push_str(&table.render());
            text.push_str(&self.hints());
        }
        for node in &self.unanswered {
            text.push_str(&format!(
                "node {} ({}) did not answer: {}\n",
                node.node, node.address, node.error
            ));
        }
        text
    }

    /// What to do, one line per kind of wait shown.
    fn hints(&self) -> String {
        let mut text = String::new();
        let storage = reason_name(AttentionReason::StorageFailed);
        if self.entries.iter().any(|entry| entry.reason == storage) {
            text.push_str(
                "storage_failed: free space on that node's data disk and it opens the partition \
                 again by itself (within seconds); a failing disk: replace it, then restart \
                 the node; the other replicas serve meanwhile if enough remain\n",
            );
        }
        let failed = reason_name(AttentionReason::GroupFailed);
        if self.entries.iter().any(|entry| entry.reason == failed) {
            text.push_str(
                "group_failed: that node's copy stopped on a bug in the node (its log names \
                 it: please report it); the other replicas serve meanwhile and the node opens \
                 the copy again by itself\n",
            );
        }
        text.push_str(&self.below_start_hints());
        let disk_full = reason_name(AttentionReason::DiskFull);
        if self.entries.iter().any(|entry| entry.reason == disk_full) {
            text.push_str(
                "disk_full: that node refuses produces until its data disk has room again: \
                 delete topics (`strand topic delete`), lower retention (`strand topic \
                 alter --retention-bytes`) or grow the disk; it resumes by itself\n",
            );
        }
        if self
            .entries
            .iter()
            .any(|entry| entry.reason != storage && entry.reason != disk_full)
        {
            text.push_str(
                "bring the awaited replicas back; if they are lost for good, \
                 `strand accept-loss STREAM/TOPIC/PARTITION --yes` proceeds without them \
                 (it may lose confirmed records)\n",
            );
        }
        text
    }

    /// One line per wait below a history start: what the view change needs
    /// (a log that reaches the start's record offset) and who has one.
    fn below_start_hints(&self) -> String {
        let below = reason_name(AttentionReason::BelowHistoryStart);
        self.entries
            .iter()
            .filter(|entry| entry.reason == below)
            .filter_map(|entry| Some((entry, entry.history_start.as_ref()?)))
            .map(|(entry, start)| {
                format!(
                    "below_history_start: {} needs a log through the history start of {}; \
                     bring that node back if it is down\n",
                    entry.name, start.text
                )
            })
            .collect()
    }
}

/// Runs `strand attention`: exit code 0 when clear, 3 otherwise.
pub(crate) async fn attention(
    client: &Client,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let report = client
        .attention()
        .await
        .map_err(|error| CliError::client("attention", error))?;
    // Only to name the nodes of awaited replicas: the report stands without it.
    let metadata = if report.is_clear() {
        None
    } else {
        client.metadata().await.ok()
    };
    let view = AttentionView::from_report(&report, metadata.as_ref());
    if json {
        print_json(out, &view)?;
    } else {
        write!(out, "{}", view.text())?;
    }
    if view.clear {
        Ok(())
    } else {
        Err(CliError::Reported(Outcome::NeedsAttention))
    }
}

/// The refusal printed when `accept-loss` is run without `--yes`.
pub(crate) fn refusal(target: &PartitionTarget) -> CliError {
    CliError::Usage(format!(
        "accept-loss lets the view change of {target} proceed with the logs at hand and MAY \
         LOSE CONFIRMED RECORDS; nothing was done. Check `strand attention` first (bring the \
         awaited replicas back if you can), then re-run with --yes"
    ))
}

/// Runs `strand accept-loss TARGET --yes`.
pub(crate) async fn accept_loss(
    client: &Client,
    args: AcceptLossArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if !args.yes {
        return Err(refusal(&args.target));
    }
    let doing = format!("accept loss for {}", args.target);
    let group = client
        .resolve_partition(&args.target)
        .await
        .map_err(|error| CliError::client(&doing, error))?;
    let answers = client
        .accept_loss(group)
        .await
        .map_err(|error| CliError::client(&doing, error))?;
    let rows: Vec<serde_json::Value> = answers
        .iter()
        .map(|answer| match &answer.result {
            Ok(reply) => serde_json::json!({
                "node": answer.node, "address": answer.address, "accepted": true,
                "view": reply.view, "op": reply.op,
            }),
            Err(error) => serde_json::json!({
                "node": answer.node, "address": answer.address, "accepted": false,
                "error": client_summary(error),
            }),
        })
        .collect();
    if json {
        print_json(out, &serde_json::json!({ "group": group, "nodes": rows }))?;
    } else {
        let mut table = Table::new(&["NODE", "ADDRESS", "RESULT"]);
        for answer in &answers {
            let result = match &answer.result {
                Ok(reply) => format!(
                    "accepted: view {} proceeds from op {}",
                    reply.view, reply.op
                ),
                Err(error) => client_summary(error),
            };
            table.row(vec![
                answer.node.to_string(),
                answer.address.clone(),
                result,
            ]);
        }
        write!(out, "group {group}\n{}", table.render())?;
    }
    if answers.iter().any(|answer| answer.result.is_ok()) {
        return Ok(());
    }
    Err(CliError::Failed(format!(
        "{doing}: no node accepted (a partition that is not stuck has nothing to accept; \
         `strand attention` lists the stuck ones); nothing was done"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttentionEntry, AttentionReply, NodeAnswer};

    fn report(entries: Vec<AttentionEntry>) -> AttentionReport {
        AttentionReport {
            nodes: vec![NodeAnswer {
                node: 1,
                address: "h:1".into(),
                result: Ok(AttentionReply { entries }),
            }],
        }
    }

    #[test]
    fn a_clear_report_says_so() {
        let view = AttentionView::from_report(&report(Vec::new()), None);
        assert!(view.clear);
        assert!(view.text().starts_with("nothing needs attention"));
    }

    #[test]
    fn a_waiting_partition_names_reason_and_awaited_replicas() {
        let entry = AttentionEntry {
            group: 4,
            stream: "s".into(),
            topic: "t".into(),
            partition: 0,
            view: 3,
            reason: AttentionReason::FewerTrustedThanQuorum,
            awaited: vec![2],
            detail: "1 of 2 trusted".into(),
            history_start: None,
        };
        let view = AttentionView::from_report(&report(vec![entry]), None);
        assert!(!view.clear);
        let text = view.text();
        assert!(
            text.starts_with(
                "PARTITION  GROUP  NODE  VIEW  REASON                     AWAITED    DETAIL\n\
                 s/t/0      4      1     3     fewer_trusted_than_quorum  replica 2  1 of 2 trusted\n"
            ),
            "{text}"
        );
        assert!(text.contains("accept-loss"));
    }

    #[test]
    fn a_failed_disk_is_named_and_its_hint_is_not_accept_loss() {
        let entry = AttentionEntry {
            group: 5,
            stream: "s".into(),
            topic: "t".into(),
            partition: 1,
            view: 0,
            reason: AttentionReason::StorageFailed,
            awaited: Vec::new(),
            detail: "storage failed: no space left on device".into(),
            history_start: None,
        };
        let view = AttentionView::from_report(&report(vec![entry]), None);
        assert!(!view.clear);
        let text = view.text();
        assert!(text.contains("storage_failed"), "{text}");
        assert!(text.contains("free space"), "{text}");
        assert!(!text.contains("accept-loss"), "{text}");
    }

    #[test]
    fn a_wait_below_a_history_start_names_its_record_offset_and_node() {
        let entry = AttentionEntry {
            group: 4,
            stream: "s".into(),
            topic: "t".into(),
            partition: 0,
            view: 9,
            reason: AttentionReason::BelowHistoryStart,
            awaited: vec![1],
            detail: "waiting for nodes [2]".into(),
            history_start: Some(AttentionStart {
                view: 5,
                op: 40,
                offset_end: Some(1_200),
                replica: 1,
                node: Some(2),
            }),
        };
        let view = AttentionView::from_report(&report(vec![entry]), None);
        let text = view.text();
        assert!(
            text.contains(
                "below_history_start: s/t/0 needs a log through the history start of view 5 \
                 at record offset 1200 (op 40), taken over by node 2"
            ),
            "{text}"
        );
        let json = serde_json::to_value(&view).expect("json");
        let start = &json["entries"][0]["history_start"];
        assert_eq!(start["offset_end"], 1_200);
        assert_eq!(start["node"], 2);
    }

    #[test]
    fn the_refusal_names_the_target_and_the_flag() {
        let message = refusal(&PartitionTarget::Group(9)).message();
        assert!(message.contains("group 9"), "{message}");
        assert!(message.contains("--yes"), "{message}");
        assert_eq!(
            refusal(&PartitionTarget::Group(9)).outcome(),
            Outcome::Usage
        );
    }
}
