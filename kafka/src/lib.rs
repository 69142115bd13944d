//! # strand-kafka: Kafka's wire protocol, translated
//!
//! Sans-IO: bytes and Strand's operation bodies in, bytes out. The node's
//! Kafka listener (in `strand-server`) reads frames, hands them here, runs
//! the Strand operations they ask for, and writes the responses this crate
//! encodes. Nothing here trusts a length or a count before the bytes that
//! back it are there, and nothing inflates past a bound.
//!
//! | module | owns |
//! |---|---|
//! | [`codec`] | the primitive encodings (classic and flexible), read within bounds |
//! | [`api`] | the APIs and versions served; request and response headers and frames |
//! | [`api_versions`], [`metadata`], [`produce`], [`fetch`], [`list_offsets`], [`init_producer_id`], [`groups`], [`group_offsets`], [`admin`], [`sasl`] | one API each: its request decoded, its response encoded |
//! | [`records`] | Kafka record batches (v2) ↔ Strand record batches, decompression within bounds |
//! | [`names`] | Kafka's flat topic names ↔ Strand's `stream/topic` |
//! | [`errors`] | Kafka's error codes, and the one each Strand result becomes |
//! | [`error`] | `DecodeError` |

pub mod admin;
pub mod api;
pub mod api_versions;
pub mod codec;
pub mod error;
pub mod errors;
pub mod fetch;
pub mod group_offsets;
pub mod groups;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod names;
pub mod produce;
pub mod records;
pub mod sasl;

pub use error::DecodeError;
