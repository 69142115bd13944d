//! Writing to the scale run's partitions: one record to each partition a
//! killed node led, retried until it is taken (the kill's "writes resume"
//! time), and the throughput phase's load (over one partition, then over
//! every partition) through the SDK's batching producer. Nothing is read back: the bench's exactly-once
//! verification is `strand-bench`'s job; here a retried write that lands
//! twice does no harm.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strand_client::{Client, Delivery, NewRecord, Producer, ProducerConfig};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::create::Layout;
use super::options::ClientApi;
use super::report::ProduceRun;
use crate::error::BenchError;
use crate::keys::Spread;
use crate::load::{BATCH_BYTES_MAX, PRODUCER_BUFFER_BYTES_MAX};
use crate::report::Throughput;

/// Most partitions written at once after a kill; the others wait their turn.
/// Large enough that a node's thousand partitions are all tried at once (a
/// partition waiting for a slot would count the wait as its failover).
pub const RESUME_CONCURRENCY_MAX: usize = 4096;

/// The first pause before a failed write is tried again.
pub const RESUME_BACKOFF_MIN: Duration = Duration::from_millis(20);

/// The longest pause between two attempts (the pause doubles up to it): the
/// resolution of the measured resume times.
pub const RESUME_BACKOFF_MAX: Duration = Duration::from_millis(100);

/// Batches in flight per partition in the throughput phase.
pub const IN_FLIGHT: usize = 8;

/// How long a partly filled batch waits for more records, in ms.
pub const LINGER_MS: u64 = 2;

/// Most records a throughput producer buffers (over all its topics;
/// `send` waits beyond it). Its bytes are bounded too, by
/// [`PRODUCER_BUFFER_BYTES_MAX`] as in `strand-bench`: bounded by count
/// alone, 1,000 partitions of 1 KB records let the four producers hold
/// 900 MB between them, and the cluster then wrote from memory no cache
/// held (over 1,000 partitions: 110k–135k msgs/s against 151k–171k with the
/// byte bound).
pub const BUFFER_RECORDS_MAX: usize = 200_000;

/// How the writes after a kill went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    /// Partitions whose write was acknowledged.
    pub accepted: u64,
    /// Milliseconds from the kill until the last of them was.
    pub last_write_ms: Option<u64>,
    /// Milliseconds from the kill until half of them were.
    pub median_write_ms: Option<u64>,
    /// The first failure seen, readable.
    pub first_error: Option<String>,
}

/// Writes one record to each of `partitions` (of `stream`), at most
/// [`RESUME_CONCURRENCY_MAX`] at once, each retried until it is acknowledged
/// or `deadline` passes.
pub async fn resume_writes(
    client: &Client,
    stream: &str,
    partitions: Vec<(String, u32)>,
    killed_at: Instant,
    deadline: Instant,
) -> Result<Resumed, BenchError> {
    let slots = Arc::new(Semaphore::new(RESUME_CONCURRENCY_MAX));
    let mut tasks = JoinSet::new();
    for (topic, partition) in partitions {
        let slot = Arc::clone(&slots)
            .acquire_owned()
            .await
            .map_err(|_| BenchError::Cluster("the write slots were closed".to_owned()))?;
        let (client, stream) = (client.clone(), stream.to_owned());
        tasks.spawn(async move {
            let _slot = slot;
            write_until_taken(&client, &stream, &topic, partition, deadline).await
        });
    }
    let mut taken_ms = Vec::new();
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        let (taken_at, error) =
            joined.map_err(|error| BenchError::Cluster(format!("a write task failed: {error}")))?;
        if let Some(taken_at) = taken_at {
            taken_ms.push(taken_at.duration_since(killed_at).as_millis() as u64);
        }
        first_error = first_error.or(error);
    }
    taken_ms.sort_unstable();
    Ok(Resumed {
        accepted: taken_ms.len() as u64,
        last_write_ms: taken_ms.last().copied(),
        median_write_ms: taken_ms.get(taken_ms.len() / 2).copied(),
        first_error,
    })
}

/// Produces one small record to `topic`/`partition` until it is
/// acknowledged (when) or `deadline` passes; the first failure.
async fn write_until_taken(
    client: &Client,
    stream: &str,
    topic: &str,
    partition: u32,
    deadline: Instant,
) -> (Option<Instant>, Option<String>) {
    let mut pause = RESUME_BACKOFF_MIN;
    let mut first_error = None;
    loop {
        let record = NewRecord::new(Bytes::from_static(b"kill"), Bytes::from_static(b"resume"));
        match client.produce(stream, topic, partition, vec![record]).await {
            Ok(_) => return (Some(Instant::now()), first_error),
            Err(error) => {
                first_error.get_or_insert_with(|| format!("{topic}/{partition}: {error}"));
            }
        }
        if Instant::now() + pause >= deadline {
            return (None, first_error);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RESUME_BACKOFF_MAX);
    }
}

/// What one producer's collector counted.
#[derive(Debug, Default)]
struct Collected {
    acknowledged: u64,
    failed: u64,
    last_ack: Option<Duration>,
    first_error: Option<String>,
}

/// The shape of one throughput run.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Independent producers, each with its own SDK producers and connection
    /// state; they split the partitions between them (all write the one
    /// partition of a single-partition run).
    pub producers: usize,
    /// How long they produce.
    pub duration: Duration,
    /// Value bytes per record.
    pub message_size: usize,
    /// Records per batch.
    pub batch: u32,
    /// How consecutive records are spread over the partitions.
    pub spread: Spread,
    /// Which client path sends them.
    pub client: ClientApi,
}

/// Produces `load.message_size`-byte values round-robin over `slots`
/// (`(topic index, partition)` of `layout`) for `load.duration`, with
/// `load.producers` producers, in batches of `load.batch`, through the
/// client path `load.client` names.
pub async fn produce_for(
    client: &Client,
    layout: &Layout,
    slots: &[(usize, u32)],
    load: Load,
) -> Result<ProduceRun, BenchError> {
    assert!(load.producers > 0 && !slots.is_empty());
    let start = Instant::now();
    let end = start + load.duration;
    let mut tasks = JoinSet::new();
    for index in 0..load.producers {
        let share = share_of(slots, index, load.producers);
        let value = Bytes::from(vec![b'v'; load.message_size]);
        match load.client {
            ClientApi::Producer => {
                let producers = producers_for(client, layout, &share, load).await?;
                let run_length = load.spread.run_length(load.batch) as usize;
                tasks.spawn(produce_share(
                    producers, share, run_length, value, start, end,
                ));
            }
            ClientApi::Batches => {
                let targets = share
                    .iter()
                    .map(|&(topic, partition)| (layout.topics[topic].topic.clone(), partition))
                    .collect();
                let sender = BatchSender {
                    client: client.clone(),
                    stream: layout.stream.clone(),
                    batch: load.batch,
                    value,
                };
                tasks.spawn(sender.run(targets, load.message_size, start, end));
            }
        }
    }
    let mut total = Collected::default();
    while let Some(joined) = tasks.join_next().await {
        let collected = joined
            .map_err(|error| BenchError::Cluster(format!("a producer task failed: {error}")))?;
        total.acknowledged += collected.acknowledged;
        total.failed += collected.failed;
        total.last_ack = total.last_ack.max(collected.last_ack);
        total.first_error = total.first_error.or(collected.first_error);
    }
    let seconds = total.last_ack.unwrap_or(load.duration).as_secs_f64();
    let bytes = total.acknowledged * load.message_size as u64;
    Ok(ProduceRun {
        partitions: slots.len() as u64,
        produced: Throughput::new(total.acknowledged, bytes, seconds),
        failed: total.failed,
        first_error: total.first_error,
        machine: None,
    })
}

/// Producer `index` of `count`'s slots: every `count`-th, or all of them
/// when there are fewer slots than producers.
fn share_of(slots: &[(usize, u32)], index: usize, count: usize) -> Vec<(usize, u32)> {
    if slots.len() < count {
        return slots.to_vec();
    }
    slots.iter().skip(index).step_by(count).copied().collect()
}

/// One SDK producer per topic that `share` writes, by topic index.
async fn producers_for(
    client: &Client,
    layout: &Layout,
    share: &[(usize, u32)],
    load: Load,
) -> Result<Vec<Option<Producer>>, BenchError> {
    let mut producers: Vec<Option<Producer>> = (0..layout.topics.len()).map(|_| None).collect();
    for (index, topic) in layout.topics.iter().enumerate() {
        let partitions = share.iter().filter(|(of, _)| *of == index).count();
        if partitions == 0 {
            continue;
        }
        let config = producer_config(load.batch, load.message_size, partitions, share.len());
        let producer = client
            .producer(&layout.stream, &topic.topic, config)
            .await
            .map_err(|error| BenchError::client(format!("producer for {}", topic.topic), error))?;
        producers[index] = Some(producer);
    }
    Ok(producers)
}

/// One producer's run: sends over its share until `end`, closes its SDK
/// producers, and counts what they acknowledged.
async fn produce_share(
    producers: Vec<Option<Producer>>,
    share: Vec<(usize, u32)>,
    run_length: usize,
    value: Bytes,
    start: Instant,
    end: Instant,
) -> Collected {
    let (sender, receiver) = mpsc::channel(BUFFER_RECORDS_MAX + 1);
    let collector = tokio::spawn(collect(receiver, start));
    let send_error = send_all(&producers, &sender, &share, run_length, value, end).await;
    drop(sender);
    let mut close_error = None;
    for producer in producers.into_iter().flatten() {
        if let Err(error) = producer.close().await {
            close_error.get_or_insert_with(|| format!("close a producer: {error}"));
        }
    }
    let mut collected = collector.await.unwrap_or_else(|error| Collected {
        first_error: Some(format!("a collector failed: {error}")),
        ..Collected::default()
    });
    collected.first_error = send_error.or(close_error).or(collected.first_error);
    collected
}

/// Every `(topic index, partition)`, partition-major: consecutive records
/// go to different topics and partitions.
pub fn round_robin(layout: &Layout) -> Vec<(usize, u32)> {
    let partitions_max = layout
        .topics
        .iter()
        .map(|topic| topic.groups.len())
        .max()
        .unwrap_or(0);
    let mut slots = Vec::new();
    for partition in 0..partitions_max {
        for (index, topic) in layout.topics.iter().enumerate() {
            if partition < topic.groups.len() {
                slots.push((index, partition as u32));
            }
        }
    }
    slots
}

/// Sends records over `slots`, cycling, `run_length` consecutive records to
/// each, until `end`; the first failure.
async fn send_all(
    producers: &[Option<Producer>],
    deliveries: &mpsc::Sender<Delivery>,
    slots: &[(usize, u32)],
    run_length: usize,
    value: Bytes,
    end: Instant,
) -> Option<String> {
    let order = slots
        .iter()
        .cycle()
        .flat_map(|slot| std::iter::repeat_n(slot, run_length));
    let mut keys = Bytes::new();
    // One timer for the whole run: a timeout per record registered and
    // dropped a timer entry per record, a tenth of the bench's own time.
    let ended = tokio::time::sleep_until(end);
    tokio::pin!(ended);
    for (sequence, &(topic, partition)) in (0_u64..).zip(order) {
        let Some(producer) = &producers[topic] else {
            return Some(format!("no producer for topic {topic}"));
        };
        let at = (sequence % KEYS_PER_BUFFER) as usize * KEY_BYTES;
        if at == 0 {
            keys = key_buffer(sequence);
        }
        let key = keys.slice(at..at + KEY_BYTES);
        // `send` waits for buffer room; the phase ends on time all the same
        // (a send cut off there has sent nothing). The timer is looked at
        // first, without reading the clock: a clock read per record was a
        // twentieth of the bench's own time.
        let sent = tokio::select! {
            biased;
            () = &mut ended => return None,
            sent = producer.send(partition, key, value.clone()) => sent,
        };
        let delivery = match sent {
            Err(error) => return Some(format!("send: {error}")),
            Ok(delivery) => delivery,
        };
        if deliveries.send(delivery).await.is_err() {
            return Some("a collector stopped early".to_owned());
        }
    }
    None // no slots at all
}

/// One producer of the `batches` client path: builds whole batches and
/// sends each with [`Client::produce`], to its partitions in turn, with at
/// most [`IN_FLIGHT`] batches in flight per partition and the records in
/// flight bounded as the SDK producer's buffer is.
struct BatchSender {
    client: Client,
    stream: String,
    batch: u32,
    value: Bytes,
}

impl BatchSender {
    /// Sends to `targets` (topic name, partition) in turn until `end`,
    /// then waits for the batches in flight; counts what was acknowledged.
    async fn run(
        self,
        targets: Vec<(String, u32)>,
        message_size: usize,
        start: Instant,
        end: Instant,
    ) -> Collected {
        assert!(!targets.is_empty());
        let sender = Arc::new(self);
        let per_target: Vec<Arc<Semaphore>> = targets
            .iter()
            .map(|_| Arc::new(Semaphore::new(IN_FLIGHT)))
            .collect();
        let buffer = Arc::new(Semaphore::new(batches_buffered_max(
            sender.batch,
            message_size,
            targets.len(),
        )));
        let ended = tokio::time::sleep_until(end);
        tokio::pin!(ended);
        let mut in_flight = JoinSet::new();
        let mut collected = Collected::default();
        for (index, (topic, partition)) in targets.iter().enumerate().cycle() {
            let slots = async {
                let target = Arc::clone(&per_target[index]).acquire_owned().await;
                let buffered = Arc::clone(&buffer).acquire_owned().await;
                target.ok().zip(buffered.ok())
            };
            let permits = tokio::select! {
                biased;
                () = &mut ended => break,
                permits = slots => permits,
            };
            let Some(permits) = permits else { break };
            let this = Arc::clone(&sender);
            let topic = topic.clone();
            let partition = *partition;
            in_flight.spawn(async move {
                let _permits = permits;
                let outcome = this.send(&topic, partition).await;
                (outcome, start.elapsed())
            });
            while let Some(done) = in_flight.try_join_next() {
                tally(&mut collected, done, sender.batch);
            }
        }
        while let Some(done) = in_flight.join_next().await {
            tally(&mut collected, done, sender.batch);
        }
        collected
    }

    /// One batch of `batch` records to `topic`/`partition`.
    async fn send(&self, topic: &str, partition: u32) -> Result<(), String> {
        let key = Bytes::from_static(b"batches!");
        let records = (0..self.batch)
            .map(|_| NewRecord::new(key.clone(), self.value.clone()))
            .collect();
        self.client
            .produce(&self.stream, topic, partition, records)
            .await
            .map(|_| ())
            .map_err(|error| format!("{topic}/{partition}: {error}"))
    }
}

/// Counts one finished batch of `batch` records.
fn tally(
    collected: &mut Collected,
    done: Result<(Result<(), String>, Duration), tokio::task::JoinError>,
    batch: u32,
) {
    match done {
        Ok((Ok(()), at)) => {
            collected.acknowledged += u64::from(batch);
            collected.last_ack = collected.last_ack.max(Some(at));
        }
        Ok((Err(error), _)) => {
            collected.failed += u64::from(batch);
            collected.first_error.get_or_insert(error);
        }
        Err(error) => {
            collected.failed += u64::from(batch);
            collected
                .first_error
                .get_or_insert_with(|| format!("a batch task failed: {error}"));
        }
    }
}

/// Batches one `batches` producer keeps in flight over `partitions`
/// partitions at most: [`IN_FLIGHT`] per partition, within the records
/// and bytes the SDK producer's buffer would hold ([`BUFFER_RECORDS_MAX`],
/// [`PRODUCER_BUFFER_BYTES_MAX`]), and never less than one partition's
/// pipeline.
fn batches_buffered_max(batch: u32, message_size: usize, partitions: usize) -> usize {
    let record_bytes = record_bytes(message_size);
    let batch = batch.max(1) as usize;
    let by_records = BUFFER_RECORDS_MAX / batch;
    let by_bytes = PRODUCER_BUFFER_BYTES_MAX / (batch * record_bytes).max(1);
    (IN_FLIGHT * partitions)
        .min(by_records)
        .min(by_bytes)
        .max(IN_FLIGHT)
}

/// Bytes of a record's key: its big-endian number.
const KEY_BYTES: usize = 8;

/// Encoded bytes of one throughput record: a [`KEY_BYTES`] key and a
/// `message_size`-byte value.
fn record_bytes(message_size: usize) -> usize {
    NewRecord::new(vec![0; KEY_BYTES], vec![0; message_size]).encoded_size()
}

/// Keys are cut from one buffer per this many records (a buffer per record
/// cost the bench an allocation per record).
const KEYS_PER_BUFFER: u64 = 4096;

/// The keys of records `first ..= first + KEYS_PER_BUFFER - 1`, in order.
fn key_buffer(first: u64) -> Bytes {
    let mut buffer = Vec::with_capacity(KEYS_PER_BUFFER as usize * KEY_BYTES);
    for sequence in first..first + KEYS_PER_BUFFER {
        buffer.extend_from_slice(&sequence.to_be_bytes());
    }
    Bytes::from(buffer)
}

/// Acks a collector counts between two readings of the clock while it is
/// behind.
const ACKS_PER_CLOCK_READ: u64 = 1024;

/// Awaits each delivery, in send order, and counts.
async fn collect(mut deliveries: mpsc::Receiver<Delivery>, start: Instant) -> Collected {
    let mut collected = Collected::default();
    while let Some(delivery) = deliveries.recv().await {
        match delivery.await {
            Ok(_) => {
                collected.acknowledged += 1;
                // The clock is read when this collector has caught up (the
                // last ack always finds it so) or every so many acks, not
                // per record.
                if deliveries.is_empty() || collected.acknowledged % ACKS_PER_CLOCK_READ == 0 {
                    collected.last_ack = Some(start.elapsed());
                }
            }
            Err(error) => {
                collected.failed += 1;
                collected
                    .first_error
                    .get_or_insert_with(|| error.to_string());
            }
        }
    }
    collected
}

/// The SDK producer settings for one topic of which a producer writes
/// `partitions` of the `share` partitions it writes in all: its part of the
/// producer's buffer ([`BUFFER_RECORDS_MAX`] records, within
/// [`PRODUCER_BUFFER_BYTES_MAX`]), one batch filling while [`IN_FLIGHT`] are
/// out per partition at most, and never less than one partition's whole
/// pipeline.
fn producer_config(
    batch: u32,
    message_size: usize,
    partitions: usize,
    share: usize,
) -> ProducerConfig {
    assert!(0 < partitions && partitions <= share);
    let record_bytes = record_bytes(message_size);
    let pipeline = batch as usize * (IN_FLIGHT + 1);
    let producer_records = BUFFER_RECORDS_MAX.min(PRODUCER_BUFFER_BYTES_MAX / record_bytes);
    let topic_records = producer_records * partitions / share;
    let buffer_records_max = (pipeline * partitions).min(topic_records).max(pipeline);
    ProducerConfig {
        batch_records_max: batch,
        batch_bytes_max: (batch as usize * record_bytes + 64).min(BATCH_BYTES_MAX),
        linger_ms: LINGER_MS,
        in_flight_max: IN_FLIGHT,
        buffer_records_max,
        buffer_bytes_max: (buffer_records_max * record_bytes).min(u32::MAX as usize),
    }
}

#[cfg(test)]
mod tests {
    use super::super::create::TopicGroups;
    use super::*;

    #[test]
    fn round_robin_spreads_consecutive_records_over_topics_and_partitions() {
        let layout = Layout {
            stream: "scale".to_owned(),
            topics: vec![
                TopicGroups {
                    topic: "t0".to_owned(),
                    groups: vec![1, 2],
                },
                TopicGroups {
                    topic: "t1".to_owned(),
                    groups: vec![3, 4, 5],
                },
            ],
        };
        assert_eq!(
            round_robin(&layout),
            vec![(0, 0), (1, 0), (0, 1), (1, 1), (1, 2)]
        );
    }

    #[test]
    fn producers_split_the_partitions_or_share_a_single_one() {
        let slots: Vec<(usize, u32)> = (0..5).map(|partition| (0, partition)).collect();
        assert_eq!(share_of(&slots, 0, 2), vec![(0, 0), (0, 2), (0, 4)]);
        assert_eq!(share_of(&slots, 1, 2), vec![(0, 1), (0, 3)]);
        let single = [(0, 0)];
        for index in 0..4 {
            assert_eq!(share_of(&single, index, 4), vec![(0, 0)]);
        }
    }

    #[test]
    fn the_producer_buffer_is_bounded_in_records_and_bytes() {
        let config = producer_config(100, 100, 4096, 4096);
        assert_eq!(config.buffer_records_max, BUFFER_RECORDS_MAX);
        assert_eq!(
            producer_config(10, 100, 2, 2).buffer_records_max,
            10 * 9 * 2
        );
        assert!(producer_config(100_000, 1024 * 1024, 1, 1).batch_bytes_max <= BATCH_BYTES_MAX);
        // 1 KB records over 250 partitions in ten topics: the producer's
        // ten SDK producers hold its byte budget between them.
        let record_bytes = NewRecord::new(vec![0; 8], vec![0; 1000]).encoded_size();
        let topic = producer_config(100, 1000, 25, 250);
        let held = 10 * topic.buffer_records_max * record_bytes;
        assert!(held <= PRODUCER_BUFFER_BYTES_MAX, "{held}");
        assert!(held >= PRODUCER_BUFFER_BYTES_MAX * 9 / 10, "{held}");
        // Huge records still get one partition's pipeline.
        assert_eq!(
            producer_config(100, 1 << 20, 1, 250).buffer_records_max,
            900
        );
    }
}
