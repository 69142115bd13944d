//! The CLI's configuration file: where the cluster is and how to reach it
//! (addresses, CA, credentials), so that a shell needs one variable
//! (`STRAND_CONFIG`) or none (the default path) instead of several.
//!
//! A value on the command line wins, then one from the environment, then
//! one from the file, then the built-in default. Paths in the file are
//! relative to the file's directory. Secrets are never in the file itself:
//! it names the files that hold them (`password_file`, `token_file`,
//! `key`). An unknown key is an error, so that a typo does not pass
//! silently.

use std::path::{Path, PathBuf};

use clap::ArgMatches;
use clap::parser::ValueSource;
use serde::Deserialize;

use super::args::Cli;
use super::errors::CliError;

/// Addresses as a list or as one comma-separated string.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
enum Addresses {
    One(String),
    Many(Vec<String>),
}

impl Addresses {
    fn into_vec(self) -> Vec<String> {
        match self {
            Addresses::One(text) => text.split(',').map(|part| part.trim().to_owned()).collect(),
            Addresses::Many(list) => list,
        }
    }
}

/// The file's keys, each the name of the global option it stands for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CliConfig {
    cluster: Option<Addresses>,
    cluster_id: Option<u64>,
    ca: Option<PathBuf>,
    tls_server_name: Option<String>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    user: Option<String>,
    password_file: Option<PathBuf>,
    token_file: Option<PathBuf>,
    timeout_ms: Option<u64>,
}

/// Where the file is looked for without `--config`:
/// `$XDG_CONFIG_HOME/strand/cli.toml`, else `~/.config/strand/cli.toml`.
pub(crate) fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("strand").join("cli.toml"))
}

/// Reads the file at `path`, its relative paths made relative to its
/// directory.
pub(crate) fn load(path: &Path) -> Result<CliConfig, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| CliError::Usage(format!("--config {}: {error}", path.display())))?;
    let mut config: CliConfig = toml::from_str(&text)
        .map_err(|error| CliError::Usage(format!("--config {}: {error}", path.display())))?;
    let base = path.parent().unwrap_or(Path::new("."));
    for file in [
        &mut config.ca,
        &mut config.cert,
        &mut config.key,
        &mut config.password_file,
        &mut config.token_file,
    ] {
        if let Some(relative) = file.as_ref().filter(|file| file.is_relative()) {
            *file = Some(base.join(relative));
        }
    }
    if config.timeout_ms == Some(0) {
        return Err(CliError::Usage(format!(
            "--config {}: timeout_ms is at least 1",
            path.display()
        )));
    }
    Ok(config)
}

/// The configuration file this run reads: `--config` / `STRAND_CONFIG`
/// (which must exist), else the default path if a file is there.
pub(crate) fn for_run(cli: &Cli) -> Result<CliConfig, CliError> {
    if let Some(path) = &cli.config {
        return load(path);
    }
    match default_path() {
        Some(path) if path.is_file() => load(&path),
        _ => Ok(CliConfig::default()),
    }
}

/// Whether option `id` was left to its default (neither given on the
/// command line nor in the environment).
fn unset(matches: &ArgMatches, id: &str) -> bool {
    matches!(
        matches.value_source(id),
        None | Some(ValueSource::DefaultValue)
    )
}

/// Fills every option the command line and environment left unset from
/// `config`.
pub(crate) fn apply(cli: &mut Cli, matches: &ArgMatches, config: CliConfig) {
    fn fill<T>(target: &mut Option<T>, value: Option<T>, unset: bool) {
        if unset && let Some(value) = value {
            *target = Some(value);
        }
    }
    if let Some(cluster) = config.cluster.filter(|_| unset(matches, "cluster")) {
        cli.cluster = cluster.into_vec();
    }
    if let Some(id) = config.cluster_id.filter(|_| unset(matches, "cluster_id")) {
        cli.cluster_id = id;
    }
    if let Some(timeout_ms) = config.timeout_ms.filter(|_| unset(matches, "timeout_ms")) {
        cli.timeout_ms = timeout_ms;
    }
    fill(&mut cli.ca, config.ca, unset(matches, "ca"));
    fill(
        &mut cli.tls_server_name,
        config.tls_server_name,
        unset(matches, "tls_server_name"),
    );
    fill(&mut cli.cert, config.cert, unset(matches, "cert"));
    fill(&mut cli.key, config.key, unset(matches, "key"));
    // A user named here brings its own password file or none: a password
    // file from the file never pairs with another user.
    if unset(matches, "user") {
        fill(&mut cli.user, config.user, true);
        fill(
            &mut cli.password_file,
            config.password_file,
            unset(matches, "password_file"),
        );
    }
    fill(
        &mut cli.token_file,
        config.token_file,
        unset(matches, "token_file"),
    );
}

/// The pairings clap checked before the file could fill them in.
pub(crate) fn check_pairs(cli: &Cli) -> Result<(), CliError> {
    let missing = |what: &str, needs: &str| {
        Err(CliError::Usage(format!(
            "{what} needs {needs} (on the command line, in the environment or in the config file)"
        )))
    };
    if cli.password_file.is_some() && cli.user.is_none() {
        return missing("--password-file", "--user");
    }
    if cli.tls_server_name.is_some() && cli.ca.is_none() {
        return missing("--tls-server-name", "--ca");
    }
    if cli.cert.is_some() != cli.key.is_some() {
        return missing("--cert", "--key, and --key needs --cert,");
    }
    if cli.cert.is_some() && cli.ca.is_none() {
        return missing("--cert", "--ca");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::*;

    fn parsed(args: &[&str], config: CliConfig) -> Cli {
        let argv = std::iter::once("strand").chain(args.iter().copied());
        let matches = Cli::command().get_matches_from(argv);
        let mut cli = Cli::from_arg_matches(&matches).expect("parses");
        apply(&mut cli, &matches, config);
        cli
    }

    #[test]
    fn the_file_fills_what_the_command_line_leaves_unset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cli.toml");
        std::fs::write(
            &path,
            "cluster = \"10.0.0.1:7201, 10.0.0.2:7201\"\nca = \"certs/ca.pem\"\n\
             user = \"admin\"\npassword_file = \"admin.password\"\ntimeout_ms = 2500\n",
        )
        .expect("write");
        let config = load(&path).expect("loads");
        let cli = parsed(&["status"], config.clone());
        assert_eq!(cli.cluster, vec!["10.0.0.1:7201", "10.0.0.2:7201"]);
        assert_eq!(cli.ca, Some(dir.path().join("certs/ca.pem")));
        assert_eq!(cli.user.as_deref(), Some("admin"));
        assert_eq!(cli.password_file, Some(dir.path().join("admin.password")));
        assert_eq!(cli.timeout_ms, 2500);
        assert!(check_pairs(&cli).is_ok());

        let flags = parsed(
            &[
                "--cluster",
                "127.0.0.1:9",
                "--timeout-ms",
                "7",
                "--user",
                "ops",
                "status",
            ],
            config,
        );
        assert_eq!(flags.cluster, vec!["127.0.0.1:9"]);
        assert_eq!(flags.timeout_ms, 7);
        assert_eq!(flags.user.as_deref(), Some("ops"));
        assert_eq!(
            flags.password_file, None,
            "admin's password file does not go with another user"
        );
        assert_eq!(flags.ca, Some(dir.path().join("certs/ca.pem")));
    }

    #[test]
    fn a_typo_or_a_missing_file_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cli.toml");
        std::fs::write(&path, "clustr = \"x:1\"\n").expect("write");
        let message = load(&path)
            .map_err(|error| error.message())
            .expect_err("typo");
        assert!(message.contains("clustr"), "{message}");
        assert!(load(&dir.path().join("nope.toml")).is_err());
    }

    #[test]
    fn pairs_are_checked_after_the_file() {
        let lone_key = parsed(
            &["status"],
            CliConfig {
                key: Some(PathBuf::from("/k.pem")),
                ..CliConfig::default()
            },
        );
        assert!(check_pairs(&lone_key).is_err());
        let lone_password = parsed(&["--password-file", "/p", "status"], CliConfig::default());
        assert!(check_pairs(&lone_password).is_err());
    }
}
