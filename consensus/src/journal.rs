//! The replica's in-memory window onto its log: one slot per op from `base`
//! to the head, each with the op's canonical header (when known), its body
//! while it is needed, and how far storage has taken it.
//!
//! Invariants:
//! - slots are contiguous by op; the head slot always has a header;
//! - a slot's header, once set, changes only by truncating it away;
//! - the window is bounded: committed slots are trimmed beyond
//!   [`JOURNAL_COMMITTED_KEEP`], and nothing is added beyond
//!   [`JOURNAL_SLOTS_MAX`] above the commit number.

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

/// The window of slots; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct Journal {
    base: u64,
    slots: VecDeque<Option<Slot>>,
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

    /// The slot of `op`, mutably.
    pub fn get_mut(&mut self, op: u64) -> Option<&mut Slot> {
        let index = op.checked_sub(self.base)?;
        self.slots.get_mut(usize::try_from(index).ok()?)?.as_mut()
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
    pub fn set_header(&mut self, header: PrepareHeader, state: SlotState) -> &mut Slot {
        let op = header.op.get();
        assert!(
            op >= self.base,
            "op {op} below the journal base {}",
            self.base
        );
        while self.head() < op {
            self.slots.push_back(None);
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
                *slot = Some(Slot {
                    header,
                    prepare: None,
                    state,
                })
            }
        }
        slot.as_mut().expect("slot was just set")
    }

    /// Drops every slot above `op` (the head becomes `op`, or lower if `op`'s
    /// header is unknown: the head slot always has a header).
    pub fn truncate(&mut self, op: u64) {
        while self.head() > op {
            self.slots.pop_back();
        }
        while matches!(self.slots.back(), Some(None)) {
            self.slots.pop_back();
        }
    }

    /// Forgets the header of `op` (a divergent op below the head whose
    /// canonical header is not known yet), leaving a gap.
    pub fn forget(&mut self, op: u64) {
        assert!(op < self.head(), "forgetting the head op {op}");
        if let Some(index) = op.checked_sub(self.base) {
            if let Some(slot) = self.slots.get_mut(index as usize) {
                *slot = None;
            }
        }
    }

    /// Drops slots below `op`, keeping at least the head slot.
    pub fn trim_below(&mut self, op: u64) {
        while self.base < op && self.slots.len() > 1 {
            self.slots.pop_front();
            self.base += 1;
        }
    }

    /// Empties the window and places it just above `op` (after a state transfer).
    pub fn reset_at(&mut self, header: PrepareHeader) {
        self.slots.clear();
        self.base = header.op.get();
        self.slots.push_back(Some(Slot {
            header,
            prepare: None,
            state: SlotState::Durable,
        }));
    }

    /// Ops in the window whose header is unknown, ascending.
    pub fn gaps(&self) -> impl Iterator<Item = u64> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.is_none())
            .map(|(index, _)| self.base + index as u64)
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
