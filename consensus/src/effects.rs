//! What the replica asks its driver to do, and what it reports for metrics and
//! logs. The replica pushes these into a caller-owned [`Effects`] buffer; the
//! driver executes them in order and feeds completions back as inputs.

use bytes::Bytes;
use strand_wire::{Message, Msg, PrepareHeader, ReplyHeader, ViewId};

use crate::state::DurableState;

/// One thing the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Send `message` to replica `to` of this group.
    Send {
        /// Destination replica index.
        to: u8,
        /// The frame.
        message: Message,
    },
    /// Send a reply to the client it names.
    Reply {
        /// The reply frame.
        reply: Msg<ReplyHeader>,
    },
    /// Write `prepare` to the log at its op: an append when its op is the
    /// log's head + 1, a rewrite in place when storage reported that op's
    /// entry damaged. Report `on_write(op, checksum, Queued)` once handed to the
    /// WAL writer and `on_write(.., Durable)` once fsynced.
    WritePrepare {
        /// The prepare, header and body.
        prepare: Msg<PrepareHeader>,
    },
    /// Cut the log's tail, durably (the partition's `cut`): every op above
    /// `op` and, if `cursor_tail` is given, every cursor event from it on;
    /// then report `on_truncated(op)`. Asked for when a replica adopts a view
    /// its longer tail contradicts (reference A's cut: the record log to the
    /// view's head, the cursor log to its history start), and when a repair
    /// finds ops divergent (`cursor_tail` is `None`). Never asked for a
    /// readable op at or below the commit number.
    Cut {
        /// The op the record log keeps up to.
        op: u64,
        /// The cursor events the cursor log keeps, if it is cut too.
        cursor_tail: Option<u64>,
    },
    /// Persist `state` atomically (the superblock); then report
    /// `on_state_persisted(sequence)`. Only the newest request matters.
    PersistState {
        /// The state to persist.
        state: DurableState,
        /// Increases with every request.
        sequence: u64,
    },
    /// Op `header.op` committed: apply it (publish its records to readers).
    /// Emitted once per op, in op order.
    Commit {
        /// The committed prepare's header.
        header: PrepareHeader,
    },
    /// Read the headers of ops `op_min..=op_max` from the log and send them to
    /// replica `to` as a Headers frame (they are no longer in memory).
    ServeHeaders {
        /// Destination replica.
        to: u8,
        /// Lowest op.
        op_min: u64,
        /// Highest op.
        op_max: u64,
    },
    /// Read the prepare at `op` from the log and send it to replica `to`, if
    /// its checksum is `checksum` (or it is committed, when `checksum` is 0).
    ServePrepare {
        /// Destination replica.
        to: u8,
        /// The op.
        op: u64,
        /// The wanted checksum, or 0.
        checksum: u32,
    },
    /// Append cursor events (an encoded `CursorEvents` body) at sequence
    /// `cursor_base`; report `on_cursors_written(end, ..)` when queued and durable.
    AppendCursors {
        /// Sequence number of the first event.
        cursor_base: u64,
        /// Number of events.
        event_count: u32,
        /// The encoded events.
        events: Bytes,
    },
    /// Read cursor events from `cursor_from` up to the durable tail and send
    /// them to replica `to` as a Cursors frame.
    ShipCursors {
        /// Destination replica.
        to: u8,
        /// First event to send.
        cursor_from: u64,
    },
    /// The log cannot be repaired op by op (the peers no longer retain what it
    /// lacks, or it was quarantined): rebuild it from replica `from`'s state at
    /// its commit (nothing, if it has committed nothing yet), then report
    /// `on_state_transfer_done`.
    StartStateTransfer {
        /// The replica to copy from.
        from: u8,
        /// The op the transfer must reach at least.
        op_min: u64,
    },
    /// The replica adopted a view contradicting history it already applied:
    /// move this partition's directory aside to `<dir>.fenced.N` and rebuild it
    /// by state transfer from `agreed_op`, the last op both histories share.
    Quarantine {
        /// Last op both histories agree on.
        agreed_op: u64,
    },
    /// A fact for metrics and logs; nothing to execute.
    Event(Event),
}

/// Why a replica voted to leave its view: what an operator reads to tell a
/// dead primary from a slow one or a stuck view change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaveReason {
    /// A backup heard nothing from its primary for a primary timeout.
    PrimarySilent,
    /// The node-level liveness signal suspects the primary's node.
    PrimarySuspected,
    /// A primary's prepares waited a progress timeout without a commit.
    Stalled,
    /// The view change did not start a view within its timeout.
    ViewChangeStuck,
    /// A restarted replica's probes for the current view went unanswered.
    Unanswered,
}

/// Why the view change waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WaitReason {
    /// Fewer than R trusted DoViewChanges, and not every replica has reported.
    FewerTrustedThanQuorum,
    /// The canonical log ends below the latest recorded history start.
    BelowHistoryStart,
    /// This replica awaits a state transfer.
    AwaitingStateTransfer,
    /// An op that may be confirmed has no copy among the replicas that
    /// reported, and fewer than R trusted replicas say they never had it.
    MissingPrepare,
}

/// Facts for metrics and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The replica moved to `view` and stopped acking lower views.
    ViewChangeStarted {
        /// The new view.
        view: ViewId,
    },
    /// This replica voted to leave `view` (a StartViewChange), for `reason`.
    VotedToLeaveView {
        /// The view it votes to leave.
        view: ViewId,
        /// What made it vote.
        reason: LeaveReason,
    },
    /// The primary hands its role to the preferred primary at slot `to`,
    /// moving to `view` (which `to` leads); a `ViewChangeStarted` follows.
    HandingOver {
        /// The preferred primary's slot.
        to: u8,
        /// The view it will lead.
        view: ViewId,
    },
    /// A handover to the preferred primary at slot `to` was called off: its
    /// drain did not end in time, and the primary serves on.
    HandoverCalledOff {
        /// The preferred primary's slot.
        to: u8,
    },
    /// The primary prepared op `op`, the `Reconfigure` that moves the group
    /// to `epoch` in place.
    Reconfiguring {
        /// The op.
        op: u64,
        /// The epoch it moves to.
        epoch: u32,
    },
    /// This replica left the group: the membership of `epoch` does not
    /// include it. The driver records it (the data stays for operators).
    Retired {
        /// The epoch that removed it.
        epoch: u32,
    },
    /// A new assignment epoch started in this group: a view of it became
    /// normal, or the `Reconfigure` op that moves to it committed. The
    /// primary's driver tells the metadata plane, which then lets the
    /// next reassignment begin.
    EpochStarted {
        /// The epoch.
        epoch: u32,
    },
    /// The replica is Normal in `view`.
    Normal {
        /// The view.
        view: ViewId,
        /// Whether it is the primary.
        primary: bool,
    },
    /// The view change waits (rate-limited): why, and for which replicas.
    ViewChangeWaiting {
        /// The view being started.
        view: ViewId,
        /// Why.
        reason: WaitReason,
        /// Replicas whose (trusted) DoViewChange is awaited, as a bitset.
        awaited: u32,
    },
    /// The log's trust changed (the `partitions_untrusted_log` gauge).
    UntrustedLog {
        /// True while untrusted.
        untrusted: bool,
    },
    /// A peer no longer holds ops this replica lacks (retention dropped
    /// them): it catches up by state transfer (`partition_behind_log_start_total`).
    BehindLogStart {
        /// The peer that said so.
        from: u8,
        /// The first op that peer still holds.
        log_start: u64,
    },
    /// A StartView contradicted committed history (`partition_applied_divergence_total`).
    AppliedDivergence {
        /// The first op that differs.
        op: u64,
    },
    /// The candidate chose the canonical log for `view` (for logs and traces).
    Merged {
        /// The view being started.
        view: ViewId,
        /// The replica whose log was chosen.
        source: u8,
        /// The canonical head op.
        op: u64,
        /// Ops dropped from the chosen log by nack quorums.
        dropped: u64,
    },
    /// An operator's accept-loss started `view` at `op`.
    AcceptedLoss {
        /// The view started.
        view: ViewId,
        /// The op it started at.
        op: u64,
    },
    /// A message was dropped without being acted on.
    Dropped {
        /// Why.
        reason: DropReason,
    },
}

/// Why an input was dropped (counted, never trusted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Another cluster's frame.
    WrongCluster,
    /// Another group's frame.
    WrongGroup,
    /// A replica index outside the group.
    ReplicaOutOfRange,
    /// From a view of an assignment epoch this replica has no membership
    /// of: it cannot tell who that view's primary is.
    UnknownEpoch,
    /// From a view this replica has left.
    StaleView,
    /// Not expected in the replica's status or role.
    WrongStatus,
    /// Breaks an invariant (a parent that does not chain, a checksum that
    /// does not match a known header, a primary that is not the view's).
    Invalid,
    /// A bound was reached (repair buffer full).
    Busy,
}

/// The caller-owned buffer effects are pushed into.
#[derive(Debug, Default)]
pub struct Effects {
    list: Vec<Effect>,
}

impl Effects {
    /// An empty buffer.
    pub fn new() -> Effects {
        Effects::default()
    }

    /// Adds one effect.
    pub fn push(&mut self, effect: Effect) {
        self.list.push(effect);
    }

    /// Adds an event.
    pub fn event(&mut self, event: Event) {
        self.list.push(Effect::Event(event));
    }

    /// Takes every effect out, leaving the buffer empty (and its allocation).
    pub fn drain(&mut self) -> std::vec::Drain<'_, Effect> {
        self.list.drain(..)
    }

    /// The effects so far.
    pub fn as_slice(&self) -> &[Effect] {
        &self.list
    }

    /// Number of effects.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}
