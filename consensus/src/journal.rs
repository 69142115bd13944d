//! The replica's in-memory window onto its log: one slot per op from `base`
//! to the head, each with the op's canonical header (when known), its body
//! while it is needed, and how far storage has taken it.
//!
//! Invariants:
//! - slots are contiguous by op; the head slot always has a header;
//! - a slot's header, once set, changes only by truncating it away;
//! - the window is bounded: committed slots are trimmed beyond
//!   [`JOURNAL_COMMITTED_KEEP`], and nothing is added beyond
//!   [`JOURNAL_SLOTS_MAX`] above the commit number;
//! - the journal counts its gaps and the slots that lack a body, so the
//!   questions asked on every prepare and ack ("any gap?", "any body to
//!   repair?") cost nothing while the answer is no. Slots change only
//!   through the journal ([`Journal::update`] for one in place), which keeps
//!   both counts true.

use std::collections::VecDeque;

use strand_wire::{CommandHeader, Msg, PrepareHeader};

/// Committed slots kept in memory (for DoViewChange suffixes and cheap
/// repair answers); older ones are served from storage.
pub const JOURNAL_COMMITTED_KEEP: u64 = 256;

/// Most slots the journal holds above the commit number. A replica further
/// behind repairs in windows of this size.
pub const JOURNAL_SLOTS_MAX: u64 = 4096;

/// How far storage has taken a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SlotState {
    /// The header is known, the body is not stored (or is being repaired).
    Missing,
    /// A write has been asked for and has not been handed to the WAL yet.
    Writing,
    /// Handed to the WAL writer (not yet fsynced).
    Queued,
    /// Fsynced.
    Durable,
    /// Storage found this op's entry damaged: never nacked, never served,
    /// repaired from peers.
    Faulty,
}

impl SlotState {
    /// True once the body is in storage at least as far as `durable` demands.
    pub fn stored(self, durable: bool) -> bool {
        match self {
            SlotState::Durable => true,
            SlotState::Queued => !durable,
            SlotState::Missing | SlotState::Writing | SlotState::Faulty => false,
        }
    }
}

/// One op of the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The op's canonical header.
    pub header: PrepareHeader,
    /// The whole prepare, held while it is being written, retransmitted or applied.
    pub prepare: Option<Msg<PrepareHeader>>,
    /// How far storage has taken it.
    pub state: SlotState,
}

impl Slot {
    /// Whether repair must fetch this op's body: its header is known, and
    /// storage neither holds it soundly nor is a copy held in memory.
    pub fn lacks_body(&self) -> bool {
        matches!(self.state, SlotState::Missing | SlotState::Faulty) && self.prepare.is_none()
    }
}

/// The window of slots; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct Journal {
    base: u64,
    slots: VecDeque<Option<Slot>>,
    /// Slots whose header is unknown (gaps).
    unknown: usize,
    /// Slots that [lack a body](Slot::lacks_body).
    bodiless: usize,
}

impl Journal {
    /// An empty journal (head op 0).
    pub fn new() -> Journal {
        Journal::starting_at(1)
    }

    /// An empty journal whose first slot will be op `base` (its head is
    /// `base - 1`): a recovered log's window starts at its first header.
    pub fn starting_at(base: u64) -> Journal {
        assert!(base >= 1, "op 0 is never in the journal");
        Journal {
            base,
            slots: VecDeque::new(),
            unknown: 0,
            bodiless: 0,
        }
    }

    /// The highest op with a known header (0 when empty).
    pub fn head(&self) -> u64 {
        self.base + self.slots.len() as u64 - 1
    }

    /// The lowest op in the window.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The slot of `op`, if it is in the window and its header is known.
    pub fn get(&self, op: u64) -> Option<&Slot> {
        let index = op.checked_sub(self.base)?;
        self.slots.get(usize::try_from(index).ok()?)?.as_ref()
    }

    /// Changes the slot of `op` in place with `change` (if it is in the
    /// window and its header is known), keeping the count of bodiless slots
    /// true. `change` must not replace the header.
    pub fn update<R>(&mut self, op: u64, change: impl FnOnce(&mut Slot) -> R) -> Option<R> {
        let index = usize::try_from(op.checked_sub(self.base)?).ok()?;
        let slot = self.slots.get_mut(index)?.as_mut()?;
        let checksum = slot.header.checksum();
        let lacked = slot.lacks_body();
        let result = change(slot);
        assert_eq!(
            slot.header.checksum(),
            checksum,
            "op {op}: a header changes only by truncating"
        );
        let lacks = slot.lacks_body();
        assert!(
            self.bodiless >= usize::from(lacked),
            "op {op} lacked a body the journal did not count"
        );
        self.bodiless = self.bodiless + usize::from(lacks) - usize::from(lacked);
        Some(result)
    }

    /// The header of `op`, if known.
    pub fn header(&self, op: u64) -> Option<&PrepareHeader> {
        self.get(op).map(|slot| &slot.header)
    }

    /// The checksum of `op`'s prepare; op 0 (the empty log) has checksum 0.
    pub fn checksum(&self, op: u64) -> Option<u32> {
        if op == 0 {
            return Some(0);
        }
        self.header(op).map(CommandHeader::checksum)
    }

    /// Whether `op` is in the window at all (known header or a gap).
    pub fn in_window(&self, op: u64) -> bool {
        op >= self.base && op <= self.head()
    }

    /// Sets the header of `op`, extending the window with unknown slots up to
    /// it. A slot that already holds this exact header is kept as it is.
    /// Panics if the slot holds another header: truncate first.
    pub fn set_header(&mut self, header: PrepareHeader, state: SlotState) {
        self.set_header_with_body(header, state, None);
    }

    /// [`Journal::set_header`], holding `prepare` in a new slot (the
    /// primary's own prepare, kept until it is written and applied).
    pub fn set_header_with_body(
        &mut self,
        header: PrepareHeader,
        state: SlotState,
        prepare: Option<Msg<PrepareHeader>>,
    ) {
        let op = header.op.get();
        assert!(
            op >= self.base,
            "op {op} below the journal base {}",
            self.base
        );
        assert!(
            prepare
                .as_ref()
                .is_none_or(|prepare| prepare.header().checksum() == header.checksum()),
            "op {op}: a body held under another header"
        );
        while self.head() < op {
            self.slots.push_back(None);
            self.unknown += 1;
        }
        let index = (op - self.base) as usize;
        let slot = &mut self.slots[index];
        match slot {
            Some(existing) => {
                assert_eq!(
                    existing.header.checksum(),
                    header.checksum(),
                    "op {op}: replacing a header without truncating"
                );
            }
            None => {
                let new = Slot {
                    header,
                    prepare,
                    state,
                };
                self.unknown -= 1;
                self.bodiless += usize::from(new.lacks_body());
                *slot = Some(new);
            }
        }
    }

    /// Drops every slot above `op` (the head becomes `op`, or lower if `op`'s
    /// header is unknown: the head slot always has a header).
    pub fn truncate(&mut self, op: u64) {
        assert!(
            op + 1 >= self.base,
            "truncating to op {op}, below the journal base {}",
            self.base
        );
        while self.head() > op {
            self.pop_back();
        }
        while matches!(self.slots.back(), Some(None)) {
            self.pop_back();
        }
    }

    fn pop_back(&mut self) {
        let slot = self.slots.pop_back().expect("a slot to drop");
        self.uncount(slot.as_ref());
    }

    /// Takes a slot leaving the window out of the counts.
    fn uncount(&mut self, slot: Option<&Slot>) {
        match slot {
            None => {
                assert!(self.unknown > 0, "a gap the journal did not count");
                self.unknown -= 1;
            }
            Some(slot) => {
                let lacks = usize::from(slot.lacks_body());
                assert!(
                    self.bodiless >= lacks,
                    "op {}: a bodiless slot the journal did not count",
                    slot.header.op.get()
                );
                self.bodiless -= lacks;
            }
        }
    }

    /// Forgets the header of `op` (a divergent op below the head whose
    /// canonical header is not known yet), leaving a gap.
    pub fn forget(&mut self, op: u64) {
        assert!(op < self.head(), "forgetting the head op {op}");
        assert!(
            op >= self.base,
            "forgetting op {op}, below the journal base {}",
            self.base
        );
        let index = op - self.base;
        let Some(slot) = self.slots.get_mut(index as usize) else {
            return;
        };
        if let Some(forgotten) = slot.take() {
            self.uncount(Some(&forgotten));
            self.unknown += 1;
        }
    }

    /// Drops slots below `op`, keeping at least the head slot.
    pub fn trim_below(&mut self, op: u64) {
        while self.base < op && self.slots.len() > 1 {
            let slot = self.slots.pop_front().expect("more than one slot");
            self.uncount(slot.as_ref());
            self.base += 1;
        }
    }

    /// Empties the window and places it just above `op` (after a state transfer).
    pub fn reset_at(&mut self, header: PrepareHeader) {
        self.slots.clear();
        self.unknown = 0;
        self.bodiless = 0;
        self.base = header.op.get();
        self.slots.push_back(Some(Slot {
            header,
            prepare: None,
            state: SlotState::Durable,
        }));
    }

    /// Whether some op in the window has an unknown header. Constant time:
    /// asked on every prepare and commit a backup takes.
    pub fn has_gaps(&self) -> bool {
        self.unknown > 0
    }

    /// The lowest op in the window whose header is unknown.
    pub fn first_gap(&self) -> Option<u64> {
        self.gaps().next()
    }

    /// Ops in the window whose header is unknown, ascending (nothing to
    /// visit while there are none).
    pub fn gaps(&self) -> impl Iterator<Item = u64> + '_ {
        let gapless = !self.has_gaps();
        self.slots
            .iter()
            .enumerate()
            .take(if gapless { 0 } else { usize::MAX })
            .filter(|(_, slot)| slot.is_none())
            .map(|(index, _)| self.base + index as u64)
    }

    /// Whether some slot [lacks a body](Slot::lacks_body). Constant time:
    /// asked on every ack a backup sends.
    pub fn lacks_bodies(&self) -> bool {
        self.bodiless > 0
    }

    /// The slots that [lack a body](Slot::lacks_body), as (op, checksum),
    /// ascending (nothing to visit while there are none).
    pub fn lacking_bodies(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let none = !self.lacks_bodies();
        self.slots
            .iter()
            .enumerate()
            .take(if none { 0 } else { usize::MAX })
            .filter_map(|(index, slot)| {
                let slot = slot.as_ref()?;
                slot.lacks_body()
                    .then(|| (self.base + index as u64, slot.header.checksum()))
            })
    }

    /// Checks the counts against the slots (a full pass: tests and the
    /// replica's own invariant checks).
    pub fn assert_invariants(&self) {
        let unknown = self.slots.iter().filter(|slot| slot.is_none()).count();
        let bodiless = self
            .slots
            .iter()
            .flatten()
            .filter(|slot| slot.lacks_body())
            .count();
        assert_eq!(self.unknown, unknown, "the journal's count of gaps");
        assert_eq!(
            self.bodiless, bodiless,
            "the journal's count of bodiless slots"
        );
        assert!(
            self.slots.back().is_none_or(Option::is_some),
            "the head slot has a header"
        );
        for (op, slot) in self.slots_from(self.base) {
            let Some(slot) = slot else { continue };
            assert_eq!(
                slot.header.op.get(),
                op,
                "the journal's slot {op} holds another op's header"
            );
            assert!(
                slot.prepare
                    .as_ref()
                    .is_none_or(|prepare| prepare.checksum() == slot.header.checksum()),
                "op {op}: the body held is not the header's prepare"
            );
        }
    }

    /// Slots from `op_min` to the head, with their ops.
    pub fn slots_from(&self, op_min: u64) -> impl Iterator<Item = (u64, Option<&Slot>)> + '_ {
        let skip = op_min.saturating_sub(self.base) as usize;
        self.slots
            .iter()
            .enumerate()
            .skip(skip)
            .map(|(index, slot)| (self.base + index as u64, slot.as_ref()))
    }

    /// Number of slots in the window.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the window is empty (head op 0).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use strand_wire::Operation;

    fn header(op: u64) -> PrepareHeader {
        let mut header = PrepareHeader::new(1, 1, strand_wire::ViewId::new(0, 1), 0);
        header.op.set(op);
        header.commit.set(op - 1);
        header.operation = Operation::Produce as u8;
        header.seal(&[]);
        header
    }

    #[test]
    fn gaps_truncation_and_trim() {
        let mut journal = Journal::new();
        assert_eq!(journal.head(), 0);
        assert_eq!(journal.checksum(0), Some(0));
        journal.set_header(header(1), SlotState::Durable);
        journal.set_header(header(4), SlotState::Missing);
        assert_eq!(journal.head(), 4);
        assert_eq!(journal.gaps().collect::<Vec<_>>(), vec![2, 3]);
        journal.truncate(3);
        assert_eq!(journal.head(), 1, "the head slot always has a header");
        for op in 2..=10 {
            journal.set_header(header(op), SlotState::Durable);
        }
        journal.trim_below(8);
        assert_eq!(journal.base(), 8);
        assert!(journal.get(7).is_none());
        assert!(journal.get(8).is_some());
        journal.trim_below(100);
        assert_eq!(journal.base(), 10);
        assert_eq!(journal.head(), 10);
    }

    #[test]
    fn a_window_starts_where_it_is_told_and_grows_with_gaps() {
        let mut journal = Journal::starting_at(50);
        assert_eq!(journal.head(), 49);
        journal.set_header(header(52), SlotState::Durable);
        assert_eq!(journal.base(), 50);
        assert_eq!(journal.head(), 52);
        assert_eq!(journal.gaps().collect::<Vec<_>>(), vec![50, 51]);
    }

    /// One change to a journal, for the counting property below.
    #[derive(Debug, Clone)]
    enum Change {
        Set {
            op: u64,
            state: SlotState,
            body: bool,
        },
        Update {
            op: u64,
            state: SlotState,
            body: Option<bool>,
        },
        Forget {
            op: u64,
        },
        Truncate {
            op: u64,
        },
        TrimBelow {
            op: u64,
        },
        Reset {
            op: u64,
        },
    }

    fn any_state() -> impl Strategy<Value = SlotState> {
        prop_oneof![
            Just(SlotState::Missing),
            Just(SlotState::Writing),
            Just(SlotState::Queued),
            Just(SlotState::Durable),
            Just(SlotState::Faulty),
        ]
    }

    fn any_change() -> impl Strategy<Value = Change> {
        let op = 1..40u64;
        prop_oneof![
            4 => (op.clone(), any_state(), any::<bool>())
                .prop_map(|(op, state, body)| Change::Set { op, state, body }),
            4 => (op.clone(), any_state(), proptest::option::of(any::<bool>()))
                .prop_map(|(op, state, body)| Change::Update { op, state, body }),
            1 => op.clone().prop_map(|op| Change::Forget { op }),
            1 => op.clone().prop_map(|op| Change::Truncate { op }),
            1 => op.clone().prop_map(|op| Change::TrimBelow { op }),
            1 => op.prop_map(|op| Change::Reset { op }),
        ]
    }

    fn apply(journal: &mut Journal, change: Change) {
        match change {
            Change::Set { op, state, body } => {
                if op < journal.base() || journal.header(op).is_some() {
                    return;
                }
                let body = body.then(|| Msg::new(header(op), bytes::Bytes::new()));
                journal.set_header_with_body(header(op), state, body);
            }
            Change::Update { op, state, body } => {
                journal.update(op, |slot| {
                    slot.state = state;
                    match body {
                        Some(true) => {
                            slot.prepare = Some(Msg::new(header(op), bytes::Bytes::new()))
                        }
                        Some(false) => slot.prepare = None,
                        None => {}
                    }
                });
            }
            Change::Forget { op } => {
                if op >= journal.base() && op < journal.head() {
                    journal.forget(op);
                }
            }
            Change::Truncate { op } => {
                if op + 1 >= journal.base() {
                    journal.truncate(op);
                }
            }
            Change::TrimBelow { op } => journal.trim_below(op),
            Change::Reset { op } => journal.reset_at(header(op)),
        }
    }

    proptest! {
        /// Whatever is done to it, the journal's counted answers ("any gap?",
        /// the first gap, "any body lacking?", which) equal a full pass.
        #[test]
        fn counted_gaps_and_bodies_match_a_full_pass(
            changes in proptest::collection::vec(any_change(), 1..80)
        ) {
            let mut journal = Journal::new();
            for change in changes {
                apply(&mut journal, change);
                journal.assert_invariants();
                let gaps: Vec<u64> = (journal.base()..=journal.head())
                    .filter(|op| journal.in_window(*op) && journal.get(*op).is_none())
                    .collect();
                prop_assert_eq!(journal.has_gaps(), !gaps.is_empty());
                prop_assert_eq!(journal.first_gap(), gaps.first().copied());
                prop_assert_eq!(journal.gaps().collect::<Vec<_>>(), gaps);
                let lacking: Vec<(u64, u32)> = journal
                    .slots_from(journal.base())
                    .filter_map(|(op, slot)| {
                        let slot = slot?;
                        let lacks = matches!(slot.state, SlotState::Missing | SlotState::Faulty)
                            && slot.prepare.is_none();
                        lacks.then(|| (op, slot.header.checksum()))
                    })
                    .collect();
                prop_assert_eq!(journal.lacks_bodies(), !lacking.is_empty());
                prop_assert_eq!(journal.lacking_bodies().collect::<Vec<_>>(), lacking);
            }
        }
    }

    #[test]
    #[should_panic(expected = "replacing a header without truncating")]
    fn replacing_a_header_needs_a_truncation() {
        let mut journal = Journal::new();
        journal.set_header(header(1), SlotState::Durable);
        let mut other = header(1);
        other.timestamp_ns.set(5);
        other.seal(&[]);
        journal.set_header(other, SlotState::Missing);
    }
}
