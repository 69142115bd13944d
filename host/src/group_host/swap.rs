//! The operations that consume the partition and swap its directory (a
//! quarantine here, a state transfer's install in `transfer`), and what the
//! host does when one fails: it is a storage failure like a failed write.
//! The partition hands its disk back; the host reopens it at once (so that
//! it always holds a partition, and its owner the disk), marks the group's
//! storage failed, and its owner opens the group again after its wait, as
//! after any failed write. The reopen finishes a swap the operation had
//! committed, or finds the partition as it was; it drops the log's tail past
//! the durable checkpoint, since the failure may have been a write's.

use strand_partition::{FailedSwap, Partition, PartitionConfig};

use super::{GroupHost, Output};
use strand_partition::Disk;

impl<D: Disk> GroupHost<D> {
    /// Moves the partition aside to `.fenced.N` and rebuilds it from the
    /// agreed prefix; the state transfer that completes it follows.
    pub(super) fn quarantine(&mut self, agreed_op: u64, out: &mut Vec<Output>) {
        assert!(
            agreed_op < self.replica.commit(),
            "a quarantine keeps op {agreed_op}, not below the diverged commit {}",
            self.replica.commit()
        );
        let Some(partition) = self.partition.take() else {
            return;
        };
        match partition.quarantine(agreed_op) {
            Ok((rebuilt, _, quarantined)) => {
                tracing::warn!(
                    agreed_op,
                    fenced = %quarantined.fenced_dir.display(),
                    linked = quarantined.segments_linked,
                    copied = quarantined.segments_copied,
                    "host: partition quarantined"
                );
                self.partition = Some(rebuilt);
                out.push(Output::Quarantined { agreed_op });
            }
            Err(failed) => self.after_failed_swap("quarantine the partition", failed, out),
        }
    }

    /// An operation that consumed the partition failed: storage failed, and
    /// the partition is reopened from the disk it handed back (see the
    /// module docs); [`Output::Stop`] when even that fails.
    pub(super) fn after_failed_swap(
        &mut self,
        what: &str,
        failed: FailedSwap<D>,
        out: &mut Vec<Output>,
    ) {
        assert!(self.partition.is_none(), "the operation consumed it");
        tracing::error!(error = %failed.error, "host: cannot {what}; reopening the partition");
        self.fail_storage(format!("cannot {what}: {}", failed.error));
        let disk = failed.disk.unwrap_or_else(|| (self.reopen.new_disk)());
        let config = PartitionConfig {
            drop_unsynced: true,
            ..self.reopen.config
        };
        match Partition::open_or_fence(disk, &self.reopen.dir, config) {
            Ok((partition, _, _)) => {
                self.partition = Some(partition);
                self.note_log_start();
            }
            Err(error) => {
                self.fail_storage(format!("cannot reopen the partition: {error}"));
                out.push(Output::Stop);
            }
        }
        assert!(self.storage_failed, "the owner opens the group again");
    }
}
