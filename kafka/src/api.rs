//! The APIs this node serves, the versions of each, and the frame around
//! every request and response: the request header a client sends, the
//! response header the node answers with.
//!
//! A Kafka frame is a big-endian `INT32` size, then the header, then the
//! body. The header's layout depends on the API and its version: the
//! flexible versions (varint lengths, tagged fields) use request header v2
//! and response header v1; the others request header v1 and response
//! header v0. ApiVersions always answers with response header v0, so that a
//! client can read the answer whatever version it tried.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{Reader, Writer};
use crate::error::DecodeError;

/// One API this node serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ApiKey {
    /// Appends record batches.
    Produce = 0,
    /// Reads record batches.
    Fetch = 1,
    /// Finds offsets by time, or the earliest and latest.
    ListOffsets = 2,
    /// Brokers, topics, partitions and their leaders.
    Metadata = 3,
    /// Commits a consumer group's offsets.
    OffsetCommit = 8,
    /// Reads a consumer group's offsets.
    OffsetFetch = 9,
    /// Which node coordinates a consumer group.
    FindCoordinator = 10,
    /// Joins a consumer group (a rebalance).
    JoinGroup = 11,
    /// A member's heartbeat in its group.
    Heartbeat = 12,
    /// Leaves a consumer group.
    LeaveGroup = 13,
    /// Hands out the leader's assignment.
    SyncGroup = 14,
    /// Describes consumer groups.
    DescribeGroups = 15,
    /// Lists consumer groups.
    ListGroups = 16,
    /// The mechanisms SASL may use.
    SaslHandshake = 17,
    /// An idempotent producer's id and epoch.
    InitProducerId = 22,
    /// Where a leader epoch ends (a consumer's check for a truncated log).
    OffsetForLeaderEpoch = 23,
    /// The versions this node serves.
    ApiVersions = 18,
    /// Creates topics.
    CreateTopics = 19,
    /// Deletes topics.
    DeleteTopics = 20,
    /// Describes topics' configs.
    DescribeConfigs = 32,
    /// Replaces topics' configs.
    AlterConfigs = 33,
    /// One SASL exchange.
    SaslAuthenticate = 36,
    /// Adds partitions to topics.
    CreatePartitions = 37,
    /// Deletes consumer groups.
    DeleteGroups = 42,
    /// Sets or deletes some of topics' configs.
    IncrementalAlterConfigs = 44,
    /// The brokers and the controller.
    DescribeCluster = 60,
}

/// Every API served, in key order.
pub const SERVED: [ApiKey; 26] = [
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::SyncGroup,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::SaslHandshake,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::InitProducerId,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::DescribeConfigs,
    ApiKey::AlterConfigs,
    ApiKey::SaslAuthenticate,
    ApiKey::CreatePartitions,
    ApiKey::DeleteGroups,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeCluster,
];

impl ApiKey {
    /// The API with key `key`, if this node serves it.
    pub fn from_i16(key: i16) -> Option<ApiKey> {
        SERVED.into_iter().find(|api| *api as i16 == key)
    }

    /// The versions served: `(min, max)`. The minimums are those Kafka 4
    /// brokers keep (record batches v2 and later); the maximums are the
    /// newest this node encodes, which current clients negotiate down to.
    pub fn versions(self) -> (i16, i16) {
        match self {
            ApiKey::Produce => (3, 9),
            ApiKey::Fetch => (4, 12),
            ApiKey::ListOffsets => (1, 7),
            ApiKey::Metadata => (0, 12),
            ApiKey::OffsetCommit => (2, 8),
            ApiKey::OffsetFetch => (1, 7),
            ApiKey::FindCoordinator => (0, 4),
            ApiKey::JoinGroup => (0, 7),
            ApiKey::Heartbeat => (0, 4),
            ApiKey::LeaveGroup => (0, 4),
            ApiKey::SyncGroup => (0, 5),
            ApiKey::SaslHandshake => (0, 1),
            ApiKey::ApiVersions => (0, 3),
            ApiKey::InitProducerId => (0, 4),
            ApiKey::SaslAuthenticate => (0, 2),
            ApiKey::CreateTopics => (2, 7),
            ApiKey::DeleteTopics => (1, 5),
            ApiKey::DescribeConfigs => (1, 4),
            ApiKey::AlterConfigs => (0, 2),
            ApiKey::CreatePartitions => (0, 3),
            ApiKey::IncrementalAlterConfigs => (0, 1),
            ApiKey::DescribeCluster => (0, 1),
            ApiKey::DescribeGroups => (0, 5),
            ApiKey::ListGroups => (0, 4),
            ApiKey::OffsetForLeaderEpoch => (2, 4),
            ApiKey::DeleteGroups => (0, 2),
        }
    }

    /// The first version with the flexible encoding (`i16::MAX`: none).
    pub fn first_flexible(self) -> i16 {
        match self {
            ApiKey::Produce => 9,
            ApiKey::Fetch => 12,
            ApiKey::ListOffsets => 6,
            ApiKey::Metadata => 9,
            ApiKey::OffsetCommit => 8,
            ApiKey::OffsetFetch => 6,
            ApiKey::FindCoordinator => 3,
            ApiKey::JoinGroup => 6,
            ApiKey::Heartbeat => 4,
            ApiKey::LeaveGroup => 4,
            ApiKey::SyncGroup => 4,
            ApiKey::SaslHandshake => i16::MAX,
            ApiKey::ApiVersions => 3,
            ApiKey::InitProducerId => 2,
            ApiKey::SaslAuthenticate => 2,
            ApiKey::CreateTopics => 5,
            ApiKey::DeleteTopics => 4,
            ApiKey::DescribeConfigs => 4,
            ApiKey::AlterConfigs => 2,
            ApiKey::CreatePartitions => 2,
            ApiKey::IncrementalAlterConfigs => 1,
            ApiKey::DescribeCluster => 0,
            ApiKey::DescribeGroups => 5,
            ApiKey::ListGroups => 3,
            ApiKey::OffsetForLeaderEpoch => 4,
            ApiKey::DeleteGroups => 2,
        }
    }

    /// Whether `version` is served.
    pub fn serves(self, version: i16) -> bool {
        let (min, max) = self.versions();
        (min..=max).contains(&version)
    }
}

/// A request's header, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    /// The API.
    pub api: ApiKey,
    /// Its version, one this node serves.
    pub version: i16,
    /// Echoed in the response, which is how the client matches it.
    pub correlation_id: i32,
    /// The client's name for itself (logs and quotas).
    pub client_id: Option<String>,
}

impl RequestHeader {
    /// Whether the body uses the flexible encoding.
    pub fn flexible(&self) -> bool {
        self.version >= self.api.first_flexible()
    }
}

/// What the first bytes of a request frame say, before its body: enough to
/// answer it with an error when the rest cannot be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preamble {
    /// The API key, served or not.
    pub api_key: i16,
    /// The version asked for.
    pub version: i16,
    /// The correlation id to answer with.
    pub correlation_id: i32,
}

/// Reads the preamble of a request frame's payload (the bytes after the
/// size).
pub fn preamble(payload: &[u8]) -> Result<Preamble, DecodeError> {
    let field = "request header";
    let bytes: [u8; 8] = payload
        .get(..8)
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or(DecodeError::Truncated { field })?;
    Ok(Preamble {
        api_key: i16::from_be_bytes([bytes[0], bytes[1]]),
        version: i16::from_be_bytes([bytes[2], bytes[3]]),
        correlation_id: i32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
    })
}

/// Decodes a request frame's payload into its header and a reader over its
/// body, in the body's encoding.
pub fn decode_request(payload: Bytes) -> Result<(RequestHeader, Reader), DecodeError> {
    let preamble = preamble(&payload)?;
    let api =
        ApiKey::from_i16(preamble.api_key).ok_or(DecodeError::UnknownApi(preamble.api_key))?;
    if !api.serves(preamble.version) {
        return Err(DecodeError::UnsupportedVersion {
            api_key: preamble.api_key,
            version: preamble.version,
        });
    }
    let flexible = preamble.version >= api.first_flexible();
    // The client id is a classic string in every header version.
    let mut reader = Reader::new(payload.slice(8..), false);
    let client_id = reader.nullable_string("client id")?;
    let mut reader = Reader::new(reader.rest(), flexible);
    reader.tagged_fields()?;
    let header = RequestHeader {
        api,
        version: preamble.version,
        correlation_id: preamble.correlation_id,
        client_id,
    };
    Ok((header, reader))
}

/// A response writer for `header`'s request: the body is written in the
/// request's encoding.
pub fn response_writer(header: &RequestHeader) -> Writer {
    Writer::new(header.flexible())
}

/// The whole response frame: size, response header, then `body`.
pub fn response_frame(header: &RequestHeader, body: BytesMut) -> Bytes {
    let tagged = header.flexible() && header.api != ApiKey::ApiVersions;
    frame(header.correlation_id, tagged, &body)
}

/// A response frame for `correlation_id` in response header v0 (no tagged
/// fields): what an ApiVersions answer, whatever its version, uses.
pub fn frame(correlation_id: i32, tagged: bool, body: &[u8]) -> Bytes {
    let header_size = 4 + usize::from(tagged);
    let size = u32::try_from(header_size + body.len()).expect("a response shorter than 4 GiB");
    let mut out = BytesMut::with_capacity(4 + size as usize);
    out.put_u32(size);
    out.put_i32(correlation_id);
    if tagged {
        out.put_u8(0);
    }
    out.put_slice(body);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(api_key: i16, version: i16, flexible: bool) -> Bytes {
        let mut writer = Writer::new(false);
        writer.i16(api_key);
        writer.i16(version);
        writer.i32(42);
        writer.nullable_string(Some("kcat"));
        if flexible {
            writer.uvarint(0);
        }
        writer.i8(7);
        writer.finish().freeze()
    }

    #[test]
    fn a_flexible_header_skips_its_tagged_fields_and_keeps_the_body() {
        let (header, mut body) = decode_request(request(3, 12, true)).expect("decodes");
        assert_eq!(header.api, ApiKey::Metadata);
        assert_eq!(header.correlation_id, 42);
        assert_eq!(header.client_id.as_deref(), Some("kcat"));
        assert!(body.flexible());
        assert_eq!(body.i8("x"), Ok(7));
    }

    #[test]
    fn unknown_apis_and_versions_are_typed_errors() {
        assert_eq!(
            decode_request(request(99, 0, false)).map(|(header, _)| header),
            Err(DecodeError::UnknownApi(99))
        );
        assert_eq!(
            decode_request(request(0, 2, false)).map(|(header, _)| header),
            Err(DecodeError::UnsupportedVersion {
                api_key: 0,
                version: 2
            })
        );
        assert!(decode_request(Bytes::from_static(&[0, 3])).is_err());
    }

    #[test]
    fn an_api_versions_response_never_carries_header_tagged_fields() {
        let (header, _) = decode_request(request(18, 3, true)).expect("decodes");
        let frame = response_frame(&header, BytesMut::from(&[1u8][..]));
        assert_eq!(&frame[..], &[0, 0, 0, 5, 0, 0, 0, 42, 1]);
    }
}
