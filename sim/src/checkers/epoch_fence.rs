//! Checker 8: a replica speaks for a membership only while it belongs to
//! it. No replica sends Prepare (as the primary that prepared it), StartView
//! or PrepareOk in a view whose epoch's membership leaves it out — as the
//! replica now at its slot: a newcomer that took a vacated slot is not the
//! replica that held it — and a replica never acks after it retired.
//!
//! A PrepareOk may come from a member of an epoch reached in place from the
//! view's: an in-place change keeps the view, and its newcomers ack in it.

use strand_wire::{Command, Message, ViewId};

use super::Violation;
use crate::catalog::Catalog;

/// Who the sending replica is, as the checker needs it.
#[derive(Debug, Clone, Copy)]
pub struct Speaker {
    /// Its slot.
    pub slot: u8,
    /// The epoch it joined the group in (0 for the replicas it was created with).
    pub joined: u32,
    /// It retired (its own `Retired` event, kept across restarts).
    pub retired: bool,
    /// Its current view.
    pub view: ViewId,
    /// It serves as the primary of that view.
    pub serving_primary: bool,
}

/// Stateless: checks each frame a replica sends.
#[derive(Debug, Default)]
pub struct EpochFence;

impl EpochFence {
    /// `speaker` is about to send `message`.
    pub fn send(
        &self,
        speaker: Speaker,
        message: &Message,
        catalog: &Catalog,
    ) -> Result<(), Violation> {
        let prefix = message.prefix();
        let epoch = prefix.epoch.get();
        let allowed = match message.command() {
            Command::PrepareOk if speaker.retired => {
                return Err(violation(format!(
                    "retired replica {} sent PrepareOk in view {}",
                    speaker.slot,
                    prefix.view_id()
                )));
            }
            Command::PrepareOk => catalog.may_ack(speaker.slot, speaker.joined, epoch),
            Command::StartView => catalog.may_lead(speaker.slot, speaker.joined, epoch),
            // A prepare made in an earlier view (a repair answer, or one a new
            // primary inherited) speaks for the primary of that view, perhaps
            // an earlier replica at this slot: only the prepares a serving
            // primary makes in its own view are checked.
            Command::Prepare
                if speaker.serving_primary
                    && prefix.replica == speaker.slot
                    && prefix.view_id() == speaker.view =>
            {
                catalog.may_lead(speaker.slot, speaker.joined, epoch)
            }
            _ => true,
        };
        if allowed {
            return Ok(());
        }
        Err(violation(format!(
            "replica {} (joined in epoch {}) sent {:?} in view {}, but epoch {epoch}'s membership {:?} leaves it out",
            speaker.slot,
            speaker.joined,
            message.command(),
            prefix.view_id(),
            catalog.get(epoch).map(|membership| membership.slots),
        )))
    }
}

fn violation(detail: String) -> Violation {
    Violation {
        checker: "8 epoch fence",
        detail,
    }
}
