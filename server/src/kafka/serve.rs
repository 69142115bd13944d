//! One Kafka request, served: decoded by `strand_kafka`, signed in or
//! refused, then handed to the API's own module. A request that does not
//! decode closes its connection, as a Kafka broker does; an ApiVersions of
//! a version not served is answered with the versions that are.

use std::sync::Arc;

use bytes::Bytes;
use strand_kafka::api::{self, ApiKey, RequestHeader};
use strand_kafka::codec::Reader;
use strand_kafka::{DecodeError, api_versions};

use crate::kafka::link::Link;
use crate::kafka::listener::Response;

/// What serving a request gave the connection.
pub enum Served {
    /// A response, in the request's place in the order.
    Respond(Response),
    /// Nothing to write (a produce with `acks=0`).
    Silent,
}

/// What a connection remembers between requests: where its SASL exchange
/// stands.
#[derive(Debug, Default)]
pub struct ConnectionState {
    /// The mechanism a SaslHandshake chose, if one did.
    pub mechanism: Option<String>,
    /// A SaslHandshake v0 was answered: the next frame is the mechanism's
    /// bytes alone, without a Kafka header.
    pub raw_sasl_next: bool,
    /// Failed sign-ins so far; the connection closes at
    /// [`crate::security::auth::SIGN_IN_FAILURES_MAX`].
    pub failures: u32,
}

/// Serves one request frame's payload.
pub async fn serve(
    link: &Arc<Link>,
    state: &mut ConnectionState,
    payload: Bytes,
) -> Result<Served, String> {
    if state.raw_sasl_next {
        return crate::kafka::sasl::raw(link, state, payload).await;
    }
    let preamble = api::preamble(&payload).map_err(|error| error.to_string())?;
    let (header, mut body) = match api::decode_request(payload) {
        Ok(decoded) => decoded,
        Err(DecodeError::UnsupportedVersion { .. })
            if preamble.api_key == ApiKey::ApiVersions as i16 =>
        {
            let body = api_versions::unsupported();
            let frame = api::frame(preamble.correlation_id, false, &body);
            return Ok(Served::Respond(Response::Ready(frame)));
        }
        Err(error) => return Err(format!("a request that does not decode: {error}")),
    };
    crate::metrics::kafka_request(header.api);
    dispatch(link, state, header, &mut body).await
}

/// Hands a decoded request to its API's module.
async fn dispatch(
    link: &Arc<Link>,
    state: &mut ConnectionState,
    header: RequestHeader,
    body: &mut Reader,
) -> Result<Served, String> {
    let malformed = |error: DecodeError| format!("a {:?} request: {error}", header.api);
    let ready = |body| {
        Ok(Served::Respond(Response::Ready(api::response_frame(
            &header, body,
        ))))
    };
    match header.api {
        ApiKey::ApiVersions => {
            if let Some(software) = api_versions::decode(&header, body).map_err(malformed)? {
                tracing::debug!(software, "kafka: a client said hello");
            }
            return ready(api_versions::encode(header.version, 0));
        }
        ApiKey::SaslHandshake => {
            return crate::kafka::sasl::handshake(state, &header, body).map_err(malformed);
        }
        ApiKey::SaslAuthenticate => {
            return crate::kafka::sasl::authenticate(link, state, &header, body).await;
        }
        _ => {}
    }
    if !link.may_proceed() {
        return Err(format!("{:?} before signing in", header.api));
    }
    serve_signed_in(link, header, body).await
}

/// Hands a request of a signed-in connection (or of a cluster without
/// sign-in) to its API's module.
async fn serve_signed_in(
    link: &Arc<Link>,
    header: RequestHeader,
    body: &mut Reader,
) -> Result<Served, String> {
    let malformed = |error: DecodeError| format!("a {:?} request: {error}", header.api);
    let ready = |body| {
        Ok(Served::Respond(Response::Ready(api::response_frame(
            &header, body,
        ))))
    };
    match header.api {
        ApiKey::Metadata => {
            let request = strand_kafka::metadata::decode(&header, body).map_err(malformed)?;
            ready(crate::kafka::metadata::answer(link, &header, &request))
        }
        ApiKey::Produce => {
            let request = strand_kafka::produce::decode(body).map_err(malformed)?;
            Ok(crate::kafka::produce::serve(link, header, request).await)
        }
        ApiKey::Fetch => {
            let request = strand_kafka::fetch::decode(&header, body).map_err(malformed)?;
            let link = Arc::clone(link);
            let task = tokio::spawn(crate::kafka::fetch::serve(link, header, request));
            Ok(Served::Respond(Response::Later(task)))
        }
        ApiKey::FindCoordinator
        | ApiKey::JoinGroup
        | ApiKey::SyncGroup
        | ApiKey::Heartbeat
        | ApiKey::LeaveGroup
        | ApiKey::OffsetCommit
        | ApiKey::OffsetFetch
        | ApiKey::ListGroups
        | ApiKey::DescribeGroups
        | ApiKey::DeleteGroups => crate::kafka::groups::serve(link, header.clone(), body)
            .await
            .map_err(malformed),
        ApiKey::CreateTopics
        | ApiKey::DeleteTopics
        | ApiKey::CreatePartitions
        | ApiKey::DescribeConfigs
        | ApiKey::AlterConfigs
        | ApiKey::IncrementalAlterConfigs
        | ApiKey::DescribeCluster => crate::kafka::admin::serve(link, header.clone(), body)
            .await
            .map_err(malformed),
        ApiKey::InitProducerId => {
            let request =
                strand_kafka::init_producer_id::decode(&header, body).map_err(malformed)?;
            ready(crate::kafka::produce::init_producer(&header, &request))
        }
        ApiKey::OffsetForLeaderEpoch => {
            let queries = strand_kafka::list_offsets::decode_leader_epochs(&header, body)
                .map_err(malformed)?;
            let link = Arc::clone(link);
            let task = tokio::spawn(crate::kafka::offsets::leader_epochs(link, header, queries));
            Ok(Served::Respond(Response::Later(task)))
        }
        ApiKey::ListOffsets => {
            let queries = strand_kafka::list_offsets::decode(&header, body).map_err(malformed)?;
            let link = Arc::clone(link);
            let task = tokio::spawn(crate::kafka::offsets::serve(link, header, queries));
            Ok(Served::Respond(Response::Later(task)))
        }
        ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate => {
            unreachable!("answered above")
        }
    }
}
