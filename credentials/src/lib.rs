//! # strand-credentials: what nodes and clients both do with credentials
//!
//! A node and the SDK handle the same material: the cluster's CA, node and
//! user certificates, and Argon2id password hashes. This crate is the one
//! place that reads and makes them, so that the node need not depend on the
//! SDK (nor the SDK on the node) to share it.
//!
//! - [`tls`]: PEM loading ([`tls::load_certs`], [`tls::load_key`],
//!   [`tls::root_store`]), the crypto provider every configuration uses, and
//!   the [`tls::Connector`] that dials a node and checks the name its
//!   certificate carries.
//! - [`password`]: a password's Argon2id hash in PHC form, as the catalog
//!   stores it.
//! - [`fingerprint`]: a certificate file's SHA-256 fingerprint, how the
//!   cluster names a certificate it revokes.

pub mod fingerprint;
pub mod password;
pub mod tls;

pub use fingerprint::certificate_fingerprint_of_file;
pub use password::{PASSWORD_LENGTH_MIN, PasswordError, hash_password};
pub use tls::TlsError;
