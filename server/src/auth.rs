//! Signing in and checking rights on the node that receives a request (see
//! `docs/authentication.md`).
//!
//! A connection signs in with `Authenticate` (a user and its password).
//! The node checks the password against the user's Argon2id hash from its
//! catalog, or against the built-in `admin`'s hash from its configuration,
//! on a blocking thread: a check costs tens of milliseconds of one core.
//! With `[auth] required`, every other request from a caller that is not a
//! node needs a signed-in user holding the right the operation needs
//! ([`needed`]); anything else is refused before it is handled.

use std::sync::Arc;

use argon2::password_hash::{PasswordHash, PasswordVerifier};
use strand_wire::ops::{Authenticate, JoinGroup, Right};
use strand_wire::{Body, Msg, Operation, RequestHeader};

use crate::shared::Shared;

/// The built-in administrator's name.
pub const ADMIN_USER: &str = "admin";

/// Failed sign-ins one connection may make; the next closes it.
pub const SIGN_IN_FAILURES_MAX: u32 = 3;

/// What a request needs of its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Any signed-in user.
    SignedIn,
    /// A right on a stream (and topic, when the operation names one).
    Right(Right, String, Option<String>),
    /// The cluster's `admin` right.
    Admin,
}

/// Checks `request`'s credentials; `Ok` with the user's name.
pub async fn sign_in(shared: &Arc<Shared>, body: &[u8]) -> Result<String, String> {
    let request = Authenticate::from_bytes(body).map_err(|error| error.to_string())?;
    let hash = if request.user == ADMIN_USER {
        shared.config.auth.admin_password_hash.clone()
    } else {
        shared
            .catalog()
            .user(&request.user)
            .map(|user| user.password_hash.clone())
    };
    let refused = || format!("no user {} with that password", request.user);
    let Some(hash) = hash else {
        return Err(refused());
    };
    let password = request.password.clone();
    let matched = tokio::task::spawn_blocking(move || {
        PasswordHash::new(&hash).is_ok_and(|parsed| {
            argon2::Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
    })
    .await
    .unwrap_or(false);
    if matched {
        Ok(request.user)
    } else {
        Err(refused())
    }
}

/// What `request` needs of its caller; `None` for what anyone may send
/// (signing in).
pub fn needed(shared: &Shared, request: &Msg<RequestHeader>) -> Option<Need> {
    let header = request.header();
    let operation = header.operation();
    let partition = |right: Right| {
        let group = header.prefix.group.get();
        let catalog = shared.catalog();
        let (stream, topic) = catalog
            .groups
            .get(&group)
            .map_or((String::new(), String::new()), |assignment| {
                (assignment.stream.clone(), assignment.topic.clone())
            });
        Some(Need::Right(right, stream, Some(topic)))
    };
    let named = |right: Right| -> Option<Need> {
        let body = request.body();
        let (stream, topic) = match operation {
            Operation::CreateStream => (
                strand_wire::ops::CreateStream::from_bytes(body).ok()?.name,
                None,
            ),
            Operation::DeleteStream => (
                strand_wire::ops::DeleteStream::from_bytes(body).ok()?.name,
                None,
            ),
            Operation::CreateTopic => {
                let create = strand_wire::ops::CreateTopic::from_bytes(body).ok()?;
                (create.stream, Some(create.topic))
            }
            Operation::DeleteTopic => {
                let delete = strand_wire::ops::DeleteTopic::from_bytes(body).ok()?;
                (delete.stream, Some(delete.topic))
            }
            Operation::AlterTopic => {
                let alter = strand_wire::ops::AlterTopic::from_bytes(body).ok()?;
                (alter.stream, Some(alter.topic))
            }
            Operation::AddPartitions => {
                let add = strand_wire::ops::AddPartitions::from_bytes(body).ok()?;
                (add.stream, Some(add.topic))
            }
            Operation::JoinGroup => {
                let join = JoinGroup::from_bytes(body).ok()?;
                (join.stream, Some(join.topic))
            }
            _ => return Some(Need::Admin),
        };
        Some(Need::Right(right, stream, topic))
    };
    match operation {
        Operation::Authenticate => None,
        Operation::Metadata
        | Operation::ClusterStatus
        | Operation::Attention
        | Operation::DescribeGroups
        | Operation::Heartbeat
        | Operation::LeaveGroup => Some(Need::SignedIn),
        Operation::Produce => partition(Right::Produce),
        Operation::Fetch
        | Operation::GetCursor
        | Operation::StoreCursor
        | Operation::OffsetForTime => partition(Right::Consume),
        Operation::JoinGroup => named(Right::Consume).or(Some(Need::SignedIn)),
        Operation::CreateStream
        | Operation::DeleteStream
        | Operation::CreateTopic
        | Operation::DeleteTopic
        | Operation::AlterTopic
        | Operation::AddPartitions => named(Right::Manage).or(Some(Need::SignedIn)),
        // The cluster-admin operations (`Operation::is_cluster_admin`),
        // listing users, the nodes' own reports, and any operation not
        // classified here yet: admin only.
        _ => Some(Need::Admin),
    }
}

/// Whether `user` may do what `need` says; `Err` with the refusal's
/// message ("permission denied: consume on shop/orders").
pub fn check(shared: &Shared, user: &str, need: &Need) -> Result<(), String> {
    if user == ADMIN_USER {
        return Ok(());
    }
    let catalog = shared.catalog();
    let Some(record) = catalog.user(user) else {
        return Err(format!("user {user} no longer exists"));
    };
    let allowed = |right: Right, stream: &str, topic: Option<&str>| {
        record
            .permissions
            .iter()
            .any(|permission| permission.allows(right, stream, topic))
    };
    let (granted, what) = match need {
        Need::SignedIn => (true, String::new()),
        Need::Admin => (allowed(Right::Admin, "", None), "admin".to_owned()),
        Need::Right(right, stream, topic) => {
            let scope = match topic {
                Some(topic) => format!("{stream}/{topic}"),
                None => stream.clone(),
            };
            (
                allowed(*right, stream, topic.as_deref()),
                format!("{} on {scope}", right.name()),
            )
        }
    };
    if granted {
        Ok(())
    } else {
        Err(format!("{what} is not granted to {user}"))
    }
}
