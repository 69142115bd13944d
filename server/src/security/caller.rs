//! Who calls on a client connection, as far as the node can tell from its
//! TLS handshake: a node of the cluster, a client, or anyone (plaintext).
//! The audit log names the caller by it. A connection's [`Peer`] adds what it
//! presented and where it comes from.

/// Who is at the other end of a client connection, as far as the node knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// A node of this cluster (it presented its node certificate).
    Node(u32),
    /// Someone without a node certificate, on a TLS port.
    Client,
    /// Anyone: the port is plaintext (loopback or `insecure`), so nothing
    /// tells a node from a client.
    Unverified,
}

impl Caller {
    /// Whether this caller proved with a node certificate that it is a
    /// node of this cluster.
    pub fn is_node_cert(self) -> bool {
        matches!(self, Caller::Node(_))
    }

    /// How the audit log names it.
    pub fn identity(self) -> String {
        match self {
            Caller::Node(node) => format!("node {node}"),
            Caller::Client => "anonymous".to_owned(),
            Caller::Unverified => "unverified".to_owned(),
        }
    }
}

/// One client connection as the node knows it.
pub struct Peer {
    /// Who it is, as far as its handshake tells.
    pub caller: Caller,
    /// The user its certificate names, and the certificate's SHA-256
    /// fingerprint (signed in from the start, unless it is revoked).
    pub certificate_user: Option<(String, String)>,
    /// Its address, for the audit log.
    pub source: String,
    /// Its IP address, for the failed sign-in limits.
    pub ip: std::net::IpAddr,
    /// Its admin requests awaiting replies (see [`crate::security::audit`]).
    pub audit: crate::security::audit::Pending,
}
