//! ApiVersions: the first thing a client asks, and the only answer it can
//! read whatever version it tried.

use bytes::BytesMut;

use crate::api::{ApiKey, RequestHeader, SERVED};
use crate::codec::{Reader, Writer};
use crate::error::DecodeError;
use crate::errors::code;

/// Reads an ApiVersions body (the client's software name and version, from
/// v3, are only logged).
pub fn decode(header: &RequestHeader, body: &mut Reader) -> Result<Option<String>, DecodeError> {
    if header.version < 3 {
        return Ok(None);
    }
    let name = body.string("client software name")?;
    let version = body.string("client software version")?;
    body.tagged_fields()?;
    Ok(Some(format!("{name} {version}")))
}

/// The ApiVersions response body: every API served and its versions.
pub fn encode(version: i16, error_code: i16) -> BytesMut {
    let flexible = version >= ApiKey::ApiVersions.first_flexible();
    let mut writer = Writer::new(flexible);
    writer.i16(error_code);
    writer.array(&SERVED, |writer, api| {
        let (min, max) = api.versions();
        writer.i16(*api as i16);
        writer.i16(min);
        writer.i16(max);
        writer.tagged_fields();
    });
    if version >= 1 {
        writer.i32(0);
    }
    writer.tagged_fields();
    writer.finish()
}

/// The answer to an ApiVersions of a version this node does not serve: in
/// v0's encoding, which every client reads, saying which versions it does.
pub fn unsupported() -> BytesMut {
    encode(0, code::UNSUPPORTED_VERSION)
}
