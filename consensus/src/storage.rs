//! The replica's persistence order: when its durable state is persisted,
//! which writes are handed to storage, and how the log's tail is cut (a cut
//! that drops ops which may have been acked waits for the persist that
//! records so).

use bytes::Bytes;
use strand_wire::{CommandHeader, Durability, Msg, PrepareHeader};

use crate::cursors::CursorState;
use crate::effects::{Effect, Effects};
use crate::journal::SlotState;
use crate::replica::{DeferredCut, Replica, Status};
use crate::state_machine::StateMachine;

impl<S: StateMachine> Replica<S> {
    /// Persists the commit number now instead of on its timer, when it is
    /// ahead of the persisted one and no superblock write is in flight:
    /// retention drops nothing above the persisted commit, so a driver
    /// whose retention waits on it asks (at most once per write); and a
    /// quiet replica's timer does not run, so its driver asks on its
    /// periodic storage check. Quiet stays quiet.
    pub fn persist_commit_now(&mut self, effects: &mut Effects) {
        if self.status == Status::Normal
            && self.commit > self.persistence.commit()
            && self.persistence.idle()
        {
            self.durable.commit = self.commit;
            self.request_persist(effects);
        }
    }

    /// Asks for the durable state to be persisted (coalescing: only the
    /// newest matters), with the client table as of the commit.
    pub(crate) fn request_persist(&mut self, effects: &mut Effects) -> u64 {
        assert!(
            self.durable.log_view <= self.durable.view,
            "persisting log view {} past view {}",
            self.durable.log_view,
            self.durable.view
        );
        assert!(
            self.durable.view <= self.view,
            "persisting view {}, past the replica's {}",
            self.durable.view,
            self.view
        );
        let sequence = self.persistence.ask(
            self.durable.view,
            self.durable.log_view,
            self.durable.commit,
        );
        if self.durable.client_table.is_empty() || self.persistence.client_table_at != self.commit {
            self.durable.client_table = Bytes::from(self.client_table.encode());
            self.persistence.client_table_at = self.commit;
        }
        effects.push(Effect::PersistState {
            state: self.durable.clone(),
            sequence,
        });
        sequence
    }

    /// Whether acks wait for durability under this group's policy.
    pub(crate) fn ack_needs_durable(&self) -> bool {
        self.config.durability == Durability::Persisted
    }

    /// The highest op such that every op from the commit number up to it is
    /// stored (per the durability policy): what this replica can ack.
    pub(crate) fn stored_through(&mut self) -> u64 {
        let durable = self.ack_needs_durable();
        let mut op = self.commit.max(self.stored_hint.min(self.journal.head()));
        while let Some(slot) = self.journal.get(op + 1) {
            if !slot.state.stored(durable) {
                break;
            }
            op += 1;
        }
        self.stored_hint = op;
        op
    }

    /// Hands every slot that can be appended in order to storage, then
    /// rewrites in place every faulty slot whose prepare has arrived.
    pub(crate) fn flush_writes(&mut self, effects: &mut Effects) {
        if self.deferred_cut.is_some() {
            return; // appends follow the cut they depend on
        }
        loop {
            let op = self.write_next;
            let writing = self.journal.update(op, |slot| {
                let (SlotState::Missing, Some(prepare)) = (slot.state, &slot.prepare) else {
                    return None;
                };
                let prepare = prepare.clone();
                slot.state = SlotState::Writing;
                Some(prepare)
            });
            let Some(Some(prepare)) = writing else {
                break;
            };
            effects.push(Effect::WritePrepare { prepare });
            self.write_next += 1;
        }
        if self.faulty_ops.is_empty() {
            return;
        }
        // Damaged entries below the append point are rewritten in place once
        // their prepare has arrived (they leave `faulty_ops` once durable).
        let faulty: Vec<u64> = self
            .faulty_ops
            .iter()
            .copied()
            .filter(|op| *op < self.write_next)
            .collect();
        for op in faulty {
            let rewriting = self.journal.update(op, |slot| {
                if slot.state != SlotState::Faulty {
                    return None;
                }
                let prepare = slot.prepare.clone()?;
                slot.state = SlotState::Writing;
                Some(prepare)
            });
            let Some(Some(prepare)) = rewriting else {
                continue;
            };
            effects.push(Effect::WritePrepare { prepare });
        }
    }

    /// Where storage can cut to keep `op`: `op` itself unless it and the
    /// op after it are both damaged; then below their damaged run, down to
    /// the commit at most.
    fn storage_cut_point(&self, op: u64) -> u64 {
        let mut cut = op;
        while cut > self.commit && self.damaged_in_storage(cut) && self.damaged_in_storage(cut + 1)
        {
            cut -= 1;
        }
        cut
    }

    /// Whether storage may still hold `op` damaged when a cut asked for now
    /// runs: it is faulty, and not one this process appended. Storage runs
    /// effects in order, so an op handed to it as an append (a tail the
    /// disk lost, written again) is whole by then, though it stays faulty
    /// here until durable (a failed write fails the log, which refuses the
    /// cut); cutting below it would drop an op storage holds readably, and
    /// maybe committed. A rewrite in place is not: storage may hold it
    /// until the damaged ops before it are rewritten.
    fn damaged_in_storage(&self, op: u64) -> bool {
        self.faulty_ops.contains(&op) && !(self.appended_from..self.write_next).contains(&op)
    }

    /// Removes every op above `op` from the journal and from storage.
    pub(crate) fn truncate_log(&mut self, op: u64, effects: &mut Effects) {
        self.cut_log(op, None, effects);
    }

    /// Reference A's cut, as a replica adopts a view: the record log down to
    /// `op` (the view's head, or the commit if higher) and, for a backup whose
    /// log was settled in an older view, the cursor log down to the view's
    /// history start. One `Cut` effect carries both, so storage executes the
    /// rule in one place (the partition's `cut`).
    pub(crate) fn cut_to_view(&mut self, op: u64, cursor_tail: Option<u64>, effects: &mut Effects) {
        let cursor_tail = cursor_tail.filter(|tail| self.cursors.tail > *tail);
        if let Some(tail) = cursor_tail {
            self.cursors = CursorState::new(tail);
        }
        if self.journal.head() > op || self.write_next > op + 1 {
            self.cut_log(op, cursor_tail, effects);
        } else {
            // Damage storage reported above its own head (ops a crash took)
            // is outside the view too: those ops are not repaired, and a new
            // op at that number is not a rewrite.
            self.faulty_ops.retain(|faulty| *faulty <= op);
            self.cut_cursors_only(cursor_tail, effects);
        }
    }

    /// Removes every op above `op` from the journal and from storage, and
    /// the cursor events from `cursor_tail` if given.
    fn cut_log(&mut self, op: u64, cursor_tail: Option<u64>, effects: &mut Effects) {
        assert!(
            op >= self.commit,
            "cutting the log to op {op}, below commit {}",
            self.commit
        );
        // Where storage can cut depends on what is damaged above `op` too.
        let cut = self.storage_cut_point(op);
        self.journal.truncate(op);
        // Ops cut from the journal were divergent, not damaged canonical ones.
        self.faulty_ops.retain(|faulty| *faulty <= op);
        self.durable.maybe_acked_op = self.durable.maybe_acked_op.min(op.max(self.commit));
        self.truncate_storage_at(op, cut, cursor_tail, effects);
    }

    /// Removes every op above `op` from storage; their journal slots (if any
    /// stay) go back to Missing, to be written again. Storage cannot cut
    /// between two damaged entries (it may not know where the second one
    /// starts), so the cut goes below the damaged run that holds `op`, never
    /// below the commit: the run's ops are written again, as appends.
    pub(crate) fn truncate_storage(&mut self, op: u64, effects: &mut Effects) {
        let cut = self.storage_cut_point(op);
        self.truncate_storage_at(op, cut, None, effects);
    }

    /// [`Replica::truncate_storage`] with the cut storage can make (`cut`,
    /// at most `op`) already found, and the cursor log's cut if any.
    fn truncate_storage_at(
        &mut self,
        op: u64,
        cut: u64,
        cursor_tail: Option<u64>,
        effects: &mut Effects,
    ) {
        assert!(
            op >= self.commit,
            "truncating committed op {} (commit {})",
            op + 1,
            self.commit
        );
        assert!(cut <= op && cut >= self.commit);
        if self.write_next <= op + 1 {
            self.cut_cursors_only(cursor_tail, effects);
            return;
        }
        let op = cut;
        let ops: Vec<u64> = self
            .journal
            .slots_from(op + 1)
            .map(|(slot_op, _)| slot_op)
            .collect();
        let mut dropped_max = self
            .faulty_ops
            .range(op + 1..self.write_next)
            .next_back()
            .copied();
        for slot_op in ops {
            // A canonical op dropped only because storage is sequential may
            // have been acked: it must not be nacked until it is durable
            // again.
            let was_stored = self.journal.update(slot_op, |slot| {
                let was_stored = slot.state.stored(false) || slot.state == SlotState::Faulty;
                slot.state = SlotState::Missing;
                was_stored
            });
            if was_stored == Some(true) {
                self.faulty_ops.insert(slot_op);
                dropped_max = dropped_max.max(Some(slot_op));
            }
        }
        self.write_next = op + 1;
        self.appended_from = self.appended_from.min(op + 1);
        self.stored_hint = self.stored_hint.min(op);
        // That knowledge must reach the disk before the ops leave it.
        if let Some(dropped_max) = dropped_max.filter(|max| *max > self.durable.maybe_acked_op) {
            self.durable.maybe_acked_op = dropped_max;
            let gate = self.request_persist(effects);
            let deferred = match self.deferred_cut {
                Some(earlier) => earlier.merged(op, cursor_tail),
                None => DeferredCut {
                    gate,
                    op,
                    cursor_tail,
                },
            };
            self.deferred_cut = Some(DeferredCut { gate, ..deferred });
            self.await_cut(deferred.op);
            return;
        }
        self.push_cut(op, cursor_tail, effects);
    }

    /// A cut of the cursor log alone (if asked for): the record log keeps
    /// everything handed to storage.
    fn cut_cursors_only(&mut self, cursor_tail: Option<u64>, effects: &mut Effects) {
        if cursor_tail.is_some() {
            let kept = self.write_next.saturating_sub(1).max(self.commit);
            self.push_cut(kept, cursor_tail, effects);
        }
    }

    /// Asks storage for a cut, or folds it into the one waiting for a persist.
    fn push_cut(&mut self, op: u64, cursor_tail: Option<u64>, effects: &mut Effects) {
        assert!(
            op >= self.commit,
            "a cut to op {op} would drop committed ops up to {}",
            self.commit
        );
        match self.deferred_cut {
            Some(earlier) => {
                let merged = earlier.merged(op, cursor_tail);
                self.deferred_cut = Some(merged);
                self.await_cut(merged.op);
            }
            None => {
                if self.write_next > op {
                    // Records go: an adoption waits until they have.
                    self.await_cut(op);
                }
                effects.push(Effect::Cut { op, cursor_tail });
            }
        }
    }

    /// An adoption in progress continues only once storage reports the cut
    /// at `op` (`on_truncated`).
    fn await_cut(&mut self, op: u64) {
        if let Some(adoption) = &mut self.adoption {
            adoption.truncating = Some(op);
        }
    }

    /// Trims committed slots beyond what the journal keeps in memory, and
    /// every slot below the log start (storage dropped those ops: no gap
    /// there is worth repairing).
    pub(crate) fn trim_journal(&mut self) {
        let keep = crate::journal::JOURNAL_COMMITTED_KEEP;
        self.journal.trim_below(
            self.commit
                .saturating_sub(keep)
                .max(self.log_start.min(self.commit + 1))
                .min(self.write_next.saturating_sub(1)),
        );
    }

    /// Stores a body for `op` if its header matches and storage lacks it.
    pub(crate) fn store_body(&mut self, prepare: &Msg<PrepareHeader>) -> bool {
        let op = prepare.header().op.get();
        self.journal
            .update(op, |slot| {
                if slot.header.checksum() != prepare.checksum() || !slot.lacks_body() {
                    return false;
                }
                slot.prepare = Some(prepare.clone());
                true
            })
            .unwrap_or(false)
    }
}
