//! The metadata plane's log, kept bounded: the catalog snapshotted beside
//! the log (two alternating copies, see the partition's `machine_snapshot`)
//! once enough ops committed since the last one, and the sealed log
//! segments below the older copy dropped, as retention drops a partition's.
//! A replica behind where the log now starts catches up by state transfer,
//! which carries a snapshot; the catalog is then rebuilt from it and the
//! ops after it.
//!
//! A snapshot is taken only at a commit number the superblock holds on
//! disk, so a reopen never finds a snapshot ahead of its commit: no op is
//! applied twice, and none is skipped.

use strand_partition::{Disk, PartitionError, RetentionPolicy};

use super::GroupHost;

/// What one compaction of the metadata log did, for the owner's log and
/// metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogCompaction {
    /// The op the new snapshot reflects.
    pub snapshot_op: u64,
    /// The catalog image's bytes.
    pub image_bytes: usize,
    /// Log segments dropped below the older snapshot.
    pub segments_removed: usize,
    /// The first op the log now holds.
    pub log_start_op: u64,
}

impl<D: Disk> GroupHost<D> {
    /// For the metadata plane, on the owner's periodic check: once
    /// `ops_between` ops committed since the newest catalog snapshot,
    /// snapshots the catalog at the commit and drops the log below the
    /// older snapshot. When the commit is not yet persisted, asks consensus
    /// to persist it and waits for the next check. `None` when nothing was
    /// done (a partition's host, storage not settled, too few ops); a
    /// storage failure fails the host like any other.
    pub fn compact_catalog(&mut self, ops_between: u64) -> Option<CatalogCompaction> {
        assert!(ops_between > 0, "a snapshot per op at most");
        let catalog = self.replica.machine().catalog()?;
        if !self.storage_settled() {
            return None;
        }
        let commit = self.replica.commit();
        let partition = self.partition_view();
        let newest = partition.machine_snapshot_newest().unwrap_or(0);
        if commit < newest.saturating_add(ops_between) {
            return None;
        }
        if commit > partition.persisted_commit() || commit > partition.durable_op() {
            self.replica.persist_commit_now(&mut self.effects);
            return None;
        }
        assert!(
            catalog.applied_op <= commit,
            "the catalog applies committed ops"
        );
        let image = crate::catalog_image::encode(catalog);
        debug_assert!(
            crate::catalog_image::decode(&image).as_ref() == Ok(catalog),
            "the catalog's image does not read back as the catalog"
        );
        let written = self.partition_mut().write_machine_snapshot(commit, &image);
        if let Err(error) = written {
            self.storage_error("write a catalog snapshot", &error);
            return None;
        }
        assert_eq!(
            self.partition_view().machine_snapshot_newest(),
            Some(commit),
            "the snapshot just written is not the newest"
        );
        let segments_removed = match self.drop_log_below_snapshots() {
            Ok(removed) => removed,
            Err(error) => {
                self.storage_error("drop the metadata log below its snapshots", &error);
                return None;
            }
        };
        Some(CatalogCompaction {
            snapshot_op: commit,
            image_bytes: image.len(),
            segments_removed,
            log_start_op: self.partition_view().head_op(),
        })
    }

    /// Drops the sealed segments wholly below the older snapshot's op (each
    /// copy keeps the log after it), and tells consensus where the log
    /// starts.
    fn drop_log_below_snapshots(&mut self) -> Result<usize, PartitionError> {
        let floor = self
            .partition_view()
            .machine_snapshot_floor()
            .expect("a snapshot was just written");
        assert!(
            floor <= self.replica.commit(),
            "the older snapshot at op {floor} is past commit {}",
            self.replica.commit()
        );
        let everything_below = RetentionPolicy {
            retention_bytes: Some(0),
            retention_ms: None,
        };
        let outcome = self
            .partition_mut()
            .apply_retention(everything_below, 0, floor + 1)?;
        assert!(
            self.partition_view().head_op() <= floor + 1,
            "the log starts at op {}, past the older snapshot's next op {}",
            self.partition_view().head_op(),
            floor + 1
        );
        if outcome.segments_removed > 0 {
            self.note_log_start();
        }
        Ok(outcome.segments_removed)
    }

    /// After a state transfer installed the metadata log: the catalog
    /// rebuilt from the snapshot it carried and the ops after it. A catalog
    /// that cannot be rebuilt fails storage (the owner opens the group
    /// again, and the open tries the same from disk).
    pub(super) fn rebuild_catalog_after_transfer(&mut self) {
        if self.replica.machine().catalog().is_none() {
            return;
        }
        let Some(partition) = self.partition.as_mut() else {
            return;
        };
        if let Err(error) = crate::machine::rebuild_catalog(&mut self.replica, partition) {
            self.storage_error("rebuild the catalog from the transferred log", &error);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use bytes::Bytes;
    use strand_consensus::ClientRequest;
    use strand_partition::{Disk, MemoryDisk};
    use strand_wire::ops::CreateStream;
    use strand_wire::{Body, CommandHeader, Msg, Operation, RequestHeader, ViewId};

    use super::super::tests::{answer_all, lone_spec};
    use super::super::{GroupHost, HostSpec, Output};

    const DIR: &str = "/memory/metadata";

    /// The metadata plane alone on node 1, with small log segments: the
    /// lone replica of the host's tests, as group 0.
    fn catalog_spec() -> HostSpec {
        let mut spec = lone_spec();
        spec.replica.group = 0;
        spec.dir = DIR.into();
        spec.catalog_nodes = Some(vec![1]);
        spec.storage.log.segment_bytes_max = 2048;
        spec
    }

    fn create_stream(request: u64) -> ClientRequest {
        let mut header = RequestHeader::new(0, 0, ViewId::ZERO, 0);
        header.client.set(42);
        header.request.set(request);
        header.operation = Operation::CreateStream as u8;
        let body = CreateStream {
            name: format!("stream-{request}"),
        };
        ClientRequest {
            request: Msg::new(header, Bytes::from(body.to_vec())),
            record_count: 0,
            timestamp_ns: 0,
        }
    }

    fn open(disk: MemoryDisk) -> GroupHost<MemoryDisk> {
        let (mut host, _) =
            GroupHost::open(&catalog_spec(), disk, Box::new(|| MemoryDisk::new(9))).expect("open");
        host.start();
        let mut out = Vec::new();
        for _ in 0..10 {
            host.settle(&mut out);
        }
        host
    }

    /// Creates streams `from..=to`, then persists the commit.
    fn create_streams(host: &mut GroupHost<MemoryDisk>, from: u64, to: u64) {
        for request in from..=to {
            host.submit(create_stream(request));
            answer_all(host, 1);
        }
        host.persist_commit_if_behind();
        let mut out: Vec<Output> = Vec::new();
        for _ in 0..10 {
            host.settle(&mut out);
        }
    }

    fn streams_of(host: &GroupHost<MemoryDisk>) -> Vec<String> {
        let catalog = host.replica.machine().catalog().expect("the catalog");
        catalog.streams.keys().cloned().collect()
    }

    #[test]
    fn the_metadata_log_goes_below_the_older_snapshot_and_reopens_from_either() {
        let mut host = open(MemoryDisk::new(1));
        create_streams(&mut host, 1, 60);
        assert_eq!(host.compact_catalog(100), None, "too few ops yet");
        let first = host.compact_catalog(20).expect("a snapshot");
        assert_eq!(first.snapshot_op, 60);
        assert!(first.segments_removed > 0, "{first:?}");
        create_streams(&mut host, 61, 100);
        let second = host.compact_catalog(20).expect("a second snapshot");
        assert_eq!(second.snapshot_op, 100);
        let log_start = host.partition_view().head_op();
        assert!(
            log_start > 1 && log_start <= 61,
            "from the older copy on: {log_start}"
        );
        assert_eq!(host.replica.log_start(), log_start);
        let expected = streams_of(&host);
        assert_eq!(expected.len(), 100);

        let disk = host.close().expect("close").disk.expect("the disk");
        let mut reopened = open(disk);
        assert_eq!(streams_of(&reopened), expected, "from the newer snapshot");
        create_streams(&mut reopened, 101, 105);
        let mut expected_more = expected.clone();
        expected_more.extend((101..=105).map(|request| format!("stream-{request}")));
        expected_more.sort();
        assert_eq!(streams_of(&reopened), expected_more);

        // The newer copy damaged: the older one and the log after it stand in.
        let mut disk = reopened.close().expect("close").disk.expect("the disk");
        let newer = if snapshot_op_of(&mut disk, 0) > snapshot_op_of(&mut disk, 1) {
            0
        } else {
            1
        };
        let path = Path::new(DIR).join(format!("machine.snapshot.{newer}"));
        disk.write_at(&path, 40, &[0xff; 8]).expect("damage");
        let fallen_back = open(disk);
        assert_eq!(
            streams_of(&fallen_back),
            expected_more,
            "from the older snapshot"
        );
    }

    #[test]
    fn a_metadata_log_that_lost_its_tail_below_the_newer_snapshot_reopens_from_the_older() {
        let mut host = open(MemoryDisk::new(1));
        create_streams(&mut host, 1, 60);
        host.compact_catalog(20).expect("a snapshot");
        create_streams(&mut host, 61, 100);
        host.compact_catalog(20).expect("a second snapshot");
        create_streams(&mut host, 101, 105);
        let expected = streams_of(&host);
        let mut disk = host.close().expect("close").disk.expect("the disk");
        // The newest segment (ops 98 on) lost: the log ends below the
        // newer snapshot (op 100) and the persisted commit (105).
        let records = Path::new(DIR).join("records");
        for name in ["00000000000000000098.log", "00000000000000000098.index"] {
            disk.storage_mut()
                .remove(&records.join(name))
                .expect("removed");
        }
        // The lone replica opens at the commit its log supports, and its
        // catalog from the older snapshot and the log after it, not from
        // the newer snapshot above that commit (whose ops would then be
        // committed twice).
        let mut reopened = open(disk);
        let commit = reopened.replica.commit();
        assert!(commit < 100, "the log supports commit {commit}");
        let mut supported: Vec<String> = (1..=commit)
            .map(|request| format!("stream-{request}"))
            .collect();
        supported.sort();
        assert_eq!(streams_of(&reopened), supported);
        assert!(expected.len() > supported.len());
        // And it goes on committing.
        create_streams(&mut reopened, 106, 106);
        assert!(streams_of(&reopened).contains(&"stream-106".to_owned()));
    }

    /// The op of snapshot copy `copy` (0 when unreadable).
    fn snapshot_op_of(disk: &mut MemoryDisk, copy: u8) -> u64 {
        let path = Path::new(DIR).join(format!("machine.snapshot.{copy}"));
        let bytes = disk.read_file(&path).expect("read").unwrap_or_default();
        bytes.get(12..20).map_or(0, |op| {
            u64::from_le_bytes(op.try_into().expect("eight bytes"))
        })
    }
}
