//! `strand user create|list|delete|grant|revoke`.
//!
//! `create` reads the password from the first line of stdin, so that it is
//! never an argument (visible to every process on the machine); the SDK
//! hashes it with Argon2id before it is sent.

use std::io::Write;

use serde::Serialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::args::UserCommand;
use super::errors::CliError;
use super::print_json;
use super::table::Table;
use crate::Client;

/// One user as `user list --json` prints it.
#[derive(Debug, Serialize)]
struct UserView {
    name: String,
    permissions: Vec<String>,
    /// Its access tokens' ids (`strand token list` shows more).
    tokens: Vec<String>,
}

/// Runs one `strand user` command.
pub(crate) async fn run(
    client: &Client,
    command: UserCommand,
    mut stdin: impl AsyncBufRead + Unpin,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let (doing, done) = match command {
        UserCommand::Create { name } => {
            let mut password = String::new();
            stdin.read_line(&mut password).await?;
            let password = password.trim_end_matches(['\n', '\r']);
            if password.is_empty() {
                return Err(CliError::Usage(format!(
                    "user create reads {name}'s password from the first line of stdin; it was empty"
                )));
            }
            let doing = format!("create user {name}");
            client
                .create_user(&name, password)
                .await
                .map_err(|error| CliError::client(&doing, error))?;
            (doing, format!("created user {name}"))
        }
        UserCommand::List => return list(client, json, out).await,
        UserCommand::Delete { name, .. } => {
            let doing = format!("delete user {name}");
            let answers = client
                .delete_user(&name)
                .await
                .map_err(|error| CliError::client(&doing, error))?;
            let done = format!("deleted user {name}");
            return report_withdrawal(&doing, &done, &answers, json, out);
        }
        UserCommand::Grant { name, permission } => {
            let doing = format!("grant {} to {name}", permission.text());
            client
                .grant_permission(&name, permission.clone())
                .await
                .map_err(|error| CliError::client(&doing, error))?;
            (doing, format!("{name} may now {}", permission.text()))
        }
        UserCommand::Revoke { name, permission } => {
            let doing = format!("revoke {} from {name}", permission.text());
            let answers = client
                .revoke_permission(&name, permission.clone())
                .await
                .map_err(|error| CliError::client(&doing, error))?;
            let done = format!("{name} no longer holds {}", permission.text());
            return report_withdrawal(&doing, &done, &answers, json, out);
        }
    };
    if json {
        return print_json(out, &serde_json::json!({ "done": doing }));
    }
    writeln!(out, "{done}")?;
    Ok(())
}

/// Reports a withdrawn credential or right (a deleted user, a revoked
/// permission or token): done, and which nodes did not confirm they apply
/// it yet (down or cut off: they go on allowing it until they catch up).
pub(crate) fn report_withdrawal(
    doing: &str,
    done: &str,
    answers: &[crate::admin::NodeAnswer<()>],
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let unconfirmed: Vec<String> = answers
        .iter()
        .filter_map(|answer| {
            let error = answer.result.as_ref().err()?;
            Some(format!("node {} ({error})", answer.node))
        })
        .collect();
    if json {
        return print_json(
            out,
            &serde_json::json!({ "done": doing, "unconfirmed": unconfirmed }),
        );
    }
    writeln!(out, "{done}")?;
    if !unconfirmed.is_empty() {
        writeln!(
            out,
            "not yet confirmed by {}: each allows the old credentials until it catches up",
            unconfirmed.join(", ")
        )?;
    }
    Ok(())
}

async fn list(client: &Client, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let users = client
        .list_users()
        .await
        .map_err(|error| CliError::client("list users", error))?;
    let views: Vec<UserView> = users
        .users
        .into_iter()
        .map(|user| UserView {
            name: user.name,
            permissions: user
                .permissions
                .iter()
                .map(|permission| permission.text())
                .collect(),
            tokens: user.tokens.into_iter().map(|token| token.id).collect(),
        })
        .collect();
    if json {
        return print_json(out, &views);
    }
    let mut table = Table::new(&["USER", "PERMISSIONS", "TOKENS"]);
    for view in views {
        let permissions = if view.permissions.is_empty() {
            "-".to_owned()
        } else {
            view.permissions.join(", ")
        };
        table.row(vec![view.name, permissions, view.tokens.len().to_string()]);
    }
    write!(out, "{}", table.render())?;
    Ok(())
}
