//! Leaving a view: the votes to leave it (StartViewChange) this replica
//! counted, its own among them, and its probes for a view it has not
//! adopted (RequestStartView). `view_change.rs` decides with them; a new
//! view, or Normal status entered afresh, clears the votes.

use strand_prng::Prng;
use strand_wire::{REPLICAS_MAX, ViewId};

/// The votes to leave the current view. This replica's own vote and its
/// suspicion of the view go together: it votes when it suspects, and takes
/// the vote back when the view works again.
#[derive(Debug, Default)]
pub(crate) struct LeaveVotes {
    /// Slots (bitset) that voted to leave the current view.
    votes: u32,
    /// This replica voted to leave the current view.
    suspecting: bool,
}

impl LeaveVotes {
    /// Whether this replica voted to leave the current view.
    pub fn suspecting(&self) -> bool {
        self.suspecting
    }

    /// The votes among `slots` (a bitset).
    pub fn among(&self, slots: u32) -> u32 {
        self.votes & slots
    }

    /// This replica, at slot `own`, votes to leave the view.
    pub fn vote(&mut self, own: u8) {
        assert!(own < REPLICAS_MAX, "slot {own} out of range");
        self.suspecting = true;
        self.votes |= 1 << own;
    }

    /// `slot` voted to leave the view.
    pub fn heard(&mut self, slot: u8) {
        assert!(slot < REPLICAS_MAX, "a vote from slot {slot}");
        self.votes |= 1 << slot;
    }

    /// The view works again: this replica, at slot `own`, takes its vote
    /// back. Whether it had voted.
    pub fn withdraw(&mut self, own: u8) -> bool {
        assert!(own < REPLICAS_MAX, "slot {own} out of range");
        let voted = self.suspecting;
        if voted {
            self.suspecting = false;
            self.votes &= !(1 << own);
        }
        voted
    }

    /// A new view, or Normal status afresh: no vote counts.
    pub fn clear(&mut self) {
        *self = LeaveVotes::default();
    }

    /// The replica retired: it suspects nothing any more (the votes it
    /// counted no longer matter).
    pub fn retire(&mut self) {
        self.suspecting = false;
    }

    /// Its own rules: votes only from slots that exist, and (unless
    /// retired) this replica's vote at slot `own` exactly while it suspects.
    pub fn assert_invariants(&self, own: u8, retired: bool) {
        assert!(
            self.votes >> REPLICAS_MAX == 0,
            "a view change vote from a slot past the last"
        );
        if !retired {
            let voted = self.votes & (1 << own) != 0;
            assert_eq!(
                voted, self.suspecting,
                "this replica's own vote to leave the view and its suspicion disagree"
            );
        }
    }
}

/// This replica's requests for a StartView: while it recovers, to every
/// replica; while healthy, to the primary of a higher view it heard of.
#[derive(Debug, Default)]
pub(crate) struct StartViewProbe {
    /// The nonce of the outstanding request (0: none; odd otherwise).
    nonce: u64,
    /// Requests sent since recovery began, unanswered.
    sent: u32,
    /// A higher view this replica heard of and asked for; it joins that
    /// view's change if no StartView comes within a probe period.
    higher_view: Option<ViewId>,
}

impl StartViewProbe {
    /// A fresh nonce for the next request.
    pub fn next_nonce(&mut self, prng: &mut Prng) -> u64 {
        self.nonce = prng.next_u64() | 1;
        self.nonce
    }

    /// Recovery begins: no request unanswered yet.
    pub fn restart(&mut self) {
        self.sent = 0;
    }

    /// One more request went unanswered; how many have.
    pub fn unanswered(&mut self) -> u32 {
        self.sent += 1;
        self.sent
    }

    /// A higher view was heard of (and its StartView asked for).
    pub fn heard_of(&mut self, view: ViewId) {
        self.higher_view = self.higher_view.max(Some(view));
    }

    /// The higher view heard of, if any, forgotten here.
    pub fn take_higher_view(&mut self) -> Option<ViewId> {
        self.higher_view.take()
    }

    /// Its own rule: a nonce is odd once one was drawn.
    pub fn assert_invariants(&self) {
        assert!(
            self.nonce == 0 || self.nonce % 2 == 1,
            "an even probe nonce {}",
            self.nonce
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_votes_when_it_suspects_and_takes_the_vote_back() {
        let mut votes = LeaveVotes::default();
        votes.heard(2);
        votes.assert_invariants(0, false);
        votes.vote(0);
        assert!(votes.suspecting());
        assert_eq!(votes.among(0b111).count_ones(), 2);
        votes.assert_invariants(0, false);
        assert!(votes.withdraw(0));
        assert!(!votes.withdraw(0), "once");
        assert_eq!(votes.among(0b111), 0b100);
        votes.assert_invariants(0, false);
        votes.clear();
        assert_eq!(votes.among(u32::MAX), 0);
    }

    #[test]
    fn a_probe_counts_its_unanswered_requests_and_remembers_the_highest_view() {
        let mut probe = StartViewProbe::default();
        let mut prng = Prng::new(7);
        assert_eq!(probe.next_nonce(&mut prng) % 2, 1);
        assert_eq!((probe.unanswered(), probe.unanswered()), (1, 2));
        probe.restart();
        assert_eq!(probe.unanswered(), 1);
        probe.heard_of(ViewId::new(0, 5));
        probe.heard_of(ViewId::new(0, 3));
        assert_eq!(probe.take_higher_view(), Some(ViewId::new(0, 5)));
        assert_eq!(probe.take_higher_view(), None);
        probe.assert_invariants();
    }
}
