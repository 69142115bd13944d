//! One sign-in, from the `Authenticate` body to who signed in or why not.
//!
//! In order: the address and the user name are looked up in the failure
//! limits ([`crate::security::auth::failure_limits`]; throttled: refused at once);
//! then the credential is checked:
//! - a password against the user's stored Argon2id hash (the built-in
//!   `admin`'s from the configuration), on the bounded pool
//!   ([`crate::security::auth::check_pool`]; full: refused `Busy`). A stored hash
//!   outside the node's fixed parameters is refused without computing it
//!   ([`crate::security::auth::hash_policy`]); an unknown user's password is checked
//!   against the dummy hash, so that it takes as long as a known user's.
//! - a token's secret against its keyed hash (HMAC-SHA-256, microseconds,
//!   on the caller's thread); a token from an older catalog with an
//!   Argon2id hash is checked like a password.
//!
//! A failed check counts against the address and the user name.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use strand_wire::ops::tokens::{SecretHashKind, secret_hash_kind, token_secret_matches};
use strand_wire::ops::{Authenticate, ErrorBody, parse_token};
use strand_wire::{Body, ResultCode};

use super::check_pool::{BUSY_RETRY_AFTER_MS, CheckPool, PoolBusy};
use super::failure_limits::Throttled;
use super::{ADMIN_USER, Identity, Proof, hash_policy, is_expired};
use crate::metrics;
use crate::shared::Shared;

/// What an unknown token's secret is checked against (no secret's hash).
const NO_TOKEN_HASH: &str =
    "$hmac-sha256$0000000000000000000000000000000000000000000000000000000000000000";

/// Why a sign-in was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The credentials do not hold (the same words for an unknown user and
    /// a wrong password): `AuthenticationFailed`.
    Failed(String),
    /// Too many failures from the address or for the user: `Throttled`.
    Throttled(Throttled),
    /// The check pool is full: `Busy`.
    Busy(PoolBusy),
}

impl Refused {
    /// The error reply the client gets.
    pub fn error_body(&self) -> ErrorBody {
        match self {
            Refused::Failed(message) => {
                ErrorBody::message(ResultCode::AuthenticationFailed, message.clone())
            }
            Refused::Throttled(throttled) => {
                ErrorBody::message(ResultCode::Throttled, throttled.to_string())
            }
            Refused::Busy(_) => ErrorBody::Busy {
                retry_after_ms: BUSY_RETRY_AFTER_MS,
            },
        }
    }
}

/// Who a sign-in claimed to be, for the failure limits and the audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attempt {
    /// The user name it named (or its token's user).
    pub user: Option<String>,
    /// The token id it presented.
    pub token: Option<String>,
}

impl Attempt {
    /// How the audit log names it: `user alice`, `user ci (token 3f…)`,
    /// `token 3f…` (unknown), `anonymous` (undecodable).
    pub fn audit_name(&self) -> String {
        match (&self.user, &self.token) {
            (Some(user), None) => format!("user {user}"),
            (Some(user), Some(token)) => format!("user {user} (token {token})"),
            (None, Some(token)) => format!("token {token}"),
            (None, None) => "anonymous".to_owned(),
        }
    }
}

/// Checks the credentials in an `Authenticate` body from `address`.
pub async fn sign_in(
    shared: &Arc<Shared>,
    body: &[u8],
    address: IpAddr,
) -> (Attempt, Result<Identity, Refused>) {
    let limits = &shared.sign_ins.limits;
    let credential = match Authenticate::from_bytes(body) {
        Ok(credential) => credential,
        Err(error) => {
            // Costs nothing to check, but is a failed sign-in all the same.
            metrics::sign_in_failed();
            limits.record_failure(address, None, Instant::now());
            return (Attempt::default(), Err(Refused::Failed(error.to_string())));
        }
    };
    let attempt = match &credential {
        Authenticate::Password { user, .. } => Attempt {
            user: Some(user.clone()),
            token: None,
        },
        Authenticate::Token(text) => {
            let id = parse_token(text).map(|(id, _)| id.to_owned());
            let user = id
                .as_deref()
                .and_then(|id| shared.catalog().token(id).map(|token| token.user.clone()));
            Attempt { user, token: id }
        }
    };
    if let Some(throttled) = limits.refusal(address, attempt.user.as_deref(), Instant::now()) {
        metrics::sign_in_throttled();
        return (attempt, Err(Refused::Throttled(throttled)));
    }
    let result = match credential {
        Authenticate::Password { user, password } => check_password(shared, user, password).await,
        Authenticate::Token(text) => check_token(shared, &text).await,
    };
    match &result {
        Err(Refused::Failed(_)) => {
            metrics::sign_in_failed();
            limits.record_failure(address, attempt.user.as_deref(), Instant::now());
        }
        Err(Refused::Busy(_)) => metrics::sign_in_busy(),
        Err(Refused::Throttled(_)) | Ok(_) => {}
    }
    (attempt, result)
}

/// Checks `password` against `user`'s stored hash (the dummy hash for a
/// user the node does not know).
async fn check_password(
    shared: &Arc<Shared>,
    user: String,
    password: String,
) -> Result<Identity, Refused> {
    let stored = if user == ADMIN_USER {
        shared.config.auth.admin_password_hash.clone()
    } else {
        shared
            .catalog()
            .user(&user)
            .map(|record| record.password_hash.clone())
    };
    let refused = || Refused::Failed(format!("no user {user} with that password"));
    if let Some(hash) = &stored
        && let Err(refusal) = hash_policy::check(hash)
    {
        tracing::warn!(
            user,
            %refusal,
            "auth: the stored password hash is outside the node's fixed Argon2 parameters; \
             refused without computing it (create the user again with a current client)"
        );
        return Err(refused());
    }
    let known = stored.is_some();
    let matched = verify_on_pool(&shared.sign_ins.pool, stored, password).await?;
    if matched && known {
        Ok(Identity {
            user,
            proof: Proof::Password,
        })
    } else {
        Err(refused())
    }
}

/// Runs one Argon2id check of `secret` against `hash` (which passed the
/// policy; `None`: the dummy hash) on the pool.
async fn verify_on_pool(
    pool: &CheckPool,
    hash: Option<String>,
    secret: String,
) -> Result<bool, Refused> {
    pool.run(move || {
        let hash = hash.as_deref().unwrap_or_else(|| hash_policy::dummy_hash());
        hash_policy::verify(hash, secret.as_bytes())
    })
    .await
    .map_err(Refused::Busy)
}

/// Checks a token against the catalog: its keyed hash at once, or an
/// older Argon2id hash on the pool.
async fn check_token(shared: &Arc<Shared>, text: &str) -> Result<Identity, Refused> {
    let Some((id, secret)) = parse_token(text) else {
        return Err(Refused::Failed("not a token".to_owned()));
    };
    let unknown = || Refused::Failed(format!("token {id} is unknown or revoked"));
    let Some(token) = shared.catalog().token(id).cloned() else {
        // As long as a known token's check takes.
        let _ = token_secret_matches(NO_TOKEN_HASH, id, secret);
        return Err(unknown());
    };
    if is_expired(token.expires_at_ms) {
        return Err(Refused::Failed(format!("token {id} has expired")));
    }
    let matched = match secret_hash_kind(&token.secret_hash) {
        Some(SecretHashKind::Keyed) => token_secret_matches(&token.secret_hash, id, secret),
        Some(SecretHashKind::Argon2id) => match hash_policy::check(&token.secret_hash) {
            Ok(()) => {
                let hash = Some(token.secret_hash.clone());
                verify_on_pool(&shared.sign_ins.pool, hash, secret.to_owned()).await?
            }
            Err(refusal) => {
                tracing::warn!(
                    token = id,
                    %refusal,
                    "auth: the token's stored Argon2id hash is outside the node's fixed \
                     parameters; refused without computing it (create a new token)"
                );
                false
            }
        },
        None => false,
    };
    if matched {
        Ok(Identity {
            user: token.user,
            proof: Proof::Token(id.to_owned()),
        })
    } else {
        Err(unknown())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use strand_partition::ReadHandles;

    use super::*;
    use crate::node::config::loopback_test_config;

    fn node_with_admin_hash(hash: String) -> Arc<Shared> {
        let mut config = loopback_test_config(1);
        config.auth.admin_password_hash = Some(hash);
        Arc::new(Shared::new(
            config,
            BTreeMap::new(),
            ReadHandles::new(16),
            1,
        ))
    }

    fn admin(password: &str) -> Vec<u8> {
        Authenticate::Password {
            user: ADMIN_USER.to_owned(),
            password: password.to_owned(),
        }
        .to_vec()
    }

    /// A node whose catalog holds user `old` with `hash`, as a catalog
    /// written before the node fixed the Argon2 parameters may.
    fn node_with_user(hash: String) -> Arc<Shared> {
        use strand_consensus::StateMachine;
        use strand_wire::CommandHeader;
        let shared = Shared::new(
            loopback_test_config(1),
            BTreeMap::new(),
            ReadHandles::new(16),
            1,
        );
        let mut catalog = strand_host::catalog::Catalog::new(vec![1]);
        let mut header = strand_wire::PrepareHeader::new(0, 0, strand_wire::ViewId::new(0, 0), 0);
        header.op.set(1);
        header.operation = strand_wire::Operation::CreateUser as u8;
        let body = strand_wire::ops::CreateUser {
            name: "old".to_owned(),
            password_hash: hash,
        };
        let (code, _) = catalog.commit(&header, Some(&bytes::Bytes::from(body.to_vec())));
        assert_eq!(code, ResultCode::Ok, "the catalog itself takes it");
        shared.publish_catalog(catalog);
        Arc::new(shared)
    }

    fn old_user(password: &str) -> Vec<u8> {
        Authenticate::Password {
            user: "old".to_owned(),
            password: password.to_owned(),
        }
        .to_vec()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stored_hash_outside_the_fixed_parameters_is_refused_without_computing_it() {
        let sdk = strand_credentials::hash_password("old password").expect("hash");
        let costly = sdk.replacen("m=19456", "m=4194304", 1);
        let shared = node_with_user(costly);
        let address = IpAddr::from([127, 0, 0, 1]);
        let started = Instant::now();
        let (attempt, result) = sign_in(&shared, &old_user("old password"), address).await;
        assert!(matches!(result, Err(Refused::Failed(_))), "{result:?}");
        assert_eq!(attempt.user.as_deref(), Some("old"));
        // 4 GiB of Argon2 would take many seconds, if it could be had.
        assert!(started.elapsed() < Duration::from_secs(2), "not computed");

        let shared = node_with_user(sdk);
        let (_, result) = sign_in(&shared, &old_user("old password"), address).await;
        assert!(result.is_ok(), "{result:?}");
        let (_, result) = sign_in(&shared, &old_user("wrong password"), address).await;
        assert!(matches!(result, Err(Refused::Failed(_))), "{result:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_throttled_address_is_refused_before_any_check() {
        let sdk = strand_credentials::hash_password("admin password").expect("hash");
        let shared = node_with_admin_hash(sdk);
        let address = IpAddr::from([10, 0, 0, 9]);
        let now = Instant::now();
        for _ in 0..crate::security::auth::failure_limits::ADDRESS_FAILURES_MAX {
            shared.sign_ins.limits.record_failure(address, None, now);
        }
        let (_, result) = sign_in(&shared, &admin("admin password"), address).await;
        assert!(matches!(result, Err(Refused::Throttled(_))), "{result:?}");
        let other = IpAddr::from([10, 0, 0, 10]);
        let (_, result) = sign_in(&shared, &admin("admin password"), other).await;
        assert!(result.is_ok(), "another address: {result:?}");
    }

    #[test]
    fn every_refusal_has_its_own_result_code() {
        let failed = Refused::Failed("no user x with that password".to_owned());
        assert_eq!(failed.error_body().code(), ResultCode::AuthenticationFailed);
        let throttled = Refused::Throttled(Throttled {
            what: "for user x".to_owned(),
            retry_after: std::time::Duration::from_secs(3),
        });
        let body = throttled.error_body();
        assert_eq!(body.code(), ResultCode::Throttled);
        assert!(format!("{body:?}").contains("retry in 3000 ms"), "{body:?}");
        assert_eq!(
            Refused::Busy(PoolBusy).error_body().code(),
            ResultCode::Busy
        );
        let attempt = Attempt {
            user: Some("ci".to_owned()),
            token: Some("00000000000000aa".to_owned()),
        };
        assert_eq!(attempt.audit_name(), "user ci (token 00000000000000aa)");
        assert_eq!(Attempt::default().audit_name(), "anonymous");
    }
}
