//! Checker 13: a reader sees committed records only. The serving primary's
//! newly committed records are fetched through the host's own read call,
//! the one a node answers `Fetch` with, and every batch must be one the
//! committed history holds at that offset, whole, starting where the read
//! asked.

use super::{LinearHistory, Violation};

/// A fetched batch as the checker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadBatch {
    /// Its first record's offset.
    pub offset_base: u64,
    /// Its record count.
    pub record_count: u32,
}

/// Checks the batches a read from `from` returned against the history.
pub fn reads_committed(
    replica: u8,
    from: u64,
    batches: &[ReadBatch],
    history: &LinearHistory,
) -> Result<(), Violation> {
    let violation = |detail: String| Violation {
        checker: "13 committed reads",
        detail: format!("replica {replica} read from offset {from}: {detail}"),
    };
    let Some(first) = batches.first() else {
        return Ok(());
    };
    let first_end = first.offset_base + u64::from(first.record_count);
    if first.offset_base > from || first_end <= from {
        return Err(violation(format!(
            "the first batch {first:?} does not hold it"
        )));
    }
    let mut expected = first.offset_base;
    for batch in batches {
        if batch.offset_base != expected {
            return Err(violation(format!(
                "batch {batch:?} leaves a gap at {expected}"
            )));
        }
        match history.at_offset(batch.offset_base) {
            Some(op) if op.record_count == batch.record_count => {}
            Some(op) => {
                return Err(violation(format!(
                    "batch {batch:?} differs from the committed {op:?}"
                )));
            }
            None => {
                return Err(violation(format!(
                    "batch {batch:?} was never committed (history ends at offset {})",
                    history.offset_end()
                )));
            }
        }
        expected += u64::from(batch.record_count);
    }
    Ok(())
}
