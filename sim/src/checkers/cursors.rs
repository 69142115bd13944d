//! Checker 6: cursors never point past the end of the committed record log.

use strand_wire::ops::CursorEvent;

use super::Violation;
use super::history::LinearHistory;

/// Stateless: checks every cursor event appended anywhere.
#[derive(Debug, Default)]
pub struct CursorsBounded;

impl CursorsBounded {
    /// `replica` appended `event`.
    pub fn appended(
        &self,
        replica: u8,
        event: &CursorEvent,
        history: &LinearHistory,
    ) -> Result<(), Violation> {
        let end = history.offset_end();
        if event.offset > end {
            return Err(Violation {
                checker: "6 cursors bounded",
                detail: format!(
                    "replica {replica} stored cursor {} = {} past the committed end {end}",
                    event.consumer, event.offset
                ),
            });
        }
        Ok(())
    }
}
