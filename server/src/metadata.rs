//! The metadata room: what a node does for the metadata plane (group 0, a
//! VSR group over every node) beyond hosting its replica.
//!
//! | module | owns |
//! |---|---|
//! | [`guard`] | the node's safety checks of partition moves (reassign, drop-replica) before it proposes them |
//! | [`coordinator`] | consumer groups: session deadlines on the metadata primary, expired members removed |

pub mod coordinator;
pub mod guard;
