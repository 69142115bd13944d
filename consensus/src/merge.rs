//! The canonical-log choice of a view change: a pure function from the
//! DoViewChanges at hand to a decision. Every rule of the design lives here.
//!
//! 1. Wait until R trusted DoViewChanges are in, or every replica has reported.
//!    During a transition to a new assignment epoch "R" is joint: R of the
//!    old membership and R' of the new ([`crate::epoch::view_change_quorums`]).
//! 2. Choose among the trusted logs (or, when every replica reported with fewer
//!    than R trusted, among every usable log): highest `log_view` (a
//!    committed prefix a state transfer installed counts as settled in no
//!    view), then highest `op`, then highest cursor tail, then lowest
//!    replica index. A log that reaches the latest history start outranks
//!    one that does not.
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

    /// The view its log was settled in, as the merge ranks it: `None`
    /// (below every view, view 0 included) for a committed prefix a state
    /// transfer installed, whose `log_view` vouches for nothing past the
    /// prefix.
    pub fn settled_view(&self) -> Option<ViewId> {
        (!self.flags.contains(DoViewChangeFlags::LOG_UNSETTLED)).then_some(self.log_view)
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
        let settled = source.settled_view();
        let same_view = dvcs
            .iter()
            .filter(|dvc| settled.is_some() && dvc.settled_view() == settled)
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
            assert!(
                op > commit || params.accept_loss,
                "the merge drops committed op {op} (commit {commit})"
            );
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
/// header at the start's op is the one the view started on (the start's
/// recorded checksum, or the header a log settled there holds: the
/// checksum chain vouches for every op below).
fn on_history_of(start: HistoryStart, dvc: &DvcSummary, dvcs: &[DvcSummary]) -> bool {
    if dvc.settled_view() >= Some(start.view) || dvc.commit >= start.op {
        return true;
    }
    let Some(own) = dvc.header_at(start.op) else {
        return false;
    };
    start.checksum == Some(own.checksum())
        || dvcs
            .iter()
            .filter(|settled| settled.settled_view() >= Some(start.view))
            .filter_map(|settled| settled.header_at(start.op))
            .any(|header| header.checksum() == own.checksum())
}

/// Whether `dvc`'s log reaches `start` (it holds the start's op, or knows
/// it committed). A log settled in the start's view that ends below it
/// lost what the view started with (a crash under a confirm rule that
/// acks before it syncs, or a state transfer that replaced it with a
/// shorter committed prefix): its view outranks no log that reaches it.
fn reaches(start: Option<HistoryStart>, dvc: &DvcSummary) -> bool {
    start.is_none_or(|start| dvc.op >= start.op || dvc.commit >= start.op)
}

/// The latest history start the reporters know, with its checksum and
/// record offset from any reporter that recorded them.
fn latest_start(dvcs: &[DvcSummary]) -> Option<HistoryStart> {
    let reports = || dvcs.iter().filter_map(|dvc| dvc.history_start);
    let latest = reports().max_by_key(|start| start.view)?;
    let same = || reports().filter(move |start| *start == latest);
    Some(HistoryStart {
        checksum: same().find_map(|start| start.checksum),
        offset_end: same().find_map(|start| start.offset_end),
        ..latest
    })
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
    let wait = |reason| Decision::Wait {
        reason,
        awaited: not_reported,
    };
    let counts = |dvc: &DvcSummary| !params.trusted_gate || dvc.trusted();
    let history_start = latest_start(dvcs);
    let everyone_reported = not_reported == 0 || params.accept_loss;
    let candidates = match candidates_of(dvcs, &params, everyone_reported) {
        Ok(candidates) => candidates,
        Err(reason) => return wait(reason),
    };
    let following = match on_latest_history(
        dvcs,
        candidates,
        history_start,
        everyone_reported,
        params.accept_loss,
    ) {
        Ok(following) => following,
        Err(reason) => return wait(reason),
    };
    let source = choose_source(&following);
    let commit = dvcs
        .iter()
        .map(|dvc| dvc.commit)
        .max()
        .unwrap_or(0)
        .min(source.op);
    let keep_floor = commit.max(history_start.map_or(0, |start| start.op));
    let walked = walk_suffix(
        dvcs,
        source,
        commit,
        keep_floor,
        &params,
        &counts,
        not_reported == 0,
    );
    let (headers, op) = match walked {
        Ok(walked) => walked,
        Err(reason) => return wait(reason),
    };
    if history_start.is_some_and(|start| op < start.op) && !params.accept_loss {
        return wait(WaitReason::BelowHistoryStart);
    }
    assert!(op <= source.op, "the canonical log ends within its source");
    Decision::Ready(Canonical {
        source: source.replica,
        log_view: source.log_view,
        op,
        commit: commit.min(op),
        headers,
        history_start,
        dropped: source.op - op,
        cursor_tail: source.cursor_tail,
    })
}

/// The logs the view may start from: the usable trusted ones once R
/// trusted logs reported (every log counts as trusted with the gate off),
/// any usable one once everyone reported; otherwise the merge waits.
fn candidates_of<'a>(
    dvcs: &'a [DvcSummary],
    params: &MergeParams,
    everyone_reported: bool,
) -> Result<Vec<&'a DvcSummary>, WaitReason> {
    let counts = |dvc: &DvcSummary| !params.trusted_gate || dvc.trusted();
    let trusted = slots_where(dvcs, counts);
    let candidates: Vec<&DvcSummary> = if params.met_by(trusted, slots_where(dvcs, |_| true)) {
        dvcs.iter()
            .filter(|dvc| counts(dvc) && dvc.usable())
            .collect()
    } else if everyone_reported {
        dvcs.iter().filter(|dvc| dvc.usable()).collect()
    } else {
        return Err(WaitReason::FewerTrustedThanQuorum);
    };
    if candidates.is_empty() {
        return Err(WaitReason::AwaitingStateTransfer);
    }
    Ok(candidates)
}

/// The candidates on the latest start's history, narrowed to those that
/// reach the start if any does. Only a log on that history can start the
/// view: one settled in an older view may leave it at or below the start
/// (an old primary's unconfirmed suffix) where the start's own logs hold ops
/// confirmed before it. A quorum whose every log left that history is
/// waited past as one of fewer than R trusted logs is: once everyone
/// reported, any usable log on the history (trusted or not) is chosen.
fn on_latest_history<'a>(
    dvcs: &'a [DvcSummary],
    candidates: Vec<&'a DvcSummary>,
    history_start: Option<HistoryStart>,
    everyone_reported: bool,
    accept_loss: bool,
) -> Result<Vec<&'a DvcSummary>, WaitReason> {
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
        if !accept_loss {
            return Err(WaitReason::BelowHistoryStart);
        }
        following = candidates;
    }
    // A log that reaches the start outranks one that does not, whatever
    // their views: only the former can start the view without a loss. Once
    // everyone reported, that holds across the trusted gate too.
    let reaching = |dvc: &DvcSummary| reaches(history_start, dvc);
    if everyone_reported && !following.iter().any(|dvc| reaching(dvc)) {
        let wider: Vec<&DvcSummary> = dvcs
            .iter()
            .filter(|dvc| dvc.usable() && follows(dvc) && reaching(dvc))
            .collect();
        if !wider.is_empty() {
            following = wider;
        }
    }
    if following.iter().any(|dvc| reaching(dvc)) {
        following.retain(|dvc| reaching(dvc));
    }
    assert!(!following.is_empty(), "a log to choose from");
    Ok(following)
}

/// The log the view starts from: the latest settled view, then the
/// longest log, then the longest cursor log, then the lowest slot.
fn choose_source<'a>(following: &[&'a DvcSummary]) -> &'a DvcSummary {
    following
        .iter()
        .copied()
        .max_by(|a, b| {
            (
                a.settled_view(),
                a.op,
                a.cursor_tail,
                core::cmp::Reverse(a.replica),
            )
                .cmp(&(
                    b.settled_view(),
                    b.op,
                    b.cursor_tail,
                    core::cmp::Reverse(b.replica),
                ))
        })
        .expect("a log to choose from")
}

#[cfg(test)]
mod tests;
