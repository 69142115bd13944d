//! What the consensus benches share: a group of three in-memory replicas,
//! running effects to quiescence (messages straight to their replica,
//! every write completed at once), and produce requests.

use std::collections::VecDeque;

use bytes::Bytes;
use strand_consensus::*;
use strand_wire::{CommandHeader, ConfirmPolicy, Durability, Msg, Operation, RequestHeader};

/// Group `group`'s three replicas, started.
pub fn replicas(group: u64) -> Vec<Replica<RecordLog>> {
    (0..3u8)
        .map(|replica| {
            let config = Config {
                cluster: 1,
                group,
                replica,
                memberships: vec![strand_consensus::epoch::Membership::initial(
                    3,
                    ConfirmPolicy::MajorityDurable,
                )],
                durability: Durability::Persisted,
                cursor_durability: Durability::Persisted,
                timeouts: Timeouts::default(),
                seed: u64::from(replica),
            };
            let mut replica = Replica::open(config, Recovered::fresh(), RecordLog::default());
            let mut effects = Effects::new();
            replica.start(&mut effects);
            replica
        })
        .collect()
}

/// Runs effects to quiescence; returns the number of commits seen on the primary.
pub fn run(
    replicas: &mut [Replica<RecordLog>],
    start: (u8, Effects),
    queue: &mut VecDeque<(u8, Effect)>,
) -> u64 {
    let mut commits = 0;
    let (origin, mut effects) = start;
    queue.extend(effects.drain().map(|effect| (origin, effect)));
    let mut scratch = Effects::new();
    while let Some((at, effect)) = queue.pop_front() {
        let replica = &mut replicas[usize::from(at)];
        match effect {
            Effect::Send { to, message } => {
                replicas[usize::from(to)].on_message(message, &mut scratch);
                queue.extend(scratch.drain().map(|effect| (to, effect)));
                continue;
            }
            Effect::WritePrepare { prepare } => {
                let (op, checksum) = (prepare.header().op.get(), prepare.checksum());
                replica.on_write(op, checksum, WriteStage::Queued, &mut scratch);
                replica.on_write(op, checksum, WriteStage::Durable, &mut scratch);
            }
            Effect::PersistState { sequence, .. } => {
                replica.on_state_persisted(sequence, &mut scratch)
            }
            Effect::Commit { .. } if at == 0 => commits += 1,
            _ => {}
        }
        queue.extend(scratch.drain().map(|effect| (at, effect)));
    }
    commits
}

/// Request number `request` of client `client` to group `group`: one
/// record of `body`.
pub fn request(group: u64, client: u128, request: u64, body: &Bytes) -> ClientRequest {
    let mut header = RequestHeader::new(1, group, strand_wire::ViewId::new(0, 0), 0);
    header.client.set(client);
    header.request.set(request);
    header.operation = Operation::Produce as u8;
    ClientRequest {
        request: Msg::new(header, body.clone()),
        record_count: 1,
        timestamp_ns: 0,
    }
}
