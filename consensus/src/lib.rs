//! # strand-consensus: one group's Viewstamped Replication replica
//!
//! A pure, deterministic state machine: messages, client requests, ticks and
//! storage completions go in; effects (send, write, cut, persist, commit,
//! reply, quarantine, events) come out into a caller-owned buffer. No I/O, no
//! clock, no threads, no global state: the same inputs give the same effects,
//! which is what lets the simulator run thousands of seeded clusters.
//!
//! Modules, in reading order:
//!
//! | module | owns |
//! |---|---|
//! | [`confirm`] | `ConfirmRule`, the one function W and R come from |
//! | [`epoch`] | memberships by epoch, slots, in-place vs view-change transitions, joint quorums |
//! | [`config`] | identity, policies, timeouts |
//! | [`state`] | what survives a restart; what storage recovered |
//! | [`effects`] | effects and events the driver executes |
//! | [`journal`] | the in-memory window of the log's headers and bodies, with its gaps and bodiless slots counted |
//! | [`replica`] | the `Replica` state and input dispatch |
//! | `open` | the replica built from what storage recovered, as named steps |
//! | `observe` | read-only accessors and the replica's invariants, checked after every input |
//! | `storage` | the persistence order: persists, writes handed to storage, cuts of the log's tail |
//! | `progress` | a primary's view of its backups' progress in the view: acks, reports, commits, retransmit marks, with its invariants |
//! | `persistence` | the persistence order's bookkeeping: persists asked, in flight and done, what is on disk, with its invariants |
//! | `timers` | every timeout of a replica, one sub-state with its invariants |
//! | [`normal`] | request → prepare → ack → commit, heartbeats |
//! | `trust` | whether the log is trusted: lost and settled, and its rules against the status |
//! | `votes` | leaving a view: the votes to leave it, this replica's own tied to its suspicion; StartView probes |
//! | [`view_change`] | timeouts, StartViewChange, DoViewChange, the candidate's merge, StartView sent and probed |
//! | `adoption` | a view's log adopted: a backup's StartView, verification below the view's headers, cuts, the persist after which it serves |
//! | [`handover`] | a primary gives its role back to the group's preferred primary |
//! | [`quiet`] | quiescence: an idle group stops its timers and heartbeats; node-level liveness wakes it |
//! | [`reconfigure`] | new memberships, the log's epoch, the in-place `Reconfigure` op |
//! | [`merge`] | the canonical-log choice: a pure function of the DoViewChanges |
//! | [`starts`] | history starts in DoViewChange and StartView frames, with their record offsets; the start a waiting view change names |
//! | [`repair`] | fetching missing headers and prepares, serving peers; where the log starts after retention (a peer asking below it is told, and a replica that lacks what its peers dropped catches up by state transfer) |
//! | [`cursors`] | the cursor event log: commits, deletes (tombstones), the bound on consumer names, shipping, cuts |
//! | [`client_table`] | idempotent requests |
//! | [`state_machine`] | what a committed op does |
//! | [`timeout`] | ticks, backoff and seeded jitter (from `strand_prng`) |
//!
//! The invariants that matter most:
//! - A replica acks nothing in a view before that view is persisted, and
//!   nothing at all while its log is untrusted.
//! - A prepare commits only on W copies; a view starts only from a log chosen
//!   by R trusted DoViewChanges (or every replica), never below the latest
//!   history start, and drops an op only on R trusted nacks.
//! - Ops at or below the commit number are never truncated; a contradiction
//!   with them quarantines the partition instead.

mod adoption;
pub mod client_table;
pub mod config;
pub mod confirm;
pub mod cursors;
pub mod effects;
pub mod epoch;
pub mod handover;
pub mod journal;
pub mod merge;
pub mod normal;
mod observe;
mod open;
mod persistence;
mod progress;
pub mod quiet;
pub mod reconfigure;
pub mod repair;
pub mod replica;
pub mod starts;
pub mod state;
pub mod state_machine;
mod storage;
pub mod timeout;
mod timers;
mod trust;
pub mod view_change;
mod votes;

pub use config::{Config, Timeouts};
pub use confirm::{ConfirmPolicy, ConfirmRule, confirm_rule};
pub use cursors::{CURSOR_CONSUMERS_MAX_DEFAULT, CursorCensus, CursorOutcome};
pub use effects::{DropReason, Effect, Effects, Event, LeaveReason, WaitReason};
pub use normal::PIPELINE_PREPARES_MAX;
pub use replica::{ClientRequest, Replica, Status, WriteStage};
pub use state::{DurableState, HistoryStart, Recovered, cursor_divergence};
pub use state_machine::{RecordLog, StateMachine};
