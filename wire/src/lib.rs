//! # strand-wire: every byte that crosses a Strand socket
//!
//! A frame is a 256-byte header followed by a body. The header starts with a
//! 64-byte prefix every command shares (checksums, cluster, size, view, group,
//! command, replica, protocol version, epoch), then the command's own fields.
//! Bodies are record batches, prepare-header suffixes, or client operation bodies.
//!
//! Modules, in reading order:
//!
//! | module | owns |
//! |---|---|
//! | [`checksum`] | crc32c over headers and bodies |
//! | [`command`] | the command byte |
//! | [`header`] | the 256-byte layout, the shared prefix, sealing and validating |
//! | [`headers`] | one typed header per command and its invariants |
//! | [`message`] | whole frames: `Msg<H>`, `Message`, the frame decoders |
//! | [`operation`] | client operations and result codes |
//! | [`operation_table`] | one row per operation: route, right needed, node-only, cluster-admin, audited, replicated, offsets taken |
//! | [`policy`] | durability and confirm policies |
//! | [`codec`] | the body codec and naming rules |
//! | [`ops`] | client operation bodies and replies |
//! | [`batch`] | record batches (zero-copy reads) |
//! | [`sequenced`] | sequenced clients: produces numbered by record (Kafka's idempotent producers) |
//! | [`error`] | `FrameError`, `BodyError` |
//!
//! Invariants that matter most:
//! - Decoding never panics and never trusts a field before the checksum that
//!   covers it has matched; every fault is a typed error.
//! - A `Msg<H>` is always sealed and valid: built by `Msg::new` (which asserts)
//!   or by a decoder (which checks). Holders never re-validate.

pub mod batch;
pub mod checksum;
pub mod codec;
pub mod command;
pub mod error;
pub mod header;
pub mod headers;
pub mod message;
pub mod operation;
pub mod operation_table;
pub mod ops;
pub mod policy;
pub mod sequenced;

pub use batch::{BatchBuilder, BatchHeader, Record, RecordBatch};
pub use codec::Body;
pub use command::Command;
pub use error::{BodyError, FrameError};
pub use header::{
    CommandHeader, HEADER_SIZE, HeaderPrefix, PROTOCOL_VERSION, REPLICAS_MAX, ViewId,
};
pub use headers::*;
pub use message::{FRAME_SIZE_MAX_DEFAULT, FrameDecoder, Message, Msg};
pub use operation::{Operation, ResultCode};
pub use operation_table::{OffsetsTaken, OperationInfo, RightNeeded, Route};
pub use policy::{ConfirmPolicy, Durability};
