//! A certificate file's fingerprint: what `strand cert revoke` takes and
//! what `strand-server user-cert` prints beside the file it writes.

use std::path::Path;

use crate::tls::{TlsError, load_certs};

/// The SHA-256 fingerprint (lowercase hex) of the first certificate in the
/// PEM file at `path`: how the cluster names a certificate it revokes.
pub fn certificate_fingerprint_of_file(path: &Path) -> Result<String, TlsError> {
    let certs = load_certs(path)?;
    let first = certs.first().ok_or_else(|| TlsError::File {
        path: path.to_path_buf(),
        reason: "no certificate in it".to_owned(),
    })?;
    Ok(strand_wire::ops::certificate_fingerprint(first.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_a_certificate_is_a_typed_error_naming_it() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("empty.pem");
        std::fs::write(&path, "not a certificate\n").expect("written");
        let error = certificate_fingerprint_of_file(&path).expect_err("no certificate");
        assert!(
            matches!(&error, TlsError::File { path: named, .. } if named == &path),
            "{error}"
        );
    }
}
