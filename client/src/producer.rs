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

use std::collections::{BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use strand_wire::Operation;
use strand_wire::ops::TopicInfo;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::{Client, partition_group_of, produce_ack};
use crate::config::ProducerConfig;
use crate::error::ClientError;
use crate::partitioner::{self, StickyPartitions};
use crate::records::{self, NewRecord};

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

/// The producer's buffer: room for records and for their bytes, taken by
/// `send` and given back when a record's batch is answered (or fails).
#[derive(Debug)]
struct Buffer {
    permits: Arc<BufferPermits>,
    bytes_max: usize,
}

/// The two bounds of a producer's buffer, shared by its senders (who take
/// room) and its task (which gives a batch's room back in one call).
#[derive(Debug)]
struct BufferPermits {
    records: Semaphore,
    bytes: Semaphore,
}

impl Buffer {
    fn new(config: &ProducerConfig) -> Buffer {
        Buffer {
            permits: Arc::new(BufferPermits {
                records: Semaphore::new(config.buffer_records_max),
                bytes: Semaphore::new(config.buffer_bytes_max),
            }),
            bytes_max: config.buffer_bytes_max,
        }
    }

    /// Waits for room for `record`: one record, and its encoded bytes (at
    /// most the whole buffer's, so that a record larger than the buffer
    /// still goes, alone). Record room is taken first, by every sender, so
    /// two senders never hold each other's half. The room taken is then
    /// counted, not held as permits (a permit per record, merged into its
    /// batch's, cost a reference count and a merge per record): the batch
    /// that carries the record gives it back (see [`Room`]).
    async fn room_for(&self, record: &NewRecord) -> Result<Charge, ClientError> {
        let charge = u32::try_from(record.encoded_size().min(self.bytes_max))
            .expect("the config bounds buffer_bytes_max to u32");
        let records = self
            .permits
            .records
            .acquire()
            .await
            .map_err(|_| ClientError::Closed)?;
        let bytes = self
            .permits
            .bytes
            .acquire_many(charge)
            .await
            .map_err(|_| ClientError::Closed)?;
        // No await from here until the record is queued to the task, so
        // the counted room cannot be lost to a cancelled `send`.
        records.forget();
        bytes.forget();
        Ok(Charge { bytes: charge })
    }
}

/// The buffer room one record took: one record and this many bytes.
#[derive(Debug, Clone, Copy)]
struct Charge {
    bytes: u32,
}

/// Buffer room held by a batch's records together, given back when the
/// batch is dropped (answered, failed or never sent).
#[derive(Debug)]
struct Room {
    permits: Arc<BufferPermits>,
    records: usize,
    bytes: usize,
}

impl Room {
    fn new(permits: &Arc<BufferPermits>) -> Room {
        Room {
            permits: Arc::clone(permits),
            records: 0,
            bytes: 0,
        }
    }

    /// Takes a record's room into this one (a record joining its batch).
    fn add(&mut self, charge: Charge) {
        self.records += 1;
        self.bytes += charge.bytes as usize;
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        self.permits.records.add_permits(self.records);
        self.permits.bytes.add_permits(self.bytes);
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

    /// Handles one command (`None`: every [`Producer`] handle is gone);
    /// true once the producer is closing.
    fn on_command(&mut self, command: Option<Command>) -> bool {
        match command {
            Some(Command::Record {
                partition,
                record,
                delivery,
                room,
            }) => {
                self.add(partition as usize, record, delivery, room);
                false
            }
            Some(Command::Flush { done }) => {
                self.flush(done);
                false
            }
            Some(Command::Abort) => {
                self.abort();
                true
            }
            None => {
                self.seal_all();
                true
            }
        }
    }

    /// Takes the commands already queued behind the one just handled, up
    /// to [`COMMANDS_PER_WAKEUP_MAX`], so that a sender's burst costs one
    /// pass through the select, not one per record; true once closing.
    fn drain_commands(
        &mut self,
        commands: &mut mpsc::UnboundedReceiver<Command>,
        mut closing: bool,
    ) -> bool {
        for _ in 1..COMMANDS_PER_WAKEUP_MAX {
            if closing {
                break;
            }
            closing = match commands.try_recv() {
                Ok(command) => self.on_command(Some(command)),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => self.on_command(None),
            };
        }
        closing
    }

    fn add(
        &mut self,
        partition: usize,
        record: NewRecord,
        delivery: oneshot::Sender<DeliveryReport>,
        room: Charge,
    ) {
        assert!(
            partition < self.partitions.len(),
            "send checked the partition"
        );
        let size = record.encoded_size();
        let would_overflow = self.partitions[partition]
            .open
            .as_ref()
            .is_some_and(|open| open.bytes + size > self.config.batch_bytes_max);
        if would_overflow {
            self.seal(partition);
        }
        if self.partitions[partition].open.is_none() {
            let sequence = self.next_sequence;
            self.next_sequence += 1;
            self.outstanding.insert(sequence);
            let room = (self.config.batch_records_max as usize).min(BATCH_RECORDS_PREALLOCATED_MAX);
            self.partitions[partition].open = Some(Batch {
                sequence,
                records: Vec::with_capacity(room),
                deliveries: Vec::with_capacity(room),
                room: Room::new(&self.permits),
                bytes: strand_wire::batch::BATCH_HEADER_SIZE,
                opened_at: Instant::now(),
            });
        }
        let open = self.partitions[partition]
            .open
            .as_mut()
            .expect("opened above");
        open.bytes += size;
        open.records.push(record);
        open.deliveries.push(delivery);
        open.room.add(room);
        if open.records.len() >= self.config.batch_records_max as usize {
            self.seal(partition);
        }
        self.refile_linger(partition);
    }

    /// Files `partition`'s linger deadline anew after its queue changed: an
    /// open batch on a partition that may send a partial one lingers out at
    /// `opened_at + linger_ms`; any other partition has no deadline.
    fn refile_linger(&mut self, partition: usize) {
        let queue = &self.partitions[partition];
        let deadline = queue
            .open
            .as_ref()
            .filter(|_| queue.may_send_partial())
            .map(|open| open.opened_at + Duration::from_millis(self.config.linger_ms));
        // Most records join an open batch whose deadline stands.
        if deadline == self.linger_of[partition] {
            return;
        }
        if let Some(old) = self.linger_of[partition].take() {
            self.lingering.remove(&(old, partition));
        }
        if let Some(deadline) = deadline {
            self.lingering.insert((deadline, partition));
            self.linger_of[partition] = Some(deadline);
        }
    }

    /// Takes a partition's batches not handed to the client yet: the open
    /// one, then the sealed ones, in order.
    fn take_unsent(&mut self, partition: usize) -> Vec<Batch> {
        let queue = &mut self.partitions[partition];
        queue
            .open
            .take()
            .into_iter()
            .chain(queue.sealed.drain(..))
            .collect()
    }

    /// Fails every batch still open or sealed (not handed to the client).
    fn abort(&mut self) {
        for partition in 0..self.partitions.len() {
            for batch in self.take_unsent(partition) {
                let error = ClientError::NotSent {
                    reason: "the producer was stopped before its batch was sent".to_owned(),
                };
                self.fail_unsent(batch, &error);
            }
        }
        self.lingering.clear();
        self.linger_of.fill(None);
        self.release_flushes();
    }

    /// Ends a batch that was never handed to the client: each of its
    /// records reports `error`. The caller releases flushes.
    fn fail_unsent(&mut self, batch: Batch, error: &ClientError) {
        for delivery in batch.deliveries {
            let report = DeliveryReport {
                batch: Some(batch.sequence),
                offset: Err(error.clone()),
            };
            let _ = delivery.send(report); // the sender may have dropped its Delivery
        }
        drop(batch.room); // frees buffer room for waiting senders
        self.outstanding.remove(&batch.sequence);
    }

    fn flush(&mut self, done: oneshot::Sender<()>) {
        self.seal_all();
        let mark = self.next_sequence;
        self.flushes.push((mark, done));
        self.release_flushes();
    }

    fn seal(&mut self, partition: usize) {
        if let Some(batch) = self.partitions[partition].open.take() {
            self.partitions[partition].sealed.push_back(batch);
        }
        self.dispatch(partition);
        self.refile_linger(partition);
    }

    fn seal_all(&mut self) {
        for partition in 0..self.partitions.len() {
            self.seal(partition);
        }
    }

    fn seal_lingered(&mut self) {
        let now = Instant::now();
        let linger = Duration::from_millis(self.config.linger_ms);
        while let Some(&(deadline, partition)) = self.lingering.first() {
            if deadline > now {
                break;
            }
            self.seal_if_lingered(partition, now, linger);
            // Sealed (and refiled) above; an entry left is a bug.
            assert!(
                self.linger_of[partition] != Some(deadline),
                "partition {partition} lingered out and was not sealed"
            );
        }
    }

    /// Seals `partition`'s open batch if it lingered and the partition may
    /// send a partial batch now.
    fn seal_if_lingered(&mut self, partition: usize, now: Instant, linger: Duration) {
        let queue = &self.partitions[partition];
        let lingered = queue.may_send_partial()
            && queue
                .open
                .as_ref()
                .is_some_and(|open| open.opened_at + linger <= now);
        if lingered {
            self.seal(partition);
        }
    }

    fn linger_deadline(&self) -> Option<Instant> {
        self.lingering.first().map(|&(deadline, _)| deadline)
    }

    /// Hands sealed batches to the client, in order, up to the in-flight
    /// bound; without a route, they wait for (or start) a lookup.
    fn dispatch(&mut self, partition: usize) {
        let group = match &self.route {
            Route::Groups(groups) => groups.get(partition).copied(),
            Route::LookingUp => return,
            Route::Unknown => {
                if !self.partitions[partition].sealed.is_empty() {
                    self.start_lookup();
                }
                return;
            }
        };
        let Some(group) = group else {
            // The topic was created again with fewer partitions.
            let error = ClientError::UnknownPartition {
                stream: self.name.stream.clone(),
                topic: self.name.topic.clone(),
                partition: partition as u32,
                partition_count: self.partition_count.load(Ordering::Relaxed),
            };
            let sealed: Vec<Batch> = self.partitions[partition].sealed.drain(..).collect();
            for batch in sealed {
                self.fail_unsent(batch, &error);
            }
            self.release_flushes();
            return;
        };
        while self.partitions[partition].in_flight < self.config.in_flight_max {
            let Some(batch) = self.partitions[partition].sealed.pop_front() else {
                return;
            };
            self.partitions[partition].in_flight += 1;
            let body = records::build_batch(&batch.records).bytes().clone();
            let outcome = self
                .client
                .submit_replicated(group, Operation::Produce, body);
            let completions = self.completions.clone();
            tokio::spawn(async move {
                let outcome = outcome.await.unwrap_or(Err(ClientError::Closed));
                // The accumulator outlives its batches; if not, nobody waits.
                let _ = completions.send(Completion {
                    partition,
                    group,
                    batch,
                    outcome,
                });
            });
        }
    }

    fn on_completion(&mut self, completion: Completion) {
        let Completion {
            partition,
            group,
            batch,
            outcome,
        } = completion;
        let deleted = matches!(outcome, Err(ClientError::Deleted { .. }));
        let queue = &mut self.partitions[partition];
        assert!(
            queue.in_flight > 0,
            "a completion without a batch in flight"
        );
        queue.in_flight -= 1;
        let acknowledged = outcome.and_then(|reply| produce_ack(&reply, batch.records.len()));
        for (index, delivery) in batch.deliveries.into_iter().enumerate() {
            let offset = acknowledged
                .as_ref()
                .map(|ack| ack.offset_base + index as u64)
                .map_err(Clone::clone);
            let report = DeliveryReport {
                batch: Some(batch.sequence),
                offset,
            };
            let _ = delivery.send(report); // the sender may have dropped its Delivery
        }
        drop(batch.room); // frees buffer room for waiting senders
        self.outstanding.remove(&batch.sequence);
        if deleted {
            self.on_deleted(group);
        }
        self.release_flushes();
        self.dispatch(partition);
        // A partial batch held back while the pipeline was busy goes now.
        let linger = Duration::from_millis(self.config.linger_ms);
        self.seal_if_lingered(partition, Instant::now(), linger);
        self.refile_linger(partition);
    }

    /// A batch sent to `group` was answered `Deleted`. If `group` is one of
    /// the current route's, the topic is gone: forget its groups (here and
    /// in the client's routing), and fail every batch not sent yet, since
    /// each was meant for the deleted topic. Batches in flight get their
    /// own answers. The next batch sealed looks the topic up again.
    fn on_deleted(&mut self, group: u64) {
        let Route::Groups(groups) = &self.route else {
            return; // forgotten already
        };
        if !groups.contains(&group) {
            return; // an older incarnation's group, forgotten already
        }
        self.deleted_groups = groups.iter().copied().collect();
        self.route = Route::Unknown;
        self.client
            .forget_topic(&self.name.stream, &self.name.topic);
        let error = ClientError::Deleted {
            message: format!(
                "{}/{} was deleted before this batch was sent; nothing was written",
                self.name.stream, self.name.topic
            ),
        };
        for partition in 0..self.partitions.len() {
            for batch in self.take_unsent(partition) {
                self.fail_unsent(batch, &error);
            }
            self.refile_linger(partition);
        }
    }

    /// Looks the topic up again, in the background; sealed batches wait.
    fn start_lookup(&mut self) {
        assert_eq!(
            self.route,
            Route::Unknown,
            "a lookup only replaces no route"
        );
        self.route = Route::LookingUp;
        let client = self.client.clone();
        let name = self.name.clone();
        let lookups = self.lookups.clone();
        tokio::spawn(async move {
            let found = client.topic(&name.stream, &name.topic).await;
            let _ = lookups.send(found); // the producer may have stopped
        });
    }

    /// The lookup answered: route the waiting batches to the topic's
    /// groups, or fail them with why there are none.
    fn on_lookup(&mut self, found: Result<TopicInfo, ClientError>) {
        assert_eq!(self.route, Route::LookingUp, "an answer without a lookup");
        match found.and_then(|info| self.groups_of(&info)) {
            Ok(groups) => {
                let count = groups.len();
                if count > self.partitions.len() {
                    self.partitions.resize_with(count, PartitionQueue::default);
                    self.linger_of.resize(count, None);
                }
                self.partition_count.store(count as u32, Ordering::Relaxed);
                self.route = Route::Groups(groups);
            }
            Err(error) => {
                self.route = Route::Unknown;
                for partition in 0..self.partitions.len() {
                    let sealed: Vec<Batch> = self.partitions[partition].sealed.drain(..).collect();
                    for batch in sealed {
                        self.fail_unsent(batch, &error);
                    }
                }
            }
        }
        self.release_flushes();
        let linger = Duration::from_millis(self.config.linger_ms);
        for partition in 0..self.partitions.len() {
            self.dispatch(partition);
            self.seal_if_lingered(partition, Instant::now(), linger);
            self.refile_linger(partition);
        }
    }

    /// The groups of `info`'s partitions in order; `Deleted` when the
    /// answer still lists the deleted topic (it came from a node that has
    /// not applied the deletion yet).
    fn groups_of(&self, info: &TopicInfo) -> Result<Vec<u64>, ClientError> {
        let count = info.partitions.len() as u32;
        let groups = (0..count)
            .map(|partition| partition_group_of(info, partition))
            .collect::<Result<Vec<u64>, ClientError>>()?;
        if groups
            .iter()
            .any(|group| self.deleted_groups.contains(group))
        {
            return Err(ClientError::Deleted {
                message: format!(
                    "{}/{} was deleted (a node's metadata still lists it); nothing was written",
                    self.name.stream, self.name.topic
                ),
            });
        }
        Ok(groups)
    }

    fn release_flushes(&mut self) {
        let oldest = self.outstanding.first().copied().unwrap_or(u64::MAX);
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flushes)
            .into_iter()
            .partition(|(mark, _)| oldest >= *mark);
        self.flushes = waiting;
        for (_, flushed) in done {
            let _ = flushed.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_buffer() -> Buffer {
        Buffer::new(&ProducerConfig {
            buffer_records_max: 3,
            buffer_bytes_max: 1_000,
            ..ProducerConfig::default()
        })
    }

    #[tokio::test]
    async fn a_batch_gives_back_the_room_of_every_record_it_carried() {
        let buffer = small_buffer();
        let record = NewRecord::new(Bytes::from_static(b"k"), Bytes::from(vec![0; 100]));
        let mut room = Room::new(&buffer.permits);
        for _ in 0..3 {
            room.add(buffer.room_for(&record).await.expect("room"));
        }
        assert_eq!(buffer.permits.records.available_permits(), 0);
        let taken = 3 * record.encoded_size();
        assert_eq!(buffer.permits.bytes.available_permits(), 1_000 - taken);
        let waiting = tokio::time::timeout(Duration::from_millis(20), buffer.room_for(&record));
        assert!(waiting.await.is_err(), "a fourth record waits for room");
        drop(room);
        assert_eq!(buffer.permits.records.available_permits(), 3);
        assert_eq!(buffer.permits.bytes.available_permits(), 1_000);
    }

    #[tokio::test]
    async fn a_cancelled_send_keeps_no_room() {
        let buffer = small_buffer();
        let large = NewRecord::new(Bytes::from_static(b"k"), Bytes::from(vec![0; 600]));
        let held = buffer.room_for(&large).await.expect("room");
        // The second large record gets its record room, then waits for
        // bytes; cancelled there, it must give the record room back.
        let waiting = tokio::time::timeout(Duration::from_millis(20), buffer.room_for(&large));
        assert!(waiting.await.is_err());
        assert_eq!(buffer.permits.records.available_permits(), 2);
        let mut room = Room::new(&buffer.permits);
        room.add(held);
        drop(room);
        assert_eq!(buffer.permits.records.available_permits(), 3);
        assert_eq!(buffer.permits.bytes.available_permits(), 1_000);
    }
}
