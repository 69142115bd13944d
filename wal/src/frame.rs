//! The frame: how one entry sits in a WAL file.
//!
//! Every file written through the WAL is a plain sequence of frames, with no
//! file header and no padding:
//!
//! ```text
//! offset 0  u32 LE  payload_len
//! offset 4  u32 LE  crc32c(payload_len bytes ++ payload)
//! offset 8  payload (payload_len bytes)
//! ```
//!
//! The checksum covers the length field too, so a garbled length is caught as
//! surely as a garbled payload, and a zero-filled region (what some file systems
//! show after a crash) never reads as a valid frame: crc32c of four zero bytes is
//! not zero. The caller's payload may carry its own checksum (a prepare does);
//! the frame checksum is still the one recovery trusts.

use bytes::Bytes;

use crate::error::WalError;

/// Bytes in a frame header: `payload_len u32` + `crc32c u32`.
pub const FRAME_HEADER_BYTES: usize = 8;

/// The largest payload one frame may carry (64 MiB).
///
/// Bounded so that a garbled length field can never make recovery read (or a
/// writer queue) gigabytes: a header claiming more is an invalid frame.
pub const FRAME_PAYLOAD_BYTES_MAX: usize = 64 << 20;

const _: () = assert!(FRAME_PAYLOAD_BYTES_MAX <= u32::MAX as usize);

/// Bodies shorter than this are read for the frame checksum even when their
/// checksum is known: combining costs about 300 ns whatever the length,
/// reading a few KiB about as much.
const COMBINE_BODY_BYTES_MIN: usize = 4096;

/// One entry ready to be written: its header (computed on the caller's thread,
/// so checksumming is spread over the callers rather than the writer thread)
/// and its payload, held as one part ([`Frame::new`]) or two
/// ([`Frame::from_parts`]: a small head, e.g. a 256-byte prepare header, and a
/// body that is never copied). On disk the parts sit back to back and the
/// checksum covers their concatenation: the two kinds are indistinguishable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    header: [u8; FRAME_HEADER_BYTES],
    /// The payload's first part; empty for a one-part frame.
    head: Bytes,
    /// The payload (one-part frame) or its second part.
    body: Bytes,
}

impl Frame {
    /// Frames `payload`: computes the length and checksum header.
    ///
    /// Fails with [`WalError::EntryTooLarge`] above [`FRAME_PAYLOAD_BYTES_MAX`].
    pub fn new(payload: Bytes) -> Result<Frame, WalError> {
        Frame::from_bytes_parts(Bytes::new(), payload)
    }

    /// Frames the payload `head ++ body` without copying `body` (only the small
    /// `head` is copied). The checksum covers the concatenation, so the frame
    /// reads back exactly as `Frame::new(head ++ body)` would.
    ///
    /// Fails with [`WalError::EntryTooLarge`] when the two together exceed
    /// [`FRAME_PAYLOAD_BYTES_MAX`].
    pub fn from_parts(head: &[u8], body: Bytes) -> Result<Frame, WalError> {
        Frame::from_bytes_parts(Bytes::copy_from_slice(head), body)
    }

    /// [`Frame::from_parts`] with a head the caller already holds as `Bytes`
    /// (nothing is copied).
    pub fn from_bytes_parts(head: Bytes, body: Bytes) -> Result<Frame, WalError> {
        check_payload_len(head.len(), body.len())?;
        let header = encode_header(&[&head, &body]);
        Ok(Frame { header, head, body })
    }

    /// [`Frame::from_parts`] for a body whose crc32c the caller already
    /// holds (a prepare's header carries its body's): the checksum is
    /// extended over the head and combined with `body_checksum`, and the
    /// body is not read at all (unless it is short, see
    /// [`COMBINE_BODY_BYTES_MIN`]). A replica writing a prepare it has just
    /// checked, or just sealed, saves a pass over every batch this way.
    ///
    /// `body_checksum` must be `crc32c(body)`; a wrong one makes a frame
    /// that recovery rejects (checked in debug builds).
    pub fn from_parts_with_body_checksum(
        head: &[u8],
        body: Bytes,
        body_checksum: u32,
    ) -> Result<Frame, WalError> {
        debug_assert_eq!(
            crc32c::crc32c(&body),
            body_checksum,
            "the body's checksum as given"
        );
        if body.len() < COMBINE_BODY_BYTES_MIN {
            return Frame::from_parts(head, body);
        }
        check_payload_len(head.len(), body.len())?;
        let len_bytes = ((head.len() + body.len()) as u32).to_le_bytes();
        let through_head = frame_checksum(len_bytes, head);
        let crc = crate::crc::crc32c_combine(through_head, body_checksum, body.len());
        Ok(Frame {
            header: header_bytes(len_bytes, crc),
            head: Bytes::copy_from_slice(head),
            body,
        })
    }

    /// The 8 header bytes, as they go to disk.
    pub fn header(&self) -> &[u8; FRAME_HEADER_BYTES] {
        &self.header
    }

    /// The payload's last part: the whole payload of a frame built with
    /// [`Frame::new`], the body of one built with [`Frame::from_parts`]
    /// (see [`Frame::head`]).
    pub fn payload(&self) -> &Bytes {
        &self.body
    }

    /// The payload's first part: empty for a frame built with [`Frame::new`].
    pub fn head(&self) -> &Bytes {
        &self.head
    }

    /// Payload bytes (all parts).
    pub fn payload_len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// The slices that go to disk, in order: the header, then the non-empty
    /// payload parts.
    pub fn parts(&self) -> impl Iterator<Item = &[u8]> + Clone {
        let head = (!self.head.is_empty()).then_some(&self.head[..]);
        std::iter::once(&self.header[..])
            .chain(head)
            .chain(std::iter::once(&self.body[..]))
    }

    /// Bytes the frame occupies on disk (header + payload).
    pub fn len(&self) -> u64 {
        (FRAME_HEADER_BYTES + self.payload_len()) as u64
    }

    /// Always false: a frame has at least its header. Present because `len` is.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The whole frame as one contiguous buffer (tests, simulators, tools).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.len() as usize);
        for part in self.parts() {
            bytes.extend_from_slice(part);
        }
        bytes
    }
}

/// Fails with [`WalError::EntryTooLarge`] when a payload of these two parts
/// would exceed [`FRAME_PAYLOAD_BYTES_MAX`].
fn check_payload_len(head_len: usize, body_len: usize) -> Result<(), WalError> {
    let len = head_len.saturating_add(body_len);
    if len > FRAME_PAYLOAD_BYTES_MAX {
        return Err(WalError::EntryTooLarge {
            len,
            max: FRAME_PAYLOAD_BYTES_MAX,
        });
    }
    Ok(())
}

/// Computes the header for the payload `parts` (back to back). The caller has
/// checked the size bound.
fn encode_header(parts: &[&[u8]]) -> [u8; FRAME_HEADER_BYTES] {
    let len: usize = parts.iter().map(|part| part.len()).sum();
    assert!(len <= FRAME_PAYLOAD_BYTES_MAX);
    let len_bytes = (len as u32).to_le_bytes();
    let crc = parts.iter().fold(crc32c::crc32c(&len_bytes), |crc, part| {
        crc32c::crc32c_append(crc, part)
    });
    header_bytes(len_bytes, crc)
}

/// A frame header: the payload's length bytes, then its checksum.
fn header_bytes(len_bytes: [u8; 4], crc: u32) -> [u8; FRAME_HEADER_BYTES] {
    let mut header = [0u8; FRAME_HEADER_BYTES];
    header[..4].copy_from_slice(&len_bytes);
    header[4..].copy_from_slice(&crc.to_le_bytes());
    header
}

/// The checksum a frame header stores: crc32c over the length bytes, then the
/// payload.
pub(crate) fn frame_checksum(len_bytes: [u8; 4], payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&len_bytes);
    crc32c::crc32c_append(crc, payload)
}

/// Encodes one frame into `out` (simulators and tests that build files by hand).
pub fn encode_frame_into(payload: &[u8], out: &mut Vec<u8>) -> Result<(), WalError> {
    check_payload_len(0, payload.len())?;
    out.extend_from_slice(&encode_header(&[payload]));
    out.extend_from_slice(payload);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_from_a_known_body_checksum_is_the_frame_from_its_bytes() {
        let body: Bytes = (0..=255u8).cycle().take(70_000).collect::<Vec<u8>>().into();
        for (head, body) in [
            (&b"prepare header"[..], body.clone()),
            (&b""[..], body.slice(..COMBINE_BODY_BYTES_MIN)),
            (&b"h"[..], body.slice(..COMBINE_BODY_BYTES_MIN - 1)),
            (&b"h"[..], Bytes::new()),
        ] {
            let known =
                Frame::from_parts_with_body_checksum(head, body.clone(), crc32c::crc32c(&body))
                    .expect("small payload");
            let read = Frame::from_parts(head, body).expect("small payload");
            assert_eq!(known, read);
        }
    }

    #[test]
    fn header_holds_length_and_checksum_of_length_and_payload() {
        let frame = Frame::new(Bytes::from_static(b"hello")).expect("small payload");
        assert_eq!(frame.len(), 13);
        assert_eq!(&frame.header()[..4], &5u32.to_le_bytes());
        let crc = u32::from_le_bytes(frame.header()[4..].try_into().expect("4 bytes"));
        assert_eq!(crc, frame_checksum(5u32.to_le_bytes(), b"hello"));
        let mut encoded = Vec::new();
        encode_frame_into(b"hello", &mut encoded).expect("small payload");
        assert_eq!(encoded, frame.to_vec());
    }

    #[test]
    fn a_two_part_frame_is_the_frame_of_the_concatenation() {
        let head = [7u8; 256];
        let body = Bytes::from_static(b"the body is not copied");
        let parts = Frame::from_parts(&head, body.clone()).expect("small payload");
        let mut whole = head.to_vec();
        whole.extend_from_slice(&body);
        let single = Frame::new(Bytes::from(whole)).expect("small payload");
        assert_eq!(parts.to_vec(), single.to_vec());
        assert_eq!(parts.len(), single.len());
        assert_eq!(
            parts.payload().as_ptr(),
            body.as_ptr(),
            "the body is shared"
        );
        assert_eq!(parts.parts().count(), 3);
        assert_eq!(single.parts().count(), 2);
    }

    #[test]
    fn a_zeroed_header_is_never_a_valid_empty_frame() {
        assert_ne!(frame_checksum([0; 4], &[]), 0);
    }

    #[test]
    fn oversized_payload_is_rejected() {
        let payload = Bytes::from(vec![0u8; FRAME_PAYLOAD_BYTES_MAX + 1]);
        assert!(matches!(
            Frame::new(payload),
            Err(WalError::EntryTooLarge { .. })
        ));
    }
}
