//! Revoking user certificates: a certificate of the cluster's CA that names
//! a user signs in as that user at the handshake, the built-in `admin`
//! included, who is in no catalog and so cannot be deleted. The catalog
//! keeps a list of revoked certificates, each by the SHA-256 fingerprint
//! of its DER encoding ([`certificate_fingerprint`]); a node refuses a
//! connection whose certificate is listed from its first request, and open
//! connections from their next one.

use sha2::{Digest, Sha256};

use crate::codec::{Body, BodyReader, BodyWriter};
use crate::error::BodyError;

/// Hex digits of a certificate fingerprint (SHA-256).
pub const FINGERPRINT_LENGTH: usize = 64;

/// Most revoked certificates the cluster keeps.
pub const REVOKED_CERTIFICATES_MAX: usize = 4096;

/// The SHA-256 fingerprint of a certificate's DER encoding, in lowercase
/// hex (what `openssl x509 -noout -fingerprint -sha256` prints, without
/// the colons, in lowercase).
pub fn certificate_fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Whether `text` is a fingerprint (64 lowercase hex digits).
pub fn is_fingerprint(text: &str) -> bool {
    text.len() == FINGERPRINT_LENGTH
        && text
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// Revoke a user certificate by its fingerprint: it signs in no more.
/// Metadata plane; revoking one already revoked changes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokeCertificate {
    /// [`certificate_fingerprint`] of the certificate.
    pub fingerprint: String,
}

impl Body for RevokeCertificate {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.fingerprint);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<RevokeCertificate, BodyError> {
        let fingerprint = reader.str("fingerprint")?;
        if !is_fingerprint(fingerprint) {
            return Err(BodyError::Invalid {
                field: "fingerprint",
                reason: "not 64 lowercase hex digits (SHA-256)",
            });
        }
        Ok(RevokeCertificate {
            fingerprint: fingerprint.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revocation_names_a_fingerprint_and_round_trips() {
        let fingerprint = certificate_fingerprint(b"not really DER");
        assert!(is_fingerprint(&fingerprint), "{fingerprint}");
        assert_ne!(fingerprint, certificate_fingerprint(b"another"));
        let revoke = RevokeCertificate { fingerprint };
        assert_eq!(RevokeCertificate::from_bytes(&revoke.to_vec()), Ok(revoke));
        for bad in ["", "AB", &"A".repeat(64), &"a".repeat(63)] {
            let revoke = RevokeCertificate {
                fingerprint: bad.to_owned(),
            };
            assert!(
                RevokeCertificate::from_bytes(&revoke.to_vec()).is_err(),
                "{bad}"
            );
        }
    }
}
