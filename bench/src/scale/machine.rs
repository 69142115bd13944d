//! What the whole machine did during a produce run: how busy its CPUs were,
//! how fast the data disk wrote and how much memory was free when it began,
//! from Linux's `/proc/stat`, `/proc/diskstats` and `/proc/meminfo`. On a
//! machine whose speed drifts within a run (a VM spending its host's CPU or
//! disk budget after tens of seconds of load), these tell a throttled round
//! from a slower build: the same busy CPU for fewer records, or a disk
//! writing at a lower rate. Free memory says how far the page cache had
//! filled the machine when the run began: on a VM, the pages the cache takes
//! can cost far more than the copy into them, and how much depends on where
//! the host stands. The parsers are **pure**; [`MachineSample::now`] is the thin
//! shell that reads the files.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

/// Bytes in one of the sectors `/proc/diskstats` counts in (always 512,
/// whatever the device's own sector size).
const DISKSTATS_SECTOR_BYTES: u64 = 512;

/// `/proc/diskstats` fields: major, minor, name, then the counters;
/// sectors written is the 10th field.
const DISKSTATS_SECTORS_WRITTEN_INDEX: usize = 9;

/// Bytes in a GiB.
const GIB: f64 = (1u64 << 30) as f64;

/// The machine's CPU time since boot, summed over its CPUs, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineTicks {
    /// Running anything: user, nice, system, irq, softirq, steal.
    pub busy: u64,
    /// Idle, or idle waiting for I/O.
    pub idle: u64,
}

/// The `cpu` line of a `/proc/stat` text (the sum over every CPU).
pub fn parse_machine_ticks(text: &str) -> Option<MachineTicks> {
    let line = text.lines().find(|line| line.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal (guest time is in user).
    let field = |index: usize| fields.get(index).copied();
    Some(MachineTicks {
        busy: field(0)? + field(1)? + field(2)? + field(5)? + field(6)? + field(7).unwrap_or(0),
        idle: field(3)? + field(4)?,
    })
}

/// Sectors written to the device `major:minor` since boot, from a
/// `/proc/diskstats` text; `None` when no row names it (the data sits on a
/// file system with no block device of its own, such as an overlay).
pub fn parse_sectors_written(text: &str, major: u64, minor: u64) -> Option<u64> {
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let number = |index: usize| fields.get(index)?.parse::<u64>().ok();
        (number(0)? == major && number(1)? == minor)
            .then(|| number(DISKSTATS_SECTORS_WRITTEN_INDEX))
            .flatten()
    })
}

/// Bytes of memory free (`MemFree`, neither used nor cache), from a
/// `/proc/meminfo` text.
pub fn parse_mem_free_bytes(text: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.starts_with("MemFree:"))?;
    let mut fields = line.split_whitespace().skip(1);
    let kib: u64 = fields.next()?.parse().ok()?;
    (fields.next()? == "kB").then_some(kib * 1024)
}

/// The major and minor numbers of a Linux `dev_t` (glibc's encoding: 12
/// bits of major and 20 of minor, split across the word).
pub fn device_numbers(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
    let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
    (major, minor)
}

/// One reading of the machine's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineSample {
    ticks: MachineTicks,
    /// Sectors written to the disk under the data directory, when known.
    sectors_written: Option<u64>,
    /// Memory free, when known.
    free_bytes: Option<u64>,
}

impl MachineSample {
    /// Reads the counters now; `None` without a readable `/proc/stat`. The
    /// disk is the one holding `data_dir`.
    pub fn now(data_dir: &Path) -> Option<MachineSample> {
        let ticks = parse_machine_ticks(&std::fs::read_to_string("/proc/stat").ok()?)?;
        let sectors_written = std::fs::metadata(data_dir).ok().and_then(|metadata| {
            let (major, minor) = device_numbers(metadata.dev());
            let text = std::fs::read_to_string("/proc/diskstats").ok()?;
            parse_sectors_written(&text, major, minor)
        });
        let free_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| parse_mem_free_bytes(&text));
        Some(MachineSample {
            ticks,
            sectors_written,
            free_bytes,
        })
    }
}

/// What the machine did between two samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MachineLoad {
    /// Busy share of all CPUs, in percent (100: every CPU busy throughout).
    pub busy_percent: f64,
    /// Megabytes (10^6 bytes) a second the data disk wrote, when known.
    pub disk_written_mb_per_sec: Option<f64>,
    /// GiB of memory free when the run began, when known.
    pub free_gib_at_start: Option<f64>,
}

impl MachineLoad {
    /// Between `before` and `after`, `wall` apart; `None` when the counters
    /// went back or no time passed (not two readings of one machine).
    pub fn between(
        before: MachineSample,
        after: MachineSample,
        wall: Duration,
    ) -> Option<MachineLoad> {
        let busy = after.ticks.busy.checked_sub(before.ticks.busy)?;
        let idle = after.ticks.idle.checked_sub(before.ticks.idle)?;
        let secs = wall.as_secs_f64();
        if busy + idle == 0 || secs <= 0.0 {
            return None;
        }
        let disk_written_mb_per_sec = before
            .sectors_written
            .zip(after.sectors_written)
            .and_then(|(before, after)| after.checked_sub(before))
            .map(|sectors| (sectors * DISKSTATS_SECTOR_BYTES) as f64 / 1e6 / secs);
        Some(MachineLoad {
            busy_percent: busy as f64 * 100.0 / (busy + idle) as f64,
            disk_written_mb_per_sec,
            free_gib_at_start: before.free_bytes.map(|bytes| bytes as f64 / GIB),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  2300134 10 929783 1810144 191590 0 87739 4236 0 0\n\
                        cpu0 1150067 5 464891 905072 95795 0 43869 2118 0 0\n\
                        intr 1 2 3\n";

    const DISKSTATS: &str = "   7       0 loop0 10 0 80 1 0 0 0 0 0 4 1 0 0 0 0 0 0\n \
                             254       0 vda 3126989 158267 204528946 3778970 143064948 \
                             50686761 5350797784 116040178 0 5045732 121951004 8471574 21 \
                             3392159656 1038722 16301187 1093132\n \
                             254       1 vda1 12 0 96 1 7 0 56 2 0 3 3 0 0 0 0 0 0\n";

    #[test]
    fn the_cpu_line_sums_busy_and_idle_time() {
        let ticks = parse_machine_ticks(STAT).expect("a cpu line");
        assert_eq!(
            ticks,
            MachineTicks {
                busy: 2300134 + 10 + 929783 + 87739 + 4236,
                idle: 1810144 + 191590,
            }
        );
        assert_eq!(
            parse_machine_ticks("cpu0 1 2 3 4 5 6 7\n"),
            None,
            "no sum line"
        );
        assert_eq!(parse_machine_ticks("cpu  1 2 x 4 5 6 7\n"), None);
    }

    #[test]
    fn sectors_written_come_from_the_row_of_the_device() {
        assert_eq!(parse_sectors_written(DISKSTATS, 254, 0), Some(5350797784));
        assert_eq!(parse_sectors_written(DISKSTATS, 254, 1), Some(56));
        assert_eq!(parse_sectors_written(DISKSTATS, 0, 42), None, "an overlay");
    }

    #[test]
    fn free_memory_is_the_memfree_line_in_bytes() {
        let meminfo = "MemTotal:       24684624 kB\nMemFree:        17113088 kB\n\
                       MemAvailable:   23211008 kB\n";
        assert_eq!(parse_mem_free_bytes(meminfo), Some(17113088 * 1024));
        assert_eq!(parse_mem_free_bytes("MemTotal: 1 kB\n"), None, "no line");
        assert_eq!(parse_mem_free_bytes("MemFree: 12 MB\n"), None, "not kB");
        assert_eq!(parse_mem_free_bytes("MemFree: x kB\n"), None);
    }

    #[test]
    fn device_numbers_split_as_glibc_encodes_them() {
        assert_eq!(device_numbers(0xfe00), (254, 0));
        assert_eq!(device_numbers(0xfe01), (254, 1));
        // A major above 4095 and a minor above 255: makedev(0x1234, 0x567).
        assert_eq!(device_numbers(0x1000_0052_3467), (0x1234, 0x567));
    }

    #[test]
    fn load_between_two_samples() {
        let sample = |busy, idle, sectors| MachineSample {
            ticks: MachineTicks { busy, idle },
            sectors_written: sectors,
            free_bytes: Some(3 << 29),
        };
        let load = MachineLoad::between(
            sample(1_000, 1_000, Some(0)),
            sample(1_800, 1_200, Some(8_000_000)),
            Duration::from_secs(10),
        )
        .expect("two readings");
        assert_eq!(load.busy_percent, 80.0);
        assert_eq!(load.disk_written_mb_per_sec, Some(409.6));
        assert_eq!(load.free_gib_at_start, Some(1.5));
        let unknown_disk = MachineLoad::between(
            sample(0, 0, None),
            sample(1, 1, Some(5)),
            Duration::from_secs(1),
        )
        .expect("two readings");
        assert_eq!(unknown_disk.disk_written_mb_per_sec, None);
        assert_eq!(
            MachineLoad::between(
                sample(5, 5, None),
                sample(4, 9, None),
                Duration::from_secs(1)
            ),
            None,
            "counters went back"
        );
    }
}
