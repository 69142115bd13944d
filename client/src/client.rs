//! `Client`: the handle every SDK call goes through. Cheap to clone; all
//! clones share one driver task (one connection per node, one session per
//! group).

use std::sync::Arc;

use bytes::Bytes;
use strand_wire::ops::{
    AddPartitions, AlterTopic, CreateStream, CreateTopic, DeleteCursor, DeleteStream, DeleteTopic,
    Empty, FetchReply, FetchRequest, GetCursor, GetCursorReply, MetadataReply, MetadataRequest,
    OffsetForTime, OffsetForTimeReply, ProduceReply, SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN,
    StoreCursor, TopicCreated, TopicInfo, TopicsDeleted,
};
use strand_wire::{Body, ConfirmPolicy, Operation};
use tokio::sync::{mpsc, oneshot};

use crate::config::{ClientConfig, ConsumerConfig, ProducerConfig, TopicChange, TopicSpec};
use crate::consumer::Consumer;
use crate::driver::{Driver, DriverCommand, SharedRouting};
use crate::error::ClientError;
use crate::producer::Producer;
use crate::query::QueryTarget;
use crate::records::{self, FetchedRecords, NewRecord, ProduceAck};
use crate::routing::METADATA_GROUP;

/// Longest long poll a fetch may ask for (the server refuses longer).
pub const FETCH_WAIT_MS_MAX: u32 = 60_000;

/// Most partitions a topic may have (the server refuses more).
pub const PARTITIONS_PER_TOPIC_MAX: u32 = 4096;

/// A connection to a Strand cluster: admin calls, produce, fetch, cursors.
///
/// Every call retries on its own (redirects, busy and unavailable groups,
/// lost connections) until `deadline_ms`; produce and create calls are
/// idempotent across those retries, so a retry never writes twice.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// How often `connect` looks whether a node refused its sign-in.
const SIGN_IN_REFUSAL_POLL: std::time::Duration = std::time::Duration::from_millis(10);

#[derive(Debug)]
struct Inner {
    commands: mpsc::UnboundedSender<DriverCommand>,
    shared: Arc<SharedRouting>,
    config: ClientConfig,
}

impl Client {
    /// Starts the client and learns the cluster's routing from any
    /// bootstrap node. Must be called inside a tokio runtime.
    pub async fn connect(config: ClientConfig) -> Result<Client, ClientError> {
        config.validate()?;
        let tls = config
            .tls
            .as_ref()
            .map(crate::tls::ClientTls::connector)
            .transpose()?;
        let (commands, shared) = Driver::spawn(config.clone(), tls);
        let client = Client {
            inner: Arc::new(Inner {
                commands,
                shared,
                config,
            }),
        };
        if let Err(error) = client.first_metadata().await {
            if let Some(message) = client.inner.shared.sign_in_refused() {
                return Err(ClientError::AuthenticationFailed { message });
            }
            if let ClientError::AuthenticationFailed { .. } = error {
                return Err(error);
            }
            let config = &client.inner.config;
            return Err(ClientError::Connect {
                bootstrap: config.bootstrap.clone(),
                cluster: config.cluster,
                reason: error.to_string(),
            });
        }
        Ok(client)
    }

    /// The cluster's metadata, or the first refused sign-in: retrying
    /// credentials a node refused until the deadline would only count
    /// more failures against the user and this address (nodes throttle
    /// them).
    async fn first_metadata(&self) -> Result<MetadataReply, ClientError> {
        let refused = async {
            loop {
                if let Some(message) = self.inner.shared.sign_in_refused() {
                    return message;
                }
                tokio::time::sleep(SIGN_IN_REFUSAL_POLL).await;
            }
        };
        tokio::select! {
            result = self.metadata() => result,
            message = refused => Err(ClientError::AuthenticationFailed { message }),
        }
    }

    /// The configuration the client runs with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// Hands a replicated request to the driver now (so submission order is
    /// request order) and returns where its outcome will arrive.
    pub(crate) fn submit_replicated(
        &self,
        group: u64,
        operation: Operation,
        body: Bytes,
    ) -> oneshot::Receiver<Result<Bytes, ClientError>> {
        let (reply, outcome) = oneshot::channel();
        let command = DriverCommand::Replicated {
            group,
            operation,
            body,
            reply,
        };
        // If the driver is gone the receiver reports it as `Closed`.
        let _ = self.inner.commands.send(command);
        outcome
    }

    pub(crate) async fn replicated(
        &self,
        group: u64,
        operation: Operation,
        body: Bytes,
    ) -> Result<Bytes, ClientError> {
        let outcome = self.submit_replicated(group, operation, body);
        outcome.await.map_err(|_| ClientError::Closed)?
    }

    /// A non-replicated request, retried per its target until the deadline.
    pub(crate) async fn query(
        &self,
        target: QueryTarget,
        operation: Operation,
        body: Bytes,
        extra_wait_ms: u64,
    ) -> Result<Bytes, ClientError> {
        // Each attempt's timeout is the driver's (from the nodes' health);
        // a question for one node ends at its first unanswered attempt.
        let deadline_ms = self.inner.config.deadline_ms + extra_wait_ms;
        let (reply, outcome) = oneshot::channel();
        let command = DriverCommand::Query {
            target,
            operation,
            body,
            extra_wait_ms,
            deadline_ms,
            reply,
        };
        self.inner
            .commands
            .send(command)
            .map_err(|_| ClientError::Closed)?;
        outcome.await.map_err(|_| ClientError::Closed)?
    }

    pub(crate) async fn ask_driver<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<T>) -> DriverCommand,
    ) -> Result<T, ClientError> {
        let (reply, answer) = oneshot::channel();
        self.inner
            .commands
            .send(command(reply))
            .map_err(|_| ClientError::Closed)?;
        answer.await.map_err(|_| ClientError::Closed)
    }

    /// Routing for every stream and topic (also refreshes the client's own).
    pub async fn metadata(&self) -> Result<MetadataReply, ClientError> {
        self.metadata_for(MetadataRequest::default()).await
    }

    async fn metadata_for(&self, request: MetadataRequest) -> Result<MetadataReply, ClientError> {
        let body = Bytes::from(request.to_vec());
        let reply = self
            .query(QueryTarget::AnyNode, Operation::Metadata, body, 0)
            .await?;
        MetadataReply::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("metadata reply", error))
    }

    /// One topic's policies and partitions, fresh from the cluster.
    pub async fn topic(&self, stream: &str, topic: &str) -> Result<TopicInfo, ClientError> {
        check_name("stream", stream)?;
        check_name("topic", topic)?;
        let request = MetadataRequest {
            stream: Some(stream.to_owned()),
            topic: Some(topic.to_owned()),
        };
        let reply = self.metadata_for(request).await?;
        reply
            .topics
            .into_iter()
            .find(|info| info.stream == stream && info.topic == topic)
            .ok_or_else(|| ClientError::UnknownTopic {
                message: format!("{stream}/{topic} is not in the cluster's metadata"),
            })
    }

    /// The topic from the client's routing, fetched when not known yet.
    pub(crate) async fn known_topic(
        &self,
        stream: &str,
        topic: &str,
    ) -> Result<TopicInfo, ClientError> {
        match self.inner.shared.topic(stream, topic) {
            Some(info) => Ok(info),
            None => self.topic(stream, topic).await,
        }
    }

    /// The group id of a partition.
    pub(crate) async fn partition_group(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
    ) -> Result<u64, ClientError> {
        let info = self.known_topic(stream, topic).await?;
        partition_group_of(&info, partition)
    }

    /// Creates a stream (a namespace of topics). `AlreadyExists` if it does.
    pub async fn create_stream(&self, name: &str) -> Result<(), ClientError> {
        check_name("stream", name)?;
        let body = Bytes::from(
            CreateStream {
                name: name.to_owned(),
            }
            .to_vec(),
        );
        let reply = self
            .replicated(METADATA_GROUP, Operation::CreateStream, body)
            .await?;
        Empty::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("create stream reply", error))?;
        Ok(())
    }

    /// Creates a topic; returns the group id of each partition, in order.
    /// `AlreadyExists` if it does.
    pub async fn create_topic(&self, spec: TopicSpec) -> Result<Vec<u64>, ClientError> {
        check_name("stream", &spec.stream)?;
        check_name("topic", &spec.topic)?;
        let partition_range = 1..=PARTITIONS_PER_TOPIC_MAX;
        if !partition_range.contains(&spec.partition_count) {
            return Err(invalid("partition_count must be in 1..=4096"));
        }
        if spec.replica_count == 0 || spec.replica_count >= strand_wire::REPLICAS_MAX {
            return Err(invalid("replica_count must be in 1..=15"));
        }
        let segment_range = SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX;
        if spec
            .segment_bytes
            .is_some_and(|bytes| !segment_range.contains(&bytes))
        {
            return Err(invalid(
                "segment_bytes must be in 65536..=1073741824 (64 KiB to 1 GiB)",
            ));
        }
        let request = CreateTopic {
            stream: spec.stream,
            topic: spec.topic,
            partition_count: spec.partition_count,
            replica_count: spec.replica_count,
            confirm: spec.confirm,
            durability: spec.durability,
            consumer_offset_durability: spec.consumer_offset_durability,
            retention_bytes: spec.retention_bytes,
            retention_ms: spec.retention_ms,
            segment_bytes: spec.segment_bytes,
        };
        let body = Bytes::from(request.to_vec());
        let reply = self
            .replicated(METADATA_GROUP, Operation::CreateTopic, body)
            .await?;
        let created = TopicCreated::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("create topic reply", error))?;
        if created.groups.len() != request.partition_count as usize {
            return Err(ClientError::Protocol {
                reason: format!(
                    "create topic returned {} groups for {} partitions",
                    created.groups.len(),
                    request.partition_count
                ),
            });
        }
        Ok(created.groups)
    }

    /// Deletes a topic: every node removes its partitions and their records,
    /// and requests still on their way to them are answered `Deleted`.
    /// Returns the deleted partitions' groups, ascending.
    ///
    /// The name is free again, and a topic created under it is a new topic
    /// with new groups: this client forgets its routing of the old one, so
    /// later calls look the name up again (a [`Producer`] of it does so at
    /// its first `Deleted` answer).
    ///
    /// `UnknownStream` or `UnknownTopic` when there is no such topic (also
    /// what a retry by hand after `OutcomeUnknown` gets if the first attempt
    /// deleted it).
    pub async fn delete_topic(&self, stream: &str, topic: &str) -> Result<Vec<u64>, ClientError> {
        check_name("stream", stream)?;
        check_name("topic", topic)?;
        let request = DeleteTopic {
            stream: stream.to_owned(),
            topic: topic.to_owned(),
        };
        let body = Bytes::from(request.to_vec());
        let reply = self
            .replicated(METADATA_GROUP, Operation::DeleteTopic, body)
            .await;
        // Whatever the answer (an unknown outcome may have deleted it), a
        // fresh lookup is the only safe routing now.
        self.forget_topic(stream, topic);
        let deleted = TopicsDeleted::from_bytes(&reply?)
            .map_err(|error| ClientError::from_body_error("delete topic reply", error))?;
        Ok(deleted.groups)
    }

    /// Deletes a stream and every topic in it, as [`Client::delete_topic`]
    /// deletes one. Returns the groups of every partition deleted,
    /// ascending (none for a stream without topics). `UnknownStream` when
    /// there is no such stream.
    pub async fn delete_stream(&self, name: &str) -> Result<Vec<u64>, ClientError> {
        check_name("stream", name)?;
        let body = Bytes::from(
            DeleteStream {
                name: name.to_owned(),
            }
            .to_vec(),
        );
        let reply = self
            .replicated(METADATA_GROUP, Operation::DeleteStream, body)
            .await;
        self.inner.shared.forget_stream(name);
        let deleted = TopicsDeleted::from_bytes(&reply?)
            .map_err(|error| ClientError::from_body_error("delete stream reply", error))?;
        Ok(deleted.groups)
    }

    /// Changes a topic's retention limits and confirm policy without
    /// recreating it (its records and groups stay).
    ///
    /// The retention limits change in one request for the whole topic,
    /// first; each replica applies them at once. A confirm policy then
    /// changes partition by partition, each through a reassignment onto
    /// its current replicas (the way `partition reassign --confirm` does
    /// it); partitions whose replicas already report the policy are left
    /// alone. Every partition is tried: `PartitionsRefused` names those
    /// refused (for example `Unavailable`: a reassignment of it is still in
    /// progress) after the others were changed; running the same change
    /// again later finishes it.
    ///
    /// `InvalidArgument` for a change that changes nothing;
    /// `UnknownStream` or `UnknownTopic` when there is no such topic (then
    /// nothing changed).
    pub async fn alter_topic(
        &self,
        stream: &str,
        topic: &str,
        change: TopicChange,
    ) -> Result<(), ClientError> {
        check_name("stream", stream)?;
        check_name("topic", topic)?;
        if change.is_empty() {
            return Err(invalid(
                "a topic change needs retention_bytes, retention_ms or confirm",
            ));
        }
        if change.confirm == Some(ConfirmPolicy::Count(0)) {
            return Err(invalid("a confirm count must be at least 1"));
        }
        if change.changes_retention() {
            let request = AlterTopic {
                stream: stream.to_owned(),
                topic: topic.to_owned(),
                retention_bytes: change.retention_bytes,
                retention_ms: change.retention_ms,
            };
            let body = Bytes::from(request.to_vec());
            let reply = self
                .replicated(METADATA_GROUP, Operation::AlterTopic, body)
                .await;
            self.forget_topic(stream, topic);
            Empty::from_bytes(&reply?)
                .map_err(|error| ClientError::from_body_error("alter topic reply", error))?;
        }
        if let Some(confirm) = change.confirm {
            let confirmed = self.confirm_every_partition(stream, topic, confirm).await;
            self.forget_topic(stream, topic);
            confirmed?;
        }
        Ok(())
    }

    /// Gives a topic more partitions, `partition_count` in all (more than
    /// it has, at most 4096), with the topic's policies and replica count;
    /// existing partitions and their records stay where they are. Returns
    /// the new partitions' groups, in partition order.
    ///
    /// This client forgets its routing of the topic, so later calls see the
    /// new partitions; a [`Producer`] started before keeps the partitions
    /// it had (start a new one to write to the new ones).
    ///
    /// `InvalidRequest` when the topic already has `partition_count` or
    /// more; `UnknownStream` or `UnknownTopic` when there is no such topic.
    pub async fn add_partitions(
        &self,
        stream: &str,
        topic: &str,
        partition_count: u32,
    ) -> Result<Vec<u64>, ClientError> {
        check_name("stream", stream)?;
        check_name("topic", topic)?;
        if !(2..=PARTITIONS_PER_TOPIC_MAX).contains(&partition_count) {
            return Err(invalid(
                "partition_count is the topic's new total: 2..=4096, more than it has",
            ));
        }
        let request = AddPartitions {
            stream: stream.to_owned(),
            topic: topic.to_owned(),
            partition_count,
        };
        let body = Bytes::from(request.to_vec());
        let reply = self
            .replicated(METADATA_GROUP, Operation::AddPartitions, body)
            .await;
        self.forget_topic(stream, topic);
        let added = TopicCreated::from_bytes(&reply?)
            .map_err(|error| ClientError::from_body_error("add partitions reply", error))?;
        // The topic had at least one partition before, so fewer were added
        // than the new total, and at least one was.
        if added.groups.is_empty() || added.groups.len() >= partition_count as usize {
            return Err(ClientError::Protocol {
                reason: format!(
                    "adding partitions up to {partition_count} returned {} new groups",
                    added.groups.len()
                ),
            });
        }
        Ok(added.groups)
    }

    /// Drops the client's routing of a topic: the next call that needs it
    /// looks it up again.
    pub(crate) fn forget_topic(&self, stream: &str, topic: &str) {
        self.inner.shared.forget_topic(stream, topic);
    }

    /// Passes on `outcome` of a call on a partition of `stream/topic`; when
    /// the topic was deleted, first forgets the topic's routing, so the
    /// next call finds it gone (or created anew, with new groups) instead
    /// of asking the deleted groups again.
    fn forget_if_deleted<T>(
        &self,
        stream: &str,
        topic: &str,
        outcome: Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        if matches!(outcome, Err(ClientError::Deleted { .. })) {
            self.forget_topic(stream, topic);
        }
        outcome
    }

    /// Appends `records` to a partition as one batch; returns where they landed.
    /// Retried with the same request number until acknowledged, so it is
    /// written once, or the error says it may have been (`OutcomeUnknown`).
    pub async fn produce(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        records: Vec<NewRecord>,
    ) -> Result<ProduceAck, ClientError> {
        if records.is_empty() {
            return Err(invalid("produce needs at least one record"));
        }
        for record in &records {
            record.check()?;
        }
        let group = self.partition_group(stream, topic, partition).await?;
        let batch = records::build_batch(&records);
        let size = batch.bytes().len();
        if size > strand_wire::ops::PRODUCE_BATCH_BYTES_MAX {
            return Err(ClientError::TooLarge {
                size: size as u64,
                max: strand_wire::ops::PRODUCE_BATCH_BYTES_MAX as u64,
            });
        }
        let reply = self
            .replicated(group, Operation::Produce, batch.bytes().clone())
            .await;
        let reply = self.forget_if_deleted(stream, topic, reply)?;
        produce_ack(&reply, records.len())
    }

    /// Reads committed records from `offset` (the first batch returned may
    /// start earlier; those records are skipped). Waits up to `wait_ms` for
    /// records when none are there yet.
    pub async fn fetch(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        max_bytes: u32,
        wait_ms: u32,
    ) -> Result<FetchedRecords, ClientError> {
        let group = self.partition_group(stream, topic, partition).await?;
        let fetched = self.fetch_group(group, offset, max_bytes, wait_ms).await;
        self.forget_if_deleted(stream, topic, fetched)
    }

    /// The (log start offset, high watermark) of the partition of group id
    /// `group`, from a minimal fetch (a fetch below the log start answers
    /// them too).
    pub(crate) async fn partition_bounds(&self, group: u64) -> Result<(u64, u64), ClientError> {
        match self.fetch_group(group, 0, 1, 0).await {
            Ok(fetched) => Ok((fetched.log_start_offset, fetched.high_watermark)),
            Err(ClientError::OffsetOutOfRange {
                log_start_offset,
                high_watermark,
                ..
            }) => Ok((log_start_offset, high_watermark)),
            Err(error) => Err(error),
        }
    }

    pub(crate) async fn fetch_group(
        &self,
        group: u64,
        offset: u64,
        max_bytes: u32,
        wait_ms: u32,
    ) -> Result<FetchedRecords, ClientError> {
        if max_bytes == 0 || wait_ms > FETCH_WAIT_MS_MAX {
            return Err(invalid("fetch needs max_bytes >= 1 and wait_ms <= 60000"));
        }
        let request = FetchRequest {
            offset,
            max_bytes,
            wait_ms,
        };
        let body = Bytes::from(request.to_vec());
        let reply = self
            .query(
                QueryTarget::Group(group),
                Operation::Fetch,
                body,
                u64::from(wait_ms),
            )
            .await?;
        let reply = FetchReply::from_bytes(reply)
            .map_err(|error| ClientError::from_body_error("fetch reply", error))?;
        Ok(records::unpack_fetch(reply, offset))
    }

    /// Stores `consumer`'s cursor (the next offset it will read) on a partition.
    pub async fn store_cursor(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        consumer: &str,
        offset: u64,
    ) -> Result<(), ClientError> {
        let group = self.partition_group(stream, topic, partition).await?;
        let stored = self.store_cursor_group(group, consumer, offset).await;
        self.forget_if_deleted(stream, topic, stored)
    }

    pub(crate) async fn store_cursor_group(
        &self,
        group: u64,
        consumer: &str,
        offset: u64,
    ) -> Result<(), ClientError> {
        check_name("consumer", consumer)?;
        let request = StoreCursor {
            consumer: consumer.to_owned(),
            offset,
            fence: None,
        };
        let body = Bytes::from(request.to_vec());
        let reply = self
            .query(QueryTarget::Group(group), Operation::StoreCursor, body, 0)
            .await?;
        Empty::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("store cursor reply", error))?;
        Ok(())
    }

    /// Deletes `consumer`'s cursor on a partition: a later
    /// [`Client::get_cursor`] finds none, and the name no longer counts
    /// toward the partition's bound on consumer names (a store past it
    /// fails [`ClientError::LimitExceeded`]). Deleting a cursor that does
    /// not exist succeeds. A consumer group's cursor is deleted only while
    /// the group has no members.
    pub async fn delete_cursor(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        consumer: &str,
    ) -> Result<(), ClientError> {
        let group = self.partition_group(stream, topic, partition).await?;
        let deleted = self.delete_cursor_group(group, consumer).await;
        self.forget_if_deleted(stream, topic, deleted)
    }

    async fn delete_cursor_group(&self, group: u64, consumer: &str) -> Result<(), ClientError> {
        check_name("consumer", consumer)?;
        let request = DeleteCursor {
            consumer: consumer.to_owned(),
        };
        let body = Bytes::from(request.to_vec());
        let reply = self
            .query(QueryTarget::Group(group), Operation::DeleteCursor, body, 0)
            .await?;
        Empty::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("delete cursor reply", error))?;
        Ok(())
    }

    /// Reads `consumer`'s stored cursor on a partition (`None`: never stored).
    pub async fn get_cursor(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        consumer: &str,
    ) -> Result<Option<u64>, ClientError> {
        let group = self.partition_group(stream, topic, partition).await?;
        let cursor = self.get_cursor_group(group, consumer).await;
        self.forget_if_deleted(stream, topic, cursor)
    }

    pub(crate) async fn get_cursor_group(
        &self,
        group: u64,
        consumer: &str,
    ) -> Result<Option<u64>, ClientError> {
        check_name("consumer", consumer)?;
        let body = Bytes::from(
            GetCursor {
                consumer: consumer.to_owned(),
            }
            .to_vec(),
        );
        let reply = self
            .query(QueryTarget::Group(group), Operation::GetCursor, body, 0)
            .await?;
        let reply = GetCursorReply::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("get cursor reply", error))?;
        Ok(reply.offset)
    }

    /// The first offset of a partition appended at or after `timestamp_ns`
    /// (ns since the Unix epoch, by the append time its primary stamped,
    /// which never goes back within a partition); the end of the partition
    /// (its high watermark) when every record is older. A time before the
    /// oldest retained record gives the earliest offset.
    pub async fn offset_for_time(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        timestamp_ns: u64,
    ) -> Result<u64, ClientError> {
        let group = self.partition_group(stream, topic, partition).await?;
        let body = Bytes::from(OffsetForTime { timestamp_ns }.to_vec());
        let reply = self
            .query(QueryTarget::Group(group), Operation::OffsetForTime, body, 0)
            .await;
        let reply = self.forget_if_deleted(stream, topic, reply)?;
        let reply = OffsetForTimeReply::from_bytes(&reply)
            .map_err(|error| ClientError::from_body_error("offset for time reply", error))?;
        Ok(reply.offset)
    }

    /// A batching producer for one topic. If the topic is deleted, its
    /// batches fail `Deleted` and it looks the topic up again (see
    /// [`Producer`]).
    pub async fn producer(
        &self,
        stream: &str,
        topic: &str,
        config: ProducerConfig,
    ) -> Result<Producer, ClientError> {
        config.validate()?;
        let info = self.known_topic(stream, topic).await?;
        let groups = info
            .partitions
            .iter()
            .map(|partition| partition.group)
            .collect();
        Ok(Producer::start(
            self.clone(),
            info.stream,
            info.topic,
            groups,
            config,
        ))
    }

    /// A consumer of one partition, positioned per `config.start_from`.
    pub async fn consumer(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        config: ConsumerConfig,
    ) -> Result<Consumer, ClientError> {
        let group = self.partition_group(stream, topic, partition).await?;
        Consumer::open(self.clone(), group, config).await
    }
}

/// The group of `partition` in `info`, or a typed error.
pub(crate) fn partition_group_of(info: &TopicInfo, partition: u32) -> Result<u64, ClientError> {
    info.partitions
        .iter()
        .find(|known| known.partition == partition)
        .map(|known| known.group)
        .ok_or_else(|| ClientError::UnknownPartition {
            stream: info.stream.clone(),
            topic: info.topic.clone(),
            partition,
            partition_count: info.partitions.len() as u32,
        })
}

/// Decodes a produce reply and checks it covers the records sent.
pub(crate) fn produce_ack(reply: &Bytes, record_count: usize) -> Result<ProduceAck, ClientError> {
    let reply = ProduceReply::from_bytes(reply)
        .map_err(|error| ClientError::from_body_error("produce reply", error))?;
    if reply.record_count as usize != record_count {
        return Err(ClientError::Protocol {
            reason: format!(
                "produce acknowledged {} records, {} were sent",
                reply.record_count, record_count
            ),
        });
    }
    Ok(ProduceAck {
        offset_base: reply.offset_base,
        record_count: reply.record_count,
    })
}

pub(crate) fn check_name(field: &'static str, name: &str) -> Result<(), ClientError> {
    strand_wire::codec::validate_name(field, name).map_err(|error| ClientError::InvalidArgument {
        reason: error.to_string(),
    })
}

pub(crate) fn invalid(reason: &str) -> ClientError {
    ClientError::InvalidArgument {
        reason: reason.to_owned(),
    }
}
