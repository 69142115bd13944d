//! `strand partition reassign` (a partition's new replica set and confirm
//! policy: members as `node@slot` before and after, `W/R` before and after,
//! and how the change takes effect) and `strand partition drop-replica`
//! (delete a removed replica's retired copy; it needs `--yes`).
//!
//! Both first read the partition's primary's status. A new replica set in
//! which `min(W, W')` or more replicas lack acknowledged records (joining,
//! or still catching up) is refused unless `--force`, since one more lost
//! copy could then lose confirmed records; so is a drop while a member
//! still catches up (the removed copy may hold records only it has).

use std::io::Write;

use serde::Serialize;
use strand_consensus::confirm::confirm_rule;
use strand_wire::ConfirmPolicy;
use strand_wire::ops::GroupStatus;

use super::args::{DropReplicaArgs, ReassignArgs};
use super::errors::CliError;
use super::print_json;
use super::table::Table;
use super::topic::confirm_name;
use crate::{Client, PartitionTarget, Reassigned};

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
    before: EpochView,
    after: EpochView,
    joining: Vec<u32>,
    leaving: Vec<u32>,
}

impl ReassignView {
    /// The view of an accepted reassignment of `target`.
    pub(crate) fn new(target: &PartitionTarget, reply: &Reassigned) -> ReassignView {
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
    if !args.force {
        let group = client
            .resolve_partition(&args.target)
            .await
            .map_err(|error| CliError::client(&doing, error))?;
        if let Some(primary) = primary_status(client, group).await
            && let Some(short) = shortfall(&primary, &args.replicas, args.confirm)
        {
            return Err(CliError::Usage(short.refusal(&args.target)));
        }
    }
    let reply = client
        .reassign_partition(args.target.clone(), &args.replicas, args.confirm)
        .await
        .map_err(|error| CliError::client(&doing, error))?;
    let view = ReassignView::new(&args.target, &reply);
    if json {
        return print_json(out, &view);
    }
    write!(out, "{}", view.text())?;
    Ok(())
}

/// The status of `group` as its serving primary reports it (the one that
/// knows which copies are caught up); `None` when no node answers for one.
async fn primary_status(client: &Client, group: u64) -> Option<GroupStatus> {
    let status = client.cluster_status().await.ok()?;
    status
        .groups()
        .map(|(_, status)| status)
        .filter(|status| {
            status.group == group && status.status == "normal" && status.replica == status.primary
        })
        .max_by_key(|status| (status.epoch, status.view))
        .cloned()
}

/// A new replica set with too few copies that hold every acknowledged record.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shortfall {
    /// New replicas that are not replicas now.
    joining: Vec<u32>,
    /// Replicas that stay but do not hold every committed record yet.
    catching_up: Vec<u32>,
    /// Copies that confirm a record before or after the change, the fewer
    /// (`min(W, W')`).
    write_quorum: u8,
}

impl Shortfall {
    fn refusal(&self, target: &PartitionTarget) -> String {
        let nodes = |nodes: &[u32]| {
            let names: Vec<String> = nodes.iter().map(u32::to_string).collect();
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(",")
            }
        };
        format!(
            "refusing to reassign {target}: {} of the new replicas would lack acknowledged \
             records (joining: {}; catching up: {}) and {} copies confirm, so one more lost copy \
             could lose confirmed records; nothing was done. Wait until `strand status` \
             shows the replicas caught up, or re-run with --force",
            self.joining.len() + self.catching_up.len(),
            nodes(&self.joining),
            nodes(&self.catching_up),
            self.write_quorum
        )
    }
}

/// Whether `nodes` (with `confirm`, or the current policy) would leave
/// `min(W, W')` or more of its replicas without every acknowledged record,
/// as the primary's `status` sees the current replicas. Until each such replica
/// catches up, the records confirmed before the change rest on the rest.
fn shortfall(
    status: &GroupStatus,
    nodes: &[u32],
    confirm: Option<ConfirmPolicy>,
) -> Option<Shortfall> {
    let count = u8::try_from(nodes.len()).ok().filter(|count| *count > 0)?;
    // Records confirmed before the change rest on W copies, later ones on W'.
    let write_quorum = confirm_rule(confirm.unwrap_or(status.confirm), count)
        .write
        .min(status.write_quorum.max(1));
    let current = |node: u32| status.replicas.iter().find(|replica| replica.node == node);
    let joining: Vec<u32> = nodes
        .iter()
        .copied()
        .filter(|node| current(*node).is_none())
        .collect();
    let catching_up: Vec<u32> = nodes
        .iter()
        .copied()
        .filter(|node| current(*node).is_some_and(|replica| !replica.caught_up))
        .collect();
    (joining.len() + catching_up.len() >= usize::from(write_quorum)).then_some(Shortfall {
        joining,
        catching_up,
        write_quorum,
    })
}

/// Why dropping a removed copy now could lose records, if it could: a
/// member still lacks committed records (the removed copy may be the only
/// other holder), or no primary serves to say they are all caught up.
fn drop_too_soon(args: &DropReplicaArgs, primary: Option<&GroupStatus>) -> Option<String> {
    let what = format!(
        "refusing to drop node {}'s retired copy of {}",
        args.node, args.target
    );
    let advice = "nothing was done. Wait until `strand status` shows every replica caught up, \
                  or re-run with --force";
    let Some(primary) = primary else {
        return Some(format!(
            "{what}: no primary serves the partition now, so nobody can say its replicas hold \
             every record; {advice}"
        ));
    };
    let lagging: Vec<String> = primary
        .replicas
        .iter()
        .filter(|replica| !replica.caught_up)
        .map(|replica| replica.node.to_string())
        .collect();
    (!lagging.is_empty()).then(|| {
        format!(
            "{what}: node(s) {} still catch up, and the removed copy may hold records they \
             lack; {advice}",
            lagging.join(",")
        )
    })
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
    if !args.yes {
        return Err(drop_refusal(&args));
    }
    let doing = format!("drop node {}'s copy of {}", args.node, args.target);
    if !args.force {
        let group = client
            .resolve_partition(&args.target)
            .await
            .map_err(|error| CliError::client(&doing, error))?;
        let primary = primary_status(client, group).await;
        if let Some(refusal) = drop_too_soon(&args, primary.as_ref()) {
            return Err(CliError::Usage(refusal));
        }
    }
    client
        .drop_replica(args.target.clone(), args.node)
        .await
        .map_err(|error| CliError::client(&doing, error))?;
    if json {
        let dropped = serde_json::json!({
            "target": args.target.to_string(), "node": args.node, "dropped": true,
        });
        return print_json(out, &dropped);
    }
    writeln!(
        out,
        "{}: dropped the retired copy on node {}",
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
        let text = ReassignView::new(&shop_orders_0(), &replacement()).text();
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
        let text = ReassignView::new(&PartitionTarget::Group(4), &reply).text();
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
    fn json_names_slots_and_quorums() {
        let view = ReassignView::new(&shop_orders_0(), &replacement());
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
        };
        let message = drop_refusal(&args).message();
        assert!(message.contains("deletes the copy of group 4"), "{message}");
        assert!(message.contains("node 2"), "{message}");
        assert!(message.contains("--yes"), "{message}");
        assert_eq!(drop_refusal(&args).outcome(), super::super::Outcome::Usage);
    }

    /// A majority group on nodes 1, 2, 3 whose primary says node 3 lags.
    fn three_with_a_lagging_copy() -> GroupStatus {
        let replica = |slot: u8, node: u32, caught_up: bool| strand_wire::ops::ReplicaStatus {
            replica: slot,
            node,
            op: 10,
            caught_up,
        };
        GroupStatus {
            group: 1,
            stream: "shop".to_owned(),
            topic: "orders".to_owned(),
            partition: 0,
            epoch: 0,
            confirm: ConfirmPolicy::MajorityDurable,
            durability: strand_wire::Durability::Persisted,
            write_quorum: 2,
            view_change_quorum: 2,
            replica: 0,
            view: 0,
            log_view: 0,
            status: "normal".to_owned(),
            primary: 0,
            op: 10,
            commit_op: 10,
            log_start_offset: 0,
            high_watermark: 0,
            untrusted_log: false,
            replicas: vec![
                replica(0, 1, true),
                replica(1, 2, true),
                replica(2, 3, false),
            ],
        }
    }

    #[test]
    fn a_set_whose_good_copies_are_fewer_than_it_needs_is_refused() {
        let status = three_with_a_lagging_copy();
        // Replacing node 2 by node 4 leaves node 1 as the one good copy of
        // three, two of which confirm.
        let short = shortfall(&status, &[1, 3, 4], None).expect("refused");
        assert_eq!(
            short,
            Shortfall {
                joining: vec![4],
                catching_up: vec![3],
                write_quorum: 2
            }
        );
        let text = short.refusal(&shop_orders_0());
        assert!(text.contains("joining: 4; catching up: 3"), "{text}");
        assert!(text.contains("--force"), "{text}");
        // Replacing the lagging node keeps two good copies.
        assert_eq!(shortfall(&status, &[1, 2, 4], None), None);
        // One copy confirming from now on, one short copy is already too many.
        assert!(shortfall(&status, &[1, 2, 3], Some(ConfirmPolicy::Count(1))).is_some());
        assert_eq!(shortfall(&status, &[1, 2, 3], None), None);
        assert_eq!(
            shortfall(&status, &[1, 2, 3], Some(ConfirmPolicy::LocalDurable)),
            None
        );
    }

    #[test]
    fn a_retired_copy_is_kept_while_a_member_catches_up() {
        let args = DropReplicaArgs {
            target: shop_orders_0(),
            node: 4,
            yes: true,
            force: false,
        };
        let mut status = three_with_a_lagging_copy();
        let refusal = drop_too_soon(&args, Some(&status)).expect("refused");
        assert!(refusal.contains("node(s) 3 still catch up"), "{refusal}");
        assert!(refusal.contains("--force"), "{refusal}");
        assert!(drop_too_soon(&args, None).is_some(), "nobody serves");
        status.replicas[2].caught_up = true;
        assert_eq!(drop_too_soon(&args, Some(&status)), None);
    }
}
