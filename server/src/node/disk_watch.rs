//! The data disk's watcher: reads the free space every
//! [`DISK_CHECK_MS`] into the node's
//! [`DiskRoom`](crate::node::disk::DiskRoom), so that produces stop
//! while the disk is used up and start again by themselves once space is
//! freed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::node::disk::{DISK_CHECK_MS, reserve_for, space};
use crate::shared::Shared;

/// Reads the data disk's free space every [`DISK_CHECK_MS`] until the node
/// stops, updating the shared
/// [`DiskRoom`](crate::node::disk::DiskRoom) and the metrics, and logging
/// each change between full and not.
pub async fn watch(shared: Arc<Shared>) {
    let path: PathBuf = shared.config.data_dir.clone();
    let mut full = false;
    let mut interval = tokio::time::interval(Duration::from_millis(DISK_CHECK_MS));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !shared.stopping() {
        interval.tick().await;
        let (free, total) = match space(&path) {
            Ok(space) => space,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "disk: cannot read free space");
                continue;
            }
        };
        let reserve = reserve_for(shared.config.disk_reserve_bytes, total);
        let now_full = shared.disk.observe(free, reserve);
        crate::metrics::disk(free, now_full);
        if now_full != full {
            full = now_full;
            match full {
                true => tracing::error!(free, reserve, path = %path.display(),
                    "disk: the data disk is full; refusing produces until space is freed"),
                false => tracing::warn!(free, reserve, path = %path.display(),
                    "disk: the data disk has room again; taking produces"),
            }
        }
    }
}
