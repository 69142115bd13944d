//! SASL on a Kafka connection, against Strand's users: `PLAIN` with a
//! user's password, or with one of its access tokens as the password. The
//! check is the client port's sign-in (the bounded check pool, the failed
//! sign-in limits per address and per user, the audit log), and a
//! connection that fails [`SIGN_IN_FAILURES_MAX`] times is closed.

use std::sync::Arc;

use bytes::Bytes;
use strand_kafka::api::{self, RequestHeader};
use strand_kafka::codec::Reader;
use strand_kafka::errors::code;
use strand_kafka::{DecodeError, sasl};
use strand_wire::Body;
use strand_wire::ops::Authenticate;

use crate::kafka::link::Link;
use crate::kafka::listener::Response;
use crate::kafka::serve::{ConnectionState, Served};
use crate::security::auth::SIGN_IN_FAILURES_MAX;

/// Answers a SaslHandshake: `PLAIN` is chosen, anything else refused.
pub fn handshake(
    state: &mut ConnectionState,
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<Served, DecodeError> {
    let mechanism = sasl::decode_handshake(body)?;
    let served = sasl::MECHANISMS.contains(&mechanism.as_str());
    let error_code = match served {
        true => code::NONE,
        false => code::UNSUPPORTED_SASL_MECHANISM,
    };
    if served {
        state.mechanism = Some(mechanism);
        state.raw_sasl_next = header.version == 0;
    }
    let frame = api::response_frame(header, sasl::encode_handshake(error_code));
    Ok(Served::Respond(Response::Ready(frame)))
}

/// Answers a SaslAuthenticate: the PLAIN message checked against the
/// node's users.
pub async fn authenticate(
    link: &Arc<Link>,
    state: &mut ConnectionState,
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<Served, String> {
    let message = sasl::decode_authenticate(body).map_err(|error| error.to_string())?;
    if state.mechanism.is_none() {
        let body = sasl::encode_authenticate(
            header,
            code::ILLEGAL_SASL_STATE,
            Some("SaslAuthenticate before SaslHandshake"),
            0,
        );
        let frame = api::response_frame(header, body);
        return Ok(Served::Respond(Response::Ready(frame)));
    }
    let outcome = check(link, state, &message).await;
    let (error_code, text) = match &outcome {
        Ok(()) => (code::NONE, None),
        Err(reason) => (code::SASL_AUTHENTICATION_FAILED, Some(reason.as_str())),
    };
    let frame = api::response_frame(
        header,
        sasl::encode_authenticate(header, error_code, text, 0),
    );
    if outcome.is_err() && state.failures >= SIGN_IN_FAILURES_MAX {
        return Err(format!("{} failed sign-ins", state.failures));
    }
    Ok(Served::Respond(Response::Ready(frame)))
}

/// Takes the frame after a SaslHandshake v0: the PLAIN message alone; an
/// empty frame answers success, and a failure closes the connection.
pub async fn raw(
    link: &Arc<Link>,
    state: &mut ConnectionState,
    payload: Bytes,
) -> Result<Served, String> {
    state.raw_sasl_next = false;
    check(link, state, &payload).await?;
    Ok(Served::Respond(Response::Ready(Bytes::from_static(&[
        0, 0, 0, 0,
    ]))))
}

/// Checks a PLAIN message as the client port checks a sign-in, and signs
/// the link in when it holds.
async fn check(
    link: &Arc<Link>,
    state: &mut ConnectionState,
    message: &[u8],
) -> Result<(), String> {
    let result = sign_in(link, message).await;
    if result.is_err() {
        state.failures += 1;
    }
    result
}

async fn sign_in(link: &Arc<Link>, message: &[u8]) -> Result<(), String> {
    let shared = link.shared();
    let (user, password) = sasl::plain(message).map_err(|error| error.to_string())?;
    let credential = match strand_wire::ops::parse_token(&password) {
        Some(_) => Authenticate::Token(password),
        None => Authenticate::Password {
            user: user.clone(),
            password,
        },
    };
    let body = credential.to_vec();
    let (attempt, result) = crate::security::auth::sign_in::sign_in(shared, &body, link.ip()).await;
    let refused = match result {
        Ok(identity) if identity.user == user => {
            tracing::debug!(user, "kafka: signed in");
            link.signed_in(identity);
            return Ok(());
        }
        Ok(_) => "the token belongs to another user".to_owned(),
        Err(refused) => refused.error_body().to_string(),
    };
    if let Some(log) = &shared.audit {
        let target = attempt.user.as_deref().unwrap_or_default();
        let entry = crate::security::audit::sign_in_failure(
            &attempt.audit_name(),
            &link.ip().to_string(),
            target,
            strand_wire::ResultCode::AuthenticationFailed,
        );
        log.record(entry).await;
    }
    Err(refused)
}
