//! The trust decision at open, on a real partition over the in-memory disk:
//! which reopened logs keep the plain merge.
//!
//! Reference B keeps the plain merge only where both `durability` and
//! `consumer_offset_durability` are `persisted`. Strand decides on
//! `durability` alone (`docs/reference-points.md`, point 2): a log is
//! untrusted because its replica may have acknowledged ops (PrepareOk) that
//! never reached its disk, and under `persisted` no PrepareOk precedes the
//! fsync, whatever the cursors do. Cursor events are not ops of the log,
//! are never counted in a quorum or a nack, and only break ties, so a
//! cursor log that lost unsynced events cannot make a view drop a confirmed
//! record. These tests fail if the decision is reverted: a `persisted` topic
//! with `replicated` cursors would then reopen untrusted after a crash.

use std::path::PathBuf;

use crate::group_host::{GroupHost, HostSpec};
use bytes::Bytes;
use strand_consensus::epoch::{Membership, SlotSet};
use strand_consensus::{Config, Timeouts};
use strand_partition::fixtures::produce;
use strand_partition::{MemoryDisk, PartitionConfig, RetentionPolicy};
use strand_wal::CrashMode;
use strand_wire::ops::{CursorEvent, CursorEvents};
use strand_wire::{Body, ConfirmPolicy, Durability};

/// Replica 0 of group 1, one of three, with these policies. (A replica
/// alone in its group trusts any log: it has no peer to distrust it against.)
fn spec(durability: Durability, cursor_durability: Durability) -> HostSpec {
    HostSpec {
        replica: Config {
            cluster: 0,
            group: 1,
            replica: 0,
            memberships: vec![Membership::new(
                0,
                SlotSet::of(&[0, 1, 2]),
                ConfirmPolicy::MajorityDurable,
            )],
            durability,
            cursor_durability,
            timeouts: Timeouts::default(),
            seed: 7,
        },
        confirm: ConfirmPolicy::MajorityDurable,
        dir: PathBuf::from("/memory/group-1"),
        catalog_nodes: None,
        storage: PartitionConfig::default(),
        retention: RetentionPolicy::default(),
    }
}

/// Opens the group on a fresh disk, writes an op and a cursor event to its
/// partition (so both logs hold something), then crashes it: no
/// clean-shutdown mark, unsynced writes lost. Returns the group reopened on
/// that disk.
fn crash_and_reopen(spec: &HostSpec) -> GroupHost<MemoryDisk> {
    let (mut host, recovery) =
        GroupHost::open(spec, MemoryDisk::new(1), Box::new(|| MemoryDisk::new(2))).expect("open");
    assert!(recovery.fresh);
    assert!(host.progress().trusted, "a fresh log is trusted");
    let partition = host.partition_mut();
    partition
        .write_prepare(produce(1, 0, 0, 1, 8))
        .expect("write an op");
    let event = CursorEvent {
        consumer: "reader".to_owned(),
        offset: 1,
    };
    let events = Bytes::from(
        CursorEvents {
            events: vec![event],
        }
        .to_vec(),
    );
    partition
        .append_cursors(0, 1, &events)
        .expect("write a cursor event");
    let mut completed = Vec::new();
    partition.flush(&mut completed).expect("flush");
    let mut disk = host.abandon().expect("the disk");
    disk.crash(CrashMode::LoseUnsynced);
    let (reopened, recovery) =
        GroupHost::open(spec, disk, Box::new(|| MemoryDisk::new(3))).expect("reopen");
    assert!(
        recovery.recovered_from_disk && !recovery.clean_shutdown,
        "an unclean reopen of a log on disk"
    );
    assert_eq!((recovery.op, recovery.cursor_tail), (1, 1));
    reopened
}

#[test]
fn a_persisted_log_reopened_after_a_crash_is_trusted() {
    let host = crash_and_reopen(&spec(Durability::Persisted, Durability::Persisted));
    assert!(
        host.progress().trusted,
        "persisted: nothing was acked before its fsync"
    );
}

#[test]
fn a_persisted_log_with_replicated_cursors_is_trusted_after_a_crash() {
    let host = crash_and_reopen(&spec(Durability::Persisted, Durability::Replicated));
    assert!(
        host.progress().trusted,
        "trust follows `durability` alone: cursor events are not ops of the log"
    );
}

#[test]
fn a_replicated_log_reopened_after_a_crash_is_untrusted_whatever_its_cursors() {
    for cursor_durability in [Durability::Persisted, Durability::Replicated] {
        let host = crash_and_reopen(&spec(Durability::Replicated, cursor_durability));
        assert!(
            !host.progress().trusted,
            "replicated records, {cursor_durability:?} cursors: it may lack ops it acked"
        );
    }
}
