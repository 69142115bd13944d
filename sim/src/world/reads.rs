//! Checker 13 fed through the host's read call: the serving primary's
//! records, fetched as a node fetches them for a client, as they commit.

use super::World;
use crate::checkers::{ReadBatch, Violation, reads_committed};

/// Most bytes one checked read asks for: a few simulated batches.
const READ_BYTES_MAX: u64 = 16 * 1024;

impl World {
    /// Reads what the replica committed since its last checked read, if it
    /// serves as primary, and checks it against the committed history.
    pub(super) fn check_reads(&mut self, replica: u8) -> Result<(), Violation> {
        let index = usize::from(replica);
        let host = self.hosts[index].as_mut().expect("live");
        if !host.is_serving_primary() || !host.storage_open() || host.storage_failed() {
            return Ok(());
        }
        let bounds = host.read_bounds();
        let from = self.disks[index].read_through.max(bounds.log_start);
        if from >= bounds.high_watermark {
            return Ok(());
        }
        // A read the disk refuses is the client's error to see, not this
        // checker's (storage faults are checked elsewhere).
        let Ok(fetched) = host.fetch_committed(from, READ_BYTES_MAX) else {
            return Ok(());
        };
        let batches: Vec<ReadBatch> = fetched
            .iter()
            .map(|batch| ReadBatch {
                offset_base: batch.offset_base,
                record_count: batch.record_count(),
            })
            .collect();
        self.disks[index].read_through = batches.last().map_or(bounds.high_watermark, |last| {
            last.offset_base + u64::from(last.record_count)
        });
        reads_committed(replica, from, &batches, &self.history)
    }
}
