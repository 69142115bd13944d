//! Signing in and checking rights on the node that receives a request (see
//! `docs/authentication.md`).
//!
//! A connection signs in with `Authenticate`: a user and its password, or
//! one of its access tokens ([`sign_in`]). With `[auth] required`, every
//! other request from a caller that is not a node needs a signed-in user
//! holding the right the operation needs ([`needed`]); anything else is
//! refused before it is handled. A token revoked or expired, or a user
//! deleted, refuses the connections signed in with it from their next
//! request. A connection that presented a user certificate in its TLS
//! handshake is signed in as that user from the start (see
//! [`crate::net::tls::user_of`]).
//!
//! Signing in must not be a weapon against the node or other users:
//!
//! | module | owns |
//! |---|---|
//! | [`sign_in`] | one sign-in: throttle, check, count the failure |
//! | [`hash_policy`] | the node's fixed Argon2 parameters, the dummy hash for unknown users |
//! | [`check_pool`] | the bounded pool password checks run on |
//! | [`defenses`] | the node's pool and failure limits, held for every sign-in |
//! | [`failure_limits`] | failed sign-ins limited per address and per user name |
//! | [`client_ids`] | which user a client id belongs to |

pub mod check_pool;
pub mod client_ids;
pub mod defenses;
pub mod failure_limits;
pub mod hash_policy;
pub mod sign_in;

use strand_wire::ops::{
    AddPartitions, AlterTopic, ConsumerHeartbeat, CreateStream, CreateToken, CreateTopic,
    DeleteStream, DeleteTopic, JoinConsumerGroup, LeaveConsumerGroup, RevokeToken, Right,
};
use strand_wire::{Body, Msg, Operation, RequestHeader, RightNeeded};

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
    /// A new token for this user: `admin`, or the user itself signed in
    /// with its password (a token cannot mint tokens, so revoking one
    /// revokes everything it could do).
    TokenFor(String),
    /// Revoking this token: `admin`, or the token's own user.
    TokenOf(String),
}

/// How a connection proved who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proof {
    /// The user's password.
    Password,
    /// One of the user's access tokens, by id.
    Token(String),
    /// A user certificate of the cluster's CA, presented in the handshake,
    /// by its SHA-256 fingerprint (revocable in the catalog).
    Certificate(String),
}

/// Who a connection signed in as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The user.
    pub user: String,
    /// How it proved it.
    pub proof: Proof,
}

impl Identity {
    /// How the audit log names it: `user ci`, `user ci (token 3f…)`,
    /// `user ci (certificate)`.
    pub fn audit_name(&self) -> String {
        match &self.proof {
            Proof::Password => format!("user {}", self.user),
            Proof::Token(id) => format!("user {} (token {id})", self.user),
            Proof::Certificate(_) => format!("user {} (certificate)", self.user),
        }
    }

    /// The access token this connection signed in with, if any.
    fn token(&self) -> Option<&str> {
        match &self.proof {
            Proof::Token(id) => Some(id),
            Proof::Password | Proof::Certificate(_) => None,
        }
    }
}

/// Why a request is refused to a signed-in caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Its credentials no longer hold (token revoked or expired, user
    /// deleted): `AuthenticationFailed`.
    Credentials(String),
    /// It lacks the right: `PermissionDenied`.
    Rights(String),
}

/// Whether a token expiring at `expires_at_ms` has expired by this node's
/// clock.
pub(crate) fn is_expired(expires_at_ms: Option<u64>) -> bool {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        });
    expires_at_ms.is_some_and(|expires_at_ms| now_ms >= expires_at_ms)
}

/// What `request` needs of its caller; `None` for what anyone may send
/// (signing in). The kind of right is its operation's row of the table
/// ([`Operation::info`]); this reads what the request names.
pub fn needed(shared: &Shared, request: &Msg<RequestHeader>) -> Option<Need> {
    let body = request.body();
    Some(match request.header().operation().info().right {
        RightNeeded::Anyone => return None,
        RightNeeded::SignedIn => Need::SignedIn,
        RightNeeded::Admin => Need::Admin,
        RightNeeded::Partition(right) => partition_need(shared, request.header(), right),
        // Bodies were decoded at the door (`strand_wire::ops::check_request`):
        // one that still does not decode here needs admin.
        RightNeeded::Named(right) => named_need(request, right).unwrap_or(Need::Admin),
        RightNeeded::ConsumerGroup(right) => member_need(shared, request, right),
        RightNeeded::TokenFor => {
            CreateToken::from_bytes(body).map_or(Need::Admin, |create| Need::TokenFor(create.user))
        }
        RightNeeded::TokenOf => {
            RevokeToken::from_bytes(body).map_or(Need::Admin, |revoke| Need::TokenOf(revoke.id))
        }
    })
}

/// `right` on the topic of the partition the request's group holds, by
/// this node's catalog (a group it does not know names the empty stream
/// and topic).
fn partition_need(shared: &Shared, header: &RequestHeader, right: Right) -> Need {
    let group = header.prefix.group.get();
    let catalog = shared.catalog();
    let (stream, topic) = catalog
        .groups
        .get(&group)
        .map_or((String::new(), String::new()), |assignment| {
            (assignment.stream.clone(), assignment.topic.clone())
        });
    Need::Right(right, stream, Some(topic))
}

/// `right` on the stream (and topic) the request's body names; `None` when
/// the body does not decode, or is not read here yet (the caller then
/// needs admin).
fn named_need(request: &Msg<RequestHeader>, right: Right) -> Option<Need> {
    let body = request.body();
    let (stream, topic) = match request.header().operation() {
        Operation::CreateStream => (CreateStream::from_bytes(body).ok()?.name, None),
        Operation::DeleteStream => (DeleteStream::from_bytes(body).ok()?.name, None),
        Operation::CreateTopic => {
            let create = CreateTopic::from_bytes(body).ok()?;
            (create.stream, Some(create.topic))
        }
        Operation::DeleteTopic => {
            let delete = DeleteTopic::from_bytes(body).ok()?;
            (delete.stream, Some(delete.topic))
        }
        Operation::AlterTopic => {
            let alter = AlterTopic::from_bytes(body).ok()?;
            (alter.stream, Some(alter.topic))
        }
        Operation::AddPartitions => {
            let add = AddPartitions::from_bytes(body).ok()?;
            (add.stream, Some(add.topic))
        }
        Operation::JoinConsumerGroup => {
            let join = JoinConsumerGroup::from_bytes(body).ok()?;
            (join.stream, Some(join.topic))
        }
        _ => return None,
    };
    Some(Need::Right(right, stream, topic))
}

/// What a consumer group member's heartbeat or leave needs: `right` on
/// the group's topic, by this node's catalog. A group the catalog does not
/// know needs only a signed-in user: the request is refused anyway
/// (`UnknownMember`), and no other member's group is touched.
fn member_need(shared: &Shared, request: &Msg<RequestHeader>, right: Right) -> Need {
    let body = request.body();
    let group = match request.header().operation() {
        Operation::ConsumerHeartbeat => ConsumerHeartbeat::from_bytes(body)
            .ok()
            .map(|beat| beat.group),
        Operation::LeaveConsumerGroup => LeaveConsumerGroup::from_bytes(body)
            .ok()
            .map(|leave| leave.group),
        // A body not read here yet: the safe answer.
        _ => return Need::Admin,
    };
    let catalog = shared.catalog();
    match group.and_then(|name| catalog.consumer_group(&name)) {
        Some(group) => Need::Right(right, group.stream.clone(), Some(group.topic.clone())),
        None => Need::SignedIn,
    }
}

/// Whether `identity` may do what `need` says; the refusal says why not
/// ("consume on shop/orders is not granted to reader").
pub fn check(shared: &Shared, identity: &Identity, need: &Need) -> Result<(), Refusal> {
    let catalog = shared.catalog();
    if let Some(id) = identity.token() {
        match catalog.token(id) {
            None => {
                return Err(Refusal::Credentials(format!("token {id} was revoked")));
            }
            Some(token) if is_expired(token.expires_at_ms) => {
                return Err(Refusal::Credentials(format!("token {id} has expired")));
            }
            Some(_) => {}
        }
    }
    if let Proof::Certificate(fingerprint) = &identity.proof
        && catalog.is_certificate_revoked(fingerprint)
    {
        return Err(Refusal::Credentials(format!(
            "the certificate of {} (SHA-256 {fingerprint}) was revoked",
            identity.user
        )));
    }
    let user = identity.user.as_str();
    if user == ADMIN_USER {
        return Ok(());
    }
    let Some(record) = catalog.user(user) else {
        return Err(Refusal::Credentials(format!("user {user} does not exist")));
    };
    let allowed = |right: Right, stream: &str, topic: Option<&str>| {
        record
            .permissions
            .iter()
            .any(|permission| permission.allows(right, stream, topic))
    };
    let admin = allowed(Right::Admin, "", None);
    let (granted, what) = match need {
        Need::SignedIn => (true, String::new()),
        Need::Admin => (admin, "admin".to_owned()),
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
        Need::TokenFor(owner) => (
            admin || (owner == user && identity.token().is_none()),
            format!(
                "creating a token for {owner} (admin, or {owner} signed in with its password or \
                 certificate)"
            ),
        ),
        Need::TokenOf(id) => (
            admin || catalog.token(id).is_some_and(|token| token.user == user),
            format!("revoking token {id} (admin, or the token's own user)"),
        ),
    };
    if granted {
        Ok(())
    } else {
        Err(Refusal::Rights(format!("{what} is not granted to {user}")))
    }
}
