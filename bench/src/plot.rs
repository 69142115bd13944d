//! **Pure**: the run as a hand-written SVG: acknowledged records per second
//! above, the second's p99 produce-ack latency below, one shared time axis,
//! and events (a kill, a restart) as labelled vertical lines through both.

use std::fmt::Write;

use crate::timeline::SecondRow;

/// An event drawn as a vertical line.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// When, in seconds since the load started.
    pub at_secs: f64,
    /// What happened (drawn beside the line).
    pub label: String,
    /// Line colour (an SVG colour name or `#rrggbb`).
    pub colour: &'static str,
}

const WIDTH: f64 = 900.0;
const PANEL_HEIGHT: f64 = 200.0;
const MARGIN_LEFT: f64 = 80.0;
const MARGIN_RIGHT: f64 = 20.0;
const MARGIN_TOP: f64 = 40.0;
const PANEL_GAP: f64 = 50.0;
const MARGIN_BOTTOM: f64 = 40.0;

/// The SVG document for `rows` (one per second) and `marks`.
pub fn render(title: &str, rows: &[SecondRow], marks: &[Mark]) -> String {
    let height = MARGIN_TOP + 2.0 * PANEL_HEIGHT + PANEL_GAP + MARGIN_BOTTOM;
    let seconds =
        (rows.len() as f64).max(marks.iter().map(|m| m.at_secs.ceil()).fold(1.0, f64::max));
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="20" text-anchor="middle" font-size="15">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    let throughput: Vec<f64> = rows.iter().map(|row| row.records as f64).collect();
    let p99_ms: Vec<f64> = rows
        .iter()
        .map(|row| row.latency_us_p99 as f64 / 1e3)
        .collect();
    let top = MARGIN_TOP;
    let bottom = MARGIN_TOP + PANEL_HEIGHT + PANEL_GAP;
    panel(&mut svg, top, seconds, &throughput, "records/s", "#1f77b4");
    panel(&mut svg, bottom, seconds, &p99_ms, "p99 ms", "#d62728");
    axis_seconds(&mut svg, bottom + PANEL_HEIGHT, seconds);
    for mark in marks {
        let x = x_of(mark.at_secs, seconds);
        let _ = writeln!(
            svg,
            r#"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="{}" stroke-width="1.5" stroke-dasharray="6 4"/>"#,
            bottom + PANEL_HEIGHT,
            mark.colour
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" fill="{}">{}</text>"#,
            x + 4.0,
            top + 14.0,
            mark.colour,
            escape(&mark.label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// One panel: frame, y axis with its maximum, and the series as a polyline
/// through the middle of each second.
fn panel(svg: &mut String, top: f64, seconds: f64, values: &[f64], unit: &str, colour: &str) {
    let plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let y_max = nice_ceiling(values.iter().copied().fold(0.0, f64::max));
    let _ = writeln!(
        svg,
        r##"<rect x="{MARGIN_LEFT}" y="{top}" width="{plot_width}" height="{PANEL_HEIGHT}" fill="none" stroke="#999"/>"##
    );
    for step in 0..=4 {
        let value = y_max * f64::from(step) / 4.0;
        let y = top + PANEL_HEIGHT - PANEL_HEIGHT * f64::from(step) / 4.0;
        let _ = writeln!(
            svg,
            r##"<line x1="{MARGIN_LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - MARGIN_RIGHT,
            MARGIN_LEFT - 6.0,
            y + 4.0,
            short_number(value)
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="14" y="{:.1}" transform="rotate(-90 14 {:.1})" text-anchor="middle">{}</text>"#,
        top + PANEL_HEIGHT / 2.0,
        top + PANEL_HEIGHT / 2.0,
        escape(unit)
    );
    let points: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(second, value)| {
            let x = x_of(second as f64 + 0.5, seconds);
            let y = top + PANEL_HEIGHT - PANEL_HEIGHT * value / y_max;
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let _ = writeln!(
        svg,
        r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
        points.join(" ")
    );
}

fn axis_seconds(svg: &mut String, y: f64, seconds: f64) {
    let step = nice_ceiling(seconds / 10.0).max(1.0);
    let mut tick = 0.0;
    while tick <= seconds {
        let x = x_of(tick, seconds);
        let _ = writeln!(
            svg,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{tick}</text>"#,
            y + 16.0
        );
        tick += step;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">seconds since the load started</text>"#,
        MARGIN_LEFT + (WIDTH - MARGIN_LEFT - MARGIN_RIGHT) / 2.0,
        y + 34.0
    );
}

fn x_of(secs: f64, seconds: f64) -> f64 {
    MARGIN_LEFT + (WIDTH - MARGIN_LEFT - MARGIN_RIGHT) * secs / seconds
}

/// The smallest of 1, 2, 5 × 10^k at or above `value` (1 for 0 or less).
fn nice_ceiling(value: f64) -> f64 {
    if value <= 0.0 || !value.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|factor| factor * magnitude)
        .find(|candidate| *candidate >= value)
        .unwrap_or(10.0 * magnitude)
}

fn short_number(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if value >= 1e3 {
        format!("{:.1}k", value / 1e3)
    } else if value >= 10.0 || value == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<SecondRow> {
        (0..10)
            .map(|second| SecondRow {
                second,
                records: if second == 5 { 0 } else { 40_000 },
                megabytes: 40.0,
                latency_us_p99: 2_000 + u64::from(second) * 100,
            })
            .collect()
    }

    #[test]
    fn the_plot_has_both_series_and_the_kill() {
        let marks = [Mark {
            at_secs: 5.0,
            label: "kill node 2".to_owned(),
            colour: "red",
        }];
        let svg = render("3 nodes <persisted>", &rows(), &marks);
        assert!(svg.starts_with("<svg "));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("kill node 2"));
        assert!(
            svg.contains("3 nodes &lt;persisted&gt;"),
            "the title is escaped"
        );
        // The kill line sits at 5 s of 10: halfway across the plot area.
        let x = MARGIN_LEFT + (WIDTH - MARGIN_LEFT - MARGIN_RIGHT) / 2.0;
        assert!(svg.contains(&format!(r#"<line x1="{x:.1}""#)), "{svg}");
        // Every point lies inside the drawing.
        let height = MARGIN_TOP + 2.0 * PANEL_HEIGHT + PANEL_GAP + MARGIN_BOTTOM;
        for polyline in svg.lines().filter(|line| line.starts_with("<polyline")) {
            let points = polyline.split("points=\"").nth(1).expect("points");
            for point in points.trim_end_matches("\"/>").split(' ') {
                let (x, y) = point.split_once(',').expect("x,y");
                let (x, y): (f64, f64) = (x.parse().expect("x"), y.parse().expect("y"));
                assert!(
                    (0.0..=WIDTH).contains(&x) && (0.0..=height).contains(&y),
                    "{point}"
                );
            }
        }
    }

    #[test]
    fn an_empty_run_still_draws() {
        let svg = render("empty", &[], &[]);
        assert!(svg.contains("</svg>"));
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn axis_maxima_are_round_numbers() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(37_000.0), 50_000.0);
        assert_eq!(nice_ceiling(2.0), 2.0);
        assert_eq!(nice_ceiling(0.7), 1.0);
    }
}
