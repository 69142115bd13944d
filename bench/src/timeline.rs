//! **Pure**: what happened in each second of a run (acknowledged records,
//! payload bytes, latency), for the plot and the JSON report.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::latency;

/// Most seconds a timeline keeps (a day); later acks are counted in the last.
pub const TIMELINE_SECONDS_MAX: usize = 86_400;

/// Per-second counters of one recorder; merge recorders with [`Timeline::merge`].
#[derive(Debug, Default, Clone)]
pub struct Timeline {
    seconds: Vec<Second>,
}

#[derive(Debug, Clone)]
struct Second {
    records: u64,
    bytes: u64,
    latency: Histogram<u64>,
}

/// One second of a timeline, summarized.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SecondRow {
    /// Seconds since the load started (this row covers `second..second + 1`).
    pub second: u32,
    /// Records acknowledged in this second.
    pub records: u64,
    /// Payload megabytes (10^6 bytes) acknowledged in this second.
    pub megabytes: f64,
    /// 99th percentile of the produce-ack latency of those records (0 when none).
    pub latency_us_p99: u64,
}

impl Timeline {
    /// Counts one acknowledged record of `bytes` payload bytes, acked at
    /// `elapsed` since the start after `latency_us`.
    pub fn record(&mut self, elapsed: Duration, bytes: u64, latency_us: u64) {
        let index = (elapsed.as_secs() as usize).min(TIMELINE_SECONDS_MAX - 1);
        while self.seconds.len() <= index {
            self.seconds.push(Second::new());
        }
        let second = &mut self.seconds[index];
        second.records += 1;
        second.bytes += bytes;
        latency::record(&mut second.latency, latency_us);
    }

    /// Adds `other`'s counts to this timeline.
    pub fn merge(&mut self, other: &Timeline) {
        while self.seconds.len() < other.seconds.len() {
            self.seconds.push(Second::new());
        }
        for (mine, theirs) in self.seconds.iter_mut().zip(&other.seconds) {
            mine.records += theirs.records;
            mine.bytes += theirs.bytes;
            mine.latency
                .add(&theirs.latency)
                .expect("timeline histograms share their bounds");
        }
    }

    /// One row per second, from second 0 up to the last with an ack.
    pub fn rows(&self) -> Vec<SecondRow> {
        self.seconds
            .iter()
            .enumerate()
            .map(|(index, second)| SecondRow {
                second: index as u32,
                records: second.records,
                megabytes: second.bytes as f64 / 1e6,
                latency_us_p99: if second.latency.is_empty() {
                    0
                } else {
                    second.latency.value_at_quantile(0.99)
                },
            })
            .collect()
    }
}

impl Second {
    fn new() -> Second {
        Second {
            records: 0,
            bytes: 0,
            latency: latency::histogram_coarse(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_land_in_the_second_they_happen_and_merge_across_recorders() {
        let mut first = Timeline::default();
        first.record(Duration::from_millis(100), 1_000, 500);
        first.record(Duration::from_millis(2_900), 1_000, 9_000);
        let mut second = Timeline::default();
        second.record(Duration::from_millis(200), 1_000, 700);
        first.merge(&second);
        let rows = first.rows();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].records, 2);
        assert!((rows[0].megabytes - 0.002).abs() < 1e-9);
        assert!(rows[0].latency_us_p99.abs_diff(700) <= 7, "{:?}", rows[0]);
        assert_eq!(rows[1].records, 0, "a quiet second stays in the timeline");
        assert_eq!(rows[1].latency_us_p99, 0);
        assert_eq!(rows[2].records, 1);
    }
}
