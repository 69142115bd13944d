//! Writing to the scale run's partitions: one record to each partition a
//! killed node led, retried until it is taken (the kill's "writes resume"
//! time), and the throughput phase's load over every partition through the
//! SDK's batching producer. Nothing is read back: the bench's exactly-once
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
use super::report::ThroughputPhase;
use crate::error::BenchError;
use crate::load::BATCH_BYTES_MAX;
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

/// Most records a throughput producer buffers (per topic; `send` waits
/// beyond it).
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

/// What one topic's collector counted.
#[derive(Debug, Default)]
struct Collected {
    acknowledged: u64,
    failed: u64,
    last_ack: Option<Duration>,
    first_error: Option<String>,
}

/// Produces `message_size`-byte values round-robin over every partition of
/// `layout` for `duration`, one SDK producer per topic, in batches of `batch`.
pub async fn produce_for(
    client: &Client,
    layout: &Layout,
    duration: Duration,
    message_size: usize,
    batch: u32,
) -> Result<ThroughputPhase, BenchError> {
    let mut producers = Vec::with_capacity(layout.topics.len());
    for topic in &layout.topics {
        let config = producer_config(batch, message_size, topic.groups.len());
        let producer = client
            .producer(&layout.stream, &topic.topic, config)
            .await
            .map_err(|error| BenchError::client(format!("producer for {}", topic.topic), error))?;
        producers.push(producer);
    }
    let start = Instant::now();
    let mut senders = Vec::with_capacity(producers.len());
    let mut collectors = Vec::with_capacity(producers.len());
    for _ in &producers {
        let (sender, receiver) = mpsc::channel(BUFFER_RECORDS_MAX + 1);
        senders.push(sender);
        collectors.push(tokio::spawn(collect(receiver, start)));
    }
    let slots = round_robin(layout);
    let value = Bytes::from(vec![b'v'; message_size]);
    let mut send_error = send_all(&producers, &senders, &slots, value, start + duration).await;
    drop(senders);
    for producer in producers {
        if let Err(error) = producer.close().await {
            send_error.get_or_insert_with(|| format!("close a producer: {error}"));
        }
    }
    let mut total = Collected::default();
    for collector in collectors {
        let collected = collector
            .await
            .map_err(|error| BenchError::Cluster(format!("a collector failed: {error}")))?;
        total.acknowledged += collected.acknowledged;
        total.failed += collected.failed;
        total.last_ack = total.last_ack.max(collected.last_ack);
        total.first_error = total.first_error.or(collected.first_error);
    }
    let seconds = total.last_ack.unwrap_or(duration).as_secs_f64();
    let bytes = total.acknowledged * message_size as u64;
    Ok(ThroughputPhase {
        partitions: slots.len() as u64,
        produced: Throughput::new(total.acknowledged, bytes, seconds),
        failed: total.failed,
        first_error: send_error.or(total.first_error),
    })
}

/// Every `(topic index, partition)`, partition-major: consecutive records
/// go to different topics and partitions.
fn round_robin(layout: &Layout) -> Vec<(usize, u32)> {
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

/// Sends records over `slots`, cycling, until `end`; the first failure.
async fn send_all(
    producers: &[Producer],
    senders: &[mpsc::Sender<Delivery>],
    slots: &[(usize, u32)],
    value: Bytes,
    end: Instant,
) -> Option<String> {
    for (sequence, &(topic, partition)) in (0_u64..).zip(slots.iter().cycle()) {
        let key = Bytes::copy_from_slice(&sequence.to_be_bytes());
        let send = producers[topic].send(partition, key, value.clone());
        // `send` waits for buffer room; the phase ends on time all the same
        // (a send cut off there has sent nothing).
        let delivery = match tokio::time::timeout_at(end, send).await {
            Err(_) => return None,
            Ok(Err(error)) => return Some(format!("send: {error}")),
            Ok(Ok(delivery)) => delivery,
        };
        if senders[topic].send(delivery).await.is_err() {
            return Some("a collector stopped early".to_owned());
        }
        if Instant::now() >= end {
            return None;
        }
    }
    None // no slots at all
}

/// Awaits each delivery, in send order, and counts.
async fn collect(mut deliveries: mpsc::Receiver<Delivery>, start: Instant) -> Collected {
    let mut collected = Collected::default();
    while let Some(delivery) = deliveries.recv().await {
        match delivery.await {
            Ok(_) => {
                collected.acknowledged += 1;
                collected.last_ack = Some(start.elapsed());
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

/// The SDK producer settings for one topic of `partitions` partitions.
fn producer_config(batch: u32, message_size: usize, partitions: usize) -> ProducerConfig {
    let record_bytes = NewRecord::new(vec![0; 8], vec![0; message_size]).encoded_size();
    ProducerConfig {
        batch_records_max: batch,
        batch_bytes_max: (batch as usize * record_bytes + 64).min(BATCH_BYTES_MAX),
        linger_ms: LINGER_MS,
        in_flight_max: IN_FLIGHT,
        buffer_records_max: (batch as usize * (IN_FLIGHT + 1) * partitions)
            .clamp(1, BUFFER_RECORDS_MAX),
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
    fn the_producer_buffer_is_bounded() {
        let config = producer_config(100, 100, 4096);
        assert_eq!(config.buffer_records_max, BUFFER_RECORDS_MAX);
        assert_eq!(producer_config(10, 100, 2).buffer_records_max, 10 * 9 * 2);
        assert!(producer_config(100_000, 1024 * 1024, 1).batch_bytes_max <= BATCH_BYTES_MAX);
    }
}
