//! When a group publishes its status: a change of what other threads act
//! on at once (`StatusShape`) at the next tick, and its progress (ops,
//! commit, acks, offsets) once in [`PUBLISH_PROGRESS_TICKS`]. The actor
//! builds and publishes the status itself; this is the bookkeeping of when.

use strand_consensus::{Status, WaitReason};

/// A busy group republishes its progress (ops, commit, acks, offsets) once
/// in this many ticks (100 ms at the default 10 ms tick); a change of its
/// `StatusShape` is published at the next tick. Publishing builds the
/// whole status and takes the node's views lock: done every tick by a
/// thousand busy groups, it cost a fifth of their shards' time.
pub const PUBLISH_PROGRESS_TICKS: u32 = 10;

/// What of a group's published status other threads act on at once
/// (routing, produce admission, attention): a change is never held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatusShape {
    pub(crate) view: u32,
    pub(crate) log_view: u32,
    pub(crate) status: Status,
    pub(crate) primary: u8,
    pub(crate) trusted: bool,
    pub(crate) attention: Option<(WaitReason, u32)>,
    pub(crate) storage_failed: bool,
}

/// The shape of the status last published, and ticks since.
#[derive(Debug, Default)]
pub(crate) struct Publishing {
    shape: Option<StatusShape>,
    ticks_unpublished: u32,
}

impl Publishing {
    /// The status was published with `shape`.
    pub(crate) fn published(&mut self, shape: StatusShape) {
        self.shape = Some(shape);
        self.ticks_unpublished = 0;
    }

    /// A tick passed.
    pub(crate) fn ticked(&mut self) {
        self.ticks_unpublished += 1;
    }

    /// `ticks` ticks passed in which the group was not visited.
    pub(crate) fn skipped(&mut self, ticks: u32) {
        self.ticks_unpublished = self.ticks_unpublished.saturating_add(ticks);
    }

    /// Whether a tick publishes now, the status standing at `shape`.
    pub(crate) fn due(&self, shape: StatusShape) -> bool {
        self.ticks_unpublished >= PUBLISH_PROGRESS_TICKS || self.changed(shape)
    }

    /// Whether `shape` differs from the one last published.
    pub(crate) fn changed(&self, shape: StatusShape) -> bool {
        self.shape != Some(shape)
    }

    /// Ticks until the progress is due again.
    pub(crate) fn ticks_until_progress(&self) -> u32 {
        PUBLISH_PROGRESS_TICKS.saturating_sub(self.ticks_unpublished)
    }
}
