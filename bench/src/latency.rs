//! **Pure**: latency histograms (hdrhistogram) and their summary.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest latency recorded exactly, in microseconds (2 minutes); longer
/// ones are recorded as this (the SDK gives up well before).
pub const LATENCY_US_MAX: u64 = 120_000_000;

/// A histogram of microseconds, 3 significant digits: for whole-run totals.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("constant bounds are valid")
}

/// A smaller histogram (2 significant digits): one per second of a timeline.
pub fn histogram_coarse() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 2).expect("constant bounds are valid")
}

/// Records `latency_us`, clamped into the histogram's range.
pub fn record(histogram: &mut Histogram<u64>, latency_us: u64) {
    histogram.saturating_record(latency_us.clamp(1, LATENCY_US_MAX));
}

/// Percentiles of one histogram, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Values recorded.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest value.
    pub max_us: u64,
}

/// The summary of `histogram` (all zero when it is empty).
pub fn summarize(histogram: &Histogram<u64>) -> LatencySummary {
    if histogram.is_empty() {
        return LatencySummary {
            count: 0,
            mean_us: 0.0,
            p50_us: 0,
            p90_us: 0,
            p99_us: 0,
            p999_us: 0,
            max_us: 0,
        };
    }
    let summary = LatencySummary {
        count: histogram.len(),
        mean_us: histogram.mean(),
        p50_us: histogram.value_at_quantile(0.50),
        p90_us: histogram.value_at_quantile(0.90),
        p99_us: histogram.value_at_quantile(0.99),
        p999_us: histogram.value_at_quantile(0.999),
        max_us: histogram.max(),
    };
    assert!(summary.p50_us <= summary.p90_us && summary.p90_us <= summary.p99_us);
    assert!(summary.p99_us <= summary.p999_us && summary.p999_us <= summary.max_us);
    summary
}

/// Microseconds as a short human string (`850 µs`, `12.3 ms`, `1.50 s`).
pub fn format_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{:.1} ms", us as f64 / 1e3)
    } else {
        format!("{:.2} s", us as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut histogram = histogram();
        for latency_us in 1..=10_000 {
            record(&mut histogram, latency_us);
        }
        let summary = summarize(&histogram);
        assert_eq!(summary.count, 10_000);
        let near = |value: u64, expected: u64| value.abs_diff(expected) <= expected / 500 + 1;
        assert!(near(summary.p50_us, 5_000), "{summary:?}");
        assert!(near(summary.p90_us, 9_000), "{summary:?}");
        assert!(near(summary.p99_us, 9_900), "{summary:?}");
        assert!(near(summary.p999_us, 9_990), "{summary:?}");
        assert!(near(summary.max_us, 10_000), "{summary:?}");
        assert!((summary.mean_us - 5_000.5).abs() < 10.0, "{summary:?}");
    }

    #[test]
    fn an_empty_histogram_summarizes_to_zero() {
        let summary = summarize(&histogram());
        assert_eq!(summary.count, 0);
        assert_eq!(summary.max_us, 0);
    }

    #[test]
    fn out_of_range_latencies_are_clamped_not_lost() {
        let mut histogram = histogram();
        record(&mut histogram, 0);
        record(&mut histogram, LATENCY_US_MAX * 10);
        let summary = summarize(&histogram);
        assert_eq!(summary.count, 2);
        assert!(summary.max_us >= LATENCY_US_MAX);
    }

    #[test]
    fn durations_print_in_a_readable_unit() {
        assert_eq!(format_us(850), "850 µs");
        assert_eq!(format_us(12_345), "12.3 ms");
        assert_eq!(format_us(1_500_000), "1.50 s");
    }
}
