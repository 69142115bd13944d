//! Batching, in the producer's task: records joining their partition's open
//! batch, batches sealed when full or lingered out (a partial one only while
//! its partition's pipeline is not busy), flushes and aborts.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::error::ClientError;
use crate::records::NewRecord;

use super::buffer::{Charge, Room};
use super::{
    Accumulator, BATCH_RECORDS_PREALLOCATED_MAX, Batch, COMMANDS_PER_WAKEUP_MAX, Command,
    DeliveryReport,
};

impl Accumulator {
    /// Handles one command (`None`: every [`Producer`](super::Producer) handle is gone);
    /// true once the producer is closing.
    pub(super) fn on_command(&mut self, command: Option<Command>) -> bool {
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
    pub(super) fn drain_commands(
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

    pub(super) fn add(
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
    pub(super) fn refile_linger(&mut self, partition: usize) {
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
    pub(super) fn take_unsent(&mut self, partition: usize) -> Vec<Batch> {
        let queue = &mut self.partitions[partition];
        queue
            .open
            .take()
            .into_iter()
            .chain(queue.sealed.drain(..))
            .collect()
    }

    /// Fails every batch still open or sealed (not handed to the client).
    pub(super) fn abort(&mut self) {
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
    pub(super) fn fail_unsent(&mut self, batch: Batch, error: &ClientError) {
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

    pub(super) fn flush(&mut self, done: oneshot::Sender<()>) {
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

    pub(super) fn seal_lingered(&mut self) {
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
    pub(super) fn seal_if_lingered(&mut self, partition: usize, now: Instant, linger: Duration) {
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

    pub(super) fn linger_deadline(&self) -> Option<Instant> {
        self.lingering.first().map(|&(deadline, _)| deadline)
    }
}
