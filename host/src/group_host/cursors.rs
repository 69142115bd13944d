//! The door for a client's cursor stores and deletes: the replica decides
//! (it is the primary's rule), with what the partition's cursor map says
//! for the bound on consumer names handed in. The server and the simulator
//! both come through here, so both run the same rule.

use strand_consensus::{CursorCensus, CursorOutcome};
use strand_partition::Disk;
use strand_wire::ops::{DeleteCursor, StoreCursor};
use strand_wire::{Msg, RequestHeader};

use super::GroupHost;

impl<D: Disk> GroupHost<D> {
    /// A client stores `cursor` (the request's decoded body); the reply
    /// comes out of a later [`GroupHost::settle`]. Says whether it was
    /// accepted or refused at once (and with what), for the owner's metrics.
    pub fn store_cursor(
        &mut self,
        request: &Msg<RequestHeader>,
        cursor: StoreCursor,
    ) -> CursorOutcome {
        let census = self.cursor_census(&cursor.consumer);
        let high_watermark = self.replica.machine().high_watermark();
        self.replica
            .on_store_cursor(request, cursor, high_watermark, census, &mut self.effects)
    }

    /// A client deletes a consumer's cursor (the request's decoded body);
    /// the reply comes out of a later [`GroupHost::settle`].
    pub fn delete_cursor(
        &mut self,
        request: &Msg<RequestHeader>,
        delete: DeleteCursor,
    ) -> CursorOutcome {
        let census = self.cursor_census(&delete.consumer);
        self.replica
            .on_delete_cursor(request, delete, census, &mut self.effects)
    }

    /// Sets the most distinct consumer names this partition keeps cursors
    /// for (the node's setting;
    /// [`strand_consensus::CURSOR_CONSUMERS_MAX_DEFAULT`] until
    /// set). Lowering it deletes nothing: new names wait until enough are
    /// deleted.
    pub fn set_cursor_consumers_max(&mut self, consumers_max: u64) {
        assert!(consumers_max > 0, "a partition keeps some cursor");
        self.cursor_consumers_max = consumers_max;
    }

    /// The most distinct consumer names this partition keeps cursors for.
    pub fn cursor_consumers_max(&self) -> u64 {
        self.cursor_consumers_max
    }

    /// What the partition's cursor map says about `consumer`.
    fn cursor_census(&self, consumer: &str) -> CursorCensus {
        let partition = self.partition_ref();
        let map = partition.cursors();
        CursorCensus {
            known: map.contains_key(consumer),
            consumers: map.len() as u64,
            applied_tail: partition.cursor_tail(),
            consumers_max: self.cursor_consumers_max,
        }
    }
}

#[cfg(test)]
mod tests {
    use strand_consensus::CURSOR_CONSUMERS_MAX_DEFAULT;

    #[test]
    fn the_default_bound_is_the_documented_one() {
        assert_eq!(CURSOR_CONSUMERS_MAX_DEFAULT, 10_000);
    }
}
