//! Whole frames: a typed header plus its body, sealed for sending or validated
//! on receipt, and the decoders that turn bytes into them.
//!
//! Decoding order (each step a typed error, none a panic): enough bytes for a
//! header → header checksum → protocol version → command → size bounds →
//! enough bytes for the body → body checksum → the command's own rules.

use bytes::{Bytes, BytesMut};
use zerocopy::{FromBytes, IntoBytes};

use crate::checksum::checksum;
use crate::command::Command;
use crate::error::FrameError;
use crate::header::{CommandHeader, HEADER_SIZE, HeaderPrefix, validate_prefix};
use crate::headers::*;

/// Default largest frame a decoder accepts: 8 MiB, header included.
pub const FRAME_SIZE_MAX_DEFAULT: u32 = 8 * 1024 * 1024;

/// A frame with a typed header: sealed (checksums and size filled in) and valid.
///
/// Built by [`Msg::new`] for sending, or by decoding for receiving; either way
/// the header and body agree, so holders never re-check them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg<H> {
    header: H,
    body: Bytes,
}

impl<H: CommandHeader> Msg<H> {
    /// Seals `header` over `body`. Panics if the result is invalid: building an
    /// invalid frame is a bug in the caller, never input from a peer.
    pub fn new(mut header: H, body: Bytes) -> Msg<H> {
        header.seal(&[&body]);
        Msg::just_sealed(header, body)
    }

    /// Seals `header` over the body of `from`, a frame already sealed or
    /// validated, without reading the body again: its checksum is carried
    /// over. A primary turning a produce request into a prepare saves a pass
    /// over every batch this way. Panics, as [`Msg::new`] does, if the
    /// result is invalid.
    pub fn with_body_of<G: CommandHeader>(mut header: H, from: Msg<G>) -> Msg<H> {
        let (from_header, body) = from.into_parts();
        header.seal_known_body(body.len(), from_header.prefix().checksum_body.get());
        Msg::just_sealed(header, body)
    }

    /// A frame whose checksums were just filled in: checks everything else.
    /// Panics if it is invalid: building one is a bug in the caller, never
    /// input from a peer.
    fn just_sealed(header: H, body: Bytes) -> Msg<H> {
        let valid = header
            .validate_fields()
            .and_then(|()| header.check_body(&body).map_err(error_for::<H>));
        if let Err(error) = valid {
            panic!(
                "built an invalid {:?} frame: {error}; header: {header:?}",
                H::COMMAND
            );
        }
        debug_assert_eq!(header.validate(&body), Ok(()));
        Msg { header, body }
    }

    /// Validates a received header and body.
    pub fn from_parts(header: H, body: Bytes) -> Result<Msg<H>, FrameError> {
        header.validate(&body)?;
        Ok(Msg { header, body })
    }

    /// The typed header.
    pub fn header(&self) -> &H {
        &self.header
    }

    /// The body.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Header and body, taken apart.
    pub fn into_parts(self) -> (H, Bytes) {
        (self.header, self.body)
    }

    /// The header checksum: a prepare's identity in the hash chain.
    pub fn checksum(&self) -> u32 {
        self.header.checksum()
    }

    /// Header plus body, in bytes.
    pub fn frame_size(&self) -> usize {
        HEADER_SIZE + self.body.len()
    }

    /// The encoded header, for senders that write header and body as two
    /// slices (its checksum covers the body).
    pub fn header_bytes(&self) -> &[u8] {
        self.header.as_bytes()
    }

    /// Appends the encoded frame to `out`.
    pub fn encode_into(&self, out: &mut BytesMut) {
        out.reserve(self.frame_size());
        out.extend_from_slice(self.header.as_bytes());
        out.extend_from_slice(&self.body);
    }

    /// The encoded frame as one buffer (copies the body; senders that can
    /// should write header and body as two slices instead).
    pub fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.frame_size());
        self.encode_into(&mut out);
        out.freeze()
    }
}

fn error_for<H: CommandHeader>(error: crate::header::FieldError) -> FrameError {
    match error {
        crate::header::FieldError::Invalid(reason) => FrameError::Invalid {
            command: H::COMMAND,
            reason,
        },
        crate::header::FieldError::UnknownFlags { field, bits } => FrameError::UnknownFlags {
            command: H::COMMAND,
            field,
            bits,
        },
    }
}

macro_rules! messages {
    ($($variant:ident($header:ty)),* $(,)?) => {
        /// Any frame, decoded and validated, by command.
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[allow(missing_docs)]
        pub enum Message {
            $($variant(Msg<$header>),)*
        }

        $(
            impl From<Msg<$header>> for Message {
                fn from(msg: Msg<$header>) -> Message {
                    Message::$variant(msg)
                }
            }
        )*

        impl Message {
            /// The frame's command.
            pub fn command(&self) -> Command {
                match self {
                    $(Message::$variant(_) => <$header as CommandHeader>::COMMAND,)*
                }
            }

            /// The shared header prefix.
            pub fn prefix(&self) -> &HeaderPrefix {
                match self {
                    $(Message::$variant(msg) => msg.header().prefix(),)*
                }
            }

            /// The header's 256 bytes.
            pub fn header_bytes(&self) -> &[u8] {
                match self {
                    $(Message::$variant(msg) => msg.header().as_bytes(),)*
                }
            }

            /// The body.
            pub fn body(&self) -> &Bytes {
                match self {
                    $(Message::$variant(msg) => msg.body(),)*
                }
            }

            fn typed(command: Command, header: &[u8], body: Bytes) -> Result<Message, FrameError> {
                match command {
                    $(
                        Command::$variant => {
                            let header = <$header>::read_from_bytes(header)
                                .map_err(|_| FrameError::Truncated { needed: HEADER_SIZE, available: header.len() })?;
                            // check_header verified the header checksum already.
                            header.validate_fields()?;
                            header.validate_body(&body)?;
                            Ok(Message::$variant(Msg { header, body }))
                        }
                    )*
                }
            }
        }
    };
}

messages! {
    Ping(PingHeader),
    Pong(PongHeader),
    Request(RequestHeader),
    Reply(ReplyHeader),
    Prepare(PrepareHeader),
    PrepareOk(PrepareOkHeader),
    Commit(CommitHeader),
    StartViewChange(StartViewChangeHeader),
    DoViewChange(DoViewChangeHeader),
    StartView(StartViewHeader),
    RequestStartView(RequestStartViewHeader),
    RequestPrepare(RequestPrepareHeader),
    RequestHeaders(RequestHeadersHeader),
    Headers(HeadersHeader),
    RequestStateTransfer(RequestStateTransferHeader),
    StateTransferChunk(StateTransferChunkHeader),
    Cursors(CursorsHeader),
    LogStart(LogStartHeader),
}

impl Message {
    /// Decodes exactly one frame that fills `frame`. Missing bytes are
    /// [`FrameError::Truncated`]; extra bytes are [`FrameError::BadSize`].
    pub fn decode(frame: Bytes, frame_size_max: u32) -> Result<Message, FrameError> {
        let (command, size) = check_header(&frame, frame_size_max)?;
        if frame.len() < size {
            return Err(FrameError::Truncated {
                needed: size,
                available: frame.len(),
            });
        }
        if frame.len() > size {
            return Err(FrameError::BadSize {
                size: size as u32,
                reason: "bytes follow the frame",
            });
        }
        let body = frame.slice(HEADER_SIZE..size);
        Message::typed(command, &frame[..HEADER_SIZE], body)
    }

    /// Appends the encoded frame to `out`.
    pub fn encode_into(&self, out: &mut BytesMut) {
        out.reserve(HEADER_SIZE + self.body().len());
        out.extend_from_slice(self.header_bytes());
        out.extend_from_slice(self.body());
    }
}

/// Checks everything a header alone can tell, before its body has arrived:
/// returns the command and the frame size. Trusts the size field only after
/// the header checksum has matched.
pub fn check_header(bytes: &[u8], frame_size_max: u32) -> Result<(Command, usize), FrameError> {
    let Some(header) = bytes.get(..HEADER_SIZE) else {
        return Err(FrameError::Truncated {
            needed: HEADER_SIZE,
            available: bytes.len(),
        });
    };
    let (prefix, _) = HeaderPrefix::ref_from_prefix(header).map_err(|_| FrameError::Truncated {
        needed: HEADER_SIZE,
        available: bytes.len(),
    })?;
    let actual = checksum(&header[4..]);
    if actual != prefix.checksum.get() {
        return Err(FrameError::HeaderChecksum {
            expected: prefix.checksum.get(),
            actual,
        });
    }
    let command = validate_prefix(prefix, None)?;
    let size = prefix.size.get();
    if (size as usize) < HEADER_SIZE {
        return Err(FrameError::BadSize {
            size,
            reason: "smaller than a header",
        });
    }
    if size > frame_size_max {
        return Err(FrameError::TooLarge {
            size,
            max: frame_size_max,
        });
    }
    Ok((command, size as usize))
}

/// Cuts frames off the front of a growing receive buffer.
///
/// Returns `Ok(None)` while a frame is incomplete (reserving room for the
/// rest); any error means the stream is unusable and the connection should be
/// closed. Frames are split off without copying.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    frame_size_max: u32,
}

impl FrameDecoder {
    /// A decoder that refuses frames larger than `frame_size_max` bytes.
    pub fn new(frame_size_max: u32) -> FrameDecoder {
        assert!(
            frame_size_max as usize >= HEADER_SIZE,
            "frame_size_max below a header"
        );
        FrameDecoder { frame_size_max }
    }

    /// The largest frame this decoder accepts.
    pub fn frame_size_max(&self) -> u32 {
        self.frame_size_max
    }

    /// Decodes the next frame from the front of `buffer`, if it is complete.
    pub fn decode(&self, buffer: &mut BytesMut) -> Result<Option<Message>, FrameError> {
        if buffer.len() < HEADER_SIZE {
            buffer.reserve(HEADER_SIZE - buffer.len());
            return Ok(None);
        }
        let (command, size) = check_header(buffer, self.frame_size_max)?;
        if buffer.len() < size {
            buffer.reserve(size - buffer.len());
            return Ok(None);
        }
        let frame = buffer.split_to(size).freeze();
        let body = frame.slice(HEADER_SIZE..);
        Message::typed(command, &frame[..HEADER_SIZE], body).map(Some)
    }
}

impl Default for FrameDecoder {
    fn default() -> FrameDecoder {
        FrameDecoder::new(FRAME_SIZE_MAX_DEFAULT)
    }
}
