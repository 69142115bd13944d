//! The group's tracing span: which group, which replica of it, in which
//! view, and whether that replica's log is trusted (reference B's
//! `untrusted_log` in the log context). A line logged during a view change
//! then says whether the replica that logged it may vouch for its log.

use super::Actor;

impl Actor {
    /// The group's span as the replica stands now: `group`, `replica` (its
    /// slot), `view` and `untrusted_log`. Built when a line is about to be
    /// logged (events, quarantines, transfers, opening again, closing),
    /// never per request: the fields are read at that moment, so a line
    /// logged after a view change or an adoption names the new view and
    /// trust.
    pub fn span(&self) -> tracing::Span {
        let progress = self.host.progress();
        tracing::info_span!(
            "group",
            group = self.spec.group,
            replica = progress.slot,
            view = %progress.view,
            untrusted_log = !progress.trusted,
        )
    }
}
