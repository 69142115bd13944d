//! The process limits a node depends on, and how it spends its open-files
//! limit. A node raises its soft limit to the hard one at start and splits
//! it: a margin for peer sockets and short-lived opens, client connections
//! (at most a quarter of what is left, and at most the configured bound),
//! most of the rest for the WAL's files (active segments, cursor logs,
//! superblocks) and a share for read descriptors. Both pools are bounded and give descriptors of idle
//! files back (see `strand_wal::WalCore::set_descriptors_max` and
//! `strand_partition::ReadHandles`), so the limit bounds how many partitions
//! are *busy* at once, not how many a node hosts.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Files the node keeps open besides its partitions' (listeners, peer and
/// client connections, the WAL's rings, directory syncs, logs), as a margin.
pub const FILES_RESERVED: u64 = 1024;

/// The least either pool gets, however low the limit.
const POOL_MIN: usize = 16;

/// Used when the process has no open-files limit at all.
const UNLIMITED_AS: u64 = 1 << 20;

/// How the node spends its open-files limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorBudget {
    /// Descriptors the WAL writer holds at once.
    pub wal: usize,
    /// Read descriptors shared by the node's partitions.
    pub reads: usize,
    /// Client connections open at once.
    pub connections: usize,
}

impl DescriptorBudget {
    /// The split of `limit` (`None`: unlimited) for at most
    /// `connections_wanted` client connections: the margin first, then the
    /// connections (at most a quarter of the rest), then three quarters of
    /// what remains for the WAL and a quarter for reads.
    pub fn within(limit: Option<u64>, connections_wanted: usize) -> DescriptorBudget {
        let spendable = limit.unwrap_or(UNLIMITED_AS).saturating_sub(FILES_RESERVED);
        let connections = (connections_wanted as u64)
            .min(spendable / 4)
            .max(POOL_MIN as u64);
        let spendable = spendable.saturating_sub(connections);
        let wal = usize::try_from(spendable / 4 * 3).unwrap_or(usize::MAX);
        let reads = usize::try_from(spendable / 4).unwrap_or(usize::MAX);
        DescriptorBudget {
            wal: wal.max(POOL_MIN),
            reads: reads.max(POOL_MIN),
            connections: usize::try_from(connections).unwrap_or(usize::MAX),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let hard = getrlimit(Resource::Nofile).maximum;
        assert_eq!(raise_open_files_limit(), hard);
    }

    #[test]
    fn the_budget_keeps_a_margin_and_a_floor() {
        let budget = DescriptorBudget::within(Some(20_000), 10_000);
        let spendable = 20_000 - 1024;
        assert_eq!(budget.connections, spendable / 4, "at most a quarter");
        let rest = spendable - budget.connections;
        assert_eq!(budget.wal, rest / 4 * 3);
        assert_eq!(budget.reads, rest / 4);
        assert!(budget.wal + budget.reads + budget.connections + FILES_RESERVED as usize <= 20_000);
        let few = DescriptorBudget::within(Some(1 << 20), 100);
        assert_eq!(few.connections, 100, "the configured bound when it fits");
        let tiny = DescriptorBudget::within(Some(100), 10_000);
        assert_eq!((tiny.wal, tiny.reads), (POOL_MIN, POOL_MIN));
    }
}
