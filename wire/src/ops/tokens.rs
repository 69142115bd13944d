//! Access tokens: a revocable credential of one user, for programs that
//! should not hold the user's password (a CI job, a service). A token
//! signs in as its user with that user's permissions, until it is revoked,
//! its user is deleted, or it expires.
//!
//! A token reads `strand_<id>_<secret>`: 16 hex digits that name it (the
//! id is listed and revoked), then 64 hex digits of secret (256 random
//! bits). The catalog keeps the id and [`token_secret_hash`] of the
//! secret, HMAC-SHA-256 keyed by the secret over the id, made by the
//! client that created it; the secret is shown once, to whoever created
//! it, and never stored or sent again in the clear.
//!
//! Why a keyed hash and not Argon2: a slow hash protects a secret a person
//! chose, which is guessable. A token's secret is 256 random bits; no
//! attacker enumerates that space, so a fast keyed hash leaves the stored
//! value just as useless without the secret, while a check costs
//! microseconds instead of tens of milliseconds and 19 MiB (which made
//! every unauthenticated token sign-in a cheap way to load a node).
//! Catalogs written before kept Argon2id hashes of the secret
//! ([`SecretHashKind::Argon2id`]); nodes still check those, within the
//! node's fixed Argon2 parameters, but no longer accept new ones.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::codec::{Body, BodyReader, BodyWriter};
use crate::error::BodyError;

/// What every token starts with, so that a leaked one is recognisable
/// (secret scanners look for such prefixes).
pub const TOKEN_PREFIX: &str = "strand_";

/// Hex digits of a token's id.
pub const TOKEN_ID_LENGTH: usize = 16;

/// Hex digits of a token's secret.
pub const TOKEN_SECRET_LENGTH: usize = 64;

/// Most tokens the cluster keeps.
pub const TOKENS_MAX: usize = 4096;

/// Most tokens one user may hold.
pub const TOKENS_PER_USER_MAX: usize = 64;

/// Longest label a token may carry.
pub const TOKEN_LABEL_LENGTH_MAX: usize = 128;

/// Longest PHC string accepted for a secret's hash.
const SECRET_HASH_LENGTH_MAX: usize = 256;

/// How a keyed secret hash starts; 64 lowercase hex digits follow.
pub const KEYED_HASH_PREFIX: &str = "$hmac-sha256$";

/// How an Argon2id hash (a catalog written before keyed hashes) starts.
const ARGON2ID_PREFIX: &str = "$argon2id$";

/// What the keyed hash signs besides the id, so that the same secret keyed
/// for another purpose never yields a token's stored value.
const KEYED_HASH_CONTEXT: &[u8] = b"strand access token ";

/// The kinds of stored secret hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretHashKind {
    /// [`token_secret_hash`]: HMAC-SHA-256, what clients make now.
    Keyed,
    /// An Argon2id hash in PHC form, from clients before keyed hashes.
    Argon2id,
}

/// Which kind of stored secret hash `hash` is, if it is one.
pub fn secret_hash_kind(hash: &str) -> Option<SecretHashKind> {
    if let Some(digest) = hash.strip_prefix(KEYED_HASH_PREFIX) {
        return is_lower_hex(digest, 64).then_some(SecretHashKind::Keyed);
    }
    (hash.starts_with(ARGON2ID_PREFIX) && hash.len() <= SECRET_HASH_LENGTH_MAX)
        .then_some(SecretHashKind::Argon2id)
}

/// The keyed hash the catalog keeps for token `id` with `secret`:
/// `$hmac-sha256$` and the hex of HMAC-SHA-256 keyed by the secret over
/// the id. Useless without the secret; computed in microseconds.
pub fn token_secret_hash(id: &str, secret: &str) -> String {
    let digest = keyed_digest(id, secret);
    let mut text = String::with_capacity(KEYED_HASH_PREFIX.len() + 64);
    text.push_str(KEYED_HASH_PREFIX);
    for byte in digest {
        text.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
        text.push(char::from(b"0123456789abcdef"[usize::from(byte & 0xf)]));
    }
    text
}

/// Whether `secret` is token `id`'s secret by its stored keyed hash
/// `stored`, compared in constant time (`false` for any other kind of
/// stored value).
pub fn token_secret_matches(stored: &str, id: &str, secret: &str) -> bool {
    use subtle::ConstantTimeEq;
    let Some(digest) = stored.strip_prefix(KEYED_HASH_PREFIX) else {
        return false;
    };
    let expected = token_secret_hash(id, secret);
    let expected = &expected.as_bytes()[KEYED_HASH_PREFIX.len()..];
    digest.len() == expected.len() && bool::from(digest.as_bytes().ct_eq(expected))
}

fn keyed_digest(id: &str, secret: &str) -> [u8; 32] {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(KEYED_HASH_CONTEXT);
    mac.update(id.as_bytes());
    mac.finalize().into_bytes().into()
}

fn is_lower_hex(text: &str, length: usize) -> bool {
    text.len() == length
        && text
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// Whether `id` is a token id (16 lowercase hex digits).
pub fn is_token_id(id: &str) -> bool {
    is_lower_hex(id, TOKEN_ID_LENGTH)
}

/// The token as a client presents it.
pub fn token_text(id: &str, secret: &str) -> String {
    assert!(is_token_id(id), "token id {id:?}");
    assert!(is_lower_hex(secret, TOKEN_SECRET_LENGTH), "token secret");
    format!("{TOKEN_PREFIX}{id}_{secret}")
}

/// A token's id and secret, if `text` has a token's form.
pub fn parse_token(text: &str) -> Option<(&str, &str)> {
    let (id, secret) = text.strip_prefix(TOKEN_PREFIX)?.split_once('_')?;
    (is_token_id(id) && is_lower_hex(secret, TOKEN_SECRET_LENGTH)).then_some((id, secret))
}

fn read_token_id(reader: &mut BodyReader<'_>) -> Result<String, BodyError> {
    let id = reader.str("token")?;
    if !is_token_id(id) {
        return Err(BodyError::Invalid {
            field: "token",
            reason: "not 16 lowercase hex digits",
        });
    }
    Ok(id.to_owned())
}

/// Create a token for a user. Metadata plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateToken {
    /// The token's id (chosen at random by the client).
    pub id: String,
    /// The user it signs in as.
    pub user: String,
    /// Its secret's stored hash: [`token_secret_hash`] (or, from clients
    /// before keyed hashes, an Argon2id hash in PHC form, which nodes no
    /// longer accept in new requests but a metadata log may still hold).
    pub secret_hash: String,
    /// What it is for, for whoever lists tokens (may be empty).
    pub label: String,
    /// When it stops working, in Unix milliseconds (`None`: never).
    pub expires_at_ms: Option<u64>,
}

impl Body for CreateToken {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.id);
        writer.str(&self.user);
        writer.str(&self.secret_hash);
        writer.str(&self.label);
        writer.option_u64(self.expires_at_ms);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<CreateToken, BodyError> {
        let id = read_token_id(reader)?;
        let user = reader.name("user")?;
        let secret_hash = reader.str("secret_hash")?.to_owned();
        if secret_hash_kind(&secret_hash).is_none() {
            return Err(BodyError::Invalid {
                field: "secret_hash",
                reason: "neither $hmac-sha256$ with 64 hex digits nor an Argon2id PHC string",
            });
        }
        let label = reader.str("label")?.to_owned();
        if label.len() > TOKEN_LABEL_LENGTH_MAX || label.chars().any(char::is_control) {
            return Err(BodyError::Invalid {
                field: "label",
                reason: "at most 128 bytes, no control characters",
            });
        }
        let expires_at_ms = reader.option_u64("expires_at_ms")?;
        Ok(CreateToken {
            id,
            user,
            secret_hash,
            label,
            expires_at_ms,
        })
    }
}

/// Revoke a token: it signs in no more, and connections signed in with it
/// are refused from their next request. Metadata plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokeToken {
    /// The token's id.
    pub id: String,
}

impl Body for RevokeToken {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.id);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<RevokeToken, BodyError> {
        Ok(RevokeToken {
            id: read_token_id(reader)?,
        })
    }
}

/// A token as listed (never its secret nor its hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenInfo {
    /// Its id.
    pub id: String,
    /// What it is for.
    pub label: String,
    /// When it stops working, in Unix milliseconds (`None`: never).
    pub expires_at_ms: Option<u64>,
}

pub(crate) fn write_token_info(writer: &mut BodyWriter, token: &TokenInfo) {
    writer.str(&token.id);
    writer.str(&token.label);
    writer.option_u64(token.expires_at_ms);
}

pub(crate) fn read_token_info(reader: &mut BodyReader<'_>) -> Result<TokenInfo, BodyError> {
    Ok(TokenInfo {
        id: read_token_id(reader)?,
        label: reader.str("label")?.to_owned(),
        expires_at_ms: reader.option_u64("expires_at_ms")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef";

    fn secret() -> String {
        "ab".repeat(32)
    }

    #[test]
    fn a_token_reads_back_as_its_id_and_secret() {
        let text = token_text(ID, &secret());
        assert!(text.starts_with("strand_0123456789abcdef_abab"), "{text}");
        assert_eq!(parse_token(&text), Some((ID, secret().as_str())));
        for bad in [
            "",
            "strand_",
            "strand_0123456789abcdef",
            "strand_0123456789abcdef_",
            "strand_0123456789ABCDEF_abab",
            "token_0123456789abcdef_abab",
            &format!("strand_0123456789abcdef_{}", "ab".repeat(31)),
            &format!("strand_0123456789abcdeff_{}", secret()),
            &format!("strand_0123456789abcdef_{}x", "ab".repeat(31)),
        ] {
            assert_eq!(parse_token(bad), None, "{bad}");
        }
    }

    #[test]
    fn token_operations_round_trip() {
        let create = CreateToken {
            id: ID.to_owned(),
            user: "ci".to_owned(),
            secret_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".to_owned(),
            label: "nightly deploy".to_owned(),
            expires_at_ms: Some(1_800_000_000_000),
        };
        assert_eq!(
            CreateToken::from_bytes(&create.to_vec()),
            Ok(create.clone())
        );
        let forever = CreateToken {
            expires_at_ms: None,
            label: String::new(),
            ..create.clone()
        };
        assert_eq!(CreateToken::from_bytes(&forever.to_vec()), Ok(forever));
        let revoke = RevokeToken { id: ID.to_owned() };
        assert_eq!(RevokeToken::from_bytes(&revoke.to_vec()), Ok(revoke));
        let plain = CreateToken {
            secret_hash: secret(),
            ..create.clone()
        };
        let keyed = CreateToken {
            secret_hash: token_secret_hash(ID, &secret()),
            ..create.clone()
        };
        assert_eq!(CreateToken::from_bytes(&keyed.to_vec()), Ok(keyed));
        assert!(CreateToken::from_bytes(&plain.to_vec()).is_err());
        let bad_id = RevokeToken {
            id: "xyz".to_owned(),
        };
        assert!(RevokeToken::from_bytes(&bad_id.to_vec()).is_err());
        let shouting = CreateToken {
            label: "a\nb".to_owned(),
            ..create
        };
        assert!(CreateToken::from_bytes(&shouting.to_vec()).is_err());
    }

    #[test]
    fn a_keyed_secret_hash_matches_its_secret_and_id_only() {
        let stored = token_secret_hash(ID, &secret());
        assert!(stored.starts_with(KEYED_HASH_PREFIX), "{stored}");
        assert_eq!(secret_hash_kind(&stored), Some(SecretHashKind::Keyed));
        assert!(!stored.contains(&secret()), "no secret in {stored}");
        assert!(token_secret_matches(&stored, ID, &secret()));
        assert!(!token_secret_matches(&stored, ID, &"cd".repeat(32)));
        assert!(!token_secret_matches(
            &stored,
            "fedcba9876543210",
            &secret()
        ));
        assert!(!token_secret_matches(
            &stored[..stored.len() - 1],
            ID,
            &secret()
        ));
        let argon = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA";
        assert_eq!(secret_hash_kind(argon), Some(SecretHashKind::Argon2id));
        assert!(!token_secret_matches(argon, ID, &secret()));
        for bad in ["", "$hmac-sha256$", "$hmac-sha256$AB", "$md5$00"] {
            assert_eq!(secret_hash_kind(bad), None, "{bad}");
        }
    }
}
