//! Batches in flight, in the producer's task: sealed batches handed to the
//! client in order up to the in-flight bound, their answers turned into each
//! record's offset, a deleted topic forgotten and looked up again, flushes
//! released once every batch before them is done.

use std::sync::atomic::Ordering;
use std::time::Duration;

use strand_wire::Operation;
use strand_wire::ops::TopicInfo;
use tokio::time::Instant;

use crate::client::{partition_group_of, produce_ack};
use crate::error::ClientError;
use crate::records;

use super::{Accumulator, Batch, Completion, DeliveryReport, PartitionQueue, Route};

impl Accumulator {
    /// Hands sealed batches to the client, in order, up to the in-flight
    /// bound; without a route, they wait for (or start) a lookup.
    pub(super) fn dispatch(&mut self, partition: usize) {
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

    pub(super) fn on_completion(&mut self, completion: Completion) {
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
    pub(super) fn on_lookup(&mut self, found: Result<TopicInfo, ClientError>) {
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

    pub(super) fn release_flushes(&mut self) {
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
