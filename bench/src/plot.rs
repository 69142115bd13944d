//! **Pure**: the run as a hand-written SVG: two panels on one shared time
//! axis, and events (a kill, a restart) as labelled vertical lines through
//! both. A run draws acknowledged records per second above and the second's
//! p99 produce-ack latency below ([`render`]); a soak draws its samples'
//! throughput above and each node's disk bytes below, under their bound
//! ([`render_soak`]).

use std::fmt::Write;

use crate::soak::{NodeDisk, SoakReport};
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

/// One line of a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its name in the legend (none when empty).
    pub label: String,
    /// Line colour.
    pub colour: &'static str,
    /// Dashed (a second measure of the same thing, beside the solid one).
    pub dashed: bool,
    /// `(seconds since the load started, value)`, in time order.
    pub points: Vec<(f64, f64)>,
}

/// A horizontal line across a panel: a bound the series must stay under.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// Its value.
    pub value: f64,
    /// What it is (drawn above it).
    pub label: String,
}

/// One of the two panels: its unit, its lines and an optional bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// The y axis' label.
    pub unit: String,
    /// Its lines.
    pub series: Vec<Series>,
    /// A bound drawn across it, if any.
    pub limit: Option<Limit>,
}

/// The SVG document for `rows` (one per second) and `marks`.
pub fn render(title: &str, rows: &[SecondRow], marks: &[Mark]) -> String {
    let at_middle = |values: Vec<f64>| -> Vec<(f64, f64)> {
        (0..)
            .zip(values)
            .map(|(second, value): (u32, f64)| (f64::from(second) + 0.5, value))
            .collect()
    };
    let throughput = rows.iter().map(|row| row.records as f64).collect();
    let p99_ms = rows
        .iter()
        .map(|row| row.latency_us_p99 as f64 / 1e3)
        .collect();
    let panel = |unit: &str, colour, points| Panel {
        unit: unit.to_owned(),
        series: vec![Series {
            label: String::new(),
            colour,
            dashed: false,
            points,
        }],
        limit: None,
    };
    let panels = [
        panel("records/s", "#1f77b4", at_middle(throughput)),
        panel("p99 ms", "#d62728", at_middle(p99_ms)),
    ];
    render_panels(title, rows.len() as f64, &panels, marks)
}

/// The SVG document of two panels over `seconds` seconds, one above the
/// other on a shared time axis, with `marks` through both.
pub fn render_panels(title: &str, seconds: f64, panels: &[Panel; 2], marks: &[Mark]) -> String {
    let height = MARGIN_TOP + 2.0 * PANEL_HEIGHT + PANEL_GAP + MARGIN_BOTTOM;
    let seconds = seconds.max(marks.iter().map(|m| m.at_secs.ceil()).fold(1.0, f64::max));
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
    let top = MARGIN_TOP;
    let bottom = MARGIN_TOP + PANEL_HEIGHT + PANEL_GAP;
    panel(&mut svg, top, seconds, &panels[0]);
    panel(&mut svg, bottom, seconds, &panels[1]);
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

/// Line colours of the nodes in a soak's plot, by node id (cycled).
const NODE_COLOURS: [&str; 7] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
];

/// A soak's plot over `seconds`: acknowledged records per second of each
/// sample above; each node's partition bytes (solid) and data directory
/// bytes (dashed) below, in MiB, under the disk bound.
pub fn render_soak(title: &str, seconds: f64, soak: &SoakReport) -> String {
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    let throughput = Series {
        label: String::new(),
        colour: "#1f77b4",
        dashed: false,
        points: soak
            .samples
            .iter()
            .map(|sample| (sample.end_secs, sample.records_per_sec))
            .collect(),
    };
    let mut nodes: Vec<u32> = soak
        .samples
        .iter()
        .flat_map(|sample| sample.nodes.iter().map(|node| node.node))
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    let mut disk = Vec::new();
    for node in nodes {
        let colour = NODE_COLOURS[(node as usize).saturating_sub(1) % NODE_COLOURS.len()];
        let points = |bytes_of: fn(&NodeDisk) -> Option<u64>| {
            soak.samples
                .iter()
                .filter_map(|sample| {
                    let reading = sample.nodes.iter().find(|disk| disk.node == node)?;
                    Some((sample.end_secs, mib(bytes_of(reading)?)))
                })
                .collect()
        };
        disk.push(Series {
            label: format!("node {node} partitions"),
            colour,
            dashed: false,
            points: points(|disk| disk.partition_bytes),
        });
        disk.push(Series {
            label: format!("node {node} data dir (dashed)"),
            colour,
            dashed: true,
            points: points(|disk| disk.data_bytes),
        });
    }
    let limit = soak.disk.node_partition_bytes_max.map(|bound| Limit {
        value: mib(bound),
        label: format!("bound {:.0} MiB per node", mib(bound)),
    });
    let panels = [
        Panel {
            unit: format!("records/s per {} s sample", soak.sample_secs),
            series: vec![throughput],
            limit: None,
        },
        Panel {
            unit: "MiB on disk".to_owned(),
            series: disk,
            limit,
        },
    ];
    render_panels(title, seconds, &panels, &[])
}

/// One panel: frame, y axis with its maximum, the bound (if any), and each
/// series as a polyline with its legend entry.
fn panel(svg: &mut String, top: f64, seconds: f64, panel: &Panel) {
    let plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let values = panel
        .series
        .iter()
        .flat_map(|series| series.points.iter().map(|(_, value)| *value));
    let highest = values
        .chain(panel.limit.iter().map(|limit| limit.value))
        .fold(0.0, f64::max);
    let y_max = nice_ceiling(highest);
    let _ = writeln!(
        svg,
        r##"<rect x="{MARGIN_LEFT}" y="{top}" width="{plot_width}" height="{PANEL_HEIGHT}" fill="none" stroke="#999"/>"##
    );
    y_axis(svg, top, y_max, &panel.unit);
    if let Some(limit) = &panel.limit {
        limit_line(svg, top, y_max, limit);
    }
    for (index, series) in (0..).zip(&panel.series) {
        series_line(svg, top, seconds, y_max, index, series);
    }
}

/// The y of `value` in a panel at `top` whose axis ends at `y_max`.
fn y_of(top: f64, y_max: f64, value: f64) -> f64 {
    top + PANEL_HEIGHT - PANEL_HEIGHT * value / y_max
}

/// A panel's y axis: five grid lines with their values up to `y_max`, and
/// the unit written up its side.
fn y_axis(svg: &mut String, top: f64, y_max: f64, unit: &str) {
    for step in 0..=4 {
        let value = y_max * f64::from(step) / 4.0;
        let y = y_of(top, y_max, value);
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
}

/// A panel's bound: a dotted line across it, labelled.
fn limit_line(svg: &mut String, top: f64, y_max: f64, limit: &Limit) {
    let y = y_of(top, y_max, limit.value);
    let _ = writeln!(
        svg,
        r##"<line x1="{MARGIN_LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#000" stroke-dasharray="2 3"/><text x="{:.1}" y="{:.1}">{}</text>"##,
        WIDTH - MARGIN_RIGHT,
        MARGIN_LEFT + 4.0,
        y - 4.0,
        escape(&limit.label)
    );
}

/// One series as a polyline, with its legend entry (the `index`th of the
/// panel's) when it has a label.
fn series_line(svg: &mut String, top: f64, seconds: f64, y_max: f64, index: i32, series: &Series) {
    let points: Vec<String> = series
        .points
        .iter()
        .map(|(secs, value)| {
            format!(
                "{:.1},{:.1}",
                x_of(*secs, seconds),
                y_of(top, y_max, *value)
            )
        })
        .collect();
    let dash = if series.dashed {
        r#" stroke-dasharray="5 3""#
    } else {
        ""
    };
    let _ = writeln!(
        svg,
        r#"<polyline fill="none" stroke="{}" stroke-width="2"{dash} points="{}"/>"#,
        series.colour,
        points.join(" ")
    );
    if !series.label.is_empty() {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="{}">{}</text>"#,
            WIDTH - MARGIN_RIGHT - 6.0,
            top + 14.0 + 14.0 * f64::from(index),
            series.colour,
            escape(&series.label)
        );
    }
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
    fn a_panel_draws_every_series_its_legend_and_its_bound() {
        let node = |label: &str, colour, dashed, mib: f64| Series {
            label: label.to_owned(),
            colour,
            dashed,
            points: vec![(60.0, mib), (120.0, mib), (180.0, mib)],
        };
        let panels = [
            Panel {
                unit: "records/s".to_owned(),
                series: vec![node("", "blue", false, 30_000.0)],
                limit: None,
            },
            Panel {
                unit: "MiB".to_owned(),
                series: vec![
                    node("node 1 partitions", "red", false, 1_100.0),
                    node("node 1 data dir", "red", true, 1_150.0),
                ],
                limit: Some(Limit {
                    value: 1_282.0,
                    label: "bound 1282 MiB".to_owned(),
                }),
            },
        ];
        let svg = render_panels("soak", 180.0, &panels, &[]);
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert_eq!(svg.matches(r#"stroke-dasharray="5 3""#).count(), 1);
        assert!(svg.contains("node 1 partitions") && svg.contains("bound 1282 MiB"));
        // The last sample sits at the right edge of the plot.
        let x = WIDTH - MARGIN_RIGHT;
        assert!(svg.contains(&format!("{x:.1},")), "{svg}");
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn a_soak_draws_its_throughput_and_each_node_under_the_bound() {
        use crate::retention::RetentionLimit;
        use crate::soak::{SoakPlan, SoakSample};
        let samples: Vec<SoakSample> = (1..=3)
            .map(|number| {
                let end_secs = 15.0 * f64::from(number);
                let mut sample = SoakSample::counted(number, end_secs, 15.0, (300_000, 0), 1024);
                sample.nodes = (1..=2)
                    .map(|node| NodeDisk {
                        node,
                        data_bytes: Some(19 << 20),
                        partition_bytes: Some(18 << 20),
                        per_partition_bytes: vec![Some(18 << 20)],
                    })
                    .collect();
                sample
            })
            .collect();
        let plan = SoakPlan {
            sample_period: std::time::Duration::from_secs(15),
            samples: 3,
        };
        let limit = RetentionLimit {
            retention_bytes: 16 << 20,
            segment_bytes: 1 << 20,
        };
        let soak = SoakReport::judge(plan, Some(limit), 1, samples);
        let svg = render_soak("soak <16 MiB>", 45.0, &soak);
        assert_eq!(svg.matches("<polyline").count(), 1 + 2 * 2);
        assert!(svg.contains("bound 22 MiB per node"), "{svg}");
        assert!(svg.contains("node 2 data dir (dashed)"));
        assert!(svg.contains("soak &lt;16 MiB&gt;"));
        assert!(!svg.contains("NaN"));
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
