//! The inputs a group's owner gives it besides frames and ticks: its start,
//! client requests, assignments from the metadata plane, retirement and an
//! operator's acceptance of loss. Each goes to the replica here, so that
//! the host is the one door into a group; the owner then settles.

use strand_consensus::ClientRequest;
use strand_consensus::epoch::Membership;
use strand_partition::Disk;
use strand_wire::RequestHeader;

use super::GroupHost;

impl<D: Disk> GroupHost<D> {
    /// Starts the replica: its first timers and probes (a replica opened
    /// after a crash asks its peers before it serves).
    pub fn start(&mut self) {
        self.replica.start(&mut self.effects);
    }

    /// A client request the owner admitted (the cursor operations go
    /// through [`GroupHost::store_cursor`] and [`GroupHost::delete_cursor`]):
    /// a primary prepares it, a backup answers where the primary is.
    pub fn submit(&mut self, request: ClientRequest) {
        debug_assert!(
            request.request.header().operation().info().replicated,
            "only replicated operations are submitted"
        );
        self.replica.on_request(request, &mut self.effects);
    }

    /// Whether submitting this request would prepare a new op (rather than
    /// answer it from the client table, refuse it or redirect it): the
    /// owner admits the bytes it would write (a full disk) only then.
    pub fn would_prepare(&self, header: &RequestHeader, record_count: u32) -> bool {
        self.replica.would_prepare(header, record_count)
    }

    /// The metadata plane assigned the group `membership` (a new replica
    /// set or confirm policy, or one consensus already knows).
    pub fn on_assignment(&mut self, membership: Membership) {
        self.replica.on_assignment(membership, &mut self.effects);
    }

    /// The metadata plane retired this replica in `epoch`: it stops taking
    /// part once that epoch has started without it.
    pub fn retire(&mut self, epoch: u32) {
        self.replica.retire(epoch, &mut self.effects);
    }

    /// An operator lets a stuck view change go on with the logs at hand
    /// (it may lose records). Whether the replica was stuck and took it.
    pub fn accept_loss(&mut self) -> bool {
        self.replica.accept_loss(&mut self.effects)
    }
}
