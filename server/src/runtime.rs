//! The runtime room: the shard threads that host the node's groups, and
//! what keeps one group's failure or backlog from reaching its neighbours.
//!
//! | module | owns |
//! |---|---|
//! | [`input`] | what a group's actor receives: the one input type every sender hands a group |
//! | [`inbox`] | a shard's queues and a group's inbox in them: bounded, counted in bytes, with a control queue that loses nothing |
//! | [`shards`] | a node's shards as it holds them: started, given groups to host, told of peer liveness, stopped |
//! | [`shard`] | one shard thread: many groups, inputs in order per group, ticks, the periodic storage check (age retention, cursor compaction) |
//! | [`storage_retries`] | groups whose storage failed, reopened from disk after a doubling pause |
//! | [`contain`] | a panic in a group's code stops that group alone: dropped as by a crash, shown, reopened after a pause |
//! | [`vouch`] | which groups a node's liveness ping vouches for (not those failed there) |
//! | [`balance`] | per shard: which groups hand leadership back to their preferred primary, paced |

pub mod balance;
pub mod contain;
pub mod inbox;
pub mod input;
pub mod shard;
pub mod shards;
pub mod storage_retries;
pub mod vouch;
