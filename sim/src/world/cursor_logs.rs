//! Checker 10 fed from the replicas' partitions.

use strand_consensus::Status;

use super::World;
use crate::checkers::Violation;

impl World {
    /// Checker 10 over what the replica's partition holds: the durable
    /// cursor events of a replica settled in its view, read as they grow.
    pub(super) fn check_cursor_logs(&mut self, replica: u8) -> Result<(), Violation> {
        let index = usize::from(replica);
        let host = self.hosts[index].as_mut().expect("live");
        let live = host.inspect_replica();
        let view = live.view();
        if live.status() != Status::Normal || live.log_view() != view {
            self.cursor_logs.unsettled(replica);
            return Ok(());
        }
        let durable = host
            .inspect_partition()
            .expect("open")
            .cursor_durable_tail();
        let Some(from) = self.cursor_logs.unread(replica, view, durable) else {
            return Ok(());
        };
        let first = from.max(host.inspect_partition().expect("open").cursor_log_start());
        if first >= durable {
            return self.cursor_logs.events(replica, view, first, &[]);
        }
        let Ok(events) = host.inspect_cursor_events(first, durable) else {
            return Ok(());
        };
        self.cursor_logs.events(replica, view, first, &events)
    }
}
