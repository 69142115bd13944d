//! **Pure**: whether a cluster has settled, decided from one poll of every
//! node's status ([`Snapshot`]); how many view changes it took
//! ([`ViewHighs`], and per group from the nodes' counters:
//! [`GroupViewChanges`]); which node is primary of the most groups, and how
//! evenly the nodes lead ([`Leadership`]); and whether every node's groups
//! have gone quiet ([`NodeMetrics`]).
//!
//! Settled means: every node answers; every partition group of the created
//! topics is `normal` on at least `replicas` nodes; no replica of any group
//! (the metadata plane included) reports another status; the replicas of a
//! group are normal in one view; and no node has a group waiting in a view
//! change (`attention` is empty everywhere).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;
use strand_client::{AttentionReport, ClusterStatus};

use crate::prometheus::{self, Sample};

/// The status a replica reports while it serves in its view (the consensus
/// core's `Status::Normal`, by its `Status::name`, as `ClusterStatus`
/// reports it).
pub const STATUS_NORMAL: &str = "normal";

/// The metadata plane's group id.
pub const METADATA_GROUP: u64 = 0;

/// One replica of one group, as the node hosting it reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    /// The node that reported it.
    pub node: u32,
    /// The group.
    pub group: u64,
    /// The replica's view.
    pub view: u32,
    /// True when its status is [`STATUS_NORMAL`].
    pub normal: bool,
    /// True when it is its view's primary (`replica == primary`).
    pub primary: bool,
}

/// One poll of every node: who answered, every replica they host, and
/// whether any group waits for an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Every node the cluster's metadata lists: `Ok` if it answered, else why not.
    pub nodes: BTreeMap<u32, Result<(), String>>,
    /// Every replica reported, across the nodes that answered.
    pub sightings: Vec<Sighting>,
    /// Groups waiting in a view change, over all nodes; `Err` when some node
    /// did not say.
    pub attention: Result<usize, String>,
}

impl Snapshot {
    /// The snapshot of a status poll and an attention poll.
    pub fn from_status(
        status: &ClusterStatus,
        attention: Result<&AttentionReport, String>,
    ) -> Self {
        let nodes = status
            .nodes
            .iter()
            .map(|answer| {
                let answered = answer.result.as_ref().map(|_| ());
                (answer.node, answered.map_err(ToString::to_string))
            })
            .collect();
        let sightings = status
            .groups()
            .map(|(node, group)| Sighting {
                node,
                group: group.group,
                view: group.view,
                normal: group.status == STATUS_NORMAL,
                primary: group.replica == group.primary,
            })
            .collect();
        Snapshot {
            nodes,
            sightings,
            attention: attention.and_then(attention_count),
        }
    }

    /// The snapshot of a poll no node answered.
    pub fn unreachable(reason: String) -> Self {
        Snapshot {
            nodes: BTreeMap::new(),
            sightings: Vec::new(),
            attention: Err(reason),
        }
    }
}

fn attention_count(report: &AttentionReport) -> Result<usize, String> {
    let failed = report.nodes.iter().find_map(|answer| {
        let error = answer.result.as_ref().err()?;
        Some(format!("node {}: {error}", answer.node))
    });
    match failed {
        Some(reason) => Err(reason),
        None => Ok(report.entries().count()),
    }
}

/// What a settled cluster looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    /// Nodes `1..=nodes` must all answer.
    pub nodes: u32,
    /// Each partition group must be normal on this many nodes.
    pub replicas: u8,
    /// The partition groups of the created topics.
    pub groups: BTreeSet<u64>,
}

/// The settle decision of one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every condition holds.
    Settled,
    /// Not yet, and why.
    Waiting(Unsettled),
}

/// Why a snapshot is not settled: every count is of what is still wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsettled {
    /// Expected nodes that did not answer.
    pub nodes_silent: Vec<u32>,
    /// Partition groups normal on fewer than `replicas` nodes.
    pub groups_short: usize,
    /// Groups with a replica in another status than normal.
    pub groups_not_normal: usize,
    /// Groups whose normal replicas are in different views.
    pub groups_split: usize,
    /// Groups waiting in a view change, or why that is unknown.
    pub attention: Result<usize, String>,
    /// The first group that is not settled, described.
    pub example: Option<String>,
}

impl fmt::Display for Unsettled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "silent nodes {:?}; {} groups short of replicas, {} not normal, {} split across views",
            self.nodes_silent, self.groups_short, self.groups_not_normal, self.groups_split
        )?;
        match &self.attention {
            Ok(waiting) => write!(f, "; {waiting} waiting for attention")?,
            Err(reason) => write!(f, "; attention unknown ({reason})")?,
        }
        if let Some(example) = &self.example {
            write!(f, "; e.g. {example}")?;
        }
        Ok(())
    }
}

/// One group's replicas, summed up over a snapshot.
#[derive(Debug, Default)]
struct Tally {
    normal_nodes: BTreeSet<u32>,
    other_nodes: BTreeSet<u32>,
    normal_views: BTreeSet<u32>,
}

/// Whether `snapshot` shows the settled cluster `expected` describes.
pub fn verdict(snapshot: &Snapshot, expected: &Expectation) -> Verdict {
    let nodes_silent: Vec<u32> = (1..=expected.nodes)
        .filter(|node| !matches!(snapshot.nodes.get(node), Some(Ok(()))))
        .collect();
    let mut tallies: BTreeMap<u64, Tally> = expected
        .groups
        .iter()
        .map(|group| (*group, Tally::default()))
        .collect();
    for sighting in &snapshot.sightings {
        let tally = tallies.entry(sighting.group).or_default();
        if sighting.normal {
            tally.normal_nodes.insert(sighting.node);
            tally.normal_views.insert(sighting.view);
        } else {
            tally.other_nodes.insert(sighting.node);
        }
    }
    let short = |group: &u64, tally: &Tally| {
        expected.groups.contains(group) && tally.normal_nodes.len() < usize::from(expected.replicas)
    };
    let not_normal = |tally: &Tally| !tally.other_nodes.is_empty();
    let split = |tally: &Tally| tally.normal_views.len() > 1;
    let count = |wrong: &dyn Fn(&u64, &Tally) -> bool| {
        tallies
            .iter()
            .filter(|(group, tally)| wrong(group, tally))
            .count()
    };
    let unsettled = Unsettled {
        nodes_silent,
        groups_short: count(&short),
        groups_not_normal: count(&|_, tally| not_normal(tally)),
        groups_split: count(&|_, tally| split(tally)),
        attention: snapshot.attention.clone(),
        example: tallies
            .iter()
            .find(|(group, tally)| short(group, tally) || not_normal(tally) || split(tally))
            .map(|(group, tally)| describe(*group, tally)),
    };
    let settled = unsettled.nodes_silent.is_empty()
        && unsettled.example.is_none()
        && unsettled.attention == Ok(0);
    if settled {
        Verdict::Settled
    } else {
        Verdict::Waiting(unsettled)
    }
}

fn describe(group: u64, tally: &Tally) -> String {
    let mut description = format!(
        "group {group} normal on nodes {:?} in views {:?}",
        tally.normal_nodes, tally.normal_views
    );
    if !tally.other_nodes.is_empty() {
        description.push_str(&format!(", not normal on {:?}", tally.other_nodes));
    }
    description
}

/// Views moved, split between the partition groups and the metadata plane:
/// the view changes when each moved one view, more than them when a view
/// change went straight to a view its group's preferred primary leads (a
/// group whose every replica restarted from a crash does). Zero views moved
/// is zero view changes; [`GroupViewChanges`] counts them exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ViewChanges {
    /// Summed over the partition groups of the created topics.
    pub partition_groups: u64,
    /// Of the metadata group.
    pub metadata_group: u64,
}

/// Per group, the highest view any of its replicas was seen in. Views only
/// grow and a fresh group starts in view 0, so the highest view of a fresh
/// group is how far its views moved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewHighs {
    views: BTreeMap<u64, u32>,
}

impl ViewHighs {
    /// Takes in the views of `snapshot`.
    pub fn record(&mut self, snapshot: &Snapshot) {
        for sighting in &snapshot.sightings {
            let high = self.views.entry(sighting.group).or_insert(sighting.view);
            *high = (*high).max(sighting.view);
        }
    }

    /// The highest view seen of `group`.
    pub fn highest(&self, group: u64) -> Option<u32> {
        self.views.get(&group).copied()
    }

    /// How far views moved between `before` and now, of `groups` and of the
    /// metadata group (a group `before` never saw counts from view 0).
    pub fn changes_since(&self, before: &ViewHighs, groups: &BTreeSet<u64>) -> ViewChanges {
        let advanced = |group: u64| {
            let now = self.highest(group).unwrap_or(0);
            let then = before.highest(group).unwrap_or(0);
            assert!(now >= then, "group {group}: view {then} then {now}");
            u64::from(now - then)
        };
        ViewChanges {
            partition_groups: groups.iter().map(|group| advanced(*group)).sum(),
            metadata_group: advanced(METADATA_GROUP),
        }
    }
}

/// How many view changes each group went through, counted from the nodes'
/// `view_changes_total{group}` (every replica counts the view changes it
/// started, itself or joining; a process starts from zero): per group the
/// most any of its replicas counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GroupViewChanges {
    /// Partition groups by how many view changes they went through (every
    /// group of `groups` counts, 0 when no replica reported one).
    pub groups_by_count: BTreeMap<u64, u64>,
    /// The most view changes of any one partition group.
    pub partition_most: u64,
    /// The metadata group's.
    pub metadata: u64,
}

impl GroupViewChanges {
    /// Counts from `scrapes`, one per node, over `groups`.
    pub fn from_scrapes(scrapes: &[Vec<Sample>], groups: &BTreeSet<u64>) -> GroupViewChanges {
        let mut most: BTreeMap<u64, u64> = BTreeMap::new();
        for sample in scrapes.iter().flatten() {
            if sample.name != "view_changes_total" {
                continue;
            }
            let Some(group) = sample.label("group").and_then(|group| group.parse().ok()) else {
                continue;
            };
            let count = sample.value.max(0.0).round() as u64;
            let entry = most.entry(group).or_default();
            *entry = (*entry).max(count);
        }
        let count_of = |group: u64| most.get(&group).copied().unwrap_or(0);
        let mut groups_by_count = BTreeMap::new();
        for group in groups {
            *groups_by_count.entry(count_of(*group)).or_default() += 1;
        }
        GroupViewChanges {
            partition_most: groups_by_count.keys().copied().max().unwrap_or(0),
            groups_by_count,
            metadata: count_of(METADATA_GROUP),
        }
    }

    /// True when no group, the metadata group included, went through more
    /// than `most` view changes.
    pub fn at_most(&self, most: u64) -> bool {
        self.partition_most <= most && self.metadata <= most
    }
}

/// Per node, the groups of `groups` whose primary it hosts: the normal
/// primary in the highest view seen of each group.
pub fn primaries(snapshot: &Snapshot, groups: &BTreeSet<u64>) -> BTreeMap<u32, BTreeSet<u64>> {
    let mut newest: BTreeMap<u64, (u32, u32)> = BTreeMap::new(); // group -> (view, node)
    for sighting in &snapshot.sightings {
        if !(sighting.normal && sighting.primary && groups.contains(&sighting.group)) {
            continue;
        }
        let entry = newest
            .entry(sighting.group)
            .or_insert((sighting.view, sighting.node));
        if sighting.view > entry.0 {
            *entry = (sighting.view, sighting.node);
        }
    }
    let mut by_node: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
    for (group, (_, node)) in newest {
        by_node.entry(node).or_default().insert(group);
    }
    by_node
}

/// The node that is primary of the most of `groups` (the lowest id on a
/// tie), and those groups.
pub fn busiest_primary(
    snapshot: &Snapshot,
    groups: &BTreeSet<u64>,
) -> Option<(u32, BTreeSet<u64>)> {
    primaries(snapshot, groups)
        .into_iter()
        .fold(None, |best, (node, led)| match best {
            Some((_, ref best_led)) if best_led.len() >= led.len() => best,
            _ => Some((node, led)),
        })
}

/// How leadership of the partition groups is spread over the nodes: the
/// measure of balanced primaries.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Leadership {
    /// Per node (every node of the cluster, leading or not), the partition
    /// groups it is the normal primary of.
    pub led: BTreeMap<u32, u64>,
    /// Groups with no normal primary in this poll.
    pub unled: u64,
    /// The largest share any one node leads, in percent of the groups.
    pub share_max_percent: f64,
}

impl Leadership {
    /// Whether no node leads more than its fair share plus a fifth
    /// (40 % of the groups on 3 nodes) and every group has a primary.
    pub fn balanced(&self) -> bool {
        let nodes = self.led.len().max(1) as f64;
        self.unled == 0 && self.share_max_percent <= 120.0 / nodes + 1e-9
    }
}

/// The leadership of `expected`'s partition groups in `snapshot`.
pub fn leadership(snapshot: &Snapshot, expected: &Expectation) -> Leadership {
    let by_node = primaries(snapshot, &expected.groups);
    let mut led: BTreeMap<u32, u64> = (1..=expected.nodes).map(|node| (node, 0)).collect();
    for (node, groups) in &by_node {
        *led.entry(*node).or_default() = groups.len() as u64;
    }
    let total = expected.groups.len() as u64;
    let leading: u64 = led.values().sum();
    let most = led.values().copied().max().unwrap_or(0);
    Leadership {
        led,
        unled: total.saturating_sub(leading),
        share_max_percent: if total == 0 {
            0.0
        } else {
            most as f64 * 100.0 / total as f64
        },
    }
}

/// The figures of one node's metrics scrape that say how busy it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NodeMetrics {
    /// The node.
    pub node: u32,
    /// Groups it hosts (`groups_hosted`).
    pub groups_hosted: u64,
    /// Of those, the quiet ones: idle and not ticked (`groups_quiet`).
    pub groups_quiet: u64,
    /// View changes its replicas started since the process started
    /// (`view_changes_total`, summed over every group label).
    pub view_changes_total: u64,
}

impl NodeMetrics {
    /// The figures of node `node` in its scrape `samples` (0 for a metric
    /// not exported yet).
    pub fn from_samples(node: u32, samples: &[Sample]) -> NodeMetrics {
        let count = |name: &str| prometheus::sum(samples, name).max(0.0).round() as u64;
        NodeMetrics {
            node,
            groups_hosted: count("groups_hosted"),
            groups_quiet: count("groups_quiet"),
            view_changes_total: count("view_changes_total"),
        }
    }
}

/// True when each of nodes `1..=nodes` was scraped and all its groups are quiet.
pub fn all_quiet(metrics: &[NodeMetrics], nodes: u32) -> bool {
    (1..=nodes).all(|node| {
        metrics
            .iter()
            .any(|figures| figures.node == node && figures.groups_quiet == figures.groups_hosted)
    })
}

#[cfg(test)]
mod tests {
    use strand_client::{
        ClientError, ClusterStatusReply, ConfirmPolicy, Durability, GroupStatus, NodeAnswer,
    };

    use super::*;

    fn seen(node: u32, group: u64, view: u32, normal: bool, primary: bool) -> Sighting {
        Sighting {
            node,
            group,
            view,
            normal,
            primary,
        }
    }

    /// Three nodes, groups 1 and 2 plus the metadata plane on all three, all
    /// normal in view `view`; node `view % 3 + 1` is primary.
    fn settled_snapshot(view: u32) -> Snapshot {
        let mut sightings = Vec::new();
        for group in [METADATA_GROUP, 1, 2] {
            for node in 1..=3 {
                sightings.push(seen(node, group, view, true, node == view % 3 + 1));
            }
        }
        Snapshot {
            nodes: (1..=3).map(|node| (node, Ok(()))).collect(),
            sightings,
            attention: Ok(0),
        }
    }

    fn expectation() -> Expectation {
        Expectation {
            nodes: 3,
            replicas: 3,
            groups: BTreeSet::from([1, 2]),
        }
    }

    fn unsettled(snapshot: &Snapshot) -> Unsettled {
        match verdict(snapshot, &expectation()) {
            Verdict::Settled => panic!("settled: {snapshot:?}"),
            Verdict::Waiting(unsettled) => unsettled,
        }
    }

    #[test]
    fn every_group_normal_everywhere_with_no_attention_is_settled() {
        assert_eq!(
            verdict(&settled_snapshot(0), &expectation()),
            Verdict::Settled
        );
    }

    #[test]
    fn a_silent_node_or_an_unknown_attention_is_not_settled() {
        let mut snapshot = settled_snapshot(0);
        snapshot.nodes.insert(2, Err("unreachable".to_owned()));
        assert_eq!(unsettled(&snapshot).nodes_silent, vec![2]);
        let mut snapshot = settled_snapshot(0);
        snapshot.nodes.remove(&3);
        assert_eq!(unsettled(&snapshot).nodes_silent, vec![3]);
        let mut snapshot = settled_snapshot(0);
        snapshot.attention = Err("node 1: timeout".to_owned());
        assert!(
            unsettled(&snapshot)
                .to_string()
                .contains("attention unknown")
        );
        snapshot.attention = Ok(1);
        assert_eq!(unsettled(&snapshot).attention, Ok(1));
    }

    #[test]
    fn a_group_on_too_few_nodes_or_missing_is_short() {
        let mut snapshot = settled_snapshot(0);
        snapshot
            .sightings
            .retain(|sighting| !(sighting.group == 1 && sighting.node == 3) && sighting.group != 2);
        let waiting = unsettled(&snapshot);
        assert_eq!(waiting.groups_short, 2);
        assert_eq!(waiting.groups_not_normal, 0);
        assert!(waiting.example.expect("an example").starts_with("group 1 "));
    }

    #[test]
    fn a_replica_in_a_view_change_or_a_stale_view_is_not_settled() {
        let mut snapshot = settled_snapshot(0);
        snapshot.sightings[0].normal = false; // the metadata plane on node 1
        let waiting = unsettled(&snapshot);
        assert_eq!((waiting.groups_not_normal, waiting.groups_short), (1, 0));
        let mut snapshot = settled_snapshot(1);
        snapshot.sightings[3].view = 0; // group 1 on node 1 missed view 1
        assert_eq!(unsettled(&snapshot).groups_split, 1);
    }

    #[test]
    fn view_changes_are_the_highest_views_of_fresh_groups() {
        let mut highs = ViewHighs::default();
        let mut snapshot = settled_snapshot(0);
        snapshot.sightings[3].view = 2; // group 1, node 1
        snapshot.sightings[8].view = 1; // group 2, node 3
        highs.record(&snapshot);
        let groups = BTreeSet::from([1, 2]);
        let fresh = highs.changes_since(&ViewHighs::default(), &groups);
        assert_eq!(
            fresh,
            ViewChanges {
                partition_groups: 3,
                metadata_group: 0
            }
        );
        let before = highs.clone();
        highs.record(&settled_snapshot(4)); // everything moved to view 4
        highs.record(&settled_snapshot(0)); // an older answer changes nothing
        let since = highs.changes_since(&before, &groups);
        assert_eq!((since.partition_groups, since.metadata_group), (2 + 3, 4));
    }

    #[test]
    fn the_busiest_primary_leads_the_most_groups_in_their_newest_views() {
        let mut snapshot = settled_snapshot(0); // node 1 leads groups 1 and 2
        let groups = BTreeSet::from([1, 2]);
        assert_eq!(
            busiest_primary(&snapshot, &groups),
            Some((1, BTreeSet::from([1, 2])))
        );
        // Group 2 moved to view 1 (node 2 leads); node 1 still says view 0.
        snapshot.sightings.push(seen(2, 2, 1, true, true));
        let by_node = primaries(&snapshot, &groups);
        assert_eq!(by_node.get(&1), Some(&BTreeSet::from([1])));
        assert_eq!(by_node.get(&2), Some(&BTreeSet::from([2])));
        // A tie goes to the lowest node id.
        assert_eq!(
            busiest_primary(&snapshot, &groups).map(|(node, _)| node),
            Some(1)
        );
        assert_eq!(busiest_primary(&snapshot, &BTreeSet::new()), None);
    }

    #[test]
    fn leadership_counts_every_node_and_is_balanced_within_a_fifth_over_fair() {
        let expected = |groups: &[u64]| Expectation {
            nodes: 3,
            replicas: 3,
            groups: groups.iter().copied().collect(),
        };
        let snapshot = settled_snapshot(0); // node 1 leads groups 1 and 2
        let lopsided = leadership(&snapshot, &expected(&[1, 2]));
        assert_eq!(lopsided.led, BTreeMap::from([(1, 2), (2, 0), (3, 0)]));
        assert_eq!((lopsided.unled, lopsided.share_max_percent), (0, 100.0));
        assert!(!lopsided.balanced());
        // Five groups over three nodes: 2/2/1 is 40 %, balanced.
        let mut sightings = Vec::new();
        for (group, node) in [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3)] {
            sightings.push(seen(node, group, 0, true, true));
        }
        let spread = Snapshot {
            sightings,
            ..snapshot.clone()
        };
        let even = leadership(&spread, &expected(&[1, 2, 3, 4, 5]));
        assert_eq!(even.share_max_percent, 40.0);
        assert!(even.balanced());
        // A group with no normal primary is not balanced, however spread.
        let missing = leadership(&spread, &expected(&[1, 2, 3, 4, 5, 6]));
        assert_eq!(missing.unled, 1);
        assert!(!missing.balanced());
    }

    #[test]
    fn quiet_means_every_node_scraped_with_every_group_quiet() {
        let figures = |node, hosted, quiet| NodeMetrics {
            node,
            groups_hosted: hosted,
            groups_quiet: quiet,
            view_changes_total: 0,
        };
        assert!(all_quiet(&[figures(1, 7, 7), figures(2, 7, 7)], 2));
        assert!(!all_quiet(&[figures(1, 7, 7), figures(2, 7, 6)], 2));
        assert!(!all_quiet(&[figures(1, 7, 7)], 2), "node 2 was not scraped");
    }

    #[test]
    fn each_group_counts_the_most_view_changes_of_its_replicas() {
        let scrape = |text: &str| prometheus::parse(text).expect("valid exposition");
        let scrapes = [
            scrape("view_changes_total{group=\"0\"} 1\nview_changes_total{group=\"1\"} 1\n"),
            scrape("view_changes_total{group=\"1\"} 2\nview_changes_total{group=\"2\"} 1\n"),
            scrape("groups_hosted 3\nview_changes_total{group=\"9\"} 5\n"),
        ];
        let groups: BTreeSet<u64> = [1, 2, 3].into();
        let changes = GroupViewChanges::from_scrapes(&scrapes, &groups);
        // Group 3 reported none; group 9 is not one of the created groups.
        assert_eq!(changes.groups_by_count, [(0, 1), (1, 1), (2, 1)].into());
        assert_eq!(changes.partition_most, 2);
        assert_eq!(changes.metadata, 1);
        assert!(changes.at_most(2));
        assert!(!changes.at_most(1));
    }

    #[test]
    fn node_metrics_sum_the_view_changes_of_every_group() {
        let text = "groups_hosted 7\ngroups_quiet 5\nview_changes_total{group=\"0\"} 1\n\
                    view_changes_total{group=\"12\"} 2\n";
        let samples = prometheus::parse(text).expect("a valid scrape");
        let figures = NodeMetrics::from_samples(3, &samples);
        assert_eq!(
            figures,
            NodeMetrics {
                node: 3,
                groups_hosted: 7,
                groups_quiet: 5,
                view_changes_total: 3
            }
        );
        assert_eq!(NodeMetrics::from_samples(1, &[]).groups_hosted, 0);
    }

    fn group_status(group: u64, replica: u8, view: u32, status: &str) -> GroupStatus {
        GroupStatus {
            group,
            stream: "scale".to_owned(),
            topic: "t0".to_owned(),
            partition: 0,
            epoch: 1,
            confirm: ConfirmPolicy::MajorityDurable,
            durability: Durability::Persisted,
            write_quorum: 2,
            view_change_quorum: 2,
            replica,
            view,
            log_view: view,
            status: status.to_owned(),
            primary: 1,
            op: 0,
            commit_op: 0,
            log_start_offset: 0,
            high_watermark: 0,
            untrusted_log: false,
            replicas: Vec::new(),
        }
    }

    #[test]
    fn a_snapshot_reads_the_sdk_status() {
        let answer = |node, result| NodeAnswer {
            node,
            address: format!("127.0.0.1:{node}"),
            result,
        };
        let reply = ClusterStatusReply {
            node: 1,
            nodes: Vec::new(),
            groups: vec![
                group_status(7, 1, 2, "normal"),
                group_status(8, 0, 2, "view_change"),
            ],
        };
        let unreachable = ClientError::Unreachable {
            address: "127.0.0.1:2".to_owned(),
            reason: "refused".to_owned(),
        };
        let status = ClusterStatus {
            nodes: vec![answer(1, Ok(reply)), answer(2, Err(unreachable))],
        };
        let snapshot = Snapshot::from_status(&status, Err("no answer".to_owned()));
        assert_eq!(snapshot.nodes.get(&1), Some(&Ok(())));
        assert!(matches!(snapshot.nodes.get(&2), Some(Err(reason)) if reason.contains("refused")));
        assert_eq!(
            snapshot.sightings,
            vec![seen(1, 7, 2, true, true), seen(1, 8, 2, false, false)]
        );
        assert_eq!(snapshot.attention, Err("no answer".to_owned()));
    }
}
