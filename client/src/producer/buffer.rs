//! The producer's buffer: room for records and for their bytes, taken by
//! `send` and given back, a batch's worth at once, when the batch that
//! carried them is answered, fails or is dropped unsent.

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::config::ProducerConfig;
use crate::error::ClientError;
use crate::records::NewRecord;

/// The producer's buffer: room for records and for their bytes, taken by
/// `send` and given back when a record's batch is answered (or fails).
#[derive(Debug)]
pub(super) struct Buffer {
    pub(super) permits: Arc<BufferPermits>,
    bytes_max: usize,
}

/// The two bounds of a producer's buffer, shared by its senders (who take
/// room) and its task (which gives a batch's room back in one call).
#[derive(Debug)]
pub(super) struct BufferPermits {
    records: Semaphore,
    bytes: Semaphore,
}

impl Buffer {
    pub(super) fn new(config: &ProducerConfig) -> Buffer {
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
    pub(super) async fn room_for(&self, record: &NewRecord) -> Result<Charge, ClientError> {
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
pub(super) struct Charge {
    bytes: u32,
}

/// Buffer room held by a batch's records together, given back when the
/// batch is dropped (answered, failed or never sent).
#[derive(Debug)]
pub(super) struct Room {
    permits: Arc<BufferPermits>,
    records: usize,
    bytes: usize,
}

impl Room {
    pub(super) fn new(permits: &Arc<BufferPermits>) -> Room {
        Room {
            permits: Arc::clone(permits),
            records: 0,
            bytes: 0,
        }
    }

    /// Takes a record's room into this one (a record joining its batch).
    pub(super) fn add(&mut self, charge: Charge) {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;

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
