//! Normal operation: prepares, their acks, commit heartbeats, cursor shipping.

use zerocopy::little_endian::{U16, U32, U64, U128};

use crate::command::Command;
use crate::header::{FieldError, command_header, ensure};
use crate::operation::Operation;
use crate::operation_table::OffsetsTaken;
use crate::policy::ConfirmPolicy;

command_header! {
    /// Op `op` of a group's log: the primary of view `prefix.view` (replica
    /// `prefix.replica`) turned a client request into it. Forwarded unchanged
    /// during repair, so its checksum is its identity.
    PrepareHeader => Command::Prepare;
    /// Checksum of the prepare at `op - 1` (0 for op 1): the hash chain a backup
    /// checks before appending.
    parent: U32,
    /// This prepare's position in the group's log, counting from 1.
    op: U64,
    /// The primary's commit number when it prepared this op (always below `op`).
    commit: U64,
    /// The client whose request this is (0 for prepares the group makes itself).
    client: U128,
    /// The client's request number.
    request: U64,
    /// The primary's wall clock when it prepared the op, in nanoseconds since
    /// the Unix epoch (records without their own timestamp take this one).
    timestamp_ns: U64,
    /// Record offset of the first record in the body (produce only).
    offset_base: U64,
    /// Offsets the op takes in its group's log: the records in a produce's
    /// body; one for a metadata op (the metadata log is counted in entries,
    /// see [`crate::OffsetsTaken`]; prepares written before that took
    /// none); zero otherwise.
    record_count: U32,
    /// The [`Operation`] byte.
    operation: u8,
    /// The assignment epoch whose membership confirms this op (see
    /// [`crate::ViewId`]): the epoch of the view it was prepared in, or the
    /// next one once a `Reconfigure` op before it in the same view took
    /// effect.
    membership_epoch: U32,
    /// `Reconfigure` only (zero otherwise): the epoch that takes effect
    /// after this op, `membership_epoch + 1`.
    next_epoch: U32,
    /// `Reconfigure` only: the next epoch's member slots, as a bitset.
    next_slots: U16,
    /// `Reconfigure` only: the next epoch's confirm policy
    /// (`ConfirmPolicy::to_bytes`).
    next_confirm: [u8; 2],
}

const _: () = {
    assert!(core::mem::offset_of!(PrepareHeader, client) == 84);
    assert!(core::mem::offset_of!(PrepareHeader, operation) == 128);
    assert!(core::mem::offset_of!(PrepareHeader, membership_epoch) == 129);
};

impl PrepareHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        ensure(self.op.get() >= 1, "prepare op is zero")?;
        ensure(self.commit.get() < self.op.get(), "commit >= op")?;
        ensure(
            self.op.get() > 1 || self.parent.get() == 0,
            "op 1 has a parent",
        )?;
        let operation = Operation::from_u8(self.operation);
        ensure(
            operation.is_some_and(|operation| operation.info().replicated),
            "operation is not replicated",
        )?;
        ensure(
            self.record_count.get() == 0
                || operation == Some(Operation::Produce)
                || (operation
                    .is_some_and(|operation| operation.info().offsets == OffsetsTaken::One)
                    && self.record_count.get() == 1),
            "records in a prepare that is not a produce",
        )?;
        if operation == Some(Operation::Reconfigure) {
            ensure(
                self.next_epoch.get() == self.membership_epoch.get().wrapping_add(1)
                    && self.next_epoch.get() != 0,
                "reconfigure does not move to the next epoch",
            )?;
            ensure(self.next_slots.get() != 0, "reconfigure to no members")?;
            ensure(
                ConfirmPolicy::from_bytes(self.next_confirm).is_ok(),
                "reconfigure to an unknown confirm policy",
            )?;
            ensure(self.client.get() == 0, "reconfigure from a client")?;
        } else {
            ensure(
                self.next_epoch.get() == 0
                    && self.next_slots.get() == 0
                    && self.next_confirm == [0, 0],
                "next membership outside a reconfigure",
            )?;
        }
        ensure(
            self.offset_base
                .get()
                .checked_add(u64::from(self.record_count.get()))
                .is_some(),
            "record offsets overflow",
        )
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        ensure(
            body.is_empty() || self.operation != Operation::Reconfigure as u8,
            "reconfigure with a body",
        )
    }

    /// The operation, which `check_fields` guarantees is known.
    pub fn operation(&self) -> Operation {
        Operation::from_u8(self.operation).expect("validated header has a known operation")
    }

    /// One past the last record offset this prepare holds.
    pub fn offset_end(&self) -> u64 {
        self.offset_base.get() + u64::from(self.record_count.get())
    }

    /// `Reconfigure` only: the membership that takes effect after this op,
    /// as (epoch, slot bits, confirm policy); `None` for any other op.
    pub fn next_membership(&self) -> Option<(u32, u16, ConfirmPolicy)> {
        if self.operation != Operation::Reconfigure as u8 {
            return None;
        }
        let confirm = ConfirmPolicy::from_bytes(self.next_confirm).ok()?;
        Some((self.next_epoch.get(), self.next_slots.get(), confirm))
    }

    /// Makes this header a `Reconfigure` to the given next membership.
    pub fn set_next_membership(&mut self, epoch: u32, slots: u16, confirm: ConfirmPolicy) {
        self.operation = Operation::Reconfigure as u8;
        self.next_epoch.set(epoch);
        self.next_slots.set(slots);
        self.next_confirm = confirm.to_bytes();
    }
}

command_header! {
    /// A backup has appended `op` (durably under `persisted`, queued under
    /// `replicated`) and acks it to the primary of `prefix.view`; op 0 is a
    /// backup with an empty log reporting that it follows the view.
    PrepareOkHeader => Command::PrepareOk;
    /// Checksum of the prepare being acked, so an ack never counts for another
    /// prepare at the same op.
    prepare_checksum: U32,
    /// The acked op.
    op: U64,
    /// The backup's commit number.
    commit: U64,
    /// Length of the backup's cursor event log, so the primary re-ships what it lacks.
    cursor_tail: U64,
    /// [`PrepareOkFlags`].
    flags: u8,
}

impl PrepareOkHeader {
    /// The flags (unknown bits were rejected when the frame was decoded).
    pub fn flags(&self) -> PrepareOkFlags {
        PrepareOkFlags::from_bits_truncate(self.flags)
    }

    fn check_fields(&self) -> Result<(), FieldError> {
        let unknown = self.flags & !PrepareOkFlags::all().bits();
        if unknown != 0 {
            return Err(FieldError::UnknownFlags {
                field: "flags",
                bits: u64::from(unknown),
            });
        }
        // Op 0 is an empty log's report (it acks nothing): no checksum.
        ensure(
            self.op.get() >= 1 || self.prepare_checksum.get() == 0,
            "checksum of op 0",
        )
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        ensure(body.is_empty(), "prepare-ok has a body")
    }
}

bitflags::bitflags! {
    /// Flags of a PrepareOk. Unknown bits are rejected.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct PrepareOkFlags: u8 {
        /// The backup is repairing entries it lacks or found damaged: it is
        /// not caught up, whatever op it acks, so its primary must not go
        /// quiet (and its repair requests are news).
        const REPAIRING = 1;
    }
}

bitflags::bitflags! {
    /// Flags of a Commit heartbeat. Unknown bits are rejected.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct CommitFlags: u8 {
        /// The group is idle and every backup holds and applied everything:
        /// the primary goes quiet after this heartbeat (no more heartbeats
        /// until something happens), and a backup that holds `op` goes quiet
        /// too, relying on node-level liveness to notice a dead primary.
        const QUIESCE = 1;
    }
}

command_header! {
    /// The primary's heartbeat: its commit number and its latest op.
    CommitHeader => Command::Commit;
    /// Checksum of the prepare at `commit` (0 when `commit` is 0), so a backup
    /// commits only the prepare the primary committed.
    commit_checksum: U32,
    /// The primary's commit number.
    commit: U64,
    /// The primary's highest op.
    op: U64,
    /// [`CommitFlags`].
    flags: u8,
}

impl CommitHeader {
    /// The flags (unknown bits were rejected when the frame was decoded).
    pub fn flags(&self) -> CommitFlags {
        CommitFlags::from_bits_truncate(self.flags)
    }

    fn check_fields(&self) -> Result<(), FieldError> {
        let unknown = self.flags & !CommitFlags::all().bits();
        if unknown != 0 {
            return Err(FieldError::UnknownFlags {
                field: "flags",
                bits: u64::from(unknown),
            });
        }
        ensure(self.commit.get() <= self.op.get(), "commit > op")?;
        ensure(
            self.commit.get() > 0 || self.commit_checksum.get() == 0,
            "checksum of op 0",
        )
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        ensure(body.is_empty(), "commit has a body")
    }
}

command_header! {
    /// Primary → backups: cursor events `cursor_base..cursor_base + event_count`
    /// of the partition's cursor event log, durable on the primary.
    CursorsHeader => Command::Cursors;
    /// Sequence number of the first event in the body.
    cursor_base: U64,
    /// Number of events in the body.
    event_count: U32,
}

impl CursorsHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        ensure(self.event_count.get() >= 1, "no cursor events")?;
        ensure(
            self.cursor_base
                .get()
                .checked_add(u64::from(self.event_count.get()))
                .is_some(),
            "cursor sequence overflows",
        )
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        ensure(!body.is_empty(), "cursor events missing")
    }

    /// One past the last cursor event sequence number carried.
    pub fn cursor_end(&self) -> u64 {
        self.cursor_base.get() + u64::from(self.event_count.get())
    }
}
