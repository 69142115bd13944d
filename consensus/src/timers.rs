//! The replica's timers, one sub-state: every timeout it runs, built from
//! the driver's [`Timeouts`], listed in one place for ticking, skipping and
//! the question of when the next one is due.

use crate::config::Timeouts;
use crate::timeout::Timeout;

/// How many timeouts a replica runs.
pub const TIMERS: usize = 10;

/// Every timeout of one replica.
#[derive(Debug)]
pub(crate) struct Timers {
    /// Primary: a heartbeat (commit message) to the backups is due.
    pub(crate) heartbeat: Timeout,
    /// Backup: the primary has been silent too long.
    pub(crate) primary: Timeout,
    /// Backup: the primary answers but the group makes no progress.
    pub(crate) progress: Timeout,
    /// Primary: prepares in flight are due for retransmission.
    pub(crate) prepare: Timeout,
    /// A view change took too long: try the next view.
    pub(crate) view_change: Timeout,
    /// A view change's messages are due again.
    pub(crate) view_change_retransmit: Timeout,
    /// A StartView asked for has not come.
    pub(crate) probe: Timeout,
    /// A repair round is due.
    pub(crate) repair: Timeout,
    /// A waiting view change is due to be reported again.
    pub(crate) warning: Timeout,
    /// The commit number is due to be persisted.
    pub(crate) commit_persist: Timeout,
}

impl Timers {
    /// Every timeout, stopped, of the lengths `timeouts` gives.
    pub(crate) fn new(timeouts: &Timeouts) -> Timers {
        Timers {
            heartbeat: Timeout::new("heartbeat", timeouts.heartbeat_ticks),
            primary: Timeout::new("primary", timeouts.primary_ticks),
            progress: Timeout::new("progress", timeouts.primary_ticks * 4),
            prepare: Timeout::new("prepare", timeouts.prepare_retransmit_ticks),
            view_change: Timeout::new("view_change", timeouts.view_change_ticks),
            view_change_retransmit: Timeout::new(
                "view_change_retransmit",
                timeouts.view_change_retransmit_ticks,
            ),
            probe: Timeout::new("start_view_probe", timeouts.start_view_probe_ticks),
            repair: Timeout::new("repair", timeouts.repair_ticks),
            warning: Timeout::new("warning", timeouts.warning_ticks),
            commit_persist: Timeout::new("commit_persist", timeouts.commit_persist_ticks),
        }
    }

    /// Every timeout, in one fixed order.
    pub(crate) fn all_mut(&mut self) -> [&mut Timeout; TIMERS] {
        [
            &mut self.heartbeat,
            &mut self.primary,
            &mut self.progress,
            &mut self.prepare,
            &mut self.view_change,
            &mut self.view_change_retransmit,
            &mut self.probe,
            &mut self.repair,
            &mut self.warning,
            &mut self.commit_persist,
        ]
    }

    /// Every timeout, to read, in the order of [`Timers::all_mut`].
    pub(crate) fn all(&self) -> [&Timeout; TIMERS] {
        [
            &self.heartbeat,
            &self.primary,
            &self.progress,
            &self.prepare,
            &self.view_change,
            &self.view_change_retransmit,
            &self.probe,
            &self.repair,
            &self.warning,
            &self.commit_persist,
        ]
    }

    /// Each timeout's own invariants; a primary's and a backup's timers
    /// never run together.
    pub(crate) fn assert_invariants(&self) {
        for timeout in self.all() {
            timeout.assert_invariants();
        }
        assert!(
            !(self.heartbeat.ticking() && self.primary.ticking()),
            "a replica heartbeats as primary and waits for one as backup at once"
        );
        assert!(
            !self.prepare.ticking() || self.heartbeat.ticking(),
            "prepares retransmitted by a replica that does not heartbeat"
        );
    }
}
