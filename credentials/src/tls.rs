//! TLS material, loaded once: the PEM files of the cluster's CA and of a
//! node's or user's certificate and key, the crypto provider every
//! configuration uses, and the [`Connector`] that dials a node and checks
//! the name its certificate carries (the host dialed, or a node's own
//! name on the replica bus).

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

/// A loaded client configuration: wraps a TCP stream in TLS, checking
/// the name the node's certificate carries.
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
    /// A connector of a loaded configuration; `server_name` overrides the
    /// name checked in a node's certificate (default: the host dialed).
    pub fn of_config(config: Arc<rustls::ClientConfig>, server_name: Option<String>) -> Connector {
        Connector {
            connector: TlsConnector::from(config),
            server_name,
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
        let error = root_store(Path::new("/nonexistent/ca.pem")).expect_err("no file");
        assert!(
            matches!(&error, TlsError::File { path, .. } if path == Path::new("/nonexistent/ca.pem")),
            "{error}"
        );
    }
}
