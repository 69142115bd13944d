//! What the metadata plane's replica tells its node about the partitions
//! the catalog places there: the node starts, changes and stops their
//! actors from these.

use strand_host::catalog::Assignment;

/// What the metadata plane's actor tells the node about the partitions
/// this node hosts.
#[derive(Debug, Clone)]
pub enum Hosted {
    /// A partition hosted here, new or changed: start its actor, or hand it
    /// the change.
    Placed(Assignment),
    /// A partition no longer hosted here (its topic was deleted, or its
    /// retired copy dropped): stop its actor and remove its data.
    Dropped(Assignment),
    /// The metadata plane's catalog is loaded, or learned of deleted
    /// partitions (sent before any placement, then whenever its deletion
    /// mark changes): the node removes what deleted partitions left. A node
    /// that was down while a topic was deleted opens a catalog behind its
    /// peers and learns of the deletion only as it catches up.
    CatalogLoaded,
}
