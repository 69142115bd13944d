//! Metrics: names, the Prometheus endpoint, and handles the hot paths keep.
//!
//! | metric | kind | meaning |
//! |---|---|---|
//! | `partitions_untrusted_log` | gauge | hosted groups whose log is untrusted (restarted without a clean mark, not yet in a view) |
//! | `partition_applied_divergence_total{group}` | counter | StartViews that contradicted applied history |
//! | `partition_storage_damage_total{kind}` | counter | what opening a partition found: `damaged_entry` (entries repaired in place), `damaged_tail` (a log ending in damaged bytes, cut after its ops were marked maybe acked), `unsynced_dropped` (a reopen after a failed write or sync dropped the tail past the durable checkpoint), `lost_tail` (the log ended below its durable mark: the disk lost writes without a trace), `index_rebuilt` |
//! | `partition_behind_log_start_total` | counter | replicas that lacked ops a peer's retention had dropped, and so caught up by state transfer |
//! | `partition_retention_segments_removed_total` | counter | record-log segments retention removed |
//! | `consumer_group_members_expired_total` | counter | consumer group members the coordinator removed after their session timeout |
//! | `view_changes_total{group}` | counter | view changes this replica started |
//! | `state_transfers_installed_total{group}` | counter | state transfers installed (after a quarantine or a reopen awaiting one) |
//! | `partition_view{group}` | gauge | the view the replica is normal in |
//! | `partition_commit_op{group}` | gauge | the replica's commit number |
//! | `produce_latency_seconds` | histogram | produce request in → reply out, on the primary |
//! | `wal_write_durable_seconds` | histogram | prepare handed to the WAL → fsynced |
//! | `wal_bytes_written_total` | counter | bytes the WAL wrote |
//! | `wal_syncs_total` | counter | fdatasyncs the WAL completed |
//! | `wal_io_errors_total` | counter | failed WAL operations |
//! | `bus_frames_dropped_total` | counter | frames dropped at a full or closed peer queue |
//! | `requests_refused_invalid_body_total{operation}` | counter | requests refused `InvalidRequest` at the door: the body does not decode as the operation's |
//! | `quota_throttled_total{user,rate}`, `quota_throttled_ms_total{user,rate}` | counter | requests delayed for a user's quota (`produce`, `fetch`, `requests`), and the milliseconds |
//! | `client_connections` | gauge | client connections open |
//! | `client_connections_closed_total{reason}` | counter | connections closed for a limit: `too_many_on_node`, `too_many_from_address`, `no_sign_in_in_time`, `idle` |
//! | `client_replies_busy_total` | counter | replies answered `Busy` because their connection's queue held too many unread bytes |
//! | `groups_failed_total` | counter | groups stopped on this node by a panic in their code (contained: the node and its other groups go on; see `attention`) |
//! | `client_frames_rejected_total` | counter | client connections closed for a bad frame (or a failed TLS handshake) |
//! | `sign_ins_failed_total` | counter | `Authenticate` requests refused `AuthenticationFailed` (unknown user, wrong password or token, a stored hash outside the fixed parameters) |
//! | `sign_ins_refused_busy_total` | counter | `Authenticate` requests refused `Busy`: the password-check pool and its queue were full |
//! | `sign_ins_throttled_total` | counter | `Authenticate` requests refused `Throttled` unchecked: too many failures from the address or for the user name |
//! | `requests_refused_client_id_total` | counter | requests refused `PermissionDenied` because their client id belongs to another user |
//! | `audit_actions_total{action, outcome}` | counter | admin actions recorded in the audit log, by outcome (see `audit`) |
//! | `requests_refused_unsafe_total{operation}` | counter | reassignments and drops refused `Refused` by the node's safety check (see `guard`) |
//! | `requests_refused_permission_total{operation}` | counter | requests refused `PermissionDenied` (a node-internal operation from a client) |
//! | `replica_frames_rejected_total` | counter | replica-bus connections closed for a bad frame, a failed TLS handshake, or a certificate of another node |
//! | `replica_frames_refused_total` | counter | well-formed replica-bus frames dropped because their sender is not a replica of their group here |
//! | `consensus_dropped_total{reason}` | counter | inputs consensus dropped |
//! | `groups_hosted` | gauge | groups (partitions and the metadata plane) this node hosts |
//! | `groups_quiet` | gauge | hosted groups that are quiet: idle, not ticked, sending nothing of their own |
//! | `peer_suspected{peer}` | gauge | 1 while the node-level liveness suspects the peer (silent for a heartbeat timeout) |
//! | `node_disk_free_bytes` | gauge | free bytes on the data disk (read every 100 ms) |
//! | `node_disk_full` | gauge | 1 while the data disk's free space is below the reserve (produces refused) |
//! | `produce_refused_disk_full_total` | counter | produces refused with `DiskFull` |
//! | `cursors_expired_total` | counter | cursors a primary deleted for want of use: no store for `cursor_retention_ms` |
//! | `cursor_stores_refused_limit_total` | counter | cursor stores refused `LimitExceeded`: the partition holds `cursor_consumers_per_partition_max` consumer names and the store named a new one |
//! | `bus_queued_bytes{peer}` | gauge | bytes waiting in the bus queue to the peer (sampled every tick) |

use std::net::SocketAddr;
use std::time::Duration;

use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::PrometheusBuilder;
use strand_consensus::DropReason;
use strand_wal::{IoEvent, IoObserver};

/// Starts the `/metrics` endpoint on `address` (needs a tokio runtime).
pub fn install(address: SocketAddr) -> Result<(), String> {
    PrometheusBuilder::new()
        .with_http_listener(address)
        .install()
        .map_err(|error| format!("cannot serve metrics on {address}: {error}"))?;
    describe();
    Ok(())
}

fn describe() {
    metrics::describe_gauge!(
        "partitions_untrusted_log",
        "hosted groups whose log is untrusted"
    );
    metrics::describe_counter!(
        "partition_storage_damage_total",
        "damage found when opening partitions, by kind"
    );
    metrics::describe_counter!(
        "partition_applied_divergence_total",
        "StartViews that contradicted applied history"
    );
    metrics::describe_counter!(
        "partition_behind_log_start_total",
        "replicas that lacked ops a peer's retention had dropped (they catch up by state transfer)"
    );
    metrics::describe_counter!(
        "partition_retention_segments_removed_total",
        "record-log segments retention removed"
    );
    metrics::describe_counter!("view_changes_total", "view changes this replica started");
    metrics::describe_counter!(
        "cursors_expired_total",
        "cursors a primary deleted for want of use (no store for cursor_retention_ms)"
    );
    metrics::describe_counter!(
        "cursor_stores_refused_limit_total",
        "cursor stores refused LimitExceeded: a new consumer name past the partition's bound"
    );
    metrics::describe_counter!(
        "consumer_group_members_expired_total",
        "consumer group members the coordinator removed after their session timeout"
    );
    metrics::describe_gauge!("groups_hosted", "groups this node hosts");
    metrics::describe_gauge!(
        "groups_quiet",
        "hosted groups that are quiet: idle, not ticked, sending nothing of their own"
    );
    metrics::describe_gauge!(
        "peer_suspected",
        "1 while the node-level liveness suspects the peer (silent past its silence limit)"
    );
    metrics::describe_gauge!(
        "peer_silence_limit_ms",
        "how long the peer may be silent before it is suspected: the primary timeout, or twice the longest silence it ended lately, up to 1 s"
    );
    gauge!("partitions_untrusted_log").set(0.0);
}

/// A group's log became untrusted (`true`) or trusted again (`false`).
pub fn untrusted_log(untrusted: bool) {
    let delta = if untrusted { 1.0 } else { -1.0 };
    gauge!("partitions_untrusted_log").increment(delta);
}

/// A prepare became durable `elapsed` after it was handed to the WAL.
pub fn write_durable(elapsed: Duration) {
    histogram!("wal_write_durable_seconds").record(elapsed.as_secs_f64());
}

/// A produce was answered `Ok` `elapsed` after it arrived.
pub fn produce_latency(elapsed: Duration) {
    histogram!("produce_latency_seconds").record(elapsed.as_secs_f64());
}

/// The gauge of a group's commit number, held by its actor (looked up once).
pub fn commit_op_gauge(group: &str) -> metrics::Gauge {
    gauge!("partition_commit_op", "group" => group.to_owned())
}

/// A group's view, when it becomes normal.
pub fn view(group: &str, view: u32) {
    gauge!("partition_view", "group" => group.to_owned()).set(f64::from(view));
}

/// A group's assignment epoch, when one starts (a reassignment moved it).
pub fn epoch(group: &str, epoch: u32) {
    gauge!("partition_epoch", "group" => group.to_owned()).set(f64::from(epoch));
}

/// A group started a view change.
pub fn view_change(group: &str) {
    counter!("view_changes_total", "group" => group.to_owned()).increment(1);
}

/// A state transfer was installed into a group's partition.
pub fn state_transfer_installed(group: &str) {
    counter!("state_transfers_installed_total", "group" => group.to_owned()).increment(1);
}

/// A group's new view contradicted applied history.
pub fn applied_divergence(group: &str) {
    counter!("partition_applied_divergence_total", "group" => group.to_owned()).increment(1);
}

/// The data disk's latest reading.
pub fn disk(free_bytes: u64, full: bool) {
    gauge!("node_disk_free_bytes").set(free_bytes as f64);
    gauge!("node_disk_full").set(if full { 1.0 } else { 0.0 });
}

/// A produce refused because the data disk is full.
pub fn produce_refused_disk_full() {
    counter!("produce_refused_disk_full_total").increment(1);
}

/// A cursor store named a new consumer past the partition's bound on
/// consumer names and was refused `LimitExceeded`.
pub fn cursor_store_refused_limit() {
    counter!("cursor_stores_refused_limit_total").increment(1);
}

/// `count` idle cursors expired (tombstones appended by their primary).
pub fn cursors_expired(count: usize) {
    counter!("cursors_expired_total").increment(count as u64);
}

/// A replica lacked ops a peer's retention had dropped.
pub fn behind_log_start() {
    counter!("partition_behind_log_start_total").increment(1);
}

/// What opening a partition found that an operator should know: damage
/// repaired from peers, a tail cut, indexes rebuilt.
pub fn storage_found(recovery: &strand_partition::Recovery) {
    let count = |kind: &'static str, found: usize| {
        if found > 0 {
            counter!("partition_storage_damage_total", "kind" => kind).increment(found as u64);
        }
    };
    count("damaged_entry", recovery.damage.len());
    count(
        "damaged_tail",
        usize::from(recovery.damaged_tail_from.is_some()),
    );
    count("lost_tail", usize::from(recovery.lost_tail_from.is_some()));
    count(
        "unsynced_dropped",
        usize::from(recovery.unsynced_dropped_from.is_some()),
    );
    count("index_rebuilt", recovery.indexes_rebuilt.len());
}

/// The coordinator removed a consumer group member whose session expired.
pub fn group_member_expired() {
    counter!("consumer_group_members_expired_total").increment(1);
}

/// Retention removed `segments` record-log segments of a partition.
pub fn retention_removed(segments: usize) {
    counter!("partition_retention_segments_removed_total").increment(segments as u64);
}

/// The metadata plane snapshotted its catalog (`image_bytes` long) and
/// dropped `segments` of its log below the older snapshot.
pub fn catalog_compacted(image_bytes: usize, segments: usize) {
    counter!("metadata_snapshots_total").increment(1);
    gauge!("metadata_snapshot_bytes").set(image_bytes as f64);
    counter!("metadata_log_segments_removed_total").increment(segments as u64);
}

/// Consensus dropped an input.
pub fn dropped(reason: DropReason) {
    counter!("consensus_dropped_total", "reason" => format!("{reason:?}")).increment(1);
}

/// A frame to a peer was dropped at its queue.
pub fn bus_frame_dropped() {
    counter!("bus_frames_dropped_total").increment(1);
}

/// A well-formed bus frame was dropped: its sender is not a replica of its
/// group in this node's catalog (a peer whose catalog differs, e.g. around a
/// change of the group's replicas). The connection stays open.
pub fn replica_frame_refused() {
    counter!("replica_frames_refused_total").increment(1);
}

/// A request was refused to its caller (`PermissionDenied`).
pub fn permission_denied(operation: strand_wire::Operation) {
    counter!("requests_refused_permission_total", "operation" => format!("{operation:?}"))
        .increment(1);
}

/// A request was refused `InvalidRequest` because its body does not decode
/// as its operation's.
pub fn request_body_invalid(operation: strand_wire::Operation) {
    counter!("requests_refused_invalid_body_total", "operation" => format!("{operation:?}"))
        .increment(1);
}

/// A request of `user` waited `delay` for its `rate` quota.
pub fn quota_throttled(user: &str, rate: &'static str, delay: std::time::Duration) {
    let labels = [("user", user.to_owned()), ("rate", rate.to_owned())];
    counter!("quota_throttled_total", &labels).increment(1);
    counter!("quota_throttled_ms_total", &labels).increment(delay.as_millis() as u64);
}

/// A reply was answered `Busy` instead: its connection's queue held too
/// many bytes its client had not read.
pub fn reply_busy_queue_full() {
    counter!("client_replies_busy_total").increment(1);
}

/// Client connections open now.
pub fn client_connections(open: usize) {
    gauge!("client_connections").set(open as f64);
}

/// A client connection was closed for a limit: `too_many_on_node`,
/// `too_many_from_address`, `no_sign_in_in_time`, `idle`.
pub fn client_connection_refused(reason: &'static str) {
    counter!("client_connections_closed_total", "reason" => reason).increment(1);
}

/// A group's code panicked on this node: the group alone stopped here.
pub fn group_failed() {
    counter!("groups_failed_total").increment(1);
}

/// A sign-in was refused: the credentials do not hold.
pub fn sign_in_failed() {
    counter!("sign_ins_failed_total").increment(1);
}

/// A sign-in was refused unchecked: the password-check pool was full.
pub fn sign_in_busy() {
    counter!("sign_ins_refused_busy_total").increment(1);
}

/// A sign-in was refused unchecked: too many failures from its address or
/// for its user name.
pub fn sign_in_throttled() {
    counter!("sign_ins_throttled_total").increment(1);
}

/// A request was refused: its client id belongs to another user.
pub fn client_id_refused() {
    counter!("requests_refused_client_id_total").increment(1);
}

/// An admin action was recorded in the audit log.
pub fn audited(action: &str, outcome: &str) {
    counter!("audit_actions_total", "action" => action.to_owned(), "outcome" => outcome.to_owned())
        .increment(1);
}

/// A partition move was refused by the node's safety check.
pub fn refused_unsafe(operation: strand_wire::Operation) {
    counter!("requests_refused_unsafe_total", "operation" => format!("{operation:?}")).increment(1);
}

/// A Kafka request was decoded, counted by API.
pub fn kafka_request(api: strand_kafka::api::ApiKey) {
    counter!("kafka_requests_total", "api" => format!("{api:?}")).increment(1);
}

/// Kafka consumer groups this node coordinates.
pub fn kafka_groups(groups: usize) {
    gauge!("kafka_groups").set(groups as f64);
}

/// A client connection was closed for a bad frame.
pub fn client_frame_rejected() {
    counter!("client_frames_rejected_total").increment(1);
}

/// A replica-bus connection was closed for a bad frame.
pub fn replica_frame_rejected() {
    counter!("replica_frames_rejected_total").increment(1);
}

/// An answer to a node's own call arrived for no call in flight (it timed
/// out, or answers a previous session).
pub fn node_call_answer_unmatched() {
    counter!("node_call_answers_unmatched_total").increment(1);
}

/// Counts the WAL's I/O on its writer thread.
#[derive(Debug, Default, Clone, Copy)]
pub struct WalMetrics;

impl IoObserver for WalMetrics {
    fn on_event(&self, event: IoEvent) {
        match event {
            IoEvent::Written { len, .. } => counter!("wal_bytes_written_total").increment(len),
            IoEvent::Synced { .. } => counter!("wal_syncs_total").increment(1),
            IoEvent::Failed { .. } => counter!("wal_io_errors_total").increment(1),
        }
    }
}

/// The node-level liveness of a peer changed: 1 while it is suspected.
pub fn peer_suspected(peer: u32, suspected: bool) {
    gauge!("peer_suspected", "peer" => peer.to_string()).set(f64::from(u8::from(suspected)));
}

/// How long `peer` may be silent before it is suspected now (it grows with
/// the silences the peer ended lately).
pub fn peer_silence_limit(peer: u32, limit_ms: u64) {
    gauge!("peer_silence_limit_ms", "peer" => peer.to_string()).set(limit_ms as f64);
}

/// Bytes waiting in the bus queue to `peer`, as sampled now.
pub fn bus_queued_bytes(peer: u32, bytes: u64) {
    gauge!("bus_queued_bytes", "peer" => peer.to_string()).set(bytes as f64);
}

/// A group started (`1`) or stopped (`-1`) on this node.
pub fn groups_hosted(delta: f64) {
    gauge!("groups_hosted").increment(delta);
}

/// This node's replica of a hosted group became (`1`) or stopped being
/// (`-1`) its serving primary.
pub fn groups_leading(delta: f64) {
    gauge!("groups_leading").increment(delta);
}

/// A group here handed its primary role to its preferred primary.
pub fn handover_started() {
    counter!("handovers_total").increment(1);
}

/// A hosted group went quiet (`1`) or woke (`-1`).
pub fn groups_quiet(delta: f64) {
    gauge!("groups_quiet").increment(delta);
}
