//! Password hashes: Argon2id in PHC form, with a random salt. The CLI hashes
//! a user's password before it leaves the operator's machine; the dev
//! cluster hashes the admin password it makes.

use argon2::password_hash::{PasswordHasher, SaltString};

/// Shortest password accepted.
pub const PASSWORD_LENGTH_MIN: usize = 8;

/// Why a password was not hashed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    /// Shorter than [`PASSWORD_LENGTH_MIN`] bytes.
    #[error("a password has at least {PASSWORD_LENGTH_MIN} bytes")]
    TooShort,
    /// The hasher refused (a salt or parameter it cannot take).
    #[error("hashing the password: {0}")]
    Hashing(String),
}

/// An Argon2id hash of `password` in PHC form, with a random salt and the
/// crate's default cost (19 MiB, 2 passes: OWASP's recommendation).
pub fn hash_password(password: &str) -> Result<String, PasswordError> {
    if password.len() < PASSWORD_LENGTH_MIN {
        return Err(PasswordError::TooShort);
    }
    let salt_bytes: [u8; 16] = rand::random();
    let salt = SaltString::encode_b64(&salt_bytes)
        .map_err(|error| PasswordError::Hashing(format!("salt: {error}")))?;
    let hash = argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map_err(|error| PasswordError::Hashing(error.to_string()))?;
    Ok(hash.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use argon2::password_hash::{PasswordHash, PasswordVerifier};

    #[test]
    fn a_hash_verifies_its_password_only_and_salts_differ() {
        let first = hash_password("correct horse").expect("hashed");
        let second = hash_password("correct horse").expect("hashed");
        assert_ne!(first, second, "a fresh salt each time");
        assert!(first.starts_with("$argon2id$"), "{first}");
        let parsed = PasswordHash::new(&first).expect("PHC form");
        let argon = argon2::Argon2::default();
        assert!(argon.verify_password(b"correct horse", &parsed).is_ok());
        assert!(argon.verify_password(b"wrong horse", &parsed).is_err());
    }

    #[test]
    fn a_short_password_is_refused() {
        assert_eq!(hash_password("short"), Err(PasswordError::TooShort));
    }
}
