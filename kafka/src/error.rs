//! What can be wrong with bytes a Kafka client sent.

use thiserror::Error;

/// A Kafka request, or a record batch inside one, that does not decode.
/// Every fault of the input is one of these; none is a panic.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The bytes end before `field` does.
    #[error("truncated at {field}")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// `field` holds a value the protocol does not allow.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field being read.
        field: &'static str,
        /// Why its value is refused.
        reason: &'static str,
    },
    /// An API key this node does not serve.
    #[error("API key {0} is not served here")]
    UnknownApi(i16),
    /// A version of an API outside the range this node serves.
    #[error("API key {api_key} version {version} is not served here")]
    UnsupportedVersion {
        /// The API.
        api_key: i16,
        /// The version asked for.
        version: i16,
    },
    /// A compressed record set that inflates past what a request may hold.
    #[error("records inflate past {max} bytes")]
    TooLarge {
        /// The bound.
        max: usize,
    },
}

impl DecodeError {
    /// A value `field` may not take.
    pub fn invalid(field: &'static str, reason: &'static str) -> DecodeError {
        DecodeError::Invalid { field, reason }
    }
}
