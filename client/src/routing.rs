//! Where to send what: node addresses, each group's replicas and primary
//! hint, the metadata plane's primary. Pure: updated from Metadata replies,
//! NotPrimary redirects and unreachable nodes; asked for addresses.
//!
//! The primary of a partition in view `v` is `replicas[v % replicas.len()]`.
//! Hints are only hints: a wrong guess costs one `NotPrimary` redirect.

use std::collections::{BTreeMap, HashMap};

use strand_wire::ops::MetadataReply;

/// The metadata plane's group id.
pub const METADATA_GROUP: u64 = 0;

#[derive(Debug, Clone, PartialEq, Eq)]
struct GroupRoute {
    epoch: u32,
    /// Node id of replica `i` at index `i` (empty when only a redirect is known).
    replicas: Vec<u32>,
    /// The latest view learnt (from metadata or a redirect).
    view: u32,
    /// Index into `replicas` of the replica believed primary.
    primary_index: usize,
    /// The primary's client address as a redirect named it, if it did.
    redirect_address: Option<String>,
}

/// The client's picture of the cluster.
#[derive(Debug, Clone, Default)]
pub struct Routing {
    nodes: BTreeMap<u32, String>,
    /// Every client address known (bootstrap first), without repeats.
    addresses: Vec<String>,
    groups: HashMap<u64, GroupRoute>,
    metadata_primary: Option<String>,
    /// Which address "any node" means now; moves past unreachable nodes.
    any_index: usize,
}

impl Routing {
    /// Routing that knows only the bootstrap addresses.
    pub fn new(bootstrap: &[String]) -> Routing {
        let mut routing = Routing::default();
        for address in bootstrap {
            routing.learn_address(address);
        }
        routing
    }

    fn learn_address(&mut self, address: &str) {
        if !address.is_empty() && !self.addresses.iter().any(|known| known == address) {
            self.addresses.push(address.to_owned());
        }
    }

    /// Takes in a Metadata reply: node addresses and partition routes. A
    /// route keeps a view learnt from a redirect when the reply's is older.
    pub fn apply_metadata(&mut self, reply: &MetadataReply) {
        self.nodes.clear();
        for node in &reply.nodes {
            self.nodes.insert(node.id, node.client_address.clone());
            self.learn_address(&node.client_address);
        }
        for topic in &reply.topics {
            for partition in &topic.partitions {
                let fresh = GroupRoute {
                    epoch: partition.epoch,
                    replicas: partition.replicas.clone(),
                    view: partition.view,
                    primary_index: primary_index(partition.view, partition.replicas.len()),
                    redirect_address: None,
                };
                let route = self
                    .groups
                    .entry(partition.group)
                    .or_insert_with(|| fresh.clone());
                let newer = fresh.epoch > route.epoch
                    || (fresh.epoch == route.epoch && fresh.view > route.view)
                    || route.replicas.is_empty();
                if newer {
                    *route = fresh;
                }
            }
        }
    }

    /// True when a request to `group` can be routed (group 0 always can, to
    /// any node, while one is known).
    pub fn knows_group(&self, group: u64) -> bool {
        group == METADATA_GROUP || self.groups.contains_key(&group)
    }

    /// Where requests for `group` go now.
    pub fn primary_address(&self, group: u64) -> Option<String> {
        if group == METADATA_GROUP {
            return self.metadata_primary.clone().or_else(|| self.any_address());
        }
        let route = self.groups.get(&group)?;
        if let Some(address) = &route.redirect_address {
            return Some(address.clone());
        }
        let node = route.replicas.get(route.primary_index)?;
        self.nodes.get(node).cloned()
    }

    /// A node to ask something any node can answer (Metadata).
    pub fn any_address(&self) -> Option<String> {
        if self.addresses.is_empty() {
            return None;
        }
        Some(self.addresses[self.any_index % self.addresses.len()].clone())
    }

    /// "Any node" moves on to the next address (the current one could not
    /// help a question any node can answer; group routes stay as they are).
    pub fn next_any_node(&mut self) {
        self.any_index += 1;
    }

    /// Like [`Routing::any_address`], but the first one from there on that
    /// is `usable` (a node that lately did not answer is tried last); when
    /// none is, the plain choice.
    pub fn any_address_where(&self, usable: impl Fn(&str) -> bool) -> Option<String> {
        let count = self.addresses.len();
        (0..count)
            .map(|step| &self.addresses[(self.any_index + step) % count])
            .find(|address| usable(address))
            .cloned()
            .or_else(|| self.any_address())
    }

    /// Every node id and client address from the last Metadata reply.
    pub fn nodes(&self) -> Vec<(u32, String)> {
        self.nodes
            .iter()
            .map(|(id, address)| (*id, address.clone()))
            .collect()
    }

    /// Takes in a NotPrimary redirect for `group`.
    pub fn on_not_primary(
        &mut self,
        group: u64,
        view: u32,
        primary_replica: u8,
        primary_node: u32,
        address: &str,
    ) {
        self.learn_address(address);
        if group == METADATA_GROUP {
            self.metadata_primary = if !address.is_empty() {
                Some(address.to_owned())
            } else if let Some(known) = self.nodes.get(&primary_node) {
                Some(known.clone())
            } else {
                self.any_index += 1;
                None
            };
            return;
        }
        let route = self.groups.entry(group).or_insert_with(|| GroupRoute {
            epoch: 0,
            replicas: Vec::new(),
            view,
            primary_index: 0,
            redirect_address: None,
        });
        route.view = view;
        route.primary_index = if usize::from(primary_replica) < route.replicas.len() {
            usize::from(primary_replica)
        } else {
            primary_index(view, route.replicas.len())
        };
        route.redirect_address = (!address.is_empty()).then(|| address.to_owned());
    }

    /// `address` could not be reached: guess the next replica for every group
    /// routed there (in VSR the next view's primary is the next replica), and
    /// move "any node" past it.
    pub fn on_unreachable(&mut self, address: &str) {
        if self.metadata_primary.as_deref() == Some(address) {
            self.metadata_primary = None;
        }
        if self.any_address().as_deref() == Some(address) {
            self.any_index += 1;
        }
        let unreachable: Vec<u64> = self
            .groups
            .keys()
            .copied()
            .filter(|group| self.primary_address(*group).as_deref() == Some(address))
            .collect();
        for group in unreachable {
            let route = self.groups.get_mut(&group).expect("group listed above");
            route.redirect_address = None;
            if !route.replicas.is_empty() {
                route.primary_index = (route.primary_index + 1) % route.replicas.len();
            }
        }
    }

    /// The client addresses of the nodes hosting `group`'s replicas, if known.
    pub fn replica_addresses(&self, group: u64) -> Option<Vec<(u32, String)>> {
        let route = self.groups.get(&group)?;
        if route.replicas.is_empty() {
            return None;
        }
        route
            .replicas
            .iter()
            .map(|node| Some((*node, self.nodes.get(node)?.clone())))
            .collect()
    }
}

fn primary_index(view: u32, replica_count: usize) -> usize {
    if replica_count == 0 {
        return 0;
    }
    view as usize % replica_count
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::ops::{NodeInfo, PartitionInfo, TopicInfo};
    use strand_wire::{ConfirmPolicy, Durability};

    fn metadata(view: u32) -> MetadataReply {
        let node = |id: u32| NodeInfo {
            id,
            replica_address: format!("10.0.0.{id}:7100"),
            client_address: format!("10.0.0.{id}:7000"),
            reachable: true,
        };
        MetadataReply {
            nodes: vec![node(1), node(2), node(3)],
            streams: vec!["s".into()],
            topics: vec![TopicInfo {
                stream: "s".into(),
                topic: "t".into(),
                confirm: ConfirmPolicy::MajorityDurable,
                durability: Durability::Persisted,
                consumer_offset_durability: Durability::Persisted,
                retention_bytes: 0,
                retention_ms: 0,
                segment_bytes: 0,
                partitions: vec![PartitionInfo {
                    partition: 0,
                    group: 42,
                    epoch: 1,
                    replicas: vec![1, 2, 3],
                    view,
                }],
            }],
            failover_ms: 700,
        }
    }

    #[test]
    fn the_primary_of_view_v_is_replica_v_mod_e() {
        let mut routing = Routing::new(&["boot:7000".into()]);
        routing.apply_metadata(&metadata(4));
        assert_eq!(
            routing.primary_address(42).as_deref(),
            Some("10.0.0.2:7000")
        );
    }

    #[test]
    fn a_redirect_beats_an_older_metadata_view() {
        let mut routing = Routing::new(&[]);
        routing.apply_metadata(&metadata(0));
        routing.on_not_primary(42, 2, 2, 0, "");
        assert_eq!(
            routing.primary_address(42).as_deref(),
            Some("10.0.0.3:7000")
        );
        routing.apply_metadata(&metadata(1));
        assert_eq!(
            routing.primary_address(42).as_deref(),
            Some("10.0.0.3:7000")
        );
        routing.on_not_primary(42, 3, 0, 9, "elsewhere:7000");
        assert_eq!(
            routing.primary_address(42).as_deref(),
            Some("elsewhere:7000")
        );
    }

    #[test]
    fn an_unreachable_primary_moves_the_guess_to_the_next_replica() {
        let mut routing = Routing::new(&[]);
        routing.apply_metadata(&metadata(0));
        routing.on_unreachable("10.0.0.1:7000");
        assert_eq!(
            routing.primary_address(42).as_deref(),
            Some("10.0.0.2:7000")
        );
    }

    #[test]
    fn any_node_skips_the_ones_not_usable_unless_none_is() {
        let mut routing = Routing::new(&["a:1".into(), "b:1".into(), "c:1".into()]);
        assert_eq!(routing.any_address_where(|_| true).as_deref(), Some("a:1"));
        let not_a = routing.any_address_where(|address| address != "a:1");
        assert_eq!(not_a.as_deref(), Some("b:1"));
        assert_eq!(routing.any_address_where(|_| false).as_deref(), Some("a:1"));
        routing.next_any_node();
        assert_eq!(routing.any_address().as_deref(), Some("b:1"));
    }

    #[test]
    fn metadata_plane_redirects_and_unreachable_nodes() {
        let mut routing = Routing::new(&["a:1".into(), "b:1".into()]);
        assert_eq!(
            routing.primary_address(METADATA_GROUP).as_deref(),
            Some("a:1")
        );
        routing.on_not_primary(METADATA_GROUP, 1, 1, 7, "b:1");
        assert_eq!(
            routing.primary_address(METADATA_GROUP).as_deref(),
            Some("b:1")
        );
        routing.on_unreachable("b:1");
        assert_eq!(
            routing.primary_address(METADATA_GROUP).as_deref(),
            Some("a:1")
        );
        routing.on_unreachable("a:1");
        assert_eq!(
            routing.primary_address(METADATA_GROUP).as_deref(),
            Some("b:1")
        );
    }
}
