//! What a node's tasks and group actors share: the group registry, the
//! published status of every hosted group, the catalog as last committed,
//! the client reply router and the replica bus's outbound queues.
//!
//! Everything here is a handle or a snapshot; no consensus decision reads it.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use bytes::Bytes;
use strand_wire::ops::{AttentionEntry, GroupStatus};
use tokio::sync::mpsc;

use crate::net::connection::ConnectionSender;
use crate::net::peer_queue::{PEER_QUEUE_BYTES_ADMIT, PeerSender};
use crate::node::config::NodeConfig;
use crate::refused::Refused;
use crate::runtime::inbox::GroupInbox;
use crate::runtime::input::Input;
use strand_host::catalog::{Assignment, Catalog};
use strand_partition::ReadHandles;

/// A hosted group's inbox and identity.
#[derive(Clone)]
pub struct GroupHandle {
    /// The group's inbox (its shard's, bounded).
    pub inbox: GroupInbox,
    /// The node in each slot (replica index), across the memberships the
    /// group is in now: the bus checks that a frame's sender speaks for its
    /// own slot. Shared, not copied, per frame.
    pub slots: Arc<[Option<u32>]>,
    /// The latest assignment the metadata plane made for the group, not yet
    /// taken by its actor (it takes it on the next tick, so a full inbox
    /// never loses one).
    pub placement: Arc<Mutex<Option<Assignment>>>,
}

impl GroupHandle {
    /// Whether `node` holds a slot of the group.
    pub fn has_node(&self, node: u32) -> bool {
        self.slots.contains(&Some(node))
    }

    /// The node in `slot`, if any.
    pub fn node_at(&self, slot: u8) -> Option<u32> {
        self.slots.get(usize::from(slot)).copied().flatten()
    }
}

/// What a group last published about itself.
#[derive(Debug, Clone)]
pub struct GroupView {
    /// Its status as `ClusterStatus` reports it.
    pub status: GroupStatus,
    /// Why its view change waits, if it does.
    pub attention: Option<AttentionEntry>,
}

/// How far this node's catalog can be trusted to answer metadata questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogFreshness {
    /// The metadata replica has not been current since the node started:
    /// the catalog may be missing anything (it is still loading, or the
    /// replica has not heard from its primary). Nothing is answered from it.
    Loading = 0,
    /// It was current once, but is not now (a view change, or it lags its
    /// primary): what it holds is true as of some commit, but a name it
    /// lacks may exist, so it never answers "unknown".
    Behind = 1,
    /// In normal status and applied everything its primary said committed.
    Current = 2,
}

/// The node's shared state. See the module docs.
pub struct Shared {
    /// This node's configuration.
    pub config: NodeConfig,
    /// This process's boot count (see [`crate::node::boot`]).
    pub boot: u64,
    groups: RwLock<BTreeMap<u64, GroupHandle>>,
    views: RwLock<BTreeMap<u64, GroupView>>,
    catalog: RwLock<Arc<Catalog>>,
    clients: Mutex<HashMap<u128, ReplyRoute>>,
    /// Per peer: its call sessions routed here, oldest first (see
    /// [`Shared::route_peer_calls`]).
    peer_call_sessions: Mutex<BTreeMap<u32, VecDeque<u128>>>,
    peers: BTreeMap<u32, PeerSender>,
    reachable: Mutex<BTreeSet<u32>>,
    stopping: AtomicBool,
    /// A [`CatalogFreshness`], as the metadata actor last published it.
    catalog_freshness: AtomicU8,
    epoch_reports: Mutex<Option<mpsc::UnboundedSender<EpochReport>>>,
    /// When this node started: the origin of `heard_ms`.
    started: Instant,
    /// Per peer: when any frame last arrived from it, in ms since `started`.
    heard_ms: BTreeMap<u32, AtomicU64>,
    /// Peers the node-level liveness suspects right now.
    suspected: Mutex<BTreeSet<u32>>,
    /// The read descriptors of every partition on the node, under one bound.
    pub read_handles: ReadHandles,
    /// The data disk's room (see [`crate::node::disk`]).
    pub disk: crate::node::disk::DiskRoom,
    /// Consumer groups' session deadlines (see [`crate::metadata::coordinator`]).
    pub coordinator: Mutex<crate::metadata::coordinator::Coordinator>,
    /// TLS of the client port and the bus (`None`: plaintext).
    pub tls: Option<crate::net::tls::NodeTls>,
    /// Where admin actions are recorded (`None` in unit tests).
    pub audit: Option<crate::security::audit::AuditLog>,
    /// Which groups this node and its peers vouch for (see [`crate::runtime::vouch`]).
    pub vouching: crate::runtime::vouch::Vouching,
    /// The client connections open, under their bounds (see
    /// [`crate::net::connection`]).
    pub connections: Arc<crate::net::connection::Connections>,
    /// Every user's quota buckets on this node (see [`crate::security::quota`]).
    pub quotas: crate::security::quota::Quotas,
    /// The password-check pool and the failed sign-in limits.
    pub sign_ins: crate::security::auth::defenses::SignIns,
    /// Which user each client id belongs to.
    pub client_owners: crate::security::auth::client_ids::ClientOwners,
    /// The node's own calls in flight (see [`crate::net::node_calls`]).
    pub node_calls: crate::net::call_table::NodeCalls,
}

/// Call sessions of one peer whose replies are routed back to it at most.
pub const PEER_CALL_SESSIONS_MAX: usize = 8;

/// Where a client id's replies go.
#[derive(Clone)]
pub enum ReplyRoute {
    /// A client connection (the one it last used).
    Connection(ConnectionSender),
    /// Peer node `0`'s calls: back over the replica bus.
    Peer(u32),
    /// This node's own calls ([`crate::net::node_calls`]).
    OwnCalls,
}

/// A partition's primary saw a new assignment epoch start: the metadata
/// plane must hear of it (`EpochStarted`) before another reassignment of
/// the partition may begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochReport {
    /// The partition's group.
    pub group: u64,
    /// The epoch that started.
    pub epoch: u32,
}

impl Shared {
    /// Shared state for a node whose bus queues to each peer are `peers`.
    pub fn new(
        config: NodeConfig,
        peers: BTreeMap<u32, PeerSender>,
        read_handles: ReadHandles,
        boot: u64,
    ) -> Shared {
        let nodes = config.peers.iter().map(|peer| peer.id).collect();
        let config_limits = config.limits.clone();
        Shared {
            config,
            boot,
            groups: RwLock::new(BTreeMap::new()),
            views: RwLock::new(BTreeMap::new()),
            catalog: RwLock::new(Arc::new(Catalog::new(nodes))),
            clients: Mutex::new(HashMap::new()),
            peer_call_sessions: Mutex::new(BTreeMap::new()),
            node_calls: crate::net::call_table::NodeCalls::default(),
            reachable: Mutex::new(BTreeSet::new()),
            stopping: AtomicBool::new(false),
            catalog_freshness: AtomicU8::new(CatalogFreshness::Loading as u8),
            epoch_reports: Mutex::new(None),
            started: Instant::now(),
            heard_ms: peers
                .keys()
                .map(|peer| (*peer, AtomicU64::new(0)))
                .collect(),
            suspected: Mutex::new(BTreeSet::new()),
            peers,
            read_handles,
            disk: crate::node::disk::DiskRoom::default(),
            coordinator: Mutex::new(crate::metadata::coordinator::Coordinator::default()),
            tls: None,
            audit: None,
            vouching: crate::runtime::vouch::Vouching::default(),
            connections: crate::net::connection::Connections::new(
                config_limits.client_connections_max,
                config_limits.client_connections_per_address_max,
            ),
            quotas: crate::security::quota::Quotas::default(),
            sign_ins: crate::security::auth::defenses::SignIns::default(),
            client_owners: crate::security::auth::client_ids::ClientOwners::default(),
        }
    }

    /// The same, with at most `max` client connections at once (the
    /// descriptor budget's share).
    pub fn with_connections_max(mut self, max: usize) -> Shared {
        let per_address = self.config.limits.client_connections_per_address_max;
        self.connections = crate::net::connection::Connections::new(max, per_address);
        self
    }

    /// The same, serving TLS with `tls`.
    pub fn with_tls(mut self, tls: Option<crate::net::tls::NodeTls>) -> Shared {
        self.tls = tls;
        self
    }

    /// The same, recording admin actions in `audit`.
    pub fn with_audit(mut self, audit: crate::security::audit::AuditLog) -> Shared {
        self.audit = Some(audit);
        self
    }

    /// Whether this node's metadata replica serves as the plane's primary
    /// (this node coordinates the consumer groups).
    pub fn leads_metadata_plane(&self) -> bool {
        let views = self.views.read().expect("views lock");
        views.get(&0).is_some_and(|view| {
            view.status.primary == view.status.replica
                && view.status.status == strand_consensus::replica::Status::Normal.name()
        })
    }

    // ----- node-level liveness -------------------------------------------------

    /// A frame (any) arrived from peer `node`.
    pub fn heard_from(&self, node: u32) {
        if let Some(heard) = self.heard_ms.get(&node) {
            heard.store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
    }

    /// How long peer `node` has been silent (since this node started, if
    /// it was never heard).
    pub fn silent_ms(&self, node: u32) -> u64 {
        let now = self.started.elapsed().as_millis() as u64;
        self.heard_ms.get(&node).map_or(now, |heard| {
            now.saturating_sub(heard.load(Ordering::Relaxed))
        })
    }

    /// Records whether peer `node` is suspected; true if that changed.
    pub fn set_suspected(&self, node: u32, suspected: bool) -> bool {
        let mut nodes = self.suspected.lock().expect("suspected lock");
        if suspected {
            nodes.insert(node)
        } else {
            nodes.remove(&node)
        }
    }

    /// The peers suspected right now (a group that opens starts from them).
    pub fn suspected_nodes(&self) -> Vec<u32> {
        self.suspected
            .lock()
            .expect("suspected lock")
            .iter()
            .copied()
            .collect()
    }

    // ----- reassignment --------------------------------------------------------

    /// Where [`Shared::report_epoch_started`] sends reports (the node's
    /// reporting task).
    pub fn set_epoch_reporter(&self, reports: mpsc::UnboundedSender<EpochReport>) {
        *self.epoch_reports.lock().expect("epoch reports lock") = Some(reports);
    }

    /// Asks the node to tell the metadata plane that `epoch` started in
    /// `group` (dropped when no reporter runs, as in tests of one actor).
    pub fn report_epoch_started(&self, group: u64, epoch: u32) {
        if let Some(reports) = &*self.epoch_reports.lock().expect("epoch reports lock") {
            let _ = reports.send(EpochReport { group, epoch });
        }
    }

    /// Hands a hosted group the metadata plane's latest assignment for it;
    /// false when the group does not run here.
    pub fn place(&self, assignment: Assignment) -> bool {
        let Some(handle) = self.group(assignment.group) else {
            return false;
        };
        *handle.placement.lock().expect("placement lock") = Some(assignment);
        handle.inbox.placement_changed();
        true
    }

    /// Replaces a group's slot map (its memberships changed).
    pub fn set_slots(&self, group: u64, slots: Arc<[Option<u32>]>) {
        if let Some(handle) = self.groups.write().expect("groups lock").get_mut(&group) {
            handle.slots = slots;
        }
    }

    // ----- groups --------------------------------------------------------------

    /// Registers a group's actor; returns false if it was registered already.
    pub fn register(&self, group: u64, handle: GroupHandle) -> bool {
        let mut groups = self.groups.write().expect("groups lock");
        if groups.contains_key(&group) {
            return false;
        }
        groups.insert(group, handle);
        true
    }

    /// Forgets a group's actor (it stopped).
    pub fn unregister(&self, group: u64) {
        self.groups.write().expect("groups lock").remove(&group);
        self.views.write().expect("views lock").remove(&group);
    }

    /// The handle of a hosted group.
    pub fn group(&self, group: u64) -> Option<GroupHandle> {
        self.groups
            .read()
            .expect("groups lock")
            .get(&group)
            .cloned()
    }

    /// Runs `with` on a hosted group's handle under the registry's read
    /// lock (nothing cloned): the bus's per-frame path.
    pub fn with_group<R>(&self, group: u64, with: impl FnOnce(&GroupHandle) -> R) -> Option<R> {
        self.groups
            .read()
            .expect("groups lock")
            .get(&group)
            .map(with)
    }

    /// Every hosted group's handle, by group id.
    pub fn groups(&self) -> Vec<(u64, GroupHandle)> {
        let groups = self.groups.read().expect("groups lock");
        groups
            .iter()
            .map(|(group, handle)| (*group, handle.clone()))
            .collect()
    }

    /// Hands `input` to `group`'s actor without blocking.
    pub fn send_to_group(&self, group: u64, input: Input) -> Result<(), Refused> {
        let Some(handle) = self.group(group) else {
            return Err(Refused::Gone);
        };
        handle.inbox.try_send(input)
    }

    // ----- published views -----------------------------------------------------

    /// Publishes a group's status.
    pub fn publish(&self, view: GroupView) {
        let group = view.status.group;
        self.views.write().expect("views lock").insert(group, view);
    }

    /// Every hosted group's last published status, by group id.
    pub fn views(&self) -> Vec<GroupView> {
        self.views
            .read()
            .expect("views lock")
            .values()
            .cloned()
            .collect()
    }

    /// Whether a produce for `group` should wait before it reaches the
    /// group: this node serves as the group's primary, and fewer than W − 1
    /// of its backups have room in their bus queues
    /// ([`PEER_QUEUE_BYTES_ADMIT`]), so a prepare made now would wait
    /// behind others long enough for the backups to take the primary for
    /// silent. A produce for any other group, or on a backup, never waits.
    pub fn produce_congested(&self, group: u64) -> bool {
        let views = self.views.read().expect("views lock");
        let Some(view) = views.get(&group) else {
            return false;
        };
        let status = &view.status;
        if status.primary != status.replica || status.status != "normal" {
            return false;
        }
        let backups_needed = usize::from(status.write_quorum.saturating_sub(1));
        let backups_with_room = status
            .replicas
            .iter()
            .filter(|replica| replica.replica != status.replica)
            .filter(|replica| self.queued_bytes_to(replica.node) < PEER_QUEUE_BYTES_ADMIT)
            .count();
        backups_with_room < backups_needed
    }

    /// Whether the shard hosting `group` holds more client request bytes
    /// than it should take before it works through them.
    pub fn requests_backed_up(&self, group: u64) -> bool {
        self.group(group)
            .is_some_and(|handle| handle.inbox.requests_backed_up())
    }

    /// Whether the shard hosting `group` holds more peer frame bytes than it
    /// should take before it works through them.
    pub fn peer_frames_backed_up(&self, group: u64) -> bool {
        self.group(group)
            .is_some_and(|handle| handle.inbox.peers_backed_up())
    }

    /// One group's last published view number, if hosted here.
    pub fn view_of(&self, group: u64) -> Option<u32> {
        self.views
            .read()
            .expect("views lock")
            .get(&group)
            .map(|view| view.status.view)
    }

    /// One group's last published status, if hosted here.
    pub fn status_of(&self, group: u64) -> Option<GroupStatus> {
        self.views
            .read()
            .expect("views lock")
            .get(&group)
            .map(|view| view.status.clone())
    }

    /// Publishes the catalog as of the latest metadata commit.
    pub fn publish_catalog(&self, catalog: Catalog) {
        *self.catalog.write().expect("catalog lock") = Arc::new(catalog);
    }

    /// Records whether the metadata replica is current now (normal status,
    /// applied every commit it heard of). Once current, a node is never
    /// `Loading` again: it stays `Behind` until current again.
    pub fn set_catalog_current(&self, current: bool) {
        let freshness = if current {
            CatalogFreshness::Current
        } else if self.catalog_freshness() == CatalogFreshness::Loading {
            CatalogFreshness::Loading
        } else {
            CatalogFreshness::Behind
        };
        self.catalog_freshness
            .store(freshness as u8, Ordering::SeqCst);
    }

    /// How far the published catalog can be trusted (see [`CatalogFreshness`]).
    pub fn catalog_freshness(&self) -> CatalogFreshness {
        match self.catalog_freshness.load(Ordering::SeqCst) {
            0 => CatalogFreshness::Loading,
            1 => CatalogFreshness::Behind,
            _ => CatalogFreshness::Current,
        }
    }

    /// The catalog as of the latest metadata commit applied here.
    pub fn catalog(&self) -> Arc<Catalog> {
        Arc::clone(&self.catalog.read().expect("catalog lock"))
    }

    // ----- clients -------------------------------------------------------------

    /// Routes replies for `client` to `sender` (the connection it last used).
    pub fn route_client(&self, client: u128, sender: &ConnectionSender) {
        let mut clients = self.clients.lock().expect("clients lock");
        match clients.get(&client) {
            Some(ReplyRoute::Connection(existing)) if existing.same_channel(sender) => {}
            _ => {
                clients.insert(client, ReplyRoute::Connection(sender.clone()));
            }
        }
    }

    /// Routes replies for `client`, one of peer `node`'s call sessions,
    /// back over the bus. A peer keeps a few sessions at a time (one per
    /// task that proposes, one for its questions); past
    /// [`PEER_CALL_SESSIONS_MAX`] the peer's oldest route is forgotten, so
    /// the routes a peer can leave here stay bounded however often its
    /// sessions renew.
    pub fn route_peer_calls(&self, client: u128, node: u32) {
        let mut clients = self.clients.lock().expect("clients lock");
        if matches!(clients.get(&client), Some(ReplyRoute::Peer(peer)) if *peer == node) {
            return;
        }
        clients.insert(client, ReplyRoute::Peer(node));
        let mut sessions = self.peer_call_sessions.lock().expect("peer sessions lock");
        let sessions = sessions.entry(node).or_default();
        sessions.push_back(client);
        if sessions.len() > PEER_CALL_SESSIONS_MAX {
            let oldest = sessions.pop_front().expect("over the bound");
            if matches!(clients.get(&oldest), Some(ReplyRoute::Peer(peer)) if *peer == node) {
                clients.remove(&oldest);
            }
        }
    }

    /// Routes replies for `client`, one of this node's call sessions, to
    /// [`crate::net::node_calls`].
    pub fn route_own_calls(&self, client: u128) {
        let mut clients = self.clients.lock().expect("clients lock");
        if !matches!(clients.get(&client), Some(ReplyRoute::OwnCalls)) {
            clients.insert(client, ReplyRoute::OwnCalls);
        }
    }

    /// Forgets the reply route of `client`, a call session of this node's
    /// that was renewed.
    pub fn forget_own_calls(&self, client: u128) {
        let mut clients = self.clients.lock().expect("clients lock");
        if matches!(clients.get(&client), Some(ReplyRoute::OwnCalls)) {
            clients.remove(&client);
        }
    }

    /// Forgets every client routed to a closed connection.
    pub fn forget_connection(&self, sender: &ConnectionSender) {
        let mut clients = self.clients.lock().expect("clients lock");
        clients.retain(|_, route| {
            !matches!(route, ReplyRoute::Connection(existing) if existing.same_channel(sender))
        });
    }

    /// Sends a reply frame to `client`'s connection (or the node call it
    /// answers).
    pub fn reply(&self, client: u128, frame: Bytes) -> Result<(), Refused> {
        let route = self
            .clients
            .lock()
            .expect("clients lock")
            .get(&client)
            .cloned();
        match route {
            None => Err(Refused::Gone),
            Some(ReplyRoute::Connection(sender)) => match sender.try_send(frame) {
                Ok(()) => Ok(()),
                Err(mpsc::error::TrySendError::Full(_)) => Err(Refused::Full),
                Err(mpsc::error::TrySendError::Closed(_)) => Err(Refused::Gone),
            },
            Some(ReplyRoute::Peer(node)) => self.send_to_node(node, frame),
            Some(ReplyRoute::OwnCalls) => {
                self.node_calls.answered_frame(frame);
                Ok(())
            }
        }
    }

    // ----- replica bus ---------------------------------------------------------

    /// Queues a frame to node `node` on the replica bus. At the queue's bound
    /// the frame is dropped: consensus retransmits whatever matters.
    pub fn send_to_node(&self, node: u32, frame: Bytes) -> Result<(), Refused> {
        let Some(queue) = self.peers.get(&node) else {
            return Err(Refused::Gone);
        };
        queue.try_send(frame)
    }

    /// Queues a batch of slices to node `node` on the replica bus, written in
    /// order (a shard's outbox); at the queue's bound the whole batch is
    /// dropped.
    pub fn send_chunks_to_node(&self, node: u32, chunks: Vec<Bytes>) -> Result<(), Refused> {
        let Some(queue) = self.peers.get(&node) else {
            return Err(Refused::Gone);
        };
        queue.try_send_chunks(chunks)
    }

    /// Bytes waiting in the bus queue to `node` (0 for this node or a node
    /// that is not a peer).
    pub fn queued_bytes_to(&self, node: u32) -> u64 {
        self.peers.get(&node).map_or(0, PeerSender::queued_bytes)
    }

    /// Records whether the bus has a live connection to `node`.
    pub fn set_reachable(&self, node: u32, reachable: bool) {
        let mut nodes = self.reachable.lock().expect("reachable lock");
        if reachable {
            nodes.insert(node);
        } else {
            nodes.remove(&node);
        }
    }

    /// Whether the bus has a live connection to `node` (always true for this node).
    pub fn reachable(&self, node: u32) -> bool {
        node == self.config.node
            || self
                .reachable
                .lock()
                .expect("reachable lock")
                .contains(&node)
    }

    // ----- lifecycle -----------------------------------------------------------

    /// Marks the node as shutting down: no new requests are taken.
    pub fn begin_shutdown(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// True once shutdown began.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// The client address of node `node`, if it is a peer.
    pub fn client_address(&self, node: u32) -> Option<String> {
        self.config
            .peer(node)
            .map(|peer| peer.client_address.clone())
    }
}

#[cfg(test)]
mod tests {
    use strand_wire::ops::ReplicaStatus;
    use strand_wire::{ConfirmPolicy, Durability};

    use super::*;
    use crate::net::peer_queue::{self, PeerReceiver};
    use crate::node::config::loopback_test_config;

    fn shared() -> (Shared, BTreeMap<u32, PeerReceiver>) {
        let config = loopback_test_config(3);
        let (senders, receivers) = peer_queue::queues(1, [1, 2, 3].into_iter());
        let shared = Shared::new(config, senders, ReadHandles::new(16), 1);
        (shared, receivers)
    }

    /// Group 5 on nodes 1, 2, 3 (replicas 0, 1, 2), W = 2, as node 1 sees
    /// it: `primary` leads.
    fn publish(shared: &Shared, primary: u8) {
        let replicas = (0..3)
            .map(|replica| ReplicaStatus {
                replica,
                node: u32::from(replica) + 1,
                op: 0,
                caught_up: true,
            })
            .collect();
        let status = GroupStatus {
            group: 5,
            stream: "s".to_owned(),
            topic: "t".to_owned(),
            partition: 0,
            epoch: 0,
            confirm: ConfirmPolicy::MajorityDurable,
            durability: Durability::Persisted,
            write_quorum: 2,
            view_change_quorum: 2,
            replica: 0,
            view: u32::from(primary),
            log_view: u32::from(primary),
            status: "normal".to_owned(),
            primary,
            op: 0,
            commit_op: 0,
            log_start_offset: 0,
            high_watermark: 0,
            untrusted_log: false,
            replicas,
        };
        shared.publish(GroupView {
            status,
            attention: None,
        });
    }

    fn fill(shared: &Shared, node: u32) {
        let frame = Bytes::from(vec![0u8; 1024 * 1024]);
        while shared.queued_bytes_to(node) < peer_queue::PEER_QUEUE_BYTES_ADMIT {
            shared.send_to_node(node, frame.clone()).expect("room");
        }
    }

    /// A primary takes no produce while no backup it needs to commit could
    /// receive the prepare soon; one backup with room is enough for W = 2.
    #[test]
    fn a_produce_waits_while_the_backups_a_commit_needs_are_backed_up() {
        let (shared, _receivers) = shared();
        publish(&shared, 0);
        assert!(!shared.produce_congested(5));
        fill(&shared, 2);
        assert!(!shared.produce_congested(5), "node 3 still has room");
        fill(&shared, 3);
        assert!(shared.produce_congested(5));
        assert!(!shared.produce_congested(6), "a group not hosted here");
    }

    /// Only the primary holds produces back: a backup answers with a
    /// redirect at once.
    #[test]
    fn a_backup_never_holds_a_produce() {
        let (shared, _receivers) = shared();
        publish(&shared, 1);
        fill(&shared, 2);
        fill(&shared, 3);
        assert!(!shared.produce_congested(5));
    }
}
