//! Users and permissions through the SDK: create (the password is hashed
//! here with Argon2id, so it never leaves this process), delete, grant,
//! revoke, list.

use argon2::password_hash::{PasswordHasher, SaltString};
use bytes::Bytes;
use strand_wire::ops::{ChangePermission, CreateUser, DeleteUser, Permission, Scope, UserList};
use strand_wire::{Body, Operation};

use crate::client::Client;
use crate::error::ClientError;
use crate::query::QueryTarget;

/// The metadata plane's group.
const METADATA_GROUP: u64 = 0;

/// Shortest password accepted.
pub const PASSWORD_LENGTH_MIN: usize = 8;

/// An Argon2id hash of `password` in PHC form, with a random salt and the
/// crate's default cost (19 MiB, 2 passes: OWASP's recommendation).
pub fn hash_password(password: &str) -> Result<String, ClientError> {
    if password.len() < PASSWORD_LENGTH_MIN {
        return Err(ClientError::InvalidArgument {
            reason: format!("a password has at least {PASSWORD_LENGTH_MIN} bytes"),
        });
    }
    let salt_bytes: [u8; 16] = rand::random();
    let salt =
        SaltString::encode_b64(&salt_bytes).map_err(|error| ClientError::InvalidArgument {
            reason: format!("salt: {error}"),
        })?;
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|error| ClientError::InvalidArgument {
            reason: format!("hashing the password: {error}"),
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

    /// Deletes user `name` and its permissions.
    pub async fn delete_user(&self, name: &str) -> Result<(), ClientError> {
        let body = DeleteUser {
            name: name.to_owned(),
        };
        self.user_change(Operation::DeleteUser, body.to_vec()).await
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

    /// Takes a permission back from `user` (nothing happens if it lacks it).
    pub async fn revoke_permission(
        &self,
        user: &str,
        permission: Permission,
    ) -> Result<(), ClientError> {
        self.permission_change(Operation::RevokePermission, user, permission)
            .await
    }

    /// Every user and its permissions, from any node's catalog.
    pub async fn list_users(&self) -> Result<UserList, ClientError> {
        let reply = self
            .query(QueryTarget::AnyNode, Operation::ListUsers, Bytes::new(), 0)
            .await?;
        UserList::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("list users reply", error))
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
    use argon2::password_hash::{PasswordHash, PasswordVerifier};
    use strand_wire::ops::Right;

    use super::*;

    #[test]
    fn a_password_hash_is_argon2id_salted_and_verifies() {
        let first = hash_password("correct horse").expect("hashed");
        let second = hash_password("correct horse").expect("hashed");
        assert!(first.starts_with("$argon2id$"), "{first}");
        assert_ne!(first, second, "a fresh salt each time");
        let parsed = PasswordHash::new(&first).expect("PHC");
        assert!(
            argon2::Argon2::default()
                .verify_password(b"correct horse", &parsed)
                .is_ok()
        );
        assert!(
            argon2::Argon2::default()
                .verify_password(b"wrong horse", &parsed)
                .is_err()
        );
        assert!(hash_password("short").is_err());
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
