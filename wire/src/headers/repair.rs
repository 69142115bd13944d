//! Repair and state transfer: fetching what a replica lacks from its peers.

use zerocopy::little_endian::{U32, U64};

use crate::command::Command;
use crate::header::{FieldError, command_header, ensure};
use crate::headers::check_header_suffix;

/// Most prepare headers one RequestHeaders may ask for, and one Headers carries.
pub const HEADERS_PER_MESSAGE_MAX: usize = 128;

/// Largest body of one state-transfer chunk, in bytes.
pub const STATE_TRANSFER_CHUNK_SIZE_MAX: usize = 1024 * 1024;

command_header! {
    /// Ask a peer for the prepare at `op` whose checksum is `prepare_checksum`
    /// (0: whichever prepare the peer has committed at `op`).
    RequestPrepareHeader => Command::RequestPrepare;
    /// Checksum of the wanted prepare, or 0.
    prepare_checksum: U32,
    /// The wanted op.
    op: U64,
}

impl RequestPrepareHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        ensure(self.op.get() >= 1, "op is zero")
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        ensure(body.is_empty(), "request-prepare has a body")
    }
}

command_header! {
    /// Ask a peer for its prepare headers with ops in `op_min..=op_max`.
    RequestHeadersHeader => Command::RequestHeaders;
    /// Lowest op wanted.
    op_min: U64,
    /// Highest op wanted.
    op_max: U64,
}

impl RequestHeadersHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        let (op_min, op_max) = (self.op_min.get(), self.op_max.get());
        ensure(op_min >= 1, "op_min is zero")?;
        ensure(op_min <= op_max, "op_min > op_max")?;
        ensure(
            op_max - op_min < HEADERS_PER_MESSAGE_MAX as u64,
            "range too long",
        )
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        ensure(body.is_empty(), "request-headers has a body")
    }
}

command_header! {
    /// Prepare headers answering a RequestHeaders (ascending op; the body).
    HeadersHeader => Command::Headers;
}

impl HeadersHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        Ok(())
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        check_header_suffix(body, HEADERS_PER_MESSAGE_MAX, u64::MAX).map(|_| ())
    }
}

command_header! {
    /// Ask a peer for chunk `chunk` of its export of the group at the frontier
    /// `(frontier_op, frontier_offset)`.
    RequestStateTransferHeader => Command::RequestStateTransfer;
    /// The op the export is taken at. For chunk 0 (the manifest), 0 asks
    /// for an export at the peer's commit; for later chunks it is the
    /// manifest's frontier (0 for an empty export: nothing had committed).
    frontier_op: U64,
    /// The record offset the export ends at (exclusive).
    frontier_offset: U64,
    /// The chunk wanted, counting from 0.
    chunk: U32,
}

impl RequestStateTransferHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        Ok(())
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        ensure(body.is_empty(), "request-state-transfer has a body")
    }
}

command_header! {
    /// One chunk of a state-transfer export; the body checksum is the chunk's.
    StateTransferChunkHeader => Command::StateTransferChunk;
    /// The op the export is taken at.
    frontier_op: U64,
    /// The record offset the export ends at (exclusive).
    frontier_offset: U64,
    /// This chunk's index.
    chunk: U32,
    /// How many chunks the export has.
    chunk_count: U32,
}

impl StateTransferChunkHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        ensure(
            self.chunk.get() < self.chunk_count.get(),
            "chunk index past chunk count",
        )
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        ensure(
            body.len() <= STATE_TRANSFER_CHUNK_SIZE_MAX,
            "chunk too large",
        )
    }
}

command_header! {
    /// The sender holds no op below `log_start_op` any more (retention
    /// dropped them, every one committed) and has committed through
    /// `commit`. Sent instead of silence to a replica that asked for headers
    /// or a prepare below it: that replica cannot be repaired op by op from
    /// here and catches up by state transfer.
    LogStartHeader => Command::LogStart;
    /// The first op the sender still holds.
    log_start_op: U64,
    /// The sender's commit number.
    commit: U64,
}

impl LogStartHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        let (start, commit) = (self.log_start_op.get(), self.commit.get());
        ensure(start >= 2, "a log start of 1 or 0 drops nothing")?;
        ensure(commit >= start - 1, "ops below the log start are committed")
    }

    fn check_body(&self, body: &[u8]) -> Result<(), FieldError> {
        ensure(body.is_empty(), "log-start has a body")
    }
}
