//! `strand partition reassign` (a partition's new replica set and confirm
//! policy: members as `node@slot` before and after, `W/R` before and after,
//! and how the change takes effect) and `strand partition drop-replica`
//! (delete a removed replica's retired copy; it needs `--yes`).
//!
//! The node that receives either checks it against the partition's
//! primary's status ([`crate::safety`]) before it proposes: a new replica
//! set in which `min(W, W')` or more replicas lack acknowledged records
//! (joining, or still catching up) is refused unless `--force`, since one
//! more lost copy could then lose confirmed records; so is a drop while a
//! member still catches up (the removed copy may hold records only it has).

use std::io::Write;

use serde::Serialize;

use super::args::{DropReplicaArgs, ReassignArgs};
use super::errors::CliError;
use super::print_json;
use super::table::Table;
use super::topic::confirm_name;
use crate::{Client, ClientError, PartitionTarget, Reassigned};

/// One member of an epoch as `--json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct MemberView {
    node: u32,
    slot: u8,
}

/// One epoch's assignment as printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct EpochView {
    epoch: u32,
    replicas: Vec<MemberView>,
    confirm: String,
    write_quorum: u8,
    view_change_quorum: u8,
}

impl EpochView {
    /// The members as `node@slot`, space-separated.
    fn replicas_text(&self) -> String {
        let members: Vec<String> = self
            .replicas
            .iter()
            .map(|member| format!("{}@{}", member.node, member.slot))
            .collect();
        members.join(" ")
    }

    /// `W/R`.
    fn quorums_text(&self) -> String {
        format!("{}/{}", self.write_quorum, self.view_change_quorum)
    }
}

/// Everything `partition reassign` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ReassignView {
    /// The partition as named on the command line.
    target: String,
    group: u64,
    /// The first line's name of the partition: the target, and its group
    /// when it was named by topic.
    #[serde(skip)]
    heading: String,
    /// True when the change takes effect with no view change.
    in_place: bool,
    /// True when nothing was done: the plan a dry run was answered with.
    dry_run: bool,
    before: EpochView,
    after: EpochView,
    joining: Vec<u32>,
    leaving: Vec<u32>,
}

impl ReassignView {
    /// The view of an accepted reassignment of `target`, or of the plan a
    /// dry run was answered with.
    pub(crate) fn new(target: &PartitionTarget, reply: &Reassigned, dry_run: bool) -> ReassignView {
        let members = |members: &[(u8, u32)]| {
            members
                .iter()
                .map(|&(slot, node)| MemberView { node, slot })
                .collect()
        };
        let heading = match target {
            PartitionTarget::Group(_) => target.to_string(),
            PartitionTarget::Partition { .. } => format!("{target} (group {})", reply.group),
        };
        ReassignView {
            target: target.to_string(),
            group: reply.group,
            heading,
            in_place: reply.in_place,
            dry_run,
            before: EpochView {
                epoch: reply.previous_epoch,
                replicas: members(&reply.previous_members),
                confirm: confirm_name(reply.previous_confirm),
                write_quorum: reply.previous_write_quorum,
                view_change_quorum: reply.previous_view_change_quorum,
            },
            after: EpochView {
                epoch: reply.epoch,
                replicas: members(&reply.members),
                confirm: confirm_name(reply.confirm),
                write_quorum: reply.write_quorum,
                view_change_quorum: reply.view_change_quorum,
            },
            joining: reply.joining.clone(),
            leaving: reply.leaving.clone(),
        }
    }

    /// The human report: the partition, before and after side by side, who
    /// joins and leaves, and how the change takes effect.
    pub(crate) fn text(&self) -> String {
        let (before, after) = (&self.before, &self.after);
        let mut text = format!(
            "{}: epoch {} -> {}\n",
            self.heading, before.epoch, after.epoch
        );
        let mut table = Table::new(&["", "BEFORE", "", "AFTER"]);
        let rows = [
            ("replicas", before.replicas_text(), after.replicas_text()),
            ("W/R", before.quorums_text(), after.quorums_text()),
            ("confirm", before.confirm.clone(), after.confirm.clone()),
        ];
        for (label, before, after) in rows {
            table.row(vec![label.to_owned(), before, "->".to_owned(), after]);
        }
        text.push_str(&table.render());
        for node in &self.joining {
            text.push_str(&format!(
                "joining: node {node} (starts empty and catches up)\n"
            ));
        }
        for node in &self.leaving {
            text.push_str(&format!(
                "leaving: node {node} (its data stays until `strand partition drop-replica {} \
                 --node {node} --yes`)\n",
                self.group
            ));
        }
        text.push_str(&match self.in_place {
            true => "takes effect in place (no view change)\n".to_owned(),
            false => format!(
                "takes effect through a view change at epoch {}\n",
                self.after.epoch
            ),
        });
        if self.dry_run {
            text.push_str(
                "dry run: the node's safety check passes now; nothing was changed (run it again \
                 without --dry-run to move)\n",
            );
        }
        text
    }
}

/// Runs `strand partition reassign TARGET --replicas N,.. [--confirm POLICY]`.
pub(crate) async fn reassign(
    client: &Client,
    args: ReassignArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let doing = format!("reassign {}", args.target);
    let (target, replicas) = (args.target.clone(), &args.replicas);
    let reply = match args.dry_run {
        true => {
            client
                .preview_reassign_partition(target, replicas, args.confirm, args.force)
                .await
        }
        false => {
            client
                .reassign_partition(target, replicas, args.confirm, args.force)
                .await
        }
    };
    let reply = reply.map_err(|error| refused_or(&doing, error))?;
    let view = ReassignView::new(&args.target, &reply, args.dry_run);
    if json {
        return print_json(out, &view);
    }
    write!(out, "{}", view.text())?;
    Ok(())
}

/// A node's safety refusal is a refused confirmation (exit code 2, like a
/// missing `--yes`): nothing was done and `--force` overrides it.
fn refused_or(doing: &str, error: ClientError) -> CliError {
    match error {
        ClientError::Refused { message } => CliError::Usage(message),
        error => CliError::client(doing, error),
    }
}

/// The refusal printed when `drop-replica` is run without `--yes`.
pub(crate) fn drop_refusal(args: &DropReplicaArgs) -> CliError {
    CliError::Usage(format!(
        "drop-replica deletes the copy of {} that node {} kept after it was removed (its data \
         on disk); nothing was done. Re-run with --yes",
        args.target, args.node
    ))
}

/// Runs `strand partition drop-replica TARGET --node N --yes`.
pub(crate) async fn drop_replica(
    client: &Client,
    args: DropReplicaArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if !args.yes && !args.dry_run {
        return Err(drop_refusal(&args));
    }
    let doing = format!("drop node {}'s copy of {}", args.node, args.target);
    let target = args.target.clone();
    let outcome = match args.dry_run {
        true => {
            client
                .preview_drop_replica(target, args.node, args.force)
                .await
        }
        false => client.drop_replica(target, args.node, args.force).await,
    };
    outcome.map_err(|error| refused_or(&doing, error))?;
    if json {
        let dropped = serde_json::json!({
            "target": args.target.to_string(), "node": args.node,
            "dropped": !args.dry_run, "dry_run": args.dry_run,
        });
        return print_json(out, &dropped);
    }
    let done = match args.dry_run {
        true => "would drop (dry run: nothing was deleted)",
        false => "dropped",
    };
    writeln!(
        out,
        "{}: {done} the retired copy on node {}",
        args.target, args.node
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use strand_wire::ConfirmPolicy;

    use super::*;

    fn replacement() -> Reassigned {
        Reassigned {
            group: 4,
            epoch: 1,
            in_place: false,
            members: vec![(0, 1), (2, 3), (3, 4)],
            confirm: ConfirmPolicy::MajorityDurable,
            write_quorum: 2,
            view_change_quorum: 2,
            previous_epoch: 0,
            previous_members: vec![(0, 1), (1, 2), (2, 3)],
            previous_confirm: ConfirmPolicy::MajorityDurable,
            previous_write_quorum: 2,
            previous_view_change_quorum: 2,
            joining: vec![4],
            leaving: vec![2],
        }
    }

    fn shop_orders_0() -> PartitionTarget {
        PartitionTarget::Partition {
            stream: "shop".into(),
            topic: "orders".into(),
            partition: 0,
        }
    }

    #[test]
    fn a_replacement_prints_both_epochs_and_the_view_change() {
        let text = ReassignView::new(&shop_orders_0(), &replacement(), false).text();
        assert_eq!(
            text,
            "shop/orders/0 (group 4): epoch 0 -> 1\n          \
             BEFORE           AFTER\n\
             replicas  1@0 2@1 3@2  ->  1@0 3@2 4@3\n\
             W/R       2/2          ->  2/2\n\
             confirm   majority     ->  majority\n\
             joining: node 4 (starts empty and catches up)\n\
             leaving: node 2 (its data stays until `strand partition drop-replica 4 --node 2 \
             --yes`)\n\
             takes effect through a view change at epoch 1\n"
        );
    }

    #[test]
    fn a_policy_change_in_place_says_so() {
        let reply = Reassigned {
            members: vec![(0, 1), (1, 2), (2, 3)],
            confirm: ConfirmPolicy::MajorityDurable,
            previous_confirm: ConfirmPolicy::LocalDurable,
            previous_write_quorum: 3,
            previous_view_change_quorum: 1,
            in_place: true,
            joining: Vec::new(),
            leaving: Vec::new(),
            ..replacement()
        };
        let text = ReassignView::new(&PartitionTarget::Group(4), &reply, false).text();
        assert!(text.starts_with("group 4: epoch 0 -> 1\n"), "{text}");
        assert!(text.contains("W/R       3/1          ->  2/2\n"), "{text}");
        assert!(
            text.contains("confirm   local        ->  majority\n"),
            "{text}"
        );
        assert!(
            !text.contains("joining") && !text.contains("leaving"),
            "{text}"
        );
        assert!(
            text.ends_with("takes effect in place (no view change)\n"),
            "{text}"
        );
    }

    #[test]
    fn a_dry_run_shows_the_plan_and_says_nothing_changed() {
        let view = ReassignView::new(&shop_orders_0(), &replacement(), true);
        let text = view.text();
        assert!(
            text.contains("replicas  1@0 2@1 3@2  ->  1@0 3@2 4@3\n"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "dry run: the node's safety check passes now; nothing was changed (run it \
                 again without --dry-run to move)\n"
            ),
            "{text}"
        );
        let json = serde_json::to_value(&view).expect("serializes");
        assert_eq!(json["dry_run"], true);
    }

    #[test]
    fn json_names_slots_and_quorums() {
        let view = ReassignView::new(&shop_orders_0(), &replacement(), false);
        let json = serde_json::to_value(&view).expect("serializes");
        assert_eq!(json["group"], 4);
        assert_eq!(json["in_place"], false);
        assert_eq!(json["after"]["replicas"][2]["node"], 4);
        assert_eq!(json["after"]["replicas"][2]["slot"], 3);
        assert_eq!(json["before"]["write_quorum"], 2);
        assert_eq!(json["leaving"][0], 2);
    }

    #[test]
    fn the_drop_refusal_says_it_deletes_data() {
        let args = DropReplicaArgs {
            target: PartitionTarget::Group(4),
            node: 2,
            yes: false,
            force: false,
            dry_run: false,
        };
        let message = drop_refusal(&args).message();
        assert!(message.contains("deletes the copy of group 4"), "{message}");
        assert!(message.contains("node 2"), "{message}");
        assert!(message.contains("--yes"), "{message}");
        assert_eq!(drop_refusal(&args).outcome(), super::super::Outcome::Usage);
    }
}
