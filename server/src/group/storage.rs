//! A group's storage upkeep: retention (on a sealed segment under a size
//! limit, on an altered topic, and by age in the shard's periodic check),
//! the periodic check itself (commit persisted, idle cursors expired,
//! cursor-log compaction), and the metadata plane's log compaction.

use strand_partition::RetentionPolicy;

use super::Actor;
use crate::metrics;

impl Actor {
    /// Applies the retention policy now (the shard's age sweep, or a
    /// segment sealed under a size limit).
    pub fn apply_retention(&mut self) {
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64);
        let removed = self.host.retain(now_ns);
        if removed > 0 {
            metrics::retention_removed(removed);
            tracing::info!(
                group = self.spec.group,
                segments = removed,
                log_start_offset = self.host.log_start_offset(),
                "group: retention removed segments"
            );
        }
    }

    /// The shard's periodic storage check: age limits (for groups that
    /// keep a limited history), the commit number persisted if a quiet
    /// replica left it behind, idle cursors expired, and cursor-log
    /// compaction (for all).
    pub fn check_storage(&mut self) {
        if self.spec.retention != RetentionPolicy::default() {
            self.apply_retention();
        }
        self.host.persist_commit_if_behind();
        self.expire_cursors();
        self.settle_host();
        let frames = self.host.compact_cursors();
        if frames > 0 {
            tracing::info!(
                group = self.spec.group,
                frames,
                "group: cursor log compacted"
            );
        }
        self.compact_catalog();
    }

    /// The metadata plane's log compaction (see
    /// `strand_host::group_host::CatalogCompaction`); nothing for a
    /// partition.
    pub(super) fn compact_catalog(&mut self) {
        let ops_between = self.shared.config.metadata_snapshot_ops;
        if let Some(done) = self.host.compact_catalog(ops_between) {
            metrics::catalog_compacted(done.image_bytes, done.segments_removed);
            tracing::info!(
                snapshot_op = done.snapshot_op,
                image_bytes = done.image_bytes,
                segments_removed = done.segments_removed,
                log_start_op = done.log_start_op,
                "group: metadata log compacted"
            );
        }
        self.settle_host();
    }
}
