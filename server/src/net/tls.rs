//! Transport security: TLS on the client port, mutual TLS on the replica
//! bus, and the certificates of a cluster.
//!
//! A node's certificate chains to the cluster's CA and names the node as
//! the DNS name [`node_name`] (`node-<id>.strand`), beside the hosts clients
//! dial. On the bus both sides present their node certificates: the dialer
//! checks that the acceptor's names the node it dialed, and the acceptor
//! that the dialer's names the node its `Ping` claims, so a peer is the node
//! its certificate says, whatever its frames say. The client port asks for
//! a certificate but does not require one: a node's own client presents its
//! node certificate ([`NodeTls::node_of`] tells who it is); a user may
//! present a user certificate, which names the user as the URI
//! [`user_uri`] (`strand://user/<name>`, [`user_of`] reads it) and signs the
//! connection in as that user; others sign in with a password or a token.
//!
//! [`generate`] writes a CA and node certificates for a local cluster
//! (`strand-server certs`, `dev-cluster`); [`generate_user`] a user
//! certificate signed by that CA (`strand-server user-cert`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use strand_credentials::tls::{Connector, TlsError, load_certs, load_key, provider, root_store};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use crate::node::config::TlsFiles;

/// The reading side of a connection, plaintext or TLS.
pub type ReadStream = Box<dyn AsyncRead + Send + Unpin>;
/// The writing side of a connection, plaintext or TLS.
pub type WriteStream = Box<dyn AsyncWrite + Send + Unpin>;

/// The DNS name a node's certificate carries to say which node it is.
pub fn node_name(node: u32) -> String {
    format!("node-{node}.strand")
}

/// What a user certificate's URI subject alternative name starts with.
const USER_URI_PREFIX: &str = "strand://user/";

/// The URI a user certificate carries to say which user it is.
pub fn user_uri(user: &str) -> String {
    format!("{USER_URI_PREFIX}{user}")
}

/// The user a certificate (verified already, by the handshake) names, if
/// it names exactly one valid user name.
pub fn user_of(cert: &CertificateDer<'_>) -> Option<String> {
    use x509_parser::extensions::GeneralName;
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let names = parsed.subject_alternative_name().ok()??;
    let mut users = names
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::URI(uri) => uri.strip_prefix(USER_URI_PREFIX),
            _ => None,
        });
    let user = users.next()?;
    if users.next().is_some() {
        return None; // ambiguous: sign in as nobody
    }
    strand_wire::codec::validate_name("user", user).ok()?;
    Some(user.to_owned())
}

/// A node's loaded TLS: acceptors for its two listeners and the connector
/// it dials peers with.
#[derive(Clone)]
pub struct NodeTls {
    client_port: TlsAcceptor,
    bus: TlsAcceptor,
    bus_connector: Connector,
    files: TlsFiles,
}

impl std::fmt::Debug for NodeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeTls")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl NodeTls {
    /// Loads the node's certificate, key and the cluster's CA.
    pub fn load(files: &TlsFiles) -> Result<NodeTls, TlsError> {
        let config_error = |error: rustls::Error| TlsError::Config(error.to_string());
        let roots = Arc::new(root_store(&files.ca)?);
        let certs = load_certs(&files.cert)?;
        let key = load_key(&files.key)?;
        let server = |verifier| {
            rustls::ServerConfig::builder_with_provider(provider())
                .with_protocol_versions(&[&rustls::version::TLS13])
                .map_err(config_error)?
                .with_client_cert_verifier(verifier)
                .with_single_cert(certs.clone(), key.clone_key())
                .map_err(config_error)
        };
        let verifier_error = |error: rustls::server::VerifierBuilderError| {
            TlsError::Config(format!("client certificate verifier: {error}"))
        };
        let optional = WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), provider())
            .allow_unauthenticated()
            .build()
            .map_err(verifier_error)?;
        let required = WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), provider())
            .build()
            .map_err(verifier_error)?;
        let dialer = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(config_error)?
            .with_root_certificates(Arc::clone(&roots))
            .with_client_auth_cert(certs.clone(), key.clone_key())
            .map_err(config_error)?;
        Ok(NodeTls {
            client_port: TlsAcceptor::from(Arc::new(server(optional)?)),
            bus: TlsAcceptor::from(Arc::new(server(required)?)),
            bus_connector: Connector::of_config(Arc::new(dialer), None),
            files: files.clone(),
        })
    }

    /// Runs the server side of a client-port handshake.
    pub async fn accept_client(
        &self,
        stream: TcpStream,
    ) -> std::io::Result<(ReadStream, WriteStream, Option<CertificateDer<'static>>)> {
        let stream = self.client_port.accept(stream).await?;
        let peer = leaf_of(stream.get_ref().1.peer_certificates());
        let (read, write) = tokio::io::split(stream);
        Ok((Box::new(read), Box::new(write), peer))
    }

    /// Runs the server side of a bus handshake; the dialer presented a
    /// certificate of the cluster's CA (or the handshake failed).
    pub async fn accept_peer(
        &self,
        stream: TcpStream,
    ) -> std::io::Result<(ReadStream, WriteStream, CertificateDer<'static>)> {
        let stream = self.bus.accept(stream).await?;
        let Some(peer) = leaf_of(stream.get_ref().1.peer_certificates()) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "the peer presented no certificate",
            ));
        };
        let (read, write) = tokio::io::split(stream);
        Ok((Box::new(read), Box::new(write), peer))
    }

    /// Runs the client side of a bus handshake to node `peer` at `address`:
    /// its certificate must name [`node_name`]`(peer)`.
    pub async fn dial_peer(
        &self,
        peer: u32,
        address: &str,
        stream: TcpStream,
    ) -> std::io::Result<(ReadStream, WriteStream)> {
        let stream = self
            .bus_connector
            .connect(address, Some(&node_name(peer)), stream)
            .await?;
        let (read, write) = tokio::io::split(stream);
        Ok((Box::new(read), Box::new(write)))
    }

    /// Which of `nodes` a certificate (verified already, by the handshake)
    /// names, if any.
    pub fn node_of(cert: &CertificateDer<'_>, nodes: impl IntoIterator<Item = u32>) -> Option<u32> {
        nodes
            .into_iter()
            .find(|&node| certificate_names_node(cert, node))
    }
}

/// Whether a certificate (verified already) names node `node`.
pub fn certificate_names_node(cert: &CertificateDer<'_>, node: u32) -> bool {
    let Ok(parsed) = webpki::EndEntityCert::try_from(cert) else {
        return false;
    };
    let Ok(name) = ServerName::try_from(node_name(node)) else {
        return false;
    };
    parsed.verify_is_valid_for_subject_name(&name).is_ok()
}

fn leaf_of(certs: Option<&[CertificateDer<'static>]>) -> Option<CertificateDer<'static>> {
    certs.and_then(|certs| certs.first()).cloned()
}

/// Splits a plaintext stream into its boxed halves.
pub fn split_plain(stream: TcpStream) -> (ReadStream, WriteStream) {
    let (read, write) = stream.into_split();
    (Box::new(read), Box::new(write))
}

/// The files [`generate`] writes for node `node` under `dir`.
pub fn node_files(dir: &Path, node: u32) -> TlsFiles {
    TlsFiles {
        ca: dir.join("ca.pem"),
        cert: dir.join(format!("node-{node}.pem")),
        key: dir.join(format!("node-{node}.key")),
    }
}

/// Writes a new CA (`ca.pem`, `ca.key`) and a certificate and key per node
/// (`node-<id>.pem`, `node-<id>.key`) under `dir`, each naming
/// [`node_name`] and `hosts` (DNS names or IP addresses clients dial). Keys
/// are written readable by their owner only.
pub fn generate(dir: &Path, nodes: &[u32], hosts: &[String]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let ca_key = rcgen::KeyPair::generate().map_err(|error| format!("CA key: {error}"))?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())
        .map_err(|error| format!("CA: {error}"))?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Strand cluster CA");
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .map_err(|error| format!("CA: {error}"))?;
    write_file(&dir.join("ca.pem"), &ca_cert.pem(), false)?;
    write_file(&dir.join("ca.key"), &ca_key.serialize_pem(), true)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    for &node in nodes {
        let mut names = vec![node_name(node)];
        names.extend(hosts.iter().cloned());
        let mut params = rcgen::CertificateParams::new(names)
            .map_err(|error| format!("node {node}: {error}"))?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, node_name(node));
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = rcgen::KeyPair::generate().map_err(|error| format!("node {node}: {error}"))?;
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(|error| format!("node {node}: {error}"))?;
        let files = node_files(dir, node);
        write_file(&files.cert, &cert.pem(), false)?;
        write_file(&files.key, &key.serialize_pem(), true)?;
    }
    Ok(())
}

/// Writes a certificate and key for user `user` (`user-<name>.pem`,
/// `user-<name>.key`, the key readable by its owner only) under `dir`,
/// signed by the CA there (`ca.pem`, `ca.key`). Presented to a node's
/// client port, it signs the connection in as `user` with its rights.
pub fn generate_user(dir: &Path, user: &str) -> Result<(PathBuf, PathBuf), String> {
    strand_wire::codec::validate_name("user", user).map_err(|error| error.to_string())?;
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|error| format!("{}: {error}", path.display()))
    };
    let ca_key =
        rcgen::KeyPair::from_pem(&read("ca.key")?).map_err(|error| format!("ca.key: {error}"))?;
    let issuer = rcgen::Issuer::from_ca_cert_pem(&read("ca.pem")?, ca_key)
        .map_err(|error| format!("ca.pem: {error}"))?;
    let mut params = rcgen::CertificateParams::default();
    let uri = rcgen::string::Ia5String::try_from(user_uri(user))
        .map_err(|error| format!("user {user}: {error}"))?;
    params.subject_alt_names = vec![rcgen::SanType::URI(uri)];
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("Strand user {user}"));
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().map_err(|error| format!("user {user}: {error}"))?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|error| format!("user {user}: {error}"))?;
    let cert_path = dir.join(format!("user-{user}.pem"));
    let key_path = dir.join(format!("user-{user}.key"));
    write_file(&cert_path, &cert.pem(), false)?;
    write_file(&key_path, &key.serialize_pem(), true)?;
    Ok((cert_path, key_path))
}

fn write_file(path: &Path, text: &str, secret: bool) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mode = if secret { 0o600 } else { 0o644 };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(|error| format!("{}: {error}", path.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|error| format!("{}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificates_load_and_name_their_node_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        generate(
            dir.path(),
            &[1, 2],
            &["127.0.0.1".to_owned(), "localhost".to_owned()],
        )
        .expect("generated");
        NodeTls::load(&node_files(dir.path(), 1)).expect("loads");
        let cert = load_certs(&dir.path().join("node-2.pem")).expect("cert");
        assert!(certificate_names_node(&cert[0], 2));
        assert!(!certificate_names_node(&cert[0], 1));
        assert_eq!(NodeTls::node_of(&cert[0], [1, 2, 3]), Some(2));
        let key_mode = std::fs::metadata(dir.path().join("node-2.key"))
            .map(|meta| std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777)
            .expect("key");
        assert_eq!(key_mode, 0o600);
    }

    #[test]
    fn a_user_certificate_names_its_user_and_no_node() {
        let dir = tempfile::tempdir().expect("tempdir");
        generate(dir.path(), &[1], &["127.0.0.1".to_owned()]).expect("generated");
        let (cert, key) = generate_user(dir.path(), "svc_reader-1").expect("user certificate");
        assert!(load_key(&key).is_ok());
        let user = load_certs(&cert).expect("cert");
        assert_eq!(user_of(&user[0]), Some("svc_reader-1".to_owned()));
        assert_eq!(NodeTls::node_of(&user[0], [1, 2, 3]), None);
        let node = load_certs(&dir.path().join("node-1.pem")).expect("cert");
        assert_eq!(user_of(&node[0]), None, "a node certificate names no user");
        assert!(generate_user(dir.path(), "no/slashes").is_err());
        let empty = tempfile::tempdir().expect("tempdir");
        assert!(generate_user(empty.path(), "svc").is_err(), "no CA there");
    }
}
