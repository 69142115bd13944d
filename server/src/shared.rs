//! What a node's tasks and group actors share: the group registry, the
//! published status of every hosted group, the catalog as last committed,
//! the client reply router and the replica bus's outbound queues.
//!
//! Everything here is a handle or a snapshot; no consensus decision reads it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use strand_wire::ops::{AttentionEntry, GroupStatus};
use tokio::sync::mpsc;

use crate::catalog::Catalog;
use crate::config::NodeConfig;
use crate::group::Input;

/// A hosted group's inbox and identity.
#[derive(Clone)]
pub struct GroupHandle {
    /// The actor's bounded inbox.
    pub inbox: SyncSender<Input>,
    /// Node id of each replica, by replica index.
    pub replicas: Vec<u32>,
}

/// What a group last published about itself.
#[derive(Debug, Clone)]
pub struct GroupView {
    /// Its status as `ClusterStatus` reports it.
    pub status: GroupStatus,
    /// Why its view change waits, if it does.
    pub attention: Option<AttentionEntry>,
}

/// Outbound frames to one client connection.
pub type ConnectionSender = mpsc::Sender<Bytes>;

/// Why a frame could not be handed to a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The queue is at its bound.
    Full,
    /// Nobody listens there (closed, unknown).
    Gone,
}

/// The node's shared state. See the module docs.
pub struct Shared {
    /// This node's configuration.
    pub config: NodeConfig,
    groups: RwLock<BTreeMap<u64, GroupHandle>>,
    views: RwLock<BTreeMap<u64, GroupView>>,
    catalog: RwLock<Arc<Catalog>>,
    clients: Mutex<HashMap<u128, ConnectionSender>>,
    peers: BTreeMap<u32, mpsc::Sender<Bytes>>,
    reachable: Mutex<BTreeSet<u32>>,
    stopping: AtomicBool,
}

impl Shared {
    /// Shared state for a node whose bus queues to each peer are `peers`.
    pub fn new(config: NodeConfig, peers: BTreeMap<u32, mpsc::Sender<Bytes>>) -> Shared {
        let nodes = config.peers.iter().map(|peer| peer.id).collect();
        Shared {
            config,
            groups: RwLock::new(BTreeMap::new()),
            views: RwLock::new(BTreeMap::new()),
            catalog: RwLock::new(Arc::new(Catalog::new(nodes))),
            clients: Mutex::new(HashMap::new()),
            peers,
            reachable: Mutex::new(BTreeSet::new()),
            stopping: AtomicBool::new(false),
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
        match handle.inbox.try_send(input) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err(Refused::Full),
            Err(TrySendError::Disconnected(_)) => Err(Refused::Gone),
        }
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

    /// One group's last published view number, if hosted here.
    pub fn view_of(&self, group: u64) -> Option<u32> {
        self.views
            .read()
            .expect("views lock")
            .get(&group)
            .map(|view| view.status.view)
    }

    /// Publishes the catalog as of the latest metadata commit.
    pub fn publish_catalog(&self, catalog: Catalog) {
        *self.catalog.write().expect("catalog lock") = Arc::new(catalog);
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
            Some(existing) if existing.same_channel(sender) => {}
            _ => {
                clients.insert(client, sender.clone());
            }
        }
    }

    /// Forgets every client routed to a closed connection.
    pub fn forget_connection(&self, sender: &ConnectionSender) {
        let mut clients = self.clients.lock().expect("clients lock");
        clients.retain(|_, existing| !existing.same_channel(sender));
    }

    /// Sends a reply frame to `client`'s connection.
    pub fn reply(&self, client: u128, frame: Bytes) -> Result<(), Refused> {
        let sender = self
            .clients
            .lock()
            .expect("clients lock")
            .get(&client)
            .cloned();
        let Some(sender) = sender else {
            return Err(Refused::Gone);
        };
        match sender.try_send(frame) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => Err(Refused::Full),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Refused::Gone),
        }
    }

    // ----- replica bus ---------------------------------------------------------

    /// Queues a frame to node `node` on the replica bus. At the queue's bound
    /// the frame is dropped: consensus retransmits whatever matters.
    pub fn send_to_node(&self, node: u32, frame: Bytes) -> Result<(), Refused> {
        let Some(queue) = self.peers.get(&node) else {
            return Err(Refused::Gone);
        };
        match queue.try_send(frame) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => Err(Refused::Full),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Refused::Gone),
        }
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
