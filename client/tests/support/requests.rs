//! One request as the group's primary handles it: the client table's rules
//! (stored replies, Busy, OutOfOrder, SessionEvicted), redirects from a node
//! that is not primary, and the reply frames.

use bytes::Bytes;
use strand_wire::ops::{AttentionReply, ClusterStatusReply, Empty, ErrorBody};
use strand_wire::{
    Body, CommandHeader, Msg, Operation, RecordBatch, ReplyHeader, RequestHeader, ResultCode,
};

use super::{CLUSTER, Outcome, State, StoredReply};

impl State {
    pub(super) fn handle_request(&mut self, node: u32, request: &Msg<RequestHeader>) -> Outcome {
        let header = request.header();
        let operation = header.operation();
        let group = header.prefix.group.get();
        let body = request.body();
        match operation {
            Operation::Metadata => {
                // Like a real node: the answer says which metadata op it reflects.
                let as_of = self.ops.get(&0).copied().unwrap_or(0);
                Outcome::Reply(reply_as_of(header, 0, as_of, self.metadata(body)))
            }
            Operation::ClusterStatus => {
                let status = ClusterStatusReply {
                    node,
                    nodes: self.nodes.clone(),
                    groups: Vec::new(),
                };
                Outcome::Reply(reply(header, 0, Ok(Bytes::from(status.to_vec()))))
            }
            Operation::Attention => {
                let attention = AttentionReply {
                    entries: Vec::new(),
                };
                Outcome::Reply(reply(header, 0, Ok(Bytes::from(attention.to_vec()))))
            }
            Operation::AcceptLoss => Outcome::Reply(reply(header, 0, self.accept_loss(node, body))),
            Operation::Reconfigure => Outcome::Reply(reply(
                header,
                0,
                Err(ErrorBody::message(
                    ResultCode::InvalidRequest,
                    "reconfigure is a group's own operation",
                )),
            )),
            // Consumer groups, users and one group's status are tested
            // against real nodes.
            Operation::GroupStatus
            | Operation::JoinConsumerGroup
            | Operation::ConsumerHeartbeat
            | Operation::LeaveConsumerGroup
            | Operation::DescribeConsumerGroups
            | Operation::CreateUser
            | Operation::DeleteUser
            | Operation::GrantPermission
            | Operation::RevokePermission
            | Operation::ListUsers
            | Operation::SetQuota
            | Operation::ListQuotas
            | Operation::RevokeCertificate
            | Operation::Authenticate
            | Operation::CreateToken
            | Operation::RevokeToken => Outcome::Reply(reply(
                header,
                0,
                Err(ErrorBody::message(
                    ResultCode::InvalidRequest,
                    "the scripted server keeps no consumer groups, users or group status",
                )),
            )),
            Operation::CreateStream
            | Operation::CreateTopic
            | Operation::Produce
            | Operation::ReassignPartition
            | Operation::EpochStarted
            | Operation::DropReplica
            | Operation::DeleteTopic
            | Operation::DeleteStream
            | Operation::AlterTopic
            | Operation::AddPartitions => self.replicated(node, header, body),
            Operation::Fetch
            | Operation::GetCursor
            | Operation::StoreCursor
            | Operation::DeleteCursor => {
                if let Some(gone) = self.not_hosted(group) {
                    return Outcome::Reply(reply(header, 0, Err(gone)));
                }
                if let Some(redirect) = self.not_primary(node, group) {
                    return Outcome::Reply(reply(header, 0, Err(redirect)));
                }
                match operation {
                    Operation::Fetch => self.fetch(header, body),
                    Operation::GetCursor => {
                        Outcome::Reply(reply(header, 0, self.get_cursor(group, body)))
                    }
                    Operation::DeleteCursor => {
                        Outcome::Reply(reply(header, 0, self.delete_cursor(group, body)))
                    }
                    _ => Outcome::Reply(reply(header, 0, self.store_cursor(group, body))),
                }
            }
            Operation::OffsetForTime => Outcome::Reply(reply(
                header,
                0,
                Err(ErrorBody::message(
                    ResultCode::InvalidRequest,
                    "the scripted cluster keeps no append times",
                )),
            )),
        }
    }

    fn not_primary(&self, node: u32, group: u64) -> Option<ErrorBody> {
        if group == 0 {
            if node == self.metadata_primary {
                return None;
            }
            let address = self.address_of(self.metadata_primary);
            return Some(ErrorBody::NotPrimary {
                view: 1,
                primary_replica: 0,
                primary_node: self.metadata_primary,
                address,
            });
        }
        let partition = self.partitions.get(&group)?;
        if partition.primary == node {
            return None;
        }
        let index = partition
            .replicas
            .iter()
            .position(|replica| *replica == partition.primary)?;
        // The node knows the view but not the address: the SDK routes by replica index.
        Some(ErrorBody::NotPrimary {
            view: index as u32,
            primary_replica: index as u8,
            primary_node: partition.primary,
            address: String::new(),
        })
    }

    fn address_of(&self, node: u32) -> String {
        self.nodes
            .iter()
            .find(|info| info.id == node)
            .map(|info| info.client_address.clone())
            .unwrap_or_default()
    }

    /// The answer for a partition group no node hosts: `Deleted` when its
    /// topic was deleted, like a real node.
    fn not_hosted(&self, group: u64) -> Option<ErrorBody> {
        if group == 0 || self.partitions.contains_key(&group) {
            return None;
        }
        Some(if self.deleted.contains(&group) {
            ErrorBody::message(ResultCode::Deleted, "the group's topic was deleted")
        } else {
            ErrorBody::message(ResultCode::UnknownGroup, "no such group here")
        })
    }

    fn replicated(&mut self, node: u32, header: &RequestHeader, body: &Bytes) -> Outcome {
        let group = header.prefix.group.get();
        if let Some(gone) = self.not_hosted(group) {
            return Outcome::Reply(reply(header, 0, Err(gone)));
        }
        if let Some(redirect) = self.not_primary(node, group) {
            return Outcome::Reply(reply(header, 0, Err(redirect)));
        }
        let (client, number) = (header.client.get(), header.request.get());
        let table = self.tables.get(&(group, client));
        let expected = match table {
            None if number != 1 => {
                let error = ErrorBody::message(
                    ResultCode::SessionEvicted,
                    "unknown client: start a new client id",
                );
                return Outcome::Reply(reply(header, 0, Err(error)));
            }
            None => 1,
            Some(table) => {
                if let Some(stored) = table.get(&number) {
                    return Outcome::Reply(reply(header, stored.op, stored.result.clone()));
                }
                table.keys().next_back().map_or(1, |last| last + 1)
            }
        };
        if number != expected {
            let error = ErrorBody::OutOfOrder { expected };
            return Outcome::Reply(reply(header, 0, Err(error)));
        }
        let result = match header.operation() {
            Operation::CreateStream => self.apply_create_stream(body),
            Operation::CreateTopic => self.apply_create_topic(body),
            Operation::ReassignPartition => self.apply_reassign(body),
            Operation::DropReplica => self.apply_drop_replica(body),
            Operation::EpochStarted => Ok(Bytes::from(Empty.to_vec())),
            Operation::DeleteTopic => self.apply_delete_topic(body),
            Operation::DeleteStream => self.apply_delete_stream(body),
            Operation::AlterTopic => self.apply_alter_topic(body),
            Operation::AddPartitions => self.apply_add_partitions(body),
            _ => self.apply_produce(group, body),
        };
        let op = self.ops.entry(group).or_default();
        *op += 1;
        let stored = StoredReply { op: *op, result };
        self.tables
            .entry((group, client))
            .or_default()
            .insert(number, stored.clone());
        self.applied.push((group, client, number));
        Outcome::Reply(reply(header, stored.op, stored.result))
    }
}

pub(super) fn invalid(error: strand_wire::BodyError) -> ErrorBody {
    ErrorBody::message(ResultCode::InvalidRequest, error.to_string())
}

pub(super) fn reply(
    request: &RequestHeader,
    op: u64,
    result: Result<Bytes, ErrorBody>,
) -> Msg<ReplyHeader> {
    reply_as_of(request, op, op, result)
}

/// A reply at `op` from a replica whose commit number is `commit`.
fn reply_as_of(
    request: &RequestHeader,
    op: u64,
    commit: u64,
    result: Result<Bytes, ErrorBody>,
) -> Msg<ReplyHeader> {
    let mut header = ReplyHeader::new(
        CLUSTER,
        request.prefix.group.get(),
        strand_wire::ViewId::ZERO,
        0,
    );
    header.client = request.client;
    header.request = request.request;
    header.operation = request.operation;
    header.op.set(op);
    header.commit.set(commit);
    let body = match result {
        Ok(body) => {
            header.result.set(ResultCode::Ok as u16);
            body
        }
        Err(error) => {
            header.result.set(error.code() as u16);
            Bytes::from(error.to_vec())
        }
    };
    Msg::new(header, body)
}

pub(super) fn with_offset_base(batch: &RecordBatch, offset_base: u64) -> RecordBatch {
    let mut bytes = batch.bytes().to_vec();
    bytes[..8].copy_from_slice(&offset_base.to_le_bytes());
    RecordBatch::from_bytes(Bytes::from(bytes)).expect("patched batch is valid")
}
