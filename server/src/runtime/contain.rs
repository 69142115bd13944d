//! A failure is contained to the group it happened in. Every call a shard
//! makes into a group's code runs under [`catch`]: a panic there (a bug in
//! the node's own code, never input, which is refused with typed errors)
//! stops that group alone on this node. The shard drops its actor without a
//! clean mark, as a crash would, shows it as `failed` in `status` and
//! `attention`, counts it, and stops vouching for it in its pings (see
//! [`crate::runtime::vouch`]), so its other replicas fail over as for a dead node.
//! The shard, the node and every other group, the metadata plane's replica
//! included, go on. After a pause that doubles with each failure of the
//! group ([`REOPEN_AFTER`] up to [`REOPEN_AFTER_MAX`]) the shard opens the
//! group again from disk, as after a restart of the node: its log
//! untrusted until it rejoins its peers.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use strand_wire::ops::{AttentionEntry, AttentionReason};

use crate::group::spec::GroupSpec;
use crate::shared::Shared;

/// The first pause before a failed group is opened again.
pub const REOPEN_AFTER: Duration = Duration::from_secs(1);

/// The longest pause before a failed group is opened again.
pub const REOPEN_AFTER_MAX: Duration = Duration::from_secs(300);

/// Runs `work`; a panic in it is caught and its message returned.
pub fn catch<R>(work: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(work)).map_err(|payload| {
        if let Some(message) = payload.downcast_ref::<&str>() {
            (*message).to_owned()
        } else if let Some(message) = payload.downcast_ref::<String>() {
            message.clone()
        } else {
            "a panic without a message".to_owned()
        }
    })
}

/// Groups down on one shard after a panic, each with what opening it again
/// takes (`T`: the shard's start).
pub struct Failed<T> {
    waiting: BTreeMap<u64, (T, Instant)>,
    /// Failures of each group since the node started: the pause doubles.
    failures: BTreeMap<u64, u32>,
}

impl<T> Default for Failed<T> {
    fn default() -> Failed<T> {
        Failed {
            waiting: BTreeMap::new(),
            failures: BTreeMap::new(),
        }
    }
}

impl<T> Failed<T> {
    /// Group `spec.group` failed with `message`: it waits to be opened again
    /// from `start`. Says so in the log, `status`, `attention` and metrics,
    /// and stops vouching for it.
    pub fn record(&mut self, shared: &Shared, spec: &GroupSpec, start: T, message: &str) {
        let group = spec.group;
        let failures = self.failures.entry(group).or_default();
        *failures += 1;
        let pause = pause_after(*failures);
        tracing::error!(
            group,
            failures = *failures,
            reopen_in_ms = pause.as_millis() as u64,
            message,
            "group: its code panicked; the group stops on this node (the node and its other \
             groups go on), its peers fail over, and it opens again from disk after a pause"
        );
        shared.vouching.withdraw(group);
        crate::metrics::group_failed();
        let attention = failed_attention(spec, message, *failures, pause);
        let view =
            crate::group::attention::down_view(spec, shared.config.node, "failed", attention);
        shared.publish(view);
        self.waiting.insert(group, (start, Instant::now() + pause));
    }

    /// Whether `group` is down here, waiting to open again.
    pub fn contains(&self, group: u64) -> bool {
        self.waiting.contains_key(&group)
    }

    /// Takes the groups whose pause is over by `now`.
    pub fn due(&mut self, now: Instant) -> Vec<T> {
        let due: Vec<u64> = self
            .waiting
            .iter()
            .filter(|(_, (_, at))| *at <= now)
            .map(|(group, _)| *group)
            .collect();
        due.into_iter()
            .filter_map(|group| self.waiting.remove(&group).map(|(start, _)| start))
            .collect()
    }

    /// Forgets `group` (it is no longer hosted here).
    pub fn forget(&mut self, group: u64) -> Option<T> {
        self.failures.remove(&group);
        self.waiting.remove(&group).map(|(start, _)| start)
    }

    /// Every group waiting, for the shard's stop.
    pub fn drain(&mut self) -> Vec<T> {
        std::mem::take(&mut self.waiting)
            .into_values()
            .map(|(start, _)| start)
            .collect()
    }
}

/// The pause before the `failures`-th failure's reopen.
fn pause_after(failures: u32) -> Duration {
    let doubled = REOPEN_AFTER.saturating_mul(1 << failures.saturating_sub(1).min(16));
    doubled.min(REOPEN_AFTER_MAX)
}

fn failed_attention(
    spec: &GroupSpec,
    message: &str,
    failures: u32,
    pause: Duration,
) -> AttentionEntry {
    AttentionEntry {
        group: spec.group,
        stream: spec.stream.clone(),
        topic: spec.topic.clone(),
        partition: spec.partition,
        view: 0,
        reason: AttentionReason::GroupFailed,
        awaited: Vec::new(),
        detail: format!(
            "this node's copy stopped on a bug in the node ({message}; failure {failures} since \
             the node started); its other replicas serve without it; it opens again from disk \
             in {} s",
            pause.as_secs()
        ),
        history_start: None,
    }
}

/// The file that injects panics: a test writes group ids in it (one per
/// line or comma-separated) under a node's data directory; the node takes
/// it within [`INJECTION_CHECK_MS`], deletes it, and makes each listed
/// group it hosts panic at once. How the tests reach the containment of a
/// bug; compiled only with the `fault-injection` feature.
#[cfg(feature = "fault-injection")]
pub const INJECTION_FILE: &str = "inject-panic";

/// How often the node looks for [`INJECTION_FILE`].
#[cfg(feature = "fault-injection")]
pub const INJECTION_CHECK_MS: u64 = 100;

/// Looks for [`INJECTION_FILE`] until the node stops.
#[cfg(feature = "fault-injection")]
pub async fn watch_injections(shared: std::sync::Arc<Shared>) {
    let path = shared.config.data_dir.join(INJECTION_FILE);
    while !shared.stopping() {
        tokio::time::sleep(Duration::from_millis(INJECTION_CHECK_MS)).await;
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let _ = std::fs::remove_file(&path);
        let groups = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter_map(|group| group.parse::<u64>().ok());
        for group in groups {
            tracing::warn!(
                group,
                "contain: injecting a panic into the group (a test asked)"
            );
            shared.with_group(group, |handle| {
                handle
                    .inbox
                    .send_control(crate::runtime::input::Input::InjectPanic)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_caught_with_its_message() {
        assert_eq!(catch(|| 7), Ok(7));
        assert_eq!(
            catch(|| panic!("boom {}", 1)),
            Err::<(), _>("boom 1".to_owned())
        );
        assert_eq!(catch(|| panic!("plain")), Err::<(), _>("plain".to_owned()));
    }

    #[test]
    fn the_pause_doubles_up_to_its_bound() {
        assert_eq!(pause_after(1), REOPEN_AFTER);
        assert_eq!(pause_after(2), REOPEN_AFTER * 2);
        assert_eq!(pause_after(4), REOPEN_AFTER * 8);
        assert_eq!(pause_after(40), REOPEN_AFTER_MAX);
    }
}
