//! Checker 3: view and log_view never go backwards on any replica, across
//! restarts (what its partition's superblock holds only grows; what is in
//! memory never trails it).

use super::Violation;
use strand_wire::ViewId;

/// Per replica: the highest persisted view and log view.
#[derive(Debug, Default)]
pub struct ViewsMonotonic {
    persisted: Vec<(ViewId, ViewId)>,
}

impl ViewsMonotonic {
    /// For replicas at slots `0..slot_count`.
    pub fn new(slot_count: u8) -> ViewsMonotonic {
        ViewsMonotonic {
            persisted: vec![(ViewId::ZERO, ViewId::ZERO); usize::from(slot_count)],
        }
    }

    /// `replica`'s superblock holds `view` and `log_view`.
    pub fn persisted(
        &mut self,
        replica: u8,
        view: ViewId,
        log_view: ViewId,
    ) -> Result<(), Violation> {
        let (persisted_view, persisted_log_view) = &mut self.persisted[usize::from(replica)];
        if view < *persisted_view || log_view < *persisted_log_view {
            return Err(Violation {
                checker: "3 monotonic views",
                detail: format!(
                    "replica {replica} persisted view {view} log_view {log_view} after {persisted_view} / {persisted_log_view}"
                ),
            });
        }
        *persisted_view = view;
        *persisted_log_view = log_view;
        Ok(())
    }

    /// A new replica took `replica`'s slot (the one before was dropped): its
    /// views start over.
    pub fn forget(&mut self, replica: u8) {
        self.persisted[usize::from(replica)] = (ViewId::ZERO, ViewId::ZERO);
    }

    /// `replica` runs in `view` with `log_view`: never below what it persisted.
    pub fn running(&self, replica: u8, view: ViewId, log_view: ViewId) -> Result<(), Violation> {
        let (persisted_view, persisted_log_view) = self.persisted[usize::from(replica)];
        if view < persisted_view || log_view < persisted_log_view {
            return Err(Violation {
                checker: "3 monotonic views",
                detail: format!(
                    "replica {replica} runs in view {view} log_view {log_view} below persisted {persisted_view} / {persisted_log_view}"
                ),
            });
        }
        Ok(())
    }
}
