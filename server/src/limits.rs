//! The process limits a node depends on. Each hosted partition keeps a few
//! files open (its active segment, that segment's index, its cursor log), so
//! the open-files limit bounds how many partitions a node can host: a node
//! raises its soft limit to the hard one at start and says what that allows.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Files a hosted partition keeps open.
pub const FILES_PER_PARTITION: u64 = 3;

/// Files the node keeps open besides its partitions' (listeners, peer and
/// client connections, the WAL's rings, logs), as a margin.
pub const FILES_RESERVED: u64 = 512;

/// Raises the soft open-files limit to the hard one (no privilege needed);
/// returns the limit in force afterwards (`None`: unlimited).
pub fn raise_open_files_limit() -> Option<u64> {
    let limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if let Err(error) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(%error, "node: cannot raise the open-files limit");
            return limit.current;
        }
    }
    getrlimit(Resource::Nofile).current
}

/// How many partitions `limit` open files leave room for.
pub fn partitions_within(limit: u64) -> u64 {
    limit.saturating_sub(FILES_RESERVED) / FILES_PER_PARTITION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let hard = getrlimit(Resource::Nofile).maximum;
        assert_eq!(raise_open_files_limit(), hard);
    }

    #[test]
    fn the_budget_keeps_a_margin() {
        assert_eq!(partitions_within(20_000), (20_000 - 512) / 3);
        assert_eq!(partitions_within(100), 0);
    }
}
