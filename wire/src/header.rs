//! The 256-byte header every frame starts with: the shared prefix, the
//! `CommandHeader` trait, and the macro that lays out one typed header per command.
//!
//! Layout rules (pinned by compile-time assertions):
//! - every header is exactly [`HEADER_SIZE`] bytes, `#[repr(C)]`, made of
//!   little-endian, unaligned fields, so any byte buffer can be viewed as a
//!   header without copying or alignment concerns;
//! - bytes `0..64` are the [`HeaderPrefix`], identical for every command;
//! - bytes `64..256` are the command's fields, ending in `reserved` bytes that
//!   must be zero.

use core::fmt::Debug;

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::checksum::{checksum, checksum_parts};
use crate::command::Command;
use crate::error::FrameError;

/// Size of every header, in bytes.
pub const HEADER_SIZE: usize = 256;
/// Size of the prefix shared by every header, in bytes.
pub const PREFIX_SIZE: usize = 64;
/// The protocol version this build speaks; frames of any other version are refused.
pub const PROTOCOL_VERSION: u16 = 1;
/// Replica indexes are below this bound (`replica < REPLICAS_MAX`).
pub const REPLICAS_MAX: u8 = 16;

/// The first 64 bytes of every header.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct HeaderPrefix {
    /// crc32c over header bytes `4..256` (everything after this field).
    pub checksum: U32,
    /// crc32c over the body.
    pub checksum_body: U32,
    /// Cluster id: frames from another cluster are dropped.
    pub cluster: U64,
    /// Frame size: header plus body, in bytes.
    pub size: U32,
    /// The sender's view (for a prepare: the view it was prepared in).
    pub view: U32,
    /// The VSR group (partition, or 0 for the metadata plane) the frame belongs to.
    pub group: U64,
    /// The [`Command`] byte.
    pub command: u8,
    /// The sender's replica index in the group (for a prepare: its primary).
    pub replica: u8,
    /// [`PROTOCOL_VERSION`] of the sender.
    pub protocol: U16,
    /// The group's assignment epoch (replica set and confirm policy generation).
    pub epoch: U32,
    /// Zero.
    pub reserved: [u8; 24],
}

const _: () = {
    assert!(size_of::<HeaderPrefix>() == PREFIX_SIZE);
    assert!(core::mem::offset_of!(HeaderPrefix, checksum) == 0);
    assert!(core::mem::offset_of!(HeaderPrefix, checksum_body) == 4);
    assert!(core::mem::offset_of!(HeaderPrefix, cluster) == 8);
    assert!(core::mem::offset_of!(HeaderPrefix, size) == 16);
    assert!(core::mem::offset_of!(HeaderPrefix, view) == 20);
    assert!(core::mem::offset_of!(HeaderPrefix, group) == 24);
    assert!(core::mem::offset_of!(HeaderPrefix, command) == 32);
    assert!(core::mem::offset_of!(HeaderPrefix, replica) == 33);
    assert!(core::mem::offset_of!(HeaderPrefix, protocol) == 34);
    assert!(core::mem::offset_of!(HeaderPrefix, epoch) == 36);
};

impl HeaderPrefix {
    /// The frame size as a `usize`.
    pub fn frame_size(&self) -> usize {
        self.size.get() as usize
    }

    /// The sender's view with the assignment epoch it belongs to.
    pub fn view_id(&self) -> ViewId {
        ViewId::new(self.epoch.get(), self.view.get())
    }

    /// Sets both halves of the sender's view.
    pub fn set_view_id(&mut self, view: ViewId) {
        self.epoch.set(view.epoch);
        self.view.set(view.view);
    }
}

/// A view of a group, named by the assignment epoch it belongs to and its
/// number within the group's history; ordered epoch first.
///
/// The epoch names the membership (replica set and confirm policy) that picks
/// the view's primary and its view-change quorum. Ordering by epoch first
/// fences every view of an old assignment below every view of a newer one,
/// whatever their numbers: replicas that have not learned of a new epoch may
/// go on changing views in the old one, and none of those views may win a
/// later merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ViewId {
    /// The assignment epoch (compared first).
    pub epoch: u32,
    /// The view number.
    pub view: u32,
}

impl ViewId {
    /// The first view of a group created at epoch 0.
    pub const ZERO: ViewId = ViewId { epoch: 0, view: 0 };

    /// The view `view` of epoch `epoch`.
    pub const fn new(epoch: u32, view: u32) -> ViewId {
        ViewId { epoch, view }
    }

    /// Epoch and view in one number that orders the same way (the epoch in
    /// the high half): for traces, metrics and logs.
    pub fn packed(self) -> u64 {
        u64::from(self.epoch) << 32 | u64::from(self.view)
    }

    /// The next view of the same epoch.
    pub fn next(self) -> ViewId {
        ViewId::new(
            self.epoch,
            self.view.checked_add(1).expect("view numbers exhausted"),
        )
    }
}

impl core::fmt::Display for ViewId {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(formatter, "{}.{}", self.epoch, self.view)
    }
}

/// Why the command-specific fields of a header are invalid; turned into a
/// [`FrameError`] carrying the command by [`CommandHeader::validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldError {
    /// A field breaks a protocol invariant.
    Invalid(&'static str),
    /// A flags field has unknown bits.
    UnknownFlags {
        /// Field name.
        field: &'static str,
        /// The unknown bits.
        bits: u64,
    },
}

/// Checks one invariant of a header's fields.
pub(crate) fn ensure(condition: bool, reason: &'static str) -> Result<(), FieldError> {
    if condition {
        Ok(())
    } else {
        Err(FieldError::Invalid(reason))
    }
}

/// A typed 256-byte header for one [`Command`].
///
/// Implemented by the `command_header!` macro for the layout and by hand for
/// the command's own rules (`check_fields`, `check_body`).
pub trait CommandHeader:
    Copy + Debug + PartialEq + Eq + FromBytes + IntoBytes + KnownLayout + Immutable + Unaligned
{
    /// The command this header is for.
    const COMMAND: Command;

    /// The shared prefix.
    fn prefix(&self) -> &HeaderPrefix;
    /// The shared prefix, for filling it in.
    fn prefix_mut(&mut self) -> &mut HeaderPrefix;
    /// The trailing reserved bytes, which must be zero.
    fn reserved(&self) -> &[u8];
    /// Command-specific invariants of the header fields alone.
    fn check_fields(&self) -> Result<(), FieldError>;
    /// Command-specific rules about the body (shape, count, embedded headers).
    fn check_body(&self, body: &[u8]) -> Result<(), FieldError>;

    /// A zeroed header for this command, addressed to `group` in `cluster`.
    fn new(cluster: u64, group: u64, view: ViewId, replica: u8) -> Self {
        let mut header = Self::new_zeroed();
        let prefix = header.prefix_mut();
        prefix.cluster.set(cluster);
        prefix.group.set(group);
        prefix.set_view_id(view);
        prefix.replica = replica;
        prefix.command = Self::COMMAND as u8;
        prefix.protocol.set(PROTOCOL_VERSION);
        header
    }

    /// The header checksum as stored.
    fn checksum(&self) -> u32 {
        self.prefix().checksum.get()
    }

    /// Computes the header checksum over bytes `4..256`.
    fn calculate_checksum(&self) -> u32 {
        checksum(&self.as_bytes()[4..])
    }

    /// Fills in command, protocol, size and both checksums for a body made of
    /// `body_parts` (concatenated). After this the header is ready to send.
    fn seal(&mut self, body_parts: &[&[u8]]) {
        let body_size: usize = body_parts.iter().map(|part| part.len()).sum();
        self.seal_known_body(body_size, checksum_parts(body_parts));
    }

    /// [`CommandHeader::seal`] for a body whose size and checksum are known
    /// (it came in a frame already checked): nothing is read of the body.
    fn seal_known_body(&mut self, body_size: usize, checksum_body: u32) {
        let size = u32::try_from(HEADER_SIZE + body_size).expect("frame size fits in u32");
        let prefix = self.prefix_mut();
        prefix.command = Self::COMMAND as u8;
        prefix.protocol.set(PROTOCOL_VERSION);
        prefix.size.set(size);
        prefix.checksum_body.set(checksum_body);
        let header_checksum = self.calculate_checksum();
        self.prefix_mut().checksum.set(header_checksum);
    }

    /// Checks the header alone: checksum, prefix, reserved bytes, field invariants.
    /// Used for headers embedded in bodies (a view change's log suffix), whose
    /// bodies are not at hand.
    fn validate_header(&self) -> Result<(), FrameError> {
        let actual = self.calculate_checksum();
        if actual != self.checksum() {
            return Err(FrameError::HeaderChecksum {
                expected: self.checksum(),
                actual,
            });
        }
        self.validate_fields()
    }

    /// Checks the header and the body it was sent with, including the body
    /// checksum and the size field.
    fn validate(&self, body: &[u8]) -> Result<(), FrameError> {
        self.validate_header()?;
        self.validate_body(body)
    }

    /// Everything [`CommandHeader::validate_header`] checks except the header
    /// checksum, for callers that have just verified it.
    fn validate_fields(&self) -> Result<(), FrameError> {
        validate_prefix(self.prefix(), Some(Self::COMMAND))?;
        if self.prefix().frame_size() < HEADER_SIZE {
            return Err(FrameError::BadSize {
                size: self.prefix().size.get(),
                reason: "smaller than a header",
            });
        }
        if !is_zero(self.reserved()) {
            return Err(FrameError::ReservedNotZero {
                command: Self::COMMAND,
            });
        }
        self.check_fields()
            .map_err(|error| field_error(Self::COMMAND, error))
    }

    /// Checks the body against the header: size, body checksum, the command's
    /// body rules. The header itself must already be valid.
    fn validate_body(&self, body: &[u8]) -> Result<(), FrameError> {
        let size = self.prefix().size.get();
        if self.prefix().frame_size() != HEADER_SIZE + body.len() {
            return Err(FrameError::BadSize {
                size,
                reason: "does not match the bytes given",
            });
        }
        let actual = checksum(body);
        let expected = self.prefix().checksum_body.get();
        if actual != expected {
            return Err(FrameError::BodyChecksum { expected, actual });
        }
        self.check_body(body)
            .map_err(|error| field_error(Self::COMMAND, error))
    }
}

/// Checks the prefix fields every header shares (not the checksum).
/// `command`, when given, is the command the caller expects.
pub(crate) fn validate_prefix(
    prefix: &HeaderPrefix,
    command: Option<Command>,
) -> Result<Command, FrameError> {
    let version = prefix.protocol.get();
    if version != PROTOCOL_VERSION {
        return Err(FrameError::UnsupportedProtocol {
            version,
            supported: PROTOCOL_VERSION,
        });
    }
    let parsed = Command::from_u8(prefix.command).ok_or(FrameError::UnknownCommand {
        command: prefix.command,
    })?;
    if let Some(expected) = command {
        if parsed != expected {
            return Err(FrameError::Invalid {
                command: parsed,
                reason: "unexpected command",
            });
        }
    }
    if !is_zero(&prefix.reserved) {
        return Err(FrameError::ReservedNotZero { command: parsed });
    }
    if prefix.replica >= REPLICAS_MAX {
        return Err(FrameError::Invalid {
            command: parsed,
            reason: "replica index out of range",
        });
    }
    Ok(parsed)
}

fn field_error(command: Command, error: FieldError) -> FrameError {
    match error {
        FieldError::Invalid(reason) => FrameError::Invalid { command, reason },
        FieldError::UnknownFlags { field, bits } => FrameError::UnknownFlags {
            command,
            field,
            bits,
        },
    }
}

/// True when every byte is zero.
pub(crate) fn is_zero(bytes: &[u8]) -> bool {
    // A fold (not `all`) so the compiler can vectorise it.
    bytes.iter().fold(0u8, |acc, byte| acc | byte) == 0
}

/// Lays out one typed header: the prefix, the given fields, then `reserved`
/// bytes filling the header to [`HEADER_SIZE`]; asserts the size at compile time.
macro_rules! command_header {
    (
        $(#[$meta:meta])*
        $name:ident => $command:expr;
        $( $(#[$field_meta:meta])* $field:ident : $ty:ty ),* $(,)?
    ) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq,
            zerocopy::FromBytes, zerocopy::IntoBytes, zerocopy::KnownLayout,
            zerocopy::Immutable, zerocopy::Unaligned,
        )]
        #[repr(C)]
        pub struct $name {
            /// The fields every header shares.
            pub prefix: $crate::header::HeaderPrefix,
            $( $(#[$field_meta])* pub $field: $ty, )*
            /// Zero; room for later fields.
            pub reserved:
                [u8; $crate::header::HEADER_SIZE - $crate::header::PREFIX_SIZE $(- size_of::<$ty>())*],
        }

        const _: () = assert!(size_of::<$name>() == $crate::header::HEADER_SIZE);

        impl $crate::header::CommandHeader for $name {
            const COMMAND: $crate::command::Command = $command;

            fn prefix(&self) -> &$crate::header::HeaderPrefix {
                &self.prefix
            }

            fn prefix_mut(&mut self) -> &mut $crate::header::HeaderPrefix {
                &mut self.prefix
            }

            fn reserved(&self) -> &[u8] {
                &self.reserved
            }

            fn check_fields(&self) -> Result<(), $crate::header::FieldError> {
                $name::check_fields(self)
            }

            fn check_body(&self, body: &[u8]) -> Result<(), $crate::header::FieldError> {
                $name::check_body(self, body)
            }
        }
    };
}

pub(crate) use command_header;
