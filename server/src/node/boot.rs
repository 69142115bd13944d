//! The node's boot count: one number in `<data>/BOOT`, raised durably at
//! every start before any partition opens.
//!
//! A partition's clean-shutdown mark names the boot it was written in and
//! holds only in the boot after it (`strand_partition::PartitionConfig::boot`).
//! So a node that opens thousands of cleanly closed partitions pays one
//! durable write for all of them here, instead of one write and sync per
//! partition to clear its mark: if this boot ends in a crash, the next one
//! counts past every mark it could have honoured.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// The boot count's file in a data directory.
pub fn boot_path(data_dir: &Path) -> PathBuf {
    data_dir.join("BOOT")
}

/// Why the boot could not be counted. The node does not start: without a
/// count it cannot tell a mark of the last boot from an older one.
#[derive(Debug, Error)]
pub enum BootError {
    /// The file exists but does not hold one decimal number and a newline.
    #[error(
        "boot count {path} is unreadable ({reason}); the node does not start, since it cannot tell which clean-shutdown marks still hold"
    )]
    Unreadable {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Reading or writing it failed.
    #[error("boot count {path}: {op} failed: {source}")]
    Io {
        /// The file.
        path: String,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Raises the boot count of `data_dir` by one, durably (written aside,
/// synced, renamed over, the directory synced), and returns the new count:
/// 1 for a directory that never counted.
pub fn count_boot(data_dir: &Path) -> Result<u64, BootError> {
    let path = boot_path(data_dir);
    let shown = path.display().to_string();
    let io = |op: &'static str| {
        let shown = shown.clone();
        move |source| BootError::Io {
            path: shown,
            op,
            source,
        }
    };
    let previous = match std::fs::read_to_string(&path) {
        Ok(text) => parse(&text).map_err(|reason| BootError::Unreadable {
            path: shown.clone(),
            reason,
        })?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0,
        Err(error) => return Err(io("read")(error)),
    };
    let boot = previous
        .checked_add(1)
        .ok_or_else(|| BootError::Unreadable {
            path: shown.clone(),
            reason: "the count is at its largest".to_owned(),
        })?;
    let tmp = data_dir.join("BOOT.tmp");
    let mut file = File::create(&tmp).map_err(io("create"))?;
    file.write_all(format!("{boot}\n").as_bytes())
        .map_err(io("write"))?;
    file.sync_all().map_err(io("sync"))?;
    std::fs::rename(&tmp, &path).map_err(io("rename"))?;
    File::open(data_dir)
        .and_then(|dir| dir.sync_all())
        .map_err(io("sync the directory"))?;
    Ok(boot)
}

fn parse(text: &str) -> Result<u64, String> {
    let digits = text
        .strip_suffix('\n')
        .ok_or_else(|| "no newline at its end (a torn write?)".to_owned())?;
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(format!("{digits:?} is not a number"));
    }
    digits
        .parse()
        .map_err(|error| format!("{digits:?}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_one_and_survives_restarts() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(count_boot(dir.path()).expect("first"), 1);
        assert_eq!(count_boot(dir.path()).expect("second"), 2);
        assert_eq!(
            std::fs::read_to_string(boot_path(dir.path())).expect("read"),
            "2\n"
        );
    }

    #[test]
    fn a_damaged_count_refuses_to_start_and_says_why() {
        let dir = tempfile::tempdir().expect("tempdir");
        for damaged in ["", "12", "1x\n", "-3\n", "99999999999999999999999\n"] {
            std::fs::write(boot_path(dir.path()), damaged).expect("write");
            let error = count_boot(dir.path()).expect_err("refused");
            assert!(
                matches!(error, BootError::Unreadable { .. }),
                "{damaged:?}: {error}"
            );
        }
    }
}
