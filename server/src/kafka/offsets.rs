//! Kafka's ListOffsets, from each partition's primary: the earliest and
//! latest offsets are the bounds a Strand fetch past the end reports, and
//! an offset for a time is Strand's `OffsetForTime` (the time the primary
//! appended each batch, as Kafka's `LogAppendTime`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strand_kafka::api::{self, RequestHeader};
use strand_kafka::errors::{code, from_result};
use strand_kafka::list_offsets::{
    EARLIEST, LATEST, MAX_TIMESTAMP, OffsetFound, OffsetQuery, encode,
};
use strand_wire::ops::{ErrorBody, FetchRequest, OffsetForTime, OffsetForTimeReply};
use strand_wire::{Body, Operation, ResultCode};

use crate::kafka::link::Link;
use crate::kafka::metadata::{group_of, leader_epoch};

/// How long one lookup may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves a ListOffsets; the response frame.
pub async fn serve(
    link: Arc<Link>,
    header: RequestHeader,
    queries: Vec<(String, Vec<OffsetQuery>)>,
) -> Option<Bytes> {
    let mut topics = Vec::with_capacity(queries.len());
    for (name, partitions) in queries {
        let mut found = Vec::with_capacity(partitions.len());
        for query in partitions {
            found.push(look_up(&link, &name, query).await);
        }
        topics.push((name, found));
    }
    Some(api::response_frame(&header, encode(&header, &topics)))
}

/// Serves an OffsetForLeaderEpoch: each partition's current view as the
/// epoch and its high watermark as where that epoch ends. A consumer asks
/// this to learn whether the log it read was cut below its position; a
/// Strand partition never cuts a committed record, and a consumer reads
/// only committed ones, so the answer never sends it back.
pub async fn leader_epochs(
    link: Arc<Link>,
    header: RequestHeader,
    queries: Vec<strand_kafka::list_offsets::EpochQuery>,
) -> Option<Bytes> {
    let mut topics = Vec::with_capacity(queries.len());
    for (name, partitions) in queries {
        let mut found = Vec::with_capacity(partitions.len());
        for (partition, _epoch) in partitions {
            let query = OffsetQuery {
                partition,
                timestamp: LATEST,
            };
            found.push(look_up(&link, &name, query).await);
        }
        topics.push((name, found));
    }
    let body = strand_kafka::list_offsets::encode_leader_epochs(&header, &topics);
    Some(api::response_frame(&header, body))
}

/// One partition's offset for its query.
async fn look_up(link: &Link, name: &str, query: OffsetQuery) -> OffsetFound {
    let mut found = OffsetFound {
        partition: query.partition,
        error_code: code::NONE,
        timestamp: -1,
        offset: -1,
        leader_epoch: -1,
    };
    let group = match group_of(link.shared(), name, query.partition) {
        Ok(group) => group,
        Err(error_code) => {
            found.error_code = error_code;
            return found;
        }
    };
    found.leader_epoch = leader_epoch(link.shared(), group);
    let (log_start, high_watermark) = match bounds(link, group).await {
        Ok(bounds) => bounds,
        Err(error_code) => {
            found.error_code = error_code;
            return found;
        }
    };
    match query.timestamp {
        LATEST => found.offset = high_watermark as i64,
        EARLIEST => found.offset = log_start as i64,
        MAX_TIMESTAMP => {
            found.offset = high_watermark.checked_sub(1).map_or(-1, |last| last as i64)
        }
        time if time >= 0 => match at_time(link, group, time).await {
            Ok(offset) if offset < high_watermark => {
                found.offset = offset as i64;
                found.timestamp = time;
            }
            Ok(_) => {}
            Err(error_code) => found.error_code = error_code,
        },
        _ => found.error_code = code::INVALID_REQUEST,
    }
    found
}

/// The partition's first retained offset and its high watermark: what a
/// fetch past any offset reports.
async fn bounds(link: &Link, group: u64) -> Result<(u64, u64), i16> {
    let past_the_end = FetchRequest {
        offset: u64::MAX,
        max_bytes: 1,
        wait_ms: 0,
    };
    let body = Bytes::from(past_the_end.to_vec());
    let (sent, _) = link.send(group, Operation::Fetch, body).await;
    let answer = link.answer(sent, LOOKUP_TIMEOUT).await;
    match ErrorBody::from_bytes(answer.result, &answer.body) {
        Ok(ErrorBody::OffsetOutOfRange {
            log_start_offset,
            high_watermark,
            ..
        }) => Ok((log_start_offset, high_watermark)),
        _ if answer.result == ResultCode::OffsetOutOfRange || answer.result == ResultCode::Ok => {
            Err(code::UNKNOWN_SERVER_ERROR)
        }
        _ => Err(from_result(answer.result)),
    }
}

/// The first offset appended at or after `time_ms`.
async fn at_time(link: &Link, group: u64, time_ms: i64) -> Result<u64, i16> {
    let query = OffsetForTime {
        timestamp_ns: (time_ms as u64).saturating_mul(1_000_000),
    };
    let body = Bytes::from(query.to_vec());
    let (sent, _) = link.send(group, Operation::OffsetForTime, body).await;
    let answer = link.answer(sent, LOOKUP_TIMEOUT).await;
    if answer.result != ResultCode::Ok {
        return Err(from_result(answer.result));
    }
    OffsetForTimeReply::from_bytes(&answer.body)
        .map(|reply| reply.offset)
        .map_err(|_| code::UNKNOWN_SERVER_ERROR)
}
