//! The merge's rules, one test each.

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

/// A primary started view 12 at op 32, then lost its log to a fence; a
/// state transfer gave it a committed prefix (op 10) under its log view 12.
/// The other two never adopted view 12: settled in view 9 and untrusted
/// after crashes, one holds op 32 (the start's head), one ends at 31. The
/// start's recorded checksum is what shows the first is on view 12's
/// history, and the rebuilt prefix, though settled in view 12, outranks no
/// log that reaches the start.
#[test]
fn a_log_holding_the_starts_head_starts_the_view_once_the_views_own_logs_are_gone() {
    let start = HistoryStart {
        view: ViewId::new(0, 12),
        op: 32,
        replica: 0,
        checksum: Some(header(32, 9).checksum()),
        ..HistoryStart::default()
    };
    let untrusted = |mut dvc: DvcSummary| {
        dvc.flags = DoViewChangeFlags::UNTRUSTED_LOG;
        dvc
    };
    let mut rebuilt = untrusted(dvc(0, 9, 10, 10));
    rebuilt.flags |= DoViewChangeFlags::LOG_UNSETTLED;
    rebuilt.log_view = ViewId::new(0, 12);
    rebuilt.history_start = Some(start);
    let holder = untrusted(dvc(1, 9, 32, 10));
    let short = untrusted(dvc(2, 9, 31, 6));
    let dvcs = [rebuilt.clone(), holder, short];
    let canonical = ready(decide(&dvcs, params(3)));
    assert_eq!((canonical.source, canonical.op), (1, 32));
    assert_eq!(canonical.history_start, Some(start));

    // Without the checksum nothing proves the holder is on the history:
    // the view waits (before, an operator's accept-loss then chose the
    // rebuilt prefix and lost ops 11 to 32).
    rebuilt.history_start = Some(HistoryStart {
        checksum: None,
        ..start
    });
    let dvcs = [rebuilt, dvcs[1].clone(), dvcs[2].clone()];
    assert_eq!(
        decide(&dvcs, params(3)),
        Decision::Wait {
            reason: WaitReason::BelowHistoryStart,
            awaited: 0
        }
    );
}

/// A log of another history at the start's op (its header there is not
/// the one the view started on) never starts the view, checksum or not.
#[test]
fn a_log_that_differs_at_the_starts_head_is_not_on_its_history() {
    let start = HistoryStart {
        view: ViewId::new(0, 12),
        op: 32,
        replica: 0,
        checksum: Some(header(32, 9).checksum()),
        ..HistoryStart::default()
    };
    let mut rebuilt = dvc(0, 9, 10, 10);
    rebuilt.flags = DoViewChangeFlags::UNTRUSTED_LOG | DoViewChangeFlags::LOG_UNSETTLED;
    rebuilt.log_view = ViewId::new(0, 12);
    rebuilt.history_start = Some(start);
    let mut other = dvc(1, 8, 32, 10);
    other.flags = DoViewChangeFlags::UNTRUSTED_LOG;
    let decision = decide(
        &[rebuilt, other],
        MergeParams {
            members: SlotSet::of(&[0, 1]),
            ..params(3)
        },
    );
    assert_eq!(
        decision,
        Decision::Wait {
            reason: WaitReason::BelowHistoryStart,
            awaited: 0
        }
    );
}

/// The primary of view 9 started it at op 76 and was fenced before anyone
/// adopted the view; a state transfer gave it the committed prefix through
/// op 67 under its log view 9. The others, settled in views 7 and 5, hold
/// op 68, which was committed. Nothing reaches the start: the view waits
/// for an operator, and once one accepts the loss, the merge must not take
/// the prefix for a log of view 9: that dropped committed op 68 and forked
/// the history.
#[test]
fn an_accepted_loss_never_prefers_a_transferred_prefix_by_its_log_view() {
    let start = HistoryStart {
        view: ViewId::new(0, 9),
        op: 76,
        replica: 0,
        ..HistoryStart::default()
    };
    let mut prefix = dvc(0, 5, 67, 67);
    prefix.flags = DoViewChangeFlags::UNTRUSTED_LOG | DoViewChangeFlags::LOG_UNSETTLED;
    prefix.log_view = ViewId::new(0, 9);
    prefix.history_start = Some(start);
    let mut holder = dvc(1, 5, 68, 67);
    holder.log_view = ViewId::new(0, 7);
    holder.flags = DoViewChangeFlags::UNTRUSTED_LOG;
    let mut other = dvc(2, 5, 68, 66);
    other.flags = DoViewChangeFlags::UNTRUSTED_LOG;
    let dvcs = [prefix, holder, other];
    assert_eq!(
        decide(&dvcs, params(3)),
        Decision::Wait {
            reason: WaitReason::BelowHistoryStart,
            awaited: 0
        },
        "nothing reaches the start: an operator decides"
    );
    let accepted = MergeParams {
        accept_loss: true,
        ..params(3)
    };
    let canonical = ready(decide(&dvcs, accepted));
    assert_eq!((canonical.source, canonical.op), (1, 68));
}
