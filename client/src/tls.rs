//! TLS on client connections: which CA a node's certificate must chain to,
//! and (for a node's own client) the certificate this side presents.
//!
//! [`ClientTls`] names files, so that a configuration stays plain data; the
//! driver loads them once at connect ([`ClientTls::connector`]) and every
//! connection shares the result. The name a node's certificate must carry
//! is the host of the address dialed (an IP address or a DNS name), unless
//! [`ClientTls::server_name`] says otherwise.
//!
//! PEM loading lives here too, for the node's own listeners.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::TlsConnector;

/// Why TLS could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file could not be read or holds no PEM block of
    /// the kind needed.
    #[error("{}: {reason}", .path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// The certificates and key do not make a usable configuration.
    #[error("TLS configuration: {0}")]
    Config(String),
}

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
        Ok(Connector {
            connector: TlsConnector::from(Arc::new(config)),
            server_name: self.server_name.clone(),
        })
    }
}

/// A loaded [`ClientTls`]: wraps a TCP stream in TLS.
#[derive(Clone)]
pub struct Connector {
    connector: TlsConnector,
    server_name: Option<String>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// A connector presenting `identity` (already loaded) and trusting
    /// `roots`: how a node dials its peers.
    pub fn of_config(config: Arc<rustls::ClientConfig>) -> Connector {
        Connector {
            connector: TlsConnector::from(config),
            server_name: None,
        }
    }

    /// Runs the handshake over `stream`, checking the node's certificate
    /// names `expected_name`, or else the host of `address`.
    pub async fn connect(
        &self,
        address: &str,
        expected_name: Option<&str>,
        stream: tokio::net::TcpStream,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
        let name = expected_name
            .or(self.server_name.as_deref())
            .unwrap_or_else(|| host_of(address));
        let name = ServerName::try_from(name.to_owned()).map_err(|error| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{name:?} is not a server name: {error}"),
            )
        })?;
        self.connector.connect(name, stream).await
    }
}

/// The crypto every TLS configuration of Strand uses: *ring*, which builds
/// with the C compiler every machine here has (the aws-lc provider, with
/// post-quantum key exchange, needs cmake and a much longer build).
#[allow(deprecated)] // deprecated only for lacking post-quantum key exchange
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The host part of `host:port` (brackets of an IPv6 address removed).
fn host_of(address: &str) -> &str {
    let host = address
        .rsplit_once(':')
        .map_or(address, |(host, _port)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// The certificates of a PEM file (a chain: leaf first).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let file_error = |reason: String| TlsError::File {
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|error| file_error(error.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| file_error(error.to_string()))?;
    if certs.is_empty() {
        return Err(file_error("no certificate in it".to_owned()));
    }
    Ok(certs)
}

/// The private key of a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|error| TlsError::File {
        path: path.to_path_buf(),
        reason: error.to_string(),
    })
}

/// A root store holding the CA certificates of the PEM file at `ca`.
pub fn root_store(ca: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in load_certs(ca)? {
        roots.add(cert).map_err(|error| TlsError::File {
            path: ca.to_path_buf(),
            reason: format!("not a usable CA certificate: {error}"),
        })?;
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expected_name_is_the_dialed_host() {
        assert_eq!(host_of("127.0.0.1:7101"), "127.0.0.1");
        assert_eq!(host_of("node-1.example.com:7101"), "node-1.example.com");
        assert_eq!(host_of("[::1]:7101"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
    }

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
