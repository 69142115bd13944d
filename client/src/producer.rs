//! `Producer`: batches records per partition by count, size and linger time,
//! keeps a bounded number of batches in flight per partition, and resolves
//! each record to its offset. A batch that is not full goes at its linger
//! only while its partition has fewer than [`PARTIAL_IN_FLIGHT_MAX`] batches
//! in flight; otherwise it keeps filling until it is full or an answer comes
//! (the way a busy pipeline batches more), so records spread over many
//! partitions still travel in large batches.
//!
//! Order: a partition's batches are handed to the client's session for that
//! partition's group in the order they were sealed, and the session keeps
//! that order on the wire and across retries and failovers. Records of one
//! partition are therefore written in `send` order. A batch that fails
//! (refused, or outcome unknown) does not stop the later ones.
//!
//! Bounds: at most `buffer_records_max` records and `buffer_bytes_max`
//! bytes of them are buffered or in flight (`send` waits beyond either), at
//! most `in_flight_max` batches per partition are in flight (the rest wait,
//! sealed, in order).
//!
//! A deleted topic: a batch answered `Deleted` fails with that error, and is
//! never sent to another group (a topic created again under the name is a
//! new topic with new groups). The producer then forgets the topic's
//! groups (its own and the client's routing): batches it had not sent yet
//! fail `Deleted` too, and the next batch looks the topic up again, so it
//! fails `UnknownTopic` (or goes to the new topic, if one was created).
//!
//! This file holds the handle ([`Producer`], [`Delivery`]) and the task's
//! state and loop; the task's work has rooms of its own: `batching` (records
//! into batches, sealing, lingering, flush and abort), `in_flight` (batches
//! handed to the client, their answers, lookups after a deletion) and
//! `buffer` (the room records take while buffered or in flight).

use std::collections::{BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use strand_wire::ops::TopicInfo;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::Client;
use crate::config::ProducerConfig;
use crate::error::ClientError;
use crate::partitioner::{self, StickyPartitions};
use crate::records::{self, NewRecord};

mod batching;
mod buffer;
mod in_flight;

use buffer::{Buffer, BufferPermits, Charge, Room};

/// Resolves to the offset a record was written at (or why it was not, or
/// that its fate is unknown); [`Delivery::report`] also says which batch
/// carried it.
#[derive(Debug)]
pub struct Delivery {
    receiver: oneshot::Receiver<DeliveryReport>,
}

/// What became of one record, and the batch (one produce request) that
/// carried it: every record of a batch shares its batch's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryReport {
    /// The batch's number, counted per producer from 0 in the order batches
    /// were opened (`None`: the producer stopped before it reported).
    pub batch: Option<u64>,
    /// The record's offset, or the batch's error.
    pub offset: Result<u64, ClientError>,
}

impl Delivery {
    /// Waits for the record's outcome and the batch that carried it.
    pub async fn report(self) -> DeliveryReport {
        self.receiver.await.unwrap_or(DeliveryReport {
            batch: None,
            offset: Err(ClientError::Closed),
        })
    }
}

impl Future for Delivery {
    type Output = Result<u64, ClientError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.receiver)
            .poll(context)
            .map(|report| report.map_or(Err(ClientError::Closed), |report| report.offset))
    }
}

/// A batching producer for one topic. Dropping it still sends what was
/// buffered; `close` also waits for the acknowledgements.
#[derive(Debug)]
pub struct Producer {
    stream: String,
    topic: String,
    /// The topic's partition count as the producer last learnt it (it
    /// changes when the topic is created again after a deletion).
    partition_count: Arc<AtomicU32>,
    commands: mpsc::UnboundedSender<Command>,
    buffer: Buffer,
    task: JoinHandle<()>,
    /// Where records without a key go ([`Producer::send_keyed`]).
    unkeyed: StickyPartitions,
}

#[derive(Debug)]
enum Command {
    Record {
        partition: u32,
        record: NewRecord,
        delivery: oneshot::Sender<DeliveryReport>,
        room: Charge,
    },
    Flush {
        done: oneshot::Sender<()>,
    },
    /// Fail every record not yet sent; let the batches in flight finish.
    Abort,
}

impl Producer {
    pub(crate) fn start(
        client: Client,
        stream: String,
        topic: String,
        groups: Vec<u64>,
        config: ProducerConfig,
    ) -> Producer {
        let (commands, command_receiver) = mpsc::unbounded_channel();
        let buffer = Buffer::new(&config);
        let unkeyed = StickyPartitions::new(config.batch_records_max);
        let partition_count = Arc::new(AtomicU32::new(groups.len() as u32));
        let topic_name = TopicName {
            stream: stream.clone(),
            topic: topic.clone(),
        };
        let accumulator = Accumulator::new(
            client,
            topic_name,
            groups,
            Arc::clone(&partition_count),
            Arc::clone(&buffer.permits),
            config,
        );
        let task = tokio::spawn(accumulator.run(command_receiver));
        Producer {
            stream,
            topic,
            partition_count,
            commands,
            buffer,
            task,
            unkeyed,
        }
    }

    /// Buffers a record for `partition`; waits while the buffer is full.
    /// The returned [`Delivery`] resolves to the record's offset.
    pub async fn send(
        &self,
        partition: u32,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
    ) -> Result<Delivery, ClientError> {
        self.send_record(partition, NewRecord::new(key, value))
            .await
    }

    /// Buffers a record for the partition its key maps to (Kafka's murmur2
    /// partitioner, see [`crate::partitioner`]): every record with one key
    /// lands on one partition, in send order, while the partition count
    /// stays. A record with an empty key goes with its neighbours: a whole
    /// batch's worth to one partition, then the next.
    pub async fn send_keyed(
        &self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
    ) -> Result<Delivery, ClientError> {
        let record = NewRecord::new(key, value);
        let partition = self.partition_of(&record.key);
        self.send_record(partition, record).await
    }

    /// The partition [`Producer::send_keyed`] picks for `key` now.
    pub fn partition_of(&self, key: &[u8]) -> u32 {
        let partition_count = self.partition_count.load(Ordering::Relaxed).max(1);
        match key.is_empty() {
            true => self.unkeyed.next(partition_count),
            false => partitioner::partition_for_key(key, partition_count),
        }
    }

    /// Like [`Producer::send`], for a record with headers or a timestamp.
    pub async fn send_record(
        &self,
        partition: u32,
        mut record: NewRecord,
    ) -> Result<Delivery, ClientError> {
        let partition_count = self.partition_count.load(Ordering::Relaxed);
        if partition >= partition_count {
            return Err(ClientError::UnknownPartition {
                stream: self.stream.clone(),
                topic: self.topic.clone(),
                partition,
                partition_count,
            });
        }
        record.check()?;
        // Stamped when sent, not when its batch leaves.
        record.timestamp_us = Some(record.timestamp_us.unwrap_or_else(records::now_us));
        let room = self.buffer.room_for(&record).await?;
        let (delivery, receiver) = oneshot::channel();
        let command = Command::Record {
            partition,
            record,
            delivery,
            room,
        };
        self.commands
            .send(command)
            .map_err(|_| ClientError::Closed)?;
        Ok(Delivery { receiver })
    }

    /// Sends every buffered record now and waits until all records sent
    /// before this call are acknowledged or failed.
    pub async fn flush(&self) -> Result<(), ClientError> {
        let (done, flushed) = oneshot::channel();
        self.commands
            .send(Command::Flush { done })
            .map_err(|_| ClientError::Closed)?;
        flushed.await.map_err(|_| ClientError::Closed)
    }

    /// Flushes and stops the producer.
    pub async fn close(self) -> Result<(), ClientError> {
        self.flush().await?;
        drop(self.commands);
        self.task.await.map_err(|_| ClientError::Closed)
    }

    /// Stops the producer without sending what it still holds: every record
    /// not yet handed to the cluster fails with [`ClientError::NotSent`]
    /// (nothing was written for it); waits for the batches in flight to be
    /// acknowledged or to fail. For a caller that stops at the first failure
    /// and wants to know exactly what went out.
    pub async fn abort(self) -> Result<(), ClientError> {
        self.commands
            .send(Command::Abort)
            .map_err(|_| ClientError::Closed)?;
        drop(self.commands);
        self.task.await.map_err(|_| ClientError::Closed)
    }
}

/// A batch being filled or waiting to be sent.
#[derive(Debug)]
struct Batch {
    sequence: u64,
    records: Vec<NewRecord>,
    deliveries: Vec<oneshot::Sender<DeliveryReport>>,
    /// The buffer room its records hold, together.
    room: Room,
    bytes: usize,
    opened_at: Instant,
}

/// Most records a new batch makes room for up front (it grows beyond).
/// A batch filled record by record from empty reallocated its buffers a
/// dozen times; with a thousand partitions filling at once, that churn was
/// a fifth of a producing process's time in the allocator.
const BATCH_RECORDS_PREALLOCATED_MAX: usize = 1024;

#[derive(Debug, Default)]
struct PartitionQueue {
    open: Option<Batch>,
    sealed: VecDeque<Batch>,
    in_flight: usize,
}

/// Most commands the producer's task takes in one wakeup before it looks
/// at answers and lingers again (completions wait at most this many
/// records).
const COMMANDS_PER_WAKEUP_MAX: usize = 256;

/// Batches a partition may have in flight and still send a partial batch
/// at its linger; with more, the open batch keeps filling until it is full
/// or one of them is answered.
pub const PARTIAL_IN_FLIGHT_MAX: usize = 2;

impl PartitionQueue {
    /// Whether a lingered partial batch may go now: the partition's
    /// pipeline is not busy. A busy one lets the batch grow instead, so a
    /// load spread over many partitions still travels in large batches
    /// (full batches always go, up to the in-flight bound).
    fn may_send_partial(&self) -> bool {
        self.sealed.is_empty() && self.in_flight < PARTIAL_IN_FLIGHT_MAX
    }
}

#[derive(Debug)]
struct Completion {
    partition: usize,
    /// The group the batch was sent to.
    group: u64,
    batch: Batch,
    outcome: Result<Bytes, ClientError>,
}

/// The producer's topic.
#[derive(Debug, Clone)]
struct TopicName {
    stream: String,
    topic: String,
}

/// Where the producer's batches go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    /// Partition `i`'s batches go to group `groups[i]`.
    Groups(Vec<u64>),
    /// The topic was deleted (or a lookup failed): the next batch to go
    /// looks it up again.
    Unknown,
    /// A lookup is under way; sealed batches wait for it.
    LookingUp,
}

/// The producer's task: owns the batches; nothing else touches them.
struct Accumulator {
    client: Client,
    name: TopicName,
    route: Route,
    /// The groups of the topic last answered `Deleted`: a lookup that
    /// still names one of them is stale metadata, never a route.
    deleted_groups: BTreeSet<u64>,
    /// Shared with the [`Producer`], which checks `send`'s partition.
    partition_count: Arc<AtomicU32>,
    /// The buffer's bounds: each batch gives its records' room back here.
    permits: Arc<BufferPermits>,
    lookups: mpsc::UnboundedSender<Result<TopicInfo, ClientError>>,
    lookup_receiver: mpsc::UnboundedReceiver<Result<TopicInfo, ClientError>>,
    config: ProducerConfig,
    partitions: Vec<PartitionQueue>,
    next_sequence: u64,
    /// Sequences of batches opened and not yet finished.
    outstanding: BTreeSet<u64>,
    /// Flushes waiting for every batch below their sequence mark.
    flushes: Vec<(u64, oneshot::Sender<()>)>,
    completions: mpsc::UnboundedSender<Completion>,
    completion_receiver: mpsc::UnboundedReceiver<Completion>,
    /// When each open batch that may go partial lingers out, as
    /// `(deadline, partition)`, and the deadline filed for each partition:
    /// the next linger is the first entry, not a scan of every partition.
    lingering: BTreeSet<(Instant, usize)>,
    linger_of: Vec<Option<Instant>>,
}

impl Accumulator {
    fn new(
        client: Client,
        name: TopicName,
        groups: Vec<u64>,
        partition_count: Arc<AtomicU32>,
        permits: Arc<BufferPermits>,
        config: ProducerConfig,
    ) -> Accumulator {
        let (completions, completion_receiver) = mpsc::unbounded_channel();
        let (lookups, lookup_receiver) = mpsc::unbounded_channel();
        let partitions = groups.iter().map(|_| PartitionQueue::default()).collect();
        let groups_len = groups.len();
        Accumulator {
            client,
            name,
            route: Route::Groups(groups),
            deleted_groups: BTreeSet::new(),
            partition_count,
            permits,
            lookups,
            lookup_receiver,
            config,
            partitions,
            next_sequence: 0,
            outstanding: BTreeSet::new(),
            flushes: Vec::new(),
            completions,
            completion_receiver,
            lingering: BTreeSet::new(),
            linger_of: vec![None; groups_len],
        }
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut closing = false;
        // One timer for the first linger, moved only when that deadline
        // changes (most records join a batch whose deadline stands): a
        // timer armed and dropped per wakeup was a producer's largest cost
        // after the records themselves.
        let linger = tokio::time::sleep_until(Instant::now());
        tokio::pin!(linger);
        let mut armed: Option<Instant> = None;
        loop {
            if closing && self.outstanding.is_empty() {
                return;
            }
            let deadline = self.linger_deadline();
            if deadline != armed {
                if let Some(deadline) = deadline {
                    linger.as_mut().reset(deadline);
                }
                armed = deadline;
            }
            tokio::select! {
                command = commands.recv(), if !closing => {
                    closing = self.on_command(command);
                    closing = self.drain_commands(&mut commands, closing);
                }
                Some(completion) = self.completion_receiver.recv() => self.on_completion(completion),
                Some(lookup) = self.lookup_receiver.recv() => self.on_lookup(lookup),
                () = &mut linger, if armed.is_some() => {
                    // Fired: rearmed on the next pass even if the first
                    // deadline left is the same instant.
                    armed = None;
                    self.seal_lingered();
                }
            }
        }
    }
}
