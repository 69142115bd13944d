//! `strand user ...` and `strand token ...`: users, their permissions and
//! access tokens.

use clap::Subcommand;

/// `strand user ...`
#[derive(Debug, Subcommand)]
pub(crate) enum UserCommand {
    /// Create a user. The password is read from the first line of stdin
    /// (hashed with Argon2id before it leaves this process).
    Create {
        /// The user's name.
        name: String,
    },
    /// Every user and its permissions.
    List,
    /// Delete a user and its permissions; needs --yes.
    Delete {
        /// The user's name.
        name: String,
        /// Confirm.
        #[arg(long)]
        yes: bool,
    },
    /// Grant a permission: `admin`, or `produce|consume|manage:STREAM[/TOPIC]`.
    Grant {
        /// The user's name.
        name: String,
        /// The permission.
        #[arg(value_parser = parse_permission_arg)]
        permission: strand_wire::ops::Permission,
    },
    /// Take a permission back (same form as grant).
    Revoke {
        /// The user's name.
        name: String,
        /// The permission.
        #[arg(value_parser = parse_permission_arg)]
        permission: strand_wire::ops::Permission,
    },
}

/// `strand token ...`
#[derive(Debug, Subcommand)]
pub(crate) enum TokenCommand {
    /// Create a token that signs in as USER with its permissions; printed
    /// once on stdout. Needs admin, or USER signed in with its password.
    Create {
        /// The user it signs in as.
        #[arg(value_name = "USER")]
        owner: String,
        /// What it is for (shown by `token list`).
        #[arg(long, default_value = "")]
        label: String,
        /// How long it works (`30d`, `12h`); without it, until revoked.
        #[arg(long, value_parser = parse_lifetime)]
        expires_in: Option<std::time::Duration>,
    },
    /// Every token: its user, label and expiry (never its secret).
    List,
    /// Revoke a token, by id or the token itself: it signs in no more.
    Revoke {
        /// The token's id (16 hex digits) or the whole token.
        token: String,
    },
}

fn parse_lifetime(text: &str) -> Result<std::time::Duration, String> {
    let lifetime = humantime::parse_duration(text).map_err(|error| format!("{text:?}: {error}"))?;
    if lifetime.is_zero() {
        return Err("a token's lifetime is longer than zero".to_owned());
    }
    Ok(lifetime)
}

fn parse_permission_arg(text: &str) -> Result<strand_wire::ops::Permission, String> {
    crate::users::parse_permission(text)
}
