//! The view change: StartViewChange, DoViewChange, StartView, RequestStartView.

use zerocopy::little_endian::{U32, U64, U128};

use crate::command::Command;
use crate::header::{FieldError, HEADER_SIZE, ViewId, command_header, ensure, is_zero};
use crate::headers::check_header_suffix;

/// Most prepare headers a DoViewChange or StartView carries: one per bit of
/// the 128-bit present/nack bitsets. A longer divergent suffix is repaired
/// afterwards with RequestHeaders.
pub const DVC_SUFFIX_HEADERS_MAX: usize = 128;

/// The bit of [`DoViewChangeHeader::flags`] saying the sender's log is untrusted.
pub const FLAG_UNTRUSTED_LOG: u8 = 1;

bitflags::bitflags! {
    /// Flags of a DoViewChange (byte 156 of its header). Unknown bits are rejected.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct DoViewChangeFlags: u8 {
        /// The sender's log was recovered from disk under `replicated`
        /// durability without a clean shutdown: it may lack ops it acked, so it
        /// never counts toward the trusted quorum and never nacks an op.
        const UNTRUSTED_LOG = FLAG_UNTRUSTED_LOG;
        /// The sender cannot use its log at all (it awaits state transfer): the
        /// DoViewChange is empty and only counts toward "every replica reported".
        /// Always set together with `UNTRUSTED_LOG`.
        const AWAITING_STATE_TRANSFER = 2;
        /// The sender's log is a committed prefix a state transfer installed,
        /// not the log of its `log_view`: that view vouches for none of it
        /// (the view's own ops past the prefix are gone), so the merge ranks
        /// it as a log settled in no view. Always set together with
        /// `UNTRUSTED_LOG`.
        const LOG_UNSETTLED = 4;
    }
}

command_header! {
    /// The sender votes to leave view `prefix.view` (its primary is silent, or
    /// its view change is stuck). A quorum of votes moves every voter to the
    /// next view.
    StartViewChangeHeader => Command::StartViewChange;
}

impl StartViewChangeHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        Ok(())
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        ensure(body.is_empty(), "start-view-change has a body")
    }
}

command_header! {
    /// A replica's summary of its log for the candidate primary of view
    /// `prefix.view`. The body is a suffix of its prepare headers in ascending
    /// op order; bit `i` of the bitsets describes body header `i`.
    DoViewChangeHeader => Command::DoViewChange;
    /// The sender's highest op.
    op: U64,
    /// The sender's commit number.
    commit: U64,
    /// Length of the sender's cursor event log (the view-change tie-break).
    cursor_tail: U64,
    /// Bit `i`: the sender does not hold body header `i`'s prepare and never
    /// acked it (only meaningful when the log is trusted).
    nack_bitset: U128,
    /// Bit `i`: the sender holds body header `i`'s prepare, body included.
    present_bitset: U128,
    /// Op of the latest history start the sender knows.
    history_start_op: U64,
    /// Cursor tail of that history start.
    history_start_cursor_tail: U64,
    /// View of that history start (0: none recorded).
    history_start_view: U32,
    /// Replica that started that view.
    history_start_replica: u8,
    /// The highest op the sender may have acked: every op up to it is stored
    /// (or damaged on disk), none above it was ever acked, so a trusted
    /// sender nacks every op above it.
    ack_op: U64,
    /// Zero.
    reserved_a: [u8; 3],
    /// The view in which the sender's log was last settled (it was Normal or
    /// adopted a StartView); always below `prefix.view`.
    log_view: U32,
    /// [`DoViewChangeFlags`].
    flags: u8,
    /// The epoch of `log_view` (see [`crate::ViewId`]).
    log_view_epoch: U32,
    /// The epoch of `history_start_view`.
    history_start_epoch: U32,
    /// That history start's record offset end, plus one; 0: not recorded
    /// (a start recorded before starts carried it, or a sender from before
    /// this field). Read and written through
    /// [`DoViewChangeHeader::history_start_offset_end`].
    history_start_offset_end_encoded: U64,
    /// That history start's head checksum, plus one; 0: not recorded. Read
    /// and written through [`DoViewChangeHeader::history_start_checksum`].
    history_start_checksum_encoded: U64,
}

const _: () = {
    assert!(core::mem::offset_of!(DoViewChangeHeader, op) == 64);
    assert!(core::mem::offset_of!(DoViewChangeHeader, nack_bitset) == 88);
    assert!(core::mem::offset_of!(DoViewChangeHeader, present_bitset) == 104);
    assert!(core::mem::offset_of!(DoViewChangeHeader, ack_op) == 141);
    assert!(core::mem::offset_of!(DoViewChangeHeader, log_view) == 152);
    assert!(core::mem::offset_of!(DoViewChangeHeader, flags) == 156);
    assert!(core::mem::offset_of!(DoViewChangeHeader, log_view_epoch) == 157);
    assert!(core::mem::offset_of!(DoViewChangeHeader, history_start_offset_end_encoded) == 165);
};

/// A record offset end as the headers carry it: plus one, so that the zeros
/// of a reserved field (a sender from before the field) read as unknown.
fn encode_offset_end(offset_end: Option<u64>) -> u64 {
    offset_end
        .and_then(|offset| offset.checked_add(1))
        .unwrap_or(0)
}

/// The record offset end an encoded field holds (`None`: not recorded).
fn decode_offset_end(encoded: u64) -> Option<u64> {
    encoded.checked_sub(1)
}

/// A start's head checksum as the headers carry it: plus one, so that the
/// zeros of a reserved field (a sender from before the field) read as
/// unknown.
fn encode_checksum(checksum: Option<u32>) -> u64 {
    checksum.map_or(0, |checksum| u64::from(checksum) + 1)
}

/// The head checksum an encoded field holds (`None`: not recorded; the
/// field checks refuse an encoding past `u32::MAX + 1`).
fn decode_checksum(encoded: u64) -> Option<u32> {
    encoded
        .checked_sub(1)
        .and_then(|checksum| u32::try_from(checksum).ok())
}

/// Whether an encoded head checksum is one [`encode_checksum`] writes.
fn checksum_in_range(encoded: u64) -> bool {
    encoded <= u64::from(u32::MAX) + 1
}

impl DoViewChangeHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        let unknown = self.flags & !DoViewChangeFlags::all().bits();
        if unknown != 0 {
            return Err(FieldError::UnknownFlags {
                field: "flags",
                bits: u64::from(unknown),
            });
        }
        ensure(is_zero(&self.reserved_a), "reserved bytes not zero")?;
        ensure(
            self.log_view_id() < self.prefix.view_id(),
            "log_view >= view",
        )?;
        ensure(self.commit.get() <= self.op.get(), "commit > op")?;
        ensure(
            checksum_in_range(self.history_start_checksum_encoded.get()),
            "history start checksum out of range",
        )?;
        ensure(
            self.history_start_view_id() <= self.log_view_id(),
            "history start after log_view",
        )?;
        let nack = self.nack_bitset.get();
        let present = self.present_bitset.get();
        ensure(nack & present == 0, "an op is both present and nacked")?;
        let flags = self.flags();
        if flags.contains(DoViewChangeFlags::AWAITING_STATE_TRANSFER) {
            ensure(
                flags.contains(DoViewChangeFlags::UNTRUSTED_LOG),
                "awaiting state transfer but trusted",
            )?;
            ensure(nack == 0 && present == 0, "empty log with bitsets")?;
        }
        if flags.contains(DoViewChangeFlags::LOG_UNSETTLED) {
            ensure(
                flags.contains(DoViewChangeFlags::UNTRUSTED_LOG),
                "unsettled log but trusted",
            )?;
        }
        Ok(())
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        if self
            .flags()
            .contains(DoViewChangeFlags::AWAITING_STATE_TRANSFER)
        {
            return ensure(body.is_empty(), "empty do-view-change has headers");
        }
        let count = check_header_suffix(body, DVC_SUFFIX_HEADERS_MAX, self.op.get())?;
        let bits_used = if count == 128 {
            u128::MAX
        } else {
            (1u128 << count) - 1
        };
        let bits = self.nack_bitset.get() | self.present_bitset.get();
        ensure(
            bits & !bits_used == 0,
            "bitset bit beyond the headers carried",
        )?;
        debug_assert_eq!(body.len(), count * HEADER_SIZE);
        Ok(())
    }

    /// The flags, which `check_fields` guarantees are known.
    pub fn flags(&self) -> DoViewChangeFlags {
        DoViewChangeFlags::from_bits_truncate(self.flags)
    }

    /// The view (with its epoch) the sender's log was last settled in.
    pub fn log_view_id(&self) -> ViewId {
        ViewId::new(self.log_view_epoch.get(), self.log_view.get())
    }

    /// Sets both halves of `log_view`.
    pub fn set_log_view_id(&mut self, view: ViewId) {
        self.log_view_epoch.set(view.epoch);
        self.log_view.set(view.view);
    }

    /// The view (with its epoch) of the latest history start the sender knows.
    pub fn history_start_view_id(&self) -> ViewId {
        ViewId::new(
            self.history_start_epoch.get(),
            self.history_start_view.get(),
        )
    }

    /// Sets both halves of `history_start_view`.
    pub fn set_history_start_view_id(&mut self, view: ViewId) {
        self.history_start_epoch.set(view.epoch);
        self.history_start_view.set(view.view);
    }

    /// One past the last record offset of the latest history start's op, as
    /// its new primary recorded it (`None`: not recorded). Operators read a
    /// wait below that start by it.
    pub fn history_start_offset_end(&self) -> Option<u64> {
        decode_offset_end(self.history_start_offset_end_encoded.get())
    }

    /// Sets [`DoViewChangeHeader::history_start_offset_end`].
    pub fn set_history_start_offset_end(&mut self, offset_end: Option<u64>) {
        self.history_start_offset_end_encoded
            .set(encode_offset_end(offset_end));
    }

    /// The checksum of the prepare the latest history start's view started
    /// on, its head (`None`: not recorded). A log whose header at the
    /// start's op has it is on that history: the checksum chain vouches for
    /// every op below.
    pub fn history_start_checksum(&self) -> Option<u32> {
        decode_checksum(self.history_start_checksum_encoded.get())
    }

    /// Sets [`DoViewChangeHeader::history_start_checksum`].
    pub fn set_history_start_checksum(&mut self, checksum: Option<u32>) {
        self.history_start_checksum_encoded
            .set(encode_checksum(checksum));
    }
}

/// Most history starts a StartView carries: as many as a replica keeps
/// (consensus's `HISTORY_STARTS_MAX`).
pub const START_VIEW_HISTORY_STARTS_MAX: usize = 16;

bitflags::bitflags! {
    /// Flags of a [`HistoryStartRecord`]. Unknown bits are rejected.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct HistoryStartFlags: u8 {
        /// The view was started by an operator's accept-loss.
        const ACCEPTED_LOSS = 1;
    }
}

/// One history start as a StartView carries it: the new primary of a view
/// started it with its log at `op` and its cursor event log at
/// `cursor_tail`. 32 bytes.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
)]
#[repr(C)]
pub struct HistoryStartRecord {
    /// The canonical log's head op when the view started.
    pub op: U64,
    /// The cursor event log's length when the view started.
    pub cursor_tail: U64,
    /// The view number.
    pub view: U32,
    /// The view's epoch.
    pub epoch: U32,
    /// The replica that started it.
    pub replica: u8,
    /// [`HistoryStartFlags`].
    pub flags: u8,
    /// Zero.
    pub reserved: [u8; 6],
}

/// The size of one [`HistoryStartRecord`].
pub const HISTORY_START_RECORD_SIZE: usize = 32;

const _: () = assert!(size_of::<HistoryStartRecord>() == HISTORY_START_RECORD_SIZE);

impl HistoryStartRecord {
    /// The view (with its epoch).
    pub fn view_id(&self) -> ViewId {
        ViewId::new(self.epoch.get(), self.view.get())
    }

    /// Sets both halves of the view.
    pub fn set_view_id(&mut self, view: ViewId) {
        self.epoch.set(view.epoch);
        self.view.set(view.view);
    }

    /// The flags, which [`StartViewHeader`]'s checks guarantee are known.
    pub fn flags(&self) -> HistoryStartFlags {
        HistoryStartFlags::from_bits_truncate(self.flags)
    }

    fn check(&self) -> Result<(), FieldError> {
        let unknown = self.flags & !HistoryStartFlags::all().bits();
        if unknown != 0 {
            return Err(FieldError::UnknownFlags {
                field: "history start flags",
                bits: u64::from(unknown),
            });
        }
        ensure(
            is_zero(&self.reserved),
            "history start reserved bytes not zero",
        )
    }
}

command_header! {
    /// The primary's log for view `prefix.view`. The view's history start is
    /// `(prefix.view, start_op, cursor_tail, prefix.replica)`, its record
    /// offset [`StartViewHeader::start_offset_end`]. The body is the
    /// log's suffix of prepare headers, ending at `op` (equal to `start_op`
    /// when the view has just started; higher when the StartView answers a
    /// later RequestStartView), followed by `history_start_count`
    /// [`HistoryStartRecord`]s: the starts of the history the view's logs
    /// follow, ascending by view, the view's own start last. A replica that
    /// adopts the view finds there where its cursor event log leaves that
    /// history.
    StartViewHeader => Command::StartView;
    /// The primary's highest op.
    op: U64,
    /// The primary's commit number.
    commit: U64,
    /// The cursor event tail the view started with.
    cursor_tail: U64,
    /// The nonce of the RequestStartView this answers (0 when broadcast).
    nonce: U64,
    /// The op the view started with.
    start_op: U64,
    /// History starts after the headers in the body, at most
    /// [`START_VIEW_HISTORY_STARTS_MAX`]; at least 1 past view 0.
    history_start_count: u8,
    /// The record offset end the view started with, plus one; 0: not
    /// recorded. Read and written through
    /// [`StartViewHeader::start_offset_end`]; the older starts of the body
    /// carry none.
    start_offset_end_encoded: U64,
    /// The checksum of the prepare the view started on, plus one; 0: not
    /// recorded. Read and written through [`StartViewHeader::start_checksum`].
    start_checksum_encoded: U64,
}

impl StartViewHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        ensure(self.commit.get() <= self.op.get(), "commit > op")?;
        ensure(self.start_op.get() <= self.op.get(), "start_op > op")?;
        ensure(
            checksum_in_range(self.start_checksum_encoded.get()),
            "start checksum out of range",
        )?;
        let count = usize::from(self.history_start_count);
        ensure(
            count <= START_VIEW_HISTORY_STARTS_MAX,
            "too many history starts",
        )?;
        ensure(
            count > 0 || self.prefix.view_id() == ViewId::ZERO,
            "start-view without its history start",
        )
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        let (headers, starts) = self.split_body(body)?;
        let count = check_header_suffix(headers, DVC_SUFFIX_HEADERS_MAX, self.op.get())?;
        if self.op.get() > 0 {
            ensure(count > 0, "start-view without its head header")?;
            let head = &headers[(count - 1) * HEADER_SIZE..][..HEADER_SIZE];
            let head = <crate::headers::PrepareHeader as zerocopy::FromBytes>::ref_from_bytes(head)
                .map_err(|_| FieldError::Invalid("head header unreadable"))?;
            ensure(
                head.op.get() == self.op.get(),
                "start-view suffix does not end at op",
            )?;
        }
        self.check_starts(starts)
    }

    /// The history starts: ascending by view, none after this view, and
    /// the last one this view's own (when the view is not view 0).
    fn check_starts(&self, starts: &[HistoryStartRecord]) -> Result<(), FieldError> {
        for start in starts {
            start.check()?;
        }
        let ascending = starts
            .windows(2)
            .all(|pair| pair[0].view_id() < pair[1].view_id());
        ensure(ascending, "history starts do not ascend by view")?;
        let Some(last) = starts.last() else {
            return Ok(());
        };
        let view = self.prefix.view_id();
        ensure(last.view_id() <= view, "history start after the view")?;
        if view != ViewId::ZERO {
            ensure(last.view_id() == view, "start-view without its own start")?;
            ensure(
                last.cursor_tail.get() == self.cursor_tail.get()
                    && last.replica == self.prefix.replica,
                "the view's start differs from the header's",
            )?;
        }
        Ok(())
    }

    /// The body's two parts: the prepare headers and the history starts.
    fn split_body<'a>(
        &self,
        body: &'a [u8],
    ) -> Result<(&'a [u8], &'a [HistoryStartRecord]), FieldError> {
        let starts_len = usize::from(self.history_start_count) * HISTORY_START_RECORD_SIZE;
        ensure(
            body.len() >= starts_len,
            "body shorter than its history starts",
        )?;
        let (headers, starts) = body.split_at(body.len() - starts_len);
        let starts = <[HistoryStartRecord] as zerocopy::FromBytes>::ref_from_bytes(starts)
            .map_err(|_| FieldError::Invalid("history starts unreadable"))?;
        Ok((headers, starts))
    }

    /// One past the last record offset of the op the view started with
    /// (`None`: not recorded): the record offset of the view's own history
    /// start.
    pub fn start_offset_end(&self) -> Option<u64> {
        decode_offset_end(self.start_offset_end_encoded.get())
    }

    /// Sets [`StartViewHeader::start_offset_end`].
    pub fn set_start_offset_end(&mut self, offset_end: Option<u64>) {
        self.start_offset_end_encoded
            .set(encode_offset_end(offset_end));
    }

    /// The checksum of the prepare the view started on (`None`: not
    /// recorded): the head checksum of the view's own history start.
    pub fn start_checksum(&self) -> Option<u32> {
        decode_checksum(self.start_checksum_encoded.get())
    }

    /// Sets [`StartViewHeader::start_checksum`].
    pub fn set_start_checksum(&mut self, checksum: Option<u32>) {
        self.start_checksum_encoded.set(encode_checksum(checksum));
    }

    /// A checked StartView body's prepare headers and history starts.
    pub fn parts<'a>(
        &self,
        body: &'a [u8],
    ) -> Result<
        (
            &'a [crate::headers::PrepareHeader],
            &'a [HistoryStartRecord],
        ),
        FieldError,
    > {
        let (headers, starts) = self.split_body(body)?;
        Ok((crate::headers::prepare_headers(headers)?, starts))
    }
}

command_header! {
    /// A replica that restarted, or fell behind a view change, asks the primary
    /// of `prefix.view` for a StartView.
    RequestStartViewHeader => Command::RequestStartView;
    /// Echoed in the StartView so a stale answer is recognised.
    nonce: U64,
}

impl RequestStartViewHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        ensure(self.nonce.get() != 0, "nonce is zero")
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        ensure(body.is_empty(), "request-start-view has a body")
    }
}
