//! The node's fixed Argon2 parameters for password hashes.
//!
//! A password's Argon2id hash is made by the client that sets it, and a
//! PHC string carries its own cost (`m` KiB of memory, `t` passes, `p`
//! lanes). Verified as written, a client could store a hash that costs
//! 4 GiB or hours per check and then make unauthenticated sign-ins with it
//! on every node. So the node fixes the range it computes: Argon2id,
//! version 0x13, `m` from [`MEMORY_KIB_MIN`] to [`MEMORY_KIB_MAX`], `t`
//! from [`PASSES_MIN`] to [`PASSES_MAX`], `p` = [`LANES`], a
//! [`OUTPUT_BYTES`]-byte hash (the SDK and CLI make m=19456, t=2, p=1, 32
//! bytes: OWASP's recommendation and the `argon2` crate's default).
//!
//! [`check`] refuses anything else, both when a `CreateUser` arrives (before
//! it is prepared, [`refusal_before_prepare`]) and before a stored hash is
//! computed (an old catalog entry outside the range is refused unchecked).
//! [`dummy_hash`] is what an unknown user's password is checked against, so
//! that an unknown user costs as much as a known one.

use std::sync::OnceLock;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use strand_wire::ops::tokens::{SecretHashKind, secret_hash_kind};
use strand_wire::ops::{CreateToken, CreateUser, ErrorBody};
use strand_wire::{Body, Msg, Operation, RequestHeader, ResultCode};

/// Least memory a password hash may ask for, in KiB (19 MiB).
pub const MEMORY_KIB_MIN: u32 = 19_456;

/// Most memory a password hash may ask for, in KiB (64 MiB).
pub const MEMORY_KIB_MAX: u32 = 65_536;

/// Fewest passes a password hash may ask for.
pub const PASSES_MIN: u32 = 2;

/// Most passes a password hash may ask for.
pub const PASSES_MAX: u32 = 3;

/// The lanes (parallelism) every password hash has.
pub const LANES: u32 = 1;

/// The hash output every password hash has, in bytes.
pub const OUTPUT_BYTES: usize = 32;

/// Argon2 version 1.3, the only one accepted.
const VERSION: u32 = 0x13;

/// Why a PHC string is not one this node computes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashRefusal {
    /// Not a PHC string `argon2` can read.
    #[error("not a PHC string: {0}")]
    Unreadable(String),
    /// Another algorithm than Argon2id.
    #[error("algorithm {0} is not argon2id")]
    Algorithm(String),
    /// Another version than 0x13 (19).
    #[error("Argon2 version {0:?} is not 19")]
    Version(Option<u32>),
    /// Memory outside the range.
    #[error("memory m={0} KiB is outside {MEMORY_KIB_MIN}..={MEMORY_KIB_MAX}")]
    Memory(u32),
    /// Passes outside the range.
    #[error("passes t={0} are outside {PASSES_MIN}..={PASSES_MAX}")]
    Passes(u32),
    /// Lanes other than [`LANES`].
    #[error("lanes p={0} are not {LANES}")]
    Lanes(u32),
    /// A hash output of another length, or none.
    #[error("the hash output is {0:?} bytes, not {OUTPUT_BYTES}")]
    Output(Option<usize>),
}

/// Whether `phc` is an Argon2id hash within the node's fixed parameters.
pub fn check(phc: &str) -> Result<(), HashRefusal> {
    let parsed =
        PasswordHash::new(phc).map_err(|error| HashRefusal::Unreadable(error.to_string()))?;
    if parsed.algorithm != argon2::ARGON2ID_IDENT {
        return Err(HashRefusal::Algorithm(parsed.algorithm.to_string()));
    }
    if parsed.version != Some(VERSION) {
        return Err(HashRefusal::Version(parsed.version));
    }
    let params = argon2::Params::try_from(&parsed)
        .map_err(|error| HashRefusal::Unreadable(error.to_string()))?;
    if !(MEMORY_KIB_MIN..=MEMORY_KIB_MAX).contains(&params.m_cost()) {
        return Err(HashRefusal::Memory(params.m_cost()));
    }
    if !(PASSES_MIN..=PASSES_MAX).contains(&params.t_cost()) {
        return Err(HashRefusal::Passes(params.t_cost()));
    }
    if params.p_cost() != LANES {
        return Err(HashRefusal::Lanes(params.p_cost()));
    }
    let output = parsed.hash.map(|hash| hash.len());
    if output != Some(OUTPUT_BYTES) {
        return Err(HashRefusal::Output(output));
    }
    Ok(())
}

/// Whether `secret` matches `phc`, which [`check`] has passed. Blocking:
/// tens of milliseconds of one core and up to [`MEMORY_KIB_MAX`] KiB.
pub fn verify(phc: &str, secret: &[u8]) -> bool {
    debug_assert!(check(phc).is_ok(), "verify only checked hashes");
    PasswordHash::new(phc).is_ok_and(|parsed| {
        argon2::Argon2::default()
            .verify_password(secret, &parsed)
            .is_ok()
    })
}

/// A hash of no one's password with the SDK's parameters: what a sign-in
/// for an unknown user is checked against, so that it costs what a known
/// user's does. Made once, on first use.
pub fn dummy_hash() -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| {
        let salt = SaltString::encode_b64(b"strand-no-user!!").expect("a 16-byte salt encodes");
        let hash = argon2::Argon2::default()
            .hash_password(b"no user has this password", &salt)
            .expect("the default parameters hash")
            .to_string();
        assert!(check(&hash).is_ok(), "the dummy hash is within range");
        hash
    })
}

/// Why a request that stores a credential hash is refused before it is
/// prepared: a password hash outside the node's fixed parameters, or a
/// token secret hashed with Argon2 (clients before keyed hashes).
pub fn refusal_before_prepare(request: &Msg<RequestHeader>) -> Option<ErrorBody> {
    let refused = |message: String| Some(ErrorBody::message(ResultCode::InvalidRequest, message));
    match request.header().operation() {
        Operation::CreateUser => {
            let create = CreateUser::from_bytes(request.body()).ok()?;
            let refusal = check(&create.password_hash).err()?;
            refused(format!(
                "the password hash for {} is refused: {refusal}; this cluster accepts Argon2id \
                 v19 with m={MEMORY_KIB_MIN}..={MEMORY_KIB_MAX} KiB, t={PASSES_MIN}..={PASSES_MAX}, \
                 p={LANES}, a {OUTPUT_BYTES}-byte hash (what the strand SDK and CLI make)",
                create.name
            ))
        }
        Operation::CreateToken => {
            let create = CreateToken::from_bytes(request.body()).ok()?;
            (secret_hash_kind(&create.secret_hash) == Some(SecretHashKind::Argon2id)).then(|| {
                ErrorBody::message(
                    ResultCode::InvalidRequest,
                    "token secrets are stored as HMAC-SHA-256 ($hmac-sha256$), not Argon2id: \
                     create the token with a current strand SDK or CLI",
                )
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash_with(params: argon2::Params) -> String {
        let salt = SaltString::encode_b64(b"0123456789abcdef").expect("salt");
        argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
            .hash_password(b"pw", &salt)
            .expect("hash")
            .to_string()
    }

    #[test]
    fn the_sdks_hash_is_accepted_and_anything_costlier_or_odd_refused() {
        let sdk = strand_credentials::hash_password("correct horse").expect("hash");
        assert_eq!(check(&sdk), Ok(()));
        assert!(verify(&sdk, b"correct horse"));
        assert!(!verify(&sdk, b"wrong horse"));
        assert_eq!(check(dummy_hash()), Ok(()));
        // The parameters are read from the string, not computed: a 4 GiB,
        // many-pass hash is refused as written.
        let salt_and_hash = sdk.rsplitn(3, '$').take(2).collect::<Vec<_>>();
        let tail = format!("{}${}", salt_and_hash[1], salt_and_hash[0]);
        let forged = |params: &str| format!("$argon2id$v=19${params}${tail}");
        assert_eq!(
            check(&forged("m=4194304,t=2,p=1")),
            Err(HashRefusal::Memory(4_194_304))
        );
        assert_eq!(
            check(&forged("m=19456,t=100000,p=1")),
            Err(HashRefusal::Passes(100_000))
        );
        assert_eq!(
            check(&forged("m=19456,t=2,p=4")),
            Err(HashRefusal::Lanes(4))
        );
        assert_eq!(check(&forged("m=8,t=1,p=1")), Err(HashRefusal::Memory(8)));
        assert!(matches!(
            check(&format!("$argon2i$v=19$m=19456,t=2,p=1${tail}")),
            Err(HashRefusal::Algorithm(_))
        ));
        assert_eq!(
            check(&format!("$argon2id$v=16$m=19456,t=2,p=1${tail}")),
            Err(HashRefusal::Version(Some(16)))
        );
        let short = argon2::Params::new(19_456, 2, 1, Some(16)).expect("params");
        assert_eq!(check(&hash_with(short)), Err(HashRefusal::Output(Some(16))));
        let high = argon2::Params::new(MEMORY_KIB_MAX, PASSES_MAX, 1, None).expect("params");
        assert_eq!(check(&hash_with(high)), Ok(()));
        assert!(matches!(check("hunter2"), Err(HashRefusal::Unreadable(_))));
    }
}
