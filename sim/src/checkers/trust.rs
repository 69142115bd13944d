//! Checker 4: an untrusted replica never sends PrepareOk and is never Normal
//! before it adopts a view.

use strand_consensus::{Replica, StateMachine, Status};
use strand_wire::Command;

use super::Violation;

/// Stateless: checks each send and each tick.
#[derive(Debug, Default)]
pub struct UntrustedSilent;

impl UntrustedSilent {
    /// `replica` is about to send a frame of `command`.
    pub fn send<S: StateMachine>(
        &self,
        index: u8,
        replica: &Replica<S>,
        command: Command,
    ) -> Result<(), Violation> {
        if !replica.trusted() && command == Command::PrepareOk {
            return Err(Violation {
                checker: "4 untrusted silent",
                detail: format!(
                    "untrusted replica {index} sent PrepareOk in view {}",
                    replica.view()
                ),
            });
        }
        Ok(())
    }

    /// `replica`'s status after any input.
    pub fn status<S: StateMachine>(
        &self,
        index: u8,
        replica: &Replica<S>,
    ) -> Result<(), Violation> {
        if !replica.trusted() && replica.status() == Status::Normal {
            return Err(Violation {
                checker: "4 untrusted silent",
                detail: format!(
                    "untrusted replica {index} is Normal in view {}",
                    replica.view()
                ),
            });
        }
        Ok(())
    }
}
