//! The simulated metadata plane's catalog of the one group: its membership
//! by epoch, the highest epoch known to have started, and how a random wish
//! becomes the next membership.
//!
//! The planning is the metadata plane's own (`strand_host::reassign::plan`,
//! the same function the server's catalog calls), with slots standing in for
//! nodes: a replica that stays keeps its slot; a newcomer takes the lowest
//! slot free in both the current and the new membership; a change that
//! takes a view change must keep at least one current member to carry the
//! log over; a wish that changes nothing is refused. On top of those, the
//! simulator keeps every slot below [`SLOT_POOL`], and a new reassignment
//! waits until the previous epoch has started (what the metadata plane
//! learns from the primary's `EpochStarted`).

use strand_consensus::epoch::{MEMBERSHIPS_KNOWN_MAX, Membership, SlotSet, Transition, transition};
use strand_host::reassign::{self, ReassignError, ReassignWish, SlotAssignment};
use strand_prng::Prng;
use strand_wire::{ConfirmPolicy, REPLICAS_MAX};

/// Slots (replica indexes, network endpoints) the simulator's replicas may
/// occupy: the current and the next membership together fit in it.
pub const SLOT_POOL: u8 = 8;

/// What an operator asks for, drawn at random.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wish {
    /// A member that leaves, if any.
    pub leaving: Option<u8>,
    /// Whether a new replica joins.
    pub joining: bool,
    /// A new confirm policy, if any.
    pub confirm: Option<ConfirmPolicy>,
}

/// Why the catalog refuses a wish (the server's refusals that a drawn wish
/// can run into).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The wish leaves no member.
    NoReplicas,
    /// No slot of the pool is free for the newcomer.
    PoolFull,
    /// The wish is the current membership.
    NoChange,
    /// A view change with no current member to carry the log over.
    KeepsNoMember,
}

impl Wish {
    /// A random wish against `current`: replace a member, add one, remove
    /// one, or only change the confirm policy (which the other kinds also
    /// do, one time in four).
    pub fn draw(prng: &mut Prng, current: &Membership) -> Wish {
        let members: Vec<u8> = current.slots.iter().collect();
        let member = members[prng.below(members.len() as u64) as usize];
        let (leaving, joining) = match prng.below(4) {
            0 => (Some(member), true),
            1 => (None, true),
            2 => (Some(member), false),
            _ => (None, false),
        };
        let changes_members = leaving.is_some() || joining;
        let confirm = (!changes_members || prng.chance(1, 4)).then(|| {
            let count = current.replica_count() + u8::from(joining) - u8::from(leaving.is_some());
            draw_policy(prng, count.max(1))
        });
        Wish {
            leaving,
            joining,
            confirm,
        }
    }
}

/// A confirm policy for a membership of `replica_count` (a count may exceed
/// it: the rule caps it, as the options do).
fn draw_policy(prng: &mut Prng, replica_count: u8) -> ConfirmPolicy {
    match prng.below(4) {
        0 => ConfirmPolicy::MajorityDurable,
        1 => ConfirmPolicy::LocalDurable,
        _ => ConfirmPolicy::Count(1 + prng.below(u64::from(replica_count) + 1) as u8),
    }
}

/// The node id that stands for the replica in slot `slot` (the planner
/// speaks of nodes; the simulator's replicas are known by slot).
fn node_of(slot: u8) -> u32 {
    u32::from(slot) + 1
}

/// The node id of a newcomer: one that no slot stands for.
const NEWCOMER: u32 = REPLICAS_MAX as u32 + 1;

/// The membership after `current` that `wish` asks for, or why not: the
/// metadata plane's plan, over nodes that stand for slots.
pub fn plan(current: &Membership, wish: &Wish) -> Result<Membership, Refusal> {
    let held = current.slots.iter().max().map_or(0, |slot| slot + 1);
    let assignment = SlotAssignment {
        epoch: current.epoch,
        slots: (0..held)
            .map(|slot| current.slots.contains(slot).then(|| node_of(slot)))
            .collect(),
        confirm: current.confirm,
    };
    let mut nodes: Vec<u32> = current
        .slots
        .iter()
        .filter(|slot| Some(*slot) != wish.leaving)
        .map(node_of)
        .collect();
    if wish.joining {
        nodes.push(NEWCOMER);
    }
    let cluster: Vec<u32> = (1..=NEWCOMER).collect();
    let wish = ReassignWish {
        nodes,
        confirm: wish.confirm,
    };
    let next = reassign::plan(&assignment, &wish, &cluster)
        .map_err(refusal)?
        .next
        .membership();
    if next.slots.iter().any(|slot| slot >= SLOT_POOL) {
        return Err(Refusal::PoolFull);
    }
    Ok(next)
}

/// The simulator's name for a planner refusal it can run into.
fn refusal(error: ReassignError) -> Refusal {
    match error {
        ReassignError::NoReplicas => Refusal::NoReplicas,
        ReassignError::NoChange => Refusal::NoChange,
        ReassignError::KeepsNoMember => Refusal::KeepsNoMember,
        ReassignError::TooManySlots { .. } => Refusal::PoolFull,
        ReassignError::DuplicateNode(_) | ReassignError::UnknownNode(_) => {
            unreachable!("the simulator names each node once, all of them known: {error}")
        }
    }
}

/// The group's memberships by epoch and what the metadata plane knows of them.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// Every membership, index = epoch.
    memberships: Vec<Membership>,
    /// The highest epoch some replica reported started.
    started: u32,
    /// The highest epoch one of whose own prepares committed: its write
    /// quorum then holds every op before that prepare too (an ack means
    /// "holds every op up to here"), so the history it inherited no longer
    /// rests on an older quorum.
    confirmed: u32,
}

impl Catalog {
    /// A group as it is created.
    pub fn new(initial: Membership) -> Catalog {
        assert_eq!(initial.epoch, 0, "a group starts at epoch 0");
        Catalog {
            memberships: vec![initial],
            started: 0,
            confirmed: 0,
        }
    }

    /// The newest membership.
    pub fn newest(&self) -> &Membership {
        self.memberships
            .last()
            .expect("at least the initial membership")
    }

    /// The membership of `epoch`, if assigned.
    pub fn get(&self, epoch: u32) -> Option<&Membership> {
        self.memberships.get(epoch as usize)
    }

    /// The highest epoch known to have started.
    pub fn started(&self) -> u32 {
        self.started
    }

    /// Whether the newest membership's epoch has not started yet.
    pub fn in_flight(&self) -> bool {
        self.started < self.newest().epoch
    }

    /// A replica reported `epoch` started; returns whether that is news.
    /// Epochs start in order, so every earlier one has started too.
    pub fn note_started(&mut self, epoch: u32) -> bool {
        assert!(
            epoch <= self.newest().epoch,
            "epoch {epoch} started before the catalog assigned it"
        );
        if epoch <= self.started {
            return false;
        }
        self.started = epoch;
        true
    }

    /// A replica committed a prepare of `epoch` (its header's membership
    /// epoch).
    pub fn note_committed(&mut self, epoch: u32) {
        self.confirmed = self.confirmed.max(epoch);
    }

    /// The highest epoch whose own prepares have committed.
    pub fn confirmed(&self) -> u32 {
        self.confirmed
    }

    /// Commits `next` as the newest membership; returns how it takes effect.
    pub fn commit(&mut self, next: Membership) -> Transition {
        assert!(!self.in_flight(), "one reassignment at a time");
        let kind = transition(self.newest(), &next);
        self.memberships.push(next);
        kind
    }

    /// How `epoch` was reached from the one before (None for epoch 0).
    pub fn transition_into(&self, epoch: u32) -> Option<Transition> {
        let previous = self.get(epoch.checked_sub(1)?)?;
        Some(transition(previous, self.get(epoch)?))
    }

    /// The memberships a replica (re)starting is given: the newest few,
    /// ascending, within the consensus bound. They cover the replica's
    /// persisted view unless that is older than all of them; then the
    /// replica opens at the first view of the oldest (the consensus lifts
    /// it): its peers have forgotten older epochs too, so only a view they
    /// can name lets it catch up.
    pub fn window(&self) -> Vec<Membership> {
        let newest = self.newest().epoch;
        let low = newest.saturating_sub(MEMBERSHIPS_KNOWN_MAX as u32 - 1);
        self.memberships[low as usize..].to_vec()
    }

    /// The memberships whose confirmed prepares may still rest on only
    /// their own write quorum: the newest started epoch, the one before it
    /// (its last prepares are carried over by the start), and any newer;
    /// and back to the newest epoch that confirmed a prepare of its own.
    /// A view change can start an epoch on one copy of the history before
    /// it (a new primary whose backups have not caught up yet); until that
    /// epoch commits a prepare of its own, what older epochs confirmed is
    /// held only by their quorums.
    pub fn durability_window(&self) -> &[Membership] {
        let start = self.started.saturating_sub(1).min(self.confirmed);
        &self.memberships[start as usize..]
    }

    /// Members removed by an epoch that started but whose successors have
    /// not confirmed a prepare of their own: view changes no longer hear
    /// them, yet they may hold the only other copy of what older epochs
    /// confirmed, so for the durability promise they count as lost.
    pub fn removed_unconfirmed(&self) -> SlotSet {
        (self.confirmed + 1..=self.started)
            .map(|epoch| self.removed_by(epoch))
            .fold(SlotSet::EMPTY, SlotSet::union)
    }

    /// The smallest `W` of the durability window: how many copies every
    /// acknowledged prepare is known to have.
    pub fn write_quorum_min(&self) -> u8 {
        self.durability_window()
            .iter()
            .map(|membership| membership.rule().write)
            .min()
            .expect("the window is never empty")
    }

    /// The smallest minority (`(E - 1) / 2`) of the durability window.
    pub fn minority_min(&self) -> u8 {
        self.durability_window()
            .iter()
            .map(|membership| (membership.replica_count() - 1) / 2)
            .min()
            .expect("the window is never empty")
    }

    /// The slots of `epoch - 1` that `epoch` leaves out.
    pub fn removed_by(&self, epoch: u32) -> SlotSet {
        let Some(previous) = epoch.checked_sub(1).and_then(|epoch| self.get(epoch)) else {
            return SlotSet::EMPTY;
        };
        let current = self
            .get(epoch)
            .map_or(SlotSet::EMPTY, |membership| membership.slots);
        SlotSet::from_bits(previous.slots.bits() & !current.bits())
    }

    /// The first epoch after `joined` that leaves `slot` out: the one that
    /// removed the replica that joined at `slot` in `joined`, if any has.
    pub fn removal_of(&self, slot: u8, joined: u32) -> Option<u32> {
        self.memberships[joined as usize + 1..]
            .iter()
            .find(|membership| !membership.slots.contains(slot))
            .map(|membership| membership.epoch)
    }

    /// Whether the replica at `slot` that joined in `joined` may lead or
    /// prepare in a view of `epoch`: it is a member of that very epoch, as
    /// this occupant of the slot.
    pub fn may_lead(&self, slot: u8, joined: u32, epoch: u32) -> bool {
        epoch >= joined && self.get(epoch).is_some_and(|m| m.slots.contains(slot))
    }

    /// Whether the replica at `slot` that joined in `joined` may ack in a
    /// view of `epoch`: it is a member of that epoch or of one reached from
    /// it in place (a view survives in-place changes, and their newcomers
    /// ack in it), as this occupant of the slot.
    pub fn may_ack(&self, slot: u8, joined: u32, epoch: u32) -> bool {
        let mut at = epoch;
        loop {
            if self.may_lead(slot, joined, at) {
                return true;
            }
            if self.transition_into(at + 1) != Some(Transition::InPlace) {
                return false;
            }
            at += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn majority(epoch: u32, slots: &[u8]) -> Membership {
        Membership::new(epoch, SlotSet::of(slots), ConfirmPolicy::MajorityDurable)
    }

    fn wish(leaving: Option<u8>, joining: bool, confirm: Option<ConfirmPolicy>) -> Wish {
        Wish {
            leaving,
            joining,
            confirm,
        }
    }

    #[test]
    fn a_replacement_keeps_every_staying_slot_and_takes_the_lowest_free_one() {
        let current = majority(2, &[0, 2, 3]);
        let next = plan(&current, &wish(Some(2), true, None)).expect("accepted");
        assert_eq!(next, majority(3, &[0, 1, 3]));
        assert_eq!(transition(&current, &next), Transition::ViewChange);
    }

    #[test]
    fn growing_with_the_same_write_quorum_is_in_place() {
        let current = Membership::new(0, SlotSet::first(3), ConfirmPolicy::Count(2));
        let next = plan(&current, &wish(None, true, None)).expect("accepted");
        assert_eq!(next.slots, SlotSet::first(4));
        assert_eq!(transition(&current, &next), Transition::InPlace);
    }

    #[test]
    fn refusals() {
        let alone = majority(0, &[0]);
        assert_eq!(
            plan(&alone, &wish(Some(0), false, None)),
            Err(Refusal::NoReplicas)
        );
        assert_eq!(
            plan(&alone, &wish(Some(0), true, None)),
            Err(Refusal::KeepsNoMember)
        );
        assert_eq!(
            plan(
                &alone,
                &wish(None, false, Some(ConfirmPolicy::MajorityDurable))
            ),
            Err(Refusal::NoChange)
        );
        let full = majority(0, &[0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(plan(&full, &wish(None, true, None)), Err(Refusal::PoolFull));
    }

    #[test]
    fn the_restart_window_is_the_newest_few() {
        let mut catalog = Catalog::new(majority(0, &[0, 1, 2]));
        for epoch in 1..=6 {
            let slots: &[u8] = if epoch % 2 == 0 {
                &[0, 1, 2]
            } else {
                &[0, 1, 3]
            };
            catalog.commit(majority(epoch, slots));
            catalog.note_started(epoch);
        }
        let epochs = |window: Vec<Membership>| -> Vec<u32> {
            window.iter().map(|membership| membership.epoch).collect()
        };
        assert_eq!(epochs(catalog.window()), [3, 4, 5, 6]);
        assert_eq!(catalog.removed_by(5), SlotSet::of(&[2]));
    }

    /// Seed 8005 (`--reassign`): every copy confirms in epochs 1 and 2, but
    /// until one of them commits a prepare of its own, what epoch 0
    /// confirmed rests on epoch 0's majority, and the member epoch 1 or 2
    /// removed may hold one of those copies.
    #[test]
    fn an_epoch_counts_for_durability_once_it_confirmed_a_prepare_of_its_own() {
        let every = |epoch, slots: &[u8]| {
            Membership::new(epoch, SlotSet::of(slots), ConfirmPolicy::LocalDurable)
        };
        let mut catalog = Catalog::new(majority(0, &[0, 1, 2]));
        catalog.commit(every(1, &[0, 1, 2]));
        catalog.note_started(1);
        catalog.commit(every(2, &[1, 2, 3]));
        catalog.note_started(2);
        assert_eq!(
            catalog.write_quorum_min(),
            2,
            "epoch 0's quorum still counts"
        );
        assert_eq!(catalog.removed_unconfirmed(), SlotSet::of(&[0]));
        catalog.note_committed(1);
        assert_eq!(catalog.write_quorum_min(), 3);
        assert_eq!(catalog.removed_unconfirmed(), SlotSet::of(&[0]));
        catalog.note_committed(2);
        assert_eq!(catalog.write_quorum_min(), 3);
        assert_eq!(catalog.removed_unconfirmed(), SlotSet::EMPTY);
    }

    #[test]
    fn newcomers_of_an_in_place_change_may_ack_in_the_old_epochs_view() {
        let mut catalog = Catalog::new(Membership::new(
            0,
            SlotSet::first(3),
            ConfirmPolicy::Count(2),
        ));
        catalog.commit(Membership::new(
            1,
            SlotSet::first(4),
            ConfirmPolicy::Count(2),
        ));
        assert!(catalog.may_ack(3, 1, 0));
        assert!(!catalog.may_lead(3, 1, 0));
        catalog.note_started(1);
        catalog.commit(majority(2, &[0, 1, 2]));
        assert!(!catalog.may_ack(3, 1, 2), "removed by epoch 2");
        assert!(!catalog.may_ack(5, 0, 0), "never a member");
        // A later occupant of a vacated slot is not the replica of old.
        assert!(!catalog.may_ack(1, 3, 2));
    }

    #[test]
    fn drawn_wishes_are_planned_or_refused_without_panicking() {
        let mut prng = Prng::new(7);
        let mut current = majority(0, &[0, 1, 2]);
        let mut kinds = [0u32; 2];
        for _ in 0..2_000 {
            let wish = Wish::draw(&mut prng, &current);
            if let Ok(next) = plan(&current, &wish) {
                let kind = transition(&current, &next);
                kinds[usize::from(kind == Transition::ViewChange)] += 1;
                assert!(next.slots.iter().all(|slot| slot < SLOT_POOL));
                current = next;
            }
        }
        assert!(
            kinds[0] > 50 && kinds[1] > 50,
            "both kinds occur: {kinds:?}"
        );
    }
}
