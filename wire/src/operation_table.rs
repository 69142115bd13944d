//! One table of the client operations: for each [`Operation`], one row
//! saying where a request of it goes, the right its caller needs, and the
//! yes/no facts the rest of a node reads (node-only, cluster-admin,
//! audited, replicated, offsets taken).
//!
//! The client port's routing, the rights check and the audit log read
//! [`Operation::info`] and keep no list of operations of their own. Adding
//! an operation means adding its row here (the match is exhaustive, so the
//! crate does not compile until the row exists), its body to
//! [`crate::ops::check_request`], and its handler where its route leads.
//!
//! `GroupStatus` (one group's status, which nodes ask each other before a
//! partition move) was added so: the variant in `operation.rs`; the row
//! `Op::GroupStatus => (Local, SignedIn, Plain)` here; its bodies
//! (`GroupStatusRequest`, `GroupStatusReply`) in `ops/status.rs` and their
//! arm in `check_request`; and the node's answer in its local answers.
//! Routing, the rights check and the audit log needed no edit.

use crate::operation::Operation;
use crate::ops::Right;

/// Where a request of an operation goes, and who answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// Names group 0; prepared in the metadata plane's log, changes the
    /// catalog.
    MetadataReplicated,
    /// Names group 0; answered by the metadata plane's primary (the
    /// consumer group coordinator) without a prepare.
    MetadataPrimary,
    /// Names a partition's group; prepared in its log.
    PartitionReplicated,
    /// Names a partition's group; answered by the group without a prepare
    /// of its own (reads, and cursors, which the group keeps in its cursor
    /// log).
    PartitionGroup,
    /// Names group 0; answered by the node that receives it, from its own
    /// catalog and views.
    Local,
    /// Names group 0; handed to the receiving node's own replica of the
    /// group its body names (each replica accepts a loss for itself).
    LocalReplica,
    /// Names group 0; signs the connection in, answered by the connection
    /// itself.
    SignIn,
    /// A group's own operation, prepared by its primary: a request naming
    /// one is refused at the door and never routed.
    Internal,
}

impl Route {
    /// Whether a request of this route names group 0 in its header (the
    /// metadata plane, or the receiving node itself) rather than a
    /// partition's group: a request naming the other is refused.
    pub const fn names_group_zero(self) -> bool {
        match self {
            Route::MetadataReplicated
            | Route::MetadataPrimary
            | Route::Local
            | Route::LocalReplica
            | Route::SignIn => true,
            Route::PartitionReplicated | Route::PartitionGroup | Route::Internal => false,
        }
    }

    /// Whether operations of this route become prepares in a group's log
    /// (ordered, replicated, idempotent through the client table).
    const fn replicated(self) -> bool {
        matches!(
            self,
            Route::MetadataReplicated | Route::PartitionReplicated | Route::Internal
        )
    }

    /// The offsets a prepare of this route takes in its group's log: a
    /// produce's records; one for a metadata op, so that the metadata
    /// plane's log is counted in entries and its segments roll and are
    /// dropped below a catalog snapshot as a partition's are below its
    /// retention; none otherwise.
    const fn offsets(self) -> OffsetsTaken {
        match self {
            Route::MetadataReplicated => OffsetsTaken::One,
            Route::PartitionReplicated => OffsetsTaken::PerRecord,
            _ => OffsetsTaken::Zero,
        }
    }
}

/// The kind of right a request's caller needs under `[auth] required` (a
/// node needs none). The node turns it into what one request needs by
/// reading the stream, topic, consumer group or token the request names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RightNeeded {
    /// Nothing: anyone may send it (signing in).
    Anyone,
    /// Any signed-in user.
    SignedIn,
    /// The right on the topic of the partition the request's group holds.
    Partition(Right),
    /// The right on the stream (and topic) the request's body names.
    Named(Right),
    /// The right on the topic of the consumer group the request's body
    /// names.
    ConsumerGroup(Right),
    /// The cluster's `admin` right.
    Admin,
    /// `admin`, or the user the new token is for, signed in with its
    /// password or certificate (a token cannot mint tokens).
    TokenFor,
    /// `admin`, or the user of the token being revoked.
    TokenOf,
}

/// The offsets a prepare of an operation takes in its group's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OffsetsTaken {
    /// None: the operation is not prepared, or takes no place in the
    /// offsets (a reconfiguration).
    Zero,
    /// One: a metadata op, one entry of the metadata plane's log.
    One,
    /// One per record its request carries: a produce.
    PerRecord,
}

impl OffsetsTaken {
    /// The offsets a prepare takes, given the records its request carries.
    pub const fn count(self, record_count: u32) -> u32 {
        match self {
            OffsetsTaken::Zero => 0,
            OffsetsTaken::One => 1,
            OffsetsTaken::PerRecord => record_count,
        }
    }
}

/// One row of the table: every fact about an operation that a part of the
/// node decides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OperationInfo {
    /// Where a request of it goes, and who answers it.
    pub route: Route,
    /// The right its caller needs.
    pub right: RightNeeded,
    /// Only the cluster's nodes may send it (a report a partition's
    /// primary makes): a node accepts it only from a caller that proved it
    /// is a node.
    pub node_only: bool,
    /// It changes the cluster rather than one stream's data (moving
    /// partitions, accepting loss, users, permissions, quotas): only
    /// `admin` may send it.
    pub cluster_admin: bool,
    /// The audit log records each request of it (who, from where, what it
    /// named, how it ended).
    pub audited: bool,
    /// It becomes a prepare in a group's log (ordered, replicated and
    /// idempotent through the client table).
    pub replicated: bool,
    /// The offsets its prepare takes in its group's log.
    pub offsets: OffsetsTaken,
}

/// Who may send an operation and whether the audit log records it: the
/// yes/no facts of a row, as one column. A cluster-admin operation is
/// always audited; a node's own report never is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Anyone holding its right; not audited.
    Plain,
    /// Anyone holding its right; audited.
    Audited,
    /// Only `admin`; audited.
    ClusterAdmin,
    /// Only the cluster's nodes; not audited.
    NodeOnly,
}

impl Operation {
    /// The operation's row of the table: where it goes, the right it needs,
    /// whether it is node-only, cluster-admin, audited, replicated, and the
    /// offsets it takes (the last two follow from its route).
    pub const fn info(self) -> OperationInfo {
        let (route, right, class) = table_row(self);
        assert!(!matches!(class, Class::ClusterAdmin) || matches!(right, RightNeeded::Admin));
        assert!(!matches!(class, Class::NodeOnly) || matches!(route, Route::MetadataReplicated));
        OperationInfo {
            route,
            right,
            node_only: matches!(class, Class::NodeOnly),
            cluster_admin: matches!(class, Class::ClusterAdmin),
            audited: matches!(class, Class::Audited | Class::ClusterAdmin),
            replicated: route.replicated(),
            offsets: route.offsets(),
        }
    }
}

// Every row is checked (the class fits the right and the route) when the
// crate compiles.
const _: () = {
    let mut index = 0;
    while index < Operation::ALL.len() {
        Operation::ALL[index].info();
        index += 1;
    }
};

/// The table: one row per operation, in wire order.
#[rustfmt::skip]
const fn table_row(operation: Operation) -> (Route, RightNeeded, Class) {
    use Operation as Op;
    use Class::*;
    use Right::{Consume, Manage, Produce};
    use RightNeeded::*;
    use Route::*;
    match operation {
        // operation                   route                right                   class
        Op::CreateStream           => (MetadataReplicated,  Named(Manage),          Audited),
        Op::CreateTopic            => (MetadataReplicated,  Named(Manage),          Audited),
        Op::Produce                => (PartitionReplicated, Partition(Produce),     Plain),
        Op::Fetch                  => (PartitionGroup,      Partition(Consume),     Plain),
        Op::StoreCursor            => (PartitionGroup,      Partition(Consume),     Plain),
        Op::GetCursor              => (PartitionGroup,      Partition(Consume),     Plain),
        Op::ClusterStatus          => (Local,               SignedIn,               Plain),
        Op::Attention              => (Local,               SignedIn,               Plain),
        Op::AcceptLoss             => (LocalReplica,        Admin,                  ClusterAdmin),
        Op::Metadata               => (Local,               SignedIn,               Plain),
        Op::Reconfigure            => (Internal,            Admin,                  Plain),
        Op::ReassignPartition      => (MetadataReplicated,  Admin,                  ClusterAdmin),
        Op::EpochStarted           => (MetadataReplicated,  Admin,                  NodeOnly),
        Op::DropReplica            => (MetadataReplicated,  Admin,                  ClusterAdmin),
        Op::DeleteTopic            => (MetadataReplicated,  Named(Manage),          Audited),
        Op::DeleteStream           => (MetadataReplicated,  Named(Manage),          Audited),
        Op::AlterTopic             => (MetadataReplicated,  Named(Manage),          Audited),
        Op::AddPartitions          => (MetadataReplicated,  Named(Manage),          Audited),
        Op::OffsetForTime          => (PartitionGroup,      Partition(Consume),     Plain),
        Op::JoinConsumerGroup      => (MetadataReplicated,  Named(Consume),         Plain),
        Op::ConsumerHeartbeat      => (MetadataPrimary,     ConsumerGroup(Consume), Plain),
        Op::LeaveConsumerGroup     => (MetadataReplicated,  ConsumerGroup(Consume), Plain),
        Op::DescribeConsumerGroups => (Local,               SignedIn,               Plain),
        Op::CreateUser             => (MetadataReplicated,  Admin,                  ClusterAdmin),
        Op::DeleteUser             => (MetadataReplicated,  Admin,                  ClusterAdmin),
        Op::GrantPermission        => (MetadataReplicated,  Admin,                  ClusterAdmin),
        Op::RevokePermission       => (MetadataReplicated,  Admin,                  ClusterAdmin),
        Op::ListUsers              => (Local,               Admin,                  Plain),
        Op::Authenticate           => (SignIn,              Anyone,                 Plain),
        Op::CreateToken            => (MetadataReplicated,  TokenFor,               Audited),
        Op::RevokeToken            => (MetadataReplicated,  TokenOf,                Audited),
        Op::DeleteCursor           => (PartitionGroup,      Partition(Consume),     Audited),
        Op::RevokeCertificate      => (MetadataReplicated,  Admin,                  ClusterAdmin),
        Op::SetQuota               => (MetadataReplicated,  Admin,                  ClusterAdmin),
        Op::ListQuotas             => (Local,               Admin,                  ClusterAdmin),
        Op::GroupStatus            => (Local,               SignedIn,               Plain),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operations of one route, in wire order.
    fn of_route(route: Route) -> Vec<Operation> {
        Operation::ALL
            .into_iter()
            .filter(|operation| operation.info().route == route)
            .collect()
    }

    #[test]
    fn replicated_operations_are_the_prepared_routes() {
        for operation in Operation::ALL {
            let info = operation.info();
            let prepared = matches!(
                info.route,
                Route::MetadataReplicated | Route::PartitionReplicated | Route::Internal
            );
            assert_eq!(info.replicated, prepared, "{operation:?}");
            if info.route == Route::MetadataReplicated {
                assert_eq!(info.offsets, OffsetsTaken::One, "{operation:?}");
            }
            if !info.replicated {
                assert_eq!(info.offsets, OffsetsTaken::Zero, "{operation:?}");
            }
        }
        assert_eq!(of_route(Route::PartitionReplicated), [Operation::Produce]);
        assert_eq!(Operation::Produce.info().offsets.count(7), 7);
        assert_eq!(Operation::CreateTopic.info().offsets.count(0), 1);
        assert_eq!(Operation::Reconfigure.info().offsets.count(0), 0);
    }

    #[test]
    fn node_only_operations_are_metadata_reports() {
        for operation in Operation::ALL {
            let info = operation.info();
            if info.node_only {
                assert_eq!(info.route, Route::MetadataReplicated, "{operation:?}");
                assert!(!info.cluster_admin && !info.audited, "{operation:?}");
            }
        }
        let node_only: Vec<Operation> = Operation::ALL
            .into_iter()
            .filter(|operation| operation.info().node_only)
            .collect();
        assert_eq!(node_only, [Operation::EpochStarted]);
    }

    #[test]
    fn cluster_admin_operations_need_admin_and_are_audited() {
        for operation in Operation::ALL {
            let info = operation.info();
            if info.cluster_admin {
                assert_eq!(info.right, RightNeeded::Admin, "{operation:?}");
                assert!(info.audited, "{operation:?}");
            }
        }
    }

    #[test]
    fn internal_operations_are_never_routed_from_clients() {
        for operation in of_route(Route::Internal) {
            let info = operation.info();
            assert!(info.replicated, "{operation:?}");
            assert!(!info.route.names_group_zero(), "{operation:?}");
            assert_eq!(info.right, RightNeeded::Admin, "{operation:?}");
            assert!(!info.audited && !info.node_only, "{operation:?}");
            assert!(
                crate::ops::check_request(operation, &[]).is_err(),
                "{operation:?} passes the door"
            );
        }
        assert_eq!(of_route(Route::Internal), [Operation::Reconfigure]);
    }

    #[test]
    fn rights_fit_what_a_request_of_the_route_names() {
        for operation in Operation::ALL {
            let info = operation.info();
            let partition = matches!(
                info.route,
                Route::PartitionReplicated | Route::PartitionGroup
            );
            match info.right {
                RightNeeded::Anyone => assert_eq!(info.route, Route::SignIn),
                RightNeeded::Partition(_) => assert!(partition, "{operation:?}"),
                RightNeeded::Named(_)
                | RightNeeded::ConsumerGroup(_)
                | RightNeeded::TokenFor
                | RightNeeded::TokenOf => assert!(!partition, "{operation:?}"),
                RightNeeded::SignedIn | RightNeeded::Admin => {}
            }
            if info.route == Route::SignIn {
                assert_eq!(info.right, RightNeeded::Anyone, "{operation:?}");
            }
        }
        assert_eq!(of_route(Route::SignIn), [Operation::Authenticate]);
    }

    #[test]
    fn group_zero_is_named_by_metadata_and_node_answers() {
        let group_zero: Vec<Operation> = Operation::ALL
            .into_iter()
            .filter(|operation| operation.info().route.names_group_zero())
            .collect();
        for operation in Operation::ALL {
            let route = operation.info().route;
            let partition = matches!(
                route,
                Route::PartitionReplicated | Route::PartitionGroup | Route::Internal
            );
            assert_eq!(route.names_group_zero(), !partition, "{operation:?}");
        }
        assert!(group_zero.contains(&Operation::ConsumerHeartbeat));
        assert!(group_zero.contains(&Operation::AcceptLoss));
        assert!(!group_zero.contains(&Operation::Fetch));
    }
}
