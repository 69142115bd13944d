//! The load: producers that send keyed records through the SDK's batching
//! [`Producer`](strand_client::Producer) and time each record from `send` to
//! its acknowledgement, and consumers that tail the partitions.
//!
//! Each bench producer owns one SDK producer, and one collector task per
//! partition that awaits that partition's deliveries in send order (the SDK
//! acknowledges a partition's records in order, so awaiting in order does not
//! delay a measurement). Collectors keep their own histograms and timelines;
//! they are merged once the load is over, so the hot path shares nothing but
//! the live counters of the progress bar.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use hdrhistogram::Histogram;
use strand_client::{
    Client, ClientError, ConsumedRecord, ConsumerConfig, Delivery, Producer, ProducerConfig,
    StartFrom,
};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::error::BenchError;
use crate::keys::{KEY_SIZE, RecordKey, Spread};
use crate::latency;
use crate::timeline::Timeline;

/// Largest batch in bytes the bench asks the SDK for (the server's frame
/// limit is 8 MiB).
pub const BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Bytes a fetch (consumer or read-back) asks for.
pub const FETCH_BYTES_MAX: u32 = 4 * 1024 * 1024;

/// How long consumers keep reading after the producers stop, to catch up.
pub const CONSUMER_DRAIN: Duration = Duration::from_secs(10);

/// How long a consumer's fetch waits for records when there are none.
pub const CONSUMER_WAIT_MS: u32 = 200;

/// How long a consumer task pauses after a failed poll before the next,
/// so a cluster that refuses does not spin it.
pub const POLL_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// When the producers stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// After this long.
    After(Duration),
    /// After this many records in all.
    Messages(u64),
}

/// The shape of the load.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    /// The stream of the benched topic.
    pub stream: String,
    /// The benched topic.
    pub topic: String,
    /// Bench producers (each with its own SDK producer).
    pub producers: u32,
    /// Partitions of the topic.
    pub partitions: u32,
    /// Value bytes per record (the key adds 16).
    pub message_size: usize,
    /// Records per batch.
    pub batch: u32,
    /// Batches in flight per partition and producer.
    pub in_flight: usize,
    /// How long a partly filled batch waits for more records.
    pub linger_ms: u64,
    /// When to stop.
    pub stop: Stop,
    /// Records per second in all (`None`: as fast as acks allow).
    pub rate: Option<f64>,
    /// How a producer's consecutive records are spread over the partitions.
    pub spread: Spread,
}

impl Load {
    /// Consecutive records of a producer that go to one partition.
    pub fn run_length(&self) -> u64 {
        self.spread.run_length(self.batch)
    }
}

/// Counters the progress bar reads while the load runs.
#[derive(Debug, Default)]
pub struct Live {
    /// Records acknowledged.
    pub acknowledged: AtomicU64,
    /// Records whose produce failed.
    pub failed: AtomicU64,
    /// Records consumers read.
    pub consumed: AtomicU64,
}

/// What one bench producer saw.
#[derive(Debug)]
pub struct ProducerOutcome {
    /// Its id.
    pub producer: u32,
    /// `(sequence, offset)` of each acknowledged record.
    pub acknowledged: Vec<(u64, u64)>,
    /// Sequences whose produce failed.
    pub failed: Vec<u64>,
    /// Produce-ack latency of every acknowledged record.
    pub latency: Histogram<u64>,
    /// Per-second counts.
    pub timeline: Timeline,
    /// Milliseconds since the start at which acks of the benched partition
    /// arrived (one entry per distinct millisecond, ascending per collector).
    pub benched_ack_ms: Vec<u64>,
    /// The last ack, in milliseconds since the start.
    pub last_ack_ms: u64,
    /// The first failure, readable.
    pub first_error: Option<String>,
}

/// What one consumer task read.
#[derive(Debug)]
pub struct ConsumerOutcome {
    /// Records read.
    pub records: u64,
    /// Value bytes read.
    pub bytes: u64,
    /// Produce-to-read latency (record timestamp to poll return).
    pub end_to_end: Histogram<u64>,
    /// When the last record was read, in milliseconds since the start.
    pub last_read_ms: u64,
    /// The first failure, readable.
    pub first_error: Option<String>,
}

impl ConsumerOutcome {
    /// Nothing read yet: where every consumer task (tailing or group
    /// member) starts.
    pub fn empty() -> ConsumerOutcome {
        ConsumerOutcome {
            records: 0,
            bytes: 0,
            end_to_end: latency::histogram(),
            last_read_ms: 0,
            first_error: None,
        }
    }

    /// Counts `records`, which a poll returned at `now_us` (microseconds
    /// since the Unix epoch, the clock of their timestamps): one place for
    /// what every consumer task measures, so tailing consumers and group
    /// members report alike.
    pub fn count_read(
        &mut self,
        records: &[ConsumedRecord],
        now_us: u64,
        start: Instant,
        live: &Live,
    ) {
        for record in records {
            self.records += 1;
            self.bytes += record.value.len() as u64;
            latency::record(
                &mut self.end_to_end,
                now_us.saturating_sub(record.timestamp_us),
            );
        }
        if !records.is_empty() {
            self.last_read_ms = start.elapsed().as_millis() as u64;
        }
        live.consumed
            .fetch_add(records.len() as u64, Ordering::Relaxed);
    }
}

/// When a consumer task stops after the producers do: once it has caught
/// up, or [`CONSUMER_DRAIN`] after it first saw them stop, whichever comes
/// first (shared by tailing consumers and group members; each judges
/// "caught up" its own way).
#[derive(Debug, Default)]
pub struct Drain {
    /// When the drain gives up; `None` while the producers run.
    until: Option<Instant>,
}

impl Drain {
    /// Whether the producers have stopped (`done`); the drain's time starts
    /// the first time this says so.
    pub fn started(&mut self, done: &AtomicBool) -> bool {
        if self.until.is_none() && done.load(Ordering::Relaxed) {
            self.until = Some(Instant::now() + CONSUMER_DRAIN);
        }
        self.until.is_some()
    }

    /// Whether the drain has run out of time.
    pub fn expired(&self) -> bool {
        self.until.is_some_and(|until| Instant::now() >= until)
    }
}

/// A record sent and not yet resolved.
struct Pending {
    sequence: u64,
    sent_at: Instant,
    delivery: Delivery,
}

/// What one collector (one partition of one producer) saw.
struct Lane {
    acknowledged: Vec<(u64, u64)>,
    failed: Vec<u64>,
    latency: Histogram<u64>,
    timeline: Timeline,
    ack_ms: Vec<u64>,
    last_ack_ms: u64,
    first_error: Option<String>,
}

/// How many records producer `producer` sends under `Stop::Messages(total)`.
pub fn share_of(total: u64, producers: u32, producer: u32) -> u64 {
    assert!(producer < producers);
    let producers = u64::from(producers);
    total / producers + u64::from(u64::from(producer) < total % producers)
}

/// The SDK producer settings for `load`.
pub fn producer_config(load: &Load) -> ProducerConfig {
    let record_bytes = KEY_SIZE + load.message_size + strand_client_record_overhead();
    let batch_bytes = (load.batch as usize * record_bytes + 64).min(BATCH_BYTES_MAX);
    ProducerConfig {
        batch_records_max: load.batch,
        batch_bytes_max: batch_bytes,
        linger_ms: load.linger_ms,
        in_flight_max: load.in_flight,
        buffer_records_max: buffer_records_max(load, record_bytes),
        buffer_bytes_max: PRODUCER_BUFFER_BYTES_MAX.max(load.batch as usize * record_bytes),
    }
}

/// Bytes of records one bench producer holds at most, filling or in flight,
/// over all its partitions (a Kafka producer's buffer is 32 MiB by default):
/// without a bound, 300 partitions of 1,000-record batches of 1 KB let each
/// producer buffer 2.7 GB, and the bench process, not the cluster, set the
/// pace.
pub const PRODUCER_BUFFER_BYTES_MAX: usize = 64 * 1024 * 1024;

/// One batch filling while `in_flight` are out per partition (the latency
/// measured from `send` then includes no deeper queue), within
/// [`PRODUCER_BUFFER_BYTES_MAX`], but never less than one partition's
/// whole pipeline.
fn buffer_records_max(load: &Load, record_bytes: usize) -> usize {
    let pipeline = load.batch as usize * (load.in_flight + 1);
    let within_bytes = (PRODUCER_BUFFER_BYTES_MAX / record_bytes.max(1)).max(pipeline);
    (pipeline * load.partitions as usize).min(within_bytes)
}

/// Bytes a record adds to a batch besides its key and value.
fn strand_client_record_overhead() -> usize {
    strand_client::NewRecord::new(Bytes::new(), Bytes::new()).encoded_size()
}

/// Runs bench producer `producer` until `load.stop`.
pub async fn produce(
    client: Client,
    load: Arc<Load>,
    producer: u32,
    benched_partition: u32,
    start: Instant,
    live: Arc<Live>,
) -> Result<ProducerOutcome, BenchError> {
    let config = producer_config(&load);
    let buffer = config.buffer_records_max;
    let sdk_producer = client
        .producer(&load.stream, &load.topic, config)
        .await
        .map_err(|error| BenchError::client(format!("producer {producer}"), error))?;
    let mut senders = Vec::new();
    let mut collectors = Vec::new();
    for partition in 0..load.partitions {
        let (sender, receiver) = mpsc::channel(buffer + 1);
        let benched = partition == benched_partition;
        let task = collect(
            receiver,
            start,
            Arc::clone(&live),
            benched,
            load.message_size,
        );
        senders.push(sender);
        collectors.push(tokio::spawn(task));
    }
    let mut send_error = send_all(&sdk_producer, &load, producer, start, &senders).await;
    drop(senders);
    if let Err(error) = sdk_producer.close().await {
        send_error.get_or_insert(format!("producer {producer}: close: {error}"));
    }
    let mut outcome = ProducerOutcome {
        producer,
        acknowledged: Vec::new(),
        failed: Vec::new(),
        latency: latency::histogram(),
        timeline: Timeline::default(),
        benched_ack_ms: Vec::new(),
        last_ack_ms: 0,
        first_error: send_error,
    };
    for collector in collectors {
        let lane = collector
            .await
            .map_err(|error| BenchError::Cluster(format!("collector task: {error}")))?;
        merge_lane(&mut outcome, lane);
    }
    Ok(outcome)
}

/// Sends this producer's records until the stop, handing each delivery
/// to its partition's collector; the first failure to send, if any.
async fn send_all(
    sdk_producer: &Producer,
    load: &Load,
    producer: u32,
    start: Instant,
    collectors: &[mpsc::Sender<Pending>],
) -> Option<String> {
    let payload = Bytes::from(vec![b'x'; load.message_size]);
    let (quota, stop_at) = match load.stop {
        Stop::Messages(total) => (share_of(total, load.producers, producer), None),
        Stop::After(duration) => (u64::MAX, Some(start + duration)),
    };
    let rate = load.rate.map(|rate| rate / f64::from(load.producers));
    for sequence in 0..quota {
        if stop_at.is_some_and(|stop_at| Instant::now() >= stop_at) {
            return None;
        }
        if let Some(rate) = rate {
            tokio::time::sleep_until(start + Duration::from_secs_f64(sequence as f64 / rate)).await;
        }
        let key = RecordKey { producer, sequence };
        let partition = key.partition(load.partitions, load.run_length());
        let sent_at = Instant::now();
        let key_bytes = Bytes::copy_from_slice(&key.encode());
        let delivery = match sdk_producer
            .send(partition, key_bytes, payload.clone())
            .await
        {
            Ok(delivery) => delivery,
            Err(error) => return Some(format!("producer {producer}: send: {error}")),
        };
        let pending = Pending {
            sequence,
            sent_at,
            delivery,
        };
        if collectors[partition as usize].send(pending).await.is_err() {
            return Some(format!(
                "producer {producer}: collector {partition} stopped"
            ));
        }
    }
    None
}

fn merge_lane(outcome: &mut ProducerOutcome, lane: Lane) {
    outcome.acknowledged.extend(lane.acknowledged);
    outcome.failed.extend(lane.failed);
    outcome
        .latency
        .add(&lane.latency)
        .expect("latency histograms share their bounds");
    outcome.timeline.merge(&lane.timeline);
    outcome.benched_ack_ms.extend(lane.ack_ms);
    outcome.last_ack_ms = outcome.last_ack_ms.max(lane.last_ack_ms);
    if outcome.first_error.is_none() {
        outcome.first_error = lane.first_error;
    }
}

/// Awaits one partition's deliveries in send order and measures them.
async fn collect(
    mut receiver: mpsc::Receiver<Pending>,
    start: Instant,
    live: Arc<Live>,
    record_ack_times: bool,
    message_size: usize,
) -> Lane {
    let mut lane = Lane {
        acknowledged: Vec::new(),
        failed: Vec::new(),
        latency: latency::histogram(),
        timeline: Timeline::default(),
        ack_ms: Vec::new(),
        last_ack_ms: 0,
        first_error: None,
    };
    while let Some(pending) = receiver.recv().await {
        let outcome = pending.delivery.await;
        let now = Instant::now();
        match outcome {
            Ok(offset) => {
                let latency_us = now.duration_since(pending.sent_at).as_micros() as u64;
                let elapsed = now.duration_since(start);
                let elapsed_ms = elapsed.as_millis() as u64;
                latency::record(&mut lane.latency, latency_us);
                lane.timeline
                    .record(elapsed, message_size as u64, latency_us);
                lane.acknowledged.push((pending.sequence, offset));
                lane.last_ack_ms = elapsed_ms;
                if record_ack_times && lane.ack_ms.last() != Some(&elapsed_ms) {
                    lane.ack_ms.push(elapsed_ms);
                }
                live.acknowledged.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                lane.failed.push(pending.sequence);
                lane.first_error
                    .get_or_insert_with(|| format!("sequence {}: {error}", pending.sequence));
                live.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    lane
}

/// Tails `partition` from its start until `done` is set and the reader has
/// caught up (or [`CONSUMER_DRAIN`] has passed since).
pub async fn consume(
    client: Client,
    load: Arc<Load>,
    partition: u32,
    start: Instant,
    live: Arc<Live>,
    done: Arc<AtomicBool>,
) -> ConsumerOutcome {
    let mut outcome = ConsumerOutcome::empty();
    let config = ConsumerConfig {
        name: None,
        start_from: StartFrom::Offset(0),
        max_bytes: FETCH_BYTES_MAX,
        wait_ms: CONSUMER_WAIT_MS,
    };
    let mut consumer = match client
        .consumer(&load.stream, &load.topic, partition, config)
        .await
    {
        Ok(consumer) => consumer,
        Err(error) => {
            outcome.first_error = Some(format!("consumer of partition {partition}: {error}"));
            return outcome;
        }
    };
    let mut drain = Drain::default();
    loop {
        if drain.started(&done) && (consumer.lag() == Some(0) || drain.expired()) {
            return outcome;
        }
        match consumer.poll().await {
            Ok(records) => outcome.count_read(&records, now_us(), start, &live),
            Err(ClientError::OffsetOutOfRange {
                log_start_offset, ..
            }) if log_start_offset > consumer.position() => {
                // Retention dropped records this consumer had not read yet:
                // go on from the oldest retained one, and say so.
                outcome.first_error.get_or_insert_with(|| {
                    format!(
                        "partition {partition}: fell behind retention at offset {}, went on \
                         from {log_start_offset}",
                        consumer.position()
                    )
                });
                consumer.seek(log_start_offset);
            }
            Err(error) => {
                outcome
                    .first_error
                    .get_or_insert_with(|| format!("partition {partition}: poll: {error}"));
                tokio::time::sleep(POLL_RETRY_PAUSE).await;
            }
        }
    }
}

/// Microseconds since the Unix epoch (the clock record timestamps use).
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_micros() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_count_is_shared_out_exactly() {
        let shares: Vec<u64> = (0..3).map(|producer| share_of(10, 3, producer)).collect();
        assert_eq!(shares, vec![4, 3, 3]);
        assert_eq!(shares.iter().sum::<u64>(), 10);
    }

    #[test]
    fn a_consumer_counts_records_bytes_and_latency_of_what_it_read() {
        let start = Instant::now();
        let live = Live::default();
        let record = |timestamp_us| ConsumedRecord {
            offset: 0,
            timestamp_us,
            key: Bytes::new(),
            value: Bytes::from_static(b"12345"),
            headers: Vec::new(),
        };
        let mut outcome = ConsumerOutcome::empty();
        outcome.count_read(&[record(1_000), record(4_000)], 5_000, start, &live);
        outcome.count_read(&[], 9_000, start, &live);
        assert_eq!((outcome.records, outcome.bytes), (2, 10));
        assert_eq!(live.consumed.load(Ordering::Relaxed), 2);
        let summary = latency::summarize(&outcome.end_to_end);
        assert_eq!(summary.count, 2);
        assert!(summary.p50_us.abs_diff(1_000) <= 2, "{summary:?}");
        assert!(summary.max_us.abs_diff(4_000) <= 4, "{summary:?}");
    }

    #[test]
    fn a_drain_starts_when_the_producers_stop_and_not_before() {
        let done = AtomicBool::new(false);
        let mut drain = Drain::default();
        assert!(!drain.started(&done));
        assert!(!drain.expired(), "no time runs out while producers run");
        done.store(true, Ordering::Relaxed);
        assert!(drain.started(&done));
        assert!(!drain.expired(), "CONSUMER_DRAIN is ahead");
        done.store(false, Ordering::Relaxed);
        assert!(drain.started(&done), "once started, it stays started");
    }

    #[test]
    fn batches_hold_the_records_asked_for() {
        let load = Load {
            stream: "s".to_owned(),
            topic: "t".to_owned(),
            producers: 1,
            partitions: 2,
            message_size: 1024,
            batch: 100,
            in_flight: 4,
            linger_ms: 1,
            stop: Stop::Messages(1),
            rate: None,
            spread: Spread::Record,
        };
        let config = producer_config(&load);
        assert_eq!(config.batch_records_max, 100);
        assert!(config.batch_bytes_max >= 100 * (1024 + KEY_SIZE));
        assert_eq!(config.buffer_records_max, 100 * 5 * 2);
    }

    /// Many partitions of large batches: the producer's buffer stays within
    /// its byte bound, and still holds one partition's whole pipeline.
    #[test]
    fn a_producer_buffers_a_bounded_number_of_bytes_over_many_partitions() {
        let load = Load {
            stream: "s".to_owned(),
            topic: "t".to_owned(),
            producers: 4,
            partitions: 300,
            message_size: 1000,
            batch: 1000,
            in_flight: 8,
            linger_ms: 2,
            stop: Stop::Messages(1),
            rate: None,
            spread: Spread::Batch,
        };
        let config = producer_config(&load);
        let record_bytes = KEY_SIZE + load.message_size;
        assert!(config.buffer_records_max * record_bytes <= PRODUCER_BUFFER_BYTES_MAX);
        assert!(config.buffer_records_max >= 1000 * 9);
    }
}
