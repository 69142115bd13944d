//! The catalog's bounds on what clients may create: streams, topics and
//! partitions per cluster (`strand_wire::ops::STREAMS_MAX`, `TOPICS_MAX`,
//! `PARTITIONS_MAX`). A create past one is refused `LimitExceeded`, the
//! same on every replica (the bounds are constants, never configuration,
//! so every replica applies the same ops to the same catalog).

use strand_wire::ResultCode;
use strand_wire::ops::{ErrorBody, PARTITIONS_MAX, STREAMS_MAX, TOPICS_MAX};

use crate::catalog::Catalog;

impl Catalog {
    /// Whether one more stream fits.
    pub(crate) fn room_for_stream(&self) -> Result<(), ErrorBody> {
        if self.streams.len() >= STREAMS_MAX {
            return Err(limit(format!(
                "the cluster keeps at most {STREAMS_MAX} streams: delete one first"
            )));
        }
        Ok(())
    }

    /// Whether one more topic of `partitions` partitions fits.
    pub(crate) fn room_for_topic(&self, partitions: u32) -> Result<(), ErrorBody> {
        let topics: usize = self.streams.values().map(|topics| topics.len()).sum();
        if topics >= TOPICS_MAX {
            return Err(limit(format!(
                "the cluster keeps at most {TOPICS_MAX} topics: delete one first"
            )));
        }
        self.room_for_partitions(partitions)
    }

    /// Whether `added` more partitions fit.
    pub(crate) fn room_for_partitions(&self, added: u32) -> Result<(), ErrorBody> {
        let held = self.groups.len();
        if held + added as usize > PARTITIONS_MAX {
            return Err(limit(format!(
                "the cluster keeps at most {PARTITIONS_MAX} partitions and holds {held}: \
                 {added} more do not fit; delete topics first"
            )));
        }
        Ok(())
    }
}

fn limit(message: String) -> ErrorBody {
    ErrorBody::message(ResultCode::LimitExceeded, message)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use strand_wire::ops::{AddPartitions, CreateStream, CreateTopic};
    use strand_wire::{Body, Durability};

    use super::*;

    fn stream(name: &str) -> Vec<u8> {
        CreateStream {
            name: name.to_owned(),
        }
        .to_vec()
    }

    fn topic(name: &str, partitions: u32) -> Vec<u8> {
        CreateTopic {
            stream: "s".to_owned(),
            topic: name.to_owned(),
            partition_count: partitions,
            replica_count: 1,
            confirm: None,
            durability: Some(Durability::Replicated),
            consumer_offset_durability: None,
            retention_bytes: 0,
            retention_ms: 0,
            segment_bytes: None,
        }
        .to_vec()
    }

    fn code(result: Result<Bytes, ErrorBody>) -> Option<ResultCode> {
        result.err().map(|error| error.code())
    }

    #[test]
    fn streams_topics_and_partitions_are_bounded_per_cluster() {
        let mut catalog = Catalog::new(vec![1]);
        for index in 0..STREAMS_MAX {
            catalog
                .create_stream(&stream(&format!("s{index}")))
                .expect("room");
        }
        let refused = catalog.create_stream(&stream("one-more"));
        assert_eq!(code(refused), Some(ResultCode::LimitExceeded));

        let mut catalog = Catalog::new(vec![1]);
        catalog.create_stream(&stream("s")).expect("stream");
        let per_topic = 4096;
        let full_topics = PARTITIONS_MAX / per_topic as usize - 1;
        for index in 0..full_topics {
            catalog
                .create_topic(&topic(&format!("t{index}"), per_topic))
                .expect("room");
        }
        catalog
            .create_topic(&topic("small", per_topic - 2))
            .expect("room");
        catalog.create_topic(&topic("tiny", 1)).expect("room");
        assert_eq!(catalog.groups.len(), PARTITIONS_MAX - 1);
        let add = AddPartitions {
            stream: "s".to_owned(),
            topic: "small".to_owned(),
            partition_count: per_topic,
        };
        let refused = catalog.add_partitions(&add.to_vec());
        assert_eq!(code(refused), Some(ResultCode::LimitExceeded));
        let refused = catalog.create_topic(&topic("over", 2));
        assert_eq!(code(refused), Some(ResultCode::LimitExceeded));
        catalog
            .create_topic(&topic("last", 1))
            .expect("the last one fits");
        let refused = catalog.create_topic(&topic("over", 1));
        assert_eq!(code(refused), Some(ResultCode::LimitExceeded));
        assert_eq!(
            catalog.groups.len(),
            PARTITIONS_MAX,
            "nothing more was added"
        );

        let mut catalog = Catalog::new(vec![1]);
        catalog.create_stream(&stream("s")).expect("stream");
        for index in 0..TOPICS_MAX {
            catalog
                .create_topic(&topic(&format!("t{index}"), 1))
                .expect("room");
        }
        let refused = catalog.create_topic(&topic("over", 1));
        assert_eq!(code(refused), Some(ResultCode::LimitExceeded));
    }
}
