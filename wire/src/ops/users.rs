//! Users and their rights, kept by the metadata plane: create and delete a
//! user (a name and an Argon2id hash of its password, in PHC form: the
//! password itself never travels past the client that hashed it), grant
//! and revoke permissions, list them.
//!
//! A permission is a right over a scope: `admin` over the cluster, or
//! `produce`, `consume` (fetch and cursors) or `manage` (create, delete,
//! alter) over a stream or one topic of it.

use crate::codec::{Body, BodyReader, BodyWriter};
use crate::error::BodyError;
use crate::ops::tokens::{TokenInfo, read_token_info, write_token_info};

/// Longest PHC string accepted for a password hash.
pub const PASSWORD_HASH_LENGTH_MAX: usize = 256;

/// Most permissions one user may hold.
pub const PERMISSIONS_PER_USER_MAX: usize = 1024;

/// Most users the cluster keeps.
pub const USERS_MAX: usize = 4096;

/// What a permission allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Right {
    /// Everything, cluster-wide (only with [`Scope::Cluster`]).
    Admin,
    /// Produce records.
    Produce,
    /// Fetch records, read and store cursors, be a consumer group member.
    Consume,
    /// Create, delete and alter streams and topics, add partitions.
    Manage,
}

impl Right {
    fn code(self) -> u8 {
        match self {
            Right::Admin => 1,
            Right::Produce => 2,
            Right::Consume => 3,
            Right::Manage => 4,
        }
    }

    fn from_code(code: u8) -> Option<Right> {
        [Right::Admin, Right::Produce, Right::Consume, Right::Manage]
            .into_iter()
            .find(|right| right.code() == code)
    }

    /// The right's name on the command line (`admin`, `produce`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Right::Admin => "admin",
            Right::Produce => "produce",
            Right::Consume => "consume",
            Right::Manage => "manage",
        }
    }
}

/// Where a permission applies.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// The whole cluster.
    Cluster,
    /// Every topic of a stream (and the stream itself).
    Stream(String),
    /// One topic.
    Topic(String, String),
}

/// A right over a scope.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Permission {
    /// What it allows.
    pub right: Right,
    /// Where.
    pub scope: Scope,
}

impl Permission {
    /// Whether this permission allows `right` on `stream` (and `topic`, when
    /// the operation names one). `admin` allows everything.
    pub fn allows(&self, right: Right, stream: &str, topic: Option<&str>) -> bool {
        if self.right == Right::Admin {
            return true;
        }
        if self.right != right {
            return false;
        }
        match &self.scope {
            Scope::Cluster => true,
            Scope::Stream(name) => name == stream,
            Scope::Topic(name, topic_name) => {
                name == stream && topic.is_some_and(|topic| topic == topic_name)
            }
        }
    }

    /// The permission as the command line writes it: `admin`,
    /// `produce:shop`, `consume:shop/orders`.
    pub fn text(&self) -> String {
        match &self.scope {
            Scope::Cluster => self.right.name().to_owned(),
            Scope::Stream(stream) => format!("{}:{stream}", self.right.name()),
            Scope::Topic(stream, topic) => format!("{}:{stream}/{topic}", self.right.name()),
        }
    }
}

fn write_permission(writer: &mut BodyWriter, permission: &Permission) {
    writer.u8(permission.right.code());
    match &permission.scope {
        Scope::Cluster => writer.u8(0),
        Scope::Stream(stream) => {
            writer.u8(1);
            writer.str(stream);
        }
        Scope::Topic(stream, topic) => {
            writer.u8(2);
            writer.str(stream);
            writer.str(topic);
        }
    }
}

fn read_permission(reader: &mut BodyReader<'_>) -> Result<Permission, BodyError> {
    let right = Right::from_code(reader.u8("right")?).ok_or(BodyError::Invalid {
        field: "right",
        reason: "not admin, produce, consume or manage",
    })?;
    let scope = match reader.u8("scope")? {
        0 => Scope::Cluster,
        1 => Scope::Stream(reader.name("stream")?),
        2 => Scope::Topic(reader.name("stream")?, reader.name("topic")?),
        _ => {
            return Err(BodyError::Invalid {
                field: "scope",
                reason: "not cluster, stream or topic",
            });
        }
    };
    if (right == Right::Admin) != (scope == Scope::Cluster) {
        return Err(BodyError::Invalid {
            field: "scope",
            reason: "admin is cluster-wide, and only admin is",
        });
    }
    Ok(Permission { right, scope })
}

/// Create a user with a password, stored as `password_hash`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateUser {
    /// The user's name (the rules of stream names).
    pub name: String,
    /// An Argon2id hash of the password in PHC form (`$argon2id$...`).
    pub password_hash: String,
}

impl Body for CreateUser {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.name);
        writer.str(&self.password_hash);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<CreateUser, BodyError> {
        let name = reader.name("user")?;
        let password_hash = reader.str("password_hash")?.to_owned();
        if !password_hash.starts_with("$argon2id$")
            || password_hash.len() > PASSWORD_HASH_LENGTH_MAX
        {
            return Err(BodyError::Invalid {
                field: "password_hash",
                reason: "not an Argon2id hash in PHC form",
            });
        }
        Ok(CreateUser {
            name,
            password_hash,
        })
    }
}

/// Delete a user (its permissions go with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteUser {
    /// The user's name.
    pub name: String,
}

impl Body for DeleteUser {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.name);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<DeleteUser, BodyError> {
        Ok(DeleteUser {
            name: reader.name("user")?,
        })
    }
}

/// Grant a user a permission (`Grant`), or take one back (`Revoke`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangePermission {
    /// The user's name.
    pub user: String,
    /// The permission.
    pub permission: Permission,
}

impl Body for ChangePermission {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.user);
        write_permission(writer, &self.permission);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<ChangePermission, BodyError> {
        Ok(ChangePermission {
            user: reader.name("user")?,
            permission: read_permission(reader)?,
        })
    }
}

/// Longest password accepted.
pub const PASSWORD_LENGTH_MAX: usize = 1024;

/// Sign a connection in: as a user with its password, or with one of its
/// access tokens (see [`crate::ops::tokens`]).
#[derive(Clone, PartialEq, Eq)]
pub enum Authenticate {
    /// A user's name and password (carried inside TLS; checked against the
    /// stored hash).
    Password {
        /// The user's name.
        user: String,
        /// Its password.
        password: String,
    },
    /// An access token, `strand_<id>_<secret>`.
    Token(String),
}

impl std::fmt::Debug for Authenticate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Authenticate::Password { user, .. } => f
                .debug_struct("Authenticate::Password")
                .field("user", user)
                .finish_non_exhaustive(),
            Authenticate::Token(token) => {
                let id = crate::ops::tokens::parse_token(token).map_or("?", |(id, _)| id);
                f.debug_struct("Authenticate::Token")
                    .field("id", &id)
                    .finish_non_exhaustive()
            }
        }
    }
}

impl Body for Authenticate {
    fn encode(&self, writer: &mut BodyWriter) {
        match self {
            Authenticate::Password { user, password } => {
                writer.u8(0);
                writer.str(user);
                writer.str(password);
            }
            Authenticate::Token(token) => {
                writer.u8(1);
                writer.str(token);
            }
        }
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<Authenticate, BodyError> {
        match reader.u8("credential")? {
            0 => {
                let user = reader.name("user")?;
                let password = reader.str("password")?.to_owned();
                if password.is_empty() || password.len() > PASSWORD_LENGTH_MAX {
                    return Err(BodyError::Invalid {
                        field: "password",
                        reason: "1 to 1024 bytes",
                    });
                }
                Ok(Authenticate::Password { user, password })
            }
            1 => {
                let token = reader.str("token")?;
                if crate::ops::tokens::parse_token(token).is_none() {
                    return Err(BodyError::Invalid {
                        field: "token",
                        reason: "not strand_<16 hex digits>_<64 hex digits>",
                    });
                }
                Ok(Authenticate::Token(token.to_owned()))
            }
            other => Err(BodyError::UnknownValue {
                field: "credential",
                value: u64::from(other),
            }),
        }
    }
}

/// A user as listed: its name, permissions and tokens (never a hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// The user's name.
    pub name: String,
    /// Its permissions, sorted.
    pub permissions: Vec<Permission>,
    /// Its access tokens, by id.
    pub tokens: Vec<TokenInfo>,
}

/// The reply to `ListUsers`: every user, by name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserList {
    /// The users, sorted by name.
    pub users: Vec<UserInfo>,
}

impl Body for UserList {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.list(&self.users, |writer, user| {
            writer.str(&user.name);
            writer.list(&user.permissions, write_permission);
            writer.list(&user.tokens, write_token_info);
        });
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<UserList, BodyError> {
        let users = reader.list("users", 2, |reader| {
            Ok(UserInfo {
                name: reader.name("user")?,
                permissions: reader.list("permissions", 2, read_permission)?,
                tokens: reader.list("tokens", 3, read_token_info)?,
            })
        })?;
        Ok(UserList { users })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash() -> String {
        "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA".to_owned()
    }

    #[test]
    fn user_operations_round_trip() {
        let create = CreateUser {
            name: "alice".to_owned(),
            password_hash: hash(),
        };
        assert_eq!(CreateUser::from_bytes(&create.to_vec()), Ok(create));
        let delete = DeleteUser {
            name: "alice".to_owned(),
        };
        assert_eq!(DeleteUser::from_bytes(&delete.to_vec()), Ok(delete));
        for permission in [
            Permission {
                right: Right::Admin,
                scope: Scope::Cluster,
            },
            Permission {
                right: Right::Consume,
                scope: Scope::Topic("shop".to_owned(), "orders".to_owned()),
            },
            Permission {
                right: Right::Manage,
                scope: Scope::Stream("shop".to_owned()),
            },
        ] {
            let grant = ChangePermission {
                user: "alice".to_owned(),
                permission,
            };
            assert_eq!(ChangePermission::from_bytes(&grant.to_vec()), Ok(grant));
        }
        let list = UserList {
            users: vec![UserInfo {
                name: "alice".to_owned(),
                permissions: vec![Permission {
                    right: Right::Produce,
                    scope: Scope::Stream("shop".to_owned()),
                }],
                tokens: vec![TokenInfo {
                    id: "0123456789abcdef".to_owned(),
                    label: "ci".to_owned(),
                    expires_at_ms: None,
                }],
            }],
        };
        assert_eq!(UserList::from_bytes(&list.to_vec()), Ok(list));
    }

    #[test]
    fn a_sign_in_round_trips_and_never_prints_its_password() {
        let sign_in = Authenticate::Password {
            user: "alice".to_owned(),
            password: "correct horse".to_owned(),
        };
        assert!(!format!("{sign_in:?}").contains("horse"));
        assert_eq!(Authenticate::from_bytes(&sign_in.to_vec()), Ok(sign_in));
        let empty = Authenticate::Password {
            user: "alice".to_owned(),
            password: String::new(),
        };
        assert!(Authenticate::from_bytes(&empty.to_vec()).is_err());
        let secret = "5e".repeat(32);
        let token =
            Authenticate::Token(crate::ops::tokens::token_text("0123456789abcdef", &secret));
        let printed = format!("{token:?}");
        assert!(
            printed.contains("0123456789abcdef") && !printed.contains(&secret),
            "{printed}"
        );
        assert_eq!(Authenticate::from_bytes(&token.to_vec()), Ok(token));
        let malformed = Authenticate::Token("strand_nope".to_owned());
        assert!(Authenticate::from_bytes(&malformed.to_vec()).is_err());
    }

    #[test]
    fn a_plain_password_or_a_misplaced_admin_is_refused() {
        let plain = CreateUser {
            name: "alice".to_owned(),
            password_hash: "hunter2".to_owned(),
        };
        assert!(CreateUser::from_bytes(&plain.to_vec()).is_err());
        let local_admin = ChangePermission {
            user: "alice".to_owned(),
            permission: Permission {
                right: Right::Admin,
                scope: Scope::Stream("shop".to_owned()),
            },
        };
        assert!(ChangePermission::from_bytes(&local_admin.to_vec()).is_err());
        let cluster_produce = ChangePermission {
            user: "alice".to_owned(),
            permission: Permission {
                right: Right::Produce,
                scope: Scope::Cluster,
            },
        };
        assert!(ChangePermission::from_bytes(&cluster_produce.to_vec()).is_err());
    }

    #[test]
    fn permissions_allow_their_right_in_their_scope() {
        let topic = Permission {
            right: Right::Consume,
            scope: Scope::Topic("shop".to_owned(), "orders".to_owned()),
        };
        assert!(topic.allows(Right::Consume, "shop", Some("orders")));
        assert!(!topic.allows(Right::Consume, "shop", Some("refunds")));
        assert!(!topic.allows(Right::Produce, "shop", Some("orders")));
        assert!(
            !topic.allows(Right::Consume, "shop", None),
            "the stream itself"
        );
        let stream = Permission {
            right: Right::Manage,
            scope: Scope::Stream("shop".to_owned()),
        };
        assert!(stream.allows(Right::Manage, "shop", None));
        assert!(stream.allows(Right::Manage, "shop", Some("orders")));
        assert!(!stream.allows(Right::Manage, "mail", None));
        let admin = Permission {
            right: Right::Admin,
            scope: Scope::Cluster,
        };
        assert!(admin.allows(Right::Produce, "any", Some("thing")));
        assert_eq!(topic.text(), "consume:shop/orders");
        assert_eq!(admin.text(), "admin");
    }
}
