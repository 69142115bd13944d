//! A replica's effects carried out: storage writes, cuts and persists
//! completed at once (or queued, for a manual sync), frames put on the
//! network, commits and events recorded, reads served from storage.

use std::collections::VecDeque;

use bytes::Bytes;
use strand_consensus::*;
use strand_wire::*;
use zerocopy::IntoBytes;

use super::{CLUSTER, Cluster, GROUP, SyncMode};

impl Cluster {
    /// Runs a replica's effects, feeding storage completions back.
    pub fn execute(&mut self, index: u8, effects: Effects) {
        let mut queue: VecDeque<Effect> = effects.as_slice().iter().cloned().collect();
        while let Some(effect) = queue.pop_front() {
            let mut more = Effects::new();
            self.execute_one(index, effect, &mut more);
            queue.extend(more.as_slice().iter().cloned());
        }
        // After every input and the effects it led to, as the host checks.
        if let Some(replica) = self.replicas[usize::from(index)].as_ref() {
            replica.assert_invariants();
        }
    }

    fn execute_one(&mut self, index: u8, effect: Effect, more: &mut Effects) {
        let i = usize::from(index);
        match effect {
            Effect::Send { to, message } => {
                if let Message::DoViewChange(dvc) = &message {
                    self.dvcs_sent.push((index, dvc.clone()));
                }
                self.sent
                    .push((index, to, message.command(), message.prefix().view.get()));
                self.network.push_back((index, to, message));
            }
            Effect::Reply { reply } => self.replies.push(reply),
            Effect::WritePrepare { prepare } => {
                let (op, checksum) = (prepare.header().op.get(), prepare.checksum());
                self.storage[i].write(prepare);
                let replica = self.replicas[i].as_mut().expect("up");
                replica.on_write(op, checksum, WriteStage::Queued, more);
                if self.sync[i] == SyncMode::Immediate {
                    self.storage[i].durable_op = self.storage[i].head();
                    let replica = self.replicas[i].as_mut().expect("up");
                    replica.on_write(op, checksum, WriteStage::Durable, more);
                }
            }
            Effect::Cut { op, cursor_tail } => {
                self.storage[i].truncate(op);
                if let Some(cursor_tail) = cursor_tail {
                    let storage = &mut self.storage[i];
                    storage.cursor_tail = storage.cursor_tail.min(cursor_tail);
                    storage.cursor_durable = storage.cursor_durable.min(cursor_tail);
                    storage.cursor_events.truncate(storage.cursor_tail as usize);
                }
                self.replicas[i]
                    .as_mut()
                    .expect("up")
                    .on_truncated(op, more);
            }
            Effect::PersistState { state, sequence } => {
                self.storage[i].state = Some(state);
                self.replicas[i]
                    .as_mut()
                    .expect("up")
                    .on_state_persisted(sequence, more);
            }
            Effect::Commit { header } => {
                let op = header.op.get();
                if let Some(previous) = self.committed[i].insert(op, header.checksum()) {
                    if previous != header.checksum() {
                        self.conflicts
                            .push((index, op, previous, header.checksum()));
                    }
                }
            }
            Effect::ServeHeaders { to, op_min, op_max } => {
                let storage = &self.storage[i];
                let headers: Vec<PrepareHeader> = storage
                    .log
                    .iter()
                    .map(|prepare| *prepare.header())
                    .filter(|header| (op_min..=op_max).contains(&header.op.get()))
                    .collect();
                if !headers.is_empty() {
                    let reply =
                        HeadersHeader::new(CLUSTER, GROUP, self.replica(index).view(), index);
                    let message = Message::Headers(Msg::new(
                        reply,
                        Bytes::copy_from_slice(headers.as_bytes()),
                    ));
                    self.network.push_back((index, to, message));
                }
            }
            Effect::ServePrepare { to, op, checksum } => {
                let storage = &self.storage[i];
                if storage.faulty.contains(&op) || storage.faulty_headers.contains(&op) {
                    return;
                }
                if let Some(prepare) = storage.log.get((op as usize).wrapping_sub(1)) {
                    if checksum == 0 || prepare.checksum() == checksum {
                        self.network
                            .push_back((index, to, Message::Prepare(prepare.clone())));
                    }
                }
            }
            Effect::AppendCursors {
                cursor_base,
                event_count,
                events,
            } => {
                let events = ops::CursorEvents::from_bytes(&events).expect("cursor events");
                assert_eq!(events.events.len(), event_count as usize);
                assert_eq!(
                    cursor_base, self.storage[i].cursor_tail,
                    "cursor events are appended at the log's tail"
                );
                self.storage[i].cursor_events.extend(
                    events
                        .events
                        .into_iter()
                        .map(|event| (event.consumer, event.offset)),
                );
                self.storage[i].cursor_tail += u64::from(event_count);
                let end = self.storage[i].cursor_tail;
                let replica = self.replicas[i].as_mut().expect("up");
                replica.on_cursors_written(end, WriteStage::Queued, more);
                if self.sync[i] == SyncMode::Immediate {
                    self.storage[i].cursor_durable = end;
                    let replica = self.replicas[i].as_mut().expect("up");
                    replica.on_cursors_written(end, WriteStage::Durable, more);
                }
            }
            Effect::ShipCursors { to, cursor_from } => {
                // As the host does: the durable events from storage.
                let storage = &self.storage[i];
                let end = storage.cursor_durable.min(cursor_from + 256);
                if cursor_from >= end {
                    return;
                }
                let events = storage.cursor_events[cursor_from as usize..end as usize]
                    .iter()
                    .map(|(consumer, offset)| ops::CursorEvent {
                        consumer: consumer.clone(),
                        offset: *offset,
                    })
                    .collect();
                let view = self.replica(index).view();
                let mut header = CursorsHeader::new(CLUSTER, GROUP, view, index);
                header.cursor_base.set(cursor_from);
                header.event_count.set((end - cursor_from) as u32);
                let body = Bytes::from(ops::CursorEvents { events }.to_vec());
                self.network
                    .push_back((index, to, Message::Cursors(Msg::new(header, body))));
            }
            Effect::StartStateTransfer { .. } => {}
            Effect::Quarantine { agreed_op } => self.quarantined.push((index, agreed_op)),
            Effect::Event(event) => self.events.push((index, event)),
        }
    }
}
