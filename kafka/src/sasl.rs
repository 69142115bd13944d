//! SASL on a Kafka connection: the handshake that picks a mechanism, and
//! the exchanges that carry it (SaslAuthenticate, or, after a v0
//! handshake, raw frames without a Kafka header).

use bytes::{Bytes, BytesMut};

use crate::api::RequestHeader;
use crate::codec::{Reader, Writer};
use crate::error::DecodeError;

/// The mechanisms this node serves.
pub const MECHANISMS: [&str; 1] = ["PLAIN"];

/// Reads a SaslHandshake body: the mechanism the client wants.
pub fn decode_handshake(body: &mut Reader) -> Result<String, DecodeError> {
    body.string("mechanism")
}

/// The SaslHandshake response body.
pub fn encode_handshake(error_code: i16) -> BytesMut {
    let mut writer = Writer::new(false);
    writer.i16(error_code);
    writer.array(&MECHANISMS, |writer, mechanism| writer.string(mechanism));
    writer.finish()
}

/// Reads a SaslAuthenticate body: the mechanism's bytes.
pub fn decode_authenticate(body: &mut Reader) -> Result<Bytes, DecodeError> {
    let bytes = body.bytes("auth bytes")?;
    body.tagged_fields()?;
    Ok(bytes)
}

/// The SaslAuthenticate response body.
pub fn encode_authenticate(
    header: &RequestHeader,
    error_code: i16,
    message: Option<&str>,
    session_lifetime_ms: i64,
) -> BytesMut {
    let mut writer = Writer::new(header.flexible());
    writer.i16(error_code);
    writer.nullable_string(message);
    writer.bytes(&[]);
    if header.version >= 1 {
        writer.i64(session_lifetime_ms);
    }
    writer.tagged_fields();
    writer.finish()
}

/// The user and password of a SASL PLAIN message
/// (`authzid NUL authcid NUL passwd`, RFC 4616). An authorization id other
/// than empty or the user itself is refused: a user signs in as itself.
pub fn plain(message: &[u8]) -> Result<(String, String), DecodeError> {
    let field = "SASL PLAIN message";
    let text =
        std::str::from_utf8(message).map_err(|_| DecodeError::invalid(field, "not UTF-8"))?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(DecodeError::invalid(field, "not three NUL-separated parts"));
    };
    if user.is_empty() {
        return Err(DecodeError::invalid(field, "empty user"));
    }
    if !authzid.is_empty() && authzid != user {
        return Err(DecodeError::invalid(field, "acting for another user"));
    }
    Ok((user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_parse_and_refuse_impersonation() {
        assert_eq!(plain(b"\0alice\0pw"), Ok(("alice".into(), "pw".into())));
        assert_eq!(
            plain(b"alice\0alice\0pw"),
            Ok(("alice".into(), "pw".into()))
        );
        assert!(plain(b"bob\0alice\0pw").is_err());
        assert!(plain(b"\0alice").is_err());
        assert!(plain(b"\0\0pw").is_err());
    }
}
