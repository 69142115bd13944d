//! TLS on client connections: which CA a node's certificate must chain to,
//! and the certificate this side presents, if any.
//!
//! [`ClientTls`] names files, so that a configuration stays plain data; the
//! driver loads them once at connect ([`ClientTls::connector`]) and every
//! connection shares the result. The name a node's certificate must carry
//! is the host of the address dialed (an IP address or a DNS name), unless
//! [`ClientTls::server_name`] says otherwise. The loading itself is
//! `strand_credentials::tls`, shared with the node.

use std::path::PathBuf;
use std::sync::Arc;

pub use strand_credentials::tls::{Connector, TlsError};
use strand_credentials::tls::{load_certs, load_key, provider, root_store};

/// TLS settings of a client (SDK, CLI, or a node's own client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTls {
    /// The cluster's CA certificate (PEM): a node's certificate must chain to it.
    pub ca: PathBuf,
    /// Overrides the name checked in the node's certificate (default: the
    /// host part of the address dialed).
    pub server_name: Option<String>,
    /// A certificate and key to present (PEM): a node's own client uses its
    /// node certificate, so that the node it calls knows it for a node.
    pub identity: Option<(PathBuf, PathBuf)>,
}

impl ClientTls {
    /// Verify nodes against the CA certificate at `ca`.
    pub fn new(ca: impl Into<PathBuf>) -> ClientTls {
        ClientTls {
            ca: ca.into(),
            server_name: None,
            identity: None,
        }
    }

    /// Loads the files into a connector every connection shares.
    pub fn connector(&self) -> Result<Connector, TlsError> {
        let roots = root_store(&self.ca)?;
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|error| TlsError::Config(error.to_string()))?
            .with_root_certificates(roots);
        let config = match &self.identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
                .map_err(|error| TlsError::Config(error.to_string()))?,
            None => builder.with_no_client_auth(),
        };
        Ok(Connector::of_config(
            Arc::new(config),
            self.server_name.clone(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_missing_ca_file_is_a_typed_error_naming_it() {
        let error = ClientTls::new("/nonexistent/ca.pem")
            .connector()
            .expect_err("no file");
        assert!(
            matches!(&error, TlsError::File { path, .. } if path == Path::new("/nonexistent/ca.pem")),
            "{error}"
        );
    }
}
