//! Where everything of one partition sits on disk, and the names of its files.
//!
//! ```text
//! <data>/partitions/<stream>/<topic>/<partition>-g<group>/
//!     superblock.0, superblock.1        two copies, alternating by sequence
//!     superblock.N.tmp                  a copy being written (renamed into place)
//!     records/<first-offset>.log        record log segment (20-digit, zero-padded)
//!     records/<first-offset>.index      its sparse index
//!     cursors.log                       cursor event log
//!     cursors.snapshot                  cursor map + the event sequence it covers
//!     machine.snapshot.0, .1            the state machine's image (the metadata plane's catalog), two copies
//!     fence.requested                   a repair found the log laid out otherwise than the open inferred: fence at the next open
//! <data>/partitions/<stream>/<topic>/<partition>-g<group>.fenced.N   quarantined copies
//! <data>/partitions/<stream>/<topic>/<partition>-g<group>.rebuilt    a quarantine's rebuild, before its swap
//! <data>/partitions/<stream>/<topic>/<partition>-g<group>.staging    a state-transfer import
//! <data>/partitions/<stream>/<topic>/<partition>-g<group>.install    "swap staging in" marker
//! <data>/partitions/<stream>/<topic>/<partition>-g<group>.replaced   the copy a swap replaces
//! ```
//!
//! The group id in the name keeps a deleted topic's leftovers (on a node
//! that was down when it was deleted) apart from a new topic created under
//! the same name: group ids are never reused.
//!
//! Every name is built and parsed here, so the rest of the crate never
//! formats a path by hand.

use std::path::{Path, PathBuf};

/// Digits of a segment file name: enough for every `u64` offset, so names sort
/// the way offsets do.
pub const SEGMENT_NAME_DIGITS: usize = 20;

/// The directory of one partition (group `group`) under a node's data
/// directory.
pub fn partition_dir(
    data_dir: &Path,
    stream: &str,
    topic: &str,
    partition: u32,
    group: u64,
) -> PathBuf {
    partitions_root(data_dir)
        .join(stream)
        .join(topic)
        .join(format!("{partition}-g{group}"))
}

/// Where a partition lived before directories carried their group id
/// (`<topic>/<partition>`); a node moves it to [`partition_dir`] when it
/// opens the partition.
pub fn legacy_partition_dir(data_dir: &Path, stream: &str, topic: &str, partition: u32) -> PathBuf {
    partitions_root(data_dir)
        .join(stream)
        .join(topic)
        .join(partition.to_string())
}

/// The directory holding every stream's partitions.
pub fn partitions_root(data_dir: &Path) -> PathBuf {
    data_dir.join("partitions")
}

/// The group whose partition directory, or a sibling of it (`.fenced.N`,
/// `.staging`, ...), is named `entry`; `None` for any other name.
pub fn parse_group_of_entry(entry: &str) -> Option<u64> {
    let (partition, rest) = entry.split_once("-g")?;
    if partition.is_empty() || !partition.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let digits = rest.split_once('.').map_or(rest, |(digits, _)| digits);
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The record log's directory.
pub fn records_dir(dir: &Path) -> PathBuf {
    dir.join("records")
}

/// The segment whose first record offset is `first_offset`.
pub fn segment_path(dir: &Path, first_offset: u64) -> PathBuf {
    records_dir(dir).join(format!(
        "{first_offset:0width$}.log",
        width = SEGMENT_NAME_DIGITS
    ))
}

/// The sparse index of the segment whose first record offset is `first_offset`.
pub fn index_path(dir: &Path, first_offset: u64) -> PathBuf {
    records_dir(dir).join(format!(
        "{first_offset:0width$}.index",
        width = SEGMENT_NAME_DIGITS
    ))
}

/// Where an index is rebuilt before it is renamed over the damaged one.
pub fn index_tmp_path(dir: &Path, first_offset: u64) -> PathBuf {
    records_dir(dir).join(format!(
        "{first_offset:0width$}.index.tmp",
        width = SEGMENT_NAME_DIGITS
    ))
}

/// The first offset a segment file name stands for (`None` for other names).
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != SEGMENT_NAME_DIGITS || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The first offset an index file name stands for (`None` for other names).
pub fn parse_index_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".index")?;
    if digits.len() != SEGMENT_NAME_DIGITS || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Superblock copy `copy` (0 or 1).
pub fn superblock_path(dir: &Path, copy: u8) -> PathBuf {
    assert!(copy < 2, "two superblock copies");
    dir.join(format!("superblock.{copy}"))
}

/// Where superblock copy `copy` is written before it is renamed into place.
pub fn superblock_tmp_path(dir: &Path, copy: u8) -> PathBuf {
    assert!(copy < 2, "two superblock copies");
    dir.join(format!("superblock.{copy}.tmp"))
}

/// Durable-mark file `index` (0 or 1): the highest op a `persisted` record
/// log made durable, kept apart from the log (see `durable_mark`).
pub fn durable_mark_path(dir: &Path, index: usize) -> PathBuf {
    assert!(index < 2, "two durable-mark files");
    dir.join(format!("durable.{index}.mark"))
}

/// The cursor event log.
pub fn cursors_log_path(dir: &Path) -> PathBuf {
    dir.join("cursors.log")
}

/// Where a compacted cursor event log is built before it replaces the old one.
pub fn cursors_log_tmp_path(dir: &Path) -> PathBuf {
    dir.join("cursors.log.tmp")
}

/// The cursor snapshot.
pub fn cursors_snapshot_path(dir: &Path) -> PathBuf {
    dir.join("cursors.snapshot")
}

/// Where a cursor snapshot is written before it is renamed into place.
pub fn cursors_snapshot_tmp_path(dir: &Path) -> PathBuf {
    dir.join("cursors.snapshot.tmp")
}

/// The mark a repair leaves when the log is not laid out as the open
/// inferred (a rewrite that cannot fit its region): the next open fences
/// the copy and it is rebuilt by state transfer.
pub fn fence_request_path(dir: &Path) -> PathBuf {
    dir.join("fence.requested")
}

/// `<dir>/rewrites.intent`: the byte spans of segments a repair is about
/// to write in place, each recorded durably before its first write, so an
/// open after a crash writes them again (a failed sync may have left the
/// repaired bytes in the page cache only).
pub fn rewrite_intent_path(dir: &Path) -> PathBuf {
    dir.join("rewrites.intent")
}

/// Copy `copy` of the state machine's snapshot.
pub fn machine_snapshot_path(dir: &Path, copy: u8) -> PathBuf {
    assert!(copy < 2, "two machine snapshot copies");
    dir.join(format!("machine.snapshot.{copy}"))
}

/// Where a machine snapshot is written before it is renamed over a copy.
pub fn machine_snapshot_tmp_path(dir: &Path) -> PathBuf {
    dir.join("machine.snapshot.tmp")
}

/// `<dir>.<suffix>`, beside the partition directory.
fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(suffix);
    dir.with_file_name(name)
}

/// Quarantined copy number `n` of the partition at `dir`.
pub fn fenced_path(dir: &Path, n: u64) -> PathBuf {
    sibling(dir, &format!("fenced.{n}"))
}

/// The quarantine number a sibling entry named `entry` stands for, when it is
/// `<partition>.fenced.N` for the partition directory named `partition`.
pub fn parse_fenced_name(partition: &str, entry: &str) -> Option<u64> {
    let rest = entry.strip_prefix(partition)?.strip_prefix(".fenced.")?;
    if rest.is_empty() || !rest.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok()
}

/// Where a quarantine builds the partition that replaces the fenced one,
/// before the swap (the partition to `.fenced.N`, this to the partition).
pub fn rebuilt_path(dir: &Path) -> PathBuf {
    sibling(dir, "rebuilt")
}

/// The staging directory a state-transfer import is assembled in.
pub fn staging_path(dir: &Path) -> PathBuf {
    sibling(dir, "staging")
}

/// The marker saying "the staging directory is complete: swap it in".
pub fn install_marker_path(dir: &Path) -> PathBuf {
    sibling(dir, "install")
}

/// Where the directory a swap replaces is moved before it is removed.
pub fn replaced_path(dir: &Path) -> PathBuf {
    sibling(dir, "replaced")
}

/// The import's manifest inside the staging directory.
pub fn staging_manifest_path(staging: &Path) -> PathBuf {
    staging.join("transfer.manifest")
}

/// The client table a transfer carried, inside the staging directory until
/// the install writes it into the superblock.
pub fn staging_client_table_path(staging: &Path) -> PathBuf {
    staging.join("transfer.clients")
}

/// The import's record of finished chunks inside the staging directory.
pub fn staging_progress_path(staging: &Path) -> PathBuf {
    staging.join("transfer.progress")
}

/// The final name component of `path` as UTF-8 (empty when it has none).
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The directory holding `path` (`.` for a bare name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_are_twenty_digits_and_parse_back() {
        let path = segment_path(Path::new("/p"), 42);
        assert_eq!(
            path,
            Path::new("/p/records/00000000000000000042.log").to_path_buf()
        );
        assert_eq!(parse_segment_name(&file_name(&path)), Some(42));
        assert_eq!(
            parse_segment_name(&file_name(&segment_path(Path::new("/p"), u64::MAX))),
            Some(u64::MAX)
        );
        assert_eq!(parse_segment_name("42.log"), None);
        assert_eq!(parse_segment_name("00000000000000000042.index"), None);
        assert_eq!(parse_segment_name("0000000000000000004x.log"), None);
    }

    #[test]
    fn partition_directories_name_their_group() {
        let dir = partition_dir(Path::new("/data"), "s", "t", 3, 17);
        assert_eq!(dir, Path::new("/data/partitions/s/t/3-g17").to_path_buf());
        assert_eq!(parse_group_of_entry(&file_name(&dir)), Some(17));
        assert_eq!(
            parse_group_of_entry(&file_name(&fenced_path(&dir, 2))),
            Some(17)
        );
        assert_eq!(
            parse_group_of_entry(&file_name(&staging_path(&dir))),
            Some(17)
        );
        for other in ["3", "3-g", "-g17", "x-g17", "3-gx", "3-g17x"] {
            assert_eq!(parse_group_of_entry(other), None, "{other}");
        }
    }

    #[test]
    fn fenced_names_sit_beside_the_partition() {
        let dir = Path::new("/data/partitions/s/t/3");
        assert_eq!(
            fenced_path(dir, 0),
            Path::new("/data/partitions/s/t/3.fenced.0").to_path_buf()
        );
        assert_eq!(parse_fenced_name("3", "3.fenced.12"), Some(12));
        assert_eq!(parse_fenced_name("3", "31.fenced.1"), None);
        assert_eq!(parse_fenced_name("3", "3.fenced."), None);
        assert_eq!(parse_fenced_name("3", "3.staging"), None);
        assert_eq!(
            staging_path(dir),
            Path::new("/data/partitions/s/t/3.staging").to_path_buf()
        );
    }
}
