//! The metadata room: what a node does for the metadata plane (group 0, a
//! VSR group over every node) beyond hosting its replica.
//!
//! | module | owns |
//! |---|---|
//! | [`hosted`] | what the metadata plane's replica tells its node about the partitions placed there |
//! | [`plane`] | the plane's duties on its replica, kept out of the partition actor: the catalog published, its freshness, hosted partitions handed over, topic defaults |
//! | [`coordinator`] | consumer groups: session deadlines on the metadata primary, heartbeats answered |
//! | [`session_sweep`] | the coordinator's task: expired members removed |
//! | [`epoch_reports`] | the task that tells the plane a partition's new epoch started |
//! | [`guard`] | the node's safety checks of partition moves (reassign, drop-replica) before it proposes them |
//! | [`proposals`] | the node's own proposals to the plane (node calls to its primary), for the duties above |

pub mod coordinator;
pub mod epoch_reports;
pub mod guard;
pub mod hosted;
pub mod plane;
pub mod proposals;
pub mod session_sweep;
