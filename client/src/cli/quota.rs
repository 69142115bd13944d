//! `strand quota set|list`: each user's produce, fetch and request rates,
//! which every node enforces by delaying the user's requests.

use std::io::Write;

use serde::Serialize;
use strand_wire::ops::Quota;

use super::errors::CliError;
use super::print_json;
use super::table::Table;
use crate::Client;

/// `strand quota ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum QuotaCommand {
    /// Set a user's rates on each node (omitted or 0: no limit; all
    /// omitted removes the user's quota). Needs `admin`.
    Set {
        /// The user (it need not exist yet).
        user: String,
        /// Bytes of produced batches per second.
        #[arg(long, default_value_t = 0)]
        produce_bytes_per_sec: u64,
        /// Bytes of fetch replies per second.
        #[arg(long, default_value_t = 0)]
        fetch_bytes_per_sec: u64,
        /// Requests per second, of any kind.
        #[arg(long, default_value_t = 0)]
        requests_per_sec: u32,
    },
    /// List every user's quota. Needs `admin`.
    List,
}

/// One quota as listed.
#[derive(Debug, Serialize)]
struct QuotaView {
    user: String,
    produce_bytes_per_sec: u64,
    fetch_bytes_per_sec: u64,
    requests_per_sec: u32,
}

/// Runs one `strand quota` command.
pub(crate) async fn run(
    client: &Client,
    command: QuotaCommand,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        QuotaCommand::Set {
            user,
            produce_bytes_per_sec,
            fetch_bytes_per_sec,
            requests_per_sec,
        } => {
            let quota = Quota {
                produce_bytes_per_sec,
                fetch_bytes_per_sec,
                requests_per_sec,
            };
            let doing = format!("set the quota of {user}");
            client
                .set_quota(&user, quota)
                .await
                .map_err(|error| CliError::client(&doing, error))?;
            match json {
                true => print_json(out, &serde_json::json!({ "user": user, "set": true })),
                false => Ok(writeln!(out, "set the quota of {user}")?),
            }
        }
        QuotaCommand::List => list(client, json, out).await,
    }
}

async fn list(client: &Client, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let quotas = client
        .quotas()
        .await
        .map_err(|error| CliError::client("list quotas", error))?;
    let views: Vec<QuotaView> = quotas
        .quotas
        .into_iter()
        .map(|(user, quota)| QuotaView {
            user,
            produce_bytes_per_sec: quota.produce_bytes_per_sec,
            fetch_bytes_per_sec: quota.fetch_bytes_per_sec,
            requests_per_sec: quota.requests_per_sec,
        })
        .collect();
    if json {
        return print_json(out, &views);
    }
    let limit = |value: u64| match value {
        0 => "-".to_owned(),
        value => value.to_string(),
    };
    let mut table = Table::new(&["USER", "PRODUCE B/S", "FETCH B/S", "REQUESTS/S"]);
    for view in views {
        table.row(vec![
            view.user,
            limit(view.produce_bytes_per_sec),
            limit(view.fetch_bytes_per_sec),
            limit(u64::from(view.requests_per_sec)),
        ]);
    }
    write!(out, "{}", table.render())?;
    Ok(())
}
