//! A small message-by-message harness: replicas of one group, an in-memory
//! storage per replica that models what a crash loses, and a network queue
//! the test delivers, drops or holds.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use strand_consensus::*;
use strand_wire::ops::ProduceReply;
use strand_wire::*;
use zerocopy::IntoBytes;

pub const CLUSTER: u64 = 77;
pub const GROUP: u64 = 5;

/// One replica's disk.
#[derive(Debug, Clone, Default)]
pub struct Storage {
    /// Entries at ops 1..=len.
    pub log: Vec<Msg<PrepareHeader>>,
    /// Entries at or below this op are fsynced.
    pub durable_op: u64,
    /// The persisted durable state (None: never persisted).
    pub state: Option<DurableState>,
    /// Ops whose entries are damaged (body unreadable).
    pub faulty: BTreeSet<u64>,
    /// Ops whose entries are damaged so badly the header is unreadable too.
    pub faulty_headers: BTreeSet<u64>,
    /// Cursor events (count).
    pub cursor_tail: u64,
    /// The cursor events themselves, in log order: (consumer, offset).
    pub cursor_events: Vec<(String, u64)>,
    pub cursor_durable: u64,
    /// A clean shutdown mark.
    pub clean: bool,
    /// ... taken while the replica could resume in its view.
    pub stopped_in_view: bool,
    /// The partition was created (its first superblock written): later opens are not fresh.
    pub created: bool,
    /// The epoch that placed this copy (0: a founding replica).
    pub joined_epoch: u32,
    /// Open reports headers from this op on only (the window of committed
    /// headers a partition reads back, or what retention left).
    pub headers_from: u64,
}

impl Storage {
    pub fn head(&self) -> u64 {
        self.log.len() as u64
    }

    fn write(&mut self, prepare: Msg<PrepareHeader>) {
        let op = prepare.header().op.get();
        if op <= self.head() {
            let existing = &self.log[(op - 1) as usize];
            assert_eq!(
                existing.checksum(),
                prepare.checksum(),
                "in-place rewrite of a different prepare"
            );
            assert!(
                self.faulty.contains(&op) || self.faulty_headers.contains(&op),
                "rewrite of a healthy op {op}"
            );
            self.log[(op - 1) as usize] = prepare;
            self.faulty.remove(&op);
            self.faulty_headers.remove(&op);
            return;
        }
        assert_eq!(op, self.head() + 1, "appends are sequential");
        if op > 1 {
            assert_eq!(
                prepare.header().parent.get(),
                self.log[(op - 2) as usize].checksum(),
                "hash chain"
            );
        }
        self.log.push(prepare);
    }

    fn truncate(&mut self, op: u64) {
        self.log.truncate(op as usize);
        self.durable_op = self.durable_op.min(op);
        self.faulty.retain(|faulty| *faulty <= op);
        self.faulty_headers.retain(|faulty| *faulty <= op);
    }

    /// A crash: everything not fsynced is lost.
    pub fn crash(&mut self) {
        self.log.truncate(self.durable_op as usize);
        self.cursor_tail = self.cursor_durable;
        self.cursor_events.truncate(self.cursor_durable as usize);
        self.faulty.retain(|op| *op <= self.durable_op);
        self.clean = false;
    }

    pub fn recovered(&self, durability: Durability) -> Recovered {
        let headers = self
            .log
            .iter()
            .filter(|prepare| !self.faulty_headers.contains(&prepare.header().op.get()))
            .filter(|prepare| prepare.header().op.get() >= self.headers_from)
            .map(|prepare| *prepare.header())
            .collect();
        let faulty = self.faulty.union(&self.faulty_headers).copied().collect();
        let fresh = !self.created;
        Recovered {
            state: self.state.clone().unwrap_or_default(),
            headers,
            faulty,
            log_head: self.head(),
            cursor_tail: self.cursor_tail,
            trusted: durability == Durability::Persisted || self.clean || fresh,
            awaiting_state_transfer: false,
            fresh,
            stopped_in_view: self.clean && self.stopped_in_view && !fresh,
            joined_epoch: self.joined_epoch,
            log_start: 1,
            log_start_offset: 0,
        }
    }
}

/// How a replica's storage completes writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Every write is fsynced at once.
    Immediate,
    /// Writes are queued; `Cluster::sync` fsyncs them.
    Manual,
}

pub struct Cluster {
    pub config: Config,
    pub replicas: Vec<Option<Replica<RecordLog>>>,
    pub storage: Vec<Storage>,
    pub sync: Vec<SyncMode>,
    pub network: VecDeque<(u8, u8, Message)>,
    /// Links that drop everything: (from, to).
    pub cut: BTreeSet<(u8, u8)>,
    pub replies: Vec<Msg<ReplyHeader>>,
    /// Every commit effect, per replica: op → header checksum.
    pub committed: Vec<BTreeMap<u64, u32>>,
    pub events: Vec<(u8, Event)>,
    pub quarantined: Vec<(u8, u64)>,
    /// (replica, op, first checksum, second checksum): a replica committed two prepares at one op.
    pub conflicts: Vec<(u8, u64, u32, u32)>,
    pub untrusted_gate: bool,
    /// Every message sent: (from, to, command, view).
    pub sent: Vec<(u8, u8, Command, u32)>,
    /// Every DoViewChange sent, by sender.
    pub dvcs_sent: Vec<(u8, Msg<DoViewChangeHeader>)>,
    /// Replicas whose next restart finds a log they cannot use.
    pub awaiting: BTreeSet<u8>,
    next_request: BTreeMap<u128, u64>,
    /// The bound on distinct consumer names per partition.
    pub cursor_consumers_max: u64,
    /// Ticks so far (for node-level liveness).
    now: u64,
    /// Node-level liveness, per observer and peer: the tick it last heard
    /// of the peer, and whether it told its replica the peer lives.
    liveness: Vec<Vec<(u64, bool)>>,
}

/// Ticks without a sign of a peer before the node-level liveness suspects
/// it (a heartbeat timeout, as the server's detector waits).
pub const LIVENESS_SUSPECT_TICKS: u64 = 30;

impl Cluster {
    pub fn new(replica_count: u8, confirm: ConfirmPolicy, durability: Durability) -> Cluster {
        let config = Config {
            cluster: CLUSTER,
            group: GROUP,
            replica: 0,
            memberships: vec![strand_consensus::epoch::Membership::initial(
                replica_count,
                confirm,
            )],
            durability,
            cursor_durability: durability,
            timeouts: Timeouts::default(),
            seed: 1,
        };
        let count = usize::from(replica_count);
        let mut cluster = Cluster {
            config,
            replicas: (0..count).map(|_| None).collect(),
            storage: vec![Storage::default(); count],
            sync: vec![SyncMode::Immediate; count],
            network: VecDeque::new(),
            cut: BTreeSet::new(),
            replies: Vec::new(),
            committed: vec![BTreeMap::new(); count],
            events: Vec::new(),
            quarantined: Vec::new(),
            conflicts: Vec::new(),
            untrusted_gate: true,
            sent: Vec::new(),
            dvcs_sent: Vec::new(),
            awaiting: BTreeSet::new(),
            next_request: BTreeMap::new(),
            cursor_consumers_max: CURSOR_CONSUMERS_MAX_DEFAULT,
            now: 0,
            liveness: vec![vec![(0, true); count]; count],
        };
        for replica in 0..replica_count {
            cluster.restart(replica);
        }
        cluster
    }

    pub fn count(&self) -> u8 {
        self.replicas.len() as u8
    }

    pub fn replica(&self, index: u8) -> &Replica<RecordLog> {
        self.replicas[usize::from(index)]
            .as_ref()
            .expect("replica is up")
    }

    pub fn up(&self, index: u8) -> bool {
        self.replicas[usize::from(index)].is_some()
    }

    /// Starts (or restarts) a replica from its storage.
    pub fn restart(&mut self, index: u8) {
        let mut config = self.config.clone();
        config.replica = index;
        config.seed = 1000 + u64::from(index);
        let storage = &self.storage[usize::from(index)];
        let mut recovered = storage.recovered(config.durability);
        if self.awaiting.contains(&index) {
            recovered.awaiting_state_transfer = true;
        }
        let committed_end = storage
            .log
            .iter()
            .take(recovered.state.commit as usize)
            .last()
            .map_or(0, |prepare| prepare.header().offset_end());
        let mut replica = Replica::open(
            config,
            recovered,
            RecordLog {
                offset_end: committed_end,
            },
        );
        #[cfg(feature = "mutations")]
        if !self.untrusted_gate {
            replica.disable_trusted_gate();
        }
        let mut effects = Effects::new();
        replica.start(&mut effects);
        self.replicas[usize::from(index)] = Some(replica);
        let now = self.now;
        self.grow_liveness();
        for peer in &mut self.liveness[usize::from(index)] {
            *peer = (now, true);
        }
        self.storage[usize::from(index)].clean = false;
        self.storage[usize::from(index)].created = true;
        self.execute(index, effects);
    }

    /// A crash: the replica stops, its unsynced writes are lost.
    pub fn crash(&mut self, index: u8) {
        self.replicas[usize::from(index)] = None;
        self.storage[usize::from(index)].crash();
        self.network
            .retain(|(from, to, _)| *from != index && *to != index);
    }

    /// A clean shutdown: everything fsynced, the clean mark written.
    pub fn shutdown(&mut self, index: u8) {
        self.sync(index);
        let in_view = self.replica(index).resumable_in_view();
        self.replicas[usize::from(index)] = None;
        let storage = &mut self.storage[usize::from(index)];
        storage.clean = true;
        storage.stopped_in_view = in_view;
        self.network
            .retain(|(from, to, _)| *from != index && *to != index);
    }

    /// Fsyncs a Manual replica's queued writes.
    pub fn sync(&mut self, index: u8) {
        let storage = &mut self.storage[usize::from(index)];
        let from = storage.durable_op;
        storage.durable_op = storage.head();
        storage.cursor_durable = storage.cursor_tail;
        let completions: Vec<(u64, u32)> = storage.log[from as usize..]
            .iter()
            .map(|prepare| (prepare.header().op.get(), prepare.checksum()))
            .collect();
        let cursor_end = storage.cursor_tail;
        let mut effects = Effects::new();
        if let Some(replica) = self.replicas[usize::from(index)].as_mut() {
            for (op, checksum) in completions {
                replica.on_write(op, checksum, WriteStage::Durable, &mut effects);
            }
            replica.on_cursors_written(cursor_end, WriteStage::Durable, &mut effects);
        }
        self.execute(index, effects);
    }

    /// An operator accepts loss on `index`; returns what the replica answered
    /// (false: its group was not stuck) and carries out its effects.
    pub fn accept_loss(&mut self, index: u8) -> bool {
        self.act(index, |replica, effects| replica.accept_loss(effects))
    }

    /// The driver's periodic check on every live replica: a commit a quiet
    /// replica has not persisted is persisted now.
    pub fn persist_commits(&mut self) {
        for index in 0..self.count() {
            if self.up(index) {
                self.act(index, |replica, effects| {
                    replica.persist_commit_now(effects)
                });
            }
        }
    }

    /// Asks `index` to hand its primary role to the preferred primary;
    /// returns whether it started and carries out its effects.
    pub fn hand_over(&mut self, index: u8) -> bool {
        self.act(index, |replica, effects| {
            replica.hand_over_to_preferred(effects)
        })
    }

    /// Runs `action` on live replica `index` and carries out its effects.
    fn act<T>(
        &mut self,
        index: u8,
        action: impl FnOnce(&mut Replica<RecordLog>, &mut Effects) -> T,
    ) -> T {
        let mut effects = Effects::new();
        let result = action(
            self.replicas[usize::from(index)].as_mut().expect("up"),
            &mut effects,
        );
        self.execute(index, effects);
        result
    }

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

    /// Delivers one queued message (if its link is up).
    pub fn deliver_one(&mut self) -> bool {
        let Some((from, to, message)) = self.network.pop_front() else {
            return false;
        };
        if self.cut.contains(&(from, to)) || !self.up(to) || !self.up(from) {
            return true;
        }
        let mut effects = Effects::new();
        self.replicas[usize::from(to)]
            .as_mut()
            .expect("up")
            .on_message(message, &mut effects);
        self.execute(to, effects);
        true
    }

    /// Delivers until the network is quiet (bounded).
    pub fn deliver_all(&mut self) {
        for _ in 0..100_000 {
            if !self.deliver_one() {
                return;
            }
        }
        panic!("the network never went quiet");
    }

    /// Ticks every live replica `ticks` times, delivering messages after each.
    pub fn tick(&mut self, ticks: u64) {
        for _ in 0..ticks {
            for index in 0..self.count() {
                if let Some(replica) = self.replicas[usize::from(index)].as_mut() {
                    let mut effects = Effects::new();
                    replica.on_tick(&mut effects);
                    self.execute(index, effects);
                }
            }
            self.watch_liveness();
            self.deliver_all();
        }
    }

    /// Ticks replica `index` alone `ticks` times, delivering nothing: time
    /// passes for it while its messages wait in the network.
    pub fn tick_only(&mut self, index: u8, ticks: u64) {
        for _ in 0..ticks {
            self.act(index, |replica, effects| replica.on_tick(effects));
        }
    }

    /// Room in the liveness table for every replica slot there is.
    fn grow_liveness(&mut self) {
        let count = self.replicas.len();
        let now = self.now;
        self.liveness.resize(count, Vec::new());
        for row in &mut self.liveness {
            row.resize(count, (now, true));
        }
    }

    /// The node-level liveness signal: each live replica hears of every
    /// live peer whose link to it is up; one silent for
    /// [`LIVENESS_SUSPECT_TICKS`] is suspected, and the replica is told of
    /// every change.
    pub fn watch_liveness(&mut self) {
        self.now += 1;
        self.grow_liveness();
        for observer in 0..self.count() {
            if !self.up(observer) {
                continue;
            }
            for peer in (0..self.count()).filter(|peer| *peer != observer) {
                let heard = self.up(peer) && !self.cut.contains(&(peer, observer));
                let entry = &mut self.liveness[usize::from(observer)][usize::from(peer)];
                if heard {
                    entry.0 = self.now;
                }
                let alive = self.now - entry.0 <= LIVENESS_SUSPECT_TICKS;
                if alive == entry.1 {
                    continue;
                }
                entry.1 = alive;
                self.act(observer, |replica, effects| {
                    replica.on_peer_liveness(peer, alive, effects)
                });
            }
        }
    }

    /// Tells `observer` directly that the node-level liveness of `peer`
    /// changed, as a driver whose signal lags would.
    pub fn signal_liveness(&mut self, observer: u8, peer: u8, alive: bool) {
        self.act(observer, |replica, effects| {
            replica.on_peer_liveness(peer, alive, effects)
        });
        self.deliver_all();
    }

    /// Crashes `index` and runs until the node-level liveness suspects it
    /// and another replica serves as primary; returns that primary.
    pub fn fail_over_from(&mut self, index: u8) -> u8 {
        self.crash(index);
        self.tick(LIVENESS_SUSPECT_TICKS + 200);
        let primary = self.primary().expect("a new primary");
        assert_ne!(primary, index, "the crashed replica does not serve");
        primary
    }

    /// Cuts every link to and from `index`.
    pub fn isolate(&mut self, index: u8) {
        for other in 0..self.count() {
            if other != index {
                self.cut.insert((index, other));
                self.cut.insert((other, index));
            }
        }
    }

    /// Restores every link to and from `index`.
    pub fn heal(&mut self, index: u8) {
        self.cut.retain(|(from, to)| *from != index && *to != index);
    }

    /// The replica serving as primary in the highest view, if any.
    pub fn primary(&self) -> Option<u8> {
        (0..self.count())
            .filter(|index| self.up(*index) && self.replica(*index).is_serving_primary())
            .max_by_key(|index| self.replica(*index).view())
    }

    /// A produce of `records` records from `client`, sent to `to`.
    pub fn produce_to(&mut self, to: u8, client: u128, request: u64, records: u32) {
        let mut builder = BatchBuilder::default();
        for index in 0..records {
            builder.push(
                u64::from(index),
                b"key",
                format!("c{client}r{request}i{index}").as_bytes(),
                &[],
            );
        }
        let batch = builder.finish();
        let mut header = RequestHeader::new(CLUSTER, GROUP, ViewId::new(0, 0), 0);
        header.client.set(client);
        header.request.set(request);
        header.operation = Operation::Produce as u8;
        let request = ClientRequest {
            request: Msg::new(header, batch.bytes().clone()),
            record_count: records,
            timestamp_ns: 1,
        };
        let mut effects = Effects::new();
        self.replicas[usize::from(to)]
            .as_mut()
            .expect("up")
            .on_request(request, &mut effects);
        self.execute(to, effects);
    }

    /// `consumer` stores its cursor at `offset` on replica `to`.
    pub fn store_cursor(
        &mut self,
        to: u8,
        client: u128,
        request: u64,
        consumer: &str,
        offset: u64,
    ) -> CursorOutcome {
        let outcomes = self.store_cursors_at_once(to, client, request, &[(consumer, offset)]);
        outcomes[0]
    }

    /// Stores of consecutive requests of `client`, handed to replica `to`
    /// one after another before any of their effects is carried out (as a
    /// node does with requests that arrive together): each sees the map as
    /// storage held it before the first.
    pub fn store_cursors_at_once(
        &mut self,
        to: u8,
        client: u128,
        first_request: u64,
        cursors: &[(&str, u64)],
    ) -> Vec<CursorOutcome> {
        let mut effects = Effects::new();
        let mut outcomes = Vec::new();
        for (index, (consumer, offset)) in cursors.iter().enumerate() {
            let request =
                cursor_request(client, first_request + index as u64, Operation::StoreCursor);
            let cursor = ops::StoreCursor {
                consumer: (*consumer).to_owned(),
                offset: *offset,
                fence: None,
            };
            let census = self.cursor_census(to, consumer);
            let replica = self.replicas[usize::from(to)].as_mut().expect("up");
            let high_watermark = replica.machine().offset_end;
            outcomes.push(replica.on_store_cursor(
                &request,
                cursor,
                high_watermark,
                census,
                &mut effects,
            ));
        }
        self.execute(to, effects);
        outcomes
    }

    /// `consumer`'s cursor is deleted on replica `to`.
    pub fn delete_cursor(
        &mut self,
        to: u8,
        client: u128,
        request: u64,
        consumer: &str,
    ) -> CursorOutcome {
        let request = cursor_request(client, request, Operation::DeleteCursor);
        let delete = ops::DeleteCursor {
            consumer: consumer.to_owned(),
        };
        let census = self.cursor_census(to, consumer);
        let mut effects = Effects::new();
        let replica = self.replicas[usize::from(to)].as_mut().expect("up");
        let outcome = replica.on_delete_cursor(&request, delete, census, &mut effects);
        self.execute(to, effects);
        outcome
    }

    /// Replica `to` expires the cursors of `consumers` (as its driver does
    /// for idle ones).
    pub fn expire_cursors(&mut self, to: u8, consumers: &[&str]) -> usize {
        let mut effects = Effects::new();
        let replica = self.replicas[usize::from(to)].as_mut().expect("up");
        let names = consumers.iter().map(|name| (*name).to_owned()).collect();
        let count = replica.expire_cursors(names, &mut effects);
        self.execute(to, effects);
        count
    }

    /// Replica `index`'s cursor map: its storage's events, replayed.
    pub fn cursor_map(&self, index: u8) -> BTreeMap<String, u64> {
        let mut map = BTreeMap::new();
        for (consumer, offset) in &self.storage[usize::from(index)].cursor_events {
            if *offset == ops::CURSOR_TOMBSTONE_OFFSET {
                map.remove(consumer);
            } else {
                map.insert(consumer.clone(), *offset);
            }
        }
        map
    }

    /// What replica `index`'s storage says of `consumer`, as a host hands in.
    fn cursor_census(&self, index: u8, consumer: &str) -> CursorCensus {
        let map = self.cursor_map(index);
        CursorCensus {
            known: map.contains_key(consumer),
            consumers: map.len() as u64,
            applied_tail: self.storage[usize::from(index)].cursor_tail,
            consumers_max: self.cursor_consumers_max,
        }
    }

    /// The next request of `client` to the current primary.
    pub fn produce(&mut self, client: u128, records: u32) -> u64 {
        let primary = self.primary().expect("a primary serves");
        let request = *self
            .next_request
            .entry(client)
            .and_modify(|next| *next += 1)
            .or_insert(1);
        self.produce_to(primary, client, request, records);
        request
    }

    /// Ok produce replies by (client, request): (op, base offset, count).
    pub fn acked(&self) -> BTreeMap<(u128, u64), (u64, u64, u32)> {
        let mut acked = BTreeMap::new();
        for reply in &self.replies {
            let header = reply.header();
            if header.result() != ResultCode::Ok || header.operation() != Operation::Produce {
                continue;
            }
            let body = ProduceReply::from_bytes(reply.body()).expect("produce reply");
            let value = (header.op.get(), body.offset_base, body.record_count);
            let key = (header.client.get(), header.request.get());
            if let Some(previous) = acked.insert(key, value) {
                assert_eq!(
                    previous, value,
                    "a request acked twice with different offsets"
                );
            }
        }
        acked
    }

    /// The committed prepare at `op` on `replica` (from its storage).
    pub fn stored(&self, replica: u8, op: u64) -> Option<&Msg<PrepareHeader>> {
        self.storage[usize::from(replica)]
            .log
            .get((op as usize).checked_sub(1)?)
    }

    /// Asserts no replica committed two prepares at one op, and no two
    /// replicas committed different prepares at one op.
    pub fn assert_one_history(&self) {
        assert!(self.conflicts.is_empty(), "{:?}", self.conflicts);
        let mut canonical: BTreeMap<u64, u32> = BTreeMap::new();
        for committed in &self.committed {
            for (op, checksum) in committed {
                let first = canonical.entry(*op).or_insert(*checksum);
                assert_eq!(
                    first, checksum,
                    "two replicas committed different prepares at op {op}"
                );
            }
        }
    }

    /// Asserts every acked produce is in `replica`'s log at its acked op and offsets.
    pub fn assert_acked_in_log(&self, replica: u8) {
        for ((client, request), (op, base, count)) in self.acked() {
            let prepare = self.stored(replica, op).unwrap_or_else(|| {
                panic!("replica {replica} lacks acked op {op} (client {client} request {request})")
            });
            let header = prepare.header();
            assert_eq!(
                (
                    header.client.get(),
                    header.request.get(),
                    header.offset_base.get(),
                    header.record_count.get()
                ),
                (client, request, base, count),
                "replica {replica}: op {op} is not the acked prepare"
            );
        }
    }

    /// Events of `replica` matching `pick`.
    pub fn events_of<T>(&self, replica: u8, pick: impl Fn(&Event) -> Option<T>) -> Vec<T> {
        self.events
            .iter()
            .filter(|(index, _)| *index == replica)
            .filter_map(|(_, event)| pick(event))
            .collect()
    }

    /// The metadata plane assigns `membership` (the next epoch): every live
    /// replica hears of it, and later (re)starts know it.
    pub fn assign(&mut self, membership: epoch::Membership) {
        self.config.memberships.push(membership);
        for slot in membership.slots.iter() {
            self.ensure_slot(slot);
        }
        for index in 0..self.count() {
            if let Some(replica) = self.replicas[usize::from(index)].as_mut() {
                let mut effects = Effects::new();
                replica.on_assignment(membership, &mut effects);
                self.execute(index, effects);
            }
        }
    }

    /// Room for a replica at `slot` (empty disk, not started).
    fn ensure_slot(&mut self, slot: u8) {
        while self.replicas.len() <= usize::from(slot) {
            self.replicas.push(None);
            self.storage.push(Storage::default());
            self.sync.push(SyncMode::Immediate);
            self.committed.push(BTreeMap::new());
        }
    }

    /// Starts a new replica at `slot`: empty, awaiting a state transfer.
    pub fn join(&mut self, slot: u8) {
        self.ensure_slot(slot);
        let newest = self.config.memberships.last().map_or(0, |m| m.epoch);
        self.storage[usize::from(slot)].joined_epoch = newest;
        self.awaiting.insert(slot);
        self.restart(slot);
    }

    /// Installs `from`'s committed prefix on `to` (awaiting a transfer), as
    /// the driver's state transfer does, and reports it done.
    pub fn transfer(&mut self, to: u8, from: u8) {
        let commit = self.replica(from).commit();
        let cursor_tail = self.replica(from).cursor_tail();
        let log: Vec<Msg<PrepareHeader>> =
            self.storage[usize::from(from)].log[..commit as usize].to_vec();
        let head = log.last().map(|prepare| *prepare.header());
        let recent: Vec<PrepareHeader> = log.iter().map(|prepare| *prepare.header()).collect();
        let client_table = self.replica(from).client_table().encode();
        let history_starts = self.replica(from).durable_state().history_starts.clone();
        let cursor_events =
            self.storage[usize::from(from)].cursor_events[..cursor_tail as usize].to_vec();
        let storage = &mut self.storage[usize::from(to)];
        storage.log = log;
        storage.durable_op = commit;
        storage.cursor_tail = cursor_tail;
        storage.cursor_durable = cursor_tail;
        storage.cursor_events = cursor_events;
        // The install writes the superblock with the log (as the partition's
        // does): committed through the prefix, unsettled until a view is adopted.
        let mut state = storage.state.clone().unwrap_or_default();
        state.commit = commit;
        state.log_unsettled = true;
        state.client_table = client_table.clone().into();
        storage.state = Some(state);
        self.awaiting.remove(&to);
        let mut effects = Effects::new();
        self.replicas[usize::from(to)]
            .as_mut()
            .expect("up")
            .on_state_transfer_done(
                head,
                cursor_tail,
                &recent,
                &client_table,
                &history_starts,
                &mut effects,
            );
        self.execute(to, effects);
    }

    /// Asserts the cursor logs of every live replica agree wherever two of
    /// them both hold an event: each is a prefix of the longest.
    pub fn assert_cursor_logs_agree(&self) {
        let live: Vec<u8> = (0..self.count()).filter(|index| self.up(*index)).collect();
        for a in &live {
            for b in &live {
                let left = &self.storage[usize::from(*a)].cursor_events;
                let right = &self.storage[usize::from(*b)].cursor_events;
                let common = left.len().min(right.len());
                assert_eq!(
                    left[..common],
                    right[..common],
                    "cursor logs of replicas {a} and {b} differ below {common}"
                );
            }
        }
    }

    /// Whether `replica` has ever sent a message of `command` since the mark.
    pub fn sent_prepare_ok(&self, from: u8) -> bool {
        self.network
            .iter()
            .any(|(sender, _, message)| *sender == from && message.command() == Command::PrepareOk)
    }
}

/// A cursor request's envelope from `client`.
fn cursor_request(client: u128, request: u64, operation: Operation) -> Msg<RequestHeader> {
    let mut header = RequestHeader::new(CLUSTER, GROUP, ViewId::new(0, 0), 0);
    header.client.set(client);
    header.request.set(request);
    header.operation = operation as u8;
    Msg::new(header, Bytes::new())
}
