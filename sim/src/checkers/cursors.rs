//! Checker 6: cursors never point past the end of the committed record log.

use super::Violation;
use super::history::LinearHistory;

/// Stateless: checks every cursor a replica's partition stores.
#[derive(Debug, Default)]
pub struct CursorsBounded;

impl CursorsBounded {
    /// `replica`'s partition stores `consumer` at `offset`.
    pub fn stored(
        &self,
        replica: u8,
        consumer: &str,
        offset: u64,
        history: &LinearHistory,
    ) -> Result<(), Violation> {
        let end = history.offset_end();
        if offset > end {
            return Err(Violation {
                checker: "6 cursors bounded",
                detail: format!(
                    "replica {replica} stored cursor {consumer} = {offset} past the committed end {end}"
                ),
            });
        }
        Ok(())
    }
}
