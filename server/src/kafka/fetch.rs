//! Kafka's Fetch: each partition read with a Strand `Fetch` at its
//! primary, the Strand batches handed out as Kafka record batches (v2,
//! uncompressed; a batch may start before the offset asked for, which
//! Kafka clients skip, as they do for compressed batches). When nothing is
//! there and the client waits, every partition is long-polled at once and
//! the first to get records answers.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use strand_kafka::api::{self, RequestHeader};
use strand_kafka::errors::{code, from_result};
use strand_kafka::fetch::{FetchRequest, FetchedPartition, encode};
use strand_kafka::records;
use strand_wire::ops::{ErrorBody, FETCH_WAIT_MS_MAX, FetchReply, FetchRequest as StrandFetch};
use strand_wire::{Body, Operation, ResultCode};
use tokio::sync::mpsc;

use crate::kafka::link::{Answer, Link};
use crate::kafka::metadata::{group_of, leader_epoch};

/// How long a read that does not wait may take before it counts as lost.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Record bytes one Fetch answer gathers before it reads no more
/// partitions (the rest are answered empty, as Kafka does with a full
/// response): whatever the client's `max_bytes`, one fetch cannot make the
/// node hold more than this and one wave of reads.
pub const FETCH_RESPONSE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Partitions read (or long-polled) at once.
pub const READS_AT_ONCE: usize = 16;

/// One partition of the request and what it gave.
struct Slot {
    topic: usize,
    group: Result<u64, i16>,
    partition: i32,
    offset: i64,
    max_bytes: u32,
    fetched: Option<FetchedPartition>,
}

impl Slot {
    fn has_records(&self) -> bool {
        self.fetched
            .as_ref()
            .is_some_and(|fetched| !fetched.records.is_empty())
    }

    /// Whether a long poll may wait on it: readable, nothing yet.
    fn may_wait(&self) -> bool {
        self.group.is_ok()
            && self
                .fetched
                .as_ref()
                .is_some_and(|fetched| fetched.error_code == code::NONE)
            && !self.has_records()
    }
}

/// Serves a Fetch; the response frame.
pub async fn serve(link: Arc<Link>, header: RequestHeader, request: FetchRequest) -> Option<Bytes> {
    if request.session_id != 0 {
        let body = encode(&header, code::FETCH_SESSION_ID_NOT_FOUND, &[], 0);
        return Some(api::response_frame(&header, body));
    }
    let mut slots = slots(&link, &request);
    read(&link, &mut slots, 0).await;
    let bytes: usize = slots
        .iter()
        .filter_map(|slot| slot.fetched.as_ref())
        .map(|fetched| fetched.records.len())
        .sum();
    let wait_ms = request.max_wait_ms.clamp(0, FETCH_WAIT_MS_MAX as i32) as u32;
    if wait_ms > 0 && bytes < request.min_bytes.max(1) as usize && slots.iter().any(Slot::may_wait)
    {
        long_poll(&link, &mut slots, wait_ms).await;
    }
    let topics: Vec<(String, Vec<FetchedPartition>)> = request
        .topics
        .iter()
        .enumerate()
        .map(|(index, topic)| {
            let partitions = slots
                .iter_mut()
                .filter(|slot| slot.topic == index)
                .map(|slot| {
                    slot.fetched
                        .take()
                        .unwrap_or_else(|| failed(slot.partition, code::REQUEST_TIMED_OUT))
                })
                .collect();
            (topic.name.clone(), partitions)
        })
        .collect();
    Some(api::response_frame(
        &header,
        encode(&header, code::NONE, &topics, 0),
    ))
}

/// The request's partitions, each with its group (or why it has none).
fn slots(link: &Link, request: &FetchRequest) -> Vec<Slot> {
    let shared = link.shared();
    let response_max = request.max_bytes.max(1) as u32;
    let mut slots = Vec::new();
    for (index, topic) in request.topics.iter().enumerate() {
        for partition in &topic.partitions {
            let group = match partition.fetch_offset < 0 {
                true => Err(code::OFFSET_OUT_OF_RANGE),
                false => group_of(shared, &topic.name, partition.partition),
            };
            let max_bytes = (partition.partition_max_bytes.max(1) as u32).min(response_max);
            let fetched = group
                .err()
                .map(|error_code| failed(partition.partition, error_code));
            slots.push(Slot {
                topic: index,
                group,
                partition: partition.partition,
                offset: partition.fetch_offset,
                max_bytes,
                fetched,
            });
        }
    }
    slots
}

/// Reads the readable partitions, [`READS_AT_ONCE`] at a time, until the
/// answer holds [`FETCH_RESPONSE_BYTES_MAX`]; the partitions not read then
/// are answered empty.
async fn read(link: &Link, slots: &mut [Slot], wait_ms: u32) {
    let readable: Vec<usize> = (0..slots.len())
        .filter(|index| slots[*index].group.is_ok())
        .collect();
    let mut gathered = 0usize;
    for wave in readable.chunks(READS_AT_ONCE) {
        if gathered >= FETCH_RESPONSE_BYTES_MAX {
            for index in wave {
                let slot = &mut slots[*index];
                slot.fetched = Some(unread(slot));
            }
            continue;
        }
        let mut pending = Vec::with_capacity(wave.len());
        for index in wave {
            let slot = &slots[*index];
            let group = slot.group.expect("readable");
            let (sent, _) = link
                .send(group, Operation::Fetch, fetch_body(slot, wait_ms))
                .await;
            pending.push((*index, sent));
        }
        for (index, sent) in pending {
            let answer = link.answer(sent, READ_TIMEOUT).await;
            let slot = &mut slots[index];
            let epoch = slot
                .group
                .map_or(0, |group| leader_epoch(link.shared(), group));
            let fetched = fetched(slot.partition, &answer, epoch);
            gathered += fetched.records.len();
            slot.fetched = Some(fetched);
        }
    }
}

/// A partition left unread because the answer is full: no records, no
/// error; the client asks again from the same offset.
fn unread(slot: &Slot) -> FetchedPartition {
    FetchedPartition {
        partition: slot.partition,
        error_code: code::NONE,
        high_watermark: slot.offset,
        log_start_offset: -1,
        records: Bytes::new(),
    }
}

/// Long-polls the partitions that may wait (the first [`READS_AT_ONCE`]:
/// the others are read again by the client's next fetch); answers with the
/// first that gets records, or with what there is when the wait is over.
async fn long_poll(link: &Arc<Link>, slots: &mut [Slot], wait_ms: u32) {
    let (answered, mut answers) = mpsc::channel(slots.len().max(1));
    let mut waiting = 0usize;
    let waiting_max = READS_AT_ONCE;
    for (index, slot) in slots.iter().enumerate() {
        let Ok(group) = slot.group else { continue };
        if !slot.may_wait() || waiting >= waiting_max {
            continue;
        }
        let (sent, _) = link
            .send(group, Operation::Fetch, fetch_body(slot, wait_ms))
            .await;
        let (link, answered) = (Arc::clone(link), answered.clone());
        let timeout = Duration::from_millis(u64::from(wait_ms)) + READ_TIMEOUT;
        tokio::spawn(async move {
            let answer = link.answer(sent, timeout).await;
            let epoch = leader_epoch(link.shared(), group);
            let _ = answered.send((index, answer, epoch)).await;
        });
        waiting += 1;
    }
    drop(answered);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(u64::from(wait_ms));
    while waiting > 0 {
        let Ok(Some((index, answer, epoch))) =
            tokio::time::timeout_at(deadline, answers.recv()).await
        else {
            return;
        };
        waiting -= 1;
        let slot = &mut slots[index];
        slot.fetched = Some(fetched(slot.partition, &answer, epoch));
        if slot.has_records() {
            return;
        }
    }
}

fn fetch_body(slot: &Slot, wait_ms: u32) -> Bytes {
    let fetch = StrandFetch {
        offset: slot.offset as u64,
        max_bytes: slot.max_bytes,
        wait_ms,
    };
    Bytes::from(fetch.to_vec())
}

/// A partition that could not be read.
fn failed(partition: i32, error_code: i16) -> FetchedPartition {
    FetchedPartition {
        partition,
        error_code,
        high_watermark: -1,
        log_start_offset: -1,
        records: Bytes::new(),
    }
}

/// What a Strand fetch's answer gives a Kafka client.
fn fetched(partition: i32, answer: &Answer, leader_epoch: i32) -> FetchedPartition {
    if answer.result == ResultCode::OffsetOutOfRange
        && let Ok(ErrorBody::OffsetOutOfRange {
            log_start_offset,
            high_watermark,
            ..
        }) = ErrorBody::from_bytes(answer.result, &answer.body)
    {
        return FetchedPartition {
            partition,
            error_code: code::OFFSET_OUT_OF_RANGE,
            high_watermark: high_watermark as i64,
            log_start_offset: log_start_offset as i64,
            records: Bytes::new(),
        };
    }
    if answer.result != ResultCode::Ok {
        return failed(partition, from_result(answer.result));
    }
    let Ok(reply) = FetchReply::from_bytes(answer.body.clone()) else {
        return failed(partition, code::CORRUPT_MESSAGE);
    };
    let size: usize = reply
        .batches
        .iter()
        .map(|batch| batch.bytes().len() + 64)
        .sum();
    let mut out = BytesMut::with_capacity(size);
    for batch in &reply.batches {
        records::to_kafka(batch, leader_epoch, &mut out);
    }
    FetchedPartition {
        partition,
        error_code: code::NONE,
        high_watermark: reply.high_watermark as i64,
        log_start_offset: reply.log_start_offset as i64,
        records: out.freeze(),
    }
}
