//! Groups whose storage failed on this node (a write found the disk full,
//! or failed), waiting to be opened again from disk: when each is due, and
//! how often it was reopened already (the pause doubles, up to 64 times
//! [`STORAGE_REOPEN_AFTER`]). The shard reopens a due group only while the
//! data disk has room.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a group whose storage failed waits before the shard opens it
/// again from disk (doubled after each reopen that failed again, up to
/// 64 times this); never while the data disk is full.
pub const STORAGE_REOPEN_AFTER: Duration = Duration::from_secs(2);

/// A group whose storage failed: when it is opened again, and how often it
/// was.
#[derive(Debug, Default)]
struct StorageRetry {
    due: Option<Instant>,
    reopens: u32,
}

/// Every group of one shard whose storage failed.
#[derive(Debug, Default)]
pub(crate) struct StorageRetries {
    groups: BTreeMap<u64, StorageRetry>,
}

impl StorageRetries {
    /// `group`'s storage is failed at `now`: it is due after its pause,
    /// unless a reopen is due already.
    pub(crate) fn failed(&mut self, group: u64, now: Instant) {
        let retry = self.groups.entry(group).or_default();
        if retry.due.is_none() {
            let backoff = 1u32 << retry.reopens.min(6);
            retry.due = Some(now + STORAGE_REOPEN_AFTER * backoff);
        }
    }

    /// Forgets `group` (closed, failed otherwise, or no longer hosted).
    pub(crate) fn forget(&mut self, group: u64) {
        self.groups.remove(&group);
    }

    /// Whether no group waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The groups due by `now`, each counted as reopened once more (and
    /// due again only once it fails again).
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<u64> {
        let due: Vec<u64> = self
            .groups
            .iter()
            .filter(|(_, retry)| retry.due.is_some_and(|due| due <= now))
            .map(|(group, _)| *group)
            .collect();
        for group in &due {
            let retry = self.groups.get_mut(group).expect("a due group waits");
            retry.due = None;
            retry.reopens += 1;
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group that keeps failing waits twice as long each time, up to 64
    /// times the first pause.
    #[test]
    fn the_reopen_pause_doubles_up_to_its_bound() {
        let start = Instant::now();
        let mut retries = StorageRetries::default();
        let mut now = start;
        for reopens in 0..8u32 {
            retries.failed(5, now);
            retries.failed(5, now + Duration::from_secs(1));
            let pause = STORAGE_REOPEN_AFTER * (1 << reopens.min(6));
            assert!(
                retries
                    .take_due(now + pause - Duration::from_millis(1))
                    .is_empty()
            );
            assert_eq!(retries.take_due(now + pause), vec![5]);
            now += pause;
        }
        retries.forget(5);
        assert!(retries.is_empty());
    }
}
