//! The read-back: once the load is over, every partition is fetched from its
//! start to its high watermark and every record fed to the [`Verifier`].
//!
//! Without a size limit a partition must start at offset 0. With one, the
//! read starts at the earliest retained offset (a fetch below it is refused
//! with `OffsetOutOfRange`, which names it) and follows it up if retention
//! drops more while the read goes on (the last commit of the load is
//! applied within about a second of its end); the verifier is told every
//! earliest offset seen, and judges the records below it as dropped.

use std::time::Duration;

use strand_client::{Client, ClientError};
use tokio::time::Instant;

use crate::keys::{KEY_SIZE, RecordKey};
use crate::load::{FETCH_BYTES_MAX, Load, ProducerOutcome};
use crate::retention::{RecordSizes, RetentionLimit};
use crate::verify::{Verification, Verifier};

/// How long the read-back may go without progress.
pub const READ_BACK_STALL_MAX: Duration = Duration::from_secs(60);

/// Reads every partition back and checks every acknowledged record; under
/// `retention`, from each partition's earliest retained offset.
pub async fn verify(
    client: &Client,
    load: &Load,
    retention: Option<RetentionLimit>,
    outcomes: &[ProducerOutcome],
) -> Verification {
    let mut verifier = Verifier::new(load.partitions, load.run_length());
    if let Some(limit) = retention {
        verifier = verifier.with_retention(limit, record_sizes(load));
    }
    for outcome in outcomes {
        let key = |sequence| RecordKey {
            producer: outcome.producer,
            sequence,
        };
        for (sequence, offset) in &outcome.acknowledged {
            verifier.acknowledged(key(*sequence), *offset);
        }
        for sequence in &outcome.failed {
            verifier.failed(key(*sequence));
        }
    }
    for partition in 0..load.partitions {
        let retained = retention.is_some();
        if let Err(reason) = read_back(client, load, partition, retained, &mut verifier).await {
            verifier.incomplete(reason);
        }
    }
    verifier.finish()
}

/// The log sizes of `load`'s records: what turns a byte limit into offsets.
pub fn record_sizes(load: &Load) -> RecordSizes {
    let record_encoded = strand_client::NewRecord::new(
        bytes::Bytes::from(vec![0; KEY_SIZE]),
        bytes::Bytes::from(vec![0; load.message_size]),
    )
    .encoded_size();
    RecordSizes::new(record_encoded as u64)
}

/// Feeds every record of `partition` to `verifier`, retrying failed fetches
/// until [`READ_BACK_STALL_MAX`] passes without progress. `retained`: the
/// topic has a size limit, so the partition may start above 0.
async fn read_back(
    client: &Client,
    load: &Load,
    partition: u32,
    retained: bool,
    verifier: &mut Verifier,
) -> Result<(), String> {
    let mut offset = 0;
    let mut progress_at = Instant::now();
    loop {
        let fetched = client
            .fetch(
                &load.stream,
                &load.topic,
                partition,
                offset,
                FETCH_BYTES_MAX,
                0,
            )
            .await;
        let fetched = match fetched {
            Ok(fetched) => fetched,
            Err(ClientError::OffsetOutOfRange {
                log_start_offset, ..
            }) if retained && log_start_offset > offset => {
                verifier.log_start(partition, log_start_offset);
                offset = log_start_offset;
                progress_at = Instant::now();
                continue;
            }
            Err(error @ ClientError::OffsetOutOfRange { .. }) if !retained => {
                return Err(format!(
                    "partition {partition}: fetch at {offset} on a topic without retention: \
                     {error}"
                ));
            }
            Err(error) => {
                if progress_at.elapsed() >= READ_BACK_STALL_MAX {
                    return Err(format!("partition {partition}: fetch at {offset}: {error}"));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        verifier.log_start(partition, fetched.log_start_offset);
        if fetched.records.is_empty() && fetched.next_offset >= fetched.high_watermark {
            verifier.high_watermark(partition, fetched.high_watermark);
            return Ok(());
        }
        if fetched.records.is_empty() {
            return Err(format!(
                "partition {partition}: nothing returned at offset {offset} below the high \
                 watermark {}",
                fetched.high_watermark
            ));
        }
        for record in &fetched.records {
            verifier.read(partition, record.offset, &record.key);
        }
        offset = fetched.next_offset;
        progress_at = Instant::now();
    }
}
