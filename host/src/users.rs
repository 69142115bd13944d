//! Users in the catalog: each a name, an Argon2id hash of its password (in
//! PHC form, made by the client that created it) and a set of permissions.
//! Replicated like every catalog change, so every node can check a
//! caller's credentials and rights from its own copy.
//!
//! Bounded: [`USERS_MAX`] users, [`PERMISSIONS_PER_USER_MAX`] permissions
//! each; a create or grant past either is refused. Granting a permission
//! held already, or revoking one not held, changes nothing and succeeds
//! (a retried request lands once either way).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use strand_wire::ops::{
    ChangePermission, CreateUser, DeleteUser, ErrorBody, PERMISSIONS_PER_USER_MAX, Permission,
    USERS_MAX, UserInfo, UserList,
};
use strand_wire::{Body, ResultCode};

use crate::catalog::{Catalog, invalid};

/// One user as the catalog keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// An Argon2id hash of its password, in PHC form.
    pub password_hash: String,
    /// What it may do.
    pub permissions: BTreeSet<Permission>,
}

/// Every user, by name.
pub type Users = BTreeMap<String, User>;

impl Catalog {
    /// A user, to check its password and rights.
    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    /// Every user and its permissions, by name (no hashes).
    pub fn user_list(&self) -> UserList {
        UserList {
            users: self
                .users
                .iter()
                .map(|(name, user)| UserInfo {
                    name: name.clone(),
                    permissions: user.permissions.iter().cloned().collect(),
                })
                .collect(),
        }
    }

    pub(crate) fn create_user(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = CreateUser::from_bytes(body).map_err(invalid)?;
        if self.users.contains_key(&request.name) {
            return Err(ErrorBody::message(
                ResultCode::AlreadyExists,
                format!("user {} exists", request.name),
            ));
        }
        if self.users.len() >= USERS_MAX {
            return Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!("the cluster keeps at most {USERS_MAX} users"),
            ));
        }
        self.users.insert(
            request.name,
            User {
                password_hash: request.password_hash,
                permissions: BTreeSet::new(),
            },
        );
        Ok(Bytes::new())
    }

    pub(crate) fn delete_user(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = DeleteUser::from_bytes(body).map_err(invalid)?;
        match self.users.remove(&request.name) {
            Some(_) => Ok(Bytes::new()),
            None => Err(no_user(&request.name)),
        }
    }

    pub(crate) fn grant_permission(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = ChangePermission::from_bytes(body).map_err(invalid)?;
        let user = self
            .users
            .get_mut(&request.user)
            .ok_or_else(|| no_user(&request.user))?;
        if !user.permissions.contains(&request.permission)
            && user.permissions.len() >= PERMISSIONS_PER_USER_MAX
        {
            return Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!("a user holds at most {PERMISSIONS_PER_USER_MAX} permissions"),
            ));
        }
        user.permissions.insert(request.permission);
        Ok(Bytes::new())
    }

    pub(crate) fn revoke_permission(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = ChangePermission::from_bytes(body).map_err(invalid)?;
        let user = self
            .users
            .get_mut(&request.user)
            .ok_or_else(|| no_user(&request.user))?;
        user.permissions.remove(&request.permission);
        Ok(Bytes::new())
    }
}

fn no_user(name: &str) -> ErrorBody {
    ErrorBody::message(ResultCode::InvalidRequest, format!("no user {name}"))
}

#[cfg(test)]
mod tests {
    use strand_wire::Operation;
    use strand_wire::ops::{Right, Scope};

    use super::*;
    use crate::catalog::tests::apply;

    const HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA";

    fn create(catalog: &mut Catalog, name: &str) -> ResultCode {
        let body = CreateUser {
            name: name.to_owned(),
            password_hash: HASH.to_owned(),
        };
        apply(catalog, Operation::CreateUser, Bytes::from(body.to_vec())).0
    }

    fn change(
        catalog: &mut Catalog,
        operation: Operation,
        user: &str,
        permission: &Permission,
    ) -> ResultCode {
        let body = ChangePermission {
            user: user.to_owned(),
            permission: permission.clone(),
        };
        apply(catalog, operation, Bytes::from(body.to_vec())).0
    }

    #[test]
    fn users_are_created_granted_revoked_and_deleted_once() {
        let mut catalog = Catalog::new(vec![1, 2, 3]);
        assert_eq!(create(&mut catalog, "alice"), ResultCode::Ok);
        assert_eq!(create(&mut catalog, "alice"), ResultCode::AlreadyExists);
        let consume = Permission {
            right: Right::Consume,
            scope: Scope::Topic("shop".to_owned(), "orders".to_owned()),
        };
        for _ in 0..2 {
            assert_eq!(
                change(&mut catalog, Operation::GrantPermission, "alice", &consume),
                ResultCode::Ok,
                "granting twice holds it once"
            );
        }
        assert_eq!(
            change(&mut catalog, Operation::GrantPermission, "bob", &consume),
            ResultCode::InvalidRequest,
            "no such user"
        );
        let listed = catalog.user_list();
        assert_eq!(listed.users.len(), 1);
        assert_eq!(listed.users[0].permissions, vec![consume.clone()]);
        assert_eq!(
            catalog
                .user("alice")
                .map(|user| user.password_hash.as_str()),
            Some(HASH)
        );
        assert_eq!(
            change(&mut catalog, Operation::RevokePermission, "alice", &consume),
            ResultCode::Ok
        );
        assert!(
            catalog
                .user("alice")
                .is_some_and(|user| user.permissions.is_empty())
        );
        let delete = DeleteUser {
            name: "alice".to_owned(),
        };
        let body = Bytes::from(delete.to_vec());
        assert_eq!(
            apply(&mut catalog, Operation::DeleteUser, body.clone()).0,
            ResultCode::Ok
        );
        assert_eq!(
            apply(&mut catalog, Operation::DeleteUser, body).0,
            ResultCode::InvalidRequest
        );
        assert!(catalog.user_list().users.is_empty());
    }
}
