//! Whether the replica's log is trusted: everything it acked is still in it.
//!
//! A log read back after a crash under a policy that acks before the disk
//! has it, or one with damaged entries above the head it recovered, or one
//! a state transfer installed, may lack what the replica acked: it is
//! untrusted until a view settles it (the replica adopts a view's log and
//! every op of it is stored). An untrusted replica acks nothing, serves
//! nothing, and its DoViewChange is flagged so that it never counts toward
//! the quorum of trusted ones a view change needs.

use crate::replica::Status;

/// The replica's trust in its own log. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Trust {
    trusted: bool,
}

impl Trust {
    /// The trust a replica opens with.
    pub fn opened(trusted: bool) -> Trust {
        Trust { trusted }
    }

    /// Whether the log is trusted.
    pub fn is_trusted(self) -> bool {
        self.trusted
    }

    /// A view settled the log (or the replica is alone, with no one to
    /// distrust it against): it is trusted.
    pub fn settled(&mut self) {
        self.trusted = true;
    }

    /// The log may lack what the replica acked: it is untrusted. Whether it
    /// was trusted until now.
    pub fn lost(&mut self) -> bool {
        std::mem::replace(&mut self.trusted, false)
    }

    /// Its rules against the replica's status: a replica serves (Normal)
    /// only on a trusted log, and one awaiting a state transfer holds an
    /// untrusted log marked unsettled on disk.
    pub fn assert_invariants(self, status: Status, log_unsettled: bool) {
        assert!(
            status != Status::Normal || self.trusted,
            "serving on an untrusted log"
        );
        if status == Status::AwaitingStateTransfer {
            assert!(!self.trusted, "awaiting a state transfer on a trusted log");
            assert!(
                log_unsettled,
                "awaiting a state transfer with the log marked settled"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_lost_once_and_settled_by_a_view() {
        let mut trust = Trust::opened(true);
        assert!(trust.lost());
        assert!(!trust.lost(), "lost already");
        trust.assert_invariants(Status::AwaitingStateTransfer, true);
        trust.settled();
        trust.assert_invariants(Status::Normal, false);
    }

    #[test]
    #[should_panic(expected = "serving on an untrusted log")]
    fn serving_on_an_untrusted_log_is_a_bug() {
        Trust::opened(false).assert_invariants(Status::Normal, false);
    }
}
