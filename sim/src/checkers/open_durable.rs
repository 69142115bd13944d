//! Checker 11: what an open reads, it can count on. Once a partition is
//! open (before any new write), every byte of its record-log segments and
//! its cursor log reads back as the disk holds it durably: an open that
//! trusted bytes a failed fsync left in the page cache (read whole, never
//! written, and never written by a later sync either) would count ops as
//! durable that a power loss takes, and an operator could remove the copies
//! that really hold them. Zero-filled room past a file's end is not data.

use std::path::Path;

use strand_wal::MemoryStorage;

use super::Violation;

/// Stateless: checks a disk right after an open.
#[derive(Debug, Default)]
pub struct OpenDurable;

impl OpenDurable {
    /// `replica` just opened its partition at `dir` over `storage`.
    pub fn opened(
        &self,
        replica: u8,
        storage: &MemoryStorage,
        dir: &Path,
    ) -> Result<(), Violation> {
        let checked = storage.paths().into_iter().filter(|path| {
            path.starts_with(dir) && (path.extension().is_some_and(|extension| extension == "log"))
        });
        for path in checked {
            let (Some(read), Some(durable)) =
                (storage.contents(&path), storage.durable_contents(&path))
            else {
                continue;
            };
            if let Some(at) = first_difference(read, durable) {
                return Err(Violation {
                    checker: "11 open durable",
                    detail: format!(
                        "replica {replica} opened with {} reading at byte {at} what its disk does \
                         not hold durably ({} bytes read, {} durable)",
                        path.display(),
                        read.len(),
                        durable.len()
                    ),
                });
            }
        }
        Ok(())
    }
}

/// The first byte where what reads differs from what is durable, zeros
/// past the durable end not counted.
fn first_difference(read: &[u8], durable: &[u8]) -> Option<usize> {
    let common = read.len().min(durable.len());
    if let Some(at) = (0..common).find(|&at| read[at] != durable[at]) {
        return Some(at);
    }
    if durable.len() > read.len() {
        return Some(read.len());
    }
    (common..read.len()).find(|&at| read[at] != 0)
}
