//! Assignments that change: a group's membership by epoch, and the rules
//! that combine the memberships of two epochs.
//!
//! A partition's replica set and confirm policy may change while it serves
//! (reassignment). Each assignment carries an epoch; within it, every replica
//! keeps a *slot* (its replica index, below [`REPLICAS_MAX`]) for as long as
//! it is a member, so indexes are never remapped: a replacement takes a slot
//! that is free in both the old and the new membership.
//!
//! The rules here are the ones every part of a reassignment must agree on
//! (the catalog classifying a change, the replicas committing and changing
//! views across it, the simulator, the admin output), in one place, pure:
//!
//! - [`transition`]: a change that keeps every current member and needs no
//!   more copies to confirm (`W' <= W`) takes effect **in place**, without a
//!   view change: a prepare confirmed on `W` old copies meets every `R'` set
//!   of the new membership. Any other change is a **view change** at the new
//!   epoch.
//! - [`view_change_quorums`]: until some replica's log has entered the new
//!   epoch, a view change into it must hear `R` trusted replicas of the old
//!   membership (so every prepare confirmed under the old rule carries over)
//!   *and* `R'` of the new one; once the new epoch has started, `R'` alone,
//!   with the history start it recorded guarding the old confirmed prefix.
//!
//! Every quorum comes from [`confirm_rule`], the one W/R function.

use strand_wire::REPLICAS_MAX;

use crate::confirm::{ConfirmPolicy, ConfirmRule, confirm_rule};

/// A set of slots (replica indexes), as a bitset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SlotSet(u16);

const _: () = assert!(REPLICAS_MAX as u32 <= u16::BITS);

impl SlotSet {
    /// No slots.
    pub const EMPTY: SlotSet = SlotSet(0);

    /// The slots `0..count`: a group as it is created.
    #[inline]
    pub fn first(count: u8) -> SlotSet {
        assert!(count <= REPLICAS_MAX, "at most {REPLICAS_MAX} slots");
        SlotSet(((1u32 << count) - 1) as u16)
    }

    /// The set holding exactly `slots`.
    pub fn of(slots: &[u8]) -> SlotSet {
        slots
            .iter()
            .fold(SlotSet::EMPTY, |set, &slot| set.with(slot))
    }

    /// The set as bits (bit `i` = slot `i`).
    #[inline]
    pub fn bits(self) -> u16 {
        self.0
    }

    /// The set of the given bits.
    #[inline]
    pub fn from_bits(bits: u16) -> SlotSet {
        SlotSet(bits)
    }

    /// This set plus `slot`.
    #[inline]
    pub fn with(self, slot: u8) -> SlotSet {
        assert!(slot < REPLICAS_MAX, "slot {slot} out of range");
        SlotSet(self.0 | 1 << slot)
    }

    /// Whether `slot` is in the set.
    #[inline]
    pub fn contains(self, slot: u8) -> bool {
        slot < REPLICAS_MAX && self.0 & (1 << slot) != 0
    }

    /// How many slots.
    #[inline]
    pub fn len(self) -> u8 {
        self.0.count_ones() as u8
    }

    /// Whether the set is empty.
    #[inline]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Slots in both sets.
    #[inline]
    pub fn intersection(self, other: SlotSet) -> SlotSet {
        SlotSet(self.0 & other.0)
    }

    /// Slots in either set.
    #[inline]
    pub fn union(self, other: SlotSet) -> SlotSet {
        SlotSet(self.0 | other.0)
    }

    /// Whether every slot of `self` is in `other`.
    #[inline]
    pub fn is_subset(self, other: SlotSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// The slots, ascending.
    #[inline]
    pub fn iter(self) -> impl Iterator<Item = u8> {
        let mut rest = self.0;
        std::iter::from_fn(move || {
            (rest != 0).then(|| {
                let slot = rest.trailing_zeros() as u8;
                rest &= rest - 1;
                slot
            })
        })
    }
}

/// Who serves a group in one epoch, and how many of them confirm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Membership {
    /// The assignment's generation; grows by one per committed change.
    pub epoch: u32,
    /// The members' slots.
    pub slots: SlotSet,
    /// How many copies confirm a prepare.
    pub confirm: ConfirmPolicy,
}

impl Membership {
    /// A membership; at least one member.
    pub fn new(epoch: u32, slots: SlotSet, confirm: ConfirmPolicy) -> Membership {
        assert!(!slots.is_empty(), "a membership has at least one member");
        Membership {
            epoch,
            slots,
            confirm,
        }
    }

    /// Members (`E`).
    #[inline]
    pub fn replica_count(&self) -> u8 {
        self.slots.len()
    }

    /// `W` and `R` of this membership.
    #[inline]
    pub fn rule(&self) -> ConfirmRule {
        confirm_rule(self.confirm, self.replica_count())
    }

    /// The primary of `view` in this membership: the `view mod E`-th member
    /// slot, ascending. With slots `0..E` this is `view % E`.
    #[inline]
    pub fn primary_of(&self, view: u32) -> u8 {
        let count = self.replica_count();
        let position = view % u32::from(count);
        if self.slots == SlotSet::first(count) {
            return position as u8;
        }
        self.slots
            .iter()
            .nth(position as usize)
            .expect("position below the member count")
    }

    /// The write quorum: `W` copies among the members.
    pub fn write_quorum(&self) -> QuorumSpec {
        QuorumSpec {
            members: self.slots,
            count: self.rule().write,
        }
    }

    /// The view-change quorum: `R` trusted replicas among the members.
    pub fn view_change_quorum(&self) -> QuorumSpec {
        QuorumSpec {
            members: self.slots,
            count: self.rule().view_change,
        }
    }
}

/// Memberships a replica keeps at most while older ones can go. Epochs are
/// reached one at a time (a reassignment waits for the previous one to
/// start), so a replica needs the membership of its view's epoch, of its
/// log's, and of those assigned since; older ones are forgotten first, but
/// never one it still needs (`keep_from`), up to [`MEMBERSHIPS_HELD_MAX`].
pub const MEMBERSHIPS_KNOWN_MAX: usize = 4;

/// The hard bound: a replica so far behind that it needs more memberships
/// than this forgets the oldest anyway (it then drops the frames of those
/// epochs and catches up from a later view).
pub const MEMBERSHIPS_HELD_MAX: usize = 16;

/// The memberships a replica knows, by epoch: the one its group started
/// with or was given by the driver (from the metadata plane's catalog), and
/// those it learned from `Reconfigure` ops in its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memberships {
    /// Ascending by epoch, at most [`MEMBERSHIPS_KNOWN_MAX`], never empty.
    known: Vec<Membership>,
}

/// Two different memberships were named for one epoch (a peer or a driver
/// that contradicts what this replica knows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MembershipConflict {
    /// What this replica knows.
    pub known: Membership,
    /// What it was told.
    pub offered: Membership,
}

impl Memberships {
    /// Knowing only `first`.
    pub fn new(first: Membership) -> Memberships {
        Memberships { known: vec![first] }
    }

    /// The membership of `epoch`, if known.
    #[inline]
    pub fn get(&self, epoch: u32) -> Option<&Membership> {
        self.known
            .iter()
            .find(|membership| membership.epoch == epoch)
    }

    /// The newest membership known.
    pub fn newest(&self) -> &Membership {
        self.known.last().expect("at least one membership is known")
    }

    /// Remembers `membership`; returns whether it was new. Past
    /// [`MEMBERSHIPS_KNOWN_MAX`] the oldest are forgotten, but not those of
    /// epoch `keep_from` or later (the caller's view and log) until
    /// [`MEMBERSHIPS_HELD_MAX`].
    pub fn learn(
        &mut self,
        membership: Membership,
        keep_from: u32,
    ) -> Result<bool, MembershipConflict> {
        if let Some(known) = self.get(membership.epoch) {
            if *known == membership {
                return Ok(false);
            }
            return Err(MembershipConflict {
                known: *known,
                offered: membership,
            });
        }
        let at = self
            .known
            .partition_point(|known| known.epoch < membership.epoch);
        self.known.insert(at, membership);
        while self.known.len() > MEMBERSHIPS_KNOWN_MAX
            && (self.known[0].epoch < keep_from || self.known.len() > MEMBERSHIPS_HELD_MAX)
        {
            self.known.remove(0);
        }
        assert!(
            self.known
                .windows(2)
                .all(|pair| pair[0].epoch < pair[1].epoch),
            "memberships out of epoch order: {:?}",
            self.known
        );
        assert!(
            self.known.len() <= MEMBERSHIPS_HELD_MAX,
            "{} memberships held",
            self.known.len()
        );
        Ok(true)
    }

    /// Every slot that is a member in `epoch` or any later known epoch: the
    /// replicas a replica in a view of `epoch` talks to.
    #[inline]
    pub fn slots_from(&self, epoch: u32) -> SlotSet {
        self.known
            .iter()
            .filter(|membership| membership.epoch >= epoch)
            .fold(SlotSet::EMPTY, |slots, membership| {
                slots.union(membership.slots)
            })
    }

    /// Every known membership, ascending by epoch.
    pub fn iter(&self) -> impl Iterator<Item = &Membership> {
        self.known.iter()
    }
}

/// "At least `count` of `members`".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuorumSpec {
    /// Who counts.
    pub members: SlotSet,
    /// How many of them are needed.
    pub count: u8,
}

impl QuorumSpec {
    /// Whether the replicas in `heard` satisfy this quorum.
    #[inline]
    pub fn is_met_by(&self, heard: SlotSet) -> bool {
        heard.intersection(self.members).len() >= self.count
    }
}

/// How a change of membership takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Every current member stays and no more copies confirm (`W' <= W`):
    /// the change commits in the group's own log, with no view change; new
    /// members start empty, catch up, and count toward `W'` once they hold
    /// the prefix.
    InPlace,
    /// A member leaves, or more copies must confirm: a view change at the
    /// new epoch, which hears the old membership first
    /// ([`view_change_quorums`]).
    ViewChange,
}

/// Classifies the change from `old` to `new` (reference A: "a change that
/// keeps the owner and every follower and needs no more copies to confirm
/// commits without recovery").
pub fn transition(old: &Membership, new: &Membership) -> Transition {
    assert_eq!(new.epoch, old.epoch + 1, "a change moves to the next epoch");
    let keeps_everyone = old.slots.is_subset(new.slots);
    let no_more_copies = new.rule().write <= old.rule().write;
    if keeps_everyone && no_more_copies {
        Transition::InPlace
    } else {
        Transition::ViewChange
    }
}

/// The quorums a view change into `target` must meet, all of them.
///
/// `reported` is the membership of the highest epoch any trusted log heard
/// so far has entered (the candidate's own included). When that is the
/// target, the new epoch has started and its own `R'` suffices (its history
/// start keeps what came before). When it is older, the change is still in
/// transition: `R` of that older membership, so that every prepare it
/// confirmed is heard, and `R'` of the target, so that a previous attempt
/// that already started the target and confirmed in it is heard too.
pub fn view_change_quorums(reported: &Membership, target: &Membership) -> Vec<QuorumSpec> {
    assert!(reported.epoch <= target.epoch, "no log is past the target");
    if reported.epoch == target.epoch {
        vec![target.view_change_quorum()]
    } else {
        vec![reported.view_change_quorum(), target.view_change_quorum()]
    }
}

/// Whether `heard` meets every quorum of `quorums`.
pub fn all_met(quorums: &[QuorumSpec], heard: SlotSet) -> bool {
    quorums.iter().all(|quorum| quorum.is_met_by(heard))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slot universe small enough to enumerate every subset.
    const UNIVERSE: u8 = 6;

    fn subsets() -> impl Iterator<Item = SlotSet> {
        (0u16..1 << UNIVERSE).map(SlotSet::from_bits)
    }

    fn policies(members: u8) -> Vec<ConfirmPolicy> {
        let mut policies = vec![ConfirmPolicy::MajorityDurable, ConfirmPolicy::LocalDurable];
        policies.extend((1..=members).map(ConfirmPolicy::Count));
        policies
    }

    fn memberships(epoch: u32) -> Vec<Membership> {
        subsets()
            .filter(|slots| !slots.is_empty())
            .flat_map(|slots| {
                policies(slots.len())
                    .into_iter()
                    .map(move |policy| Membership::new(epoch, slots, policy))
            })
            .collect()
    }

    /// Every subset of `members` with at least `count` of them.
    fn sets_meeting(quorum: QuorumSpec) -> impl Iterator<Item = SlotSet> {
        subsets().filter(move |set| set.is_subset(quorum.members) && quorum.is_met_by(*set))
    }

    /// The smallest sets meeting every quorum in `quorums` are what matter;
    /// checking every set that meets them all is simplest.
    fn sets_meeting_all(quorums: &[QuorumSpec]) -> Vec<SlotSet> {
        subsets().filter(|set| all_met(quorums, *set)).collect()
    }

    #[test]
    fn slot_sets_behave_as_sets() {
        let set = SlotSet::of(&[0, 2, 5]);
        assert_eq!(set.len(), 3);
        assert!(set.contains(2) && !set.contains(1) && !set.contains(REPLICAS_MAX));
        assert_eq!(set.iter().collect::<Vec<_>>(), [0, 2, 5]);
        assert_eq!(SlotSet::first(3), SlotSet::of(&[0, 1, 2]));
        assert!(SlotSet::of(&[2]).is_subset(set));
        assert_eq!(set.intersection(SlotSet::first(3)), SlotSet::of(&[0, 2]));
        assert_eq!(SlotSet::first(REPLICAS_MAX).len(), REPLICAS_MAX);
    }

    #[test]
    fn the_primary_walks_the_occupied_slots() {
        let dense = Membership::new(0, SlotSet::first(3), ConfirmPolicy::MajorityDurable);
        for view in 0..9 {
            assert_eq!(u32::from(dense.primary_of(view)), view % 3);
        }
        let sparse = Membership::new(1, SlotSet::of(&[0, 2, 3]), ConfirmPolicy::MajorityDurable);
        let primaries: Vec<u8> = (0..6).map(|view| sparse.primary_of(view)).collect();
        assert_eq!(primaries, [0, 2, 3, 0, 2, 3]);
    }

    #[test]
    fn named_transitions() {
        let three = SlotSet::first(3);
        let majority = Membership::new(0, three, ConfirmPolicy::MajorityDurable);
        let local = Membership::new(1, three, ConfirmPolicy::LocalDurable);
        let local_to_majority = Membership {
            epoch: 2,
            ..majority
        };
        assert_eq!(transition(&local, &local_to_majority), Transition::InPlace);
        let majority_to_local = Membership { epoch: 1, ..local };
        assert_eq!(
            transition(&majority, &majority_to_local),
            Transition::ViewChange
        );
        let replaced = Membership::new(1, SlotSet::of(&[0, 1, 3]), ConfirmPolicy::MajorityDurable);
        assert_eq!(transition(&majority, &replaced), Transition::ViewChange);
        let grown = Membership::new(1, SlotSet::first(4), ConfirmPolicy::Count(2));
        assert_eq!(transition(&majority, &grown), Transition::InPlace);
        let grown_majority = Membership::new(1, SlotSet::first(4), ConfirmPolicy::MajorityDurable);
        assert_eq!(
            transition(&majority, &grown_majority),
            Transition::ViewChange,
            "a majority of four is three copies, more than two"
        );
    }

    /// The in-place rule's whole justification, exhaustively: a prepare
    /// confirmed on any W copies of the old membership is held by at least
    /// one replica of every R' set of the new one.
    #[test]
    fn in_place_changes_keep_every_old_write_quorum_inside_every_new_view_change_quorum() {
        let mut checked = 0;
        for old in memberships(0) {
            for new in memberships(1) {
                if transition(&old, &new) != Transition::InPlace {
                    continue;
                }
                let new_view_change: Vec<SlotSet> =
                    sets_meeting(new.view_change_quorum()).collect();
                for written in sets_meeting(old.write_quorum()) {
                    for heard in &new_view_change {
                        assert!(
                            !written.intersection(*heard).is_empty(),
                            "{old:?} -> {new:?}: written {written:?} missed by {heard:?}"
                        );
                    }
                }
                checked += 1;
            }
        }
        assert!(checked > 1000, "only {checked} in-place pairs checked");
    }

    /// During a transition, every set of replicas that meets the joint
    /// quorums meets every write quorum of both memberships: nothing
    /// confirmed under the old rule, nor under the new one by an earlier
    /// attempt that started the epoch, can be missed.
    #[test]
    fn joint_quorums_meet_every_write_quorum_of_both_memberships() {
        let olds = memberships(0);
        let news = memberships(1);
        let mut checked = 0;
        for old in olds.iter().step_by(7) {
            for new in news.iter().step_by(5) {
                checked += 1;
                let quorums = view_change_quorums(old, new);
                assert_eq!(quorums.len(), 2);
                let heard_sets = sets_meeting_all(&quorums);
                for written in
                    sets_meeting(old.write_quorum()).chain(sets_meeting(new.write_quorum()))
                {
                    for heard in &heard_sets {
                        assert!(
                            !written.intersection(*heard).is_empty(),
                            "{old:?} -> {new:?}: written {written:?} missed by {heard:?}"
                        );
                    }
                }
            }
        }
        assert!(checked > 1000, "only {checked} pairs checked");
    }

    /// Why the old membership's R is needed at all: with a member replaced,
    /// the new membership's R' alone can miss a prepare confirmed by the old.
    #[test]
    fn the_new_quorum_alone_can_miss_what_the_old_membership_confirmed() {
        let old = Membership::new(0, SlotSet::first(3), ConfirmPolicy::MajorityDurable);
        let new = Membership::new(1, SlotSet::of(&[0, 1, 3]), ConfirmPolicy::MajorityDurable);
        assert_eq!(transition(&old, &new), Transition::ViewChange);
        // Confirmed on slots 1 and 2; the new quorum {0, 3} never saw it.
        let written = SlotSet::of(&[1, 2]);
        let heard = SlotSet::of(&[0, 3]);
        assert!(old.write_quorum().is_met_by(written));
        assert!(new.view_change_quorum().is_met_by(heard));
        assert!(written.intersection(heard).is_empty());
        assert!(!all_met(&view_change_quorums(&old, &new), heard));
    }

    #[test]
    fn memberships_are_learned_once_per_epoch_and_bounded() {
        let first = Membership::new(0, SlotSet::first(3), ConfirmPolicy::LocalDurable);
        let mut known = Memberships::new(first);
        let grown = Membership::new(1, SlotSet::first(4), ConfirmPolicy::Count(2));
        assert_eq!(known.learn(grown, 0), Ok(true));
        assert_eq!(known.learn(grown, 0), Ok(false));
        let other = Membership::new(1, SlotSet::first(2), ConfirmPolicy::Count(2));
        assert!(known.learn(other, 0).is_err(), "one membership per epoch");
        assert_eq!(known.get(1), Some(&grown));
        assert_eq!(known.slots_from(0), SlotSet::first(4));
        assert_eq!(known.newest().epoch, 1);
        for epoch in 2..8 {
            // A replica that keeps up needs only the newest.
            let next = Membership::new(epoch, SlotSet::of(&[1, 3]), ConfirmPolicy::Count(1));
            assert_eq!(known.learn(next, epoch), Ok(true));
        }
        assert_eq!(known.iter().count(), MEMBERSHIPS_KNOWN_MAX);
        assert_eq!(known.get(0), None, "the oldest were forgotten first");
        assert_eq!(known.slots_from(5), SlotSet::of(&[1, 3]));
        // What the replica still needs stays, up to the hard bound.
        for epoch in 8..30 {
            let next = Membership::new(epoch, SlotSet::of(&[1, 3]), ConfirmPolicy::Count(1));
            assert_eq!(known.learn(next, 5), Ok(true));
            if epoch < 16 {
                assert!(known.get(5).is_some(), "epoch 5 is kept at {epoch}");
            }
        }
        assert_eq!(known.iter().count(), MEMBERSHIPS_HELD_MAX);
    }

    #[test]
    fn a_started_epoch_needs_only_its_own_quorum() {
        let new = Membership::new(1, SlotSet::of(&[0, 1, 3]), ConfirmPolicy::MajorityDurable);
        assert_eq!(
            view_change_quorums(&new, &new),
            vec![new.view_change_quorum()]
        );
    }
}
