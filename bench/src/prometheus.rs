//! **Pure**: the Prometheus text exposition format, read into samples.
//!
//! Only what a scrape of a Strand node needs: `# HELP`/`# TYPE` comments and
//! blank lines are skipped; a sample is `name{label="value",...} value
//! [timestamp]`, label values with `\\`, `\"` and `\n` escapes.

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric name (with any `_bucket`/`_sum`/`_count` suffix).
    pub name: String,
    /// Its labels, in the order written.
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(label, _)| label == name)
            .map(|(_, value)| value.as_str())
    }
}

/// A line that is not a sample.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metrics line {line}: {reason}: {text:?}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub reason: &'static str,
    /// The line.
    pub text: String,
}

/// Every sample of a scrape, in order.
pub fn parse(text: &str) -> Result<Vec<Sample>, ParseError> {
    let mut samples = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let sample = parse_sample(line).map_err(|reason| ParseError {
            line: index + 1,
            reason,
            text: line.to_owned(),
        })?;
        samples.push(sample);
    }
    Ok(samples)
}

/// The sum of metric `name` over the samples whose label `label` is `value`
/// (0 when there are none: a counter not yet incremented is not exported).
pub fn sum_labelled(samples: &[Sample], name: &str, label: &str, value: &str) -> f64 {
    samples
        .iter()
        .filter(|sample| sample.name == name && sample.label(label) == Some(value))
        .map(|sample| sample.value)
        .sum::<f64>()
        + 0.0 // an empty sum is -0.0
}

/// The sum of metric `name` over all its samples, whatever their labels
/// (0 when there are none).
pub fn sum(samples: &[Sample], name: &str) -> f64 {
    samples
        .iter()
        .filter(|sample| sample.name == name)
        .map(|sample| sample.value)
        .sum::<f64>()
        + 0.0 // an empty sum is -0.0
}

fn parse_sample(line: &str) -> Result<Sample, &'static str> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .ok_or("no value")?;
    let name = &line[..name_end];
    let valid_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
    if !valid_name {
        return Err("bad metric name");
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        rest = parse_labels(after_brace, &mut labels)?;
    }
    let value = rest.split_whitespace().next().ok_or("no value")?;
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value: parse_value(value)?,
    })
}

/// Parses `a="x",b="y"}` into `labels`; returns what follows the `}`.
fn parse_labels<'a>(
    mut rest: &'a str,
    labels: &mut Vec<(String, String)>,
) -> Result<&'a str, &'static str> {
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            return Ok(after);
        }
        let (name, after_name) = rest.split_once('=').ok_or("label without '='")?;
        let after_quote = after_name
            .trim_start()
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let (value, after_value) = unquote(after_quote)?;
        labels.push((name.trim().to_owned(), value));
        rest = after_value.trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// Reads an escaped label value up to its closing quote.
fn unquote(text: &str) -> Result<(String, &str), &'static str> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((index, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &text[index + 1..])),
            '\\' => match chars.next() {
                Some((_, 'n')) => value.push('\n'),
                Some((_, escaped)) => value.push(escaped),
                None => return Err("unterminated escape"),
            },
            c => value.push(c),
        }
    }
    Err("unterminated label value")
}

fn parse_value(text: &str) -> Result<f64, &'static str> {
    match text {
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => text.parse::<f64>().map_err(|_| "bad value"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = "\
# HELP view_changes_total view changes this replica started
# TYPE view_changes_total counter
view_changes_total{group=\"1\"} 2
view_changes_total{group=\"12\"} 1

partition_commit_op{group=\"1\"} 4711
partitions_untrusted_log 0
produce_latency_seconds{quantile=\"0.99\"} 0.0021 1700000000000
odd{a=\"x\\\"y\\\\z\\n\", b = \"2\",} +Inf
";

    #[test]
    fn samples_read_with_their_labels_and_values() {
        let samples = parse(SCRAPE).expect("a valid scrape");
        assert_eq!(samples.len(), 6);
        assert_eq!(samples[0].name, "view_changes_total");
        assert_eq!(samples[0].label("group"), Some("1"));
        assert_eq!(samples[0].value, 2.0);
        assert_eq!(samples[3].labels, Vec::new());
        assert_eq!(samples[4].value, 0.0021, "a timestamp is ignored");
        assert_eq!(samples[5].label("a"), Some("x\"y\\z\n"));
        assert_eq!(samples[5].label("b"), Some("2"));
        assert_eq!(samples[5].value, f64::INFINITY);
    }

    #[test]
    fn a_labelled_counter_sums_only_its_group() {
        let samples = parse(SCRAPE).expect("a valid scrape");
        assert_eq!(
            sum_labelled(&samples, "view_changes_total", "group", "1"),
            2.0
        );
        assert_eq!(
            sum_labelled(&samples, "view_changes_total", "group", "12"),
            1.0
        );
        assert_eq!(
            sum_labelled(&samples, "view_changes_total", "group", "3"),
            0.0
        );
        assert_eq!(
            sum_labelled(&samples, "partition_commit_op", "group", "1"),
            4711.0
        );
    }

    #[test]
    fn a_metric_sums_over_every_label() {
        let samples = parse(SCRAPE).expect("a valid scrape");
        assert_eq!(sum(&samples, "view_changes_total"), 3.0);
        assert_eq!(sum(&samples, "partitions_untrusted_log"), 0.0);
        assert_eq!(sum(&samples, "absent"), 0.0);
    }

    #[test]
    fn a_broken_line_names_its_number() {
        let error = parse("ok 1\nbroken{group=\"1\" 2\n").expect_err("unterminated labels");
        assert_eq!(error.line, 2);
        let error = parse("no_value\n").expect_err("no value");
        assert_eq!(error.reason, "no value");
    }
}
