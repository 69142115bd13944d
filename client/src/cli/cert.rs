//! `strand cert revoke`: revoke a user certificate (the built-in `admin`'s
//! included) by its SHA-256 fingerprint, or by the certificate file.

use std::io::Write;
use std::path::PathBuf;

use super::errors::CliError;
use crate::Client;

/// `strand cert ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum CertCommand {
    /// Revoke a user certificate: it signs in no more, on any node, and
    /// connections signed in with it are refused from their next request.
    Revoke {
        /// The certificate's SHA-256 fingerprint (64 hex digits; colons,
        /// as `openssl x509 -fingerprint -sha256` prints them, allowed).
        #[arg(required_unless_present = "file", conflicts_with = "file")]
        fingerprint: Option<String>,
        /// The certificate's PEM file, instead of its fingerprint.
        #[arg(long)]
        file: Option<PathBuf>,
    },
}

/// Runs one `strand cert` command.
pub(crate) async fn run(
    client: &Client,
    command: CertCommand,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let CertCommand::Revoke { fingerprint, file } = command;
    let fingerprint = match (fingerprint, file) {
        (Some(fingerprint), _) => fingerprint,
        (None, Some(path)) => crate::users::certificate_fingerprint_of_file(&path)
            .map_err(|error| CliError::client("read the certificate", error))?,
        (None, None) => {
            return Err(CliError::Usage(
                "name the certificate: FINGERPRINT or --file FILE".to_owned(),
            ));
        }
    };
    let doing = format!("revoke certificate {fingerprint}");
    let answers = client
        .revoke_certificate(&fingerprint)
        .await
        .map_err(|error| CliError::client(&doing, error))?;
    let done = format!("revoked certificate {fingerprint}");
    super::user::report_withdrawal(&doing, &done, &answers, json, out)
}
