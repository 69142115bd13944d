//! The security room: who a caller is, what it may do, what it may cost,
//! and the record of what it did.
//!
//! | module | owns |
//! |---|---|
//! | [`caller`] | who calls on a client connection (a node, a client, anyone), as its handshake tells |
//! | [`request_checks`] | what the client port asks of security per request: sign-in, rights, client ids, node-only operations, quotas |
//! | [`auth`] | signing in and the right each operation needs; sign-in hardened against hostile clients (fixed Argon2 parameters, a bounded check pool, failure limits, client id owners) |
//! | [`audit`] | the audit log: every admin action with identity, source, time, target and outcome |
//! | [`quota`] | per-user produce, fetch and request rates, enforced by delaying |

pub mod audit;
pub mod auth;
pub mod caller;
pub mod quota;
pub mod request_checks;
