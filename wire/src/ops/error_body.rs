//! The body of every reply whose result code is not `Ok`: what went wrong and
//! what the client should do about it.

use crate::codec::{BodyReader, BodyWriter};
use crate::error::BodyError;
use crate::operation::ResultCode;

/// An error reply body; each variant belongs to one result code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorBody {
    /// Retry at the primary: it is replica `primary_replica` (node `primary_node`,
    /// client address `address`, empty if unknown) as of `view`.
    NotPrimary {
        /// The view this replica knows.
        view: u32,
        /// The primary's replica index in the group.
        primary_replica: u8,
        /// The primary's node id.
        primary_node: u32,
        /// The primary's client address (`host:port`), or empty if unknown.
        address: String,
    },
    /// The pipeline is full; retry after `retry_after_ms`, same request number.
    Busy {
        /// Suggested wait before retrying.
        retry_after_ms: u32,
    },
    /// The request (`size` bytes) is over the server's limit (`max` bytes).
    TooLarge {
        /// Size of the request.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The fetch offset is outside `[log_start_offset, high_watermark]`.
    OffsetOutOfRange {
        /// The offset asked for.
        requested: u64,
        /// Oldest retained offset.
        log_start_offset: u64,
        /// One past the last committed offset.
        high_watermark: u64,
    },
    /// The request number skips ahead of (or falls behind) what the group
    /// expects from this client: resend, in order, from `expected`.
    OutOfOrder {
        /// The request number the group takes next from this client.
        expected: u64,
    },
    /// Any other failure, with a message for humans.
    Message {
        /// The failure's result code (never `Ok` and never one of the codes above).
        code: ResultCode,
        /// What went wrong and what to do.
        message: String,
    },
}

impl ErrorBody {
    /// The result code a reply with this body carries.
    pub fn code(&self) -> ResultCode {
        match self {
            ErrorBody::NotPrimary { .. } => ResultCode::NotPrimary,
            ErrorBody::Busy { .. } => ResultCode::Busy,
            ErrorBody::TooLarge { .. } => ResultCode::TooLarge,
            ErrorBody::OffsetOutOfRange { .. } => ResultCode::OffsetOutOfRange,
            ErrorBody::OutOfOrder { .. } => ResultCode::OutOfOrder,
            ErrorBody::Message { code, .. } => *code,
        }
    }

    /// An error body with a message; `code` must not have a structured body.
    pub fn message(code: ResultCode, message: impl Into<String>) -> ErrorBody {
        assert!(
            !has_structured_body(code) && code != ResultCode::Ok,
            "{code:?} has its own body"
        );
        ErrorBody::Message {
            code,
            message: message.into(),
        }
    }

    /// Encodes the body.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut writer = BodyWriter::default();
        match self {
            ErrorBody::NotPrimary {
                view,
                primary_replica,
                primary_node,
                address,
            } => {
                writer.u32(*view);
                writer.u8(*primary_replica);
                writer.u32(*primary_node);
                writer.str(address);
            }
            ErrorBody::Busy { retry_after_ms } => writer.u32(*retry_after_ms),
            ErrorBody::TooLarge { size, max } => {
                writer.u64(*size);
                writer.u64(*max);
            }
            ErrorBody::OffsetOutOfRange {
                requested,
                log_start_offset,
                high_watermark,
            } => {
                writer.u64(*requested);
                writer.u64(*log_start_offset);
                writer.u64(*high_watermark);
            }
            ErrorBody::OutOfOrder { expected } => writer.u64(*expected),
            ErrorBody::Message { message, .. } => {
                let end = floor_char_boundary(message, usize::from(u16::MAX));
                writer.str(&message[..end]);
            }
        }
        writer.into_vec()
    }

    /// Decodes the body of a reply whose result code is `code`.
    pub fn from_bytes(code: ResultCode, bytes: &[u8]) -> Result<ErrorBody, BodyError> {
        let mut reader = BodyReader::new(bytes);
        let body = match code {
            ResultCode::Ok => {
                return Err(BodyError::Invalid {
                    field: "result",
                    reason: "Ok has no error body",
                });
            }
            ResultCode::NotPrimary => ErrorBody::NotPrimary {
                view: reader.u32("view")?,
                primary_replica: reader.u8("primary replica")?,
                primary_node: reader.u32("primary node")?,
                address: reader.str("address")?.to_owned(),
            },
            ResultCode::Busy => ErrorBody::Busy {
                retry_after_ms: reader.u32("retry after")?,
            },
            ResultCode::TooLarge => ErrorBody::TooLarge {
                size: reader.u64("size")?,
                max: reader.u64("max")?,
            },
            ResultCode::OffsetOutOfRange => ErrorBody::OffsetOutOfRange {
                requested: reader.u64("requested")?,
                log_start_offset: reader.u64("log start offset")?,
                high_watermark: reader.u64("high watermark")?,
            },
            ResultCode::OutOfOrder => ErrorBody::OutOfOrder {
                expected: reader.u64("expected")?,
            },
            code => ErrorBody::Message {
                code,
                message: reader.str("message")?.to_owned(),
            },
        };
        reader.finish()?;
        Ok(body)
    }
}

fn has_structured_body(code: ResultCode) -> bool {
    matches!(
        code,
        ResultCode::NotPrimary
            | ResultCode::Busy
            | ResultCode::TooLarge
            | ResultCode::OffsetOutOfRange
            | ResultCode::OutOfOrder
    )
}

fn floor_char_boundary(text: &str, limit: usize) -> usize {
    if text.len() <= limit {
        return text.len();
    }
    (0..=limit)
        .rev()
        .find(|index| text.is_char_boundary(*index))
        .unwrap_or(0)
}

impl core::fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ErrorBody::NotPrimary {
                view,
                primary_replica,
                address,
                ..
            } => write!(
                f,
                "not the primary: replica {primary_replica} is primary of view {view} at {address}"
            ),
            ErrorBody::Busy { retry_after_ms } => {
                write!(
                    f,
                    "busy: retry in {retry_after_ms} ms with the same request number"
                )
            }
            ErrorBody::TooLarge { size, max } => {
                write!(f, "request of {size} bytes exceeds the limit of {max}")
            }
            ErrorBody::OffsetOutOfRange {
                requested,
                log_start_offset,
                high_watermark,
            } => write!(
                f,
                "offset {requested} is outside the retained range {log_start_offset}..{high_watermark}"
            ),
            ErrorBody::OutOfOrder { expected } => {
                write!(
                    f,
                    "request out of order: resend, in order, from request {expected}"
                )
            }
            ErrorBody::Message { code, message } => write!(f, "{code:?}: {message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let body = ErrorBody::message(ResultCode::Internal, "é".repeat(40_000));
        let decoded = ErrorBody::from_bytes(ResultCode::Internal, &body.to_vec()).expect("valid");
        let ErrorBody::Message { message, .. } = decoded else {
            panic!("message body")
        };
        assert!(message.len() <= usize::from(u16::MAX));
        assert!(message.chars().all(|c| c == 'é'));
    }

    #[test]
    fn ok_has_no_error_body() {
        assert!(ErrorBody::from_bytes(ResultCode::Ok, &[]).is_err());
    }
}
