//! A node process's CPU time, resident memory and threads, from Linux's
//! `/proc/PID/stat` and `/proc/PID/status`. The parsers are **pure** (text
//! in, values or a typed error out); [`read_stat`] and [`read_status`] are
//! the thin shell that reads the files.

use std::time::Duration;

/// Clock ticks per second of the CPU times in `/proc/PID/stat`
/// (`sysconf(_SC_CLK_TCK)`, the kernel's `USER_HZ`). Linux exports 100 on
/// every architecture this bench runs on; reading it needs libc (or
/// `getconf`), which this crate does without.
pub const CLOCK_TICKS_PER_SEC: u64 = 100;

/// Bytes in one of the `kB` that `/proc/PID/status` counts in.
const STATUS_KB_BYTES: u64 = 1024;

/// Fields of `/proc/PID/stat` after the command's closing parenthesis:
/// `state` is field 3 of the line (index 0 here), `utime` field 14.
const STAT_UTIME_INDEX: usize = 14 - 3;

/// `stime` is field 15 of the line.
const STAT_STIME_INDEX: usize = 15 - 3;

/// Why a process's figures could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcError {
    /// The file could not be read (the process exited, or no `/proc`).
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// The OS's reason.
        reason: String,
    },
    /// The file's text is not what the kernel writes.
    #[error("{file}: {reason}")]
    Parse {
        /// Which file (`stat` or `status`).
        file: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// CPU time a process has used, in clock ticks ([`CLOCK_TICKS_PER_SEC`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTicks {
    /// In user mode (`utime`).
    pub user_ticks: u64,
    /// In the kernel on its behalf (`stime`).
    pub system_ticks: u64,
}

impl CpuTicks {
    /// User plus system time.
    pub fn total_ticks(self) -> u64 {
        self.user_ticks + self.system_ticks
    }
}

/// A process's memory and threads, from `/proc/PID/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessStatus {
    /// Resident memory (`VmRSS`).
    pub rss_bytes: u64,
    /// Threads (`Threads`).
    pub threads: u32,
}

/// The CPU times in one `/proc/PID/stat` line. The command (field 2) is in
/// parentheses and may hold spaces and parentheses itself, so the fields
/// are counted from its last `)`.
pub fn parse_stat(text: &str) -> Result<CpuTicks, ProcError> {
    let parse_error = |reason: String| ProcError::Parse {
        file: "stat",
        reason,
    };
    let (_, after_command) = text
        .rsplit_once(')')
        .ok_or_else(|| parse_error("no `)` after the command".to_owned()))?;
    let fields: Vec<&str> = after_command.split_whitespace().collect();
    let field = |index: usize, name: &str| -> Result<u64, ProcError> {
        let text = fields
            .get(index)
            .ok_or_else(|| parse_error(format!("no {name} field")))?;
        text.parse::<u64>()
            .map_err(|error| parse_error(format!("{name} {text:?}: {error}")))
    };
    Ok(CpuTicks {
        user_ticks: field(STAT_UTIME_INDEX, "utime")?,
        system_ticks: field(STAT_STIME_INDEX, "stime")?,
    })
}

/// `VmRSS` and `Threads` of a `/proc/PID/status` text.
pub fn parse_status(text: &str) -> Result<ProcessStatus, ProcError> {
    let parse_error = |reason: String| ProcError::Parse {
        file: "status",
        reason,
    };
    let value = |key: &str| -> Result<&str, ProcError> {
        text.lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
            .map(str::trim)
            .ok_or_else(|| parse_error(format!("no {key} line")))
    };
    let rss = value("VmRSS")?;
    let rss_kb = rss
        .strip_suffix("kB")
        .ok_or_else(|| parse_error(format!("VmRSS {rss:?} is not in kB")))?
        .trim()
        .parse::<u64>()
        .map_err(|error| parse_error(format!("VmRSS {rss:?}: {error}")))?;
    let threads = value("Threads")?;
    let threads = threads
        .parse::<u32>()
        .map_err(|error| parse_error(format!("Threads {threads:?}: {error}")))?;
    Ok(ProcessStatus {
        rss_bytes: rss_kb * STATUS_KB_BYTES,
        threads,
    })
}

/// CPU use between two readings `wall` apart, in percent of one core
/// (200 is two cores busy); zero for an empty interval. A process's CPU
/// time never goes back, so a second reading below the first is not of the
/// same process (its pid was reused): an error.
pub fn cpu_percent(before: CpuTicks, after: CpuTicks, wall: Duration) -> Result<f64, ProcError> {
    let busy_ticks = after
        .total_ticks()
        .checked_sub(before.total_ticks())
        .ok_or_else(|| ProcError::Parse {
            file: "stat",
            reason: format!("CPU time went back from {before:?} to {after:?}"),
        })?;
    let wall_secs = wall.as_secs_f64();
    if wall_secs <= 0.0 {
        return Ok(0.0);
    }
    let busy_secs = busy_ticks as f64 / CLOCK_TICKS_PER_SEC as f64;
    Ok(busy_secs / wall_secs * 100.0)
}

/// Process `pid`'s CPU times now.
pub fn read_stat(pid: u32) -> Result<CpuTicks, ProcError> {
    parse_stat(&read(pid, "stat")?)
}

/// Process `pid`'s memory and threads now.
pub fn read_status(pid: u32) -> Result<ProcessStatus, ProcError> {
    parse_status(&read(pid, "status")?)
}

fn read(pid: u32, file: &str) -> Result<String, ProcError> {
    let path = format!("/proc/{pid}/{file}");
    std::fs::read_to_string(&path).map_err(|error| ProcError::Read {
        path,
        reason: error.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real line, with a command that holds a space and a parenthesis.
    const STAT: &str = "4242 (strand (io) x) S 1 4242 4242 0 -1 4194560 2314 0 0 0 \
                        1234 567 0 0 20 0 6 0 123456 987654321 3000 18446744073709551615 \
                        1 1 0 0 0 0 0 4096 17416 0 0 0 17 1 0 0 0 0 0\n";

    const STATUS: &str = "Name:\tstrand-server\nUmask:\t0022\nState:\tS (sleeping)\n\
                          VmPeak:\t  812340 kB\nVmRSS:\t   51234 kB\nRssAnon:\t   40000 kB\n\
                          Threads:\t7\nSigQ:\t0/94000\n";

    #[test]
    fn stat_fields_count_from_the_last_parenthesis() {
        let ticks = parse_stat(STAT).expect("a valid stat line");
        assert_eq!(
            ticks,
            CpuTicks {
                user_ticks: 1234,
                system_ticks: 567
            }
        );
        assert_eq!(ticks.total_ticks(), 1801);
    }

    #[test]
    fn a_short_or_garbled_stat_line_is_a_typed_error() {
        assert!(matches!(
            parse_stat("4242 strand S 1"),
            Err(ProcError::Parse { file: "stat", .. })
        ));
        assert!(parse_stat("4242 (strand) S 1 2 3").is_err());
        let garbled = STAT.replace(" 1234 ", " x ");
        let error = parse_stat(&garbled).expect_err("utime is not a number");
        assert!(error.to_string().contains("utime"), "{error}");
    }

    #[test]
    fn status_gives_resident_bytes_and_threads() {
        let status = parse_status(STATUS).expect("a valid status");
        assert_eq!(status.rss_bytes, 51_234 * 1024);
        assert_eq!(status.threads, 7);
    }

    #[test]
    fn status_without_rss_is_a_typed_error() {
        // A kernel thread (or a zombie) has no VmRSS line.
        let error = parse_status("Name:\tkthreadd\nThreads:\t1\n").expect_err("no VmRSS");
        assert!(error.to_string().contains("VmRSS"), "{error}");
        let error = parse_status("VmRSS:\t12 MB\nThreads:\t1\n").expect_err("not kB");
        assert!(error.to_string().contains("kB"), "{error}");
    }

    #[test]
    fn cpu_percent_is_of_one_core() {
        let before = CpuTicks {
            user_ticks: 100,
            system_ticks: 50,
        };
        let after = CpuTicks {
            user_ticks: 250,
            system_ticks: 100,
        };
        // 200 ticks = 2 s of CPU in 4 s of wall time: half a core.
        let percent = cpu_percent(before, after, Duration::from_secs(4)).expect("forward");
        assert!((percent - 50.0).abs() < 1e-9, "{percent}");
        assert_eq!(cpu_percent(before, after, Duration::ZERO), Ok(0.0));
        assert!(cpu_percent(after, before, Duration::from_secs(1)).is_err());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_process_can_be_read() {
        let pid = std::process::id();
        read_stat(pid).expect("our own stat");
        let status = read_status(pid).expect("our own status");
        assert!(status.rss_bytes > 0 && status.threads >= 1);
    }
}
