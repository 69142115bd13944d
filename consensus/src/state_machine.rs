//! What a committed op does: the application behind the log.
//!
//! Partitions need nothing but the header (a produce's offsets were assigned
//! when it was prepared); the metadata plane applies bodies. Either way the
//! result becomes the client's reply and is kept in the client table.

use bytes::Bytes;
use strand_wire::ops::ProduceReply;
use strand_wire::{Body, Operation, PrepareHeader, ResultCode};

/// The application a group's log drives.
pub trait StateMachine {
    /// Applies committed op `header.op` (called once per op, in op order, on
    /// every replica) and returns the client's reply.
    fn commit(&mut self, header: &PrepareHeader, body: Option<&Bytes>) -> (ResultCode, Bytes);

    /// Whether `commit` needs bodies; if not, backups drop them once written.
    fn needs_bodies(&self) -> bool {
        false
    }

    /// The log was replaced up to `head` (opened from disk, or installed by
    /// a state transfer; `None`: nothing applied): everything up to it counts
    /// as applied.
    fn restore(&mut self, head: Option<&PrepareHeader>) {
        let _ = head;
    }

    /// The log was opened with nothing readable at or below its commit but
    /// the ops retention dropped, which end at record offset `offset_end`:
    /// everything before it counts as applied.
    fn restore_retained(&mut self, offset_end: u64) {
        let _ = offset_end;
    }
}

/// A partition's record log: offsets come from the prepare, so committing is
/// publishing `offset_end` to readers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordLog {
    /// One past the last committed record offset (the high watermark).
    pub offset_end: u64,
}

/// The reply a committed prepare gives when only its header is at hand.
pub fn reply_from_header(header: &PrepareHeader) -> (ResultCode, Bytes) {
    match header.operation() {
        Operation::Produce => {
            let reply = ProduceReply {
                offset_base: header.offset_base.get(),
                record_count: header.record_count.get(),
            };
            (ResultCode::Ok, Bytes::from(reply.to_vec()))
        }
        _ => (ResultCode::Ok, Bytes::new()),
    }
}

impl StateMachine for RecordLog {
    fn restore(&mut self, head: Option<&PrepareHeader>) {
        self.offset_end = head.map_or(0, PrepareHeader::offset_end);
    }

    fn restore_retained(&mut self, offset_end: u64) {
        self.offset_end = offset_end;
    }

    fn commit(&mut self, header: &PrepareHeader, _body: Option<&Bytes>) -> (ResultCode, Bytes) {
        if header.operation() == Operation::Produce {
            assert_eq!(
                header.offset_base.get(),
                self.offset_end,
                "record offsets are contiguous"
            );
            self.offset_end = header.offset_end();
        }
        reply_from_header(header)
    }
}
