//! `strand produce STREAM/TOPIC`: each stdin line is a record's value (split
//! into key and value at `--key-sep`), or `--count N --size B` generates N
//! records of B bytes. Each record goes to `--partition`, or else to the
//! partition its key maps to (see `crate::partitioner`; records without a
//! key fill one partition a batch at a time). Records go through the SDK's
//! batching producer; a
//! collector task awaits their outcomes in send order, sums them up and
//! notes each batch's outcome (acknowledged with its offsets, unknown, or
//! refused), so a partial failure is exact. The run stops at the first batch
//! that fails: nothing more is read or sent, and what the producer still held
//! is reported not written.
//!
//! Bounds: a line longer than [`LINE_BYTES_MAX`] is refused; at most
//! [`DELIVERIES_QUEUED_MAX`] acknowledgements wait for the collector (the
//! producer's own buffer bounds the records in flight).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};
use tokio::sync::mpsc;

use super::args::{ProduceArgs, TopicPath};
use super::errors::CliError;
use super::print_json;
use super::table::bytes_human;
use crate::{Client, ClientError, Delivery, DeliveryReport, Producer, ProducerConfig};

/// Longest stdin line taken as one record (the server's default frame
/// limit is 8 MiB and a record travels in one batch).
pub(crate) const LINE_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Acknowledgements waiting for the collector; `send` waits beyond it.
const DELIVERIES_QUEUED_MAX: usize = 65_536;

/// Batch outcomes listed at most in `--json` output; past it only the
/// counts go on (and `batches_omitted` says how many were left out).
pub(crate) const BATCH_REPORTS_MAX: usize = 1_000_000;

/// What a produce run did, as printed.
#[derive(Debug, Default, Serialize)]
pub(crate) struct ProduceSummary {
    stream: String,
    topic: String,
    /// The partition asked for (`None`: by key).
    partition: Option<u32>,
    /// Per partition written to: the first and last offset acknowledged.
    partitions: BTreeMap<u32, OffsetRange>,
    /// Records acknowledged.
    records: u64,
    /// Records not acknowledged: `unknown` plus `refused`.
    failed: u64,
    /// Records whose batch may or may not have been written.
    unknown: u64,
    /// Records whose batch was not written (refused, or never sent).
    refused: u64,
    /// Key and value bytes of the acknowledged records.
    bytes: u64,
    first_offset: Option<u64>,
    last_offset: Option<u64>,
    elapsed_ms: u64,
    records_per_second: u64,
    /// Every batch (one produce request) in send order, with its outcome.
    batches: Vec<BatchOutcome>,
    /// Batches past [`BATCH_REPORTS_MAX`], counted but not listed.
    batches_omitted: u64,
    /// The run stops at the first batch that fails: the index of the first
    /// input record it did not read or send, if it stopped before the end.
    stopped_before_record: Option<u64>,
    /// Records seen so far (the next record's index).
    #[serde(skip)]
    next_record: u64,
    #[serde(skip)]
    first_error: Option<ClientError>,
}

/// The offsets acknowledged in one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct OffsetRange {
    first_offset: u64,
    last_offset: u64,
}

/// One batch's outcome: which input records it carried (0-based, in the
/// order read: line `first_record + 1` of stdin is its first) and what
/// became of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct BatchOutcome {
    /// The batch's number in the producer (ascending in send order).
    batch: Option<u64>,
    /// The partition it went to.
    partition: u32,
    first_record: u64,
    last_record: u64,
    /// `acknowledged`, `unknown` (may or may not be written: read back) or
    /// `refused` (not written).
    outcome: &'static str,
    /// Where the batch's records landed, when acknowledged.
    first_offset: Option<u64>,
    last_offset: Option<u64>,
    /// Why not, when not acknowledged.
    error: Option<String>,
}

/// The name of what became of a record that `offset` describes.
fn outcome_name(offset: &Result<u64, ClientError>) -> &'static str {
    match offset {
        Ok(_) => "acknowledged",
        Err(error) if error.is_outcome_unknown() || *error == ClientError::Closed => "unknown",
        Err(_) => "refused",
    }
}

impl ProduceSummary {
    fn record(&mut self, report: DeliveryReport, bytes: u64, partition: u32) {
        let index = self.next_record;
        self.next_record += 1;
        self.note_batch(index, &report, partition);
        match report.offset {
            Ok(offset) => {
                self.records += 1;
                self.bytes += bytes;
                self.first_offset =
                    Some(self.first_offset.map_or(offset, |first| first.min(offset)));
                self.last_offset = Some(self.last_offset.map_or(offset, |last| last.max(offset)));
                let range = self.partitions.entry(partition).or_insert(OffsetRange {
                    first_offset: offset,
                    last_offset: offset,
                });
                range.first_offset = range.first_offset.min(offset);
                range.last_offset = range.last_offset.max(offset);
            }
            Err(error) => {
                self.failed += 1;
                if outcome_name(&Err(error.clone())) == "unknown" {
                    self.unknown += 1;
                } else {
                    self.refused += 1;
                }
                self.first_error.get_or_insert(error);
            }
        }
    }

    /// Extends the last batch's entry with record `index`, or starts the
    /// next batch's.
    fn note_batch(&mut self, index: u64, report: &DeliveryReport, partition: u32) {
        let outcome = outcome_name(&report.offset);
        let offset = report.offset.as_ref().ok().copied();
        if let Some(last) = self.batches.last_mut()
            && last.batch == report.batch
            && report.batch.is_some()
            && last.outcome == outcome
        {
            last.last_record = index;
            last.last_offset = offset.or(last.last_offset);
            return;
        }
        if self.batches.len() >= BATCH_REPORTS_MAX {
            self.batches_omitted += 1;
            return;
        }
        self.batches.push(BatchOutcome {
            batch: report.batch,
            partition,
            first_record: index,
            last_record: index,
            outcome,
            first_offset: offset,
            last_offset: offset,
            error: report.offset.as_ref().err().map(ToString::to_string),
        });
    }

    fn finish(&mut self, elapsed: Duration) {
        self.elapsed_ms = elapsed.as_millis() as u64;
        let seconds = elapsed.as_secs_f64();
        if seconds > 0.0 {
            self.records_per_second = (self.records as f64 / seconds) as u64;
        }
    }

    /// The human summary line.
    pub(crate) fn text(&self) -> String {
        let offsets = match (self.first_offset, self.last_offset) {
            (Some(first), Some(last)) => format!("offsets {first}..={last}"),
            _ => "no offsets".to_owned(),
        };
        let only = match (self.partition, self.partitions.len()) {
            (Some(partition), _) => Some(partition),
            (None, 1) => self.partitions.keys().next().copied(),
            (None, _) => None,
        };
        let whereto = match only {
            Some(partition) => format!("partition {partition}: {offsets}"),
            None if self.partitions.is_empty() => format!("by key: {offsets}"),
            None => {
                let ranges: Vec<String> = self
                    .partitions
                    .iter()
                    .map(|(partition, range)| {
                        format!(
                            "partition {partition} offsets {}..={}",
                            range.first_offset, range.last_offset
                        )
                    })
                    .collect();
                format!("by key: {}", ranges.join(", "))
            }
        };
        let mut text = format!(
            "produced {} record(s) ({}) to {}/{} {whereto} in {} ms ({} records/s)",
            self.records,
            bytes_human(self.bytes),
            self.stream,
            self.topic,
            self.elapsed_ms,
            self.records_per_second
        );
        if self.unknown > 0 {
            text.push_str(&format!(
                "; {} record(s) OUTCOME UNKNOWN (may or may not be written: read back; \
                 --json lists every batch)",
                self.unknown
            ));
        }
        if self.refused > 0 {
            text.push_str(&format!("; {} record(s) NOT WRITTEN", self.refused));
        }
        if let Some(record) = self.stopped_before_record {
            text.push_str(&format!(
                "; stopped at the first failure: input from record {record} (0-based) on was \
                 not sent"
            ));
        }
        text.push('\n');
        text
    }
}

/// Runs `strand produce`.
pub(crate) async fn run(
    client: &Client,
    args: ProduceArgs,
    stdin: impl AsyncBufRead + Unpin,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let path = args.topic.clone();
    let doing = match args.partition {
        Some(partition) => format!("produce to {path} partition {partition}"),
        None => format!("produce to {path}"),
    };
    let producer = open_producer(client, &args, &doing).await?;
    let started = Instant::now();
    let (deliveries, queued) = mpsc::channel(DELIVERIES_QUEUED_MAX);
    let failed = Arc::new(AtomicBool::new(false));
    let collector = tokio::spawn(collect(
        queued,
        summary_for(&path, args.partition),
        Arc::clone(&failed),
    ));
    let mut sink = Sink {
        deliveries,
        failed,
        sent: 0,
    };
    let sent = match args.count {
        Some(count) => send_generated(&producer, &args, count, &mut sink).await,
        None => send_lines(&producer, &args, stdin, &mut sink).await,
    };
    // Whatever was sent is counted, even when input failed. After a failed
    // batch nothing more goes out: what the producer still holds fails as
    // not sent, so the run ends once the batches in flight are answered.
    let stopped = sent
        .as_ref()
        .is_ok_and(|finished| *finished == Finished::Stopped);
    let closed = if stopped {
        producer.abort().await
    } else {
        producer.close().await
    };
    let Sink {
        deliveries,
        sent: records_sent,
        ..
    } = sink;
    drop(deliveries);
    let mut summary = collector
        .await
        .map_err(|_| CliError::client(&doing, ClientError::Closed))?;
    if stopped {
        summary.stopped_before_record = Some(records_sent);
    }
    summary.finish(started.elapsed());
    if json {
        print_json(out, &summary)?;
    } else {
        write!(out, "{}", summary.text())?;
    }
    sent.map(drop)?;
    closed.map_err(|error| CliError::client(&doing, error))?;
    first_failure(summary, &doing)
}

/// Checks the arguments the parser cannot, looks the topic (and the
/// partition, if one is named) up, and makes the producer.
async fn open_producer(
    client: &Client,
    args: &ProduceArgs,
    doing: &str,
) -> Result<Producer, CliError> {
    let path = &args.topic;
    if args.key_sep.as_deref() == Some("") {
        return Err(CliError::Usage("--key-sep must not be empty".to_owned()));
    }
    let info = client
        .topic(&path.stream, &path.topic)
        .await
        .map_err(|error| CliError::client(doing, error))?;
    if let Some(partition) = args.partition {
        crate::client::partition_group_of(&info, partition)
            .map_err(|error| CliError::client(doing, error))?;
    }
    client
        .producer(&path.stream, &path.topic, ProducerConfig::default())
        .await
        .map_err(|error| CliError::client(doing, error))
}

/// The run's outcome once its summary is printed: an error naming the
/// first failed record's cause when any failed.
fn first_failure(mut summary: ProduceSummary, doing: &str) -> Result<(), CliError> {
    match summary.first_error.take() {
        Some(error) => Err(CliError::client(
            format!("{doing}: {} record(s) failed; the first", summary.failed),
            error,
        )),
        None => Ok(()),
    }
}

fn summary_for(path: &TopicPath, partition: Option<u32>) -> ProduceSummary {
    ProduceSummary {
        stream: path.stream.clone(),
        topic: path.topic.clone(),
        partition,
        ..ProduceSummary::default()
    }
}

/// Awaits each record's offset in send order; sets `failed` at the first
/// record that was not acknowledged.
async fn collect(
    mut queued: mpsc::Receiver<(Delivery, u64, u32)>,
    mut summary: ProduceSummary,
    failed: Arc<AtomicBool>,
) -> ProduceSummary {
    while let Some((delivery, bytes, partition)) = queued.recv().await {
        let report = delivery.report().await;
        if report.offset.is_err() {
            failed.store(true, Ordering::SeqCst);
        }
        summary.record(report, bytes, partition);
    }
    summary
}

/// Where sent records' deliveries go, and whether one has failed.
struct Sink {
    /// Each record's delivery, its key and value bytes, and its partition.
    deliveries: mpsc::Sender<(Delivery, u64, u32)>,
    failed: Arc<AtomicBool>,
    /// Records handed to the producer so far.
    sent: u64,
}

/// How a send loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finished {
    /// Every input record was sent.
    Done,
    /// A batch failed: the rest of the input was not sent.
    Stopped,
}

/// Hands one record to the producer (to `partition`, or by its key),
/// unless a batch has failed already (`Stopped`: the record is not sent).
async fn send(
    producer: &crate::Producer,
    partition: Option<u32>,
    (key, value): (Bytes, Bytes),
    headers: &[(String, Bytes)],
    sink: &mut Sink,
) -> Result<Finished, CliError> {
    if sink.failed.load(Ordering::SeqCst) {
        return Ok(Finished::Stopped);
    }
    let bytes = (key.len() + value.len()) as u64;
    let partition = partition.unwrap_or_else(|| producer.partition_of(&key));
    let mut record = crate::NewRecord::new(key, value);
    record.headers = headers.to_vec();
    let delivery = producer
        .send_record(partition, record)
        .await
        .map_err(|error| CliError::client("produce", error))?;
    sink.sent += 1;
    sink.deliveries
        .send((delivery, bytes, partition))
        .await
        .map_err(|_| CliError::client("produce", ClientError::Closed))?;
    Ok(Finished::Done)
}

async fn send_lines(
    producer: &crate::Producer,
    args: &ProduceArgs,
    mut stdin: impl AsyncBufRead + Unpin,
    sink: &mut Sink,
) -> Result<Finished, CliError> {
    let mut line = Vec::new();
    let mut line_number = 0u64;
    let headers = record_headers(args);
    loop {
        line.clear();
        let limit = LINE_BYTES_MAX as u64 + 1;
        let read = (&mut stdin)
            .take(limit)
            .read_until(b'\n', &mut line)
            .await
            .map_err(|error| CliError::Io {
                doing: "reading stdin",
                error,
            })?;
        if read == 0 {
            return Ok(Finished::Done);
        }
        line_number += 1;
        let record = split_line(&line, args.key_sep.as_deref()).ok_or_else(|| {
            CliError::Usage(format!(
                "stdin line {line_number} is longer than {LINE_BYTES_MAX} bytes; \
                 nothing after line {} was produced",
                line_number - 1
            ))
        })?;
        if send(producer, args.partition, record, &headers, sink).await? == Finished::Stopped {
            return Ok(Finished::Stopped);
        }
    }
}

/// The headers `--header` gives every record.
fn record_headers(args: &ProduceArgs) -> Vec<(String, Bytes)> {
    args.headers
        .iter()
        .map(|(name, value)| (name.clone(), Bytes::from(value.clone())))
        .collect()
}

/// A stdin line (newline included, if any) as (key, value): the line end is
/// dropped, the rest split at the first `key_sep`. `None`: over the limit.
pub(crate) fn split_line(line: &[u8], key_sep: Option<&str>) -> Option<(Bytes, Bytes)> {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    if body.len() > LINE_BYTES_MAX {
        return None;
    }
    let split = key_sep.and_then(|separator| {
        let separator = separator.as_bytes();
        body.windows(separator.len())
            .position(|window| window == separator)
            .map(|at| (&body[..at], &body[at + separator.len()..]))
    });
    let (key, value) = split.unwrap_or((&[][..], body));
    Some((Bytes::copy_from_slice(key), Bytes::copy_from_slice(value)))
}

async fn send_generated(
    producer: &crate::Producer,
    args: &ProduceArgs,
    count: u64,
    sink: &mut Sink,
) -> Result<Finished, CliError> {
    let headers = record_headers(args);
    for index in 0..count {
        let value = generated_value(index, args.size);
        let record = (Bytes::new(), value);
        if send(producer, args.partition, record, &headers, sink).await? == Finished::Stopped {
            return Ok(Finished::Stopped);
        }
    }
    Ok(Finished::Done)
}

/// Record `index`'s generated value: `record-<index> ` then filler
/// letters, cut to exactly `size` bytes.
pub(crate) fn generated_value(index: u64, size: usize) -> Bytes {
    let mut value = format!("record-{index} ").into_bytes();
    let filler = b"abcdefghijklmnopqrstuvwxyz";
    while value.len() < size {
        value.push(filler[value.len() % filler.len()]);
    }
    value.truncate(size);
    Bytes::from(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_lose_their_line_end_and_split_at_the_first_separator() {
        let split = |line: &[u8], sep| split_line(line, sep).expect("under the limit");
        assert_eq!(
            split(b"hello\n", None),
            (Bytes::new(), Bytes::from("hello"))
        );
        assert_eq!(
            split(b"hello\r\n", None),
            (Bytes::new(), Bytes::from("hello"))
        );
        assert_eq!(split(b"last", None), (Bytes::new(), Bytes::from("last")));
        assert_eq!(
            split(b"k1=v=1\n", Some("=")),
            (Bytes::from("k1"), Bytes::from("v=1"))
        );
        assert_eq!(
            split(b"no separator\n", Some("::")),
            (Bytes::new(), Bytes::from("no separator"))
        );
        assert_eq!(split(b"\n", None), (Bytes::new(), Bytes::new()));
        assert!(split_line(&vec![b'x'; LINE_BYTES_MAX + 1], None).is_none());
    }

    #[test]
    fn generated_values_have_the_size_asked_for() {
        assert_eq!(generated_value(7, 3), Bytes::from("rec"));
        assert_eq!(generated_value(7, 12).len(), 12);
        assert!(generated_value(12, 40).starts_with(b"record-12 "));
        assert!(generated_value(0, 0).is_empty());
    }

    #[test]
    fn the_summary_counts_offsets_and_failures_per_batch() {
        let mut summary = summary_for(
            &TopicPath {
                stream: "s".into(),
                topic: "t".into(),
            },
            Some(1),
        );
        let report = |batch, offset| DeliveryReport {
            batch: Some(batch),
            offset,
        };
        let unknown = ClientError::OutcomeUnknown {
            operation: strand_wire::Operation::Produce,
            reason: "no answer".into(),
        };
        let refused = ClientError::Timeout {
            operation: strand_wire::Operation::Produce,
            deadline_ms: 10,
        };
        summary.record(report(0, Ok(4)), 10, 1);
        summary.record(report(0, Ok(5)), 10, 1);
        summary.record(report(1, Err(unknown.clone())), 10, 1);
        summary.record(report(1, Err(unknown)), 10, 1);
        summary.record(report(2, Err(refused)), 10, 1);
        summary.finish(Duration::from_millis(500));
        assert_eq!(
            summary.text(),
            "produced 2 record(s) (20 B) to s/t partition 1: offsets 4..=5 in 500 ms \
             (4 records/s); 2 record(s) OUTCOME UNKNOWN (may or may not be written: read back; \
             --json lists every batch); 1 record(s) NOT WRITTEN\n"
        );
        let outcomes: Vec<_> = summary
            .batches
            .iter()
            .map(|batch| {
                (
                    batch.batch,
                    batch.first_record,
                    batch.last_record,
                    batch.outcome,
                    batch.first_offset,
                    batch.last_offset,
                )
            })
            .collect();
        assert_eq!(
            outcomes,
            vec![
                (Some(0), 0, 1, "acknowledged", Some(4), Some(5)),
                (Some(1), 2, 3, "unknown", None, None),
                (Some(2), 4, 4, "refused", None, None),
            ]
        );
        assert!(
            summary.batches[1]
                .error
                .as_deref()
                .unwrap_or("")
                .contains("no answer")
        );
        assert!(matches!(
            summary.first_error,
            Some(ClientError::OutcomeUnknown { .. })
        ));
    }

    #[test]
    fn a_run_by_key_lists_the_offsets_of_each_partition() {
        let path = TopicPath {
            stream: "s".into(),
            topic: "t".into(),
        };
        let report = |batch, offset| DeliveryReport {
            batch: Some(batch),
            offset: Ok(offset),
        };
        let mut summary = summary_for(&path, None);
        summary.record(report(0, 7), 3, 2);
        summary.record(report(1, 0), 3, 0);
        summary.record(report(0, 8), 3, 2);
        summary.finish(Duration::from_millis(1000));
        assert_eq!(
            summary.text(),
            "produced 3 record(s) (9 B) to s/t by key: partition 0 offsets 0..=0, partition 2 \
             offsets 7..=8 in 1000 ms (3 records/s)\n"
        );
        assert_eq!(summary.batches.len(), 3, "runs of one batch each");
        assert_eq!(summary.batches[1].partition, 0);
        let mut one = summary_for(&path, None);
        one.record(report(0, 4), 3, 1);
        one.finish(Duration::from_millis(1000));
        assert!(
            one.text().contains("to s/t partition 1: offsets 4..=4"),
            "{}",
            one.text()
        );
    }
}
