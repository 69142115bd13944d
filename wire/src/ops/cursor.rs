//! Consumer cursors: store, get, and the cursor events primaries ship to backups.

use crate::codec::{Body, BodyReader, BodyWriter};
use crate::error::BodyError;
use crate::ops::ConsumerGroupFence;

/// Store `consumer`'s cursor on the partition: the next offset it will read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreCursor {
    /// The consumer's name (a consumer group's name for its offsets).
    pub consumer: String,
    /// The next offset the consumer will read.
    pub offset: u64,
    /// Set when a consumer group's member stores the group's cursor: the
    /// store is refused unless the member owns the partition in that
    /// generation. Encoded after the offset only when set, so bodies
    /// without it read as before.
    pub fence: Option<ConsumerGroupFence>,
}

impl Body for StoreCursor {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.consumer);
        writer.u64(self.offset);
        if let Some(fence) = &self.fence {
            writer.u8(1);
            fence.encode(writer);
        }
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<StoreCursor, BodyError> {
        let consumer = reader.name("consumer")?;
        let offset = reader.u64("offset")?;
        let fence = match reader.remaining() {
            0 => None,
            _ => match reader.u8("fence")? {
                1 => Some(ConsumerGroupFence::decode(reader)?),
                other => {
                    return Err(BodyError::UnknownValue {
                        field: "fence",
                        value: u64::from(other),
                    });
                }
            },
        };
        Ok(StoreCursor {
            consumer,
            offset,
            fence,
        })
    }
}

/// Delete `consumer`'s cursor on the partition: a later `GetCursor` finds
/// none, and the name no longer counts toward the partition's bound on
/// consumer names. Deleting a cursor that does not exist succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteCursor {
    /// The consumer's name.
    pub consumer: String,
}

impl Body for DeleteCursor {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.consumer);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<DeleteCursor, BodyError> {
        Ok(DeleteCursor {
            consumer: reader.name("consumer")?,
        })
    }
}

/// Read `consumer`'s stored cursor on the partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetCursor {
    /// The consumer's name.
    pub consumer: String,
}

impl Body for GetCursor {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.consumer);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<GetCursor, BodyError> {
        Ok(GetCursor {
            consumer: reader.name("consumer")?,
        })
    }
}

/// The stored cursor, if the consumer has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetCursorReply {
    /// The next offset the consumer will read, or `None` if it never stored one.
    pub offset: Option<u64>,
}

impl Body for GetCursorReply {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.option_u64(self.offset);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<GetCursorReply, BodyError> {
        Ok(GetCursorReply {
            offset: reader.option_u64("offset")?,
        })
    }
}

/// The offset a cursor event carries when it deletes its consumer's
/// cursor (a tombstone). No cursor can hold it: a stored cursor is at most
/// the partition's high watermark, and record offsets end far below. Kept
/// in the offset field so that cursor logs, snapshots and `Cursors` frames
/// written before deletes existed read the same.
pub const CURSOR_TOMBSTONE_OFFSET: u64 = u64::MAX;

/// One entry of a partition's cursor event log: a store, or a delete (a
/// tombstone, see [`CursorEvent::tombstone`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorEvent {
    /// The consumer's name.
    pub consumer: String,
    /// The cursor it stored ([`CURSOR_TOMBSTONE_OFFSET`]: it was deleted).
    pub offset: u64,
}

impl CursorEvent {
    /// The event that deletes `consumer`'s cursor.
    pub fn tombstone(consumer: String) -> CursorEvent {
        CursorEvent {
            consumer,
            offset: CURSOR_TOMBSTONE_OFFSET,
        }
    }

    /// Whether this event deletes its consumer's cursor.
    pub fn is_tombstone(&self) -> bool {
        self.offset == CURSOR_TOMBSTONE_OFFSET
    }

    /// Bytes the event takes in a [`CursorEvents`] body.
    pub fn encoded_bytes(&self) -> usize {
        2 + self.consumer.len() + 8
    }
}

/// The body of a `Cursors` frame: consecutive cursor events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorEvents {
    /// The events, in cursor log order.
    pub events: Vec<CursorEvent>,
}

impl Body for CursorEvents {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.list(&self.events, |writer, event| {
            writer.str(&event.consumer);
            writer.u64(event.offset);
        });
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<CursorEvents, BodyError> {
        let events = reader.list("cursor events", 2 + 1 + 8, |reader| {
            Ok(CursorEvent {
                consumer: reader.name("consumer")?,
                offset: reader.u64("offset")?,
            })
        })?;
        Ok(CursorEvents { events })
    }
}
