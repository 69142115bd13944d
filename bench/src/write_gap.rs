//! **Pure**: the write gap of a failover, from the times acks arrived for
//! the partition whose primary was killed.
//!
//! Acks for records the old primary committed may still arrive just after
//! the kill, so "the first ack after the kill" alone would understate the
//! outage. The gap is the longest pause between two consecutive acks that
//! starts at or after the last ack before the kill and before the window
//! ends (the restart, or the end of the run): that pause is the failover.

use serde::Serialize;

/// The failover's pause in acknowledgements, in milliseconds since the load
/// started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WriteGap {
    /// The last ack before the pause.
    pub last_ack_before_ms: u64,
    /// The first ack after it (`None`: writes never resumed).
    pub first_ack_after_ms: Option<u64>,
    /// The pause (to the window's end when writes never resumed).
    pub gap_ms: u64,
}

/// The write gap around a kill at `kill_ms`, looking at pauses that start
/// before `window_end_ms`; `ack_times_ms` sorted ascending. `None` when no
/// ack came before the kill.
pub fn write_gap(ack_times_ms: &[u64], kill_ms: u64, window_end_ms: u64) -> Option<WriteGap> {
    assert!(ack_times_ms.is_sorted(), "ack times are sorted");
    assert!(kill_ms <= window_end_ms);
    let first_after_kill = ack_times_ms.partition_point(|time| *time <= kill_ms);
    let last_before = first_after_kill.checked_sub(1)?;
    let mut best = WriteGap {
        last_ack_before_ms: ack_times_ms[last_before],
        first_ack_after_ms: None,
        gap_ms: window_end_ms - ack_times_ms[last_before],
    };
    let pauses = ack_times_ms[last_before..].windows(2);
    let mut resumed = false;
    for pair in pauses {
        let (start, end) = (pair[0], pair[1]);
        if start >= window_end_ms {
            break;
        }
        if !resumed || end - start > best.gap_ms {
            best = WriteGap {
                last_ack_before_ms: start,
                first_ack_after_ms: Some(end),
                gap_ms: end - start,
            };
            resumed = true;
        }
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gap_runs_from_the_last_ack_before_the_kill_to_the_resumption() {
        let acks = [100, 200, 300, 1_450, 1_460, 1_470];
        let gap = write_gap(&acks, 310, 5_000).expect("acks before the kill");
        assert_eq!(gap.last_ack_before_ms, 300);
        assert_eq!(gap.first_ack_after_ms, Some(1_450));
        assert_eq!(gap.gap_ms, 1_150);
    }

    #[test]
    fn late_acks_of_old_commits_do_not_end_the_gap() {
        // Replies in transit at the kill arrive at 302 and 305; the outage follows.
        let acks = [290, 300, 302, 305, 1_600, 1_610];
        let gap = write_gap(&acks, 301, 5_000).expect("acks before the kill");
        assert_eq!(gap.last_ack_before_ms, 305);
        assert_eq!(gap.first_ack_after_ms, Some(1_600));
        assert_eq!(gap.gap_ms, 1_295);
    }

    #[test]
    fn pauses_after_the_window_are_not_the_failover() {
        // The restart at 3 000 causes its own pause: not this kill's gap.
        let acks = [100, 500, 900, 3_100, 6_000];
        let gap = write_gap(&acks, 150, 3_000).expect("acks before the kill");
        assert_eq!(gap.first_ack_after_ms, Some(3_100));
        assert_eq!(gap.gap_ms, 2_200);
    }

    #[test]
    fn writes_that_never_resume_leave_the_gap_open_to_the_window_end() {
        let gap = write_gap(&[100, 200], 250, 4_000).expect("acks before the kill");
        assert_eq!(gap.first_ack_after_ms, None);
        assert_eq!(gap.gap_ms, 3_800);
    }

    #[test]
    fn no_ack_before_the_kill_means_no_gap() {
        assert_eq!(write_gap(&[500], 100, 1_000), None);
        assert_eq!(write_gap(&[], 100, 1_000), None);
    }
}
