//! Kafka's Produce: each partition's Kafka batches become Strand batches
//! (decompressed within a bound), sent as Strand `Produce` operations in
//! the order the requests came, and answered once the partition's confirm
//! rule holds.
//!
//! An idempotent producer's batches go as a sequenced client's (its
//! producer id and epoch), numbered by its own sequence: a retry at any
//! node is answered from the partition's client table with the offset
//! the batch got, and a batch out of sequence is refused, as Kafka does.
//!
//! `acks=all` (-1) and `acks=1` are answered alike, when the confirm rule
//! holds: Strand never acknowledges a record it could still lose to a
//! single failure, so `acks=1` gets the stronger promise. `acks=0` is
//! answered with nothing, as Kafka does.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use strand_kafka::api::{self, RequestHeader};
use strand_kafka::errors::{code, from_result, from_sequenced_result};
use strand_kafka::init_producer_id::{
    self, InitProducerIdRequest, PRODUCER_ID_LIMIT, producer_client_bits,
};
use strand_kafka::produce::{PartitionResult, ProduceRequest, encode};
use strand_kafka::{DecodeError, records};
use strand_wire::ops::ProduceReply;
use strand_wire::sequenced::sequenced_client;
use strand_wire::{Body, Operation, ResultCode};

use crate::kafka::link::{Link, Pending};
use crate::kafka::listener::Response;
use crate::kafka::metadata::group_of;
use crate::kafka::serve::Served;

/// Most bytes one Produce request's record sets may inflate to, over all
/// its partitions: a small compressed request cannot make the node hold
/// gigabytes.
pub const INFLATED_BYTES_MAX: usize = 64 * 1024 * 1024;

/// One partition's part of a produce: refused at once, or sent (each
/// batch's answer to come, and whether it went as an idempotent
/// producer's).
enum Part {
    Refused(i16, Option<String>),
    Sent(Vec<(Pending, bool)>),
}

/// Sends a Produce's batches, in order, and returns its response to come.
pub async fn serve(link: &Arc<Link>, header: RequestHeader, request: ProduceRequest) -> Served {
    let mut budget = INFLATED_BYTES_MAX;
    let mut throttle = Duration::ZERO;
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let mut parts = Vec::with_capacity(topic.partitions.len());
        for partition in &topic.partitions {
            let part = match request.transactional_id {
                Some(_) => Part::Refused(
                    code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    Some("transactions are not served".to_owned()),
                ),
                None => {
                    let sent = send(
                        link,
                        &topic.name,
                        partition.index,
                        &partition.records,
                        &mut budget,
                    )
                    .await;
                    throttle = throttle.max(sent.1);
                    sent.0
                }
            };
            parts.push((partition.index, part));
        }
        topics.push((topic.name.clone(), parts));
    }
    let timeout = Duration::from_millis(request.timeout_ms.clamp(1_000, 120_000) as u64);
    let link = Arc::clone(link);
    let task = tokio::spawn(async move {
        let results = finish(&link, topics, timeout).await;
        let throttle_ms = i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX);
        Some(api::response_frame(
            &header,
            encode(&header, &results, throttle_ms),
        ))
    });
    match request.acks {
        0 => Served::Silent,
        _ => Served::Respond(Response::Later(task)),
    }
}

/// Converts and sends one partition's record set.
async fn send(
    link: &Link,
    topic: &str,
    partition: i32,
    records: &[u8],
    budget: &mut usize,
) -> (Part, Duration) {
    let group = match group_of(link.shared(), topic, partition) {
        Ok(group) => group,
        Err(error_code) => return (Part::Refused(error_code, None), Duration::ZERO),
    };
    let batches = match records::to_strand(records, *budget) {
        Ok(batches) => batches,
        Err(error) => {
            let error_code = match error {
                DecodeError::TooLarge { .. } => code::MESSAGE_TOO_LARGE,
                _ => code::CORRUPT_MESSAGE,
            };
            return (
                Part::Refused(error_code, Some(error.to_string())),
                Duration::ZERO,
            );
        }
    };
    let mut sent = Vec::with_capacity(batches.len());
    let mut throttle = Duration::ZERO;
    for kafka in batches {
        let bytes = kafka.batch.bytes().clone();
        *budget = budget.saturating_sub(bytes.len());
        if kafka.producer_id < 0 {
            let (pending, delay) = link.send(group, Operation::Produce, bytes).await;
            throttle = throttle.max(delay);
            sent.push((pending, false));
            continue;
        }
        let Some(numbers) = sequenced_numbers(&kafka) else {
            let message = Some(format!(
                "producer {} is not one this cluster gave out",
                kafka.producer_id
            ));
            return (Part::Refused(code::UNKNOWN_PRODUCER_ID, message), throttle);
        };
        let (pending, delay) = link
            .send_numbered(group, Operation::Produce, bytes, numbers)
            .await;
        throttle = throttle.max(delay);
        sent.push((pending, true));
    }
    (Part::Sent(sent), throttle)
}

/// An idempotent producer's batch as a sequenced client's request: the
/// client is the producer at its epoch, the number its batch's first
/// sequence plus one (see `strand_wire::sequenced`).
fn sequenced_numbers(kafka: &records::KafkaBatch) -> Option<(u128, u64)> {
    let bits = producer_client_bits(kafka.producer_id, kafka.producer_epoch)?;
    let first = u64::try_from(kafka.base_sequence).ok()?;
    Some((sequenced_client(bits), first + 1))
}

/// Answers an InitProducerId: a new producer id at epoch 0, or the next
/// epoch of the id the producer has (a new id past the last epoch).
/// Transactional producers are refused.
pub fn init_producer(header: &RequestHeader, request: &InitProducerIdRequest) -> BytesMut {
    if request.transactional_id.is_some() {
        return init_producer_id::encode(
            header,
            code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            -1,
            -1,
        );
    }
    let renewed = producer_client_bits(request.producer_id, request.producer_epoch).is_some()
        && request.producer_epoch < i16::MAX - 1;
    let (producer_id, epoch) = match renewed {
        true => (request.producer_id, request.producer_epoch + 1),
        false => (rand::random_range(0..PRODUCER_ID_LIMIT), 0),
    };
    init_producer_id::encode(header, code::NONE, producer_id, epoch)
}

/// Waits for every partition's answers: its first batch's offset, or the
/// first error.
async fn finish(
    link: &Link,
    topics: Vec<(String, Vec<(i32, Part)>)>,
    timeout: Duration,
) -> Vec<(String, Vec<PartitionResult>)> {
    let mut results = Vec::with_capacity(topics.len());
    for (name, parts) in topics {
        let mut partitions = Vec::with_capacity(parts.len());
        for (index, part) in parts {
            let mut result = PartitionResult {
                index,
                error_code: code::NONE,
                base_offset: -1,
                log_start_offset: -1,
                message: None,
            };
            match part {
                Part::Refused(error_code, message) => {
                    result.error_code = error_code;
                    result.message = message;
                }
                Part::Sent(sent) => {
                    for (pending, sequenced) in sent {
                        let answer = link.answer(pending, timeout).await;
                        if result.error_code != code::NONE {
                            continue;
                        }
                        if answer.result != ResultCode::Ok {
                            result.error_code = match sequenced {
                                true => from_sequenced_result(answer.result),
                                false => from_result(answer.result),
                            };
                            result.message = answer.message();
                            continue;
                        }
                        if result.base_offset < 0
                            && let Ok(reply) = ProduceReply::from_bytes(&answer.body)
                        {
                            result.base_offset = reply.offset_base as i64;
                        }
                    }
                }
            }
            partitions.push(result);
        }
        results.push((name, partitions));
    }
    results
}
