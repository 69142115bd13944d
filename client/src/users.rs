//! Users, permissions and access tokens through the SDK: create (the
//! password is hashed here with Argon2id, so it never leaves this process),
//! delete, grant, revoke, list; create a token (its 256-bit secret is made
//! here and shown once; the cluster keeps only its keyed hash, see
//! `strand_wire::ops::tokens`) and revoke it.

use bytes::Bytes;
use strand_wire::ops::{
    ChangePermission, CreateToken, CreateUser, DeleteUser, Permission, Quota, QuotaList,
    RevokeToken, Scope, SetQuota, UserList, parse_token, token_text,
};
use strand_wire::{Body, Operation};

use crate::client::Client;
use crate::error::ClientError;
use crate::query::QueryTarget;

/// The metadata plane's group.
const METADATA_GROUP: u64 = 0;

pub use strand_credentials::PASSWORD_LENGTH_MIN;

/// An Argon2id hash of `password` in PHC form, with a random salt and the
/// crate's default cost (19 MiB, 2 passes: OWASP's recommendation); see
/// `strand_credentials::hash_password`.
pub fn hash_password(password: &str) -> Result<String, ClientError> {
    strand_credentials::hash_password(password).map_err(|error| ClientError::InvalidArgument {
        reason: error.to_string(),
    })
}

/// A token made by [`Client::create_token`].
#[derive(Clone, PartialEq, Eq)]
pub struct CreatedToken {
    /// Its id: listed, and named to revoke it.
    pub id: String,
    /// The whole token, `strand_<id>_<secret>`: shown this once, never
    /// stored by the cluster.
    pub token: String,
    /// When it stops working, in Unix milliseconds (`None`: never).
    pub expires_at_ms: Option<u64>,
}

impl std::fmt::Debug for CreatedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedToken")
            .field("id", &self.id)
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

/// A token's id, from its id or from the whole token.
pub fn token_id(id_or_token: &str) -> Result<String, ClientError> {
    if let Some((id, _)) = parse_token(id_or_token) {
        return Ok(id.to_owned());
    }
    if strand_wire::ops::tokens::is_token_id(id_or_token) {
        return Ok(id_or_token.to_owned());
    }
    Err(ClientError::InvalidArgument {
        reason: format!(
            "{:?} is neither a token id (16 hex digits) nor a token",
            id_or_token.get(..24).unwrap_or(id_or_token)
        ),
    })
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

/// The SHA-256 fingerprint of the first certificate in the PEM file
/// `path`: how the cluster names a certificate it revokes.
pub fn certificate_fingerprint_of_file(path: &std::path::Path) -> Result<String, ClientError> {
    strand_credentials::certificate_fingerprint_of_file(path).map_err(|error| {
        ClientError::InvalidArgument {
            reason: error.to_string(),
        }
    })
}

/// Parses a permission as the command line writes it: `admin`,
/// `produce:STREAM`, `consume:STREAM/TOPIC`, `manage:STREAM`.
pub fn parse_permission(text: &str) -> Result<Permission, String> {
    use strand_wire::ops::Right;
    if text == "admin" {
        return Ok(Permission {
            right: Right::Admin,
            scope: Scope::Cluster,
        });
    }
    let (right, scope) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?}: expected admin, or RIGHT:STREAM[/TOPIC]"))?;
    let right = match right {
        "admin" => return Err("admin is cluster-wide: write it alone".to_owned()),
        "produce" => Right::Produce,
        "consume" => Right::Consume,
        "manage" => Right::Manage,
        other => {
            return Err(format!(
                "{other:?}: the rights are produce, consume and manage"
            ));
        }
    };
    let scope = match scope.split_once('/') {
        Some((stream, topic)) if !stream.is_empty() && !topic.is_empty() => {
            Scope::Topic(stream.to_owned(), topic.to_owned())
        }
        None if !scope.is_empty() => Scope::Stream(scope.to_owned()),
        _ => return Err(format!("{scope:?}: expected STREAM or STREAM/TOPIC")),
    };
    Ok(Permission { right, scope })
}

impl Client {
    /// Creates user `name` with `password` (hashed here; at least
    /// [`PASSWORD_LENGTH_MIN`] bytes). `AlreadyExists` if it exists.
    pub async fn create_user(&self, name: &str, password: &str) -> Result<(), ClientError> {
        let body = CreateUser {
            name: name.to_owned(),
            password_hash: hash_password(password)?,
        };
        self.user_change(Operation::CreateUser, body.to_vec()).await
    }

    /// Deletes user `name`, its permissions and its tokens. Like
    /// [`Client::revoke_token`], returns after asking every node to confirm
    /// it has applied the change: one answer per node.
    pub async fn delete_user(
        &self,
        name: &str,
    ) -> Result<Vec<crate::admin::NodeAnswer<()>>, ClientError> {
        let body = DeleteUser {
            name: name.to_owned(),
        };
        self.user_change(Operation::DeleteUser, body.to_vec())
            .await?;
        self.catalog_applied_everywhere().await
    }

    /// Grants `user` a permission (held once however often granted).
    pub async fn grant_permission(
        &self,
        user: &str,
        permission: Permission,
    ) -> Result<(), ClientError> {
        self.permission_change(Operation::GrantPermission, user, permission)
            .await
    }

    /// Takes a permission back from `user` (nothing happens if it lacks
    /// it). Like [`Client::revoke_token`], returns after asking every node
    /// to confirm it has applied the change: one answer per node.
    pub async fn revoke_permission(
        &self,
        user: &str,
        permission: Permission,
    ) -> Result<Vec<crate::admin::NodeAnswer<()>>, ClientError> {
        self.permission_change(Operation::RevokePermission, user, permission)
            .await?;
        self.catalog_applied_everywhere().await
    }

    /// Creates an access token that signs in as `user` with its
    /// permissions, until revoked, until `user` is deleted, or for
    /// `expires_in_ms` when given. Needs `admin`, or `user` itself signed
    /// in with its password. The token is returned this once.
    pub async fn create_token(
        &self,
        user: &str,
        label: &str,
        expires_in_ms: Option<u64>,
    ) -> Result<CreatedToken, ClientError> {
        let id = hex(&rand::random::<[u8; 8]>());
        let secret = hex(&rand::random::<[u8; 32]>());
        let expires_at_ms = expires_in_ms.map(|ms| now_ms().saturating_add(ms));
        let body = CreateToken {
            id: id.clone(),
            user: user.to_owned(),
            secret_hash: strand_wire::ops::tokens::token_secret_hash(&id, &secret),
            label: label.to_owned(),
            expires_at_ms,
        };
        self.user_change(Operation::CreateToken, body.to_vec())
            .await?;
        Ok(CreatedToken {
            token: token_text(&id, &secret),
            id,
            expires_at_ms,
        })
    }

    /// Revokes a token, named by its id or the whole token: it signs in no
    /// more, and connections signed in with it are refused from their next
    /// request. Needs `admin`, or the token's own user.
    ///
    /// Each node refuses the token once its catalog applies the
    /// revocation, so this returns after asking every node to confirm it
    /// has: one answer per node. A node that does not confirm (down, cut
    /// off) still accepts the token until it catches up with the catalog.
    pub async fn revoke_token(
        &self,
        id_or_token: &str,
    ) -> Result<Vec<crate::admin::NodeAnswer<()>>, ClientError> {
        let body = RevokeToken {
            id: token_id(id_or_token)?,
        };
        self.user_change(Operation::RevokeToken, body.to_vec())
            .await?;
        self.catalog_applied_everywhere().await
    }

    /// Revokes a user certificate by its SHA-256 fingerprint (see
    /// [`certificate_fingerprint_of_file`]), the built-in `admin`'s
    /// included: it signs in no more, and connections signed in with it
    /// are refused from their next request. Needs `admin`. Like
    /// [`Client::revoke_token`], returns after asking every node to
    /// confirm it has applied the revocation: one answer per node.
    pub async fn revoke_certificate(
        &self,
        fingerprint: &str,
    ) -> Result<Vec<crate::admin::NodeAnswer<()>>, ClientError> {
        let fingerprint = fingerprint.to_ascii_lowercase().replace(':', "");
        if !strand_wire::ops::certificates::is_fingerprint(&fingerprint) {
            return Err(ClientError::InvalidArgument {
                reason: format!(
                    "{fingerprint:?} is not a SHA-256 fingerprint (64 hex digits, colons allowed)"
                ),
            });
        }
        let body = strand_wire::ops::RevokeCertificate { fingerprint };
        self.user_change(Operation::RevokeCertificate, body.to_vec())
            .await?;
        self.catalog_applied_everywhere().await
    }

    /// Every user with its permissions and tokens, from any node's catalog.
    pub async fn list_users(&self) -> Result<UserList, ClientError> {
        let reply = self
            .query(QueryTarget::AnyNode, Operation::ListUsers, Bytes::new(), 0)
            .await?;
        UserList::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("list users reply", error))
    }

    /// Sets `user`'s quota: its produce and fetch bytes and its requests
    /// per second on each node (0: no limit; all zeros removes the quota).
    /// A user over a rate has its requests delayed, not refused.
    pub async fn set_quota(&self, user: &str, quota: Quota) -> Result<(), ClientError> {
        let body = SetQuota {
            user: user.to_owned(),
            quota,
        };
        self.user_change(Operation::SetQuota, body.to_vec()).await
    }

    /// Every user's quota, from any node's catalog.
    pub async fn quotas(&self) -> Result<QuotaList, ClientError> {
        let reply = self
            .query(QueryTarget::AnyNode, Operation::ListQuotas, Bytes::new(), 0)
            .await?;
        QuotaList::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("list quotas reply", error))
    }

    async fn permission_change(
        &self,
        operation: Operation,
        user: &str,
        permission: Permission,
    ) -> Result<(), ClientError> {
        let body = ChangePermission {
            user: user.to_owned(),
            permission,
        };
        self.user_change(operation, body.to_vec()).await
    }

    async fn user_change(&self, operation: Operation, body: Vec<u8>) -> Result<(), ClientError> {
        let reply = self
            .replicated(METADATA_GROUP, operation, Bytes::from(body))
            .await?;
        if !reply.is_empty() {
            return Err(ClientError::Protocol {
                reason: format!(
                    "{operation:?} answered with {} unexpected bytes",
                    reply.len()
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use strand_wire::ops::Right;

    use super::*;

    #[test]
    fn a_short_password_is_an_invalid_argument() {
        let refused = hash_password("short");
        assert!(
            matches!(&refused, Err(ClientError::InvalidArgument { reason }) if reason.contains("8 bytes")),
            "{refused:?}"
        );
    }

    #[test]
    fn a_token_is_named_by_its_id_or_itself() {
        let token = token_text("0123456789abcdef", &"0f".repeat(32));
        assert_eq!(token_id(&token).ok(), Some("0123456789abcdef".to_owned()));
        assert_eq!(
            token_id("0123456789abcdef").ok(),
            Some("0123456789abcdef".to_owned())
        );
        let refused = token_id(&format!("{token}x")).map_err(|error| error.to_string());
        let message = refused.expect_err("malformed");
        assert!(
            !message.contains(&"0f".repeat(8)),
            "no secret in: {message}"
        );
    }

    #[test]
    fn permissions_parse_as_written() {
        assert_eq!(
            parse_permission("consume:shop/orders"),
            Ok(Permission {
                right: Right::Consume,
                scope: Scope::Topic("shop".to_owned(), "orders".to_owned()),
            })
        );
        assert_eq!(
            parse_permission("manage:shop").map(|permission| permission.text()),
            Ok("manage:shop".to_owned())
        );
        assert_eq!(
            parse_permission("admin").map(|permission| permission.right),
            Ok(Right::Admin)
        );
        for bad in [
            "admin:shop",
            "read:shop",
            "produce:",
            "produce:/t",
            "produce",
        ] {
            assert!(parse_permission(bad).is_err(), "{bad}");
        }
    }
}
