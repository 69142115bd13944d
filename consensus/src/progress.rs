//! A primary's view of its backups' progress in the current view: the
//! highest op each acked, which ones reported at all and which said they
//! are repairing, their commit numbers, and the acks as they stood when the
//! prepare timeout last fired. Commits (`normal.rs`), retransmits,
//! handovers (`handover.rs`) and quiescence (`quiet.rs`) read it; a new
//! view, or the end of a quiet spell, forgets it.

use strand_wire::REPLICAS_MAX;

use crate::quiet::SlotBits;

/// Slots a group has at most.
const SLOTS: usize = REPLICAS_MAX as usize;

/// What a primary knows of each slot's progress. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct PrimaryProgress {
    /// The highest op each slot acked in this view (its own slot: what it
    /// stored).
    acks: [u64; SLOTS],
    /// Each slot's ack when the prepare timeout last fired (or started): a
    /// backup whose ack moved since is taking the pipeline in, however
    /// slowly, and is sent nothing again.
    acks_at_retransmit: [u64; SLOTS],
    /// Slots that sent a PrepareOk in this view.
    reported: SlotBits,
    /// Slots whose latest PrepareOk said they are repairing.
    repairing: SlotBits,
    /// Each slot's commit number, from its PrepareOks.
    backup_commits: [u64; SLOTS],
}

impl PrimaryProgress {
    /// The highest op `slot` acked in this view.
    pub fn ack(&self, slot: u8) -> u64 {
        self.acks[usize::from(slot)]
    }

    /// Every slot's ack (slots that are no member read 0).
    pub fn acks(&self) -> &[u64; SLOTS] {
        &self.acks
    }

    /// `slot` acked every op up to `op`.
    pub fn acked(&mut self, slot: u8, op: u64) {
        assert!(slot < REPLICAS_MAX, "an ack from slot {slot}");
        let ack = &mut self.acks[usize::from(slot)];
        *ack = (*ack).max(op);
    }

    /// The primary's own slot holds every op up to `op` (it may hold fewer
    /// than it did: a cut lowers it).
    pub fn stored(&mut self, slot: u8, op: u64) {
        assert!(slot < REPLICAS_MAX, "slot {slot} out of range");
        self.acks[usize::from(slot)] = op;
    }

    /// `slot` reported in this view: repairing or not, applied up to
    /// `commit`.
    pub fn reported(&mut self, slot: u8, repairing: bool, commit: u64) {
        assert!(slot < REPLICAS_MAX, "slot {slot} out of range");
        let bit: SlotBits = 1 << slot;
        self.reported |= bit;
        if repairing {
            self.repairing |= bit;
        } else {
            self.repairing &= !bit;
        }
        let known = &mut self.backup_commits[usize::from(slot)];
        *known = (*known).max(commit);
    }

    /// What `slot` reported may be stale (its node was suspected): it counts
    /// as not reported until it reports again.
    pub fn forget_report(&mut self, slot: u8) {
        let bit: SlotBits = 1 << slot;
        self.reported &= !bit;
        self.repairing &= !bit;
    }

    /// Whether `slot` reported in this view and its latest report said it
    /// repairs nothing.
    pub fn reports_whole(&self, slot: u8) -> bool {
        let bit: SlotBits = 1 << slot;
        self.reported & bit != 0 && self.repairing & bit == 0
    }

    /// `slot`'s commit number, as it last reported it.
    pub fn backup_commit(&self, slot: u8) -> u64 {
        self.backup_commits[usize::from(slot)]
    }

    /// Whether `slot`'s ack moved since the prepare timeout last fired; the
    /// mark moves to its ack now.
    pub fn ack_moved_since_retransmit(&mut self, slot: u8) -> bool {
        let index = usize::from(slot);
        let moved = self.acks[index] != self.acks_at_retransmit[index];
        self.acks_at_retransmit[index] = self.acks[index];
        moved
    }

    /// The prepare timeout starts: every slot's progress is measured from
    /// its ack now.
    pub fn mark_retransmit(&mut self) {
        self.acks_at_retransmit = self.acks;
    }

    /// A new view: no ack of the old one counts.
    pub fn forget_acks(&mut self) {
        self.acks = [0; SLOTS];
    }

    /// Normal status left or entered afresh: no report counts.
    pub fn forget_reports(&mut self) {
        self.reported = 0;
        self.repairing = 0;
        self.backup_commits = [0; SLOTS];
    }

    /// Its own rules: reports only from slots that exist, and a slot
    /// repairs only by its report.
    pub fn assert_invariants(&self) {
        assert!(
            u32::from(self.reported) >> REPLICAS_MAX == 0,
            "a report from a slot past the last"
        );
        assert_eq!(
            self.repairing & !self.reported,
            0,
            "slots repairing without a report: {:#b}",
            self.repairing & !self.reported
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_counts_until_forgotten_and_repairing_needs_a_report() {
        let mut progress = PrimaryProgress::default();
        progress.reported(2, true, 7);
        progress.reported(3, false, 5);
        progress.assert_invariants();
        assert!(!progress.reports_whole(2) && progress.reports_whole(3));
        progress.reported(2, false, 4);
        assert!(progress.reports_whole(2));
        assert_eq!(progress.backup_commit(2), 7, "a commit never goes back");
        progress.reported(2, true, 8);
        progress.forget_report(2);
        progress.assert_invariants();
        assert!(!progress.reports_whole(2));
        progress.forget_reports();
        assert_eq!(progress.backup_commit(3), 0);
    }

    #[test]
    fn a_retransmit_mark_sees_which_acks_moved() {
        let mut progress = PrimaryProgress::default();
        progress.acked(1, 4);
        progress.mark_retransmit();
        progress.acked(1, 3);
        assert_eq!(progress.ack(1), 4, "an ack never goes back");
        assert!(!progress.ack_moved_since_retransmit(1));
        progress.acked(1, 6);
        assert!(progress.ack_moved_since_retransmit(1));
        assert!(
            !progress.ack_moved_since_retransmit(1),
            "the mark moved with it"
        );
        progress.forget_acks();
        assert_eq!(progress.acks(), &[0; SLOTS]);
    }
}
