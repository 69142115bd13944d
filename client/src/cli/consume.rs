//! `strand consume STREAM/TOPIC`: reads one partition from an offset (or a
//! stored cursor) and prints each record on one line: `OFFSET<TAB>VALUE`, or
//! `OFFSET<TAB>KEY<SEP>VALUE` with `--key-sep SEP`, bytes escaped so a
//! record never spans lines; `--json` prints one object per record per line.
//!
//! Without `--follow` it stops at the partition's high watermark (or after
//! `--count` records); with it, it long-polls for more. With `--cursor NAME`
//! it stores the cursor (the next offset to read) after every batch it
//! printed, so an interrupted run resumes after the last printed record.

use std::io::Write;

use serde::Serialize;

use super::args::{ConsumeArgs, Start};
use super::errors::CliError;
use super::table::{escape_bytes, hex};
use crate::{Client, ConsumedRecord, Consumer, ConsumerConfig, StartFrom};

/// Bytes asked for per fetch.
const FETCH_BYTES_MAX: u32 = 1024 * 1024;

/// How long one poll waits for new records under `--follow`.
const FOLLOW_WAIT_MS: u32 = 1_000;

/// A record as `--json` prints it: text when the bytes are UTF-8, else hex.
#[derive(Debug, Serialize)]
struct RecordJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    partition: Option<u32>,
    offset: u64,
    timestamp_us: u64,
    key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_hex: Option<String>,
    value: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_hex: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    headers: Vec<HeaderJson<'a>>,
}

#[derive(Debug, Serialize)]
struct HeaderJson<'a> {
    name: &'a str,
    value: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_hex: Option<String>,
}

/// Bytes as (text, hex): text when valid UTF-8, hex otherwise.
fn text_or_hex(bytes: &[u8]) -> (Option<&str>, Option<String>) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (Some(text), None),
        Err(_) => (None, Some(hex(bytes))),
    }
}

/// One record as one JSON line.
pub(crate) fn record_json(record: &ConsumedRecord) -> String {
    record_json_in(None, record)
}

/// One record as one JSON line, naming its partition when given.
pub(crate) fn record_json_in(partition: Option<u32>, record: &ConsumedRecord) -> String {
    let (key, key_hex) = text_or_hex(&record.key);
    let (value, value_hex) = text_or_hex(&record.value);
    let headers = record
        .headers
        .iter()
        .map(|(name, value)| {
            let (value, value_hex) = text_or_hex(value);
            HeaderJson {
                name,
                value,
                value_hex,
            }
        })
        .collect();
    let json = RecordJson {
        partition,
        offset: record.offset,
        timestamp_us: record.timestamp_us,
        key,
        key_hex,
        value,
        value_hex,
        headers,
    };
    // A struct of strings and integers always serializes.
    serde_json::to_string(&json).unwrap_or_default()
}

/// One record as one human line (no line end).
pub(crate) fn record_text(record: &ConsumedRecord, key_sep: Option<&str>) -> String {
    match key_sep {
        Some(separator) => format!(
            "{}\t{}{separator}{}",
            record.offset,
            escape_bytes(&record.key),
            escape_bytes(&record.value)
        ),
        None => format!("{}\t{}", record.offset, escape_bytes(&record.value)),
    }
}

/// Runs `strand consume`.
pub(crate) async fn run(
    client: &Client,
    args: ConsumeArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if let Some(group) = args.group.clone() {
        return super::consumer_group::consume(client, &group, args, json, out).await;
    }
    let doing = format!("consume from {} partition {}", args.topic, args.partition);
    let start_from = start_from(client, &args, &doing).await?;
    let config = ConsumerConfig {
        name: args.cursor.clone(),
        start_from,
        max_bytes: FETCH_BYTES_MAX,
        wait_ms: if args.follow { FOLLOW_WAIT_MS } else { 0 },
    };
    let consumer = client
        .consumer(
            &args.topic.stream,
            &args.topic.topic,
            args.partition,
            config,
        )
        .await
        .map_err(|error| CliError::client(&doing, error))?;
    print_records(consumer, &args, json, &doing, out).await
}

/// Where the consumer starts: the offset of `--from-time` (asked of the
/// cluster), `--from`, the stored cursor, or the earliest record.
async fn start_from(
    client: &Client,
    args: &ConsumeArgs,
    doing: &str,
) -> Result<StartFrom, CliError> {
    let at_time = match args.from_time {
        Some(timestamp_ns) => Some(
            client
                .offset_for_time(
                    &args.topic.stream,
                    &args.topic.topic,
                    args.partition,
                    timestamp_ns,
                )
                .await
                .map_err(|error| CliError::client(doing, error))?,
        ),
        None => None,
    };
    Ok(match (at_time, args.from, &args.cursor) {
        (Some(offset), _, _) | (None, Some(Start::Offset(offset)), _) => StartFrom::Offset(offset),
        (None, Some(Start::Latest), _) => StartFrom::Latest,
        (None, Some(Start::Earliest), _) => StartFrom::Earliest,
        (None, None, Some(_)) => StartFrom::StoredCursor,
        (None, None, None) => StartFrom::Earliest,
    })
}

/// Polls and prints records until `--count` are printed or, without
/// `--follow`, the partition is caught up; stores the cursor after each
/// poll when one is named.
async fn print_records(
    mut consumer: Consumer,
    args: &ConsumeArgs,
    json: bool,
    doing: &str,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut printed = 0u64;
    loop {
        if args.count.is_some_and(|count| printed >= count) {
            return Ok(());
        }
        let records = consumer
            .poll()
            .await
            .map_err(|error| CliError::client(doing, error))?;
        let mut next_offset = consumer.position();
        for record in &records {
            if args.count.is_some_and(|count| printed >= count) {
                next_offset = record.offset;
                break;
            }
            let line = if json {
                record_json(record)
            } else {
                record_text(record, args.key_sep.as_deref())
            };
            writeln!(out, "{line}")?;
            printed += 1;
        }
        out.flush()?;
        if args.cursor.is_some() && !records.is_empty() {
            consumer
                .commit_offset(next_offset)
                .await
                .map_err(|error| CliError::client(format!("{doing}: store the cursor"), error))?;
        }
        let caught_up = records.is_empty() || consumer.lag() == Some(0);
        if !args.follow && caught_up {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn record(key: &'static [u8], value: &'static [u8]) -> ConsumedRecord {
        ConsumedRecord {
            offset: 3,
            timestamp_us: 9,
            key: Bytes::from_static(key),
            value: Bytes::from_static(value),
            headers: Vec::new(),
        }
    }

    #[test]
    fn a_record_is_one_line_of_text() {
        assert_eq!(record_text(&record(b"", b"hello"), None), "3\thello");
        assert_eq!(record_text(&record(b"k", b"a\nb"), Some("=")), "3\tk=a\\nb");
    }

    #[test]
    fn json_keeps_text_as_text_and_other_bytes_as_hex() {
        assert_eq!(
            record_json(&record(b"k", b"v")),
            r#"{"offset":3,"timestamp_us":9,"key":"k","value":"v"}"#
        );
        let mut binary = record(b"", b"\xff\x00");
        binary.headers.push(("h".into(), Bytes::from_static(b"x")));
        assert_eq!(
            record_json(&binary),
            r#"{"offset":3,"timestamp_us":9,"key":"","value":null,"value_hex":"ff00","headers":[{"name":"h","value":"x"}]}"#
        );
    }
}
