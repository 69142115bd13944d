//! `strand token create|list|revoke`.
//!
//! `create` prints the token once, on stdout alone, so that a script can
//! keep it (`strand token create ci > ci.token`); the cluster keeps only
//! a hash of its secret.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::errors::CliError;
use super::print_json;
use super::table::Table;
use crate::Client;

/// One token as `token list --json` prints it.
#[derive(Debug, Serialize)]
struct TokenView {
    id: String,
    user: String,
    label: String,
    /// RFC 3339, or `None` for a token without expiry.
    expires: Option<String>,
}

fn rfc3339(at_ms: u64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(at_ms);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// `strand token create USER`.
pub(crate) async fn create(
    client: &Client,
    user: &str,
    label: &str,
    expires_in: Option<Duration>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let expires_in_ms =
        expires_in.map(|lifetime| u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX));
    let created = client
        .create_token(user, label, expires_in_ms)
        .await
        .map_err(|error| CliError::client(format!("create a token for {user}"), error))?;
    if json {
        return print_json(
            out,
            &serde_json::json!({
                "id": created.id,
                "user": user,
                "token": created.token,
                "expires": created.expires_at_ms.map(rfc3339),
            }),
        );
    }
    writeln!(out, "{}", created.token)?;
    Ok(())
}

/// `strand token list`.
pub(crate) async fn list(client: &Client, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let users = client
        .list_users()
        .await
        .map_err(|error| CliError::client("list tokens", error))?;
    let views: Vec<TokenView> = users
        .users
        .into_iter()
        .flat_map(|user| {
            let name = user.name;
            user.tokens.into_iter().map(move |token| TokenView {
                id: token.id,
                user: name.clone(),
                label: token.label,
                expires: token.expires_at_ms.map(rfc3339),
            })
        })
        .collect();
    if json {
        return print_json(out, &views);
    }
    let now = SystemTime::now();
    let mut table = Table::new(&["ID", "USER", "LABEL", "EXPIRES"]);
    for view in views {
        let expires = match view.expires {
            None => "never".to_owned(),
            Some(at) => match humantime::parse_rfc3339(&at) {
                Ok(moment) if moment <= now => format!("{at} (expired)"),
                _ => at,
            },
        };
        let label = if view.label.is_empty() {
            "-".to_owned()
        } else {
            view.label
        };
        table.row(vec![view.id, view.user, label, expires]);
    }
    write!(out, "{}", table.render())?;
    Ok(())
}

/// `strand token revoke ID|TOKEN`.
pub(crate) async fn revoke(
    client: &Client,
    token: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let id =
        crate::users::token_id(token).map_err(|error| CliError::client("revoke a token", error))?;
    let doing = format!("revoke token {id}");
    let answers = client
        .revoke_token(&id)
        .await
        .map_err(|error| CliError::client(&doing, error))?;
    super::user::report_withdrawal(&doing, &format!("revoked token {id}"), &answers, json, out)
}
