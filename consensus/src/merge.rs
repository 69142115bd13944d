//! The canonical-log choice of a view change: a pure function from the
//! DoViewChanges at hand to a decision. Every rule of the design lives here.
//!
//! 1. Wait until R trusted DoViewChanges are in, or every replica has reported.
//!    During a transition to a new assignment epoch "R" is joint: R of the
//!    old membership and R' of the new ([`crate::epoch::view_change_quorums`]).
//! 2. Choose among the trusted logs (or, when every replica reported with fewer
//!    than R trusted, among every usable log): highest `log_view`, then
//!    highest `op`, then highest cursor tail, then lowest replica index.
//! 3. Walk the chosen log's uncommitted ops upward: an op with no copy among
//!    the reporters is dropped (with everything after it) only when R trusted
//!    replicas nack it; otherwise wait. Committed ops and ops at or below the
//!    latest history start are never dropped.
//! 4. Never start a view below the latest history start, nor from a log
//!    that left the start's history (settled in an older view, it differs
//!    at the start's op): such a quorum is waited past like one of fewer
//!    than R trusted logs.
//!
//! `accept_loss` (an operator's decision) skips the waits of 1, 3 and 4.

use std::collections::BTreeMap;

use strand_wire::{
    CommandHeader, DVC_SUFFIX_HEADERS_MAX, DoViewChangeFlags, PrepareHeader, ViewId,
};

use crate::effects::WaitReason;
use crate::epoch::{Membership, QuorumSpec, SlotSet, Transition, transition};
use crate::state::HistoryStart;

/// One replica's DoViewChange, as the merge sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DvcSummary {
    /// The sender.
    pub replica: u8,
    /// Its log view.
    pub log_view: ViewId,
    /// Its head op.
    pub op: u64,
    /// Its commit number.
    pub commit: u64,
    /// The highest op it may have acked; it never acked anything above.
    pub ack_op: u64,
    /// Its cursor event tail.
    pub cursor_tail: u64,
    /// Its flags.
    pub flags: DoViewChangeFlags,
    /// The suffix of its log's headers, ascending.
    pub headers: Vec<PrepareHeader>,
    /// Bit `i`: it holds `headers[i]`'s body.
    pub present: u128,
    /// Bit `i`: it never acked `headers[i]`.
    pub nack: u128,
    /// The latest history start it knows.
    pub history_start: Option<HistoryStart>,
}

impl DvcSummary {
    /// Whether the log counts toward the view-change quorum and may nack.
    pub fn trusted(&self) -> bool {
        !self.flags.contains(DoViewChangeFlags::UNTRUSTED_LOG)
    }

    /// Whether the log can be chosen at all (it is not an empty placeholder).
    pub fn usable(&self) -> bool {
        !self
            .flags
            .contains(DoViewChangeFlags::AWAITING_STATE_TRANSFER)
    }

    fn index_of(&self, op: u64) -> Option<usize> {
        self.headers
            .binary_search_by_key(&op, |header| header.op.get())
            .ok()
    }

    /// Its header at `op`, if its suffix holds one.
    pub fn header_at(&self, op: u64) -> Option<&PrepareHeader> {
        self.index_of(op).map(|index| &self.headers[index])
    }

    /// Whether it holds the body of the prepare with `checksum` at `op`.
    pub fn has_present(&self, op: u64, checksum: u32) -> bool {
        self.index_of(op).is_some_and(|index| {
            self.headers[index].checksum() == checksum && self.present & (1u128 << index) != 0
        })
    }

    /// Whether it says it never had (never acked) the prepare with `checksum` at `op`.
    pub fn nacks(&self, op: u64, checksum: u32) -> bool {
        if self.ack_op < op {
            return true;
        }
        match self.index_of(op) {
            Some(index) => {
                self.headers[index].checksum() != checksum || self.nack & (1u128 << index) != 0
            }
            None => false,
        }
    }
}

/// What the merge is given besides the DoViewChanges.
#[derive(Debug, Clone)]
pub struct MergeParams {
    /// Every replica that may report: the members of the memberships
    /// involved ("every replica reported" means all of these).
    pub members: SlotSet,
    /// Trusted reporters must meet this quorum (`R` of the view's membership)...
    pub quorum: QuorumSpec,
    /// ...and, while a view change moves the group to a new epoch, these
    /// too (`R` of every older membership it spans, from the epoch the
    /// reporters' logs reached on), so that whatever they confirmed is heard.
    pub joint: Vec<QuorumSpec>,
    /// Untrusted reporters count toward `quorum` too: a view change into
    /// a new epoch reached by a view-change transition, with every
    /// reporter's log view below that epoch. An op of the new membership is
    /// acked only in views of the new epoch, which none of them ever
    /// settled in, so whatever its log lost, no reporter hides one; `quorum`
    /// still shows that no view of the epoch started without them. (The old
    /// memberships' quorums stay trusted: their acks are what a log loses.)
    pub quorum_hears_untrusted: bool,
    /// Trusted nacks that drop an op: `R` of the membership that may have
    /// confirmed it.
    pub nack: QuorumSpec,
    /// An operator accepted loss: proceed with the logs at hand.
    pub accept_loss: bool,
    /// The trusted-quorum gate (reference B). Only the `mutations` feature
    /// turns it off, to show what it prevents.
    pub trusted_gate: bool,
}

/// A quorum no set of replicas meets: stands for a membership this replica
/// no longer knows (the view change then waits for a reporter whose log is
/// in a later epoch, or for every replica it knows of).
const UNKNOWN_QUORUM: QuorumSpec = QuorumSpec {
    members: SlotSet::EMPTY,
    count: 1,
};

impl MergeParams {
    /// The quorums of a view change within `membership`'s epoch.
    pub fn within(membership: &Membership, accept_loss: bool, trusted_gate: bool) -> MergeParams {
        let quorum = membership.view_change_quorum();
        MergeParams {
            members: membership.slots,
            quorum,
            joint: Vec::new(),
            quorum_hears_untrusted: false,
            nack: quorum,
            accept_loss,
            trusted_gate,
        }
    }

    /// The quorums of a view change from `old`'s epoch into `new`'s, before
    /// any reporter's log is in the new epoch: `R` of both, nacks from `R`
    /// of the old (every op in the logs was confirmed, if at all, by it).
    pub fn transition(
        old: &Membership,
        new: &Membership,
        accept_loss: bool,
        trusted_gate: bool,
    ) -> MergeParams {
        assert_eq!(new.epoch, old.epoch + 1, "a transition moves one epoch");
        MergeParams::spanning(&[Some(*old)], new, accept_loss, trusted_gate)
    }

    /// The quorums of a view change into `new`'s epoch when the highest
    /// epoch any reporter's log has reached is older: `older` holds every
    /// membership from that epoch up to the one before `new`'s, ascending
    /// (None for one this replica no longer knows).
    ///
    /// Trusted reporters must meet `R` of each of them and `R'` of `new`.
    /// A reporter two or more epochs behind proves nothing about the epochs
    /// it missed: each of them may have confirmed prepares (or carried older
    /// ones over in its history start) on replicas that alone hold them. `R`
    /// of every epoch meets each such write quorum, whose members' logs would
    /// show that epoch; since none does, nothing was confirmed past the
    /// reported epoch. Nacks come from `R` of the reported epoch, or of the
    /// last one reached from it in place (its prepares may have been
    /// confirmed by that membership), which meets the earlier ones.
    pub fn spanning(
        older: &[Option<Membership>],
        new: &Membership,
        accept_loss: bool,
        trusted_gate: bool,
    ) -> MergeParams {
        assert!(!older.is_empty(), "a view change across epochs spans one");
        let members = older
            .iter()
            .flatten()
            .fold(new.slots, |slots, membership| slots.union(membership.slots));
        let joint = older
            .iter()
            .map(|membership| membership.map_or(UNKNOWN_QUORUM, |m| m.view_change_quorum()))
            .collect();
        let nack = match older[0] {
            None => UNKNOWN_QUORUM,
            Some(reported) => {
                let mut confirming = reported;
                for next in older[1..].iter().copied().chain([Some(*new)]) {
                    match next {
                        Some(next) if transition(&confirming, &next) == Transition::InPlace => {
                            confirming = next;
                        }
                        _ => break,
                    }
                }
                confirming.view_change_quorum()
            }
        };
        let entered_by_view_change = older
            .last()
            .copied()
            .flatten()
            .is_some_and(|last| transition(&last, new) == Transition::ViewChange);
        MergeParams {
            members,
            quorum: new.view_change_quorum(),
            joint,
            quorum_hears_untrusted: entered_by_view_change,
            nack,
            accept_loss,
            trusted_gate,
        }
    }

    /// Whether the trusted reporters `trusted` (among all reporters,
    /// `reported`) meet every quorum of the view change.
    fn met_by(&self, trusted: SlotSet, reported: SlotSet) -> bool {
        let hears = if self.quorum_hears_untrusted {
            reported
        } else {
            trusted
        };
        self.quorum.is_met_by(hears) && self.joint.iter().all(|joint| joint.is_met_by(trusted))
    }
}

/// The replicas (as a set) among `dvcs` for which `pick` holds.
fn slots_where(dvcs: &[DvcSummary], pick: impl Fn(&DvcSummary) -> bool) -> SlotSet {
    dvcs.iter()
        .filter(|dvc| pick(dvc))
        .fold(SlotSet::EMPTY, |set, dvc| set.with(dvc.replica))
}

/// The canonical log a view starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonical {
    /// The replica whose log was chosen.
    pub source: u8,
    /// The chosen log's view.
    pub log_view: ViewId,
    /// The canonical head op (after dropping nacked ops).
    pub op: u64,
    /// The highest commit number any reporter knows (never above `op`).
    pub commit: u64,
    /// The chosen log's suffix of headers, ascending, ending at `op`.
    pub headers: Vec<PrepareHeader>,
    /// The latest history start any reporter knows.
    pub history_start: Option<HistoryStart>,
    /// Ops dropped from the chosen log by nack quorums.
    pub dropped: u64,
    /// The chosen replica's cursor tail.
    pub cursor_tail: u64,
}

/// The merge's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not yet: why, and the replicas (bitset) whose DoViewChange would help.
    Wait {
        /// Why.
        reason: WaitReason,
        /// Replicas awaited, as a bitset of indexes.
        awaited: u32,
    },
    /// Start the view from this log.
    Ready(Canonical),
}

/// The lowest op the walk must account for: the source's first header, or
/// the op above the commit number if that is lower, within the
/// DoViewChange window (the last `DVC_SUFFIX_HEADERS_MAX` ops). The first
/// header alone is no bound: an op whose header storage could not read
/// leaves a hole, and the hole may be the suffix's lowest uncommitted op.
fn walk_floor(source: &DvcSummary, commit: u64) -> u64 {
    let window = DVC_SUFFIX_HEADERS_MAX as u64;
    let first = source
        .headers
        .first()
        .map_or(u64::MAX, |header| header.op.get());
    first
        .min(commit + 1)
        .max((source.op + 1).saturating_sub(window))
        .max(1)
}

/// The chosen log's suffix from `low` as a map, its gaps filled from any
/// reporter whose header at that op has the checksum the op above names as
/// its parent.
fn canonical_suffix(
    dvcs: &[DvcSummary],
    source: &DvcSummary,
    low: u64,
) -> BTreeMap<u64, PrepareHeader> {
    let mut canonical: BTreeMap<u64, PrepareHeader> = source
        .headers
        .iter()
        .filter(|header| header.op.get() >= low)
        .map(|header| (header.op.get(), *header))
        .collect();
    for op in (low..source.op).rev() {
        if canonical.contains_key(&op) {
            continue;
        }
        // Logs settled in the same view are prefixes of that view's log: their
        // header at `op` is canonical. Otherwise the op above vouches for it.
        let same_view = dvcs
            .iter()
            .filter(|dvc| dvc.log_view == source.log_view)
            .find_map(|dvc| dvc.header_at(op));
        let parent = canonical.get(&(op + 1)).map(|above| above.parent.get());
        let chained = parent.and_then(|parent| {
            dvcs.iter()
                .filter_map(|dvc| dvc.header_at(op))
                .find(|header| header.checksum() == parent)
        });
        if let Some(header) = chained.or(same_view) {
            canonical.insert(op, *header);
        }
    }
    canonical
}

/// Walks the chosen suffix upward: every op must have a copy among the
/// reporters; the first that has none is dropped (with all above it) on a
/// nack quorum or once every replica has reported (unless it may be
/// committed), or the view waits. Returns the canonical headers and head op.
fn walk_suffix(
    dvcs: &[DvcSummary],
    source: &DvcSummary,
    commit: u64,
    keep_floor: u64,
    params: &MergeParams,
    counts: &dyn Fn(&DvcSummary) -> bool,
    everyone_reported: bool,
) -> Result<(Vec<PrepareHeader>, u64), WaitReason> {
    let first = walk_floor(source, commit);
    let canonical = canonical_suffix(dvcs, source, first);
    for op in first..=source.op {
        let checksum = canonical
            .get(&op)
            .map(CommandHeader::checksum)
            .or_else(|| canonical.get(&(op + 1)).map(|above| above.parent.get()));
        let present =
            checksum.is_some_and(|checksum| dvcs.iter().any(|dvc| dvc.has_present(op, checksum)));
        if present && canonical.contains_key(&op) {
            continue;
        }
        // A committed op no reporter holds whole, with every replica
        // reported: waiting cannot bring it back (its holders' retention
        // dropped it, or every copy is damaged), and being committed it is
        // not the merge's to drop. A replica that lacks it is told where its
        // peers' logs start and catches up by state transfer.
        if op <= commit && everyone_reported {
            continue;
        }
        if op <= keep_floor && !params.accept_loss {
            return Err(WaitReason::MissingPrepare);
        }
        let nackers = match checksum {
            Some(checksum) => slots_where(dvcs, |dvc| counts(dvc) && dvc.nacks(op, checksum)),
            None => slots_where(dvcs, |dvc| counts(dvc) && dvc.ack_op < op),
        };
        // With every replica reported, an uncommitted op no one holds is
        // gone for good: waiting cannot bring it back. (An op whose identity
        // is unknown counts as held while any reporter has a header there.)
        let unheld = checksum.is_some() || dvcs.iter().all(|dvc| dvc.header_at(op).is_none());
        if params.nack.is_met_by(nackers) || params.accept_loss || (everyone_reported && unheld) {
            let headers = canonical
                .range(first..op)
                .map(|(_, header)| *header)
                .collect();
            return Ok((headers, op - 1));
        }
        return Err(WaitReason::MissingPrepare);
    }
    Ok((canonical.into_values().collect(), source.op))
}

/// Whether `dvc`'s log is on the history that began at `start`, through
/// `start.op`: it was settled in the start's view or later; or it knows
/// ops up to the start committed (they are on every later history); or its
/// header at the start's op is the one a log settled there holds (the
/// checksum chain vouches for every op below).
fn on_history_of(start: HistoryStart, dvc: &DvcSummary, dvcs: &[DvcSummary]) -> bool {
    if dvc.log_view >= start.view || dvc.commit >= start.op {
        return true;
    }
    let Some(own) = dvc.header_at(start.op) else {
        return false;
    };
    dvcs.iter()
        .filter(|settled| settled.log_view >= start.view)
        .filter_map(|settled| settled.header_at(start.op))
        .any(|header| header.checksum() == own.checksum())
}

/// Decides the canonical log from the DoViewChanges at hand (at most one per
/// replica, in any order).
pub fn decide(dvcs: &[DvcSummary], params: MergeParams) -> Decision {
    assert!(!params.members.is_empty());
    let reported = dvcs.iter().fold(0u32, |set, dvc| set | 1 << dvc.replica);
    assert_eq!(
        reported.count_ones() as usize,
        dvcs.len(),
        "one DoViewChange per replica"
    );
    let all = u32::from(params.members.bits());
    assert_eq!(reported & !all, 0, "DoViewChanges come from members only");
    let not_reported = all & !reported;
    let counts = |dvc: &DvcSummary| !params.trusted_gate || dvc.trusted();
    let trusted = slots_where(dvcs, counts);

    let history_start = dvcs
        .iter()
        .filter_map(|dvc| dvc.history_start)
        .max_by_key(|start| start.view);
    let everyone_reported = not_reported == 0 || params.accept_loss;
    let candidates: Vec<&DvcSummary> = if params.met_by(trusted, slots_where(dvcs, |_| true)) {
        dvcs.iter()
            .filter(|dvc| counts(dvc) && dvc.usable())
            .collect()
    } else if everyone_reported {
        dvcs.iter().filter(|dvc| dvc.usable()).collect()
    } else {
        return Decision::Wait {
            reason: WaitReason::FewerTrustedThanQuorum,
            awaited: not_reported,
        };
    };
    if candidates.is_empty() {
        return Decision::Wait {
            reason: WaitReason::AwaitingStateTransfer,
            awaited: not_reported,
        };
    }
    // Only a log on the latest start's history can start the view: one
    // settled in an older view may leave it at or below the start (an old
    // primary's unconfirmed suffix) where the start's own logs hold ops
    // confirmed before it. A quorum whose every log left that history is
    // waited past as one of fewer than R trusted logs is: once everyone
    // reported, any usable log on the history (trusted or not) is chosen.
    let follows =
        |dvc: &DvcSummary| history_start.is_none_or(|start| on_history_of(start, dvc, dvcs));
    let mut following: Vec<&DvcSummary> = candidates
        .iter()
        .copied()
        .filter(|dvc| follows(dvc))
        .collect();
    if following.is_empty() && everyone_reported {
        following = dvcs
            .iter()
            .filter(|dvc| dvc.usable() && follows(dvc))
            .collect();
    }
    if following.is_empty() {
        if !params.accept_loss {
            return Decision::Wait {
                reason: WaitReason::BelowHistoryStart,
                awaited: not_reported,
            };
        }
        following = candidates;
    }
    let source = following
        .iter()
        .copied()
        .max_by(|a, b| {
            (
                a.log_view,
                a.op,
                a.cursor_tail,
                core::cmp::Reverse(a.replica),
            )
                .cmp(&(
                    b.log_view,
                    b.op,
                    b.cursor_tail,
                    core::cmp::Reverse(b.replica),
                ))
        })
        .expect("a log to choose from");

    let commit = dvcs
        .iter()
        .map(|dvc| dvc.commit)
        .max()
        .unwrap_or(0)
        .min(source.op);
    let keep_floor = commit.max(history_start.map_or(0, |start| start.op));

    let (headers, op) = match walk_suffix(
        dvcs,
        source,
        commit,
        keep_floor,
        &params,
        &counts,
        not_reported == 0,
    ) {
        Ok(walked) => walked,
        Err(reason) => {
            return Decision::Wait {
                reason,
                awaited: not_reported,
            };
        }
    };
    let dropped = source.op - op;
    if let Some(start) = history_start {
        if op < start.op && !params.accept_loss {
            return Decision::Wait {
                reason: WaitReason::BelowHistoryStart,
                awaited: not_reported,
            };
        }
    }
    Decision::Ready(Canonical {
        source: source.replica,
        log_view: source.log_view,
        op,
        commit: commit.min(op),
        headers,
        history_start,
        dropped,
        cursor_tail: source.cursor_tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confirm::ConfirmPolicy;
    use strand_wire::Operation;

    fn header(op: u64, view: u32) -> PrepareHeader {
        let mut header = PrepareHeader::new(1, 1, ViewId::new(0, view), 0);
        header.op.set(op);
        header.commit.set(op - 1);
        header.operation = Operation::Produce as u8;
        header.seal(&[]);
        header
    }

    fn dvc(replica: u8, log_view: u32, ops: u64, commit: u64) -> DvcSummary {
        let headers: Vec<_> = (1..=ops).map(|op| header(op, log_view)).collect();
        let present = if ops == 128 {
            u128::MAX
        } else {
            (1u128 << ops) - 1
        };
        DvcSummary {
            replica,
            log_view: ViewId::new(0, log_view),
            op: ops,
            commit,
            ack_op: ops,
            cursor_tail: 0,
            flags: DoViewChangeFlags::empty(),
            headers,
            present,
            nack: 0,
            history_start: None,
        }
    }

    fn params(replica_count: u8) -> MergeParams {
        MergeParams::within(
            &Membership::initial(replica_count, ConfirmPolicy::MajorityDurable),
            false,
            true,
        )
    }

    fn ready(decision: Decision) -> Canonical {
        match decision {
            Decision::Ready(canonical) => canonical,
            Decision::Wait { reason, awaited } => panic!("waits: {reason:?} {awaited:b}"),
        }
    }

    #[test]
    fn highest_log_view_then_op_wins() {
        let a = dvc(0, 3, 10, 5);
        let b = dvc(1, 4, 8, 5);
        let canonical = ready(decide(&[a.clone(), b], params(3)));
        assert_eq!(
            (canonical.source, canonical.op, canonical.log_view),
            (1, 8, ViewId::new(0, 4))
        );
        let c = dvc(2, 3, 12, 5);
        let canonical = ready(decide(&[a, c], params(3)));
        assert_eq!((canonical.source, canonical.op), (2, 12));
    }

    #[test]
    fn ties_go_to_cursor_tail_then_lowest_index() {
        let mut a = dvc(2, 3, 10, 5);
        let mut b = dvc(1, 3, 10, 5);
        assert_eq!(ready(decide(&[a.clone(), b.clone()], params(3))).source, 1);
        a.cursor_tail = 7;
        b.cursor_tail = 6;
        assert_eq!(ready(decide(&[b, a], params(3))).source, 2);
    }

    #[test]
    fn waits_for_trusted_quorum_naming_the_missing() {
        let mut a = dvc(0, 3, 10, 5);
        a.flags = DoViewChangeFlags::UNTRUSTED_LOG;
        let b = dvc(1, 3, 8, 5);
        assert_eq!(
            decide(&[a.clone(), b.clone()], params(3)),
            Decision::Wait {
                reason: WaitReason::FewerTrustedThanQuorum,
                awaited: 0b100
            }
        );
        // Once everyone reported, proceed with every usable log.
        let mut c = dvc(2, 0, 0, 0);
        c.flags = DoViewChangeFlags::UNTRUSTED_LOG | DoViewChangeFlags::AWAITING_STATE_TRANSFER;
        c.headers.clear();
        c.present = 0;
        let canonical = ready(decide(&[a, b, c], params(3)));
        assert_eq!(
            canonical.source, 0,
            "the untrusted log is evidence, not a nack"
        );
        assert_eq!(canonical.op, 10);
    }

    #[test]
    fn an_empty_flagged_dvc_is_never_chosen() {
        let mut a = dvc(0, 0, 0, 0);
        a.flags = DoViewChangeFlags::UNTRUSTED_LOG | DoViewChangeFlags::AWAITING_STATE_TRANSFER;
        a.log_view = ViewId::new(0, 9);
        let b = dvc(1, 3, 4, 2);
        let c = dvc(2, 3, 4, 2);
        assert_eq!(ready(decide(&[a, b, c], params(3))).source, 1);
    }

    #[test]
    fn an_op_without_a_copy_is_dropped_only_on_a_nack_quorum() {
        // a knows op 10's header but never received its body: it nacks it.
        let mut a = dvc(0, 3, 10, 5);
        a.present &= !(1 << 9);
        a.nack |= 1 << 9;
        let b = dvc(1, 3, 9, 5); // never had op 10: a nack
        let canonical = ready(decide(&[a.clone(), b.clone()], params(3)));
        assert_eq!((canonical.op, canonical.dropped), (9, 1));
        // A faulty copy (nack bit clear: it may have acked it) is not a nack:
        // one nack of the two needed, so the view waits.
        a.nack = 0;
        let decision = decide(&[a.clone(), b.clone()], params(3));
        assert_eq!(
            decision,
            Decision::Wait {
                reason: WaitReason::MissingPrepare,
                awaited: 0b100
            }
        );
        // A copy anywhere keeps the op.
        let c = dvc(2, 3, 10, 5);
        let canonical = ready(decide(&[a, b, c], params(3)));
        assert_eq!((canonical.source, canonical.op), (0, 10));
    }

    #[test]
    fn untrusted_logs_never_nack() {
        // E=5, R=3. Replica 0 holds op 10's header but its body is damaged
        // (no nack); 3 and 4 are trusted and never had op 10; 1 is untrusted
        // and lacks it too; 2 has not reported.
        let mut a = dvc(0, 3, 10, 5);
        a.present &= !(1 << 9);
        a.ack_op = 10;
        let mut b = dvc(1, 3, 9, 5);
        b.flags = DoViewChangeFlags::UNTRUSTED_LOG;
        let d = dvc(3, 3, 9, 5);
        let e = dvc(4, 3, 9, 5);
        let dvcs = [a, b, d, e];
        let decision = decide(&dvcs, params(5));
        assert_eq!(
            decision,
            Decision::Wait {
                reason: WaitReason::MissingPrepare,
                awaited: 0b00100
            },
            "two trusted nacks of the three needed: the untrusted one does not count"
        );
        let mut without_gate = params(5);
        without_gate.trusted_gate = false;
        assert_eq!(ready(decide(&dvcs, without_gate)).op, 9);
    }

    #[test]
    fn once_every_replica_reported_an_op_no_one_holds_is_dropped() {
        let mut a = dvc(0, 3, 10, 5);
        a.present &= !(1 << 9);
        a.ack_op = 10;
        let mut b = dvc(1, 3, 9, 5);
        b.flags = DoViewChangeFlags::UNTRUSTED_LOG;
        let mut c = dvc(2, 3, 9, 5);
        c.flags = DoViewChangeFlags::UNTRUSTED_LOG;
        assert_eq!(ready(decide(&[a, b, c], params(3))).op, 9);
    }

    #[test]
    fn an_unreadable_lowest_header_is_walked_not_skipped() {
        // The chosen log's op 1 header was unreadable (a storage fault), so
        // its suffix starts at op 2; no one else holds op 1. Everyone
        // reported, all untrusted: op 1 and everything above it are gone.
        let mut a = dvc(0, 0, 4, 0);
        a.flags = DoViewChangeFlags::UNTRUSTED_LOG;
        a.headers.remove(0);
        a.present = 0b111;
        let mut b = dvc(1, 0, 0, 0);
        b.flags = DoViewChangeFlags::UNTRUSTED_LOG;
        b.headers.clear();
        b.present = 0;
        let mut c = b.clone();
        c.replica = 2;
        let canonical = ready(decide(&[a.clone(), b.clone(), c], params(3)));
        assert_eq!((canonical.op, canonical.dropped), (0, 4));
        assert!(canonical.headers.is_empty());
        // Before everyone reported, it waits instead.
        assert!(matches!(decide(&[a, b], params(3)), Decision::Wait { .. }));
    }

    #[test]
    fn committed_ops_and_ops_below_the_history_start_are_never_dropped() {
        let mut a = dvc(0, 3, 10, 10);
        a.present &= !(1 << 9);
        let b = dvc(1, 3, 9, 9);
        let decision = decide(&[a.clone(), b.clone()], params(3));
        assert!(matches!(
            decision,
            Decision::Wait {
                reason: WaitReason::MissingPrepare,
                ..
            }
        ));
        let mut a = dvc(0, 3, 10, 5);
        a.present &= !(1 << 9);
        a.history_start = Some(HistoryStart {
            view: ViewId::new(0, 3),
            op: 10,
            cursor_tail: 0,
            replica: 0,
            ..HistoryStart::default()
        });
        let decision = decide(&[a, b], params(3));
        assert!(matches!(
            decision,
            Decision::Wait {
                reason: WaitReason::MissingPrepare,
                ..
            }
        ));
    }

    #[test]
    fn never_starts_below_the_latest_history_start() {
        let mut a = dvc(0, 3, 8, 5);
        a.history_start = Some(HistoryStart {
            view: ViewId::new(0, 4),
            op: 10,
            cursor_tail: 0,
            replica: 1,
            ..HistoryStart::default()
        });
        let b = dvc(2, 3, 8, 5);
        let decision = decide(&[a.clone(), b.clone()], params(3));
        assert_eq!(
            decision,
            Decision::Wait {
                reason: WaitReason::BelowHistoryStart,
                awaited: 0b010
            }
        );
        let mut accept = params(3);
        accept.accept_loss = true;
        assert_eq!(ready(decide(&[a, b], accept)).op, 8);
    }

    /// Seed 8952: the chosen log had a gap (it received op 352 but never
    /// 350 and 351); the op other logs of the same view held was taken for
    /// one nobody held and dropped, though it was committed.
    #[test]
    fn a_gap_in_the_chosen_log_is_filled_from_logs_of_the_same_view() {
        let mut source = dvc(1, 3, 12, 9);
        let gap = source
            .headers
            .iter()
            .position(|header| header.op.get() == 10)
            .expect("op 10");
        source.headers.remove(gap);
        source.present = (1u128 << source.headers.len()) - 1;
        source.ack_op = 9;
        let other = dvc(2, 3, 10, 9);
        let canonical = ready(decide(&[source.clone(), other], params(3)));
        assert!(
            canonical.headers.iter().any(|header| header.op.get() == 10),
            "op 10 filled in"
        );
        assert!(canonical.op >= 10, "op 10 (held by replica 2) is kept");
        // Without anyone holding op 10, the gap's own replica nacks it (it
        // never acked past op 9) and so does a shorter trusted log.
        let shorter = dvc(0, 3, 9, 9);
        let canonical = ready(decide(&[source, shorter], params(3)));
        assert_eq!(canonical.op, 9);
    }

    #[test]
    fn the_choice_is_the_same_in_any_order() {
        let dvcs = vec![
            dvc(0, 2, 7, 3),
            dvc(1, 3, 6, 3),
            dvc(2, 3, 6, 3),
            dvc(3, 1, 9, 3),
            dvc(4, 3, 5, 3),
        ];
        let first = decide(&dvcs, params(5));
        let mut reversed = dvcs.clone();
        reversed.reverse();
        assert_eq!(decide(&reversed, params(5)), first);
        assert_eq!(ready(first).source, 1);
    }

    /// Seeds 3182, 4756 and 3877 (`--reassign`): the candidate of a view of
    /// epoch 8 heard one trusted log, settled epochs earlier, which met `R`
    /// of epoch 7 and `R'` of epoch 8 (both 1: every copy confirms) on its
    /// own, and started the view below epoch 7's history start, which only
    /// the replica that started epoch 7 knew. Every epoch the reporters'
    /// logs missed must be heard.
    #[test]
    fn a_log_epochs_behind_never_forms_a_transition_quorum_alone() {
        let every = ConfirmPolicy::LocalDurable;
        let e5 = Membership::new(5, SlotSet::of(&[1, 3]), ConfirmPolicy::Count(2));
        let e6 = Membership::new(6, SlotSet::of(&[0, 1]), ConfirmPolicy::Count(2));
        let e7 = Membership::new(7, SlotSet::of(&[0, 1, 2]), every);
        let e8 = Membership::new(8, SlotSet::of(&[0, 2, 3]), every);
        // Replica 0's log settled no later than epoch 5 (in the seed it
        // joined in epoch 6, took op 37 by state transfer and never settled
        // in a view); replica 1 started epochs 6 and 7 at op 47, alone.
        let mut stale = dvc(0, 0, 37, 37);
        stale.log_view = ViewId::new(5, 8);
        let mut current = dvc(1, 10, 47, 41);
        current.log_view = ViewId::new(7, 10);
        current.history_start = Some(HistoryStart {
            view: ViewId::new(7, 10),
            op: 47,
            cursor_tail: 0,
            replica: 1,
            ..HistoryStart::default()
        });
        // What the two-epoch joint quorum decided: ops 38..=47 are gone.
        let two_epochs = MergeParams::transition(&e7, &e8, false, true);
        assert_eq!(ready(decide(&[stale.clone()], two_epochs.clone())).op, 37);
        // Spanning every epoch from the reported one, it waits...
        let spanning = MergeParams::spanning(&[Some(e5), Some(e6), Some(e7)], &e8, false, true);
        assert_eq!(
            decide(&[stale.clone()], spanning),
            Decision::Wait {
                reason: WaitReason::FewerTrustedThanQuorum,
                awaited: 0b1110
            }
        );
        // ...as it does for an epoch it no longer knows...
        let unknown = MergeParams::spanning(&[None, Some(e6), Some(e7)], &e8, false, true);
        assert!(matches!(
            decide(&[stale.clone()], unknown),
            Decision::Wait { .. }
        ));
        // ...until a log of a later epoch reports: the view then starts
        // from it, at or above its history start.
        let canonical = ready(decide(&[stale, current], two_epochs));
        assert_eq!((canonical.source, canonical.op), (1, 47));
    }

    /// A view change into an epoch whose only member never settled a log
    /// (a newcomer, untrusted): it cannot have acked in the new epoch's
    /// views, so it meets the new membership's quorum, and the trusted old
    /// member's log carries over. Within an epoch it never counts.
    #[test]
    fn an_untrusted_newcomer_meets_the_new_quorum_of_a_view_change_transition() {
        let old = Membership::new(4, SlotSet::of(&[1, 3]), ConfirmPolicy::MajorityDurable);
        let new = Membership::new(5, SlotSet::of(&[3]), ConfirmPolicy::MajorityDurable);
        let mut holder = dvc(1, 4, 20, 18);
        holder.log_view = ViewId::new(4, 4);
        let mut newcomer = dvc(3, 0, 0, 0);
        newcomer.flags = DoViewChangeFlags::UNTRUSTED_LOG;
        let params = MergeParams::transition(&old, &new, false, true);
        assert!(params.quorum_hears_untrusted);
        let canonical = ready(decide(&[holder.clone(), newcomer.clone()], params.clone()));
        assert_eq!((canonical.source, canonical.op), (1, 20));
        // The old membership's quorum still needs a trusted log.
        assert!(matches!(
            decide(&[newcomer.clone()], params),
            Decision::Wait { .. }
        ));
        let within = MergeParams::within(&old, false, true);
        assert!(matches!(
            decide(&[newcomer], within),
            Decision::Wait {
                reason: WaitReason::FewerTrustedThanQuorum,
                ..
            }
        ));
    }

    /// Seed 18734 (`--reassign`): in epoch 2 every copy confirms (R' = 1).
    /// Replicas 0, 2 and 4 settled in view 2.5, whose history started at op
    /// 33 with ops 32 and 33 of view 1.4, and restarted untrusted. Replica 3,
    /// trusted, had settled in view 1.2, whose primary it was: its ops 32
    /// and 33 were never confirmed. Its log alone met R' and started view
    /// 2.6 at op 33 by number, with the others' commit number 33.
    #[test]
    fn a_log_settled_before_the_latest_start_never_starts_a_view_past_it() {
        let every = Membership::new(2, SlotSet::of(&[0, 2, 3, 4]), ConfirmPolicy::LocalDurable);
        let start = HistoryStart {
            view: ViewId::new(2, 5),
            op: 33,
            cursor_tail: 0,
            replica: 2,
            ..HistoryStart::default()
        };
        let settled = |replica: u8, ops: u64| {
            let mut settled = dvc(replica, 4, ops, 33);
            settled.log_view = ViewId::new(2, 5);
            settled.flags = DoViewChangeFlags::UNTRUSTED_LOG;
            settled.history_start = Some(start);
            settled
        };
        let mut stale = dvc(3, 2, 33, 17);
        stale.log_view = ViewId::new(1, 2);
        let params = MergeParams::within(&every, false, true);
        assert_eq!(
            decide(&[settled(0, 33), stale.clone()], params.clone()),
            Decision::Wait {
                reason: WaitReason::BelowHistoryStart,
                awaited: 0b10100
            }
        );
        // Once everyone reported, a log on the start's history is chosen.
        let dvcs = [settled(0, 33), settled(2, 35), stale, settled(4, 33)];
        let canonical = ready(decide(&dvcs, params.clone()));
        assert_eq!((canonical.source, canonical.op), (2, 35));
        // A log settled before the start that holds the start's op (its
        // header there is the settled logs') is on the history: it counts.
        let mut behind = dvc(3, 4, 34, 17);
        behind.log_view = ViewId::new(1, 4);
        let canonical = ready(decide(&[settled(0, 33), behind], params));
        assert_eq!((canonical.source, canonical.op), (3, 34));
    }
}
