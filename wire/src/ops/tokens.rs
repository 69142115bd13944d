//! Access tokens: a revocable credential of one user, for programs that
//! should not hold the user's password (a CI job, a service). A token
//! signs in as its user with that user's permissions, until it is revoked,
//! its user is deleted, or it expires.
//!
//! A token reads `strand_<id>_<secret>`: 16 hex digits that name it (the
//! id is listed and revoked), then 64 hex digits of secret (256 random
//! bits). The catalog keeps the id and an Argon2id hash of the secret,
//! made by the client that created it; the secret is shown once, to
//! whoever created it, and never stored or sent again in the clear.

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
    /// An Argon2id hash of its secret, in PHC form.
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
        if !secret_hash.starts_with("$argon2id$") || secret_hash.len() > SECRET_HASH_LENGTH_MAX {
            return Err(BodyError::Invalid {
                field: "secret_hash",
                reason: "not an Argon2id hash in PHC form",
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
}
