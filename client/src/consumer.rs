//! `Consumer`: reads one partition from a position, long-polling for new
//! records, and stores its position as a named cursor on the partition.
//!
//! Delivery is at least once: after a failover the stored cursor may be
//! older than the last commit (a promoted replica may hold fewer cursor
//! events), so records can be read again; none is ever skipped.

use crate::client::{Client, check_name, invalid};
use crate::config::{ConsumerConfig, StartFrom};
use crate::error::ClientError;
use crate::records::ConsumedRecord;

/// A reader of one partition.
#[derive(Debug, Clone)]
pub struct Consumer {
    client: Client,
    group: u64,
    config: ConsumerConfig,
    position: u64,
    high_watermark: Option<u64>,
}

impl Consumer {
    pub(crate) async fn open(
        client: Client,
        group: u64,
        config: ConsumerConfig,
    ) -> Result<Consumer, ClientError> {
        if let Some(name) = &config.name {
            check_name("consumer", name)?;
        }
        if config.max_bytes == 0 || config.wait_ms > crate::client::FETCH_WAIT_MS_MAX {
            return Err(invalid(
                "consumer needs max_bytes >= 1 and wait_ms <= 60000",
            ));
        }
        let mut consumer = Consumer {
            client,
            group,
            config,
            position: 0,
            high_watermark: None,
        };
        consumer.position = consumer.start_position().await?;
        Ok(consumer)
    }

    async fn start_position(&mut self) -> Result<u64, ClientError> {
        match self.config.start_from.clone() {
            StartFrom::Offset(offset) => Ok(offset),
            StartFrom::Earliest => Ok(self.bounds().await?.0),
            StartFrom::Latest => Ok(self.bounds().await?.1),
            StartFrom::StoredCursor => {
                let Some(name) = self.config.name.clone() else {
                    return Err(invalid("StartFrom::StoredCursor needs a consumer name"));
                };
                match self.client.get_cursor_group(self.group, &name).await? {
                    Some(offset) => Ok(offset),
                    None => Ok(self.bounds().await?.0),
                }
            }
        }
    }

    /// The partition's (log start offset, high watermark), from a minimal fetch.
    async fn bounds(&mut self) -> Result<(u64, u64), ClientError> {
        let (log_start, high_watermark) = self.client.partition_bounds(self.group).await?;
        self.high_watermark = Some(high_watermark);
        Ok((log_start, high_watermark))
    }

    /// The offset the next poll reads from.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Moves the position (for example to `log_start_offset` after
    /// `OffsetOutOfRange`).
    pub fn seek(&mut self, offset: u64) {
        self.position = offset;
    }

    /// Records committed but not read yet, as of the last poll.
    pub fn lag(&self) -> Option<u64> {
        self.high_watermark
            .map(|high_watermark| high_watermark.saturating_sub(self.position))
    }

    /// Reads the next records, waiting up to `wait_ms` when none are there;
    /// an empty result means none arrived in time. Advances the position.
    pub async fn poll(&mut self) -> Result<Vec<ConsumedRecord>, ClientError> {
        let fetched = self
            .client
            .fetch_group(
                self.group,
                self.position,
                self.config.max_bytes,
                self.config.wait_ms,
            )
            .await?;
        self.high_watermark = Some(fetched.high_watermark);
        self.position = fetched.next_offset;
        Ok(fetched.records)
    }

    /// Stores the position as this consumer's cursor.
    pub async fn commit(&self) -> Result<(), ClientError> {
        self.commit_offset(self.position).await
    }

    /// Stores `offset` (the next offset to read) as this consumer's cursor.
    pub async fn commit_offset(&self, offset: u64) -> Result<(), ClientError> {
        let Some(name) = &self.config.name else {
            return Err(invalid(
                "commit needs a consumer name (ConsumerConfig::name)",
            ));
        };
        self.client
            .store_cursor_group(self.group, name, offset)
            .await
    }
}
