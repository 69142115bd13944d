//! The audit log: every admin action a node receives (each operation whose
//! row of [`strand_wire::operation_table`] says audited: user and
//! permission changes included, and cursor deletes: they destroy a
//! consumer's position), and every failed sign-in ([`sign_in_failure`]), with who
//! asked, from where, when, what it named, and how it ended, as one JSON
//! object per line
//! in `<data_dir>/audit.log`, and a counter per action and outcome
//! (`audit_actions_total{action, outcome}`).
//!
//! The client port opens an entry when an admin request arrives
//! ([`Pending::open`]) and closes it when the connection sends the reply
//! to that request ([`Pending::close`]): the outcome is the reply's result
//! code, whichever part of the node produced it (the metadata plane, the
//! node's safety check, a permission refusal, a redirect to the primary).
//! An entry whose connection ends first is written `unanswered`. Every
//! attempt is an entry: a client that retries at the primary after
//! `NotPrimary` leaves one entry on each node it asked.
//!
//! Entries go to one writer task through a bounded queue
//! ([`AUDIT_QUEUE_CAPACITY`]); a connection with an entry to write waits
//! for room, so admin requests slow down rather than go unrecorded.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::Serialize;
use strand_wire::ops::{
    AcceptLoss, AddPartitions, AlterTopic, ChangePermission, CreateStream, CreateTopic, CreateUser,
    DeleteStream, DeleteTopic, DeleteUser, DropReplica, ReassignPartition,
};
use strand_wire::{Body, Operation, ReplyHeader, RequestHeader, ResultCode};
use tokio::sync::mpsc;

use crate::metrics;

/// Entries waiting for the writer at most.
pub const AUDIT_QUEUE_CAPACITY: usize = 4096;

/// Entries a connection holds open (awaiting their replies) at most; past
/// it the oldest is written `unanswered` (a client pipelining more admin
/// requests than this without reading replies).
pub const PENDING_PER_CONNECTION_MAX: usize = 1024;

/// The file name of the audit log in the data directory.
pub const AUDIT_LOG_FILE: &str = "audit.log";

/// One admin action as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// When the request arrived (RFC 3339, UTC, milliseconds).
    pub time: String,
    /// The operation (`CreateTopic`, `ReassignPartition`, ...).
    pub action: String,
    /// Who asked: `node N` (a node certificate), `anonymous` (TLS without a
    /// node certificate), or `unverified` (a plaintext port).
    pub identity: String,
    /// The connection's peer address.
    pub source: String,
    /// What the action named (`shop/orders`, `group 7 -> nodes 1,2,4`).
    pub target: String,
    /// The request skipped the node's safety check.
    pub forced: bool,
    /// The reply's result code (`Ok`, `Refused`, `NotPrimary`, ...), or
    /// `unanswered`.
    pub outcome: String,
}

/// What a request names, and whether it is forced; a body that does not
/// decode is recorded as such (the request is refused anyway).
fn target_of(operation: Operation, body: &[u8]) -> (String, bool) {
    let target = match operation {
        Operation::DeleteCursor => strand_wire::ops::DeleteCursor::from_bytes(body)
            .map(|delete| format!("cursor {}", delete.consumer)),
        Operation::CreateStream => CreateStream::from_bytes(body).map(|create| create.name),
        Operation::DeleteStream => DeleteStream::from_bytes(body).map(|delete| delete.name),
        Operation::CreateTopic => CreateTopic::from_bytes(body)
            .map(|create| format!("{}/{}", create.stream, create.topic)),
        Operation::DeleteTopic => DeleteTopic::from_bytes(body)
            .map(|delete| format!("{}/{}", delete.stream, delete.topic)),
        Operation::AlterTopic => {
            AlterTopic::from_bytes(body).map(|alter| format!("{}/{}", alter.stream, alter.topic))
        }
        Operation::AddPartitions => AddPartitions::from_bytes(body).map(|add| {
            format!(
                "{}/{} to {} partitions",
                add.stream, add.topic, add.partition_count
            )
        }),
        Operation::AcceptLoss => {
            AcceptLoss::from_bytes(body).map(|accept| format!("group {}", accept.group))
        }
        Operation::CreateUser => CreateUser::from_bytes(body).map(|create| create.name),
        Operation::DeleteUser => DeleteUser::from_bytes(body).map(|delete| delete.name),
        Operation::GrantPermission | Operation::RevokePermission => {
            ChangePermission::from_bytes(body)
                .map(|change| format!("{}: {}", change.user, change.permission.text()))
        }
        Operation::CreateToken => strand_wire::ops::CreateToken::from_bytes(body)
            .map(|create| format!("token {} for {}", create.id, create.user)),
        Operation::RevokeToken => strand_wire::ops::RevokeToken::from_bytes(body)
            .map(|revoke| format!("token {}", revoke.id)),
        Operation::RevokeCertificate => strand_wire::ops::RevokeCertificate::from_bytes(body)
            .map(|revoke| format!("certificate {}", revoke.fingerprint)),
        Operation::ReassignPartition => {
            return ReassignPartition::from_bytes(body).map_or_else(
                |error| (format!("undecodable: {error}"), false),
                |request| {
                    let nodes: Vec<String> = request.nodes.iter().map(u32::to_string).collect();
                    let target = format!("group {} -> nodes {}", request.group, nodes.join(","));
                    (with_dry_run(target, request.dry_run), request.force)
                },
            );
        }
        Operation::DropReplica => {
            return DropReplica::from_bytes(body).map_or_else(
                |error| (format!("undecodable: {error}"), false),
                |drop| {
                    let target = format!("group {} on node {}", drop.group, drop.node);
                    (with_dry_run(target, drop.dry_run), drop.force)
                },
            );
        }
        _ => return (String::new(), false),
    };
    (
        target.unwrap_or_else(|error| format!("undecodable: {error}")),
        false,
    )
}

/// A move's target, marked when the request was only a dry run.
fn with_dry_run(target: String, dry_run: bool) -> String {
    match dry_run {
        true => format!("{target} (dry run)"),
        false => target,
    }
}

/// The entry of a failed sign-in: `identity` as the attempt named itself,
/// from `source`, for user `target` (empty when it named none), ending in
/// `outcome` (`AuthenticationFailed`, `Throttled` or `Busy`).
pub fn sign_in_failure(identity: &str, source: &str, target: &str, outcome: ResultCode) -> Entry {
    Entry {
        time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
        action: format!("{:?}", Operation::Authenticate),
        identity: identity.to_owned(),
        source: source.to_owned(),
        target: target.to_owned(),
        forced: false,
        outcome: format!("{outcome:?}"),
    }
}

/// The node's audit log: a handle to its writer.
#[derive(Debug, Clone)]
pub struct AuditLog {
    entries: mpsc::Sender<Entry>,
}

impl AuditLog {
    /// Starts the writer appending to `<data_dir>/audit.log` (needs a tokio
    /// runtime).
    pub fn start(data_dir: &Path) -> std::io::Result<AuditLog> {
        let path = data_dir.join(AUDIT_LOG_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        let (entries, receiver) = mpsc::channel(AUDIT_QUEUE_CAPACITY);
        tokio::spawn(write_entries(path, file, receiver));
        Ok(AuditLog { entries })
    }

    /// Records `entry`, waiting for room in the writer's queue.
    pub async fn record(&self, entry: Entry) {
        metrics::audited(&entry.action, &entry.outcome);
        if self.entries.send(entry).await.is_err() {
            tracing::error!("audit: the writer is gone; an entry was not written");
        }
    }
}

/// Appends entries as they come, a batch per write, flushed to the OS.
async fn write_entries(path: PathBuf, mut file: std::fs::File, mut entries: mpsc::Receiver<Entry>) {
    let mut batch = Vec::new();
    while entries.recv_many(&mut batch, 256).await > 0 {
        let mut text = Vec::new();
        for entry in batch.drain(..) {
            if serde_json::to_writer(&mut text, &entry).is_ok() {
                text.push(b'\n');
            }
        }
        if let Err(error) = file.write_all(&text).and_then(|()| file.flush()) {
            tracing::error!(path = %path.display(), %error, "audit: cannot append to the audit log");
        }
    }
}

/// A connection's admin requests awaiting their replies.
#[derive(Debug, Clone, Default)]
pub struct Pending {
    entries: Arc<Mutex<HashMap<(u128, u64), Entry>>>,
    /// How many entries are open, so that the connection's writer skips
    /// every reply without a lock while none is (nearly always). Written
    /// under the lock; an entry is opened before its request is routed, so
    /// the writer that receives the reply sees it counted.
    open: Arc<AtomicUsize>,
}

impl Pending {
    /// Opens an entry for `request` if its operation is audited (its row
    /// of [`strand_wire::operation_table`]).
    pub fn open(
        &self,
        request: &RequestHeader,
        body: &[u8],
        identity: &str,
        source: &str,
    ) -> Option<Entry> {
        let operation = request.operation();
        if !operation.info().audited {
            return None;
        }
        let (target, forced) = target_of(operation, body);
        let entry = Entry {
            time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            action: format!("{operation:?}"),
            identity: identity.to_owned(),
            source: source.to_owned(),
            target,
            forced,
            outcome: String::new(),
        };
        let mut entries = self.entries.lock().expect("audit pending lock");
        let evicted = if entries.len() >= PENDING_PER_CONNECTION_MAX {
            let oldest = entries
                .iter()
                .min_by(|a, b| a.1.time.cmp(&b.1.time))
                .map(|(key, _)| *key);
            oldest.and_then(|key| entries.remove(&key))
        } else {
            None
        };
        entries.insert((request.client.get(), request.request.get()), entry);
        self.open.store(entries.len(), Ordering::Relaxed);
        evicted.map(|entry| Entry {
            outcome: "unanswered".to_owned(),
            ..entry
        })
    }

    /// The entry a reply frame closes, with its outcome; `None` when the
    /// frame answers nothing audited.
    pub fn close(&self, frame: &[u8]) -> Option<Entry> {
        if self.open.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let header = reply_header(frame)?;
        let mut entries = self.entries.lock().expect("audit pending lock");
        let mut entry = entries.remove(&(header.client.get(), header.request.get()))?;
        self.open.store(entries.len(), Ordering::Relaxed);
        entry.outcome = ResultCode::from_u16(header.result.get())
            .map_or_else(|| "unknown".to_owned(), |code| format!("{code:?}"));
        Some(entry)
    }

    /// Every open entry, written `unanswered` (the connection ended).
    pub fn abandon(&self) -> Vec<Entry> {
        let mut entries = self.entries.lock().expect("audit pending lock");
        self.open.store(0, Ordering::Relaxed);
        entries
            .drain()
            .map(|(_, entry)| Entry {
                outcome: "unanswered".to_owned(),
                ..entry
            })
            .collect()
    }
}

/// The header of a reply frame the node built itself.
fn reply_header(frame: &[u8]) -> Option<ReplyHeader> {
    use zerocopy::FromBytes;
    let (header, _) = ReplyHeader::read_from_prefix(frame).ok()?;
    Some(header)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use strand_wire::{CommandHeader, Msg};

    use super::*;

    fn request(operation: Operation, body: &[u8]) -> RequestHeader {
        let mut header = RequestHeader::new(0, 0, strand_wire::ViewId::ZERO, 0);
        header.client.set(7);
        header.request.set(3);
        header.operation = operation as u8;
        *Msg::new(header, Bytes::copy_from_slice(body)).header()
    }

    #[test]
    fn an_admin_request_is_closed_by_its_reply_with_the_result() {
        let pending = Pending::default();
        let body = DropReplica {
            group: 4,
            node: 2,
            force: true,
            dry_run: false,
        }
        .to_vec();
        let header = request(Operation::DropReplica, &body);
        assert_eq!(pending.open(&header, &body, "node 3", "127.0.0.1:9"), None);
        let produce = request(Operation::Produce, &[]);
        assert_eq!(
            pending.open(&produce, &[], "node 3", "x"),
            None,
            "not audited"
        );
        let error = strand_wire::ops::ErrorBody::message(ResultCode::Refused, "no");
        let reply = crate::net::replies::error_frame(&header, &error);
        let entry = pending.close(&reply).expect("closed");
        assert_eq!(entry.action, "DropReplica");
        assert_eq!(entry.target, "group 4 on node 2");
        assert!(entry.forced);
        assert_eq!(entry.outcome, "Refused");
        assert_eq!(entry.identity, "node 3");
        assert_eq!(pending.close(&reply), None, "closed once");
        assert!(pending.abandon().is_empty());
    }

    #[test]
    fn an_unanswered_request_is_written_when_the_connection_ends() {
        let pending = Pending::default();
        let body = CreateStream {
            name: "shop".to_owned(),
        }
        .to_vec();
        pending.open(
            &request(Operation::CreateStream, &body),
            &body,
            "anonymous",
            "a",
        );
        let abandoned = pending.abandon();
        assert_eq!(abandoned.len(), 1);
        assert_eq!(abandoned[0].outcome, "unanswered");
        assert_eq!(abandoned[0].target, "shop");
    }
}
