//! One typed header per command, grouped by the part of the protocol that uses it.

mod bus;
mod client;
mod repair;
mod replication;
mod view_change;

pub use bus::{PING_UNVOUCHED_GROUPS_MAX, PingHeader, PongHeader, ping_body, ping_groups};
pub use client::{ReplyHeader, RequestHeader};
pub use repair::{
    HEADERS_PER_MESSAGE_MAX, HeadersHeader, LogStartHeader, RequestHeadersHeader,
    RequestPrepareHeader, RequestStateTransferHeader, STATE_TRANSFER_CHUNK_SIZE_MAX,
    StateTransferChunkHeader,
};
pub use replication::{
    CommitFlags, CommitHeader, CursorsHeader, PrepareHeader, PrepareOkFlags, PrepareOkHeader,
};
pub use view_change::{
    DVC_SUFFIX_HEADERS_MAX, DoViewChangeFlags, DoViewChangeHeader, FLAG_UNTRUSTED_LOG,
    HISTORY_START_RECORD_SIZE, HistoryStartFlags, HistoryStartRecord, RequestStartViewHeader,
    START_VIEW_HISTORY_STARTS_MAX, StartViewChangeHeader, StartViewHeader,
};

use crate::header::{CommandHeader, FieldError, HEADER_SIZE, ensure};

/// Views a body as a run of prepare headers, checking each one (checksum,
/// prefix, fields) and that their ops strictly ascend and are at most `op_max`.
///
/// Used for the log suffixes in DoViewChange, StartView and Headers: a peer
/// that sends a malformed or forged header is caught here, before consensus
/// looks at it.
pub fn prepare_headers(body: &[u8]) -> Result<&[PrepareHeader], FieldError> {
    ensure(
        body.len() % HEADER_SIZE == 0,
        "body is not a whole number of headers",
    )?;
    let headers = <[PrepareHeader] as zerocopy::FromBytes>::ref_from_bytes(body)
        .map_err(|_| FieldError::Invalid("body is not a whole number of headers"))?;
    for header in headers {
        header
            .validate_header()
            .map_err(|_| FieldError::Invalid("embedded prepare header is invalid"))?;
    }
    let ascending = headers
        .windows(2)
        .all(|pair| pair[0].op.get() < pair[1].op.get());
    ensure(ascending, "embedded prepare headers do not ascend by op")?;
    Ok(headers)
}

/// Checks a body of prepare headers: at most `count_max`, none above `op_max`.
pub(crate) fn check_header_suffix(
    body: &[u8],
    count_max: usize,
    op_max: u64,
) -> Result<usize, FieldError> {
    let headers = prepare_headers(body)?;
    ensure(headers.len() <= count_max, "too many embedded headers")?;
    let highest = headers.last().map_or(0, |header| header.op.get());
    ensure(highest <= op_max, "embedded header above the log's op")?;
    Ok(headers.len())
}
