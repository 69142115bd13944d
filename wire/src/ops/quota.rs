//! Quotas: how much one user may produce, fetch and ask per second on each
//! node. Set by an admin (`SetQuota`, replicated in the catalog), listed by
//! any node (`ListQuotas`). A node enforces them by delaying: a request over
//! its user's rate waits before it is handled (and the connection's later
//! requests with it), and its reply's `throttle_ms` says how long, as
//! Kafka's `throttle_time_ms` does.

use crate::codec::{Body, BodyReader, BodyWriter};
use crate::error::BodyError;
use crate::ops::USERS_MAX;

/// One user's rates; 0 means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quota {
    /// Bytes of produced batches per second.
    pub produce_bytes_per_sec: u64,
    /// Bytes of fetch replies per second.
    pub fetch_bytes_per_sec: u64,
    /// Requests per second, of any kind.
    pub requests_per_sec: u32,
}

impl Quota {
    /// Whether the quota limits nothing (setting it removes the user's).
    pub fn is_unlimited(&self) -> bool {
        *self == Quota::default()
    }
}

fn write_quota(writer: &mut BodyWriter, quota: &Quota) {
    writer.u64(quota.produce_bytes_per_sec);
    writer.u64(quota.fetch_bytes_per_sec);
    writer.u32(quota.requests_per_sec);
}

fn read_quota(reader: &mut BodyReader<'_>) -> Result<Quota, BodyError> {
    Ok(Quota {
        produce_bytes_per_sec: reader.u64("produce bytes per second")?,
        fetch_bytes_per_sec: reader.u64("fetch bytes per second")?,
        requests_per_sec: reader.u32("requests per second")?,
    })
}

/// Set a user's quota (all zeros: remove it). Metadata plane, admin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetQuota {
    /// The user (it need not exist yet: the quota waits for it).
    pub user: String,
    /// Its rates.
    pub quota: Quota,
}

impl Body for SetQuota {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.str(&self.user);
        write_quota(writer, &self.quota);
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<SetQuota, BodyError> {
        Ok(SetQuota {
            user: reader.name("user")?,
            quota: read_quota(reader)?,
        })
    }
}

/// The reply to `ListQuotas`: every user's quota, by name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QuotaList {
    /// Users and their quotas, sorted by name.
    pub quotas: Vec<(String, Quota)>,
}

impl Body for QuotaList {
    fn encode(&self, writer: &mut BodyWriter) {
        writer.list(&self.quotas, |writer, (user, quota)| {
            writer.str(user);
            write_quota(writer, quota);
        });
    }

    fn decode(reader: &mut BodyReader<'_>) -> Result<QuotaList, BodyError> {
        let quotas = reader.list("quotas", 22, |reader| {
            Ok((reader.name("user")?, read_quota(reader)?))
        })?;
        if quotas.len() > USERS_MAX {
            return Err(BodyError::Invalid {
                field: "quotas",
                reason: "more than the most users",
            });
        }
        Ok(QuotaList { quotas })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_bodies_round_trip() {
        let set = SetQuota {
            user: "slow".to_owned(),
            quota: Quota {
                produce_bytes_per_sec: 10_000_000,
                fetch_bytes_per_sec: 0,
                requests_per_sec: 500,
            },
        };
        assert_eq!(SetQuota::from_bytes(&set.to_vec()), Ok(set.clone()));
        let list = QuotaList {
            quotas: vec![("slow".to_owned(), set.quota)],
        };
        assert_eq!(QuotaList::from_bytes(&list.to_vec()), Ok(list));
        assert!(Quota::default().is_unlimited());
        assert!(!set.quota.is_unlimited());
    }
}
