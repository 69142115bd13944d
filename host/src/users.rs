//! Users in the catalog: each a name, an Argon2id hash of its password (in
//! PHC form, made by the client that created it) and a set of permissions;
//! and access tokens, each signing in as one user (an id, an Argon2id hash
//! of its secret, a label and an optional expiry). Replicated like every
//! catalog change, so every node can check a caller's credentials and
//! rights from its own copy.
//!
//! Bounded: [`USERS_MAX`] users, [`PERMISSIONS_PER_USER_MAX`] permissions
//! and [`TOKENS_PER_USER_MAX`] tokens each, [`TOKENS_MAX`] tokens in all; a
//! create or grant past any is refused. Granting a permission held already,
//! or revoking one not held, changes nothing and succeeds (a retried
//! request lands once either way). Deleting a user revokes its tokens.
//!
//! Revoked user certificates, by SHA-256 fingerprint: at most
//! [`REVOKED_CERTIFICATES_MAX`]; revoking one already revoked succeeds and
//! changes nothing. A certificate names a user the catalog may not hold
//! (the built-in `admin`), so the list stands apart from the users.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use strand_wire::ops::{
    ChangePermission, CreateToken, CreateUser, DeleteUser, ErrorBody, PERMISSIONS_PER_USER_MAX,
    Permission, RevokeToken, TOKENS_MAX, TOKENS_PER_USER_MAX, TokenInfo, USERS_MAX, UserInfo,
    UserList,
};
use strand_wire::ops::{REVOKED_CERTIFICATES_MAX, RevokeCertificate};
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

/// One access token as the catalog keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The user it signs in as.
    pub user: String,
    /// An Argon2id hash of its secret, in PHC form.
    pub secret_hash: String,
    /// What it is for.
    pub label: String,
    /// When it stops working, in Unix milliseconds (`None`: never). The
    /// node that checks it reads its own clock; the catalog never does.
    pub expires_at_ms: Option<u64>,
}

/// Every token, by id.
pub type Tokens = BTreeMap<String, Token>;

impl Catalog {
    /// A user, to check its password and rights.
    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    /// An access token, to check a sign-in with it.
    pub fn token(&self, id: &str) -> Option<&Token> {
        self.tokens.get(id)
    }

    /// Whether the user certificate with SHA-256 `fingerprint` was revoked.
    pub fn is_certificate_revoked(&self, fingerprint: &str) -> bool {
        self.revoked_certificates.contains(fingerprint)
    }

    /// Every revoked certificate's fingerprint, sorted.
    pub fn revoked_certificates(&self) -> impl Iterator<Item = &str> {
        self.revoked_certificates.iter().map(String::as_str)
    }

    /// Every user with its permissions and tokens, by name (no hashes).
    pub fn user_list(&self) -> UserList {
        let mut tokens_of: BTreeMap<&str, Vec<TokenInfo>> = BTreeMap::new();
        for (id, token) in &self.tokens {
            tokens_of
                .entry(token.user.as_str())
                .or_default()
                .push(TokenInfo {
                    id: id.clone(),
                    label: token.label.clone(),
                    expires_at_ms: token.expires_at_ms,
                });
        }
        UserList {
            users: self
                .users
                .iter()
                .map(|(name, user)| UserInfo {
                    name: name.clone(),
                    permissions: user.permissions.iter().cloned().collect(),
                    tokens: tokens_of.remove(name.as_str()).unwrap_or_default(),
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
        if self.users.remove(&request.name).is_none() {
            return Err(no_user(&request.name));
        }
        self.tokens.retain(|_, token| token.user != request.name);
        self.assert_token_invariants();
        Ok(Bytes::new())
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
        assert!(
            user.permissions.len() <= PERMISSIONS_PER_USER_MAX,
            "user {} holds {} permissions",
            request.user,
            user.permissions.len()
        );
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

    pub(crate) fn create_token(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = CreateToken::from_bytes(body).map_err(invalid)?;
        if !self.users.contains_key(&request.user) {
            return Err(no_user(&request.user));
        }
        if self.tokens.contains_key(&request.id) {
            return Err(ErrorBody::message(
                ResultCode::AlreadyExists,
                format!("token {} exists", request.id),
            ));
        }
        if self.tokens.len() >= TOKENS_MAX {
            return Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!("the cluster keeps at most {TOKENS_MAX} tokens"),
            ));
        }
        let held = self
            .tokens
            .values()
            .filter(|token| token.user == request.user)
            .count();
        if held >= TOKENS_PER_USER_MAX {
            return Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!(
                    "a user holds at most {TOKENS_PER_USER_MAX} tokens; revoke one of {}'s first",
                    request.user
                ),
            ));
        }
        self.tokens.insert(
            request.id,
            Token {
                user: request.user,
                secret_hash: request.secret_hash,
                label: request.label,
                expires_at_ms: request.expires_at_ms,
            },
        );
        self.assert_token_invariants();
        Ok(Bytes::new())
    }

    pub(crate) fn revoke_token(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = RevokeToken::from_bytes(body).map_err(invalid)?;
        match self.tokens.remove(&request.id) {
            Some(_) => Ok(Bytes::new()),
            None => Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!("no token {}", request.id),
            )),
        }
    }

    pub(crate) fn revoke_certificate(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = RevokeCertificate::from_bytes(body).map_err(invalid)?;
        if !self.revoked_certificates.contains(&request.fingerprint)
            && self.revoked_certificates.len() >= REVOKED_CERTIFICATES_MAX
        {
            return Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!(
                    "the cluster keeps at most {REVOKED_CERTIFICATES_MAX} revoked certificates"
                ),
            ));
        }
        self.revoked_certificates.insert(request.fingerprint);
        assert!(self.revoked_certificates.len() <= REVOKED_CERTIFICATES_MAX);
        Ok(Bytes::new())
    }

    /// Every token belongs to a user that exists, within the bounds (in
    /// all and per user).
    fn assert_token_invariants(&self) {
        assert!(
            self.tokens.len() <= TOKENS_MAX,
            "{} tokens",
            self.tokens.len()
        );
        debug_assert!(
            self.users.keys().all(|user| {
                let held = self.tokens.values().filter(|token| token.user == *user);
                held.count() <= TOKENS_PER_USER_MAX
            }),
            "a user holds more than {TOKENS_PER_USER_MAX} tokens"
        );
        for (id, token) in &self.tokens {
            assert!(
                self.users.contains_key(&token.user),
                "token {id} of missing user {}",
                token.user
            );
        }
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

    fn token(catalog: &mut Catalog, id: &str, user: &str) -> ResultCode {
        let body = CreateToken {
            id: id.to_owned(),
            user: user.to_owned(),
            secret_hash: HASH.to_owned(),
            label: format!("{user}'s"),
            expires_at_ms: None,
        };
        apply(catalog, Operation::CreateToken, Bytes::from(body.to_vec())).0
    }

    fn revoke(catalog: &mut Catalog, id: &str) -> ResultCode {
        let body = RevokeToken { id: id.to_owned() };
        apply(catalog, Operation::RevokeToken, Bytes::from(body.to_vec())).0
    }

    #[test]
    fn tokens_belong_to_a_user_are_listed_revoked_once_and_go_with_it() {
        let mut catalog = Catalog::new(vec![1, 2, 3]);
        const FIRST: &str = "00000000000000aa";
        const SECOND: &str = "00000000000000bb";
        assert_eq!(
            token(&mut catalog, FIRST, "ci"),
            ResultCode::InvalidRequest,
            "no such user"
        );
        assert_eq!(create(&mut catalog, "ci"), ResultCode::Ok);
        assert_eq!(create(&mut catalog, "ops"), ResultCode::Ok);
        assert_eq!(token(&mut catalog, FIRST, "ci"), ResultCode::Ok);
        assert_eq!(
            token(&mut catalog, FIRST, "ops"),
            ResultCode::AlreadyExists,
            "ids are unique across users"
        );
        assert_eq!(token(&mut catalog, SECOND, "ops"), ResultCode::Ok);
        assert_eq!(
            catalog.token(FIRST).map(|token| token.user.as_str()),
            Some("ci")
        );
        let listed = catalog.user_list();
        let ids = |user: usize| -> Vec<String> {
            listed.users[user]
                .tokens
                .iter()
                .map(|token| token.id.clone())
                .collect()
        };
        assert_eq!(
            (ids(0), ids(1)),
            (vec![FIRST.to_owned()], vec![SECOND.to_owned()])
        );
        assert_eq!(revoke(&mut catalog, FIRST), ResultCode::Ok);
        assert_eq!(revoke(&mut catalog, FIRST), ResultCode::InvalidRequest);
        assert!(catalog.token(FIRST).is_none());
        let delete = DeleteUser {
            name: "ops".to_owned(),
        };
        assert_eq!(
            apply(
                &mut catalog,
                Operation::DeleteUser,
                Bytes::from(delete.to_vec())
            )
            .0,
            ResultCode::Ok
        );
        assert!(
            catalog.token(SECOND).is_none(),
            "a deleted user's tokens go"
        );
    }

    #[test]
    fn a_user_holds_a_bounded_number_of_tokens() {
        let mut catalog = Catalog::new(vec![1, 2, 3]);
        assert_eq!(create(&mut catalog, "ci"), ResultCode::Ok);
        for index in 0..TOKENS_PER_USER_MAX {
            assert_eq!(
                token(&mut catalog, &format!("{index:016x}"), "ci"),
                ResultCode::Ok
            );
        }
        assert_eq!(
            token(&mut catalog, "ffffffffffffffff", "ci"),
            ResultCode::InvalidRequest
        );
        assert_eq!(revoke(&mut catalog, "0000000000000000"), ResultCode::Ok);
        assert_eq!(
            token(&mut catalog, "ffffffffffffffff", "ci"),
            ResultCode::Ok
        );
    }

    #[test]
    fn a_certificate_is_revoked_once_and_for_good() {
        let mut catalog = Catalog::new(vec![1, 2, 3]);
        let fingerprint = strand_wire::ops::certificate_fingerprint(b"admin's certificate");
        assert!(!catalog.is_certificate_revoked(&fingerprint));
        let body = RevokeCertificate {
            fingerprint: fingerprint.clone(),
        };
        for _ in 0..2 {
            let result = apply(
                &mut catalog,
                Operation::RevokeCertificate,
                Bytes::from(body.to_vec()),
            );
            assert_eq!(result.0, ResultCode::Ok, "idempotent");
        }
        assert!(catalog.is_certificate_revoked(&fingerprint));
        assert_eq!(catalog.revoked_certificates().count(), 1);
    }
}
