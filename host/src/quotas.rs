//! The catalog's quotas: each user's produce, fetch and request rates, as an
//! admin set them (`SetQuota`). Kept apart from the users themselves, as
//! Kafka keeps its client quotas: a quota may name a user not created yet,
//! and outlives a user deleted and created again. Nodes enforce them (see
//! the server's `quota` module); the catalog only keeps them, in name order.

use bytes::Bytes;
use strand_wire::ResultCode;
use strand_wire::codec::Body;
use strand_wire::ops::{ErrorBody, Quota, QuotaList, SetQuota, USERS_MAX};

use crate::catalog::{Catalog, invalid};

impl Catalog {
    /// `user`'s quota, if one limits anything.
    pub fn quota(&self, user: &str) -> Option<&Quota> {
        self.quotas.get(user)
    }

    /// Every quota, by user name.
    pub fn quota_list(&self) -> QuotaList {
        QuotaList {
            quotas: self
                .quotas
                .iter()
                .map(|(user, quota)| (user.clone(), *quota))
                .collect(),
        }
    }

    pub(crate) fn set_quota(&mut self, body: &[u8]) -> Result<Bytes, ErrorBody> {
        let request = SetQuota::from_bytes(body).map_err(invalid)?;
        if request.quota.is_unlimited() {
            self.quotas.remove(&request.user);
            return Ok(Bytes::new());
        }
        if !self.quotas.contains_key(&request.user) && self.quotas.len() >= USERS_MAX {
            return Err(ErrorBody::message(
                ResultCode::InvalidRequest,
                format!("at most {USERS_MAX} users have quotas"),
            ));
        }
        self.quotas.insert(request.user, request.quota);
        Ok(Bytes::new())
    }
}

#[cfg(test)]
mod tests {
    use strand_wire::{Operation, Route};

    use super::*;

    #[test]
    fn a_quota_is_set_replaced_and_removed_by_zeros() {
        let mut catalog = Catalog::new(vec![1, 2, 3]);
        let quota = Quota {
            produce_bytes_per_sec: 1_000,
            fetch_bytes_per_sec: 0,
            requests_per_sec: 10,
        };
        let set = |user: &str, quota: Quota| {
            SetQuota {
                user: user.to_owned(),
                quota,
            }
            .to_vec()
        };
        catalog.set_quota(&set("slow", quota)).expect("set");
        assert_eq!(catalog.quota("slow"), Some(&quota));
        assert_eq!(catalog.quota("other"), None);
        let faster = Quota {
            produce_bytes_per_sec: 2_000,
            ..quota
        };
        catalog.set_quota(&set("slow", faster)).expect("replace");
        assert_eq!(
            catalog.quota_list().quotas,
            vec![("slow".to_owned(), faster)]
        );
        catalog
            .set_quota(&set("slow", Quota::default()))
            .expect("remove");
        assert_eq!(catalog.quota("slow"), None);
        assert_eq!(Operation::SetQuota.info().route, Route::MetadataReplicated);
    }
}
