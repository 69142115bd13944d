//! Which user a client id belongs to.
//!
//! Replies are routed to the connection that last used a client id, and a
//! group's client table answers a repeated request number with the reply
//! it cached for that id. Unchecked, anyone who learns (or guesses) another
//! user's client id could take its replies, or replay a request number and
//! read the cached answer. So the first signed-in user (or the anonymous
//! caller of a cluster without sign-in) to use an id on this node owns it;
//! the same id from anyone else is refused (`PermissionDenied`) before the
//! request reaches a group. The table is bounded
//! ([`CLIENT_IDS_TRACKED_MAX`]); past the bound the id used longest ago is
//! forgotten, and a node keeps its own table (a new primary learns owners
//! afresh).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Client ids whose owner a node remembers at most.
pub const CLIENT_IDS_TRACKED_MAX: usize = 65_536;

/// The owner a caller that has not signed in is known as (no user name is
/// empty).
pub const ANONYMOUS: &str = "";

#[derive(Debug)]
struct Owners {
    owners: HashMap<u128, (Arc<str>, u64)>,
    order: BTreeMap<u64, u128>,
    next_use: u64,
    entries_max: usize,
}

/// Shards of the table, each under its own lock: every request passes
/// here, so requests of different clients rarely wait for each other.
const SHARDS: usize = 16;

/// The node's table of client id owners.
#[derive(Debug)]
pub struct ClientOwners {
    shards: Vec<Mutex<Owners>>,
}

impl Default for ClientOwners {
    fn default() -> ClientOwners {
        ClientOwners::new(CLIENT_IDS_TRACKED_MAX)
    }
}

impl ClientOwners {
    /// A table remembering at most `entries_max` ids (each shard its
    /// share, at least one).
    pub fn new(entries_max: usize) -> ClientOwners {
        assert!(entries_max > 0, "a table remembers at least one id");
        let shards = SHARDS.min(entries_max);
        ClientOwners {
            shards: (0..shards)
                .map(|_| {
                    Mutex::new(Owners {
                        owners: HashMap::new(),
                        order: BTreeMap::new(),
                        next_use: 0,
                        entries_max: entries_max / shards,
                    })
                })
                .collect(),
        }
    }

    fn shard(&self, client: u128) -> &Mutex<Owners> {
        // Client ids are random: their low bits spread them.
        &self.shards[(client % self.shards.len() as u128) as usize]
    }

    /// Uses `client` as `user`: `Ok` if the id is new (it becomes
    /// `user`'s) or `user`'s already; otherwise `Err` with its owner.
    pub fn claim(&self, client: u128, user: &str) -> Result<(), String> {
        let mut table = self.shard(client).lock().expect("client owners lock");
        let table = &mut *table;
        let used = table.next_use;
        table.next_use += 1;
        if let Some((owner, last_use)) = table.owners.get_mut(&client) {
            if &**owner != user {
                return Err(owner.to_string());
            }
            table.order.remove(last_use);
            *last_use = used;
            table.order.insert(used, client);
            return Ok(());
        }
        while table.owners.len() >= table.entries_max {
            let Some((_, oldest)) = table.order.pop_first() else {
                break;
            };
            table.owners.remove(&oldest);
        }
        table.owners.insert(client, (Arc::from(user), used));
        table.order.insert(used, client);
        assert_eq!(
            table.owners.len(),
            table.order.len(),
            "one order entry each"
        );
        Ok(())
    }

    /// Ids remembered now.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().expect("client owners lock").owners.len())
            .sum()
    }

    /// Whether no id is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_id_belongs_to_its_first_user() {
        let owners = ClientOwners::default();
        assert_eq!(owners.claim(7, "alice"), Ok(()));
        assert_eq!(owners.claim(7, "alice"), Ok(()), "again, same user");
        assert_eq!(owners.claim(7, "mallory"), Err("alice".to_owned()));
        assert_eq!(
            owners.claim(7, ANONYMOUS),
            Err("alice".to_owned()),
            "nor anonymous"
        );
        assert_eq!(owners.claim(8, "mallory"), Ok(()));
        assert_eq!(owners.claim(8, "alice"), Err("mallory".to_owned()));
    }

    #[test]
    fn the_table_is_bounded_and_forgets_the_id_used_longest_ago() {
        // 48 ids in 16 shards: 3 each; ids 16 apart share a shard.
        let owners = ClientOwners::new(48);
        let id = |index: u128| 5 + 16 * index;
        for index in 1..=3 {
            assert_eq!(owners.claim(id(index), "alice"), Ok(()));
        }
        assert_eq!(owners.claim(id(1), "alice"), Ok(()), "1 is used again");
        assert_eq!(owners.claim(id(4), "bob"), Ok(()));
        assert_eq!(owners.len(), 3);
        assert_eq!(owners.claim(id(1), "bob"), Err("alice".to_owned()), "kept");
        assert_eq!(owners.claim(id(2), "bob"), Ok(()), "2 was forgotten");
        for client in 0..10_000 {
            let _ = owners.claim(client, "carol");
        }
        assert!(owners.len() <= 48, "{}", owners.len());
    }
}
